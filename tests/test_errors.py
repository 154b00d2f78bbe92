"""§11 through the Driver: the closed set of terminal codes, hook diagnostics that never end a
Run, and messages that give numbers, configuration sources and the stage — never the system
prompt or a secret. The character estimator makes I the sum of the messages' lengths."""

from typing import Any

import pytest

from ctxspec.conformance.driver import ReferenceDriver, run_scenario
from ctxspec.conformance.scenario import parse_scenario
from ctxspec.reference.errors import ErrorCode
from ctxspec.reference.runtime import trace as tr

SECRET_PROMPT = "SYSTEM-PROMPT-sk-live-1234"
"""A system prompt holding a key: no error message may contain it."""


def scenario(steps: list[dict[str, Any]], business: list[dict[str, Any]],
             **agent: Any) -> dict[str, Any]:
    return {"scenario_version": 1, "name": "errors", "steps": steps,
            "agent": {"system_prompt": SECRET_PROMPT, "window": 1000, "output_reserve": 100,
                      "safety_margin": 50, "estimator": "chars", **agent},
            "model": {"business": business}}


def ended(document: dict[str, Any]) -> tuple[tr.RunEnded, tr.Trace]:
    driver = ReferenceDriver()
    run_scenario(parse_scenario(document), lambda: driver)
    trace = driver.raw_trace()
    [end] = trace.of(tr.RunEnded)
    return end, trace


@pytest.mark.covers("CTX-11.1", "CTX-11.14", "CTX-8.49")
def test_a_question_too_large_for_the_window_is_refused_before_any_request() -> None:
    # W=1000, O=100, S=50 → B=850. The prompt is 26 characters; a 900-character question leaves
    # nothing compressible and I=926 > B: CONTEXT_PROTECTED_INPUT_TOO_LARGE, no model request.
    question = "q" * 900
    end, trace = ended(scenario([{"ask": question}, {"advance": True}], []))
    assert (end.status, end.error_code) == ("failed",
                                            ErrorCode.CONTEXT_PROTECTED_INPUT_TOO_LARGE.value)
    assert trace.model_requests() == []
    assert end.message is not None
    assert "926" in end.message and "1000" in end.message and "850" in end.message
    # §8 "明确提示固定输入超窗": the message names the fixed input as what does not fit (Q83).
    assert "fixed input" in end.message
    assert SECRET_PROMPT not in end.message and question not in end.message


@pytest.mark.covers("CTX-7.23", "CTX-7.24", "CTX-11.14")
def test_the_providers_context_length_error_ends_the_run_without_a_retry() -> None:
    end, trace = ended(scenario([{"ask": "hello"}, {"advance": True}],
                                [{"context_length_exceeded": True}, {"text": "never asked"}]))
    assert (end.status, end.error_code) == ("failed", ErrorCode.CONTEXT_LENGTH_EXCEEDED.value)
    assert [r.attempt for r in trace.model_requests("business")] == [1]  # no second attempt
    assert end.message is not None and SECRET_PROMPT not in end.message
    # I = 26 (prompt) + 5 (question): the message reports the numbers and the stage.
    assert "31" in end.message and "the provider refused it" in end.message


@pytest.mark.covers("CTX-3.59")
def test_a_conflicting_hook_patch_is_a_diagnostic_and_the_run_goes_on() -> None:
    document = scenario([{"ask": "write it"}, {"advance": True}],
                        [{"text": "", "tool_calls": [{"name": "write",
                                                      "arguments": {"path": "a.md"}}]},
                         {"text": "done"}],
                        tools=[{"name": "write"}])
    document["tools"] = {"write": [{"text": "ok"}]}
    # One item sets the call's path to two different values, once through the payload and
    # once through the context: HOOK_PATCH_CONFLICT (§3).
    document["hooks"] = [{"point": "tool.pre_call", "items": [{
        "decision": "allow",
        "payload_patch": [{"path": "arguments.path", "value": "b.md"}],
        "context_patch": [{"target": "call", "field": "tool_call:{call_id}.arguments.path",
                           "value": "c.md"}]}]}]
    end, trace = ended(document)
    assert (end.status, end.error_code) == ("succeeded", None)
    [decided] = trace.of(tr.HookDecided)
    assert ErrorCode.HOOK_PATCH_CONFLICT.value in decided.diagnostics
    # The whole patch of that item is dropped: the tool runs with the proposed argument.
    [ran] = trace.of(tr.ToolExecuted)
    assert ran.effective_arguments == {"path": "a.md"}
