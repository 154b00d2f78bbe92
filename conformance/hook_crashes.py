"""The crash matrix crossed with hook configurations (§3, §10, §12 "原始结果保存后宕机"): for each
hook point that decides on a call — tool pre-call and post-call, model post-response, compaction
post-response — and each decision (allow, modify, deny), the Session is crashed at the phases
around that chain: the raw result saved and the chain not asked yet, the chain running, the
chain decided, and (where the effective result is a commit of its own) the effective result
committed. Generated from one table.

At every phase: no model request is asked again, the one tool call never runs twice, and no
hook is asked more often than without the crash. Where the chain had not started or had been
decided, the crashed Session must end exactly as the uncrashed one — the same requests with the
same messages, tools, hook calls and Run endings: a takeover after the raw save goes on with the
chain (its change or its deny), never with the raw result, and a decided chain is reused, never
asked again. A chain that was running is dropped by the hook failure rule (Q50): its item's
change or deny may be missing, so only "nothing repeated" is judged there.
"""

import copy
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from ctxspec.conformance.case import (
    COMPACTING,
    Case,
    Trace,
    base,
    endings,
    equal,
    expect,
    no_check,
    of,
    requests,
)
from ctxspec.conformance.crash_matrix import (
    HOOK_DROPPED,
    LOST_ANSWER,
    SPARE,
    UNKNOWN_TOOL,
    _hook_calls,
    _tools,
    same_requests,
)
from ctxspec.conformance.sessions import boundary

DECISIONS: Mapping[str, Mapping[str, dict[str, Any]]] = {
    "tool.pre_call": {
        "ALLOW": {"decision": "allow"},
        "MODIFY": {"decision": "allow",
                   "payload_patch": [{"path": "arguments.path", "value": "public.md"}]},
        "DENY": {"decision": "deny"}},
    "tool.post_call": {
        "ALLOW": {"decision": "allow"},
        "MODIFY": {"decision": "allow", "payload_patch": [{"path": "result", "value": "REDACTED"}]},
        "DENY": {"decision": "deny"}},
    "model.post_response": {
        "ALLOW": {"decision": "allow"},
        "MODIFY": {"decision": "allow", "context_patch": [
            {"target": "last", "field": "text", "value": "(answer adjusted by policy)"}]},
        "DENY": {"decision": "deny"}},
    "compaction.post_response": {
        "ALLOW": {"decision": "allow"},
        "MODIFY": {"decision": "allow",
                   "payload_patch": [{"path": "summary", "value": "EDITED SUMMARY"}]},
        "DENY": {"decision": "deny"}},
}
"""Hook point → decision → the one hook item (registered for every invocation of the point)."""

AROUND: Mapping[str, tuple[tuple[str, str], ...]] = {
    "tool.pre_call": (("effective_result_committed", "not asked"), ("hook_started", "running"),
                      ("hook_decided", "decided")),
    "tool.post_call": (("tool_settled", "not asked"), ("hook_started", "running"),
                       ("hook_decided", "decided")),
    "model.post_response": (("raw_answer_saved", "not asked"),
                            ("effective_result_committed", "not asked"),
                            ("hook_started", "running"), ("hook_decided", "decided")),
    "compaction.post_response": (("chunk_answer_saved", "not asked"), ("hook_started", "running"),
                                 ("hook_decided", "decided"), ("chunk_committed", "decided")),
}
"""Hook point → (the design's phase crashed just after, its first occurrence; the chain's state
then). Phases are conformance/phases.py's; a runtime maps them onto its own commits."""

UNREACHED = frozenset({("compaction.post_response", "DENY", "chunk_committed")})
"""A denied chunk fails its episode (§8): its chunk is never committed."""

SHORT = {"tool.pre_call": "PRE-CALL", "tool.post_call": "POST-CALL",
         "model.post_response": "POST-RESPONSE", "compaction.post_response": "COMPACTION-POST"}

REQUIREMENTS = ("CTX-10.9", "CTX-10.12", "CTX-3.66", "CTX-9.43", "CTX-8.70")


def _tool_session() -> dict[str, Any]:
    """One question, one call whose raw result is a secret, one answer."""
    document = base(tools=[{"name": "read"}])
    document["steps"] = [{"ask": "read my notes"}, {"advance": True}]
    document["model"] = {"business": [
        {"text": "reading", "tool_calls": [{"name": "read", "arguments": {"path": "notes.md"}}]},
        {"text": "done"}]}
    document["tools"] = {"read": [{"text": "SECRET-123"}, {"text": "SECRET-123"}]}
    return document


def _compaction_session() -> dict[str, Any]:
    """Two questions; the second reaches the trigger (I = 3600 of B = 4500) and is compacted in
    one chunk (as S10-SNAPSHOT-NOT-CHECKPOINT)."""
    # Its arithmetic counts the runtime's outcome text: measured with chars until redone (#15).
    return boundary(1573, estimator="chars")


def _scenario(point: str, decision: str) -> dict[str, Any]:
    document = _compaction_session() if point.startswith("compaction") else _tool_session()
    document["hooks"] = [{"point": point, "items": [copy.deepcopy(DECISIONS[point][decision])]}]
    return document


def _not_asked_again(crashed: Trace, point: str) -> None:
    """The chain running at the crash is not asked again after the takeover: before the Session
    goes on (a model request, a tool run, a Run's end), no call of that point's hooks."""
    events = list(crashed)
    start = next(i for i, e in enumerate(events) if e["kind"] == "restarted")
    for event in events[start + 1:]:
        if event["kind"] in ("model_request", "tool_executed", "run_ended"):
            return
        expect(not (event["kind"] == "hook_called" and event["point"] == point),
               f"the {point} chain running at the crash was asked again after the takeover "
               "(Q50: its outcome is unknown, so its item is dropped, never asked twice)")


def _compare(point: str, phase: str, chain: str, occurrence: int = 1, when: str = "after"
             ) -> Callable[[Trace, Trace], None]:
    """The crashed Session against the uncrashed one. Where the design allows a difference the
    crash matrix's rules say so (conformance/crash_matrix.py): only an answer not saved yet is
    asked again, once; a tool that started without a saved result is reported unknown, never
    re-run (Q44); a running hook is dropped (Q50). Everywhere else: exactly the same."""
    lost_answer = (phase, when) in LOST_ANSWER
    unknown_tool = (phase, when) in UNKNOWN_TOOL

    def compare(crashed: Trace, uncrashed: Trace) -> None:
        equal([(e["phase"], e["occurrence"], e["when"]) for e in of(crashed, "restarted")],
              [(phase, occurrence, when)], "restarts (phase, occurrence, before or after)")
        asked = Counter((r["purpose_key"], r["attempt"]) for r in requests(crashed))
        equal(sum(n - 1 for n in asked.values()), 1 if lost_answer else 0,
              "requests asked again after the takeover (only an answer never saved may be)")
        expect(len(of(crashed, "tool_executed")) <= 1,
               f"the one call ran {len(of(crashed, 'tool_executed'))} times")
        calls, expected = Counter(_hook_calls(crashed)), Counter(_hook_calls(uncrashed))
        if chain == "running":  # dropped by the failure rule (Q50): never asked again, and
            _not_asked_again(crashed, point)  # its dropped change or deny may change the rest
            return
        expect(calls <= expected, f"hooks asked again after the takeover: {calls - expected}")
        if unknown_tool:  # its outcome is unknown: the model is told so, nothing more is fixed
            told = [m for r in requests(crashed) for m in r["view"]["messages"]
                    if m["kind"] == "tool_result"
                    and (m.get("result_facts") or {}).get("code") == "UNKNOWN_OUTCOME"]
            expect(bool(told), "no tool result carries result_facts with code "
                   "UNKNOWN_OUTCOME (Q210)")
            return
        equal(calls, expected, f"hook calls (the chain {chain} at the crash is "
              + ("asked once, never skipped)" if chain == "not asked" else "reused)"))
        equal(_tools(crashed), _tools(uncrashed), "tools executed with their arguments")
        same_requests(crashed, uncrashed, "the requests sent (messages, in order): the chain's "
                      "change or deny must reach them after the takeover as it does without "
                      "the crash")
        equal(endings(crashed), endings(uncrashed), "Run endings")

    return compare


def crossed_case(point: str, decision: str, phase: str, occurrence: int, when: str) -> Case:
    """The full cross (tests/test_hook_crash_matrix.py, the slow tier): the configuration's
    Session crashed before or after any occurrence of any phase it passes, judged as the
    CRASH-HOOK-* cases are, with the crash matrix's allowances for the points away from the
    chain (an answer in flight, a tool's unknown outcome)."""
    scenario = _scenario(point, decision)
    crashed: dict[str, Any] = {**scenario, "crash": {"phase": phase, "occurrence": occurrence,
                                                     "when": when}}
    if (phase, when) in UNKNOWN_TOOL:  # the model then reads an error and may take a turn
        crashed["model"] = {purpose: [*script, SPARE, SPARE]
                            for purpose, script in scenario["model"].items()}
    chain = "running" if (phase, when) in HOOK_DROPPED else "not asked or decided"
    needs = frozenset({"hooks", "crash_points"}) | (
        COMPACTING if point.startswith("compaction") else frozenset())
    return Case(f"CRASH-HOOK-{SHORT[point]}-{decision}-{phase.upper()}-{occurrence}-"
                f"{when.upper()}",
                f"{point} {decision.lower()}: a crash {when} {phase} #{occurrence} repeats "
                "nothing and skips no decision", "§10 crash matrix", REQUIREMENTS, crashed,
                no_check, needs, baseline=scenario,
                compare=_compare(point, phase, chain, occurrence, when))


def configurations() -> list[tuple[str, str, dict[str, Any]]]:
    """Every hook configuration the cross covers: (point, decision, its uncrashed scenario)."""
    return [(point, decision, _scenario(point, decision))
            for point in DECISIONS for decision in DECISIONS[point]]


def _cases() -> tuple[Case, ...]:
    cases: list[Case] = []
    for point, around in AROUND.items():
        needs = frozenset({"hooks", "crash_points"}) | (
            COMPACTING if point.startswith("compaction") else frozenset())
        for decision in DECISIONS[point]:
            for phase, chain in around:
                if (point, decision, phase) in UNREACHED:
                    continue
                scenario = _scenario(point, decision)
                crashed = {**scenario, "crash": {"phase": phase, "occurrence": 1,
                                                 "when": "after"}}
                cases.append(Case(
                    f"CRASH-HOOK-{SHORT[point]}-{decision}-{phase.upper()}",
                    f"{point} {decision.lower()}: a crash after {phase} (chain {chain}) "
                    "repeats nothing and skips no decision",
                    "§10 crash matrix", REQUIREMENTS, crashed, no_check, needs,
                    baseline=scenario, compare=_compare(point, phase, chain)))
    return tuple(cases)


HOOK_CRASHES: tuple[Case, ...] = _cases()


__all__ = ["AROUND", "DECISIONS", "HOOK_CRASHES", "configurations", "crossed_case"]
