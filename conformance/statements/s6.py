"""Conformance cases for normative statements of §6 outside the §12 table and the worked
examples (IDs ``S6-<name>``): each a scenario and a predicate over the neutral trace, its
expected values derived by hand from the design (see conformance/case.py)."""

import json
from typing import Any

from ctxspec.conformance.case import (
    Case,
    Trace,
    base,
    digest,
    endings,
    equal,
    example,
    expect,
    of,
    rendered_mark,
    rendered_pairing,
    rendered_size,
    requests,
    result_facts,
    result_ref,
)

# --- §6 statements: one item's failure is its own structured error ------------------------------


def _item_error_scenario() -> dict[str, Any]:
    document = base(tools=[{"name": "a"}, {"name": "b"}, {"name": "c"}])
    document["steps"] = [{"ask": "run all three"}, {"advance": True}]
    document["model"] = {"business": [
        {"text": "", "tool_calls": [{"name": "a"}, {"name": "b"}, {"name": "c"}]},
        {"text": "b failed"}]}
    document["tools"] = {"a": [{"text": "a ok"}], "b": [{"error": "ENOENT"}],
                         "c": [{"text": "c ok"}]}
    return document


def _item_error_check(trace: Trace) -> None:
    # §6: b's business failure is a structured error inside b's own tool result; a's and c's
    # results are kept, all three in action order, and the Run goes on to its answer.
    messages = [m for m in requests(trace, "business")[-1]["view"]["messages"]
                if m["kind"] == "tool_result"]
    results = [m["text"] for m in messages]
    equal(len(results), 3, "tool results in the second request")
    equal((results[0], results[2]), ("a ok", "c ok"), "the results of a and c")
    # The design fixes no wording for the error, only that it is structured (an error, Q210)
    # and b's own: its result names the tool's failure.
    equal(result_facts(messages[1], "b's result").get("status"), "error", "b's result's status")
    expect("ENOENT" in results[1], f"b's result does not name its failure ENOENT: {results[1]!r}")
    equal(endings(trace), [(1, "succeeded", None)], "Run endings")


# --- §6 statements: a reference is never passed off as the full text ---------------------------

_BODY = "".join(f"row {n:05d}\n" for n in range(1000))  # 10000 characters


def _preview_scenario() -> dict[str, Any]:
    document = base(window=40_000, output_reserve=2000, safety_margin=500,
                    tools=[{"name": "dump"}])
    document["steps"] = [{"ask": "dump the table"}, {"advance": True}, {"ask": "and row 900?"},
                         {"advance": True}]
    document["model"] = {"business": [{"text": "", "tool_calls": [{"name": "dump"}]},
                                      {"text": "dumped"}, {"text": "not read yet"}]}
    document["tools"] = {"dump": [{"text": _BODY}]}
    return document


def _preview_check(trace: Trace) -> None:
    # §6: a 10000-character result reaches the model as its first 4000 characters marked as a
    # bounded preview (range, full size, result_ref) — in the same Run and in Run 2's history
    # alike: the view never expands it into the full text nor drops the mark that says it is
    # only part of it.
    for request, what in ((requests(trace, "business")[1], "the second loop"),
                          (requests(trace, "business")[2], "Run 2's request")):
        [result] = [m for m in request["view"]["messages"] if m["kind"] == "tool_result"]
        equal(result["text"], _BODY[:4000], f"{what}: the result's text")
        cut = result["truncation"]
        expect(cut is not None, f"{what}: the preview is not marked as truncated")
        equal((cut["from_char"], cut["through_char"], cut["total_chars"]), (0, 4000, 10000),
              f"{what}: the preview's range")
        expect(bool(cut["result_ref"]), f"{what}: the preview names no result_ref")
        expect(all("row 00900" not in m["text"] for m in request["view"]["messages"]),
               f"{what}: text beyond the preview reached the model")


# --- §6 statements: the unread full body stays readable for audit and on demand ----------------

_TABLE = "".join(f"row {n:05d}\n" for n in range(2000))  # 20000 characters, as in §12 row 8


def _audit_scenario() -> dict[str, Any]:
    document = base(window=40_000, output_reserve=2000, safety_margin=500,
                    tools=[{"name": "dump"}])
    readers = [{"kind": "audit", "bodies": True}, {"kind": "role", "role": "root", "bodies": True},
               {"kind": "role", "role": "executor", "bodies": True}]
    document["steps"] = [{"ask": "dump the table"}, {"advance": True},
                         *({"read_history": reader} for reader in readers)]
    document["model"] = {"business": [{"text": "", "tool_calls": [{"name": "dump"}]},
                                      {"text": "2000 rows"}]}
    document["tools"] = {"dump": [{"text": _TABLE}]}
    return document


def _audit_check(trace: Trace) -> None:
    # The dump's 20000 characters reach the model as a bounded preview of the first 4000 (the
    # default preview bound); nothing reads the rest. After the Run, authorised audit and the
    # root role (an on-demand read) are served the Session's four records — the question, the
    # call, the result as recorded (still the 4000-character preview: history does not expand
    # it) and the answer — and, behind the result's result_ref, the full 20000-character body:
    # its length and SHA-256 computed here from the scripted text. A role the history is not
    # for is served nothing, body or record.
    [result] = [m for m in requests(trace, "business")[-1]["view"]["messages"]
                if m["kind"] == "tool_result"]
    equal(result["text"], _TABLE[:4000], "what the model saw of the result")
    audit, role, other = of(trace, "history_read")
    for read, who in ((audit, "audit"), (role, "the root role")):
        equal(read["allowed"], True, f"{who}'s read served")
        equal([(r["message_kind"], r["text"], r["full_body"]) for r in read["records"]],
              [("user_ref", digest("dump the table"), None),
               ("assistant", digest(""), None),
               ("tool_result", digest(_TABLE[:4000]), digest(_TABLE)),
               ("assistant", digest("2000 rows"), None)], f"what {who} reads")
    equal((other["allowed"], other["records"]), (False, []), "an executor role's read")


# --- §6, §7: what the provider is sent — a preview marked as one, and counted in I ---------------


def _sent_preview_scenario() -> dict[str, Any]:
    """§12 row 8's Session: a 20000-character dump, then a read of 20 more characters."""
    document = base(window=40_000, output_reserve=2000, safety_margin=500, estimator="chars",
                    tools=[{"name": "dump"}, {"name": "result.read"}])
    document["steps"] = [{"ask": "dump the table"}, {"advance": True}]
    document["model"] = {"business": [
        {"text": "", "tool_calls": [{"name": "dump"}]},
        {"text": "", "tool_calls": [{"name": "result.read", "arguments": {
            "result_ref": result_ref(_TABLE), "from": 4000, "to": 4020}}]},
        {"text": "row 00400 is there"}]}
    document["tools"] = {"dump": [{"text": _TABLE}]}
    return document


# --- §6: result.read answers the stored range behind a result_ref -------------------------------


def _read_scenario() -> dict[str, Any]:
    document = _sent_preview_scenario()
    document["model"]["business"][1:] = [
        {"text": "", "tool_calls": [
            {"name": "result.read", "arguments": {"result_ref": result_ref(_TABLE), "from": 19_990,
                                                  "to": 20_000}},
            {"name": "result.read", "arguments": {"result_ref": result_ref("another body"),
                                                  "from": 0, "to": 10}}]},
        {"text": "the last row is row 01999"}]
    # What a tool port would answer for result.read if asked: never the stored body.
    document["tools"]["result.read"] = [{"text": "made up"}, {"text": "made up"}]
    return document


def _read_check(trace: Trace) -> None:
    # The dump's 20000 characters are shown as a 4000-character preview with its result_ref.
    # The model reads characters [19990, 20000) behind that ref: the runtime answers the stored
    # range — "row 01999\n", the table's last 10 characters — as a new tool result (§6); a
    # read of a reference this role was never shown is refused with a structured error, not
    # answered with made-up text.
    last = requests(trace, "business")[-1]
    rendered_pairing(last)
    messages = [m for m in last["view"]["messages"] if m["kind"] == "tool_result"]
    equal(messages[1]["text"], _TABLE[19_990:20_000], "the read of [19990, 20000)")
    refused = result_facts(messages[2], "the read of an unknown result_ref")
    equal(refused.get("status"), "error", "the read of an unknown result_ref's status")
    expect("made up" not in messages[2]["text"],
           f"the read of an unknown result_ref was answered: {messages[2]['text']!r}")
    equal(endings(trace), [(1, "succeeded", None)], "Run endings")


def _sent_preview_check(trace: Trace) -> None:
    # ROW-08's Session: the dump's 20000 characters reach the model as the first 4000. What the
    # adapter sends for each later request carries, in the tool message answering the dump
    # call, a truncated mark with the covered range [0, 4000) of 20000 and the result_ref of
    # the whole body (its SHA-256 computed here from the scripted text); the mark is in the
    # content the model receives, beyond the 4000 characters. With the character estimator
    # (one token per character, no overhead), I counts every character sent: at least the
    # content of every message plus the tool schemas (only the calls' own text may add more).
    body = _TABLE
    ref = result_ref(body)
    later = requests(trace, "business")[1:]
    expect(len(later) == 2, f"business requests after the dump: {len(later)}")
    for request in later:
        rendered_pairing(request)
        calls = [c["id"] for m in request["rendered"]["messages"] for c in m["tool_calls"]]
        message, mark = rendered_mark(request, "truncated")
        equal((mark["call_id"], message["tool_call_id"]), (calls[0], calls[0]),
              "the call whose result the truncated mark is in")
        equal((mark["from_char"], mark["through_char"], mark["total_chars"], mark["result_ref"]),
              (0, 4000, 20_000, ref), "the mark's range and result_ref")
        expect(body[:4000] in message["content"] and len(message["content"]) > 4000,
               "the content sent is the bare preview: the mark is not in what the model gets")
        expect(body[4000:4100] not in message["content"], "text beyond the preview was sent")
        expect(request["estimated_input_tokens"] >= rendered_size(request),
               f"I = {request['estimated_input_tokens']} does not count all that was sent "
               f"({rendered_size(request)} characters of content and schemas)")


# --- §2, §6, §12 参数修改反馈: a hook's change to a call's arguments is told to the model ---


def _adjusted_check(trace: Trace) -> None:
    # tool-batch-hook: the model proposed write(path="a.md"); the pre-call hook moved it to
    # reports/a.md, which ran. The next request shows the call with reports/a.md, and — so the
    # change never passes as the model's own (§2) and the model sees the adjustment, not only
    # audit (§12) — one arguments_adjusted mark for write, naming its source, with the proposed
    # and the effective arguments, in the tool message answering write; read is unmarked.
    [request] = requests(trace, "business")[1:]
    rendered_pairing(request)
    [assistant] = [m for m in request["rendered"]["messages"] if m["tool_calls"]]
    write, _read = assistant["tool_calls"]
    equal(json.loads(write["arguments"]), {"path": "reports/a.md", "body": "report"},
          "write's arguments as sent (the effective ones)")
    message, mark = rendered_mark(request, "arguments_adjusted")
    equal((mark["call_id"], message["tool_call_id"]), (write["id"], write["id"]),
          "the call the adjustment mark is for, and the message it is in")
    equal((json.loads(mark["proposed_arguments"]), json.loads(mark["effective_arguments"])),
          ({"path": "a.md", "body": "report"}, {"path": "reports/a.md", "body": "report"}),
          "the mark's proposed and effective arguments")
    expect(bool(mark["sources"]), "the adjustment mark names no source")
    expect(len(message["content"]) > len("wrote 6 bytes to reports/a.md"),
           "the mark is not in the content the model receives")
    expect(request["estimated_input_tokens"] >= rendered_size(request),
           "I does not count all that was sent")


# --- §2, §6: a hook's change to a model answer's text is told to the model -----------------------


def _text_modified_scenario() -> dict[str, Any]:
    document = base(estimator="chars")
    document["steps"] = [{"ask": "q1"}, {"advance": True}, {"ask": "q2"}, {"advance": True},
                         {"ask": "q3"}, {"advance": True}]
    document["model"] = {"business": [{"text": "raw answer"}, {"text": "a2"}, {"text": "a3"}]}
    # The first post-response chain rewrites the answer's text; the others allow it unchanged.
    document["hooks"] = [{"point": "model.post_response", "ordinal": 1, "items": [
        {"payload_patch": [{"path": "text", "value": "checked answer"}]}]}]
    return document


def _text_modified_check(trace: Trace) -> None:
    # Run 1's answer "raw answer" became "checked answer" by a post-response hook; Run 2's "a2"
    # passed unchanged. In what the adapter sends for Run 3 the edited answer is never passed
    # off as the provider's text (§2) and the rebuilt view marks the change by its source (§6):
    # exactly one text_modified mark, in the assistant message carrying "checked answer", naming
    # a hook as its source; "a2" and the questions carry none. The mark is in the content the
    # model receives (beyond the answer's own 14 characters) and I counts it (§7).
    run3 = requests(trace, "business")[-1]
    rendered_pairing(run3)
    message, mark = rendered_mark(run3, "text_modified")
    equal(message["role"], "assistant", "the role of the message the text_modified mark is in")
    expect(message["content"].startswith("checked answer")
           and len(message["content"]) > len("checked answer"),
           f"the edited answer is sent without its mark: {message['content']!r}")
    expect("raw answer" not in json.dumps(run3["rendered"]),
           "the provider's raw answer was sent though the hook replaced it")
    expect(bool(mark["sources"]) and all(s.split(":", 1)[0] == "hook" for s in mark["sources"]),
           f"the mark's sources name no hook: {mark['sources']}")
    unchanged = [m for m in run3["rendered"]["messages"] if m["content"] == "a2"]
    equal([m["marks"] for m in unchanged], [[]], "the marks of the unchanged answer a2")
    expect(run3["estimated_input_tokens"] >= rendered_size(run3),
           "I does not count all that was sent")
    equal(endings(trace), [(1, "succeeded", None), (2, "succeeded", None),
                           (3, "succeeded", None)], "Run endings")


CASES: tuple[Case, ...] = (
    Case("S6-ITEM-ERROR", "one item's failure is a structured error of its own result; the "
         "others are kept", "§6", ("CTX-6.5",), _item_error_scenario(), _item_error_check),
    Case("S6-PREVIEW-STAYS", "a bounded preview stays marked as partial, in history too", "§6",
         ("CTX-6.20",), _preview_scenario(), _preview_check),
    Case("S6-AUDIT-FULL-BODY", "the unread full body behind a preview is readable by audit",
         "§6", ("CTX-6.19",), _audit_scenario(), _audit_check,
         frozenset({"history_api", "history_bodies"})),
    Case("S6-PREVIEW-MARKED-SENT", "a truncated preview is marked, with its range and "
         "result_ref, in what the provider receives, and counted in I", "§6",
         ("CTX-6.14", "CTX-6.15", "CTX-6.21"), _sent_preview_scenario(), _sent_preview_check,
         frozenset({"estimator_injection"})),
    Case("S6-ARGS-ADJUSTED-SENT", "a hook's change to a call's arguments is marked, by change "
         "and source, in what the provider receives", "§6",
         ("CTX-6.16", "CTX-2.32", "CTX-3.57"), example("tool-batch-hook"), _adjusted_check,
         frozenset({"hooks", "estimator_injection"})),
    Case("S6-TEXT-MODIFIED-SENT", "a hook's change to a model answer's text is marked, by "
         "source, in what the provider receives, and counted in I", "§6",
         ("CTX-6.16", "CTX-2.32"), _text_modified_scenario(), _text_modified_check,
         frozenset({"hooks", "estimator_injection"})),
    Case("S6-RESULT-READ", "result.read answers the stored range behind a result_ref, and "
         "refuses a reference the role was never shown", "§6", ("CTX-6.18", "CTX-6.19"),
         _read_scenario(), _read_check),
)
