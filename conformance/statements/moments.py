"""Conformance cases that place an event at a boundary of the loop the design names (a
scenario's ``moment`` trigger, capability ``moments``): before the freeze, between the first
output and the end of a stream, during a hook, between a raw save and its post hook, between two
calls of one batch. Each is the statement of its section at that boundary (IDs ``S<section>-…``);
expected values derived by hand from the design (see conformance/case.py)."""

import json
from typing import Any

from ctxspec.conformance.case import (
    COMPACTING,
    Case,
    Trace,
    base,
    endings,
    equal,
    exactly,
    expect,
    lines,
    of,
    requests,
    taken_over,
)
from ctxspec.conformance.phases import crash_need

_MOMENTS = frozenset({"moments", "triggers", "stop"})
_SUPPLEMENTING = frozenset({"moments", "triggers"})
"""A supplement placed at a moment: no stop in the scenario."""


def _two_loops(**agent: Any) -> dict[str, Any]:
    """One call of tool t, then the answer: two business requests."""
    document = base(tools=[{"name": "t"}], **agent)
    document["steps"] = [{"ask": "go"}, {"advance": True}]
    document["model"] = {"business": [{"text": "", "tool_calls": [{"name": "t"}]},
                                      {"text": "done"}]}
    document["tools"] = {"t": [{"text": "result"}]}
    return document


def _late(moment: str) -> dict[str, Any]:
    document = _two_loops()
    document["triggers"] = [{"on": {"moment": moment, "ordinal": 1},
                             "do": {"supplement": "LATE"}}]
    return document


def _late_check(where: str) -> Any:
    def check(trace: Trace) -> None:
        # §5: the first request's input cutoff was fixed when it was prepared; a supplement
        # arriving {where} is past that cutoff: the request is not enlarged with it (nor its
        # retry), and it joins the next root Loop — the second request shows it, once.
        first, second = exactly(2, requests(trace, "business"), "business requests")
        equal(sum(text == "LATE" for _, _, text in lines(first)), 0,
              f"the supplement in the first request (it arrived {where})")
        equal(sum(text == "LATE" for _, _, text in lines(second)), 1,
              "the supplement in the second request")
        equal(endings(trace), [(1, "succeeded", None)], "Run endings")
    return check


def _stop_at_freeze() -> dict[str, Any]:
    document = _two_loops()
    document["steps"] = [{"ask": "go"}, {"supplement": "and this"}, {"advance": True},
                         {"ask": "again"}, {"advance": True}]
    document["model"] = {"business": [{"text": "answered"}]}
    document["triggers"] = [{"on": {"moment": "freeze", "ordinal": 1}, "do": {"stop": True}}]
    return document


def _stop_at_freeze_check(trace: Trace) -> None:
    # The stop arrives when Run 1's first request is prepared and about to be frozen. §11: a
    # stop during preparation starts no business attempt — nothing of Run 1 is sent — and its
    # supplement, never delivered, moves to the next question: Run 2's one request carries it
    # as a current input (once).
    equal(endings(trace), [(1, "stopped", None), (2, "succeeded", None)], "Run endings")
    [request] = exactly(1, requests(trace), "model requests")
    equal(sum(text == "and this" for _, _, text in lines(request)), 1,
          "the supplement in Run 2's request")
    equal(len(request["protected_input_ids"]), 2,
          "protected inputs of Run 2's request (its question and the carried supplement)")


def _stop_between_calls() -> dict[str, Any]:
    document = base(tools=[{"name": "a"}, {"name": "b"}])
    document["steps"] = [{"ask": "do a and b"}, {"advance": True}, {"ask": "what happened?"},
                         {"advance": True}]
    document["model"] = {"business": [{"text": "", "tool_calls": [{"name": "a"}, {"name": "b"}]},
                                      {"text": "a ran, b did not"}]}
    document["tools"] = {"a": [{"text": "a done"}], "b": [{"text": "b done"}]}
    document["triggers"] = [{"on": {"moment": "batch_call", "ordinal": 2},
                             "do": {"stop": True}}]
    return document


def _stop_between_calls_check(trace: Trace) -> None:
    # The stop arrives after a settled and before b starts. §11: after a stop no new call
    # starts; §6: the stopped Run keeps a's result and b gets a "not executed" placeholder,
    # never a made-up output. Run 1 ends stopped, and Run 2's request shows a's result and a
    # tool message for b that is not b's output. A runtime may run a batch's calls at once
    # (§2): then b had started with a when the stop came, and its result is b's own (#32,
    # Q294).
    executed = [e["name"] for e in of(trace, "tool_executed")]
    expect(executed in (["a"], ["a", "b"]), f"tools executed: {executed}")
    equal(endings(trace), [(1, "stopped", None), (2, "succeeded", None)], "Run endings")
    results = [m for m in requests(trace, "business")[-1]["view"]["messages"]
               if m["role"] == "tool"]
    equal(len(results), 2, "tool messages answering a and b in Run 2's request")
    equal(results[0]["text"], "a done", "a's result")
    if executed == ["a", "b"]:
        equal(results[1]["text"], "b done", "b's result (b ran with a)")
        return
    expect(results[1]["text"] != "b done", "b's placeholder claims b's output")
    # b never started: it has no Operation, so its placeholder may not report the design's
    # "unknown" state, which would say it may have acted (§6, §10; Q69).
    try:
        stated = json.loads(results[1]["text"]).get("operation_state")
    except (ValueError, AttributeError):
        stated = None
    expect(stated != "unknown", "b's placeholder says its outcome is unknown; it never started")


def _stop_during_hook() -> dict[str, Any]:
    document = _two_loops()
    document["hooks"] = [{"point": "tool.pre_call", "items": [{"decision": "allow"}]}]
    document["triggers"] = [{"on": {"moment": "hook", "ordinal": 1}, "do": {"stop": True}}]
    return document


def _stop_during_hook_check(trace: Trace) -> None:
    # The user stops while t's pre-call hook runs. The hook's allow does not skip the stop
    # check (§3 "allow 不能跳过这些检查"): t never starts, and the Run ends stopped after its
    # one business request; the hook was asked once, its decision not lost to a second ask.
    equal(of(trace, "tool_executed"), [], "tools executed")
    equal(len(requests(trace, "business")), 1, "business requests")
    equal([(e["point"], e["stage"]) for e in of(trace, "hook_called")],
          [("tool.pre_call", "pre")], "hook chains asked")
    equal(endings(trace), [(1, "stopped", None)], "Run endings")


def _stop_after_raw() -> dict[str, Any]:
    document = _two_loops()
    document["steps"] += [{"ask": "and?"}, {"advance": True}]
    document["model"]["business"].append({"text": "nothing more"})
    document["tools"] = {"t": [{"text": "SECRET-123"}]}
    document["hooks"] = [{"point": "tool.post_call", "items": [
        {"decision": "allow", "payload_patch": [{"path": "result", "value": "REDACTED"}]}]}]
    # Raw save 1 is the model's answer (the call of t), raw save 2 is t's result.
    document["triggers"] = [{"on": {"moment": "raw_saved", "ordinal": 2}, "do": {"stop": True}}]
    return document


def _stop_after_raw_check(trace: Trace) -> None:
    # Run 1's only answer is a call of t; the stop arrives after t's raw result is saved and
    # before its post-call hook is asked. The operation in flight is settled (§11 "已有操作收束")
    # through its post chain (§3: the effective result is the hook's): the hook is asked once,
    # Run 1 ends stopped without another request, and Run 2's history shows t's effective
    # result, never the raw one.
    equal([(e["point"], e["stage"]) for e in of(trace, "hook_called")],
          [("tool.post_call", "post")], "hook chains asked")
    equal(endings(trace), [(1, "stopped", None), (2, "succeeded", None)], "Run endings")
    business = requests(trace, "business")
    equal(len(business), 2, "business requests (one per Run)")
    texts = [text for _, _, text in lines(business[-1])]
    expect("REDACTED" in texts, "Run 2's history lacks t's effective result")
    expect(not any("SECRET-123" in text for text in texts), "the raw result reached the model")


def _stop_during_compaction_hook() -> dict[str, Any]:
    """W = 5000, O = 400, S = 100: B = 4500 and the compaction trigger floor(0.8 × B) = 3600.
    t's 3600-character result brings the second request over it, so the Session compacts
    before it; the chunk's pre-request chain is the first chain asked."""
    document = _two_loops(window=5000)
    document["tools"] = {"t": [{"text": "r" * 3600}]}
    document["model"]["compaction"] = [{"text": "SUMMARY"}]
    document["hooks"] = [{"point": "compaction.pre_request", "items": [{"decision": "allow"}]}]
    document["triggers"] = [{"on": {"moment": "hook", "ordinal": 1}, "do": {"stop": True}}]
    return document


def _stop_during_compaction_hook_check(trace: Trace) -> None:
    # The user stops while the first chunk's pre-request hook runs. §11's row for a stop during
    # compaction: no new compaction or business Attempt starts ("不启动新的压缩或业务
    # Attempt"); the hook's allow does not skip the check (§3). So no compaction request is
    # sent, no second business request, and the Run ends stopped (Q161).
    equal([(e["point"], e["stage"]) for e in of(trace, "hook_called")],
          [("compaction.pre_request", "pre")], "hook chains asked")
    equal(len(requests(trace, "compaction")), 0, "compaction requests after the stop")
    equal(len(requests(trace, "business")), 1, "business requests")
    equal(endings(trace), [(1, "stopped", None)], "Run endings")


def _late_then_crash() -> dict[str, Any]:
    document = _late("freeze")
    document["crash"] = {"phase": "first_output", "when": "before"}
    return document


def _late_then_crash_check(trace: Trace) -> None:
    # LATE arrives just before the first request is frozen (its cutoff, the question, was
    # fixed when it was prepared), and the process dies before the answer's first output. The
    # takeover asks the same request again (§10: a frozen request whose answer was never
    # saved is asked again with the same frozen inputs): it is that request — the question
    # only —, never re-frozen with LATE; LATE joins the next Loop, once (§5, Q160).
    business = requests(trace, "business")
    first = business[0]["purpose_key"]
    asked = [r for r in business if r["purpose_key"] == first]
    equal(len(asked), 2, "times the first request was asked (once more after the restart)")
    for request in asked:
        equal(request["input_cutoff"], 1, "the first request's input cutoff")
        equal(sum(text == "LATE" for _, _, text in lines(request)), 0,
              "LATE in the first request")
    equal(sum(text == "LATE" for _, _, text in lines(business[-1])), 1,
          "LATE in the next Loop's request")
    equal(endings(trace), [(1, "succeeded", None)], "Run endings")


CASES: tuple[Case, ...] = (
    Case("S5-SUPPLEMENT-AT-FREEZE", "a supplement arriving just before the freeze waits for the "
         "next Loop", "§5", ("CTX-5.28", "CTX-5.29"), _late("freeze"), _late_check(
             "just before the freeze"), _SUPPLEMENTING),
    Case("S5-SUPPLEMENT-AFTER-FIRST-OUTPUT", "a supplement arriving between the first output and "
         "the end of the stream waits for the next Loop", "§5", ("CTX-5.29",),
         _late("first_output"), _late_check("after the first output"), _SUPPLEMENTING),
    Case("S11-STOP-AT-FREEZE", "a stop just before the freeze sends nothing; the supplement goes "
         "to the next question", "§11", ("CTX-11.5", "CTX-11.6"), _stop_at_freeze(),
         _stop_at_freeze_check, _MOMENTS),
    Case("S11-STOP-BETWEEN-CALLS", "a stop between two calls of one batch starts no second "
         "call", "§11", ("CTX-11.5", "CTX-6.6"), _stop_between_calls(),
         _stop_between_calls_check, _MOMENTS),
    Case("S3-STOP-DURING-HOOK", "a stop while a pre-call hook runs: its allow does not skip the "
         "stop", "§3", ("CTX-3.93",), _stop_during_hook(), _stop_during_hook_check,
         _MOMENTS | {"hooks"}),
    Case("S10-STOP-AFTER-RAW-SAVE", "a stop between a raw save and its post hook: the result is "
         "still post-processed", "§10", ("CTX-3.16", "CTX-11.5"), _stop_after_raw(),
         _stop_after_raw_check, _MOMENTS | {"hooks"}),
    Case("S11-STOP-DURING-COMPACTION-HOOK", "a stop while a chunk's pre-request hook runs "
         "sends no compaction request", "§11", ("CTX-11.5", "CTX-3.93"),
         _stop_during_compaction_hook(), _stop_during_compaction_hook_check,
         _MOMENTS | COMPACTING | {"hooks"}),
    Case("S10-FROZEN-INPUTS-AFTER-TAKEOVER", "a frozen request asked again after a takeover "
         "keeps its cutoff; a supplement that arrived at the freeze waits for the next Loop",
         "§10", ("CTX-5.28", "CTX-10.6"), _late_then_crash(), taken_over(_late_then_crash_check),
         _SUPPLEMENTING | {crash_need("first_output")}),
)
