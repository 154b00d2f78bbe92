"""The JavaScript runtime of tests/stdio_runtime_js/ under the suite, over the stdio protocol
(docs/stdio-protocol.md): a runtime in another language than Python, written from the docs and
spec/ alone, passes every case it runs — a crash case through a real death and restart
included — and what it logs reaches the report.

It needs Node.js 20 or later on PATH; without it these tests fail saying so (CI has it)."""

import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from ctxspec.cli import main
from ctxspec.conformance.capabilities import declared
from ctxspec.conformance.cases import by_id
from ctxspec.conformance.stdio import StdioDriver

ROOT = Path(__file__).resolve().parent.parent
RUNTIME = ROOT / "tests" / "stdio_runtime_js" / "runtime.js"
ESTIMATORS = ROOT / "adapters" / "estimators-js"
"""The estimators both JavaScript runtimes use (this one and adapters/langchain-js/)."""
SOME = ("ROW-02", "S6-RESULT-READ", "EX7-BUDGET", "S10-TAKEOVER-BUDGET", "BAD-SCENARIO-FIELD",
        "ROW-21")
"""The default tier's cases: a §12 row, a preview read, the §7 example's exact budget (the
injected estimator), the crash case, a refusal and one it cannot run (ROW-21 needs
compaction)."""


def node(which: Callable[[str], str | None] = shutil.which) -> str:
    """The node executable, version 20 or later; the test fails saying how to get it."""
    found = which("node")
    if found is None:
        pytest.fail("Node.js is not installed (no `node` on PATH): install Node.js 20 or later "
                    "to run the JavaScript stdio runtime's tests (CI machines have it)")
    version = subprocess.run([found, "--version"], capture_output=True, text=True, check=False)
    major = re.match(r"v(\d+)\.", version.stdout)
    if major is None or int(major.group(1)) < 20:
        pytest.fail(f"Node.js 20 or later is needed; {found} is {version.stdout.strip()!r}")
    return found


def command() -> str:
    return f"{node()} {RUNTIME}"


def conformance(*args: str) -> tuple[int, str]:
    outcome = CliRunner().invoke(main, ["conformance", "--stdio", command(), *args])
    return outcome.exit_code, outcome.output


def capabilities() -> frozenset[str]:
    with StdioDriver(command()) as driver:
        return driver.capabilities


def test_missing_node_fails_the_test_saying_to_install_it() -> None:
    with pytest.raises(pytest.fail.Exception, match=r"install Node\.js 20 or later"):
        node(lambda name: None)


@pytest.mark.parametrize("chosen", [pytest.param(SOME, id="some"),
                                    pytest.param(None, id="every", marks=pytest.mark.slow)])
def test_the_js_runtime_passes_every_case_it_runs(chosen: tuple[str, ...] | None) -> None:
    code, output = conformance("--json", "--jobs", "1",
                               *[arg for case in chosen or () for arg in ("--case", case)])
    report = json.loads(output)
    assert code == 0, output[-3000:]
    # Which cases it can run, computed apart from the run: those needing only what it declares.
    has = declared(capabilities())
    runnable = {case.id for case in by_id(list(chosen) if chosen else None) if case.needs <= has}
    statuses = {case["id"]: case["status"] for case in report["cases"]}
    assert {i for i, status in statuses.items() if status != "unsupported"} == runnable
    assert {statuses[i] for i in runnable} == {"passed"}, {
        case["id"]: case["detail"] for case in report["cases"] if case["id"] in runnable
        and case["status"] != "passed"}
    assert "S10-TAKEOVER-BUDGET" in runnable and (chosen is None or "ROW-21" not in runnable)
    assert {p["capability"]: p["status"] for p in report["probes"]} == dict.fromkeys(
        sorted(capabilities()), "confirmed")
    if chosen is None:  # the whole suite: a modest runtime, but a real one
        assert report["summary"]["passed"] >= 38, report["summary"]


def test_its_estimators_reproduce_every_vector_of_the_spec() -> None:
    # chars, bytes and content written in JavaScript from the guide's rules alone give every
    # count (and, for content, the scenario texts in order) of spec/estimators.json.
    vectors = json.loads((ROOT / "spec" / "estimators.json").read_text("utf-8"))["vectors"]
    done = subprocess.run([node(), str(ESTIMATORS / "check_estimators.js")],
                          capture_output=True, text=True, check=False)
    checked = [json.loads(line) for line in done.stdout.splitlines()]
    assert [c["id"] for c in checked] == [v["id"] for v in vectors], done.stderr
    wrong = [c for c in checked if c["counted"] != c["expected"] or not c["texts_match"]]
    assert not wrong and done.returncode == 0, wrong


def test_its_crash_is_a_real_death_and_a_restart_on_its_store() -> None:
    [case] = by_id(["S10-TAKEOVER-BUDGET"])
    with StdioDriver(command()) as driver:
        first = driver.process.pid
        driver.case = case.id
        trace = driver.run_document(dict(case.scenario))
        # Another process answered the rest: the first one exited (it is reaped, not running).
        assert driver.process.pid != first
        with pytest.raises(ProcessLookupError):
            os.kill(first, 0)
        log = driver.take_log(case.id)
    [restarted] = [e for e in trace if e["kind"] == "restarted"]
    assert (restarted["phase"], restarted["occurrence"], restarted["when"]) == (
        "batch_fed_back", 1, "after")
    # The dead process's events come first: its first model request precedes the restart.
    kinds = [e["kind"] for e in trace]
    assert kinds.index("model_request") < kinds.index("restarted")
    assert any("restarted on" in line for line in log), log


def test_what_it_logs_reaches_the_json_report_and_the_terminal() -> None:
    _, output = conformance("--json", "--case", "S10-TAKEOVER-BUDGET", "--case", "ROW-02")
    cases = {case["id"]: case for case in json.loads(output)["cases"]}
    [line] = cases["S10-TAKEOVER-BUDGET"]["log"]
    assert line.startswith("S10-TAKEOVER-BUDGET: restarted on ")
    assert "log" not in cases["ROW-02"]  # it logged nothing for that case
    code, text = conformance("-v", "--case", "S10-TAKEOVER-BUDGET")
    assert code == 0 and "log: S10-TAKEOVER-BUDGET: restarted on " in text, text
