"""Conformance cases for rules the suite had pinned on one path only (issue #22): a post-response
deny (not only a post-call one), what an Executor hands over (the effective answer, not only the
root role's), an Executor's context error (not only the root role's), the deadline between
model attempts (not only at a Loop's start), a failed attempt's fragment after a good retry (not
only before a failed Run), and a stop that arrives while a request is in flight (issue #23).

Expected values are derived by hand from the design; every case compares kinds, identities,
order, statuses and scripted texts, never the wording of a marker or an envelope.
"""

from collections.abc import Callable
from typing import Any

from ctxspec.conformance.case import (
    COMPACTING,
    Case,
    Trace,
    base,
    delivery_chains,
    digest,
    endings,
    equal,
    expect,
    of,
    request_text,
    requests,
    result_facts,
    taken_over,
)
from ctxspec.conformance.sessions import boundary, hooked_executor_answer


def absent(trace: Trace, text: str, what: str) -> None:
    """No request after the first shows ``text`` anywhere."""
    for number, request in enumerate(requests(trace, "business")[1:], start=2):
        expect(text not in request_text(request), f"{what}: request {number} shows {text!r}")


# --- §2, §3: a post-response deny stops execution and delivery ----------------------------------


def _denied_calls_scenario() -> dict[str, Any]:
    document = base(tools=[{"name": "fetch"}])
    document["steps"] = [{"ask": "go"}, {"advance": True}, {"ask": "next"}, {"advance": True}]
    document["model"] = {"business": [
        {"text": "calling", "tool_calls": [{"name": "fetch", "arguments": {"url": "u-9"}}]},
        {"text": "a2"}]}
    document["tools"] = {"fetch": [{"text": "payload"}]}
    document["hooks"] = [{"point": "model.post_response", "ordinal": 1,
                          "items": [{"decision": "deny"}]}]
    return document


def _denied_calls_check(trace: Trace) -> None:
    # §3 "合法 deny … 必须阻止执行或交付": the answer proposing fetch is denied after the model
    # answered, so fetch never runs and no second request of Run 1 consumes a result. Run 1
    # cannot succeed on an answer it was not given (§2 "后置拒绝则交明确拒绝状态"): it fails
    # with HOOK_DENIED (Q75). Run 2's history does not deliver the denied answer either: its
    # call (u-9) and text appear nowhere.
    equal(of(trace, "tool_executed"), [], "tools executed")
    equal([e["decision"] for e in of(trace, "hook_decided")], ["deny"], "hook decisions")
    equal(endings(trace), [(1, "failed", "HOOK_DENIED"), (2, "succeeded", None)],
          "Run endings")
    equal(len(requests(trace, "business")), 2, "business requests (one per Run)")
    absent(trace, "u-9", "the denied call")
    absent(trace, "calling", "the denied answer")


def _denied_final_scenario() -> dict[str, Any]:
    document = base()
    document["steps"] = [{"ask": "q1"}, {"advance": True}, {"ask": "q2"}, {"advance": True}]
    document["model"] = {"business": [{"text": "withheld answer"}, {"text": "a2"}]}
    document["hooks"] = [{"point": "model.post_response", "ordinal": 1,
                          "items": [{"decision": "deny"}]}]
    return document


def _denied_final_check(trace: Trace) -> None:
    # The final answer itself is denied: it is not delivered — Run 1 does not end succeeded
    # (§2: the final answer is delivered with the Run's end; a denied one never is) — and
    # Run 2's request does not show it, neither as a final result nor as process.
    equal(endings(trace), [(1, "failed", "HOOK_DENIED"), (2, "succeeded", None)],
          "Run endings")
    absent(trace, "withheld answer", "the denied final answer")


def _denied_request_scenario() -> dict[str, Any]:
    document = base()
    document["steps"] = [{"ask": "q1"}, {"supplement": "also this"}, {"advance": True}]
    document["model"] = {"business": [{"text": "never asked"}]}
    document["hooks"] = [{"point": "model.pre_request", "items": [{"decision": "deny"}]}]
    return document


def _denied_request_check(trace: Trace) -> None:
    # §3 "合法 deny … 必须阻止执行": a pre-request deny blocks the model call, so nothing is
    # sent; with no answer the Run cannot go on and ends HOOK_DENIED (Q75). Nothing was
    # claimed by a frozen request, so the supplement, never delivered, waits for the next
    # question (§5).
    equal(requests(trace), [], "requests sent")
    equal([e["decision"] for e in of(trace, "hook_decided")], ["deny"], "hook decisions")
    equal(endings(trace), [(1, "failed", "HOOK_DENIED")], "Run endings")
    chains = delivery_chains(trace, of(trace, "delivery")[-1]["input_id"])
    equal([states for _, states, _ in chains], [["pending", "carried"], ["pending"]],
          "the supplement's deliveries")


def _final_delivered_scenario() -> dict[str, Any]:
    document = base()
    document["steps"] = [{"ask": "q1"}, {"advance": True}, {"ask": "q2"}, {"advance": True}]
    document["model"] = {"business": [{"text": "raw answer"}, {"text": "withheld answer"}]}
    document["hooks"] = [
        {"point": "model.post_response", "ordinal": 1, "items": [
            {"payload_patch": [{"path": "text", "value": "checked answer"}]}]},
        {"point": "model.post_response", "ordinal": 2, "items": [{"decision": "deny"}]}]
    return document


def _final_delivered_check(trace: Trace) -> None:
    # §2: the answer reaches the waiter after post-processing and is delivered with the
    # Run's end. Run 1's user receives the hook's "checked answer", never the raw one; Run 2's
    # answer is denied, so nothing is delivered as its final answer (Q75).
    equal([(e["status"], e.get("final_answer")) for e in of(trace, "run_ended")],
          [("succeeded", "checked answer"), ("failed", None)],
          "(status, final answer delivered) of each Run")


# --- §3: the waiter of an Executor's answer receives the effective one -------------------------


def _executor_answer_scenario(crash: dict[str, Any] | None = None) -> dict[str, Any]:
    document = hooked_executor_answer()
    if crash is not None:
        document["crash"] = crash
    return document


def _executor_answer_check(trace: Trace) -> None:
    # §3's response row: raw_result is saved, then the post-hook effective result goes to the
    # current waiter — the Planner waiting on its delegation. The Planner's second request
    # carries the delegate call's result: the hook's "checked sum 5", never the raw "raw sum
    # 23" (CTX-2.31, CTX-2.34), with or without a takeover in between.
    planner = [r for r in requests(trace, "business") if r["role"] == "root"]
    equal(len(planner), 2, "the Planner's requests")
    results = [m["text"] for m in planner[1]["view"]["messages"] if m["role"] == "tool"]
    equal(len(results), 1, "tool results in the Planner's second request")
    expect("checked sum 5" in results[0] and "raw sum 23" not in results[0],
           f"the delegate result is not the Executor's effective answer: {results[0]!r}")
    equal(endings(trace), [(1, "succeeded", None)], "Run endings")


# --- §8, §11: an Executor's context error ends the whole AgentInvocation -----------------------


def _executor_context_error_scenario() -> dict[str, Any]:
    document = base(executor={"system_prompt": "E" * 3600, "tools": []})
    document["steps"] = [{"ask": "delegate it"}, {"advance": True}]
    document["model"] = {
        "business": [{"text": "", "tool_calls": [{"name": "delegate",
                                                  "arguments": {"task": "t"}}]},
                     {"text": "carried on without it"}],
        "executor": [{"text": "never asked"}]}
    return document


def _executor_context_error_check(trace: Trace) -> None:
    # W = 4000, O = 400, S = 100: B = 3500. The Executor's system prompt alone is 3600 > B
    # with nothing compressible: CONTEXT_PROTECTED_INPUT_TOO_LARGE (§8). The Executor is a
    # NodeTask of the same AgentInvocation (§2), and a context error acts on the whole
    # invocation (§11 "作用于所属完整 AgentInvocation", "直接 Agent Run 因而结束"): the Planner
    # is not asked again and the Run ends with that code.
    equal([(r["role"], r["purpose"]) for r in requests(trace)], [("root", "business")],
          "(role, purpose) of requests")
    equal(endings(trace), [(1, "failed", "CONTEXT_PROTECTED_INPUT_TOO_LARGE")], "Run endings")


# --- §8, §3: the Run's deadline holds between model attempts -----------------------------------


def _deadline_retry_scenario() -> dict[str, Any]:
    document = base(run_deadline=1)
    document["steps"] = [{"ask": "go"}, {"advance": True}]
    document["model"] = {"business": [{"fail": "overloaded"}, {"text": "too late"}]}
    return document


def _deadline_retry_check(trace: Trace) -> None:
    # run_deadline = 1 tick, one per model call. Attempt 1 spends it and fails; a retry is a
    # new call under the same Run deadline (§8 "所有调用受同一 Run deadline"; §3: nothing skips
    # the deadline), so attempt 2 is never sent and the Run ends timed_out.
    equal([(r["purpose"], r["attempt"]) for r in requests(trace)], [("business", 1)],
          "(purpose, attempt) of requests")
    equal(endings(trace), [(1, "timed_out", None)], "Run endings")


# --- §12 row 12: a failed attempt's fragment after a good retry ---------------------------------


def _fragment_retry_scenario() -> dict[str, Any]:
    document = base(tools=[{"name": "fetch"}])
    document["steps"] = [{"ask": "go"}, {"advance": True}, {"ask": "next"}, {"advance": True}]
    document["model"] = {"business": [
        {"partial": "half an ans", "fail": "reset"},
        {"text": "calling", "tool_calls": [{"name": "fetch"}]},
        {"text": "done"}, {"text": "a2"}]}
    document["tools"] = {"fetch": [{"text": "payload"}]}
    return document


def _fragment_retry_check(trace: Trace) -> None:
    # Attempt 1 shows "half an ans" and breaks; attempt 2 of the same frozen request answers
    # whole. Only the complete response enters the business view (§12 row 12 "不拼接 Attempt",
    # "完整响应才进入业务视图"): Run 1's next request and Run 2's request show the decision and
    # no trace of the fragment, which stays with its failed attempt (§2, CTX-2.30).
    equal([(r["attempt"]) for r in requests(trace, "business")], [1, 2, 1, 1],
          "attempts of the business requests")
    equal(endings(trace), [(1, "succeeded", None), (2, "succeeded", None)], "Run endings")
    absent(trace, "half an ans", "the failed attempt's fragment")
    for number in (3, 4):
        expect("calling" in request_text(requests(trace, "business")[number - 1]),
               f"request {number} lacks the completed decision")


# --- §1, §4 (Q81): what the history API serves -------------------------------------------------


def _history_scenario() -> dict[str, Any]:
    document = base()
    read: list[dict[str, Any]] = [
        {"kind": "role", "role": "root", "bodies": True},
        {"kind": "audit", "bodies": True},
        {"kind": "audit", "bodies": True, "content": "effective"},
        {"kind": "role", "role": "root", "content": "raw"}]
    document["steps"] = [{"ask": "q1"}, {"advance": True},
                         *({"read_history": r} for r in read)]
    document["model"] = {"business": [{"text": "raw answer"}]}
    document["hooks"] = [{"point": "model.post_response", "items": [
        {"payload_patch": [{"path": "text", "value": "checked answer"}]}]}]
    return document


def _history_check(trace: Trace) -> None:
    # §1: the effective version is the common source of business consumers; raw is kept for
    # audit and recovery (Q81). The root role reads the hook's "checked answer"; audit reads
    # the provider's "raw answer" by default and the effective one when it asks; a role
    # asking for raw records is refused.
    reads = of(trace, "history_read")
    equal([r["allowed"] for r in reads], [True, True, True, False], "reads served")
    answers = [[b["text"] for b in r["records"] if b["message_kind"] == "assistant"]
               for r in reads[:3]]
    equal(answers, [[digest("checked answer")], [digest("raw answer")],
                    [digest("checked answer")]],
          "the answer each read serves (role, audit, audit effective)")


def _executor_history_scenario() -> dict[str, Any]:
    document = hooked_executor_answer()
    document["steps"] = [*document["steps"],
                         {"read_history": {"kind": "audit", "node_task": 1, "bodies": True,
                                           "content": "effective"}},
                         {"read_history": {"kind": "audit", "node_task": 1, "bodies": True}},
                         {"read_history": {"kind": "role", "role": "root", "node_task": 1}}]
    return document


def _executor_history_check(trace: Trace) -> None:
    # An Executor's private records are for that NodeTask and authorised audit (§4): audit
    # reads the one execution by itself — its hand-over and its answer, the effective
    # "checked sum 5" or the raw "raw sum 23" — and none of the Planner's records (the
    # Planner's final "it is five" is not among them); the root role naming it is refused.
    reads = of(trace, "history_read")
    equal([r["allowed"] for r in reads], [True, True, False], "reads served")
    answers = [[b["text"] for b in r["records"] if b["message_kind"] == "assistant"]
               for r in reads[:2]]
    equal(answers, [[digest("checked sum 5")], [digest("raw sum 23")]],
          "the Executor's answer (effective, raw)")
    expect(all("assistant" in r["message_kinds"] and "user_ref" in r["message_kinds"]
               for r in reads[:2]), f"the execution's records: {reads[0]['message_kinds']}")


# --- §11 (Q82): arguments that break the tool's declared schema ---------------------------------


def _arguments_scenario() -> dict[str, Any]:
    schema = {"type": "object", "properties": {"path": {"type": "string"}},
              "required": ["path"]}
    document = base(tools=[{"name": "read", "schema": schema}])
    document["steps"] = [{"ask": "read it"}, {"advance": True}]
    document["model"] = {"business": [
        {"text": "", "tool_calls": [{"name": "read", "arguments": {}}]},
        {"text": "", "tool_calls": [{"name": "read", "arguments": {"path": 7}}]},
        {"text": "", "tool_calls": [{"name": "read", "arguments": {"path": "a.md"}}]},
        {"text": "done"}]}
    document["tools"] = {"read": [{"text": "contents"}]}
    return document


def _arguments_check(trace: Trace) -> None:
    # read declares a required string path. A call without it, and one with a number, are
    # output-format errors: never run, each answered with an error result the business role's
    # next Loop reads and corrects (§11 "输出格式错误 由业务角色新 Loop 修正"; Q82). Only the
    # third call runs.
    equal([(e["name"], e["effective_arguments"]) for e in of(trace, "tool_executed")],
          [("read", {"path": "a.md"})], "tools executed")
    sent = requests(trace, "business")
    equal(len(sent), 4, "business requests")
    for number in (2, 3):
        results = [m for m in sent[number - 1]["view"]["messages"] if m["role"] == "tool"]
        expect(bool(results), f"request {number} has no tool result")
        last = result_facts(results[-1], f"the malformed call's result in request {number}")
        equal(last.get("status"), "error", f"the malformed call's result in request {number}")
    equal(endings(trace), [(1, "succeeded", None)], "Run endings")


# --- §2, §11: provider call ids and malformed arguments -----------------------------------------


def _provider_calls_scenario() -> dict[str, Any]:
    document = base(tools=[{"name": "a"}, {"name": "b"}])
    document["steps"] = [{"ask": "go"}, {"advance": True}]
    document["model"] = {"business": [
        {"text": "", "tool_calls": [{"name": "a", "id": "call_1", "arguments": {"n": 1}},
                                    {"name": "b", "id": "call_1", "arguments": {"n": 2}},
                                    {"name": "a", "id": "call_2", "arguments_text": "{n: 3"}]},
        {"text": "done"}]}
    document["tools"] = {"a": [{"text": "result of a"}], "b": [{"text": "result of b"}]}
    return document


def _provider_calls_check(trace: Trace) -> None:
    # The provider gives two calls the same id "call_1": an external id is never the
    # platform's key (§2), so both run, each with its own call identity, and each result
    # answers its own call. The third call's arguments are no JSON: an output-format error,
    # never run, answered with an error result for the next Loop (§11; Q82).
    equal([(e["name"], e["effective_arguments"]) for e in of(trace, "tool_executed")],
          [("a", {"n": 1}), ("b", {"n": 2})], "tools executed")
    second = requests(trace, "business")[1]["view"]["messages"]
    decisions = [m for m in second if m["tool_calls"]]
    equal(len(decisions), 1, "assistant messages with tool calls in the second request")
    decision = decisions[0]
    calls = {c["call_id"]: c["name"] for c in decision["tool_calls"]}
    equal(len(calls), 3, "distinct call identities of the decision")
    tool = [m for m in second if m["role"] == "tool"]
    answers = [(calls.get(m["call_id"]), m["text"]) for m in tool]
    equal([name for name, _ in answers], ["a", "b", "a"], "the calls the results answer")
    equal([text for _, text in answers[:2]], ["result of a", "result of b"],
          "the results of the two runs")
    equal(result_facts(tool[2], "the malformed call's result").get("status"), "error",
          "the malformed call's result")
    equal(endings(trace), [(1, "succeeded", None)], "Run endings")


# --- §8, §11 (Q83, Q84): what a window error tells ----------------------------------------------


def _fixed_too_large_scenario() -> dict[str, Any]:
    document = base()
    document["steps"] = [{"ask": "a" * 100}, {"advance": True}, {"ask": "Q" * 3500},
                         {"advance": True}]
    document["model"] = {"business": [{"text": "b" * 100}]}
    return document


def _fixed_too_large_check(trace: Trace) -> None:
    # W = 4000, O = 400, S = 100: B = 3500. Run 2's fixed input — "sys" and its 3500-character
    # question, which may be neither dropped nor summarised — is at least 3503 > B, so even
    # with Run 1's 200 characters of compressible history H = B − F <= 0:
    # CONTEXT_PROTECTED_INPUT_TOO_LARGE (§8), no request sent. The error names the fixed input
    # as what does not fit (§8 "明确提示固定输入超窗"; Q83) with numbers only (§11): its
    # figure F is over B and below the whole input I, which also counts the history. The
    # client is told the code with the ending (Q84).
    equal(len(requests(trace, "business")), 1, "business requests (Run 1's only)")
    equal(endings(trace), [(1, "succeeded", None), (2, "failed",
                                                      "CONTEXT_PROTECTED_INPUT_TOO_LARGE")],
          "Run endings")
    figures = of(trace, "run_ended")[-1].get("figures") or {}
    equal({k: figures.get(k) for k in ("input_budget", "window", "output_reserve",
                                       "safety_margin")},
          {"input_budget": 3500, "window": 4000, "output_reserve": 400, "safety_margin": 100},
          "the budget figures of the error")
    fixed, whole = figures.get("fixed_input_tokens"), figures.get("input_tokens")
    expect(isinstance(fixed, int) and isinstance(whole, int) and 3503 <= fixed < whole,
           f"the fixed input's figure: expected 3503 <= F < I, saw F={fixed}, I={whole}")
    ended = [e for e in of(trace, "client_event") if e["event"] == "run_ended"]
    equal([e.get("error_code") for e in ended], [None, "CONTEXT_PROTECTED_INPUT_TOO_LARGE"],
          "the error codes the client's run_ended events carry")


# --- §11 (issue #23): a stop while a request is in flight --------------------------------------

StopOutcome = tuple[str, str, dict[str, Any], int, tuple[dict[str, Any], ...]]
STOP_IN_FLIGHT: tuple[StopOutcome, ...] = (
    # (id part, what the request in flight returns, its answer, model_attempts, hooks)
    ("FINAL", "a final answer", {"text": "an answer"}, 2, ()),
    ("FAILS", "a failure", {"fail": "reset"}, 1, ()),
    ("PARTIAL", "a partial output, then a failure", {"partial": "hal", "fail": "reset"}, 1, ()),
    ("CALLS", "a tool-call answer", {"text": "", "tool_calls": [{"name": "fetch"}]}, 2,
     ({"point": "tool.pre_call", "items": [{"decision": "allow"}]},)),
    ("DENIED", "an answer a post-response hook denies", {"text": "an answer"}, 2,
     ({"point": "model.post_response", "items": [{"decision": "deny"}]},)),
)
"""Each outcome the business request in flight can have when the stop arrives. Whatever it
returns, the stop decides the ending (Q76)."""


def _stop_in_flight_scenario(answer: dict[str, Any], attempts: int,
                             hooks: tuple[dict[str, Any], ...]) -> dict[str, Any]:
    document = base(tools=[{"name": "fetch"}], model_attempts=attempts)
    document["steps"] = [{"ask": "go"}, {"advance": True}]
    document["model"] = {"business": [answer]}
    document["tools"] = {"fetch": [{"text": "payload"}]}
    document["hooks"] = list(hooks)
    document["triggers"] = [{"on": {"purpose": "business", "ordinal": 1}, "do": {"stop": True}}]
    return document


def _stop_in_flight_check(trace: Trace) -> None:
    _stop_outcome_check(trace)
    equal([e.get("final_answer") for e in of(trace, "run_ended")], [None],
          "the final answer delivered (a stopped Run delivers none)")


def _stop_outcome_check(trace: Trace) -> None:
    # The user's stop is accepted while the first request is in flight. The request winds up
    # ("已有操作收束") but nothing new starts — no retry, no tool, no pre-call hook for a call
    # that will not run (Q80) — and whatever it returned, the root Run's stop is not swallowed
    # by the request's own outcome (§11): the Run ends stopped, with no error code.
    equal([(r["purpose"], r["attempt"]) for r in requests(trace)], [("business", 1)],
          "(purpose, attempt) of requests")
    equal(of(trace, "tool_executed"), [], "tools executed")
    equal([e["point"] for e in of(trace, "hook_called") if e["point"] == "tool.pre_call"], [],
          "pre-call hooks asked")
    equal(endings(trace), [(1, "stopped", None)], "Run endings")


def _stop_in_chunk_scenario() -> dict[str, Any]:
    document = boundary(model_attempts=1)
    document["model"]["compaction"] = [{"fail": "reset"}]
    document["triggers"] = [{"on": {"purpose": "compaction", "ordinal": 1},
                             "do": {"stop": True}}]
    return document


def _stop_in_chunk_check(trace: Trace) -> None:
    # The boundary Session: Run 2 compacts Run 1 in one chunk. The stop arrives while that
    # chunk's only attempt is in flight, and the attempt fails. The compaction does not
    # complete, but the Run ends as the user's stop, not as COMPACTION_FAILED (§11: the stop
    # during compaction starts nothing new and is not swallowed by the local error).
    equal([r["purpose"] for r in requests(trace)], ["business", "compaction"], "requests")
    equal(endings(trace), [(1, "succeeded", None), (2, "stopped", None)], "Run endings")


def _stop_cases() -> tuple[Case, ...]:
    made = [Case(f"S11-STOP-IN-FLIGHT-{part}",
                 f"a stop while the request is in flight wins over {what}", "§11",
                 ("CTX-11.5", "CTX-11.13"), _stop_in_flight_scenario(answer, attempts, hooks),
                 _stop_in_flight_check,
                 frozenset({"triggers", "stop", "final_answers"}
                           | ({"hooks"} if hooks else set())))
            for part, what, answer, attempts, hooks in STOP_IN_FLIGHT]
    made.append(Case("S11-STOP-IN-FLIGHT-CHUNK", "a stop while a compaction chunk fails wins "
                     "over COMPACTION_FAILED", "§11", ("CTX-11.5", "CTX-11.13", "CTX-8.7"),
                     _stop_in_chunk_scenario(), _stop_in_chunk_check,
                     COMPACTING | {"triggers", "stop"}))
    return tuple(made)


def _case(id_: str, title: str, source: str, requirements: tuple[str, ...],
          scenario: dict[str, Any], check: Callable[[Trace], None],
          *needs: str) -> Case:
    return Case(id_, title, source, requirements, scenario, check, frozenset(needs))


CASES: tuple[Case, ...] = (
    _case("S2-RESPONSE-DENIED-CALLS", "a denied response's tool calls never run", "§2",
          ("CTX-2.35", "CTX-3.18", "CTX-3.60"), _denied_calls_scenario(), _denied_calls_check,
          "hooks"),
    _case("S2-RESPONSE-DENIED-FINAL", "a denied final answer is not the Run's result", "§2",
          ("CTX-2.35", "CTX-2.36", "CTX-3.18"), _denied_final_scenario(), _denied_final_check,
          "hooks"),
    _case("S2-FINAL-ANSWER-DELIVERED", "the user receives the effective final answer, and none "
          "when it is denied", "§2", ("CTX-2.36", "CTX-2.34", "CTX-2.35"),
          _final_delivered_scenario(), _final_delivered_check, "hooks", "final_answers"),
    _case("S3-REQUEST-DENIED", "a denied model request is never sent", "§3",
          ("CTX-3.18", "CTX-3.60"), _denied_request_scenario(), _denied_request_check,
          "hooks"),
    _case("S3-EXECUTOR-ANSWER-EFFECTIVE", "the Planner receives the Executor's effective "
          "answer", "§3", ("CTX-2.31", "CTX-2.34", "CTX-3.16"), _executor_answer_scenario(),
          _executor_answer_check, "hooks", "planner_executor"),
    _case("S3-EXECUTOR-ANSWER-EFFECTIVE-TAKEOVER", "the Planner receives the Executor's "
          "effective answer after a takeover", "§3", ("CTX-2.31", "CTX-3.69"),
          _executor_answer_scenario({"phase": "hook_decided", "occurrence": 2,
                                     "when": "after"}),
          taken_over(_executor_answer_check), "hooks", "planner_executor", "crash_points"),
    _case("S11-EXECUTOR-CONTEXT-ERROR", "an Executor's context error ends the whole "
          "invocation", "§11", ("CTX-11.11", "CTX-8.49"), _executor_context_error_scenario(),
          _executor_context_error_check, "planner_executor", "estimator_injection"),
    _case("S8-DEADLINE-BETWEEN-ATTEMPTS", "no retry is sent after the Run's deadline", "§8",
          ("CTX-8.72", "CTX-3.93"), _deadline_retry_scenario(), _deadline_retry_check),
    _case("ROW-12-RETRY", "a failed attempt's fragment stays out of the view after a good "
          "retry", "§12 row 12", ("CTX-2.30", "CTX-6.8"), _fragment_retry_scenario(),
          _fragment_retry_check),
    *_stop_cases(),
    _case("S2-PROVIDER-CALL-IDS", "provider call ids are never keys; malformed arguments "
          "are a format error", "§2", ("CTX-2.25", "CTX-6.1", "CTX-11.9"),
          _provider_calls_scenario(), _provider_calls_check),
    _case("S11-ARGUMENTS-SCHEMA", "arguments that break the declared schema are a format "
          "error", "§11", ("CTX-11.9",), _arguments_scenario(), _arguments_check),
    _case("S8-FIXED-INPUT-TOO-LARGE", "a fixed input over the budget is named with its "
          "figure, and the client told the code", "§8", ("CTX-8.50", "CTX-11.1", "CTX-11.14"),
          _fixed_too_large_scenario(), _fixed_too_large_check, "estimator_injection",
          "error_figures"),
    _case("S1-HISTORY-EFFECTIVE", "the history API serves a role the effective version, audit "
          "the raw", "§1", ("CTX-1.11", "CTX-2.31", "CTX-3.69"), _history_scenario(),
          _history_check, "hooks", "history_api", "history_bodies"),
    _case("S4-HISTORY-EXECUTOR-TASK", "audit reads one Executor execution, effective or raw",
          "§4", ("CTX-4.11", "CTX-2.31"), _executor_history_scenario(),
          _executor_history_check, "hooks", "planner_executor", "history_api",
          "history_bodies"),
)
