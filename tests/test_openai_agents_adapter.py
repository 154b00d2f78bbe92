"""The OpenAI Agents SDK driver (ctxspec.adapters.openai_agents) on a handful of cases: what the
SDK keeps, where it diverges for the reason its report gives, and an adapter-supplied pass
counted apart. The whole suite runs in the drift test of its report (test_compat_reports.py).
The ``openai-agents`` extra is installed by .ci/run; without it this test errors, never skips.
"""

from typing import TYPE_CHECKING

import pytest

from ctxspec.conformance.cases import by_id
from ctxspec.conformance.compat import Profile, status_of
from ctxspec.conformance.harness import confirm_capabilities, run_case
from ctxspec.conformance.probes import ProbeResult
from tests import adapter_checks as checks

if TYPE_CHECKING:
    from ctxspec.adapters.openai_agents import OpenAIAgentsDriver


def make_driver() -> "OpenAIAgentsDriver":
    """The adapter's factory, imported when a test runs, not when pytest collects this module:
    the SDK takes seconds to import, and every test process collects every module."""
    from ctxspec.adapters.openai_agents import make_driver as factory
    return factory()


def profile() -> Profile:
    from ctxspec.adapters.openai_agents.profile import PROFILE
    return PROFILE

KEPT = ("ROW-13", "S11-STOP-IN-FLIGHT-FINAL", "S11-FORMAT-ERROR", "S5-DELIVERED-ON-OUTPUT",
        "ROW-03", "S3-DELEGATE-POST-DENY", "S3-REQUEST-DENIED", "S2-RESPONSE-DENIED-CALLS",
        "S10-NEW-SESSION", "CRASH-TOOLS-BATCH_FED_BACK-1-AFTER",
        "CRASH-RUNS-INPUT_ACCEPTED-3-BEFORE", "CRASH-PLANNER-INPUT_ACCEPTED-2-AFTER",
        "CRASH-TOOLS-INPUT_ACCEPTED-1-FAILS")
"""A claimed supplement carried once to the next question; a stop that wins over an answer in
flight; a missing tool answered by an error the next Loop sees; inputs delivered on the first
output; two Executors behind ``Agent.as_tool`` each seeing only its hand-over, one at a time
(Q380); a post-call deny of the delegate call withholding the Executor's answer; a
pre-request deny from ``call_model_input_filter`` sending nothing (Q381); a post-response
deny from ``RunHooks.on_llm_end`` whose calls never run (Q383); a new session's history read
back with ``get_items`` holding none of the first one's (Q492); a restart after a turn's or
an input's write, continuing from the stored items (Q493); a refused write of the inputs
surfaced, the inputs sent again after the restart (Q542) — each the SDK's own doing."""

DIVERGING = {
    "ROW-12": "attempts",  # a broken stream is never retried (model_retry._evaluate_retry)
    "S2-PROVIDER-CALL-IDS": "tools executed",  # a shared provider call_id ends the Run
    "ROW-02": "outcome",  # the session replayed whole: no outcome of the ended Run
    "S11-LOOPS-SHARED": "('root', 'business')",  # as_tool's nested Run has its own max_turns
    "S3-HOOK-CHANGE-SEEN": "corrected",  # the input filter applies no patch (Q381)
    "ROW-04-AT": "expected 1607, saw 2607",  # the compact endpoint keeps Run 1's question
    "ROW-25": "('role:root', 'other', True)",  # get_items serves any holder of a session id
    "S11-PROTECTED-TOO-LARGE": "expected [['user_ref']], saw [[]]",  # input saved late
    "S10-TAKEOVER-BUDGET": "business Loops",  # the restarted Runner.run has a new max_turns
    # The answer is saved with its batch only: a crash before that write asks it again.
    "CRASH-TOOLS-BATCH_FED_BACK-1-BEFORE": "asked again after it",
    "CRASH-TOOLS-BATCH_FED_BACK-1-FAILS": "asked again after it",
}
"""Cases the SDK fails, and a word of what the failure shows."""


@pytest.fixture(scope="module")
def probes() -> dict[str, ProbeResult]:
    return confirm_capabilities(make_driver)




def test_every_declared_capability_is_confirmed(probes: dict[str, ProbeResult]) -> None:
    checks.all_confirmed(probes, make_driver)


@pytest.mark.parametrize("case_id", KEPT)
def test_what_the_sdk_keeps_passes(case_id: str, probes: dict[str, ProbeResult]) -> None:
    checks.passes(case_id, make_driver, probes)


@pytest.mark.parametrize("case_id", sorted(DIVERGING))
def test_a_divergence_fails_and_its_report_says_why(case_id: str,
                                                    probes: dict[str, ProbeResult]) -> None:
    checks.diverges(case_id, make_driver, probes, DIVERGING, profile())




def test_a_restart_continues_from_the_stored_turn() -> None:
    # tool-batch-hook dies just after the turn's write (the decision with both results): the
    # restarted process starts a Run on the session with no input, whose one request carries
    # the question, the decision and the two results, each once, and no tool runs again.
    from ctxspec.conformance.case import lines, of, requests
    from ctxspec.conformance.harness import scenario_trace
    [case] = by_id(["CRASH-TOOLS-BATCH_FED_BACK-1-AFTER"])
    trace = scenario_trace(make_driver(), case.scenario)
    restarted = [i for i, e in enumerate(trace) if e["kind"] == "restarted"]
    assert [(trace[i]["phase"], trace[i]["when"]) for i in restarted] == [
        ("batch_fed_back", "after")]
    after = [e for e in trace[restarted[0]:] if e["kind"] == "model_request"]
    assert [kind for _, kind, _ in lines(after[0])] == [
        "system_prompt", "user_ref", "assistant", "tool_result", "tool_result"]
    assert sorted(e["name"] for e in of(trace, "tool_executed")) == ["read", "write"]
    assert len(requests(trace, "business")) == 2


def test_a_history_read_serves_every_stored_item_past_the_limit() -> None:
    # Four Runs with SessionSettings(limit=4): Run 4's request carries the last four of the
    # six stored items and its question; the read after it serves all eight, oldest first
    # (Q492).
    from ctxspec.adapters.openai_agents.driver import make_limited_driver
    from ctxspec.conformance.case import base
    from ctxspec.conformance.harness import scenario_trace
    document = base()
    document["steps"] = [step for text in ("q1", "q2", "q3", "q4")
                         for step in ({"ask": text}, {"advance": True})]
    document["steps"].append({"read_history": {"kind": "audit"}})
    document["model"] = {"business": [{"text": f"a{n}"} for n in range(1, 5)]}
    trace = scenario_trace(make_limited_driver(), document)
    [read] = [e for e in trace if e["kind"] == "history_read"]
    assert read["message_kinds"] == ["user_ref", "assistant"] * 4
    last = [e for e in trace if e["kind"] == "model_request"][-1]
    assert [m["text"] for m in last["view"]["messages"]] == ["sys", "q2", "a2", "q3", "a3",
                                                             "q4"]


@pytest.mark.parametrize("case_id", ["EX7-BUDGET", "ROW-04-FLOOR", "S11-COMPACTION-FAILED"])
def test_a_pass_on_the_adapters_decisions_is_not_the_frameworks(
        case_id: str, probes: dict[str, ProbeResult]) -> None:
    # W, O, S, B, the trigger and the moment to compact are the adapter's (Q382): a pass that
    # needs them is counted adapter, though the SDK's compaction session made the summary.
    result = checks.run(case_id, make_driver, probes)
    assert result.status == "passed", result.detail
    assert status_of(result, profile().adapter_supplied) == "adapter"


ALONE = {"RunConfig(tool_not_found_behavior=...)": "tool_not_found_behavior",
         "RunConfig(tool_error_formatter=...)": "tool_error_formatter",
         "Agent.as_tool(failure_error_function=...)": "executor_failure"}
"""Each setting of the report as the driver's name of that one change (driver.py ``BEST``)."""


@pytest.mark.slow
def test_the_settings_that_name_a_case_fix_it(probes: dict[str, ProbeResult]) -> None:
    # A default failure is its settings', not the best configuration's as a whole: the
    # defaults with only the settings naming the case changed pass it (Q291).
    from functools import partial

    from ctxspec.adapters.openai_agents.driver import BEST, OpenAIAgentsDriver
    from ctxspec.adapters.openai_agents.profile import SETTINGS
    assert sorted(ALONE) == sorted(s.name for s in SETTINGS), "a setting without its change"
    assert set(ALONE.values()) == BEST, "a change of the best configuration no setting names"
    for case in by_id(sorted({c for s in SETTINGS for c in s.cases})):
        named = [s for s in SETTINGS if case.id in s.cases]
        only = frozenset(ALONE[s.name] for s in named)
        defaults = run_case(case, partial(OpenAIAgentsDriver, best=frozenset()), probes)
        assert defaults.status == "failed", f"{case.id} does not fail with the defaults"
        result = run_case(case, partial(OpenAIAgentsDriver, best=only), probes)
        assert result.status == "passed", (
            f"{case.id} does not pass with only {', '.join(s.name for s in named)} changed: "
            f"{result.detail}")
