"""Conformance cases for normative statements of §3 outside the §12 table and the worked
examples (IDs ``S3-<name>``): each a scenario and a predicate over the neutral trace, its
expected values derived by hand from the design (see conformance/case.py)."""

import json
from typing import Any

from ctxspec.conformance.case import (
    Case,
    Trace,
    base,
    endings,
    equal,
    exactly,
    example,
    expect,
    lines,
    of,
    requests,
    result_facts,
)
from ctxspec.conformance.sessions import corrected_summary

# --- §3: a hook chain is asked once; internal persistence never asks it again ----------------


def _asked_once_scenario() -> dict[str, Any]:
    document = example("tool-batch-hook")
    document["hooks"] = [*document["hooks"], {
        "point": "model.pre_request", "ordinal": 2, "items": [{"context_patch": [
            {"target": "question", "field": "note", "operation": "append_annotation",
             "value": "the report is due Friday"}]}]}]
    return document


def _asked_once_check(trace: Trace) -> None:
    # tool-batch-hook plus a pre-request hook that annotates the second request. Two business
    # requests ask the pre-request chain twice, two calls ask the pre-call chain twice; saving
    # the hook's change (a mutation and a new revision), feeding the results back and
    # projecting the next request are internal and ask no chain again: exactly four calls.
    equal([(e["point"], e["stage"]) for e in of(trace, "hook_called")],
          [("model.pre_request", "pre"), ("tool.pre_call", "pre"), ("tool.pre_call", "pre"),
           ("model.pre_request", "pre")], "hook chains asked")
    equal([(d["point"], d["patch_valid"]) for d in of(trace, "hook_decided")],
          [("tool.pre_call", True), ("model.pre_request", True)], "hook decisions")
    equal(len(requests(trace)), 2, "requests")


# --- §3: the gateway sends the frozen request on every attempt ---------------------------------


def _frozen_retry_scenario() -> dict[str, Any]:
    document = base(tools=[{"name": "t"}])
    document["steps"] = [{"ask": "q1"}, {"advance": True}]
    document["model"] = {"business": [{"text": "", "tool_calls": [{"name": "t"}]},
                                      {"fail": "reset"}, {"text": "done"}]}
    document["tools"] = {"t": [{"text": "r"}]}
    return document


def _frozen_retry_check(trace: Trace) -> None:
    # Loop 2's first attempt fails before any output; attempt 2 of the same Operation sends the
    # request frozen for it — the same purpose key, view (hash and messages) and figures; the
    # gateway picks no Runs and drops no tool result of its own.
    _, first, second = exactly(3, requests(trace, "business"), "business requests")
    equal((first["purpose_key"] == second["purpose_key"], first["attempt"], second["attempt"]),
          (True, 1, 2), "loop 2's attempts (same purpose key, attempts 1 and 2)")
    equal(second["view_hash"], first["view_hash"], "attempt 2's view hash")
    equal(lines(second), lines(first), "attempt 2's messages")
    equal((second["estimated_input_tokens"], second["max_output_tokens"]),
          (first["estimated_input_tokens"], first["max_output_tokens"]), "attempt 2's figures")
    equal([kind for _, kind, _ in lines(second)],
          ["system_prompt", "user_ref", "assistant", "tool_result"], "attempt 2's records")
    equal(endings(trace), [(1, "succeeded", None)], "Run endings")


# --- §3: a hook's change to the model input is what every later consumer sees ----------------


def _hook_seen_scenario() -> dict[str, Any]:
    document = base(tools=[{"name": "t"}])
    document["steps"] = [{"ask": "go"}, {"advance": True}, {"ask": "again"}, {"advance": True}]
    document["model"] = {"business": [{"text": "first", "tool_calls": [{"name": "t"}]},
                                      {"text": "second", "tool_calls": [{"name": "t"}]},
                                      {"text": "third"}, {"text": "fourth"}]}
    document["tools"] = {"t": [{"text": "r1"}, {"text": "r2"}]}
    document["hooks"] = [{"point": "model.pre_request", "ordinal": 2, "items": [
        {"context_patch": [{"target": "first_assistant", "field": "text",
                            "value": "first, corrected"}]}]}]
    return document


def _hook_seen_check(trace: Trace) -> None:
    # The hook corrects the first decision before request 2 is frozen: request 2 (the current
    # call), request 3 (a later Loop) and Run 2's request (history) all show the corrected
    # text and never the original; request 1, frozen before, keeps none of it.
    business = requests(trace, "business")
    equal(len(business), 4, "business requests")
    for n, request in enumerate(business[1:], start=2):
        texts = [text for _, kind, text in lines(request) if kind == "assistant"]
        equal(texts[0], "first, corrected", f"request {n}'s first decision")
    expect(all("corrected" not in text for _, _, text in lines(business[0])),
           "request 1, frozen before the hook, changed")


# --- §3: record IDs are stable through compaction and a retired summary ------------------------


def _stable_ids_check(trace: Trace) -> None:
    # ROW-20's Session: loop 2 shows the first decision; loop 3 is compacted (the decision is
    # covered by the summary); loop 4 shows it again, corrected. The record the hook reads and
    # corrects keeps its ID throughout, and the question keeps its ID in every request.
    business = requests(trace, "business")
    equal(len(business), 4, "business requests")
    first = business[1]["view"]["messages"][2]
    equal(first["text"][:3], "AAA", "loop 2's third message is the first decision")
    corrected = next(m for m in business[3]["view"]["messages"] if m["text"] == "A, corrected")
    equal(corrected["record_id"], first["record_id"], "the corrected decision's record ID")
    question_ids = {next(m["record_id"] for m in r["view"]["messages"]
                         if m["kind"] == "user_ref") for r in business}
    equal(len(question_ids), 1, "record IDs the question had across four requests")


# --- §3: a call argument is addressed by its call_id, never by a view index --------------------


def _addressing_scenario() -> dict[str, Any]:
    document = base(tools=[{"name": "write"}])
    document["steps"] = [{"ask": "write both"}, {"advance": True}]
    document["model"] = {"business": [
        {"text": "", "tool_calls": [{"name": "write", "arguments": {"path": "a.md"}},
                                    {"name": "write", "arguments": {"path": "c.md"}}]},
        {"text": "done"}]}
    document["tools"] = {"write": [{"text": "ok a"}, {"text": "ok c"}]}
    document["hooks"] = [
        {"point": "tool.pre_call", "ordinal": 1, "items": [{"context_patch": [
            {"target": "call", "field": "/messages/2/tool_calls/0/arguments/path",
             "value": "b.md"}]}]},
        {"point": "tool.pre_call", "ordinal": 2, "items": [{"context_patch": [
            {"target": "call", "field": "tool_call:{call_id}.arguments.path",
             "value": "d.md"}]}]}]
    return document


def _addressing_check(trace: Trace) -> None:
    # The first call's hook writes a view index (/messages/2/tool_calls/0/...): no semantic
    # field, so its patch is invalid and the allow goes on with a.md. The second call's hook
    # writes only the context side by its stable call_id: the registry maps it to the payload's
    # arguments.path, so the handler runs with d.md and the record the model sees says d.md.
    decided = [(d["patch_valid"], bool(d["diagnostics"])) for d in of(trace, "hook_decided")]
    equal(decided, [(False, True), (True, False)], "(patch valid, diagnosed) per call")
    equal([(e["proposed_arguments"]["path"], e["effective_arguments"]["path"])
           for e in of(trace, "tool_executed")], [("a.md", "a.md"), ("c.md", "d.md")],
          "(proposed, effective) paths")
    decision = next(m for m in requests(trace, "business")[1]["view"]["messages"]
                    if m["tool_calls"])
    equal([json.loads(c["arguments"])["path"] for c in decision["tool_calls"]],
          ["a.md", "d.md"], "the paths the model sees")


# --- §3: overlapping writes of one item ---------------------------------------------------------


def _overlap_scenario() -> dict[str, Any]:
    path = "tool_call:{call_id}.arguments.path"
    items = [
        # 1: both sides write the same value
        {"payload_patch": [{"path": "arguments.path", "value": "b.md"}],
         "context_patch": [{"target": "call", "field": path, "value": "b.md"}]},
        # 2: the same field twice in one patch with different values
        {"payload_patch": [{"path": "arguments.path", "value": "b.md"},
                           {"path": "arguments.path", "value": "c.md"}]},
        # 3: the parent replaced, a child written with another value
        {"payload_patch": [{"path": "arguments", "value": {"path": "b.md", "body": "3"}},
                           {"path": "arguments.path", "value": "c.md"}]},
        # 4: the parent replaced, the child written with the same value
        {"payload_patch": [{"path": "arguments", "value": {"path": "b.md", "body": "new"}},
                           {"path": "arguments.path", "value": "b.md"}]},
        # 5: the §3 example plus a second, untouched field: payload path and body, context path
        {"payload_patch": [{"path": "arguments.path", "value": "reports/a.md"},
                           {"path": "arguments.body", "value": "new"}],
         "context_patch": [{"target": "call", "field": path, "value": "other/a.md"}]},
    ]
    document = base(tools=[{"name": "write"}])
    document["steps"] = [{"ask": "write five"}, {"advance": True}]
    document["model"] = {"business": [
        {"text": "", "tool_calls": [{"name": "write", "arguments": {"path": "a.md", "body": str(n)}}
                                    for n in range(1, 6)]},
        {"text": "done"}]}
    document["tools"] = {"write": [{"text": f"ok {n}"} for n in range(1, 6)]}
    document["hooks"] = [{"point": "tool.pre_call", "ordinal": n, "items": [item]}
                         for n, item in enumerate(items, start=1)]
    return document


def _overlap_check(trace: Trace) -> None:
    # 1: the same final value on both sides is one change with two sources: valid, b.md.
    # 2: two values for one field in one patch: array order decides nothing — the whole item
    #    is invalid, HOOK_PATCH_CONFLICT, a.md stays.
    # 3: the parent's path (b.md) and the child's (c.md) differ after expansion: conflict.
    # 4: expanded, the parent and the child agree on b.md: valid, body becomes "new".
    # 5: payload reports/a.md against context other/a.md: all of the item's patches are
    #    invalid, so even its untouched body change is dropped — a.md with body "5" runs.
    decided = [(d["patch_valid"], d["diagnostics"], len(d["changes"]))
               for d in of(trace, "hook_decided")]
    equal([(valid, codes) for valid, codes, _ in decided],
          [(True, []), (False, ["HOOK_PATCH_CONFLICT"]), (False, ["HOOK_PATCH_CONFLICT"]),
           (True, []), (False, ["HOOK_PATCH_CONFLICT"])], "(patch valid, diagnostics) per item")
    equal(decided[0][2], 1, "changes kept for the equal writes of item 1")
    by_body = {e["proposed_arguments"]["body"]: e["effective_arguments"]
               for e in of(trace, "tool_executed")}
    equal(by_body, {"1": {"path": "b.md", "body": "1"}, "2": {"path": "a.md", "body": "2"},
                    "3": {"path": "a.md", "body": "3"}, "4": {"path": "b.md", "body": "new"},
                    "5": {"path": "a.md", "body": "5"}}, "effective arguments by call")
    decision = next(m for m in requests(trace, "business")[1]["view"]["messages"]
                    if m["tool_calls"])
    equal([json.loads(c["arguments"]) for c in decision["tool_calls"]],
          [by_body[str(n)] for n in range(1, 6)], "the calls the model sees")


# --- §3: a stale item rebases onto an untouched field ----------------------------------------


def _rebase_scenario() -> dict[str, Any]:
    document = base(tools=[{"name": "write"}])
    document["steps"] = [{"ask": "write it"}, {"advance": True}]
    document["model"] = {"business": [
        {"text": "", "tool_calls": [{"name": "write", "arguments": {"path": "a.md",
                                                                     "body": "x"}}]},
        {"text": "done"}]}
    document["tools"] = {"write": [{"text": "ok"}]}
    document["hooks"] = [{"point": "tool.pre_call", "items": [
        {"payload_patch": [{"path": "arguments.path", "value": "b.md"}]},
        {"stale_base": True, "payload_patch": [{"path": "arguments.body", "value": "y"}]}]}]
    return document


def _rebase_check(trace: Trace) -> None:
    # Item 2 patches the revision its chain started from, but item 1 changed only the path:
    # the body is untouched since item 2's base, so its change rebases onto the new head —
    # valid, no CONTEXT_REVISION_CONFLICT — and the handler runs with both changes. The stale
    # item is checked, never asked again: one call of the chain.
    equal([(d["chain_position"], d["patch_valid"], d["diagnostics"])
           for d in of(trace, "hook_decided")], [(0, True, []), (1, True, [])],
          "hook decisions")
    equal([e["effective_arguments"] for e in of(trace, "tool_executed")],
          [{"path": "b.md", "body": "y"}], "write's effective arguments")
    equal(len([e for e in of(trace, "hook_called") if e["point"] == "tool.pre_call"]), 1,
          "pre-call chains asked")


# --- §3: the post-call stage, its patch and its deny ---------------------------------------------


def _post_scenario() -> dict[str, Any]:
    document = base(tools=[{"name": "write"}])
    document["steps"] = [{"ask": "write both"}, {"advance": True}]
    document["model"] = {"business": [
        {"text": "", "tool_calls": [{"name": "write", "arguments": {"path": "a.md"}},
                                    {"name": "write", "arguments": {"path": "b.md"}}]},
        {"text": "done"}]}
    document["tools"] = {"write": [{"text": "wrote a secret"}, {"text": "wrote b secret"}]}
    document["hooks"] = [
        {"point": "tool.post_call", "ordinal": 1, "items": [
            {"payload_patch": [{"path": "result", "value": "wrote a (redacted)"}]},
            {"context_patch": [{"target": "call", "field": "tool_call:{call_id}.arguments.path",
                                "value": "z.md"}]}]},
        {"point": "tool.post_call", "ordinal": 2, "items": [{"decision": "deny"}]}]
    return document


def _post_check(trace: Trace) -> None:
    # Both calls run. a's post-call hook replaces the not yet delivered result — the model
    # sees the effective "wrote a (redacted)", never the raw text — and a second item's attempt
    # to change the executed call's path is invalid: a.md stays everywhere. b's post-call deny:
    # the call happened (executed), its ordinary result is not delivered, and the model gets an
    # explicit denied result, not a success.
    equal([e["effective_arguments"]["path"] for e in of(trace, "tool_executed")],
          ["a.md", "b.md"], "calls executed")
    equal([(d["decision"], d["patch_valid"]) for d in of(trace, "hook_decided")],
          [("allow", True), ("allow", False), ("deny", True)], "post-call decisions")
    messages = requests(trace, "business")[1]["view"]["messages"]
    decision = next(m for m in messages if m["tool_calls"])
    equal([json.loads(c["arguments"])["path"] for c in decision["tool_calls"]],
          ["a.md", "b.md"], "the executed calls as the model sees them")
    results = [m for m in messages if m["kind"] == "tool_result"]
    equal(results[0]["text"], "wrote a (redacted)", "a's result")
    denied = result_facts(results[1], "b's denied result")
    equal((denied.get("status"), denied.get("stage"), denied.get("executed"),
           denied.get("result_delivered")), ("denied", "post", True, False), "b's result")
    expect(all("secret" not in m["text"] for m in messages), "a raw result reached the model")
    equal(endings(trace), [(1, "succeeded", None)], "Run endings")


# --- §3: executed facts and user inputs take only sourced annotations --------------------------


def _annotation_scenario() -> dict[str, Any]:
    document = base(tools=[{"name": "write"}])
    document["steps"] = [{"ask": "write it"}, {"advance": True}]
    document["model"] = {"business": [
        {"text": "", "tool_calls": [{"name": "write", "arguments": {"path": "a.md"}}]},
        {"text": "done"}]}
    document["tools"] = {"write": [{"text": "ok"}]}
    document["hooks"] = [{"point": "tool.post_call", "items": [
        {"context_patch": [{"target": "first_assistant", "field": "text",
                            "value": "I wrote b.md"}]},
        {"context_patch": [{"target": "first_assistant", "field": "note",
                            "operation": "append_annotation", "value": "the path was wrong"}]},
        {"context_patch": [{"target": "question", "field": "text", "value": "tampered"}]},
        {"context_patch": [{"target": "question", "field": "note",
                            "operation": "append_annotation", "value": "the user meant b.md"}]},
    ]}]
    return document


def _annotation_check(trace: Trace) -> None:
    # After the call ran, its decision is an executed fact and the question a protected user
    # input: replacing either is invalid; appending an annotation to either is valid. The next
    # request shows the decision and question unchanged, the tool result still after its call,
    # and each annotation as a new system record (never a user input) with an ID of its own.
    equal([d["patch_valid"] for d in of(trace, "hook_decided")], [False, True, False, True],
          "patch validity per item")
    first, second = exactly(2, requests(trace, "business"), "business requests")
    equal(lines(second)[:4], [*lines(first), ("assistant", "assistant", ""),
                              ("tool", "tool_result", "ok")], "the facts in request 2")
    equal(lines(second)[4:], [("system", "annotation", "the path was wrong"),
                              ("system", "annotation", "the user meant b.md")],
          "the annotations in request 2")
    decision = second["view"]["messages"][2]
    equal(json.loads(decision["tool_calls"][0]["arguments"]), {"path": "a.md"},
          "the executed call's arguments")
    equal(second["view"]["messages"][3]["call_id"], decision["tool_calls"][0]["call_id"],
          "the result's call")
    earlier = {m["record_id"] for m in second["view"]["messages"][:4]}
    notes = [m["record_id"] for m in second["view"]["messages"][4:]]
    expect(all(n and n not in earlier for n in notes) and len(set(notes)) == 2,
           f"an annotation reuses a record ID: {notes}")
    equal([e["proposed_arguments"] for e in of(trace, "tool_executed")], [{"path": "a.md"}],
          "the call as proposed")


# --- §3: an allow never grants a tool, quota or limit ------------------------------------------


def _no_grant_scenario() -> dict[str, Any]:
    document = base(tools=[{"name": "write"}], tool_quota=1)
    document["steps"] = [{"ask": "write twice and remove"}, {"advance": True}]
    document["model"] = {"business": [
        {"text": "", "tool_calls": [{"name": "write", "arguments": {"path": "a.md"}},
                                    {"name": "write", "arguments": {"path": "b.md"}},
                                    {"name": "rm", "arguments": {"path": "/"}}]},
        {"text": "done"}]}
    document["tools"] = {"write": [{"text": "ok"}]}
    document["hooks"] = [{"point": "tool.pre_call", "items": [
        {"decision": "allow", "payload_patch": [{"path": "quota", "value": 99}],
         "context_patch": [{"target": "call", "field": "tool_call:{call_id}.deadline",
                            "value": "never"}]}]}]
    return document


def _no_grant_check(trace: Trace) -> None:
    # tool_quota = 1 and the role has only write. Every pre-call hook allows and tries to lift
    # the quota and the deadline: those are never writable, so each patch is invalid, and the
    # allow skips no check — the second write is refused for the quota, rm is refused as a
    # tool the role lacks; only the first write runs.
    for decided in of(trace, "hook_decided"):
        equal((decided["decision"], decided["patch_valid"]), ("allow", False),
              "a pre-call decision")
    equal([(e["name"], e["effective_arguments"]) for e in of(trace, "tool_executed")],
          [("write", {"path": "a.md"})], "tools executed")
    results = [m for m in requests(trace, "business")[1]["view"]["messages"]
               if m["kind"] == "tool_result"]
    equal(results[0]["text"], "ok", "the first write's result")
    equal([result_facts(m, "a refused call's result").get("status") for m in results[1:]],
          ["error", "error"], "the refused calls' results")


# --- §3: a takeover reuses a committed hook decision ------------------------------------------


def _reused_scenario() -> dict[str, Any]:
    document = example("tool-batch-hook")
    document["crash"] = {"phase": "hook_decided", "occurrence": 1, "when": "after"}
    return document


def _reused_check(trace: Trace) -> None:
    # tool-batch-hook dies just after the first pre-call decision (write → reports/a.md) was
    # committed. The takeover reuses that decision and its change: the hook is not asked
    # again (two pre-call chains in all, one per call) and write runs once, with reports/a.md.
    equal(len(of(trace, "restarted")), 1, "restarts")
    equal(len([e for e in of(trace, "hook_called") if e["point"] == "tool.pre_call"]), 2,
          "pre-call chains asked")
    equal([e["effective_arguments"]["path"] for e in of(trace, "tool_executed")
           if e["name"] == "write"], ["reports/a.md"], "write's effective path")


# --- §3: sharing files shares no private messages -------------------------------------------


def _files_scenario() -> dict[str, Any]:
    return {
        "scenario_version": 1, "name": "files",
        "agent": {"system_prompt": "plan", "window": 16384, "estimator": "chars",
                  "persistent_sandbox": True,
                  "executor": {"system_prompt": "execute", "tools": [{"name": "note"}]}},
        "steps": [{"ask": "go"}, {"advance": True}, {"observe_retention": True},
                  {"ask": "and now?"}, {"advance": True},
                  {"read_history": {"kind": "role", "role": "root"}}],
        "model": {"business": [{"text": "", "tool_calls": [
            {"name": "delegate", "arguments": {"task": "take a note"}}]},
            {"text": "done"}, {"text": "still done"}],
            "executor": [{"text": "private thinking", "tool_calls": [{"name": "note"}]},
                         {"text": "noted"}]},
        "tools": {"note": [{"text": "note stored",
                            "workspace_writes": {"notes.md": "secret words"}}]}}


def _files_check(trace: Trace) -> None:
    # The Executor's tool writes notes.md into the workspace the Planner shares (persistent
    # sandbox: it is still there after Run 1). Sharing the file shares none of the Executor's
    # messages: its decision, its tool result and the file's words never enter a Planner
    # request; the Planner gets the execution's answer ("noted") as its delegate result only.
    [retained] = exactly(1, of(trace, "retained"), "retained events")
    equal(sorted(retained["workspace_files"]), ["notes.md"], "working files after Run 1")
    root = [r for r in requests(trace, "business") if r["role"] == "root"]
    equal(len(root), 3, "Planner requests")
    for n, request in enumerate(root, start=1):
        seen = [word for word in ("private thinking", "note stored", "secret words")
                if any(word in text for _, _, text in lines(request))]
        equal(seen, [], f"Executor words in Planner request {n}")
    expect(any("noted" in text for _, kind, text in lines(root[1]) if kind == "tool_result"),
           "the Planner's delegate result lacks the execution's answer")
    # The Planner's own history read serves its records: Run 1's question, decision, delegate
    # result and answer, Run 2's question and answer — one tool result, never the Executor's.
    [read] = exactly(1, of(trace, "history_read"), "history_read events")
    equal((read["allowed"], read["message_kinds"].count("tool_result")), (True, 1),
          "the Planner's history read (served, tool results)")


# --- §3: an item spanning two scopes commits whole or not at all -------------------------------


def _cross_scope_scenario() -> dict[str, Any]:
    document = base(tools=[{"name": "write"}],
                    shared=[{"name": "budget", "text": "budget: 5", "consumers": ["root"]}])
    document["steps"] = [{"ask": "write both"}, {"advance": True}]
    document["model"] = {"business": [
        {"text": "", "tool_calls": [{"name": "write", "arguments": {"path": "a.md"}},
                                    {"name": "write", "arguments": {"path": "c.md"}}]},
        {"text": "done"}]}
    document["tools"] = {"write": [{"text": "ok a"}, {"text": "ok c"}]}
    document["hooks"] = [
        # The call's path (the role's private context) and the Run's shared budget, in one
        # item; the budget's text is not writable at tool.pre_call (its registry has no "text").
        {"point": "tool.pre_call", "ordinal": 1, "items": [
            {"payload_patch": [{"path": "arguments.path", "value": "b.md"}],
             "context_patch": [{"target": "shared:budget", "field": "text",
                                "value": "budget: 3", "scope": "shared"}]}]},
        # The private part alone, for the second call.
        {"point": "tool.pre_call", "ordinal": 2, "items": [
            {"payload_patch": [{"path": "arguments.path", "value": "d.md"}]}]}]
    return document


def _cross_scope_check(trace: Trace) -> None:
    # The first item changes two scopes; its shared part is invalid (FIELD_NOT_REGISTERED), so
    # the whole item is: validated first, committed in one transaction or not at all — the
    # private part (b.md), valid on its own, does not take effect either, and the budget stays
    # 5. The second item's private change alone is valid: c.md becomes d.md.
    equal([(d["patch_valid"], d["diagnostics"]) for d in of(trace, "hook_decided")],
          [(False, ["FIELD_NOT_REGISTERED"]), (True, [])], "(patch valid, diagnostics) per item")
    equal([(e["proposed_arguments"]["path"], e["effective_arguments"]["path"])
           for e in of(trace, "tool_executed")], [("a.md", "a.md"), ("c.md", "d.md")],
          "(proposed, effective) paths")
    second = requests(trace, "business")[1]
    decision = next(m for m in second["view"]["messages"] if m["tool_calls"])
    equal([json.loads(c["arguments"])["path"] for c in decision["tool_calls"]],
          ["a.md", "d.md"], "the paths the model sees")
    equal([text for _, kind, text in lines(second) if kind == "shared"],
          ["budget: 5"], "the shared budget in request 2")


# --- §3: a shared field's base revision is the shared scope's own -----------------------------


def _shared_revision_scenario() -> dict[str, Any]:
    document = base(tools=[{"name": "t"}], shared=[
        {"name": "budget", "text": "budget: 5", "consumers": ["root"]},
        {"name": "due", "text": "due: friday", "consumers": ["root"]}])
    document["steps"] = [{"ask": "go"}, {"advance": True}]
    document["model"] = {"business": [{"text": "", "tool_calls": [{"name": "t"}]},
                                      {"text": "done"}]}
    document["tools"] = {"t": [{"text": "r"}]}
    # By the second request the root's private context has gained records and revisions (the
    # question, its decision, the tool result) while the shared scope has none since it opened.
    # Item 1 changes the shared budget; item 2 read the shared scope as the chain started and
    # changes the due date, which nobody touched since.
    document["hooks"] = [{"point": "model.pre_request", "ordinal": 2, "items": [
        {"context_patch": [{"target": "shared:budget", "field": "text", "value": "budget: 3",
                            "scope": "shared"}]},
        {"stale_base": True, "context_patch": [{"target": "shared:due", "field": "text",
                                                "value": "due: monday", "scope": "shared"}]}]}]
    return document


def _shared_revision_check(trace: Trace) -> None:
    # §3 "共享字段与私有 context 使用各自 revision": item 2's base is a revision of the shared
    # scope, however many revisions the root's private context has. Since that base only
    # item 1's change to the budget was committed; the due date and the consumers'
    # authorisation are unchanged, so the change is relocated onto the new head ("可把同一已
    # 验证变更重新定位到最新 manifest"): valid, no CONTEXT_REVISION_CONFLICT. The root, an
    # authorised consumer, reads both changed fields in the request the chain precedes; the
    # first request, sent before, has the registered values. Q261
    equal([(d["chain_position"], d["patch_valid"], d["diagnostics"])
           for d in of(trace, "hook_decided")], [(0, True, []), (1, True, [])],
          "(chain position, patch valid, diagnostics) per item")
    first, second = exactly(2, requests(trace, "business"), "business requests")
    equal([text for _, kind, text in lines(first) if kind == "shared"],
          ["budget: 5", "due: friday"], "the shared fields in request 1")
    equal([text for _, kind, text in lines(second) if kind == "shared"],
          ["budget: 3", "due: monday"], "the shared fields in request 2")


CASES: tuple[Case, ...] = (
    Case("S3-HOOK-ASKED-ONCE", "a hook chain is asked once; saving its change asks none again",
         "§3", ("CTX-3.2", "CTX-3.12"), _asked_once_scenario(), _asked_once_check,
         frozenset({"hooks"})),
    Case("S3-FROZEN-RETRY", "attempt 2 sends the request frozen for attempt 1", "§3",
         ("CTX-3.4",), _frozen_retry_scenario(), _frozen_retry_check),
    Case("S3-HOOK-CHANGE-SEEN", "a pre-request change is seen by the call, later Loops and Runs",
         "§3", ("CTX-3.14",), _hook_seen_scenario(), _hook_seen_check, frozenset({"hooks"})),
    Case("S3-STABLE-IDS", "record IDs survive compaction and a retired summary", "§3",
         ("CTX-3.33",), corrected_summary(), _stable_ids_check,
         frozenset({"hooks", "compaction", "estimator_injection"})),
    Case("S3-VIEW-INDEX", "a view index addresses nothing; a call_id field reaches the handler",
         "§3", ("CTX-3.20", "CTX-3.21", "CTX-3.34", "CTX-3.43", "CTX-3.44"),
         _addressing_scenario(), _addressing_check, frozenset({"hooks"})),
    Case("S3-OVERLAPPING-WRITES", "equal writes merge; differing overlaps void the whole item",
         "§3", ("CTX-3.47", "CTX-3.48", "CTX-3.49", "CTX-3.50", "CTX-3.58", "CTX-3.79"),
         _overlap_scenario(), _overlap_check, frozenset({"hooks"})),
    Case("S3-REBASE", "a stale item on an untouched field rebases and is not asked again", "§3",
         ("CTX-3.82", "CTX-3.67"), _rebase_scenario(), _rebase_check, frozenset({"hooks"})),
    Case("S3-POST-CALL", "a post-call hook changes only the undelivered result; its deny",
         "§3", ("CTX-3.16", "CTX-3.56", "CTX-3.71", "CTX-3.18"), _post_scenario(),
         _post_check, frozenset({"hooks"})),
    Case("S3-ANNOTATIONS", "executed facts and user inputs take only sourced annotations", "§3",
         ("CTX-3.31", "CTX-3.36", "CTX-3.37", "CTX-3.38", "CTX-3.55", "CTX-3.88", "CTX-3.92"),
         _annotation_scenario(), _annotation_check, frozenset({"hooks"})),
    Case("S3-ALLOW-NO-GRANT", "an allow lifts no quota, deadline or missing tool", "§3",
         ("CTX-3.93",), _no_grant_scenario(), _no_grant_check, frozenset({"hooks"})),
    Case("S3-HOOK-REUSED", "a takeover reuses a committed hook decision, never asks again",
         "§3", ("CTX-3.65",), _reused_scenario(), _reused_check,
         frozenset({"hooks", "crash_points"})),
    Case("S3-FILES-NOT-MESSAGES", "an Executor's workspace file shares none of its messages",
         "§3", ("CTX-3.76",), _files_scenario(), _files_check,
         frozenset({"planner_executor", "retention", "history_api"})),
    Case("S3-CROSS-SCOPE-WHOLE", "an item spanning a private and a shared scope commits whole "
         "or not at all", "§3", ("CTX-3.81",), _cross_scope_scenario(), _cross_scope_check,
         frozenset({"hooks", "shared_scopes"})),
    Case("S3-SHARED-OWN-REVISION", "a shared field's patch is checked against the shared "
         "scope's revision, not the role's private one", "§3", ("CTX-3.80", "CTX-3.82"),
         _shared_revision_scenario(), _shared_revision_check,
         frozenset({"hooks", "shared_scopes"})),
)
