"""Scenarios on the reference runtime through the Driver, beyond the §12 rows (which are the
conformance cases of conformance/rows/, run by tests/test_conformance.py): the worked
examples replay, scripts that run out or are malformed fail loudly, and compaction calls pass
through hooks.

The character estimator (one token per character, no overhead) makes the numbers readable:
a request's I is the sum of its messages' text lengths.
"""

from copy import deepcopy
from pathlib import Path
from typing import Any

import pytest

from ctxspec.conformance.driver import ReferenceDriver, run_scenario
from ctxspec.conformance.scenario import ScenarioError, load_scenario, parse_scenario
from ctxspec.reference.ports import ScriptExhausted
from ctxspec.reference.runtime import trace as tr

EXAMPLES = Path(__file__).resolve().parent.parent / "docs" / "examples"


def run(document: dict[str, Any]) -> tr.Trace:
    driver = ReferenceDriver()
    run_scenario(parse_scenario(document), lambda: driver)
    return driver.raw_trace()


def base(**agent: Any) -> dict[str, Any]:
    return {"scenario_version": 1, "name": "t", "steps": [],
            "agent": {"system_prompt": "sys", "window": 4000, "output_reserve": 400,
                      "safety_margin": 100, "estimator": "chars", **agent}}


def ended(trace: tr.Trace) -> list[tuple[int, str, str | None]]:
    return [(e.run_no, e.status, e.error_code) for e in trace.of(tr.RunEnded)]


# --- the 80% boundary scenario of rows 4 and 5, reused with compaction hooks ----------------------


def boundary(question_length: int) -> dict[str, Any]:
    """W=5000, O=400, S=100: B = 4500, trigger floor(0.8 × 4500) = 3600. Run 1 leaves 1000 +
    1000 characters and the 24 of "[run 1 ended: succeeded]"; with "sys" (3) run 2's request is
    I = 2027 + the question's length, so 1572 and 1573 sit on both sides of the trigger."""
    document = base(window=5000)
    question = "Q" * question_length
    document["steps"] = [{"ask": "a" * 1000}, {"advance": True}, {"ask": question},
                         {"advance": True}]
    document["model"] = {"business": [{"text": "b" * 1000}, {"text": "done"}],
                         "compaction": [{"text": "SUMMARY"}]}
    return document


# --- scenarios themselves -------------------------------------------------------------------------


def test_every_example_replays() -> None:
    names = sorted(p.name for p in EXAMPLES.glob("*.json"))
    assert len(names) >= 3
    for path in EXAMPLES.glob("*.json"):
        driver = run_scenario(load_scenario(path))
        assert isinstance(driver, ReferenceDriver)
        assert driver.raw_trace().of(tr.RunEnded), path.name


def test_keyed_answers_reach_their_request_whatever_the_order() -> None:
    # Run 2's answers are listed first, and Run 1's second request's retry is keyed too: each
    # answer reaches the request it names; the unkeyed answer is taken in order as before.
    document = base(tools=[{"name": "t"}])
    document["steps"] = [{"ask": "q1"}, {"advance": True}, {"ask": "q2"}, {"advance": True}]
    document["model"] = {"business": [
        {"text": "second run", "run": 2, "request": 1},
        {"text": "run 1 done", "run": 1, "request": 2, "attempt": 2},
        {"fail": "reset", "run": 1, "request": 2},
        {"text": "", "tool_calls": [{"name": "t"}]}]}
    document["tools"] = {"t": [{"text": "r"}]}
    trace = run(document)
    assert ended(trace) == [(1, "succeeded", None), (2, "succeeded", None)]
    assert [(e.attempt, e.purpose_key == trace.of(tr.ModelRequestSent)[1].purpose_key)
            for e in trace.of(tr.ModelRequestSent)] == [(1, False), (1, True), (2, True),
                                                         (1, False)]
    assert [e.final_answer for e in trace.of(tr.RunEnded)] == ["run 1 done", "second run"]


def test_a_script_that_runs_out_fails_loudly() -> None:
    document = base()
    document["steps"] = [{"ask": "hello"}, {"advance": True}]
    with pytest.raises(ScriptExhausted, match="business model script ran out at request #1"):
        run(document)


@pytest.mark.parametrize(("change", "message"), [
    (lambda d: d["agent"].pop("window"), "scenario.agent.window: Field required"),
    (lambda d: d.update(steps=[{"ask": "x", "stop": True}]),
     "scenario.steps[0]: Value error, a step is exactly one of"),
    (lambda d: d["agent"].update(window=0), "scenario.agent.window: Input should be greater"),
    (lambda d: d.update(surprise=1), "scenario.surprise: Extra inputs are not permitted"),
    (lambda d: d.update(model={"business": [{"text": "a", "fail": "b"}]}),
     "scenario.model.business[0]: Value error, a model response is exactly one of"),
    (lambda d: d.update(model={"business": [{"fail": "b", "usage": {"input_tokens": 1}}]}),
     "scenario.model.business[0]: Value error, usage belongs to a response with text"),
    (lambda d: d.update(model={"business": [{"text": "a", "usage": {}}]}),
     "scenario.model.business[0].usage: Value error, a usage report gives input_tokens"),
    (lambda d: d.update(model={"business": [{"text": "a", "usage": {"input_tokens": -1}}]}),
     "scenario.model.business[0].usage.input_tokens: Input should be greater than or equal"),
    (lambda d: d.update(tools={"t": [{"text": "a", "latency": 0}]}),
     "scenario.tools.t[0].latency: Input should be greater than or equal to 1"),
    (lambda d: d.update(model={"business": [{"text": "a", "run": 1}]}),
     "scenario.model.business[0]: Value error, a keyed answer gives both run and request"),
    (lambda d: d.update(model={"business": [{"text": "a", "run": 1, "request": 1},
                                            {"text": "b", "run": 1, "request": 1}]}),
     "scenario.model: Value error, business: two answers keyed to the same run"),
    (lambda d: d.update(model={"business": [{"text": "", "tool_calls": [
        {"name": "t", "arguments": {"a": 1}, "arguments_text": "{}"}]}]}),
     "a call gives arguments or arguments_text, not both"),
])
def test_malformed_scenarios_name_the_field(change: Any, message: str) -> None:
    document = base()
    document["steps"] = [{"ask": "x"}]
    broken = deepcopy(document)
    change(broken)
    with pytest.raises(ScenarioError) as caught:
        parse_scenario(broken)
    assert message in str(caught.value)


@pytest.mark.covers("CTX-8.19", "CTX-8.20", "CTX-8.21", "CTX-8.22", "CTX-8.9", "CTX-11.2",
                    "CTX-11.3")
def test_compaction_calls_pass_through_hooks_and_a_deny_fails_the_episode() -> None:
    document = boundary(1573)
    document["hooks"] = [{"point": "compaction.post_response", "items": [
        {"fails": True},
        {"payload_patch": [{"path": "summary", "value": "SUMMARY (redacted)"}]}]}]
    trace = run(document)
    business = trace.model_requests("business")[-1]
    assert business.view.messages[1].text.endswith("SUMMARY (redacted)")
    assert [(d.point, d.decision) for d in trace.of(tr.HookDecided)] == [
        ("compaction.post_response", "failed"), ("compaction.post_response", "allow")]
    document["hooks"] = [{"point": "compaction.pre_request", "items": [{"decision": "deny"}]}]
    denied = run(document)
    assert ended(denied)[-1] == (2, "failed", "COMPACTION_FAILED")
    assert [r.purpose for r in denied.model_requests()] == ["business"]  # nothing summarised


def test_reported_usage_and_latency_reach_the_trace_as_reported() -> None:
    # An answer reporting only output tokens has no input deviation; one reporting input has
    # reported − estimate: "sys" 3 + "hi" 2 + t's 47-character schema = 52, so 50 gives −2; the
    # second request adds the two calls written out ("\nt({})", 6 each) and "x", "y": 66. The
    # tool's latency is recorded on its execution; a result without one records None.
    document = base(tools=[{"name": "t"}])
    document["steps"] = [{"ask": "hi"}, {"advance": True}]
    document["model"] = {"business": [
        {"text": "", "tool_calls": [{"name": "t"}, {"name": "t"}],
         "usage": {"input_tokens": 50}},
        {"text": "ok", "usage": {"output_tokens": 2}}]}
    document["tools"] = {"t": [{"text": "x", "latency": 4}, {"text": "y"}]}
    trace = run(document)
    assert [(u.estimated_input_tokens, u.input_tokens, u.output_tokens, u.input_deviation)
            for u in trace.of(tr.ModelUsage)] == [(52, 50, None, -2), (66, None, 2, None)]
    assert [e.latency for e in trace.of(tr.ToolExecuted)] == [4, None]
