"""The conformance harness is honest: every case passes on the reference driver, a driver that
lacks a capability gets `unsupported` (never `passed`), a driver that misbehaves fails the case
that watches for it, and a broken driver is an `error`.

The plumbing (CLI, plugin, reports, stdio, vectors) runs on a few cases (``SOME``) in the
default tier and on every case in the slow tier (the plugin collects every case there, its
runs being those of the per-case test); the crash matrix's cases run in
tests/test_crash_matrix.py."""

import io
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import jsonschema
import pytest
from click.testing import CliRunner

from ctxspec.catalogue import load_catalogue
from ctxspec.cli import main
from ctxspec.commands.options import workers_for
from ctxspec.conformance.capabilities import COARSE, declared
from ctxspec.conformance.case import Case
from ctxspec.conformance.cases import CASES, OUR_DOCUMENTS, by_id
from ctxspec.conformance.crash_matrix import CRASH_MATRIX
from ctxspec.conformance.driver import CAPABILITIES, ReferenceDriver
from ctxspec.conformance.harness import run_case, run_suite, scenario_trace
from ctxspec.conformance.phases import CRASH_CAPABILITIES
from ctxspec.conformance.stdio import PROTOCOL, VERSION, serve
from ctxspec.conformance.universal import INVARIANTS
from ctxspec.conformance.vectors import VECTORS, drifted, generate, replay
from ctxspec.reference.contracts import NodeCheckpoint, NodeStage
from ctxspec.reference.runtime.node_driver import NodeDriver

ROOT = Path(__file__).resolve().parent.parent
CRASHES = {case.id for case in CRASH_MATRIX}
REPORT_LINE = json.loads((ROOT / "spec" / "schemas" / "ConformanceReportLine.json").read_text())
jsonschema.validators.validator_for(REPORT_LINE).check_schema(REPORT_LINE)
REPORT_LINE_CHECK = jsonschema.validators.validator_for(REPORT_LINE)(REPORT_LINE)
"""Built once: ``jsonschema.validate`` checks the schema and builds a validator on every call
(about 4 ms), and a whole-suite report has a line per case."""

PROBED = declared(CAPABILITIES) - set(COARSE)
"""What the reference declares and probing confirms: each fine capability and each crash phase
(crash_points declares them all, and each has its own probe)."""
"""The capabilities the reference declares as its probes see them (coarse names by their
parts; a crash at any phase by the crash_points probe)."""

SOME = ("ROW-02", "ROW-21", "BAD-BUDGET", "EX8-ROW6", "CRASH-TOOLS-REQUEST_FROZEN-1-AFTER",
        "CRASH-CHUNKS-RAW_ANSWER_SAVED-1-BEFORE")
"""The cases the plumbing tests (CLI, plugin, reports, stdio, vectors) run in the default tier:
a §12 row, a crash row, a refusal, a worked example and two of the crash matrix. The slow tier
runs the same tests on every case."""
CHOSEN = pytest.mark.parametrize("chosen", [
    pytest.param(by_id(SOME), id="some"),
    pytest.param(CASES, id="every", marks=pytest.mark.slow)])


def case_args(chosen: tuple[Case, ...]) -> list[str]:
    """``--case`` for each chosen case, or nothing for the whole suite."""
    return [] if chosen == CASES else [arg for c in chosen for arg in ("--case", c.id)]


@pytest.mark.parametrize("case", [c for c in CASES if c.id not in CRASHES], ids=lambda c: c.id)
def test_every_case_passes_on_the_reference(case: Any) -> None:
    # The crash matrix's cases run in tests/test_crash_matrix.py, with the store checked too.
    result = run_case(case, ReferenceDriver)
    assert (result.status, result.detail) == ("passed", "")


class WithoutCrashes(ReferenceDriver):
    capabilities = ReferenceDriver.capabilities - {"crash_points"} - CRASH_CAPABILITIES


class DropsThirdSupplement(ReferenceDriver):
    """A realistic bug: one supplement of a busy round is lost."""

    def supplement(self, text: str) -> None:
        if text != "s3":
            super().supplement(text)


class RunsToolsTwice(ReferenceDriver):
    """Reports every tool execution twice, as a runtime that re-runs saved calls would."""

    def trace(self) -> list[dict[str, Any]]:
        events = super().trace()
        return [copy for event in events
                for copy in ([event, event] if event["kind"] == "tool_executed" else [event])]


def test_every_case_names_known_requirements_and_a_unique_id() -> None:
    known = {r.id for r in load_catalogue()}
    assert len({c.id for c in CASES}) == len(CASES)
    for case in CASES:
        assert bool(case.requirements) == (case.source != OUR_DOCUMENTS), case.id
        assert set(case.requirements) <= known, case.id


class AcceptsAnyBudget(ReferenceDriver):
    """Repairs an impossible budget silently instead of refusing it."""

    def configure(self, scenario: Any, ports: Any) -> None:
        agent = scenario.agent.model_copy(update={"output_reserve": None})
        super().configure(scenario.model_copy(update={"agent": agent}), ports)


def vectors_of(chosen: tuple[Case, ...], directory: Path) -> Path:
    """The committed vectors of the chosen cases, copied into ``directory`` (or the committed
    directory itself for the whole suite)."""
    if chosen == CASES:
        return VECTORS
    directory.mkdir(exist_ok=True)
    for case in chosen:
        if (VECTORS / f"{case.id}.json").is_file():
            (directory / f"{case.id}.json").write_bytes((VECTORS / f"{case.id}.json").read_bytes())
    return directory


def test_a_driver_that_accepts_an_impossible_budget_fails_bad_budget(tmp_path: Path) -> None:
    # Only BAD-BUDGET's vector is judged: replaying the others on this driver shows nothing.
    [case] = by_id(["BAD-BUDGET"])
    assert run_case(case, ReferenceDriver).status == "passed"
    result = run_case(case, AcceptsAnyBudget)
    assert (result.status, result.detail.splitlines()[1:]) == (
        "failed", ["the driver accepted a scenario it must refuse with "
                   "BUDGET_CONFIGURATION_INVALID"])
    assert result.detail.startswith("CTX-7.")  # the rule: a budget that cannot be resolved
    replayed = {r.name: r for r in replay(vectors_of((case,), tmp_path), AcceptsAnyBudget)}
    assert replayed["BAD-BUDGET.json"].status == "failed"


@pytest.mark.parametrize("case", [c for c in CASES if c.refusal], ids=lambda c: c.id)
def test_a_refused_document_opens_no_session(case: Any) -> None:
    # Refused before anything runs: no runtime, and no row in any table of the store (a
    # budget is resolved when the runtime is built, after its empty store).
    driver = ReferenceDriver()
    with pytest.raises(Exception, match=str(case.refusal)):
        scenario_trace(driver, case.scenario)
    assert driver.runtime is None
    store = getattr(driver, "store", None)
    if store is not None:
        tables = [row["name"] for row in store.query(
            "SELECT name FROM sqlite_master WHERE type = 'table'")]
        assert tables and all(store.count(table) == 0 for table in tables)


@CHOSEN
def test_a_missing_capability_is_unsupported_never_passed(chosen: tuple[Case, ...]) -> None:
    results = {c.id: run_case(c, WithoutCrashes) for c in chosen}
    for case in chosen:
        expected = "unsupported" if case.needs & {*CRASH_CAPABILITIES, "crash_points"} \
            else "passed"
        assert results[case.id].status == expected, case.id
    assert results["ROW-21"].detail == "the driver lacks crash:raw_answer_saved"


def test_a_lost_supplement_fails_row2_naming_what_differs() -> None:
    [row2] = by_id(["ROW-02"])
    result = run_case(row2, DropsThirdSupplement)
    assert result.status == "failed"
    rule, what = result.detail.split("\n", 1)
    # The requirement its check names (supplements in older history are never lost) and its
    # statement.
    assert rule.startswith("CTX-4.15: ") and result.requirement == "CTX-4.15"
    assert what.startswith("Run 1's inputs and result as the fourth request shows them: "
                           "expected")
    assert "'s3'" in what


def test_a_repeated_tool_call_fails_the_crash_rows() -> None:
    for case in by_id(["ROW-21", "ROW-22", "ROW-23"]):
        result = run_case(case, RunsToolsTwice)
        assert result.status == "failed"
        assert result.detail.splitlines()[1].startswith(
            "tools executed: expected ['read', 'write']")


@pytest.mark.parametrize("matrix", [
    pytest.param([c for c in CRASH_MATRIX if "-RAW_ANSWER_SAVED-1-" in c.id], id="first-saves"),
    pytest.param([c for c in CRASH_MATRIX if "-RAW_ANSWER_SAVED-" in c.id], id="every-save",
                 marks=pytest.mark.slow)])
def test_a_runtime_that_re_asks_saved_answers_fails_the_crash_matrix(
        matrix: list[Case], monkeypatch: pytest.MonkeyPatch) -> None:
    # A realistic recovery bug: a takeover ignores the saved raw result and sends the frozen
    # request again. Only crash points after a saved answer can show it, and they must.
    effective_result = NodeDriver.effective_result

    def forgetful(driver: NodeDriver, run: Any, position: NodeCheckpoint) -> Any:
        if position.operation_id not in driver.answers:  # a takeover's: its answer is stored
            return driver.ask_model(run, position.model_copy(
                update={"stage": NodeStage.FROZEN, "first_output": True}))
        return effective_result(driver, run, position)

    monkeypatch.setattr(NodeDriver, "effective_result", forgetful)
    # As a suite run: the uncrashed baselines (no takeover in them) run once, not per case.
    failed = {r.case.id: r.detail for r in run_suite(matrix, ReferenceDriver)
              if r.status == "failed"}
    for short in ("TOOLS", "CHUNKS", "RUNS", "PLANNER"):
        assert failed[f"CRASH-{short}-RAW_ANSWER_SAVED-1-AFTER"].splitlines()[1].startswith(
            "requests asked again after the restart: expected 0, saw 1")
    assert not any("-BEFORE" in i and "RAW_ANSWER_SAVED" in i for i in failed)


def test_a_driver_that_cannot_be_built_is_an_error() -> None:
    def broken() -> ReferenceDriver:
        raise OSError("no runtime here")

    [row2] = by_id(["ROW-02"])
    result = run_case(row2, broken)
    assert (result.status, result.detail) == ("error",
                                              "driver factory failed: OSError('no runtime here')")


@CHOSEN
def test_the_cli_prints_a_json_report_and_exits_zero_when_all_pass(
        chosen: tuple[Case, ...], tmp_path: Path) -> None:
    # The same run writes the JSON Lines and JUnit reports: on every case (slow tier) this is
    # the whole-suite run of both, each line checked against its schema.
    report_file, junit = tmp_path / "report.jsonl", tmp_path / "junit.xml"
    outcome = CliRunner().invoke(main, ["conformance", "--json", "--report", str(report_file),
                                        "--junit", str(junit), *case_args(chosen)])
    assert outcome.exit_code == 0, outcome.output
    report = json.loads(outcome.output)
    assert report["driver"] == "reference"
    assert [c["id"] for c in report["cases"]] == [c.id for c in chosen]
    assert report["summary"] == {"passed": len(chosen), "failed": 0, "unsupported": 0,
                                 "error": 0}
    assert set(report["cases"][0]) == {"id", "title", "source", "requirements", "status",
                                       "detail", "universal", "requirement", "replay"}
    assert (report["cases"][0]["requirement"], report["cases"][0]["replay"]) == ("", "")
    # The universal checks, counted per invariant over every case and probe: none on the
    # reference, each with its requirement and the design's sentence.
    assert [(u["id"], u["violations"]) for u in report["universal"]] == [
        (i.id, 0) for i in INVARIANTS]
    assert all(u["requirements"] and u["sentence"] for u in report["universal"])
    lines = [json.loads(line) for line in report_file.read_text("utf-8").splitlines()]
    assert [(line["id"], line["status"]) for line in lines] == [
        (c.id, "passed") for c in chosen]
    for line in lines:
        REPORT_LINE_CHECK.validate(line)
    suite = ElementTree.parse(junit).getroot()
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == \
        (str(len(chosen)), "0", "0")


def test_the_terminal_table_groups_cases_by_source_and_lists_only_what_did_not_pass() -> None:
    outcome = CliRunner().invoke(main, ["conformance", "--case", "ROW-04-BELOW", "--case",
                                        "ROW-04-AT", "--case", "ROW-02", "--driver",
                                        "tests.test_conformance:DropsThirdSupplement"])
    assert outcome.exit_code == 1
    capabilities, *lines = outcome.output.splitlines()
    # The probes' verdict on what the driver declares; the failed case, with what differs;
    # then one row per source in suite order.
    assert capabilities == f"capabilities: {len(PROBED)} declared, " \
        f"{len(PROBED)} confirmed by probing"
    assert lines[0].split()[:2] == ["ROW-02", "failed"]
    # The detail: the rule, then what differs (a diff of the messages, long texts elided).
    header = next(i for i, line in enumerate(lines) if line.startswith("source "))
    assert lines[1].strip().startswith("CTX-4.15: ")
    assert lines[2].strip().startswith("Run 1's inputs and result as the fourth request shows "
                                       "them: expected")
    assert "'s3'" in "\n".join(lines[2:header]) and header - 1 <= 26
    # Then the command that shows the case's run beside the reference's (issue #36).
    assert lines[header - 1].strip() == (
        "replay: ctxspec replay ROW-02 --driver tests.test_conformance:DropsThirdSupplement "
        "--compare --html ROW-02.html")
    assert lines[header].split() == ["source", "cases", "passed", "failed", "unsupported",
                                     "error", "time"]
    assert [line.split()[:8] for line in lines[header + 1:header + 3]] == [
        ["§12", "row", "4", "2", "2", "0", "0", "0"],
        ["§12", "row", "2", "1", "0", "1", "0", "0"]]
    # Then the universal checks, one row per invariant with its violations (none here).
    universal = header + 3
    assert lines[universal].split() == ["universal", "check", "requirement", "violations",
                                        "in", "skipped"]
    assert [line.split()[0] for line in lines[universal + 1:universal + 1 + len(INVARIANTS)]] \
        == [i.id for i in INVARIANTS]
    last = universal + 1 + len(INVARIANTS)
    assert lines[last].startswith("3 cases in ") and lines[last].endswith(
        "2 passed, 1 failed, 0 unsupported, 0 error")
    assert len(lines) == last + 1  # passed cases get no line of their own without --verbose


@pytest.mark.parametrize("driver", [
    ["--driver", "tests.test_conformance:DropsThirdSupplement"],
    pytest.param(["--stdio", f"{sys.executable} -m ctxspec stdio-driver"],
                 marks=pytest.mark.slow)], ids=["in-process", "stdio"])
def test_jobs_run_the_cases_in_worker_processes_with_the_same_results(
        driver: list[str]) -> None:
    # --jobs N (issue #20): the same cases, statuses and failure details in the same order as
    # one process, a failing case included; each worker has its own driver.
    ids = ("ROW-04-BELOW", "ROW-02", "ROW-04-AT", "S7-PROVIDER-REFUSES")
    args = ["conformance", "--json", *driver, *(a for i in ids for a in ("--case", i))]
    serial = CliRunner().invoke(main, args)
    parallel = CliRunner().invoke(main, [*args, "--jobs", "2"])
    assert parallel.exit_code == serial.exit_code, parallel.output
    one, many = json.loads(serial.output), json.loads(parallel.output)
    assert [c["id"] for c in many["cases"]] == list(ids)
    assert many["cases"] == one["cases"] and many["summary"] == one["summary"]


@pytest.mark.parametrize(("jobs", "cores", "cases", "workers"), [
    (3, 2, 1, 3),  # a number given is taken as it is
    (None, 2, 547, 2),  # the whole suite on two cores: one worker per core
    (None, 8, 547, 5),  # at most one worker per 100 cases
    (None, 2, 199, 1),  # a short run stays in this process
    (None, 2, 1, 1),
    (None, 1, 547, 1),
])
def test_jobs_auto_uses_every_core_on_a_long_run_only(
        monkeypatch: pytest.MonkeyPatch, jobs: int | None, cores: int, cases: int,
        workers: int) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cores)), raising=False)
    assert workers_for(jobs, cases) == workers


def test_a_bad_jobs_value_is_refused_naming_the_option() -> None:
    outcome = CliRunner().invoke(main, ["conformance", "--jobs", "0", "--case", "ROW-02"])
    assert outcome.exit_code == 2
    assert "'0' is not 'auto' or a number of worker processes from 1 to 1024" in outcome.output
    assert "--jobs" in outcome.output


def test_the_cli_exits_one_when_a_case_fails() -> None:
    outcome = CliRunner().invoke(main, ["conformance", "--case", "ROW-02", "--driver",
                                        "tests.test_conformance:DropsThirdSupplement"])
    assert outcome.exit_code == 1
    assert "ROW-02" in outcome.output and "failed" in outcome.output
    assert "1 cases in" in outcome.output and "1 failed" in outcome.output


@pytest.mark.parametrize(("args", "message"), [
    (["--case", "ROW-99"], "no conformance case ROW-99"),
    (["--driver", "nomodule"], "--driver 'nomodule': expected module:factory"),
    (["--driver", "json:nothing"], "--driver 'json:nothing': 'nothing' is not a callable of json"),
])
def test_bad_arguments_are_refused_with_a_usage_error(args: list[str], message: str) -> None:
    outcome = CliRunner().invoke(main, ["conformance", *args])
    assert outcome.exit_code == 2
    assert message in outcome.output


@dataclass(frozen=True)
class SuiteRun:
    returncode: int
    stdout: str


def _suite(pytester: pytest.Pytester | None, *args: str) -> SuiteRun:
    """``pytest --pyargs ctxspec.conformance.suite`` as a user runs it: in a new interpreter,
    or (given ``pytester``) in this one — the same plugin and cases without an interpreter's
    start. Without Hypothesis's plugin and those of the adapters' extras (langsmith, anyio):
    the suite does not use them, and importing them is most of a start (in this interpreter
    too: each in-process run imports afresh what it imported)."""
    common = ["--pyargs", "ctxspec.conformance.suite", "-q", "-p", "no:cacheprovider",
              "-n", "0", "-p", "no:hypothesispytest", "-p", "no:langsmith_plugin",
              "-p", "no:anyio", *args]
    if pytester is not None:
        inside = pytester.runpytest_inprocess(*common)
        return SuiteRun(int(inside.ret), str(inside.stdout))
    done = subprocess.run([sys.executable, "-m", "pytest", *common],
                          capture_output=True, text=True, cwd=ROOT, check=False)
    return SuiteRun(done.returncode, done.stdout)


@CHOSEN
def test_the_pytest_plugin_runs_every_case_against_the_chosen_driver(
        chosen: tuple[Case, ...], pytester: pytest.Pytester) -> None:
    # The whole suite is collected in a new interpreter: one item per case, named by its ID
    # (each case passing is test_every_case_passes_on_the_reference's; running them all again
    # through the plugin judged the same runs twice). The default tier's few cases run in
    # this interpreter. -k picks them by their test ids, "[ID]" (none is a prefix of another).
    if chosen == CASES:
        collected = _suite(None, "--collect-only")
        assert collected.returncode == 0, collected.stdout
        items = re.findall(r"::test_conformance_case\[([^\]]+)\]", collected.stdout)
        assert items == [case.id for case in CASES], "the plugin's items are not the cases"
        return
    runner = pytester
    only = ["-k", " or ".join(f"[{c.id}]" for c in chosen)]
    passed = _suite(runner, *only)
    assert passed.returncode == 0, passed.stdout
    assert f"{len(chosen)} passed" in passed.stdout
    failing = _suite(runner, *only, "--ctxspec-driver",
                     "tests.test_conformance:DropsThirdSupplement")
    assert failing.returncode == 1
    assert "test_conformance_case[ROW-02]" in failing.stdout
    assert "1 failed" in failing.stdout
    assert ("replay: ctxspec replay ROW-02 --driver tests.test_conformance:DropsThirdSupplement "
            "--compare --html ROW-02.html") in failing.stdout
    unsupported = _suite(runner, *only, "-rs", "--ctxspec-driver",
                         "tests.test_conformance:WithoutCrashes")
    assert unsupported.returncode == 0
    crash_cases = sum(bool(case.needs & CRASH_CAPABILITIES) for case in chosen)
    assert f"{crash_cases} skipped" in unsupported.stdout
    assert "unsupported: the driver lacks crash:" in unsupported.stdout


def test_the_reports_follow_their_schema_and_count_what_failed(tmp_path: Path) -> None:
    # A failing driver on a few cases; every case passing on the reference is reported by
    # the JSON test's whole-suite run above, which writes the same two reports.
    chosen = by_id(SOME)
    report, junit = tmp_path / "report.jsonl", tmp_path / "junit.xml"
    outcome = CliRunner().invoke(main, [
        "conformance", "--driver", "tests.test_conformance:DropsThirdSupplement",
        "--report", str(report), "--junit", str(junit), *case_args(chosen)])
    assert outcome.exit_code == 1
    lines = [json.loads(line) for line in report.read_text("utf-8").splitlines()]
    assert [line["id"] for line in lines] == [c.id for c in chosen]
    for line in lines:
        REPORT_LINE_CHECK.validate(line)
    assert {line["id"]: line["status"] for line in lines}["ROW-02"] == "failed"
    suite = ElementTree.parse(junit).getroot()
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == \
        (str(len(chosen)), str(sum(line["status"] == "failed" for line in lines)), "0")
    [failure] = [case for case in suite if case.find("failure") is not None]
    assert failure.get("name", "").startswith("ROW-02 ")
    assert not list(tmp_path.glob("*.partial"))  # written whole, nothing left half-done


@pytest.mark.slow  # generates every vector
def test_the_committed_vectors_match_the_cases() -> None:
    assert drifted(VECTORS, ReferenceDriver) == []


def test_the_committed_vectors_of_some_cases_match_them() -> None:
    generated = generate(ReferenceDriver, by_id(SOME))
    assert generated  # the crash matrix has no vectors (relational), the others do
    for name, text in generated.items():
        assert (VECTORS / name).read_text("utf-8") == text, f"{name} drifted: ctxspec vectors"


@CHOSEN
def test_vectors_replay_on_the_reference_and_catch_a_wrong_driver(chosen: tuple[Case, ...],
                                                                  tmp_path: Path) -> None:
    directory = vectors_of(chosen, tmp_path)
    assert {r.status for r in replay(directory, ReferenceDriver)} == {"passed"}
    # The wrong driver is judged on ROW-02's vector, the one that shows its bug.
    [wrong] = replay(vectors_of(tuple(by_id(["ROW-02"])), tmp_path / "wrong"),
                     DropsThirdSupplement)
    assert (wrong.name, wrong.status) == ("ROW-02.json", "failed")
    assert wrong.detail.startswith("model_requests differ: first difference")


def test_a_vector_the_runner_cannot_read_is_reported_never_skipped(tmp_path: Path) -> None:
    (tmp_path / "ROW-02.json").write_text((VECTORS / "ROW-02.json").read_text("utf-8"))
    (tmp_path / "broken.json").write_text("{not json")
    future = json.loads((VECTORS / "ROW-05.json").read_text("utf-8"))
    future["manifest"]["format"] = 99
    (tmp_path / "future.json").write_text(json.dumps(future))
    results = {r.name: (r.status, r.detail) for r in replay(tmp_path, ReferenceDriver)}
    assert results["ROW-02.json"] == ("passed", "")
    assert results["broken.json"][0] == "unread"
    assert results["future.json"] == ("unread", "vector format 99, this runner reads 2")
    outcome = CliRunner().invoke(main, ["vectors", "--replay", str(tmp_path)])
    assert outcome.exit_code == 1
    assert "3 vectors: 1 passed, 0 failed, 0 unsupported, 0 error, 2 unread" in outcome.output


STDIO = f"{sys.executable} -m ctxspec stdio-driver"


@CHOSEN
def test_the_whole_suite_passes_through_the_stdio_protocol(chosen: tuple[Case, ...]) -> None:
    # One runtime subprocess, in this process: the default (a worker and a runtime per core)
    # costs about 4.5 s more CPU on the whole suite and gains nothing while the test run keeps
    # every core busy. The CLI's JSON test runs the whole suite on the default; the --jobs test
    # runs workers over stdio.
    outcome = CliRunner().invoke(main, ["conformance", "--stdio", STDIO, "--json", "--jobs", "1",
                                        *case_args(chosen)])
    assert outcome.exit_code == 0, outcome.output
    report = json.loads(outcome.output)
    assert report["driver"] == f"stdio: {STDIO}"
    assert report["summary"]["passed"] == len(chosen)
    # Every capability the subprocess declares is confirmed by its probe over the protocol too.
    assert {p["capability"]: p["status"] for p in report["probes"]} == \
        dict.fromkeys(PROBED, "confirmed")


def test_a_driver_speaking_another_protocol_version_is_refused(tmp_path: Path) -> None:
    old = tmp_path / "old_driver.py"
    answer = json.dumps({"ok": True, "version": 0, "capabilities": []})
    old.write_text(f"import sys\nfor line in sys.stdin:\n    print({answer!r}, flush=True)\n")
    outcome = CliRunner().invoke(main, ["conformance", "--stdio", f"{sys.executable} {old}"])
    assert outcome.exit_code == 1
    assert "speaks stdio protocol version 0; this harness speaks 1 and 2" in outcome.output


def test_a_runtime_that_adds_fields_and_events_this_harness_does_not_know_still_passes(
        tmp_path: Path) -> None:
    # The compatibility rule of docs/stdio-protocol.md: versions only add. A runtime written
    # for a later minor revision of v1 that adds answer fields, event fields and event kinds
    # is read by this harness as before: cases read only the events and fields they know.
    newer = tmp_path / "newer_driver.py"
    newer.write_text(
        "import io, json, sys\n"
        "from ctxspec.conformance.stdio import serve\n"
        "from ctxspec.conformance.linear_trace import expanded\n"
        "for line in sys.stdin:\n"
        "    out = io.StringIO()\n"
        "    serve(iter([line]), out)\n"
        "    answer = json.loads(out.getvalue())\n"
        "    answer['runtime'] = 'newer'\n"
        "    if 'trace' in answer:  # whole views, as a driver of trace format 1 sends them\n"
        "        answer['trace'] = [{**e, 'span_id': 'x'} for e in expanded(answer['trace'])]\n"
        "        answer['trace'].append({'kind': 'gc_pause', 'ms': 3})\n"
        "    print(json.dumps(answer), flush=True)\n"
        "    if json.loads(line).get('op') == 'bye':\n"
        "        break\n")
    outcome = CliRunner().invoke(main, [
        "conformance", "--json", "--stdio", f"{sys.executable} {newer}", "--case", "ROW-02",
        "--case", "ROW-11", "--case", "EX8-ROW6", "--case", "CRASH-TOOLS-REQUEST_FROZEN-1-AFTER"])
    assert outcome.exit_code == 0, outcome.output
    assert json.loads(outcome.output)["summary"]["passed"] == 4


def test_the_stdio_server_answers_every_bad_line_and_goes_on() -> None:
    hello = {"protocol": PROTOCOL, "version": VERSION, "op": "hello"}
    lines = ["not json\n", json.dumps({**hello, "version": 7}) + "\n",
             json.dumps({**hello, "op": "dance"}) + "\n",
             json.dumps({**hello, "op": "run", "scenario": {"name": "x"}}) + "\n",
             json.dumps(hello) + "\n", json.dumps({**hello, "op": "bye"}) + "\n"]
    out = io.StringIO()
    serve(iter(lines), out)
    answers = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [a["ok"] for a in answers] == [False, False, False, False, True, True]
    assert answers[1]["error"] == f"expected protocol {PROTOCOL} version 1 or 2"
    assert answers[2]["error"].startswith("request.op: ") and "(got 'dance')" in answers[2]["error"]
    assert [a.get("code") for a in answers[:4]] == [
        "STDIO_REQUEST_INVALID", "STDIO_REQUEST_INVALID", "STDIO_REQUEST_INVALID",
        "SCENARIO_INVALID"]
    assert "scenario.scenario_version: Field required" in answers[3]["error"]
    assert answers[4]["version"] == VERSION and "crash_points" in answers[4]["capabilities"]


def test_stdio_messages_follow_their_published_schemas() -> None:
    request = json.loads((ROOT / "spec" / "schemas" / "StdioRequest.json").read_text())
    answer = json.loads((ROOT / "spec" / "schemas" / "StdioAnswer.json").read_text())
    hello = {"protocol": PROTOCOL, "version": VERSION, "op": "hello"}
    run = {**hello, "op": "run", "scenario": json.loads((VECTORS / "ROW-02.json").read_text(
        "utf-8"))["scenario"]}
    sent = [hello, run, {**hello, "op": "bye"}]
    for message in sent:
        jsonschema.validate(message, request)
    out = io.StringIO()
    serve(iter(json.dumps(m) + "\n" for m in sent), out)
    answers = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [a["ok"] for a in answers] == [True, True, True]
    for message in answers:
        jsonschema.validate(message, answer)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**hello, "version": 3}, request)
