"""From a failure to what the runtime did (issue #36): ``ctxspec replay`` takes a scenario, a
vector, a case ID or a shipped example and runs it on any driver, beside the reference's run
with ``--compare``; every failure cites the requirement its own check names and prints the
command that replays it; ``-v`` shows the failing trace; every replay command the docs print
runs."""

import ast
import inspect
import json
import re
import shlex
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

from ctxspec.cli import main
from ctxspec.conformance.case import Case
from ctxspec.conformance.cases import CASES, by_id
from ctxspec.conformance.driver import ReferenceDriver
from ctxspec.conformance.harness import CaseResult, scenario_trace
from ctxspec.conformance.report_html import render_report
from ctxspec.conformance.verdicts import own_check

ROOT = Path(__file__).resolve().parent.parent
Trace = list[dict[str, Any]]


def _invoke(*args: str) -> tuple[int, str]:
    outcome = CliRunner().invoke(main, list(args))
    return outcome.exit_code, outcome.output


# --- what replay takes ---------------------------------------------------------------------


def test_replay_takes_a_vector_a_case_id_and_an_example_alike() -> None:
    # A vector wraps its scenario (before: SCENARIO_INVALID … scenario.expected, exit 2).
    runs = {what: _invoke("replay", *what) for what in (
        ("spec/vectors/ROW-01.json",), ("ROW-01",), ("--example", "supplements-across-runs"),
        ("docs/examples/supplements-across-runs.json",))}
    assert {code for code, _ in runs.values()} == {0}, runs
    # One scenario four ways: the same timeline after the heading line.
    timelines = {tuple(output.splitlines()[1:]) for _, output in runs.values()}
    assert len(timelines) == 1 and len(next(iter(timelines))) > 20


@pytest.mark.parametrize(("args", "words"), [
    (("NO-SUCH-CASE",), "no conformance case NO-SUCH-CASE"),
    (("--example", "nope"), "supplements-across-runs"),
    (("missing/scenario.json",), "no such file or conformance case"),
    (("ROW-01", "--example", "tool-batch-hook"), "give a SCENARIO, VECTOR or CASE"),
    (("ROW-01", "--compare"), "--compare compares a --driver or --stdio runtime"),
])
def test_a_target_replay_cannot_find_is_a_usage_error(args: tuple[str, ...], words: str) -> None:
    code, output = _invoke("replay", *args)
    assert code == 2 and words in output, output


# --- a check cites its own requirement -------------------------------------------------------


def _reference(case_id: str) -> tuple[Case, Trace]:
    [case] = by_id([case_id])
    return case, scenario_trace(ReferenceDriver(), case.scenario)


def _no_carried(trace: Trace) -> None:
    for event in trace:
        if event["kind"] == "delivery" and event["state"] == "carried":
            event["state"] = "delivered"


def _no_outcome(trace: Trace) -> None:
    last = [e for e in trace if e["kind"] == "model_request"][-1]
    last["view"]["messages"] = [m for m in last["view"]["messages"] if m["kind"] != "outcome"]


def _first_not_delivered(trace: Trace) -> None:
    [e for e in trace if e["kind"] == "delivery"][2]["state"] = "pending"


def _fifth_run(trace: Trace) -> None:
    started = next(e for e in trace if e["kind"] == "client_event"
                   and e["event"] == "run_started")
    trace.append({**started, "detail": "run 5"})


@pytest.mark.parametrize(("case_id", "damage", "cited"), [
    # The three failures issue #36 names: each cites the rule its broken check checks.
    ("ROW-01", _no_carried, "CTX-5.14"),  # before: CTX-4.4, the case's first
    ("ROW-02", _no_outcome, "CTX-4.6"),  # before: CTX-2.2
    ("ROW-12", _first_not_delivered, "CTX-5.17"),  # before: CTX-2.29
    # A check that names no requirement cites the case's first.
    ("ROW-02", _fifth_run, "CTX-2.2"),
])
def test_a_failure_cites_the_requirement_its_check_names(
        case_id: str, damage: Callable[[Trace], None], cited: str) -> None:
    case, trace = _reference(case_id)
    assert own_check(case, trace, None)[0] == "passed"
    damage(trace)
    status, detail, requirement = own_check(case, trace, None)
    assert (status, requirement) == ("failed", cited), detail
    assert detail.startswith(f"{cited}: ") and cited in case.requirements


def _cited_in(function: Callable[..., Any]) -> list[str]:
    """The requirement IDs a check function's source names as ``cites=``."""
    try:
        source = textwrap.dedent(inspect.getsource(function))
    except (OSError, TypeError):  # a built-in or a lambda inside an expression
        return []
    return [keyword.value.value for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Call) for keyword in node.keywords
            if keyword.arg == "cites" and isinstance(keyword.value, ast.Constant)
            and isinstance(keyword.value.value, str)]


def test_every_requirement_a_check_cites_is_one_of_its_cases() -> None:
    """A cited requirement outside the case's list would be counted nowhere (`ctxspec
    trace`); the case lists it too."""
    cited = {case.id: _cited_in(case.check) for case in CASES}
    assert sum(map(len, cited.values())) >= 8  # the §12 rows' citations are found
    wrong = {case.id: [r for r in cited[case.id] if r not in case.requirements]
             for case in CASES if any(r not in case.requirements for r in cited[case.id])}
    assert not wrong, wrong


# --- a failure's trace and its command -------------------------------------------------------


class NoOutcomes(ReferenceDriver):
    """The reference with every outcome message left out of what it says it sent: ROW-02
    fails on its check of Run 1's end state (CTX-4.6)."""

    def trace(self) -> Trace:
        events: Trace = super().trace()
        for event in events:
            if event["kind"] == "model_request":
                event["view"]["messages"] = [m for m in event["view"]["messages"]
                                             if m["kind"] != "outcome"]
        return events


DRIVER = "tests.test_replay:NoOutcomes"


def test_verbose_shows_the_failing_trace_and_the_command_that_replays_it() -> None:
    code, output = _invoke("conformance", "--driver", DRIVER, "--case", "ROW-02", "-v",
                           "--jobs", "1")
    assert code == 1, output
    assert f"replay: ctxspec replay ROW-02 --driver {DRIVER} --compare --html ROW-02.html" \
        in output
    # ROW-02's scenario: q1 and five supplements, then q2, q3, q4 each after an answer; the
    # fourth request, without its outcomes: sys, q1, s1…s5, a1, q2, a2, q3, a3, q4.
    expected = ["sys", "q1", "s1", "s2", "s3", "s4", "s5", "a1", "q2", "a2", "q3", "a3", "q4"]
    start = output.index("request 4 (business, attempt 1): I=")
    shown = [line.split()[-1] for line in output[start:].splitlines()[1:len(expected) + 1]]
    assert shown == expected, output[start:]
    assert "endings: run 1 succeeded, run 2 succeeded, run 3 succeeded, run 4 succeeded" \
        in output


def test_json_carries_the_cited_requirement_the_command_and_on_request_the_trace() -> None:
    code, output = _invoke("conformance", "--driver", DRIVER, "--case", "ROW-02", "--json",
                           "--traces", "--jobs", "1")
    assert code == 1
    [entry] = json.loads(output)["cases"]
    assert entry["requirement"] == "CTX-4.6" and entry["replay"].startswith(
        "ctxspec replay ROW-02 --driver")
    requests = [e for e in entry["trace"]["events"] if e["kind"] == "model_request"]
    assert len(requests) == 4
    _, plain = _invoke("conformance", "--driver", DRIVER, "--case", "ROW-02", "--json",
                       "--jobs", "1")
    assert "trace" not in json.loads(plain)["cases"][0]


def test_the_printed_command_shows_the_difference_beside_the_reference(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    code, output = _invoke(*shlex.split(
        f"ctxspec replay ROW-02 --driver {DRIVER} --compare --html ROW-02.html")[1:])
    assert code == 0, output
    assert "request 4: the runtime does not send outcome: run 1 succeeded" in output
    page = (tmp_path / "ROW-02.html").read_text("utf-8")
    assert "request 4: the runtime does not send outcome: run 1 succeeded" in page
    assert page.count("<iframe") == 2


def test_the_report_page_opens_with_each_failure_its_rule_and_command() -> None:
    case, trace = _reference("ROW-02")
    _no_outcome(trace)
    _, detail, requirement = own_check(case, trace, None)
    [passing] = by_id(["ROW-13"])
    page = render_report([CaseResult(passing, "passed", "", 0.1),
                          CaseResult(case, "failed", detail, 0.1, requirement=requirement)],
                         DRIVER, {}, 0.2, {"ROW-02": "the runtime drops end states"})
    verdict = re.search(r'<p id="verdict"[^>]*>(.*?)</p>', page)
    assert verdict is not None and '<a href="#failures">1 failed</a>' in verdict.group(1)
    failures = page.index('<ul id="failures">')
    assert failures < page.index('id="facts"') < page.index('id="by-source"')
    item = page[failures:page.index("</ul>", failures)]
    assert "CTX-4.6: For each older Run" in item and "Why: the runtime drops end states" in item
    assert f"ctxspec replay ROW-02 --driver {DRIVER} --compare --html ROW-02.html" in item
    assert "§12 row 2: five supplements in one Run" in item  # the row named
    assert "<th>§12 row 2: five supplements in one Run</th>" in page


# --- every replay command the docs print runs --------------------------------------------------

PLACEHOLDERS = {"FILE", "SCENARIO.json", "ID", "/tmp/ctxspec-review.json"}
"""Targets the docs write as a placeholder (or a file an earlier block of a guide writes, which
tests/test_guides.py runs in order); a synopsis (a word with ``[``) is no command either."""


def printed_commands() -> list[str]:
    """Every ``ctxspec replay …`` command the docs and the README print with a target."""
    found: set[str] = set()
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        text = page.read_text("utf-8")
        for command in [*re.findall(r"`(ctxspec replay [^`]+)`", text),
                        *re.findall(r"^(ctxspec replay [^\n`]+)$", text, flags=re.MULTILINE)]:
            words = shlex.split(command.split(" > ")[0].split(" | ")[0])
            targets = [w for w in words[2:] if not w.startswith("-")]
            if words[2:] and targets and not PLACEHOLDERS & set(words) \
                    and not any("[" in w or "|" in w for w in words):
                found.add(" ".join(shlex.quote(w) for w in words))
    return sorted(found)


ADAPTER_RUNTIMES = ("--driver ctxspec.adapters.", "--stdio 'node adapters/")
"""How a command names one of the shipped adapters' runtimes (a Python driver or a stdio one)."""


def _adapter(command: str) -> bool:
    return any(runtime in command for runtime in ADAPTER_RUNTIMES)


def _runtime(command: str) -> str:
    words = shlex.split(command)
    option = "--driver" if "--driver" in words else "--stdio"
    return words[words.index(option) + 1]


def _run_printed(command: str, tmp_path: Path) -> None:
    words = shlex.split(command)[1:]
    if "--html" in words:  # the page goes to the test's folder, not the checkout
        at = words.index("--html") + 1
        words[at] = str(tmp_path / Path(words[at]).name)
    code, output = _invoke(*words)
    assert code == 0, f"{command}: exit {code}\n{output[-2000:]}"


def test_the_docs_print_replay_commands_for_failures_and_examples() -> None:
    commands = printed_commands()
    assert sum(map(_adapter, commands)) >= 50  # the compatibility pages' failures
    assert any("docs/examples/" in c for c in commands)
    assert not [c for c in commands if "spec/vectors/" in c and "--driver" in c]


def test_every_printed_replay_command_parses_and_names_a_target_that_exists() -> None:
    """The fast half of "every printed command runs", for the inner loop: each command's options
    are the command's own and its target a case, a file of the checkout or a shipped example.
    Running them all is the slow tier's (the adapters' commands start a framework each)."""
    ids = {case.id for case in CASES}
    command = main.get_command(click.Context(main), "replay")
    assert command is not None
    for printed in printed_commands():
        words = shlex.split(printed)[2:]
        context = command.make_context("replay", list(words))  # a wrong option raises here
        target, example = context.params["target"], context.params["example"]
        if example is not None:
            assert (ROOT / "docs/examples" / f"{example}.json").is_file(), printed
        elif not (ROOT / target).is_file():
            assert target in ids, f"{printed}: {target} is no case ID and no file"


@pytest.mark.parametrize("command", [c for c in printed_commands() if not _adapter(c)])
def test_every_replay_command_the_docs_print_runs(command: str, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    _run_printed(command, tmp_path)


def _one_per_source(runtime: str) -> list[str]:
    """Of a runtime's printed commands, the first of each case source (§12 rows, worked
    examples, each supplementary section, the crash matrix …): the pages print 607 commands,
    each re-running a case the report's drift test already runs on that runtime, so the slow
    tier runs one of each source per runtime and the default tier parses them all."""
    from ctxspec.conformance.cases import by_id

    chosen: dict[str, str] = {}
    for command in printed_commands():
        if _adapter(command) and _runtime(command) == runtime:
            [case] = by_id([shlex.split(command)[2]])
            chosen.setdefault(case.source, command)
    return list(chosen.values())


@pytest.mark.slow
@pytest.mark.parametrize("runtime", sorted({_runtime(c) for c in printed_commands()
                                            if _adapter(c)}))
def test_the_adapter_replay_commands_the_compatibility_pages_print_run(
        runtime: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    commands = _one_per_source(runtime)
    assert commands, runtime
    for command in commands:
        _run_printed(command, tmp_path)


def test_a_runtime_trace_with_its_own_ids_and_no_commit_names_is_drawn() -> None:
    """The page and the timeline read two things the trace contract does not promise: ids that
    are UUIDs and a takeover's ``commit`` (the contract asks its ``phase``). A runtime's trace
    without them is drawn all the same (LangChain's S10-TAKEOVER-BUDGET broke both)."""
    from ctxspec.conformance.replay_page import replay_html
    from ctxspec.conformance.replays import page_ready, shown
    from ctxspec.conformance.scenario import parse_scenario
    from ctxspec.conformance.timeline import timeline

    case, trace = _reference("ROW-09")
    for event in trace:
        if event["kind"] == "restarted":
            event.pop("commit", None)
        for message in event.get("view", {}).get("messages", ()):
            message["record_id"] = message["record_id"] and f"rt-{message['record_id']}"
    assert any(e["kind"] == "restarted" for e in trace)
    died = [line for line in timeline(shown(trace)) if "the process died" in line]
    assert died and all("phase " in line for line in died)
    page = replay_html(parse_scenario(case.scenario), page_ready(trace))
    assert page.rstrip().endswith("</html>") and "phase " in page


def test_a_stdio_runtime_replays_beside_the_reference_with_its_own_command() -> None:
    import sys

    from ctxspec.conformance.replays import replay_command

    serve = f"{sys.executable} -m ctxspec stdio-driver"
    command = replay_command("ROW-02", f"stdio: {serve}")
    assert command == (f"ctxspec replay ROW-02 --stdio '{serve}' --compare --html ROW-02.html")
    code, output = _invoke("replay", "ROW-02", "--stdio", serve, "--compare")
    # The reference served over stdio is the reference: nothing to list.
    assert code == 0 and "0 differences from the reference" in output, output
