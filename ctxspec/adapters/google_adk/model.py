"""The scenario's model script as a Google ADK model: a ``BaseLlm`` subclass, the extension
point ADK documents for any model (google/adk/models/base_llm.py). Each
``generate_content_async`` hands the ``LlmRequest`` ADK built — after every before-model
callback — to the driver (``Observer``), which traces and measures it and asks the scripted
port; the port's answer becomes an ``LlmResponse``, a provider failure an exception.

Retries are the provider client's, as ADK's own Gemini model leaves them to google-genai's
``HttpRetryOptions``: a failure before any output is asked again, up to ``model_attempts``
attempts in all; a stream broken after its first output is not retried.
"""

from collections.abc import AsyncGenerator
from typing import Any, Protocol

from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.genai import types

from ctxspec.reference.ports import (
    Complete,
    ContextLengthExceeded,
    Failed,
    ModelOutcome,
    PartialThenFailed,
)


class ModelFailed(Exception):
    """The provider failed, finally (every attempt), before or after a first output."""

    def __init__(self, code: str, partial: bool = False) -> None:
        super().__init__(f"MODEL_FAILED: scripted provider failure {code}")
        self.code, self.partial = code, partial


class WindowRefused(Exception):
    """The provider refused the request as over its window (never retried, §7)."""


class Observer(Protocol):
    def answer(self, purpose: str, role: str, request: LlmRequest, attempt: int) -> ModelOutcome:
        """Trace the request ``role`` sends (business or compaction), ask the port."""
        ...

    def attempts(self) -> int:
        """How many attempts the provider client makes (the scenario's ``model_attempts``)."""
        ...


class ScriptedLlm(BaseLlm):
    """An ADK model answering every call from the scenario through ``observer``."""

    observer: Any
    role: str = "root"
    purpose: str = "business"

    async def generate_content_async(self, llm_request: LlmRequest, stream: bool = False
                                     ) -> AsyncGenerator[LlmResponse, None]:
        attempt = 1
        while True:
            outcome = self.observer.answer(self.purpose, self.role, llm_request, attempt)
            if isinstance(outcome, Complete):
                yield _response(outcome, self.observer)
                return
            if isinstance(outcome, ContextLengthExceeded):
                raise WindowRefused("CONTEXT_LENGTH_EXCEEDED: the provider refused the request")
            if isinstance(outcome, PartialThenFailed):
                raise ModelFailed(outcome.code, partial=True)
            assert isinstance(outcome, Failed)
            if attempt >= self.observer.attempts():
                raise ModelFailed(outcome.code)
            attempt += 1


def _response(outcome: Complete, observer: Any) -> LlmResponse:
    parts: list[types.Part] = []
    if outcome.text or not outcome.tool_calls:
        parts.append(types.Part(text=outcome.text))
    for proposed in outcome.tool_calls:
        call_id = proposed.provider_call_id or observer.call_id()
        arguments: dict[str, Any] = dict(proposed.arguments)
        parts.append(types.Part(function_call=types.FunctionCall(
            name=proposed.name, args=arguments, id=call_id)))
        observer.proposed(call_id, proposed.malformed_arguments, arguments)
    usage = None
    if outcome.input_tokens is not None or outcome.output_tokens is not None:
        usage = types.GenerateContentResponseUsageMetadata(
            prompt_token_count=outcome.input_tokens,
            candidates_token_count=outcome.output_tokens)
    else:  # a provider reports the prompt it was sent: ADK's threshold reads it (compaction)
        usage = types.GenerateContentResponseUsageMetadata(
            prompt_token_count=observer.last_measure())
    return LlmResponse(content=types.Content(role="model", parts=parts), usage_metadata=usage,
                       finish_reason=types.FinishReason.MAX_TOKENS if outcome.cut else None)
