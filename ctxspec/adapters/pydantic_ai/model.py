"""The scenario's model script as a pydantic-ai ``FunctionModel`` (pydantic_ai/models/
function.py), the framework's own test double: each request it receives is handed to the
driver, which traces it as sent and asks the harness's scripted port; the port's answer becomes
a ``ModelResponse``, a provider failure the exception a pydantic-ai model raises, so the
framework's own error handling (and the capabilities' ``on_model_request_error``) decide what
happens next.
"""

import asyncio
import itertools
from collections.abc import Sequence
from typing import Protocol

from pydantic_ai.exceptions import (
    ModelConnectionError,
    ModelContextWindowExceededError,
    ModelServerError,
)
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    ModelResponsePart,
    TextPart,
    ToolCallPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

from ctxspec.reference.ports import (
    Complete,
    ContextLengthExceeded,
    Failed,
    ModelOutcome,
    PartialThenFailed,
)

MODEL_NAME = "scripted"


class Observer(Protocol):
    def request(self, messages: Sequence[ModelMessage], info: AgentInfo,
                role: str) -> ModelOutcome:
        """Trace the request pydantic-ai sends ``role``'s model (root, or the Executor behind
        ``delegate``) and ask the scripted port for its answer."""
        ...


def scenario_model(observer: Observer, role: str, ids: "itertools.count[int]") -> FunctionModel:
    """A ``FunctionModel`` answering every request from the scenario through ``observer``;
    ``ids``: the provider's call ids, one counter for every role, as one provider gives them."""

    async def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        await asyncio.sleep(0)  # a stop the user sent before the request left cancels it here
        outcome = observer.request(messages, info, role)
        # The answer arrives after the request left: the event loop runs in between, so a stop
        # the user sent meanwhile (a trigger inside the port) cancels the call first.
        await asyncio.sleep(0)
        return response(outcome, ids)

    return FunctionModel(answer, model_name=MODEL_NAME)


def response(outcome: ModelOutcome, ids: "itertools.count[int]") -> ModelResponse:
    if isinstance(outcome, Complete):
        parts: list[ModelResponsePart] = []
        if outcome.text or not outcome.tool_calls:
            parts.append(TextPart(outcome.text))
        for proposed in outcome.tool_calls:
            arguments = proposed.malformed_arguments if proposed.malformed_arguments is not None \
                else dict(proposed.arguments)
            parts.append(ToolCallPart(proposed.name, arguments,
                                      tool_call_id=proposed.provider_call_id
                                      or f"call_{next(ids)}"))
        return ModelResponse(parts=parts, usage=_usage(outcome), model_name=MODEL_NAME)
    if isinstance(outcome, ContextLengthExceeded):
        raise ModelContextWindowExceededError(
            model_name=MODEL_NAME, message="the request exceeds the model's context window")
    if isinstance(outcome, PartialThenFailed):  # the stream broke after its first output
        raise ModelConnectionError(model_name=MODEL_NAME,
                                   message=f"stream broken: {outcome.code}")
    assert isinstance(outcome, Failed)
    raise ModelServerError(model_name=MODEL_NAME,
                           message=f"scripted provider failure: {outcome.code}")


def _usage(outcome: Complete) -> RequestUsage:
    """The provider's report when the script gives one (the driver traces it); without one
    the FunctionModel puts its own estimate in, which nothing reads."""
    return RequestUsage(input_tokens=outcome.input_tokens or 0,
                        output_tokens=outcome.output_tokens or 0)
