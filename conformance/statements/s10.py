"""Conformance cases for normative statements of §10 outside the §12 table and the worked
examples (IDs ``S10-<name>``): each a scenario and a predicate over the neutral trace, its
expected values derived by hand from the design (see conformance/case.py)."""

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
    lines,
    of,
    requests,
    result_facts,
    sessions,
)
from ctxspec.conformance.sessions import (
    boundary,
    corrected_summary,
    supplement_during_compaction,
    write_path,
)

# --- §10: each batch member keeps its own result; an unsaved one is unknown, never a success ---


def _unknown_scenario() -> dict[str, Any]:
    document = example("tool-batch-hook")
    document["crash"] = {"phase": "tool_settled", "occurrence": 2, "when": "before"}
    return document


def _unknown_check(trace: Trace) -> None:
    # tool-batch-hook dies after read ran but before its result was settled; write had settled.
    # The takeover reuses write's saved result and runs neither tool again; read's outcome is
    # unknown (the handler may have acted), so its result says UNKNOWN_OUTCOME — not the text
    # it would have returned, not a made-up success inferred from its arguments.
    equal(len(of(trace, "restarted")), 1, "restarts")
    equal(sorted(e["name"] for e in of(trace, "tool_executed")), ["read", "write"],
          "tools executed (each once)")
    messages = [m for m in requests(trace, "business")[-1]["view"]["messages"]
                if m["kind"] == "tool_result"]
    results = [m["text"] for m in messages]
    equal(results[0], "wrote 6 bytes to reports/a.md", "write's saved result")
    expect("ship on Friday" not in results[1],
           f"read's result is the text it would have returned: {results[1]!r}")
    facts = result_facts(messages[1], "read's result")
    equal((facts.get("status"), facts.get("code")), ("error", "UNKNOWN_OUTCOME"),
          "read's result (not a success: its outcome is unknown)")
    equal(endings(trace), [(1, "succeeded", None)], "Run endings")


# --- §10: a takeover renews no Loop budget ----------------------------------------------------


def _budget_scenario() -> dict[str, Any]:
    document = base(tools=[{"name": "t"}], loop_limit=2)
    document["steps"] = [{"ask": "loop"}, {"advance": True}]
    document["model"] = {"business": [{"text": "", "tool_calls": [{"name": "t"}]},
                                      {"text": "", "tool_calls": [{"name": "t"}]},
                                      {"text": "", "tool_calls": [{"name": "t"}]}]}
    document["tools"] = {"t": [{"text": "r1"}, {"text": "r2"}, {"text": "r3"}]}
    document["crash"] = {"phase": "batch_fed_back", "occurrence": 1, "when": "after"}
    return document


def _budget_check(trace: Trace) -> None:
    # loop_limit = 2 and a model that always calls t. The process dies after loop 1's results
    # were fed back; the new owner continues with the Loops left (one), not a fresh budget of
    # two: two business requests in all, then the Run ends loop_exhausted.
    equal(len(of(trace, "restarted")), 1, "restarts")
    business = requests(trace, "business")
    equal(len({r["purpose_key"] for r in business}), 2, "business Loops")
    equal(endings(trace), [(1, "loop_exhausted", None)], "Run endings")


# --- §10: after a takeover an old summary never hides a committed correction -------------------


def _correction_scenario() -> dict[str, Any]:
    document = corrected_summary()
    document["crash"] = {"phase": "request_frozen", "occurrence": 4, "when": "before"}
    return document


def _correction_check(trace: Trace) -> None:
    # ROW-20's Session dying after the hook's correction of a covered record was committed and
    # before loop 4 was frozen. The new owner restores the snapshot and the correction: the
    # snapshot no longer applies, so loop 4 shows the covered records as they are now, with
    # I = 2719 as in ROW-20, and no old summary.
    equal(len(of(trace, "restarted")), 1, "restarts")
    last = requests(trace, "business")[-1]
    equal((last["snapshot_id"], last["estimated_input_tokens"]), (None, 2719), "loop 4")
    texts = [text for _, _, text in lines(last)]
    expect("A, corrected" in texts and "A" * 1500 not in texts,
           "loop 4 does not show the corrected record")
    expect(not any(kind == "summary" or "SUM" in text for _, kind, text in lines(last)),
           "loop 4 still shows the old summary")
    equal(len(requests(trace, "compaction")), 2, "compaction requests")


# --- §10: a snapshot is no execution checkpoint ---------------------------------------------------


def _snapshot_scenario() -> dict[str, Any]:
    document = boundary()
    document["crash"] = {"phase": "snapshot_published", "occurrence": 1, "when": "after"}
    return document


def _snapshot_check(trace: Trace) -> None:
    # ROW-04-AT's Session (I = 3600 at the trigger) dying right after the summary's snapshot
    # was committed. The snapshot says nothing about where Run 2 is: the takeover neither
    # treats the Run as done nor summarises again — it sends Run 2's business request, with
    # the summary (I = 3 + 7 + 1597 = 1607), and Run 2 succeeds.
    equal(len(of(trace, "restarted")), 1, "restarts")
    equal([r["purpose"] for r in requests(trace)], ["business", "compaction", "business"],
          "requests")
    last = requests(trace)[-1]
    expect(last["snapshot_id"] is not None, "Run 2's request uses no snapshot")
    equal(last["estimated_input_tokens"], 1607, "I of Run 2's request")
    equal(endings(trace), [(1, "succeeded", None), (2, "succeeded", None)], "Run endings")


# --- §5, §10: a takeover during a compaction keeps the request's input cutoff -------------------


def _cutoff_kept_scenario() -> dict[str, Any]:
    document = supplement_during_compaction()
    document["crash"] = {"phase": "chunk_committed", "occurrence": 1, "when": "after"}
    return document


def _cutoff_kept_check(trace: Trace) -> None:
    # ROW-06's Session dying right after its one chunk was committed, the supplement "late
    # words" having arrived while that chunk was answered. The business request being prepared
    # fixed its input cutoff at 2 (Run 2's question) before the compaction (§5 "本次 prepare_context
    # 固定 input_cutoff，压缩、重物化及最终冻结沿用同一水位"); the takeover finishes the same
    # episode and sends that same request: cutoff 1, without the supplement, which joins the
    # next request — as in the Session without the crash. Inputs are numbered per Session:
    # Run 1's question 1, Run 2's question 2, the supplement 3.
    equal(len(of(trace, "restarted")), 1, "restarts")
    business = requests(trace, "business")
    after_summary, next_loop = business[1], business[2]
    equal(after_summary["input_cutoff"], 2, "the input cutoff of the request compacted for")
    expect("late words" not in [m["text"] for m in after_summary["view"]["messages"]],
           "after the takeover the supplement joined the request it arrived after")
    equal([m["text"] for m in next_loop["view"]["messages"] if m["kind"] == "user_ref"],
          ["Q" * 1597, "late words"], "user inputs of the next request")
    equal(next_loop["input_cutoff"], 3, "the input cutoff of the next request")


# --- §10: Session history is no memory across Sessions ------------------------------------------


def _new_session_scenario() -> dict[str, Any]:
    document = base()
    document["steps"] = [{"ask": "My name is Ada."}, {"advance": True},
                         {"ask": "The launch code is 4711."}, {"advance": True},
                         {"new_session": True},
                         {"ask": "What is my name?"}, {"advance": True},
                         {"read_history": {"kind": "audit", "bodies": True}}]
    document["model"] = {"business": [{"text": "Hello, Ada."}, {"text": "Noted: 4711."},
                                      {"text": "I do not know."}]}
    return document


def _new_session_check(trace: Trace) -> None:
    # Two Sessions of one Agent on one store. Within Session 1 history works: Run 2's request
    # shows Run 1 (recent_runs 2). Session 2 starts with nothing of Session 1: its first Run has
    # no ended Run before it, so its request is the system prompt and its own question, exactly;
    # and the history API of Session 2 serves Session 2's two records (its question and its
    # answer) and none of Session 1's.
    equal([e["session"] for e in of(trace, "session_opened")], [2], "Sessions opened")
    first, second = sessions(trace)
    texts = [text for _, _, text in lines(requests(first, "business")[-1])]
    expect("My name is Ada." in texts and "Hello, Ada." in texts,
           f"Session 1's Run 2 does not show Run 1 (its own history): {texts!r}")
    [request] = requests(second)
    equal(lines(request), [("system", "system_prompt", "sys"),
                           ("user", "user_ref", "What is my name?")], "Session 2's request")
    equal([status for _, status, _ in endings(second)], ["succeeded"], "Session 2's Runs")
    [read] = of(second, "history_read")
    equal([(r["message_kind"], r["text"], r["full_body"]) for r in read["records"]],
          [("user_ref", digest("What is my name?"), None),
           ("assistant", digest("I do not know."), None)], "Session 2's history")


# --- §10: no background memory of the user, no workspace that bypasses Session isolation ------


def _no_memory_scenario() -> dict[str, Any]:
    document = base(tools=[{"name": "save"}], persistent_sandbox=True)
    document["steps"] = [{"ask": "I prefer tabs over spaces; keep that in mind."},
                         {"advance": True}, {"observe_retention": True},
                         {"new_session": True}, {"observe_retention": True},
                         {"ask": "Format this snippet."}, {"advance": True}]
    document["model"] = {"business": [
        {"text": "", "tool_calls": [{"name": "save", "arguments": {"path": "prefs.md"}}]},
        {"text": "Noted."}, {"text": "Formatted."}]}
    document["tools"] = {"save": [{"text": "saved prefs.md", "workspace_writes": {
        "prefs.md": "The user prefers tabs over spaces."}}]}
    return document


def _no_memory_check(trace: Trace) -> None:
    # Session 1's user states a preference and its tool writes it to prefs.md in the Agent's
    # persistent workspace; the file is still there when Session 2 opens (the staging works).
    # Session 2's request is its system prompt and its question, exactly: neither the stated
    # preference (no background guess of it into a memory) nor the file (the workspace is no
    # implicit memory across Sessions) reaches it, and no tool runs in Session 2.
    first, second = sessions(trace)
    equal([r["workspace_files"] for r in of(first, "retained")], [["prefs.md"]],
          "Session 1's workspace after its Run")
    equal([r["workspace_files"] for r in of(second, "retained")], [["prefs.md"]],
          "the Agent's workspace as Session 2 opens")
    equal([e["name"] for e in of(first, "tool_executed")], ["save"], "Session 1's tools")
    [request] = requests(second)
    equal(lines(request), [("system", "system_prompt", "sys"),
                           ("user", "user_ref", "Format this snippet.")], "Session 2's request")
    equal(of(second, "tool_executed"), [], "Session 2's tools")
    equal([status for _, status, _ in endings(second)], ["succeeded"], "Session 2's Runs")


# --- a scenario's trigger is an event of the world: it fires once, whatever restarts ------------


def _trigger_once_scenario() -> dict[str, Any]:
    document = base(tools=[{"name": "t"}])
    document["steps"] = [{"ask": "go"}, {"advance": True}]
    document["model"] = {"business": [{"text": "", "tool_calls": [{"name": "t"}]},
                                      {"text": "", "tool_calls": [{"name": "t"}]},
                                      {"text": "done"}]}
    document["tools"] = {"t": [{"text": "r1"}, {"text": "r2"}]}
    document["triggers"] = [{"on": {"purpose": "business", "ordinal": 1},
                             "do": {"supplement": "EXTRA"}}]
    document["crash"] = {"phase": "batch_fed_back", "occurrence": 1, "when": "after"}
    return document


def _trigger_once_check(trace: Trace) -> None:
    # The supplement arrives once, just before the Session's first business request; the
    # process dies after loop 1's feedback and a new one takes over. Its first request is not
    # the Session's first: the supplement does not arrive again. Loops 2 and 3 each show it
    # once (one UserInput, delivered in loop 2's request and kept in the Run's process).
    equal(len(of(trace, "restarted")), 1, "restarts")
    business = requests(trace, "business")
    equal(len(business), 3, "business requests")
    for number, request in enumerate(business[1:], start=2):
        equal(sum(text == "EXTRA" for _, _, text in lines(request)), 1,
              f"the supplement's occurrences in loop {number}'s request")


# --- a required commit the store refuses ------------------------------------------------------


def _refused_commit_scenario() -> dict[str, Any]:
    document = write_path({"decision": "allow", "payload_patch": [
        {"path": "arguments.path", "value": "b.md"}]})
    document["crash"] = {"phase": "hook_decided", "occurrence": 1, "when": "fails"}
    return document


def _refused_commit_check(trace: Trace) -> None:
    # The pre-call hook moves the write to b.md; the store refuses the commit of that decision.
    # The runtime must surface the failure and stop on it — not go on with b.md, which the
    # store does not have, and not take it for a hook failure. The restarted runtime finds the
    # hook marked running and no decision: its outcome is unknown and it is dropped (Q50), so
    # the one write runs with the path the model proposed, a.md.
    kinds = [e["kind"] for e in trace]
    expect("persistence_failed" in kinds, "the refused commit was not surfaced")
    failed = kinds.index("persistence_failed")
    equal([e["phase"] for e in of(trace, "persistence_failed")], ["hook_decided"],
          "surfaced persistence failures (the phase)")
    expect("tool_executed" not in kinds[:failed],
           "a tool ran before the decision was stored")
    expect("hook_decided" not in kinds[:failed],
           "the refused commit was recorded as a hook decision or failure")
    equal([e["effective_arguments"] for e in of(trace, "tool_executed")], [{"path": "a.md"}],
          "the writes (after the restart, the hook's unknown outcome dropped)")
    equal(endings(trace), [(1, "succeeded", None)], "Run endings")


CASES: tuple[Case, ...] = (
    Case("S10-COMMIT-REFUSED", "a refused required commit is surfaced and nothing goes on with "
         "what it held", "§10", ("CTX-3.90", "CTX-3.91", "CTX-10.28", "CTX-3.52"),
         _refused_commit_scenario(), _refused_commit_check,
         frozenset({"commit_failures", "hooks"})),
    Case("S10-UNKNOWN-OUTCOME", "a settled member is reused; an unsaved one is unknown", "§10",
         ("CTX-10.14", "CTX-10.25"), _unknown_scenario(), _unknown_check,
         frozenset({"crash_points", "hooks"})),
    Case("S10-TAKEOVER-BUDGET", "a takeover continues with the Loops left, not a new budget",
         "§10", ("CTX-10.24",), _budget_scenario(), _budget_check,
         frozenset({"crash_points"})),
    Case("S10-CORRECTION-SURVIVES", "after a takeover the old summary hides no correction",
         "§10", ("CTX-10.8",), _correction_scenario(), _correction_check,
         frozenset({"crash_points", "hooks", "compaction", "estimator_injection"})),
    Case("S10-SNAPSHOT-NOT-CHECKPOINT", "a committed snapshot does not end the Run", "§10",
         ("CTX-10.3",), _snapshot_scenario(), _snapshot_check,
         frozenset({"crash_points", "compaction", "estimator_injection"})),
    Case("S10-CUTOFF-KEPT-AFTER-TAKEOVER", "a takeover during a compaction sends the request "
         "with the input cutoff it was prepared with", "§10", ("CTX-5.28", "CTX-10.24"),
         _cutoff_kept_scenario(), _cutoff_kept_check,
         frozenset({"crash_points", "compaction", "estimator_injection", "triggers"})),
    Case("S10-NEW-SESSION", "a new Session starts with nothing of the previous one", "§10",
         ("CTX-10.30",), _new_session_scenario(), _new_session_check,
         frozenset({"sessions", "history_api"})),
    Case("S10-NO-IMPLICIT-MEMORY", "no stated preference and no workspace file reaches the "
         "next Session", "§10", ("CTX-10.31",), _no_memory_scenario(), _no_memory_check,
         frozenset({"sessions", "retention"})),
    # A property of the scenario language (docs/scenarios.md), not of the design: it names no
    # requirement.
    Case("SCENARIO-TRIGGER-ONCE", "a scenario's trigger fires once across a restart",
         "our documents", (), _trigger_once_scenario(), _trigger_once_check,
         frozenset({"triggers", "crash_points"})),
)
