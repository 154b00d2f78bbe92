"""Conformance cases for normative statements of §11 outside the §12 table and the worked
examples (IDs ``S11-<name>``): each a scenario and a predicate over the neutral trace, its
expected values derived by hand from the design (see conformance/case.py)."""

from typing import Any

from ctxspec.conformance.case import (
    COMPACTING,
    Case,
    Trace,
    base,
    delivery_chains,
    ending_figures,
    endings,
    equal,
    expect,
    lines,
    of,
    request_text,
    requests,
    result_facts,
    two_call_batch,
)
from ctxspec.conformance.sessions import boundary

# --- §11: the protected inputs do not fit ----------------------------------------------------


def _too_large_scenario() -> dict[str, Any]:
    document = base(system_prompt="SECRET PROMPT")
    document["steps"] = [{"ask": "Q" * 3500}, {"advance": True},
                         {"read_history": {"kind": "role", "role": "root"}}]
    document["model"] = {"business": []}
    return document


def _too_large_check(trace: Trace) -> None:
    # W = 4000, O = 400, S = 100: B = 3500. The system prompt (13) and the question (3500)
    # alone need 3513 > B, and neither may be dropped or summarised: no request is sent, the
    # Run fails with CONTEXT_PROTECTED_INPUT_TOO_LARGE and a message giving the window, never
    # the prompt; the question itself stays in the Session's history.
    equal(requests(trace), [], "requests sent")
    equal(endings(trace), [(1, "failed", "CONTEXT_PROTECTED_INPUT_TOO_LARGE")], "Run endings")
    ending_figures(trace, {"window": 4000}, "the window")
    message = of(trace, "run_ended")[-1]["message"] or ""
    expect("SECRET" not in message, f"the message shows the prompt: {message!r}")
    equal([r["message_kinds"] for r in of(trace, "history_read")], [["user_ref"]],
          "the history after the Run")


# --- §11: a compaction that finally fails ----------------------------------------------------


def _compaction_failed_scenario(history: bool = False) -> dict[str, Any]:
    """sessions.boundary: Run 2's question brings I to the trigger and its one summary request
    fails at each of model_attempts = 2 (keyed, so a runtime that tries less leaves a failure
    unused). Then the history read (``history``), or Run 3: "go on" is I = 3 + 1000 + 1000 +
    1597 + 5 = 3605 ≥ 3600, so Runs 1 and 2 are summarised — one chunk of 3597 < 4100 — into
    "SUMMARY 2", and Run 3 is sent at 3 + 9 + 5 = 17."""
    document = boundary()
    document["model"]["compaction"] = [{"fail": "reset", "run": 2, "request": 1},
                                       {"fail": "reset", "run": 2, "request": 1, "attempt": 2}]
    if history:
        document["steps"] = [*document["steps"],
                             {"read_history": {"kind": "role", "role": "root"}}]
        return document
    document["steps"] = [*document["steps"], {"ask": "go on"}, {"advance": True}]
    document["model"]["compaction"].append({"text": "SUMMARY 2", "run": 3, "request": 1})
    return document


def _finally_failed(trace: Trace) -> None:
    # The one chunk's summary request fails as often as the runtime tries it, so the
    # compaction finally fails: Run 2 ends COMPACTION_FAILED and sends no business request —
    # no request after its first summary request but that request's retry.
    sent = requests(trace)
    equal([r["purpose"] for r in sent[:2]], ["business", "compaction"], "requests")
    run2 = [r for r in sent[2:] if r["purpose_key"] == sent[1]["purpose_key"]]
    equal([r["attempt"] for r in run2], list(range(2, 2 + len(run2))),
          "attempts of Run 2's summary request after the first")
    equal(endings(trace)[:2], [(1, "succeeded", None), (2, "failed", "COMPACTION_FAILED")],
          "Run endings")


def _compaction_failed_check(trace: Trace) -> None:
    # The original context stays (§11): the next request that shows it — Run 3's summary
    # request — carries Run 1's question and answer and Run 2's question verbatim, nothing of
    # them deleted or replaced by the failure; Run 3 then goes on with its own summary.
    _finally_failed(trace)
    business = requests(trace, "business")
    equal(len(business), 2, "business requests (Run 1's and Run 3's: none of Run 2)")
    material = request_text(requests(trace, "compaction")[-1])
    for text in ("a" * 1000, "b" * 1000, "Q" * 1597):
        expect(text in material, f"Run 3's summary request lacks {text[:1]!r} × {len(text)} "
               "of the context kept after the failed compaction")
    expect(("system", "summary", "SUMMARY 2") in lines(business[-1]),
           "Run 3's request lacks its summary")
    equal(endings(trace)[2], (3, "succeeded", None), "Run 3's ending")


def _compaction_failed_history_check(trace: Trace) -> None:
    # The same failure; the history API then serves the original records — Run 1's question
    # and answer and Run 2's question, with no summary.
    _finally_failed(trace)
    equal([r["message_kinds"] for r in of(trace, "history_read")],
          [["user_ref", "assistant", "user_ref"]], "the history after the failed compaction")


# --- §11: a stop or the deadline during compaction ----------------------------------------------


def _stop_scenario() -> dict[str, Any]:
    document = boundary()
    document["triggers"] = [
        {"on": {"purpose": "compaction", "ordinal": 1}, "do": {"supplement": "late words"}},
        {"on": {"purpose": "compaction", "ordinal": 1}, "do": {"stop": True}}]
    return document


def _stop_check(trace: Trace) -> None:
    # A supplement, then a stop, arrive just before Run 2's summary request. The request in
    # flight is wound down; no business Attempt and no further compaction start, Run 2 ends
    # stopped, and the supplement, never delivered, waits for the next question.
    equal([r["purpose"] for r in requests(trace)], ["business", "compaction"], "requests")
    equal(endings(trace), [(1, "succeeded", None), (2, "stopped", None)], "Run endings")
    chains = delivery_chains(trace, of(trace, "delivery")[-1]["input_id"])
    equal([states for _, states, _ in chains], [["pending", "carried"], ["pending"]],
          "the supplement's deliveries")
    equal(chains[1][2], chains[0][0], "the carried delivery's successor points back")


def _deadline_scenario() -> dict[str, Any]:
    document = boundary()
    document["agent"]["run_deadline"] = 1
    return document


def _deadline_check(trace: Trace) -> None:
    # run_deadline = 1 tick (one per model call): Run 1 uses its one; Run 2's summary request
    # uses its one, so the deadline falls during compaction and no business Attempt starts.
    equal([r["purpose"] for r in requests(trace)], ["business", "compaction"], "requests")
    equal(endings(trace), [(1, "succeeded", None), (2, "timed_out", None)], "Run endings")


# --- §11: a stop while a request is prepared starts no compaction ------------------------------


def _stop_preparing_scenario(executor: bool = False) -> dict[str, Any]:
    """W = 5000, O = 400, S = 100: B = 4500 and the trigger floor(0.8 × 4500) = 3600. The acting
    role (the root, or with ``executor`` an Executor the root delegates to) calls t, whose
    3600-character result alone brings its next request to I ≥ 3600: that request compacts.
    Every business request asks a model.pre_request chain, which allows; the stop arrives while
    the compacting request's chain runs — the 2nd chain asked (the root's requests 1 and 2),
    or the 3rd (the root's request 1, the Executor's 1 and 2)."""
    document = base(window=5000, **({"executor": {"tools": [{"name": "t"}]}} if executor
                                    else {"tools": [{"name": "t"}]}))
    document["steps"] = [{"ask": "go"}, {"advance": True}]
    acting = [{"text": "", "tool_calls": [{"name": "t"}]}, {"text": "done"}]
    document["model"] = {"business": acting, "compaction": [{"text": "SUMMARY"}]}
    if executor:
        document["model"]["business"] = [{"text": "", "tool_calls": [
            {"name": "delegate", "arguments": {"task": "do it"}}]}, {"text": "done"}]
        document["model"]["executor"] = acting
    document["tools"] = {"t": [{"text": "r" * 3600}]}
    document["hooks"] = [{"point": "model.pre_request", "items": [{"decision": "allow"}]}]
    document["triggers"] = [{"on": {"moment": "hook", "ordinal": 3 if executor else 2},
                             "do": {"stop": True}}]
    return document


def _stop_preparing_check(roles: list[str]) -> Any:
    def check(trace: Trace) -> None:
        # §11, a stop during preparation: "不启动新的压缩或业务 Attempt". The stop came while the
        # request that would compact was prepared (its pre-request chain ran, and its allow
        # skips no stop, §3). No episode starts — no compaction request and no compaction
        # event —, the request is never sent, and the Run ends stopped; nothing asks the
        # Planner again (an Executor's stop is its Run's). Q260
        equal([(e["point"], e["stage"]) for e in of(trace, "hook_called")],
              [("model.pre_request", "pre")] * (len(roles) + 1), "hook chains asked")
        equal(len(requests(trace, "compaction")), 0, "compaction requests")
        equal(of(trace, "compaction"), [], "compaction episode events")
        equal([r["role"] for r in requests(trace, "business")], roles,
              "roles of the business requests sent")
        equal(endings(trace), [(1, "stopped", None)], "Run endings")
    return check


# --- §11: an output-format error is corrected by a business Loop --------------------------------


def _format_scenario() -> dict[str, Any]:
    document = base(tools=[{"name": "t"}], loop_limit=2)
    document["steps"] = [{"ask": "go"}, {"advance": True}]
    document["model"] = {"business": [{"text": "", "tool_calls": [{"name": "nope"}]},
                                      {"text": "", "tool_calls": [{"name": "nope"}]}],
                         "compaction": []}
    return document


def _format_check(trace: Trace) -> None:
    # The model calls nope, a tool the role does not have: the error goes back to the business
    # role, whose next Loop sees it; the Compactor is never asked. Both Loops count against
    # loop_limit = 2, so the second malformed call ends the Run loop_exhausted.
    equal([r["purpose"] for r in requests(trace)], ["business", "business"], "requests")
    result = next(m for m in requests(trace)[1]["view"]["messages"] if m["kind"] == "tool_result")
    equal(result_facts(result, "the missing tool's result").get("status"), "error",
          "the missing tool's result's status")
    equal(of(trace, "tool_executed"), [], "tools executed")
    equal(endings(trace), [(1, "loop_exhausted", None)], "Run endings")



# --- §11: the Run's Loop budget is shared by its roles ------------------------------------------


def _shared_loops_scenario(crash: dict[str, Any] | None = None) -> dict[str, Any]:
    document = base(window=16384, loop_limit=3, executor={"tools": [{"name": "grep"}]})
    document["steps"] = [{"ask": "find it"}, {"advance": True}]
    document["model"] = {
        "business": [{"text": "", "tool_calls": [{"name": "delegate",
                                                  "arguments": {"task": "grep it"}}]},
                     {"text": "found it"}],
        "executor": [{"text": "", "tool_calls": [{"name": "grep",
                                                  "arguments": {"pattern": "x"}}]},
                     {"text": "x at a.py:1"}]}
    document["tools"] = {"grep": [{"text": "a.py:1 x"}]}
    if crash is not None:
        document["crash"] = crash
    return document


def _shared_loops_check(trace: Trace) -> None:
    # loop_limit = 3 is the Run's budget, shared by its roles (§11 "占 Run 共享 Loop"). The
    # Planner's Loop 1 delegates (1); the Executor greps in its Loop 1 and answers in its
    # Loop 2 (1 + 2 = 3). The Planner's Loop 2 would be the fourth: the Run ends
    # LOOP_EXHAUSTED without it — a per-role count (1 of 3) would have let it answer.
    equal([(r["role"], r["purpose"]) for r in requests(trace)],
          [("root", "business"), ("executor", "business"), ("executor", "business")],
          "(role, purpose) of requests")
    equal(endings(trace), [(1, "loop_exhausted", None)], "Run endings")


def _shared_loops_takeover_check(trace: Trace) -> None:
    # The same Run dies right after the Executor's execution ended was committed. The takeover
    # finds the execution finished (nothing of it to resume) and still counts its two Loops:
    # the Planner's next Loop is the fourth, so the Run ends as uncrashed.
    equal(len(of(trace, "restarted")), 1, "restarts")
    _shared_loops_check(trace)


# --- §11, §4: history is read subject to access permissions; audit is an authorised reader ----


def _audit_grant_scenario() -> dict[str, Any]:
    """The Agent grants audit to "compliance" only: an audit read as "compliance" is served,
    one as any other audit caller (the scenario's default "auditor" included) is refused."""
    document = two_call_batch()
    document["agent"]["audit_readers"] = ["compliance"]
    document["steps"] = [*document["steps"], {"read_history": {"kind": "audit"}},
                         {"read_history": {"kind": "audit", "role": "compliance"}},
                         {"read_history": {"kind": "audit", "role": "intruder"}},
                         {"read_history": {"kind": "role", "role": "executor"}}]
    return document


def _audit_grant_check(trace: Trace) -> None:
    # §4, §11: only the NodeTask and *authorised* audit read the full records; an audit caller
    # the Agent did not grant is refused like any unauthorised caller (the same words, naming
    # nothing). The granted read serves the Run's records: question, tool decision, the two
    # tool results, answer.
    reads = of(trace, "history_read")
    equal([(r["caller"], r["allowed"]) for r in reads],
          [("audit", False), ("audit:compliance", True), ("audit:intruder", False),
           ("role:executor", False)], "history reads")
    equal(reads[1]["message_kinds"], ["user_ref", "assistant", "tool_result", "tool_result",
                                      "assistant"], "what the granted audit reads")
    equal(len({r["refusal"] for r in reads if not r["allowed"]}), 1,
          "distinct refusal messages (an ungranted auditor is refused like anyone)")


CASES: tuple[Case, ...] = (
    Case("S11-AUDIT-NEEDS-GRANT", "an audit read needs the Agent's grant; any other audit "
         "caller is refused", "§11", ("CTX-11.15", "CTX-4.11"), _audit_grant_scenario(),
         _audit_grant_check, frozenset({"history_api"})),
    Case("S11-PROTECTED-TOO-LARGE", "protected inputs over the budget end the Run, kept", "§11",
         ("CTX-11.1",), _too_large_scenario(), _too_large_check,
         frozenset({"estimator_injection", "history_api"})),
    Case("S11-COMPACTION-FAILED", "a finally failed compaction ends the Run, context kept",
         "§11", ("CTX-11.2", "CTX-11.3"), _compaction_failed_scenario(),
         _compaction_failed_check, COMPACTING),
    Case("S11-COMPACTION-FAILED-HISTORY", "after a finally failed compaction the history API "
         "serves the original records", "§11", ("CTX-11.3",),
         _compaction_failed_scenario(history=True), _compaction_failed_history_check,
         COMPACTING | {"history_api"}),
    Case("S11-STOP-DURING-COMPACTION", "a stop during compaction starts nothing new", "§11",
         ("CTX-11.5", "CTX-11.6"), _stop_scenario(), _stop_check,
         COMPACTING | {"triggers", "stop"}),
    Case("S11-DEADLINE-DURING-COMPACTION", "the deadline during compaction starts no Attempt",
         "§11", ("CTX-11.5",), _deadline_scenario(), _deadline_check, COMPACTING),
    Case("S11-STOP-DURING-PREPARATION", "a stop while a request that would compact is "
         "prepared starts no compaction episode", "§11", ("CTX-11.5", "CTX-8.7"),
         _stop_preparing_scenario(), _stop_preparing_check(["root"]),
         COMPACTING | {"moments", "triggers", "stop", "hooks"}),
    Case("S11-STOP-DURING-PREPARATION-EXECUTOR", "a stop while an Executor's request that "
         "would compact is prepared starts no compaction episode", "§11",
         ("CTX-11.5", "CTX-8.7"), _stop_preparing_scenario(executor=True),
         _stop_preparing_check(["root", "executor"]),
         COMPACTING | {"moments", "triggers", "stop", "hooks", "planner_executor"}),
    Case("S11-FORMAT-ERROR", "a call to a missing tool is fixed by a business Loop that counts",
         "§11", ("CTX-11.9",), _format_scenario(), _format_check),
    Case("S11-LOOPS-SHARED", "an Executor's Loops spend the Run's shared Loop budget", "§11",
         ("CTX-11.9", "CTX-11.13"), _shared_loops_scenario(), _shared_loops_check,
         frozenset({"planner_executor"})),
    Case("S11-LOOPS-SHARED-TAKEOVER", "a takeover still counts the Loops of a finished "
         "Executor execution", "§11", ("CTX-11.9", "CTX-10.12"),
         _shared_loops_scenario({"phase": "execution_ended", "occurrence": 1,
                                 "when": "after"}),
         _shared_loops_takeover_check, frozenset({"planner_executor", "crash_points"})),
)
