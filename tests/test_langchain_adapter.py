"""The LangChain driver's review (tool.pre_call) and crash phases (ctxspec.adapters.langchain):
what LangChain keeps across a restart, where its human-in-the-loop diverges for the reason its
report gives. The whole suite runs in the drift test of its report (test_compat_reports.py).
The ``langchain`` extra is installed by .ci/run; without it this test errors, never skips.
"""

from typing import TYPE_CHECKING, Any

import pytest

from ctxspec.conformance.case import of, requests
from ctxspec.conformance.cases import by_id
from ctxspec.conformance.harness import confirm_capabilities, run_case, scenario_trace
from ctxspec.conformance.probes import ProbeResult
from ctxspec.conformance.scenario import HookDoc, ScriptedHooks
from tests import adapter_checks as checks

if TYPE_CHECKING:
    from ctxspec.adapters.langchain import LangChainDriver


def make_driver() -> "LangChainDriver":
    """The adapter's factory, imported when a test runs, not when pytest collects this module:
    LangChain takes seconds to import, and every test process collects every module."""
    from ctxspec.adapters.langchain import make_driver as factory
    return factory()

KEPT = ("ROW-21", "ROW-23", "CRASH-TOOLS-RAW_ANSWER_SAVED-1-BEFORE",
        "CRASH-TOOLS-BATCH_FED_BACK-1-BEFORE", "S3-REBASE",
        "CRASH-RUNS-INPUT_ACCEPTED-1-BEFORE", "CRASH-TOOLS-REQUEST_FROZEN-2-AFTER",
        "CRASH-TOOLS-HOOK_DECIDED-2-AFTER", "CRASH-PLANNER-EXECUTION_STARTED-1-AFTER",
        "CRASH-PLANNER-RAW_ANSWER_SAVED-4-BEFORE", "CRASH-HOOK-POST-RESPONSE-MODIFY-HOOK_DECIDED",
        "HM-TPRE-DENY-EXECUTOR-SUCCEEDED", "CRASH-TOOLS-TOOL_SETTLED-2-AFTER",
        "CRASH-PLANNER-TOOL_SETTLED-1-AFTER", "CRASH-HOOK-POST-CALL-MODIFY-TOOL_SETTLED")
"""A crash after (or before) the model's checkpoint, after (or before) the tools' one: the
thread resumed on a fresh graph repeats no tool and asks the model again only for an answer it
never saved; a chain's argument writes applied in order. An input the thread never saved is
sent again; a batch's two review decisions are one resume write, reused once stored; the last
result of a batch stored, nothing is run again; an Executor is a subgraph whose checkpoints the
resumed Planner continues from (Q371), and its review pauses the thread."""

DIVERGING = {
    "ROW-16-17": "the path the model sees",  # an edit keeps the model's call in the AIMessage
    "S10-TAKEOVER-BUDGET": "business Loops",  # the run's call count is not checkpointed
    # A failed and a stopped Run come first: LangGraph writes no terminal checkpoint for them.
    "CRASH-RUNS-RUN_FINALISED-3-AFTER": "restarts",
    # A call that ran but whose result was not stored runs again (the script has one answer).
    "ROW-22": "the script of tool 'read' ran out",
    "S10-UNKNOWN-OUTCOME": "ran out",
    # The reviewer's answer was not stored: the interrupt is raised again and asked again.
    "CRASH-TOOLS-HOOK_DECIDED-2-BEFORE": "hooks asked again",
    # The refused resume write is not awaited: the edited call runs before it surfaces.
    "S10-COMMIT-REFUSED": "a tool ran before the decision was stored",
}
"""Cases LangChain fails, and a word of what the failure shows."""


@pytest.fixture(scope="module")
def probes() -> dict[str, ProbeResult]:
    return confirm_capabilities(make_driver)




def test_every_declared_capability_is_confirmed(probes: dict[str, ProbeResult]) -> None:
    # Each crash phase declared has a probe of its own (Q352).
    declared = set(make_driver().capabilities)
    assert {name: p.status for name, p in probes.items()} == dict.fromkeys(declared, "confirmed")


@pytest.mark.parametrize("case_id", KEPT)
def test_what_langchain_keeps_passes(case_id: str, probes: dict[str, ProbeResult]) -> None:
    checks.passes(case_id, make_driver, probes)


@pytest.mark.parametrize("case_id", sorted(DIVERGING))
def test_a_divergence_fails_and_its_report_says_why(case_id: str,
                                                    probes: dict[str, ProbeResult]) -> None:
    from ctxspec.adapters.langchain_profile import PROFILE
    checks.diverges(case_id, make_driver, probes, DIVERGING, PROFILE)


def test_a_refused_checkpoint_is_surfaced_and_the_thread_resumed() -> None:
    # The store refuses the checkpoint whose next node is the model (commit_failures): the
    # failure is traced with its phase before anything else runs, then the thread resumes.
    [case] = by_id(["CRASH-TOOLS-REQUEST_FROZEN-1-AFTER"])
    scenario = {**case.scenario, "crash": {**case.scenario["crash"], "when": "fails"}}
    trace = scenario_trace(make_driver(), scenario)
    kinds = [e["kind"] for e in trace]
    assert [e["phase"] for e in of(trace, "persistence_failed")] == ["request_frozen"]
    assert "model_request" not in kinds[:kinds.index("persistence_failed")]
    assert [e["status"] for e in of(trace, "run_ended")] == ["succeeded"]


def test_a_batch_runs_whole_before_its_first_result_is_stored() -> None:
    # ROW-22 dies just after the first result of the batch (write's) is stored. LangGraph's one
    # worker runs the queued calls before it stores their writes, so read had already run: it
    # is the call run again after the restart, write is not (LangGraph read, not our output:
    # the order follows from PregelLoop.put_writes submitting behind the queued tasks).
    [case] = by_id(["ROW-22"])
    tools = case.scenario["tools"]  # a second answer of each tool, for the call run again
    trace = scenario_trace(make_driver(), {**case.scenario, "tools": {
        name: [*results, *results] for name, results in tools.items()}})
    kinds = [(e["kind"], e.get("name")) for e in trace
             if e["kind"] in ("tool_executed", "restarted")]
    assert kinds[:3] == [("tool_executed", "write"), ("tool_executed", "read"),
                         ("restarted", None)], kinds
    assert ("tool_executed", "write") not in kinds[3:]


def test_a_review_answer_not_stored_is_asked_again() -> None:
    # The process dies as the resume write holding the reviewer's answer (two calls, one
    # answer) is to be stored: the resumed thread raises the review again and the reviewer is
    # asked about both calls once more; dying just after it, the answer is reused.
    asked = {}
    for when in ("before", "after"):
        [case] = by_id([f"CRASH-TOOLS-HOOK_DECIDED-1-{when.upper()}"])
        trace = scenario_trace(make_driver(), case.scenario)
        assert [(e["phase"], e["when"]) for e in of(trace, "restarted")] == [
            ("hook_decided", when)]
        asked[when] = sum(e["point"] == "tool.pre_call" for e in of(trace, "hook_called"))
    assert asked == {"before": 4, "after": 2}


def test_a_crash_before_the_answer_is_saved_asks_that_request_again() -> None:
    # The process dies in the model node once the first answer arrived: one restart, and the
    # first request (same key and attempt) sent twice, the second once.
    [case] = by_id(["CRASH-TOOLS-RAW_ANSWER_SAVED-1-BEFORE"])
    trace = scenario_trace(make_driver(), case.scenario)
    assert [(e["phase"], e["when"]) for e in of(trace, "restarted")] == [
        ("raw_answer_saved", "before")]
    asked = [(r["purpose_key"], r["attempt"]) for r in requests(trace)]
    assert asked == [asked[0], asked[0], asked[2]] and asked[2] != asked[0]


def _answer(items: list[dict[str, Any]], name: str = "write",
            arguments: dict[str, Any] | None = None) -> tuple[dict[str, Any], list[str]]:
    from ctxspec.adapters.langchain_review import Reviewer
    events: list[str] = []
    hooks = ScriptedHooks([HookDoc.model_validate({"point": "tool.pre_call", "items": items})])
    reviewer = Reviewer(hooks, lambda kind, **fields: events.append(
        f"{kind}:{fields.get('decision', fields.get('stage'))}"))
    answer = reviewer.answer({"action_requests": [
        {"name": name, "args": arguments or {"path": "a.md"}}]})
    return answer["decisions"][0], events


def test_a_chain_becomes_one_reviewers_decision() -> None:
    assert _answer([{"decision": "allow"}])[0] == {"type": "approve"}
    assert _answer([{"decision": "allow"}, {"decision": "deny"}]) == (
        {"type": "reject"}, ["hook_called:pre", "hook_decided:allow", "hook_decided:deny"])
    edit = _answer([{"payload_patch": [{"path": "arguments.path", "value": "b.md"}]},
                    {"payload_patch": [{"path": "arguments.body", "value": "x"}]}])[0]
    assert edit == {"type": "edit", "edited_action": {
        "name": "write", "args": {"path": "b.md", "body": "x"}}}
    # A write with no place in an edit is not sent: the call is approved as proposed.
    assert _answer([{"payload_patch": [{"path": "quota", "value": 9}]}])[0] == {
        "type": "approve"}
    # A failed item is dropped, the call goes as the other items say (Q290).
    assert _answer([{"fails": True}])[0] == {"type": "approve"}
    assert _answer([{"fails": True}, {"decision": "deny"}])[0] == {"type": "reject"}


ALONE: dict[str, dict[str, Any]] = {"SummarizationMiddleware(trim_tokens_to_summarize=...)": {
    "trim_tokens_to_summarize": None}, "SummarizationMiddleware(token_counter=...)": {
    "count_whole_request": True}, "SummarizationMiddleware(summarizer=...)": {
    "summary_attempts": True}}
"""Each setting of the best configuration as a change of the defaults' Configuration."""


@pytest.mark.slow
def test_the_settings_that_name_a_case_fix_it(probes: dict[str, ProbeResult]) -> None:
    # A default failure is its settings', not the best configuration's as a whole: the
    # defaults with only the settings naming the case changed pass it (Q291).
    from dataclasses import replace
    from functools import partial

    from ctxspec.adapters.langchain import LangChainDriver
    from ctxspec.adapters.langchain_profile import DEFAULTS, SETTINGS
    assert sorted(ALONE) == sorted(s.name for s in SETTINGS), "a setting without its change"
    for case in by_id(sorted({c for s in SETTINGS for c in s.cases})):
        named = [s for s in SETTINGS if case.id in s.cases]
        changes = {k: v for s in named for k, v in ALONE[s.name].items()}
        result = run_case(case, partial(LangChainDriver, replace(DEFAULTS, **changes)), probes)
        assert result.status == "passed", (
            f"{case.id} does not pass with only {', '.join(s.name for s in named)} changed: "
            f"{result.detail}")
