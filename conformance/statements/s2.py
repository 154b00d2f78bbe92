"""Conformance cases for normative statements of §2 outside the §12 table and the worked
examples (IDs ``S2-<name>``): each a scenario and a predicate over the neutral trace, its
expected values derived by hand from the design (see conformance/case.py)."""

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
    outcome,
    requests,
    result_facts,
)

# --- §2 statements: the Loop takes the post-processed response ----------------------------------


def _post_processed_scenario() -> dict[str, Any]:
    document = base()
    document["steps"] = [{"ask": "q1"}, {"advance": True}, {"ask": "q2"}, {"advance": True}]
    document["model"] = {"business": [{"text": "raw answer"}, {"text": "a2"}]}
    document["hooks"] = [{"point": "model.post_response", "ordinal": 1, "items": [
        {"payload_patch": [{"path": "text", "value": "checked answer"}]}]}]
    return document


def _post_processed_check(trace: Trace) -> None:
    # §2: the model's result reaches the Loop only after post-processing and the effective
    # commit; history and later requests take the effective value. Run 1's answer as Run 2's
    # request shows it is the hook's "checked answer"; the provider's "raw answer" is nowhere.
    run2 = requests(trace, "business")[1]
    equal(lines(run2), [("system", "system_prompt", "sys"), ("user", "user_ref", "q1"),
                        ("assistant", "assistant", "checked answer"),
                        outcome(1, "succeeded"),
                        ("user", "user_ref", "q2")], "Run 2's request")
    # The changed text is never passed off as the provider's: the message says it was modified
    # (it names the mutation that changed it), where the unchanged question names none.
    by_kind = {m["kind"]: m for m in run2["view"]["messages"]}
    expect(bool(by_kind["assistant"]["modified_by"]),
           "the rewritten answer is presented as the provider's original (no modified_by)")
    equal(by_kind["user_ref"]["modified_by"], [], "the unchanged question's modified_by")
    equal([e["changes"] for e in of(trace, "hook_decided")
           if e["point"] == "model.post_response"], [['text="checked answer"']],
          "the post-response decision")


# --- §2 statements: a post-call deny is an explicit state --------------------------------------


def _post_deny_scenario() -> dict[str, Any]:
    document = base(tools=[{"name": "fetch"}])
    document["steps"] = [{"ask": "go"}, {"advance": True}]
    document["model"] = {"business": [{"text": "calling", "tool_calls": [{"name": "fetch"}]},
                                      {"text": "it was withheld"}]}
    document["tools"] = {"fetch": [{"text": "payload"}]}
    document["hooks"] = [{"point": "tool.post_call", "items": [{"decision": "deny"}]}]
    return document


def _post_deny_check(trace: Trace) -> None:
    # §2/§3: the tool ran (a post-call hook cannot undo it); its post-call hook denies, so the
    # Loop gets an explicit denied state — execution happened, the ordinary result is not
    # delivered — and never the result as if it had passed, nor a made-up success.
    equal([(e["name"], e["outcome"]) for e in of(trace, "tool_executed")], [("fetch", "ok")],
          "tools executed")
    results = [m for m in requests(trace, "business")[-1]["view"]["messages"]
               if m["kind"] == "tool_result"]
    equal(len(results), 1, "tool results in the second request")
    expect("payload" not in results[0]["text"],
           f"the denied result was delivered: {results[0]['text']!r}")
    denied = result_facts(results[0], "fetch's result")
    equal((denied.get("status"), denied.get("stage"), denied.get("executed"),
           denied.get("result_delivered")),
          ("denied", "post", True, False), "the denied state the Loop receives")
    equal(endings(trace), [(1, "succeeded", None)], "Run endings")


# --- §2 statements: the final answer is delivered with the Run's end ----------------------------


_RUNS = example("supplements-across-runs")


def _answer_at_end_check(trace: Trace) -> None:
    # §2: the provider's stream is not shown piece by piece and the final answer is delivered
    # only when the Run ends. No client event carries any scripted answer text, and each Run's
    # last client event is its run_ended, which follows that Run's last model request (Run 3
    # is stopped before it sends one).
    answers = [r["text"] for r in _RUNS["model"]["business"] if r.get("text")]
    events = of(trace, "client_event")
    for event in events:
        expect(not any(answer in (event["detail"] or "") for answer in answers),
               f"a client event carries an answer: {event!r}")
    starts = {e["run_id"]: int(e["detail"].split()[-1]) for e in events
              if e["event"] == "run_started"}
    equal(sorted(starts.values()), [1, 2, 3, 4], "Runs started")
    for run_id, run_no in starts.items():
        own = [i for i, e in enumerate(trace)
               if e["kind"] == "client_event" and e["run_id"] == run_id]
        equal(trace[own[-1]]["event"], "run_ended", f"run {run_no}'s last client event")
        asked = [i for i, e in enumerate(trace)
                 if e["kind"] == "model_request" and _question_run(e) == run_id]
        expect(all(i < own[-1] for i in asked),
               f"run {run_no} ended before its last model request")


def _question_run(request: dict[str, Any]) -> str:
    """The Run whose question a request carries last: its ``source_run_id``, optional in the
    trace contract, so a driver that leaves it out fails this case, told so."""
    users = [m for m in request["view"]["messages"] if m["kind"] == "user_ref"]
    expect(bool(users), f"request {request['purpose_key']} carries no user message")
    source = users[-1].get("source_run_id")
    expect(source is not None, "the trace lacks source_run_id on a request's user message, "
           "which this case reads (optional in the trace contract)")
    return str(source)


# --- §2 statements: one context for every loop and a takeover -----------------------------------


def _kept_context_scenario() -> dict[str, Any]:
    document = example("tool-batch-hook")
    document["steps"] = [*document["steps"], {"ask": "And now?"}, {"advance": True}]
    document["model"]["business"] = [*document["model"]["business"], {"text": "Nothing more."}]
    document["crash"] = {"phase": "tool_settled", "occurrence": 1, "when": "after"}
    return document


def _kept_context_check(trace: Trace) -> None:
    # The runtime dies after the first tool settled and a new one takes over. §2: every loop
    # and the recovery of one execution keep its context: Run 1's two requests (before and
    # after the takeover) freeze revisions of one and the same context. §4: the takeover adds
    # no history round: Run 2 sees Run 1 once — one question, one ending.
    equal(len(of(trace, "restarted")), 1, "restarts")
    run1_first, run1_second, run2 = exactly(3, requests(trace, "business"), "business requests")
    equal(set(run1_second["frozen_revisions"]), set(run1_first["frozen_revisions"]),
          "the contexts Run 1's two loops read")
    equal(len(run1_first["frozen_revisions"]), 1, "contexts Run 1's request reads")
    user = [text for _, kind, text in lines(run2) if kind == "user_ref"]
    equal(user, ["Write the report and read my notes.", "And now?"], "Run 2's user inputs")
    equal([text for _, kind, text in lines(run2) if kind == "outcome"],
          [outcome(1, "succeeded")[2]], "the endings Run 2 sees")
    equal(endings(trace), [(1, "succeeded", None), (2, "succeeded", None)], "Run endings")


# --- §2 statements: the protocol order is the action order, not the completion order -----------


def _finishing(latencies: tuple[int, int, int]) -> dict[str, Any]:
    """One decision calls a, b and c in one batch; their results take ``latencies`` to arrive.
    A second question follows, so Run 1's batch is also seen as history."""
    document = base(tools=[{"name": "a"}, {"name": "b"}, {"name": "c"}])
    document["steps"] = [{"ask": "go"}, {"advance": True}, {"ask": "again"}, {"advance": True}]
    document["model"] = {"business": [
        {"text": "", "tool_calls": [{"name": "a"}, {"name": "b"}, {"name": "c"}]},
        {"text": "done"}, {"text": "ok"}]}
    document["tools"] = {name: [{"text": name.upper(), "latency": latency}]
                         for name, latency in zip("abc", latencies, strict=True)}
    return document


def _batch_as_shown(request: dict[str, Any]) -> list[tuple[Any, ...]]:
    """The assistant message that made the calls and the messages right after it: (kind, the
    call names in action order) for the decision, (kind, the call its result answers, text)
    for each tool result."""
    messages = request["view"]["messages"]
    at = next(i for i, m in enumerate(messages) if m["tool_calls"])
    calls = {c["call_id"]: c["name"] for c in messages[at]["tool_calls"]}
    shown: list[tuple[Any, ...]] = [
        ("assistant", [(c["action_ordinal"], c["name"]) for c in messages[at]["tool_calls"]])]
    for message in messages[at + 1:at + 4]:
        shown.append((message["kind"], calls.get(message["call_id"], "no call of the batch"),
                      message["text"]))
    return shown


def _completion_order_check(trace: Trace) -> None:
    # a, b and c finish in reverse order (latencies 3, 2, 1). §2: context_seq is the committed
    # order and the protocol order is never the completion order: the next request shows the
    # decision with its calls a, b, c (action ordinals 1..3), then exactly their results A, B,
    # C in that order, each answering its own call — in Run 1's next loop and again as Run 2's
    # history.
    expected = [("assistant", [(1, "a"), (2, "b"), (3, "c")]),
                ("tool_result", "a", "A"), ("tool_result", "b", "B"), ("tool_result", "c", "C")]
    business = requests(trace, "business")
    equal(len(business), 3, "business requests")
    equal(_batch_as_shown(business[1]), expected, "Run 1's batch in its next request")
    equal(_batch_as_shown(business[2]), expected, "Run 1's batch as Run 2's history")
    equal(lines(business[1])[-1], ("tool", "tool_result", "C"),
          "the last message of Run 1's next request")
    equal(endings(trace), [(1, "succeeded", None), (2, "succeeded", None)], "Run endings")


def _completion_order_compare(trace: Trace, baseline: Trace) -> None:
    # The same Session with the calls finishing in call order sends the same requests: when
    # the calls finished changes nothing the model sees.
    def sent(of_trace: Trace) -> list[tuple[Any, ...]]:
        return [(r["purpose"], lines(r), r["estimated_input_tokens"])
                for r in requests(of_trace)]
    equal(sent(trace), sent(baseline), "the requests sent")


CASES: tuple[Case, ...] = (
    Case("S2-POST-PROCESSED", "the Loop and history take the post-processed answer, marked as "
         "modified", "§2", ("CTX-2.31", "CTX-2.32", "CTX-2.34"), _post_processed_scenario(),
         _post_processed_check, frozenset({"hooks"})),
    Case("S2-POST-DENY", "a post-call deny reaches the Loop as an explicit denied state", "§2",
         ("CTX-2.35",), _post_deny_scenario(), _post_deny_check, frozenset({"hooks"})),
    Case("S2-ANSWER-AT-END", "the final answer is delivered only with the Run's end", "§2",
         ("CTX-2.36",), _RUNS, _answer_at_end_check, frozenset({"stop"})),
    Case("S2-ONE-CONTEXT", "loops and a takeover keep the execution's context and add no "
         "history round", "§2", ("CTX-2.5", "CTX-4.20"), _kept_context_scenario(),
         _kept_context_check, frozenset({"hooks", "crash_points"})),
    Case("S2-COMPLETION-ORDER", "a batch whose calls finish in reverse order is fed back in "
         "action order", "§2", ("CTX-2.28",), _finishing((3, 2, 1)), _completion_order_check,
         frozenset({"tool_latency"}), baseline=_finishing((1, 2, 3)),
         compare=_completion_order_compare),
)
