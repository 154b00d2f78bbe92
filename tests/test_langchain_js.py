"""The LangChain.js runtime (adapters/langchain-js/) under the suite over the stdio protocol only
(issue #37): a few cases whose verdicts follow from LangChain.js's own source, and `ctxspec
compat --stdio` writing its report. The whole-suite report is checked for drift in
tests/test_compat_reports.py (slow tier).

It needs Node.js 20 and the runtime's npm packages (`npm ci --prefix adapters/langchain-js`,
the README's install line); without them these tests fail saying so."""

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ctxspec.cli import main
from ctxspec.conformance.linear_trace import expanded
from tests.test_stdio_runtime_js import node

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "adapters" / "langchain-js"
PROFILE = PACKAGE / "profile.json"


def command(*flags: str) -> str:
    if not (PACKAGE / "node_modules" / "langchain" / "package.json").is_file():
        pytest.fail("the LangChain.js runtime's packages are not installed: run "
                    "`npm ci --prefix adapters/langchain-js` (the README's install line)")
    return " ".join([node(), str(PACKAGE / "runtime.js"), *flags])


def run_cases(*cases: str, flags: tuple[str, ...] = ()) -> dict[str, dict[str, Any]]:
    outcome = CliRunner().invoke(main, ["conformance", "--stdio", command(*flags), "--json",
                                        "--traces", "--jobs", "1",
                                        *[a for case in cases for a in ("--case", case)]])
    assert outcome.exit_code in (0, 1), outcome.output[-2000:]
    return {case["id"]: case for case in json.loads(outcome.output)["cases"]}


def test_the_verdicts_follow_from_langchain_js_source() -> None:
    # Each expectation is read from LangChain.js 1.5.14's source, not from a run:
    # - ROW-07: createAgent feeds a batch's ToolMessages back in call order: passes.
    # - S11-STOP-IN-FLIGHT-FINAL: the stream's AbortSignal ends the Run: passes.
    # - S8-SUMMARY-FAILS: summarization.js createSummary catches the summary call's error and
    #   returns "Error generating summary: …" as the summary; the Run goes on (fails).
    # - ROW-18: hitl.js afterModel keeps only the rejected calls when one is rejected, so the
    #   approved ls never runs (fails).
    # - CRASH-TOOLS-TOOL_SETTLED-1-AFTER: the second tool task's writes were not saved when the
    #   process died, so LangGraph runs it again and its one-result script runs out (fails).
    # - ROW-03: an Executor is a second createAgent invoked on a fresh state holding only the
    #   hand-over, so it sees none of the Planner's messages (passes).
    seen = run_cases("ROW-07", "S11-STOP-IN-FLIGHT-FINAL", "S8-SUMMARY-FAILS", "ROW-18",
                     "CRASH-TOOLS-TOOL_SETTLED-1-AFTER", "ROW-03")
    assert {i: c["status"] for i, c in seen.items()} == {
        "ROW-07": "passed", "S11-STOP-IN-FLIGHT-FINAL": "passed", "S8-SUMMARY-FAILS": "failed",
        "ROW-18": "failed", "CRASH-TOOLS-TOOL_SETTLED-1-AFTER": "failed", "ROW-03": "passed"}, seen
    summary = expanded(seen["S8-SUMMARY-FAILS"]["trace"])
    bodies = [m["body"] for e in summary if e["kind"] == "model_request"
              for m in e["view"]["messages"] if m["kind"] == "summary"]
    assert bodies and bodies[0].startswith("Error generating summary: "), bodies
    assert [e["status"] for e in summary if e["kind"] == "run_ended"][-1] == "succeeded"
    ran = [e["name"] for e in expanded(seen["ROW-18"]["trace"]) if e["kind"] == "tool_executed"]
    assert ran == [], ran  # neither the rejected rm nor the approved ls
    assert "ran out at call #2" in seen["CRASH-TOOLS-TOOL_SETTLED-1-AFTER"]["detail"]


@pytest.mark.slow  # two runtime starts; the verdicts test above is the default tier's
def test_the_defaults_count_only_the_messages() -> None:
    # summarizationMiddleware hands its tokenCounter the state's messages (no system prompt):
    # at I = the trigger the defaults' counter sees less and sends no summary; the best
    # configuration counts the whole request and summarises.
    best = run_cases("ROW-04-AT")["ROW-04-AT"]
    plain = run_cases("ROW-04-AT", flags=("--defaults",))["ROW-04-AT"]
    assert (best["status"], plain["status"]) == ("passed", "failed"), (best, plain)


@pytest.mark.slow  # the Node runtime started for each configuration
def test_compat_over_stdio_writes_a_report_with_both_configurations(tmp_path: Path) -> None:
    outcome = CliRunner().invoke(main, [
        "compat", "--stdio", command(), "--profile", str(PROFILE), "--out", str(tmp_path),
        "--date", "2026-12-01", "--case", "ROW-04-AT", "--case", "ROW-18"])
    assert outcome.exit_code == 0, outcome.output
    report = json.loads((tmp_path / "langchain-js.json").read_text("utf-8"))
    versions = json.loads((PACKAGE / "package-lock.json").read_text("utf-8"))["packages"]
    assert report["versions"]["langchain"] == versions["node_modules/langchain"]["version"]
    assert report["driver"].startswith("stdio: ") and report["driver"].endswith("runtime.js")
    failures = {(f["case"], f["configuration"]): f for f in report["failures"]}
    assert failures[("ROW-18", "best")]["kind"] == "inherent"
    assert "rejects one call" in failures[("ROW-18", "best")]["sentence"]
    default = failures[("ROW-04-AT", "defaults")]
    assert default["kind"] == "default" and "tokenCounter" in default["setting"]
    assert report["configuration_dependent"] == ["ROW-04-AT"]
    assert (tmp_path / "langchain-js.md").is_file() and (tmp_path / "README.md").is_file()


@pytest.mark.parametrize(("args", "said"), [
    (["--driver", "ctxspec.adapters.langchain:make_driver", "--stdio", "node x.js"],
     "exactly one"),
    ([], "exactly one"),
    (["--driver", "ctxspec.adapters.langchain:make_driver", "--profile", "README.md"],
     "--profile goes with --stdio"),
])
def test_compat_refuses_a_wrong_combination(args: list[str], said: str) -> None:
    outcome = CliRunner().invoke(main, ["compat", *args])
    assert outcome.exit_code == 2 and said in outcome.output, outcome.output


def test_compat_refuses_a_profile_with_an_unknown_field(tmp_path: Path) -> None:
    profile = tmp_path / "profile.json"
    profile.write_text(json.dumps({"runtime": "x", "divergence": {}}), "utf-8")
    outcome = CliRunner().invoke(main, ["compat", "--stdio", "node x.js", "--profile",
                                        str(profile), "--out", str(tmp_path)])
    assert outcome.exit_code == 2 and "divergence" in outcome.output, outcome.output
    assert not (tmp_path / "x.json").exists()  # refused before any runtime started
