"""The universal checks (conformance/universal.py, issue #31): each invariant against a
hand-made trace that breaks it, the same trace repaired, and the skips where a trace leaves an
optional field out. Every test can fail: the broken trace must be reported, naming the
invariant, the request's index and the evidence."""

from typing import Any

import pytest

from ctxspec.catalogue import load_catalogue
from ctxspec.conformance.universal import INVARIANTS, Findings, check, summary, tally

Event = dict[str, Any]


def message(kind: str, text: str = "", **fields: Any) -> Event:
    role = {"user_ref": "user", "tool_result": "tool", "assistant": "assistant"}.get(kind,
                                                                                      "system")
    return {"role": role, "kind": kind, "text": text, "tool_calls": [], **fields}


def call(call_id: str, ordinal: int = 1) -> Event:
    return {"call_id": call_id, "action_ordinal": ordinal, "name": "grep", "arguments": "{}"}


def request(*messages: Event, purpose: str = "business", tokens: int = 10, out: int = 40,
            **fields: Any) -> Event:
    return {"kind": "model_request", "purpose": purpose, "role": "root",
            "purpose_key": f"{purpose}:1", "attempt": 1, "view": {"messages": list(messages)},
            "estimated_input_tokens": tokens, "max_output_tokens": out, "window": 100,
            "output_reserve": 40, "safety_margin": 10, "input_budget": 50,
            "compaction": "below_trigger" if purpose == "business" else None, **fields}


def started(run: str = "r1") -> Event:
    return {"kind": "client_event", "run_id": run, "run_seq": 1, "event": "run_started",
            "detail": ""}


def ended(run: str = "r1", status: str = "succeeded", code: str | None = None) -> Event:
    return {"kind": "run_ended", "run_id": run, "run_no": 1, "status": status,
            "error_code": code, "message": None}


def tool(name: str = "grep") -> Event:
    return {"kind": "tool_executed", "call_id": "c9", "name": name, "effective_arguments": {},
            "proposed_arguments": {}, "outcome": "ok"}


QUESTION = message("user_ref", "q1", input_id="i1")


def found(findings: Findings) -> list[tuple[str, int | None]]:
    return [(v.invariant, v.request) for v in findings.violations]


def test_every_invariant_names_a_requirement_of_the_catalogue() -> None:
    known = {r.id for r in load_catalogue()}
    for invariant in INVARIANTS:
        assert invariant.requirements and set(invariant.requirements) <= known, invariant.id
        assert invariant.sentence and invariant.rule


def test_a_clean_trace_has_no_violation() -> None:
    trace = [started(), request(QUESTION, protected_input_ids=["i1"]), ended()]
    assert check(trace).violations == ()


def test_a_tool_result_without_its_call_is_an_orphan() -> None:
    orphan = message("tool_result", "x", call_id="c1")
    assert found(check([started(), request(QUESTION, orphan), ended()])) == [
        ("U-PAIRED", 0)]
    made = message("assistant", tool_calls=[call("c1")])
    assert check([started(), request(QUESTION, made, orphan), ended()]).violations == ()
    # A result before its call is an orphan too; so is a placeholder.
    late = [started(), request(QUESTION, message("placeholder", call_id="c1"), made), ended()]
    assert ("U-PAIRED", 0) in found(check(late))


def test_every_call_of_a_settled_batch_has_exactly_one_answer_in_action_order() -> None:
    made = message("assistant", tool_calls=[call("c1", 1), call("c2", 2)])
    one = message("tool_result", "a", call_id="c1")
    two = message("placeholder", call_id="c2")
    assert check([started(), request(QUESTION, made, one, two), ended()]).violations == ()
    half = check([started(), request(QUESTION, made, one), ended()])
    assert found(half) == [("U-SETTLED", 0)] and "c2" in str(half.violations[0])
    twice = check([started(), request(QUESTION, made, one, one, two), ended()])
    assert found(twice) == [("U-SETTLED", 0)]
    reversed_ = check([started(), request(QUESTION, made, two, one), ended()])
    assert found(reversed_) == [("U-SETTLED", 0)]
    # A compaction request's calls are not a batch the business role settles.
    assert "U-SETTLED" not in str(check([started(), request(
        made, purpose="compaction", protected_input_ids=[]), ended()]).violations)


def test_protected_inputs_are_shown_once_verbatim_in_receive_order() -> None:
    supplement = message("user_ref", "s1", input_id="i2")
    deliveries = [{"kind": "delivery", "input_id": i, "delivery_id": "d" + i,
                   "state": "pending", "target_run_id": "r1", "previous_delivery_id": None}
                  for i in ("i1", "i2")]
    good = request(QUESTION, supplement, protected_input_ids=["i1", "i2"])
    assert check([*deliveries, started(), good, ended()]).violations == ()
    missing = request(QUESTION, protected_input_ids=["i1", "i2"])
    assert found(check([started(), missing, ended()])) == [("U-PROTECTED", 0)]
    changed = request(message("user_ref", "q1 (edited)", input_id="i1"),
                      protected_input_ids=["i1"])
    broken = check([started(), request(QUESTION, protected_input_ids=["i1"]), changed, ended()])
    assert found(broken) == [("U-PROTECTED", 1)] and "q1 (edited)" in str(broken.violations[0])
    swapped = request(supplement, QUESTION, protected_input_ids=["i1", "i2"])
    assert found(check([*deliveries, started(), swapped, ended()])) == [("U-PROTECTED", 0)]


def test_protected_inputs_are_skipped_without_their_optional_field() -> None:
    findings = check([started(), request(message("user_ref", "q1", input_id="i1")), ended()])
    assert findings.violations == ()
    assert "U-PROTECTED" in dict(findings.skipped)


def test_the_hard_window_and_the_input_budget_hold_on_what_was_sent() -> None:
    # W = 100, O = 40, S = 10, B = 50.
    assert check([started(), request(QUESTION, tokens=50), ended()]).violations == ()
    assert found(check([started(), request(QUESTION, tokens=51), ended()])) == [
        ("U-WINDOW", 0), ("U-BUDGET", 0)]
    # A business request that asks for less output still may not take more than B (§7).
    assert found(check([started(), request(QUESTION, tokens=51, out=30), ended()])) == [
        ("U-BUDGET", 0)]
    # A compaction request is held to its own T (Q32): I + T + S <= W, not I <= B.
    assert check([started(), request(tokens=70, out=20, purpose="compaction"),
                  ended()]).violations == ()
    assert found(check([started(), request(tokens=71, out=20, purpose="compaction"),
                        ended()])) == [("U-WINDOW", 0)]


def test_a_compaction_request_carries_no_business_tool() -> None:
    schemas = {"messages": [], "tool_schemas": ['{"name": "grep"}']}
    business = request(QUESTION, rendered=schemas)
    clean = request(purpose="compaction", rendered={"messages": [], "tool_schemas": []})
    assert check([started(), business, clean, ended()]).violations == ()
    offered = request(purpose="compaction", rendered=schemas)
    assert found(check([started(), business, offered, ended()])) == [
        ("U-COMPACTION-TOOLS", 1)]
    as_tool = request(message("tool_result", "x", call_id="c1"), purpose="compaction")
    assert ("U-COMPACTION-TOOLS", 0) in found(check([started(), as_tool, ended()]))


def test_nothing_is_sent_or_run_once_the_run_has_ended() -> None:
    trace = [started(), request(QUESTION), ended(), request(QUESTION), tool()]
    assert found(check(trace)) == [("U-AFTER-END", 1), ("U-AFTER-END", None)]
    assert check([started(), request(QUESTION), ended(), started("r2"), request(QUESTION),
                  ended("r2")]).violations == ()
    # Without the Runs' start events, when a Run runs is not known: skipped.
    blind = check([request(QUESTION), ended(), request(QUESTION)])
    assert blind.violations == () and ("U-AFTER-END" in dict(blind.skipped))


def test_nothing_is_sent_after_the_users_stop() -> None:
    trace = [started(), request(QUESTION), request(QUESTION), ended(status="stopped")]
    assert check(trace, stops=(3,)).violations == ()  # the stop came after the last request
    assert found(check(trace, stops=(2,))) == [("U-AFTER-STOP", 1)]
    assert check(trace, stops=(0,)).violations == ()  # no Run was running yet
    unknown = check(trace, {"steps": [{"stop": True}]}, None)
    assert unknown.violations == () and "U-AFTER-STOP" in dict(unknown.skipped)
    assert "U-AFTER-STOP" not in dict(check(trace, {"steps": [{"advance": True}]}).skipped)


def test_a_run_a_dead_incarnation_announced_is_not_taken_for_stopped() -> None:
    # A crash before the question was accepted: the dead incarnation announced Run r1, which
    # never existed; the restarted one runs r2 to its end, and a stop comes while no Run runs
    # (event 5): r3's request breaks no rule (the false alarm of Q284). A stop while r3 runs
    # (event 6) still catches r3's request.
    restarted: Event = {"kind": "restarted", "commit": "APP-INPUT", "occurrence": 1,
                        "when": "before"}
    trace = [started("r1"), restarted, started("r2"), request(QUESTION), ended("r2"),
             started("r3"), request(QUESTION), ended("r3", status="stopped")]
    assert check(trace, stops=(5,)).violations == ()
    assert found(check(trace, stops=(6,))) == [("U-AFTER-STOP", 1)]


def test_a_run_makes_no_call_past_its_deadline() -> None:
    scenario = {"agent": {"run_deadline": 2}}
    two = [started(), request(QUESTION), tool(), ended(status="timed_out")]
    assert check(two, scenario).violations == ()
    three = [started(), request(QUESTION), tool(), request(QUESTION), ended(status="timed_out")]
    assert found(check(three, scenario)) == [("U-AFTER-DEADLINE", 1)]
    # The next Run has its own deadline.
    assert check([*two, started("r2"), request(QUESTION), ended("r2")], scenario).violations == ()


def test_an_ended_run_has_exactly_one_ending() -> None:
    assert found(check([started(), ended(), ended()])) == [("U-ONE-ENDING", None)]
    # A takeover may end again, the same way, a Run whose announced ending the dead runtime
    # never committed (Q280) — never another way.
    restarted = {"kind": "restarted", "phase": "run_finalised", "occurrence": 1,
                 "when": "before"}
    assert check([started(), ended(), restarted, ended()]).violations == ()
    assert found(check([started(), ended(), restarted, ended(status="failed")])) == [
        ("U-ONE-ENDING", None)]


def test_a_failed_summary_never_appears_as_a_summary() -> None:
    scenario = {"model": {"compaction": [{"fail": "provider unavailable"}, {"text": "SUM"}]}}
    error_as_summary = message("summary", body="Error generating summary: provider unavailable")
    trace = [started(), request(QUESTION, error_as_summary), ended()]
    broken = check(trace, scenario)
    assert found(broken) == [("U-FAILED-SUMMARY", 0)]
    assert "provider unavailable" in str(broken.violations[0])
    good = [started(), request(QUESTION, message("summary", body="SUM")), ended()]
    assert check(good, scenario).violations == ()
    partial = {"model": {"compaction": [{"fail": "cut", "partial": "half a summary"}]}}
    assert found(check([started(), request(QUESTION, message(
        "summary", body="half a summary")), ended()], partial)) == [("U-FAILED-SUMMARY", 0)]


@pytest.mark.parametrize("limit", [1, 3])
def test_the_summary_and_the_tally_count_per_invariant(limit: int) -> None:
    orphan = message("tool_result", "x", call_id="c1")
    findings = check([started(), *[request(QUESTION, orphan)] * 4, ended()])
    text = summary(findings, limit)
    assert text.startswith("U-PAIRED (CTX-6.2") and "4 violations" in text
    assert text.count("U-PAIRED at request") == limit and "… and" in text
    rows = {r["id"]: r for r in tally([("A", findings), ("B", Findings())])}
    assert rows["U-PAIRED"]["violations"] == 4 and rows["U-PAIRED"]["violated_by"] == ["A"]
    assert rows["U-BUDGET"]["violations"] == 0
