"""Conformance cases for what a call returns and what a request sends (§1, §3, §6, §8, §10):
every result — a tool's, or the answer of the Executor a Planner's ``delegate`` call ran —
goes through the same post-call chain, and what that chain decides is a change of the result's
record, never an overwrite: the raw stays for audit, the model sees the effective text with a
mark naming its source; and what a request's own pre-request hook changed is in what it sends,
a compaction request's material included.

Each rule is its own case, needing only what it reads: the delegation's redaction and deny
read the Planner's next request; the tool edit's mark reads what the provider receives; the raw
kept for audit reads the history API.
"""

from typing import Any

from ctxspec.conformance.case import (
    COMPACTING,
    Case,
    Trace,
    base,
    digest,
    endings,
    equal,
    exactly,
    expect,
    of,
    rendered_mark,
    request_text,
    requests,
    result_facts,
    result_ref,
)
from ctxspec.conformance.matrix_sessions import scenario

# --- §3, §10: an Executor's answer goes through the delegate call's post-call chain -------------

SECRET = "EXEC-SECRET 4411"
"""The Executor's answer: what the delegation returns before its post-call chain."""


def _delegate_scenario(item: dict[str, Any]) -> dict[str, Any]:
    """The Planner delegates once; the Executor runs no tool and answers ``SECRET``, so the only
    tool.post_call chain of the Session is the delegate call's (ordinal 1)."""
    document = base(executor={"tools": []})
    document["steps"] = [{"ask": "find the key"}, {"advance": True}]
    document["model"] = {"business": [
        {"text": "", "tool_calls": [{"name": "delegate", "arguments": {"task": "find it"}}]},
        {"text": "planner done"}], "executor": [{"text": SECRET}]}
    document["hooks"] = [{"point": "tool.post_call", "ordinal": 1, "items": [item]}]
    return document


def _planner_result(trace: Trace) -> dict[str, Any]:
    planner = [r for r in requests(trace, "business") if r["role"] == "root"]
    equal(len(planner), 2, "the Planner's business requests")
    results = [m for m in planner[1]["view"]["messages"] if m["kind"] == "tool_result"]
    equal(len(results), 1, "tool results in the Planner's second request")
    expect(all(SECRET not in request_text(r) for r in planner),
           f"the Planner read the Executor's raw answer {SECRET!r} its post-call hook "
           "replaced or denied")
    return dict(results[0])


def _delegate_modify_check(trace: Trace) -> None:
    # §3 "保存 raw_result，再提交 Hook 后有效结果及版本": the delegate call's post-call hook
    # replaces the Executor's answer before the Planner receives it; the Planner reads only
    # "REDACTED".
    equal(_planner_result(trace)["text"], "REDACTED", "the delegation's result the Planner reads")
    equal(endings(trace), [(1, "succeeded", None)], "Run endings")


def _delegate_deny_check(trace: Trace) -> None:
    # §3 "合法 deny … 必须阻止执行或交付": the delegation ran (the Executor answered), its ordinary
    # result is withheld, and the Planner gets the explicit denied state of a post-call deny.
    denied = result_facts(_planner_result(trace), "the delegation's result")
    equal((denied.get("status"), denied.get("stage"), denied.get("executed")),
          ("denied", "post", True), "the denied state the Planner receives")
    equal(endings(trace), [(1, "succeeded", None)], "Run endings")


# --- §1, §6: a tool post-call edit is a change of the record, marked, its raw kept -------------

RAW = "RAW-TOOL-TEXT 7"
EDITED = "EDITED-TOOL-TEXT"


def _edit_scenario(*reads: dict[str, Any]) -> dict[str, Any]:
    """One tool call whose result a post-call hook edits; the Run then reads its history."""
    document = base(tools=[{"name": "t"}])
    document["steps"] = [{"ask": "go"}, {"advance": True},
                         *({"read_history": read} for read in reads)]
    document["model"] = {"business": [{"text": "", "tool_calls": [{"name": "t"}]},
                                      {"text": "done"}]}
    document["tools"] = {"t": [{"text": RAW}]}
    document["hooks"] = [{"point": "tool.post_call", "ordinal": 1, "items": [
        {"payload_patch": [{"path": "result", "value": EDITED}]}]}]
    return document


def _edit_marked_check(trace: Trace) -> None:
    # §6 "按变更和来源标记重建", §2: the edited result is never passed off as the tool's own: what
    # the provider receives carries exactly one text_modified mark, on the tool message that
    # answers the call, naming a hook as its source; the raw text is not sent.
    request = requests(trace, "business")[1]
    message, mark = rendered_mark(request, "text_modified")
    equal(message["role"], "tool", "the role of the message the text_modified mark is in")
    expect(message["content"].startswith(EDITED),
           f"the edited result is not what the tool message says: {message['content']!r}")
    expect(bool(mark["sources"]) and all(s.split(":", 1)[0] == "hook" for s in mark["sources"]),
           f"the mark's sources name no hook: {mark['sources']}")
    expect(RAW not in request_text(request), "the raw result was sent though a hook replaced it")
    [decided] = exactly(1, of(trace, "hook_decided"), "hook_decided events")
    expect(bool(decided["changes"]), "the post-call item's hook_decided lists no change")


def _raw_kept_check(trace: Trace) -> None:
    # §1 "原始用户、模型和工具记录不可覆盖 … raw 则保留实际来源用于审计": the audit read of the raw
    # records serves the tool's own result, the read of the effective version the edit.
    raw, effective = exactly(2, of(trace, "history_read"), "history_read events")
    for read, text, what in ((raw, RAW, "raw"), (effective, EDITED, "effective")):
        equal(read["allowed"], True, f"the {what} audit read served")
        results = [r["text"] for r in read["records"] if r["message_kind"] == "tool_result"]
        equal(results, [digest(text)], f"the tool result the {what} audit read serves")


# --- §1, §3, §6: a body a post-call hook replaced is kept for audit, never read by the model -----

BODY = "SECRET-ROW " * 500
"""5500 characters: over the default preview bound of 4000, so the raw result is a preview
whose result_ref a model could name."""


def _redacted_read_scenario() -> dict[str, Any]:
    document = base(window=40_000, output_reserve=2000, safety_margin=500,
                    tools=[{"name": "dump"}, {"name": "result.read"}])
    document["steps"] = [{"ask": "dump it"}, {"advance": True}]
    document["model"] = {"business": [
        {"text": "", "tool_calls": [{"name": "dump"}]},
        {"text": "", "tool_calls": [{"name": "result.read", "arguments": {
            "result_ref": result_ref(BODY), "from": 0, "to": 10}}]},
        {"text": "done"}]}
    document["tools"] = {"dump": [{"text": BODY}], "result.read": [{"text": "made up"}]}
    document["hooks"] = [{"point": "tool.post_call", "ordinal": 1, "items": [
        {"payload_patch": [{"path": "result", "value": "REDACTED"}]}]}]
    return document


def _redacted_read_check(trace: Trace) -> None:
    # The dump's result is replaced by "REDACTED" before delivery: its raw body stays in the
    # store for audit (§1), but a result.read naming the raw body's result_ref — computed here
    # from the scripted text — is refused like any reference the role was never shown (§6), so
    # no request carries the withheld text (§3 "合法 deny … 必须阻止执行或交付" holds for an edit
    # too: what the hook withheld is not delivered by another way).
    last = requests(trace, "business")[-1]
    results = [m for m in last["view"]["messages"] if m["kind"] == "tool_result"]
    equal([m["text"] for m in results[:1]], ["REDACTED"], "the dump's result")
    refused = result_facts(results[1], "the read of the replaced body")
    equal(refused.get("status"), "error", "the read of the replaced body's status")
    expect("made up" not in results[1]["text"], "the read was answered by a tool port")
    expect(all("SECRET-ROW" not in request_text(r) for r in requests(trace)),
           "a request carries the body a post-call hook replaced")


# --- §3, §8: a compaction request's own pre-request redaction is in the material it sends --------


def _redacted_chunk_scenario() -> dict[str, Any]:
    """The hook matrix's tool Session (``matrix_sessions``): t's 3611-character result brings
    the second request over the trigger; the compaction request's pre-request hook replaces
    that result's text before it is summarised."""
    document = scenario("tool", "root")
    document["hooks"] = [{"point": "compaction.pre_request", "ordinal": 1, "items": [
        {"context_patch": [{"target": "last", "field": "text", "value": "REDACTED-MATERIAL"}]}]}]
    return document


def _redacted_chunk_check(trace: Trace) -> None:
    # §3 "若修改当前调用的对应字段，必须同步反映到尚未发送的 effective payload", §8 "从已提交有效
    # 上下文及修改版本生成摘要材料": the compaction request carries the redacted text, never the
    # result the hook replaced; the business request after it does not either.
    [compaction] = exactly(1, requests(trace, "compaction"), "compaction requests")
    expect("REDACTED-MATERIAL" in request_text(compaction),
           "the compaction request does not carry its pre-request hook's change")
    expect(all("RAW-RESULT" not in request_text(r) for r in requests(trace)[1:]),
           "a request after the compaction request's pre-request redaction carries the text "
           "it replaced")
    equal(endings(trace), [(1, "succeeded", None)], "Run endings")


AUDIT = {"kind": "audit", "bodies": True}

CASES: tuple[Case, ...] = (
    Case("S3-DELEGATE-POST-MODIFY", "an Executor's answer goes through the delegate call's "
         "post-call chain: its redaction is what the Planner reads", "§3",
         ("CTX-3.16", "CTX-10.14"),
         _delegate_scenario({"payload_patch": [{"path": "result", "value": "REDACTED"}]}),
         _delegate_modify_check, frozenset({"hooks", "planner_executor"})),
    Case("S3-DELEGATE-POST-DENY", "a post-call deny of a delegate call withholds the "
         "Executor's answer: the Planner reads the denied state", "§3",
         ("CTX-3.71", "CTX-3.18", "CTX-10.14"), _delegate_scenario({"decision": "deny"}),
         _delegate_deny_check, frozenset({"hooks", "planner_executor"})),
    Case("S6-TOOL-EDIT-MARKED-SENT", "a tool post-call edit is a change of the result's record, "
         "marked by its hook source in what the provider receives", "§6",
         ("CTX-6.16", "CTX-1.10"), _edit_scenario(), _edit_marked_check,
         frozenset({"hooks"})),
    Case("S1-TOOL-EDIT-RAW-KEPT", "a tool post-call edit never overwrites the tool's record: "
         "the raw audit read serves the tool's own result", "§1",
         ("CTX-1.9", "CTX-1.11"),
         _edit_scenario({**AUDIT, "content": "raw"}, {**AUDIT, "content": "effective"}),
         _raw_kept_check, frozenset({"hooks", "history_api", "history_bodies"})),
    Case("S6-REPLACED-BODY-UNREAD", "result.read refuses the raw body behind a result a "
         "post-call hook replaced", "§6", ("CTX-6.18", "CTX-1.11"), _redacted_read_scenario(),
         _redacted_read_check, frozenset({"hooks"})),
    Case("S8-CHUNK-REDACTION-SENT", "a compaction request's pre-request redaction of its "
         "material is what the compaction model receives", "§8", ("CTX-8.20", "CTX-3.69"),
         _redacted_chunk_scenario(), _redacted_chunk_check, frozenset({"hooks", *COMPACTING})),
)
