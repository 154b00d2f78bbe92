"""§12 rows 7 and 8 as conformance cases: the tool protocol over several Loops and of a Run
stopped mid-batch, and a huge tool result (§6). Each case stands beside its scenario and
check."""

from typing import Any

from ctxspec.conformance.case import (
    Case,
    Trace,
    base,
    endings,
    equal,
    expect,
    of,
    requests,
    result_ref,
)

# --- §12 row 7: tool protocol over several Loops ----------------------------------------------


def _loops_scenario() -> dict[str, Any]:
    document = base(tools=[{"name": "a"}, {"name": "b"}])
    document["steps"] = [{"ask": "do a and b, then a again"}, {"advance": True},
                         {"ask": "what happened?"}, {"advance": True}]
    document["model"] = {"business": [
        {"text": "", "tool_calls": [{"name": "a"}, {"name": "b"}]},
        {"text": "", "tool_calls": [{"name": "a"}]},
        {"text": "all ran"}, {"text": "a, b, then a"}]}
    document["tools"] = {"a": [{"text": "a done"}, {"text": "a again"}], "b": [{"text": "b done"}]}
    return document


def _loops_check(trace: Trace) -> None:
    # §6 over several Loops and Runs: Run 1 runs a batch (a, b), then a; its third request and
    # Run 2's request (Run 1 as recent history, §4) show each call message followed at once by
    # one result per call, in call order, answering that call — three results, none without
    # its call.
    equal(endings(trace), [(1, "succeeded", None), (2, "succeeded", None)], "Run endings")
    equal([e["name"] for e in of(trace, "tool_executed")], ["a", "b", "a"], "tools executed")
    for index in (2, 3):
        messages = requests(trace, "business")[index]["view"]["messages"]
        seen = []
        for at, message in enumerate(messages):
            calls = message["tool_calls"]
            if calls:
                after = messages[at + 1:at + 1 + len(calls)]
                seen.append(([c["name"] for c in calls],
                             [(m["kind"], m["call_id"] == c["call_id"], m["text"])
                              for m, c in zip(after, calls, strict=False)]))
        equal(seen, [(["a", "b"], [("tool_result", True, "a done"),
                                   ("tool_result", True, "b done")]),
                     (["a"], [("tool_result", True, "a again")])],
              f"request {index + 1}: each call message, then (kind, answers that call, text) "
              "of the messages after it", cites="CTX-6.2")
        equal(sum(m["kind"] == "tool_result" for m in messages), 3,
              f"tool results in request {index + 1}", cites="CTX-6.3")


ROW_07 = Case(
    "ROW-07", "every tool result keeps its call over several Loops and Runs", "§12 row 7",
    ("CTX-6.1", "CTX-6.2", "CTX-6.3"), _loops_scenario(), _loops_check)


# --- §12 row 7: a Run stopped mid-batch ---------------------------------------------------------


def _row7_scenario() -> dict[str, Any]:
    document = base(tools=[{"name": "a"}, {"name": "b"}])
    document["steps"] = [{"ask": "do a and b"}, {"advance": True}, {"ask": "what happened?"},
                         {"advance": True}]
    document["model"] = {"business": [
        {"text": "", "tool_calls": [{"name": "a"}, {"name": "b"}]},
        {"text": "a ran, b did not"}]}
    document["tools"] = {"a": [{"text": "a done"}]}
    document["triggers"] = [{"on": {"tool": "a", "ordinal": 1}, "do": {"stop": True}}]
    return document


def _row7_check(trace: Trace) -> None:
    # A stop while a runs: a finishes, b never starts; the next question's history keeps the
    # pair protocol — a's result, then a placeholder for b that does not claim it ran.
    equal(endings(trace), [(1, "stopped", None), (2, "succeeded", None)], "Run endings")
    equal([e["name"] for e in of(trace, "tool_executed")], ["a"], "tools executed")
    messages = requests(trace, "business")[-1]["view"]["messages"]
    group = [m for m in messages if m["tool_calls"] or m["kind"] in ("tool_result",
                                                                    "placeholder")]
    calls = [(c["call_id"], c["name"]) for c in group[0]["tool_calls"]]
    equal([c[1] for c in calls], ["a", "b"], "the calls of the stopped batch")
    equal([(m["kind"], m["call_id"]) for m in group[1:]],
          [("tool_result", calls[0][0]), ("placeholder", calls[1][0])],
          "results after the call (b's a placeholder: not a tool output, §6)", cites="CTX-6.12")


ROW_07_PLACEHOLDERS = Case(
    "ROW-07-PLACEHOLDERS", "a batch stopped mid-way gets placeholders for the calls that never "
    "ran", "§12 row 7", ("CTX-6.6", "CTX-6.10", "CTX-6.12", "CTX-10.18", "CTX-10.22"),
    _row7_scenario(), _row7_check, frozenset({"triggers", "stop"}))


# --- §12 row 8: a huge tool result ------------------------------------------------------------

_BODY = "".join(f"row {n:05d}\n" for n in range(2000))  # 20000 characters


def _row8_scenario() -> dict[str, Any]:
    document = base(window=40_000, output_reserve=2000, safety_margin=500,
                    tools=[{"name": "dump"}, {"name": "result.read"}])
    document["steps"] = [{"ask": "dump the table"}, {"advance": True}]
    document["model"] = {"business": [
        {"text": "", "tool_calls": [{"name": "dump"}]},
        {"text": "", "tool_calls": [{"name": "result.read", "arguments": {
            "result_ref": result_ref(_BODY), "from": 4000, "to": 4020}}]},
        {"text": "row 00400 is there"}]}
    document["tools"] = {"dump": [{"text": _BODY}],
                         "result.read": [{"text": _BODY[4000:4020]}]}
    return document



def _row8_check(trace: Trace) -> None:
    # The 20000-character result reaches the model as its first 4000 characters, marked with
    # the range and the full size; the read of 20 more characters is a new record of its own.
    results = [m for m in requests(trace, "business")[-1]["view"]["messages"]
               if m["kind"] == "tool_result"]
    equal(results[0]["text"], _BODY[:4000], "the preview", cites="CTX-6.14")
    cut = results[0]["truncation"]
    expect(cut is not None, "the preview is not marked truncated", cites="CTX-6.14")
    equal((cut["from_char"], cut["through_char"], cut["total_chars"]), (0, 4000, 20_000),
          "the preview's range", cites="CTX-6.14")
    equal(cut["result_ref"]["size_bytes"], 20_000, "the full result's size", cites="CTX-6.14")
    equal((results[1]["text"], results[1]["truncation"]), ("row 00400\nrow 00401\n", None),
          "the read", cites="CTX-6.18")


ROW_08 = Case(
    "ROW-08", "a huge result is a preview; a read is a new record", "§12 row 8",
    ("CTX-6.13", "CTX-6.14", "CTX-6.15", "CTX-6.17", "CTX-6.18"), _row8_scenario(),
    _row8_check)
