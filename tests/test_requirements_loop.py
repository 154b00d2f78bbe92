"""Requirements that no other test pinned, about the model call and the Loop (§2, §3, §11): the
model port gets exactly the frozen request on every attempt, the Loop takes the response as the
post-response hook left it, the final answer reaches the client only with the Run's end, and a
malformed decision is corrected by a new business Loop that counts.

Expected values are derived by hand from the design and the scenario; the character estimator (one
token per character, no overhead) keeps the numbers readable.
"""

import json

import pytest

from ctxspec.conformance.case import example
from ctxspec.reference.runtime import trace as tr
from tests.driven_scenarios import base, drive, ended, lines

# --- the model gets the frozen request; results reach the Loop after post-processing -------------


@pytest.mark.covers("CTX-3.4")
def test_the_model_port_gets_exactly_the_frozen_request_on_every_attempt() -> None:
    # A first attempt breaks before any output; the second attempt of the same Operation sends
    # the same frozen request, and the port receives exactly the messages traced as sent.
    document = base()
    document["steps"] = [{"ask": "q"}, {"advance": True}]
    document["model"] = {"business": [{"fail": "reset"}, {"text": "ok"}]}
    driver, model = drive(document)
    sent = driver.raw_trace().model_requests("business")
    assert [(r.purpose_key, r.attempt) for r in sent] == [(sent[0].purpose_key, 1),
                                                          (sent[0].purpose_key, 2)]
    assert sent[0].view == sent[1].view
    for call, request in zip(model.calls, sent, strict=True):
        assert [(m.role, m.text) for m in call.messages] == \
            [(m.role.value, m.text) for m in request.view.messages]


@pytest.mark.covers("CTX-2.34")
def test_the_loop_takes_the_response_as_the_post_response_hook_left_it() -> None:
    # A post-response hook rewrites Run 1's answer before it is handed on: the Run's final
    # result, as the next question's history shows it, is the rewritten text.
    document = base()
    document["steps"] = [{"ask": "q1"}, {"advance": True}, {"ask": "q2"}, {"advance": True}]
    document["model"] = {"business": [{"text": "raw answer"}, {"text": "a2"}]}
    document["hooks"] = [{"point": "model.post_response", "ordinal": 1, "items": [
        {"payload_patch": [{"path": "text", "value": "checked answer"}]}]}]
    driver, _ = drive(document)
    trace = driver.raw_trace()
    assert lines(trace.model_requests("business")[1]) == [
        ("system", "system_prompt", "sys"), ("user", "user_ref", "q1"),
        ("assistant", "assistant", "checked answer"),
        ("system", "outcome", "[run 1 ended: succeeded]"), ("user", "user_ref", "q2")]


@pytest.mark.covers("CTX-2.36")
def test_the_final_answer_reaches_the_client_only_with_the_run_end() -> None:
    # The client gets lifecycle events; the answer is never streamed in one, and each Run's
    # last event is its end, after its last model request.
    document = example("supplements-across-runs")
    driver, _ = drive(document)
    trace = driver.raw_trace()
    answers = [m.text for r in trace.model_requests("business") for m in r.view.messages
               if m.kind.value == "assistant"]
    for event in trace.of(tr.ClientEvent):
        assert not any(answer and answer in event.detail for answer in answers)
    for run_end in trace.of(tr.RunEnded):
        events = [e for e in trace.of(tr.ClientEvent) if e.run_id == run_end.run_id]
        assert events[-1].event == "run_ended"


# --- errors --------------------------------------------------------------------------------------


@pytest.mark.covers("CTX-11.9")
def test_a_malformed_decision_is_corrected_by_a_new_business_loop_that_counts() -> None:
    # The model names a tool its role does not have (an output the runtime cannot act on): the
    # call gets a structured error and the business role corrects itself in its next Loop; no
    # compaction is asked. With a Loop budget of one, that correction is out of budget.
    document = base(tools=[{"name": "t"}])
    document["steps"] = [{"ask": "go"}, {"advance": True}]
    document["model"] = {"business": [{"text": "", "tool_calls": [{"name": "tt"}]},
                                      {"text": "fixed"}]}
    driver, _ = drive(document)
    trace = driver.raw_trace()
    assert [r.purpose for r in trace.model_requests()] == ["business", "business"]
    error = next(m.text for m in trace.model_requests()[1].view.messages
                 if m.kind.value == "tool_result")
    assert json.loads(error)["error"]["code"] == "NOT_PERMITTED"
    assert ended(trace) == [(1, "succeeded", None)]
    document["agent"]["loop_limit"] = 1
    driver, _ = drive(document)
    trace = driver.raw_trace()
    assert len(trace.model_requests()) == 1
    assert ended(trace) == [(1, "loop_exhausted", None)]
