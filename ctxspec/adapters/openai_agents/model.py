"""The scenario's model script as a real Agents SDK ``Model``: the SDK's own test double
(``agents.testing.ScriptedModel``) with one step per call, derived from the harness's scripted
port when the SDK calls it. What the SDK sends is read back and traced first (``Observer``);
the port's answer becomes Responses output items, a provider failure the error an OpenAI client
raises, so the SDK's own retry policy and error handling decide what happens next.
"""

import asyncio
import itertools
from collections.abc import AsyncIterator, Sequence
from typing import Any, Protocol

import httpx2
from agents.items import TResponseStreamEvent
from agents.testing import ModelCall as SdkCall
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call
from agents.testing.model import _stream_events_for_step
from agents.usage import Usage
from openai import APIConnectionError, BadRequestError

from ctxspec.reference.ports import (
    Complete,
    ContextLengthExceeded,
    Failed,
    ModelOutcome,
    PartialThenFailed,
)

ENDPOINT = "https://scripted.invalid/v1/responses"
"""Where the scripted provider pretends to live (nothing is sent)."""


class Observer(Protocol):
    def request(self, call: SdkCall, role: str) -> ModelOutcome:
        """Trace the request the SDK sends ``role``'s model (root, or the Executor behind
        ``delegate``) and ask the scripted port for its answer."""
        ...


class ScenarioModel(ScriptedModel):
    """A ``Model`` answering every call from the scenario through ``observer``."""

    def __init__(self, observer: Observer, role: str = "root",
                 ids: "itertools.count[int] | None" = None) -> None:
        super().__init__()
        self.observer, self.role = observer, role
        self.ids = itertools.count(1) if ids is None else ids
        """The provider's item and call ids: one counter for every role's model, as one
        provider gives them, so no two items of a Session share an id."""

    async def get_response(self, *args: Any, **kwargs: Any) -> Any:
        self.enqueue(ModelStep.respond(self._answer))
        return await super().get_response(*args, **kwargs)

    async def stream_response(self, *args: Any,
                              **kwargs: Any) -> AsyncIterator[TResponseStreamEvent]:
        self.enqueue(ModelStep.respond(self._answer))
        async for event in super().stream_response(*args, **kwargs):
            yield event

    async def _answer(self, call: SdkCall) -> ModelStep:
        outcome = self.observer.request(call, self.role)
        # The answer arrives after the request left: the event loop runs in between, so a stop
        # the user sent meanwhile (a trigger inside the port) cancels the call first.
        await asyncio.sleep(0)
        return self.step(outcome)

    def step(self, outcome: ModelOutcome) -> ModelStep:
        if isinstance(outcome, Complete):
            return ModelStep(output=self._output(outcome), usage=_usage(outcome))
        if isinstance(outcome, ContextLengthExceeded):
            return ModelStep.raise_error(_context_length_exceeded())
        if isinstance(outcome, PartialThenFailed):
            return ModelStep.stream(_broken_stream(outcome.fragment, outcome.code))
        assert isinstance(outcome, Failed)
        return ModelStep.raise_error(_connection_error(outcome.code))

    def _output(self, outcome: Complete) -> list[Any]:
        """A message (when there is text, or nothing else) and the proposed calls, each with
        the provider's id when it gave one."""
        items: list[Any] = []
        if outcome.text or not outcome.tool_calls:
            items.append(assistant_message(outcome.text, item_id=f"msg_{next(self.ids)}"))
        for proposed in outcome.tool_calls:
            call_id = proposed.provider_call_id or f"call_{next(self.ids)}"
            arguments = proposed.malformed_arguments if proposed.malformed_arguments is not None \
                else dict(proposed.arguments)
            items.append(function_call(proposed.name, arguments, call_id=call_id,
                                       item_id=f"fc_{next(self.ids)}"))
        return items


def _usage(outcome: Complete) -> Usage:
    """The provider's report, when the script gives one (a request is always counted)."""
    if outcome.input_tokens is None and outcome.output_tokens is None:
        return Usage(requests=1)
    given = (outcome.input_tokens or 0), (outcome.output_tokens or 0)
    return Usage(requests=1, input_tokens=given[0], output_tokens=given[1],
                 total_tokens=sum(given))


def _request() -> httpx2.Request:
    return httpx2.Request("POST", ENDPOINT)


def _connection_error(code: str) -> APIConnectionError:
    """A failure before any output: a transport error, which the SDK's network policy retries."""
    return APIConnectionError(message=f"scripted provider failure: {code}", request=_request())


def _context_length_exceeded() -> BadRequestError:
    """The provider's own refusal of a request over its window (never retried, §7)."""
    body = {"error": {"code": "context_length_exceeded", "type": "invalid_request_error",
                      "message": "the request exceeds the model's context window"}}
    response = httpx2.Response(400, request=_request(), json=body)
    return BadRequestError("context_length_exceeded", response=response, body=body["error"])


def _broken_stream(fragment: str, code: str) -> Any:
    """A stream that delivers the start of an answer, then breaks: the SDK's own events for a
    message holding ``fragment``, cut after its first text delta."""

    async def events(call: SdkCall) -> AsyncIterator[TResponseStreamEvent]:
        step = ModelStep(output=[assistant_message(fragment, item_id="msg_partial")])
        for event in _stream_events_for_step(step, preserve_raw_usage=False):
            yield event
            if getattr(event, "type", "") == "response.output_text.delta":
                raise _connection_error(code)
        raise _connection_error(code)

    return events


def sdk_call_texts(call: SdkCall) -> Sequence[Any]:
    """The input items of a call, always as a list."""
    items = call.input
    return [{"role": "user", "content": items}] if isinstance(items, str) else list(items)


def response_text(response: Any) -> str:
    """The text of a model response's messages (``ModelResponse.output``)."""
    parts = []
    for item in getattr(response, "output", ()):
        for part in getattr(item, "content", None) or ():
            parts.append(str(getattr(part, "text", "")))
    return "".join(parts)
