"""The design's Attempts of one frozen request (§11) as pydantic-ai retries them: a capability's
``on_model_request_error`` raising ``RetryModelRequest`` (pydantic_ai/exceptions.py; the
framework's documented way to attempt the same request again: no retry prompt, the same
request step). pydantic-ai itself retries no provider failure of a model it is given: without
this capability (the defaults) the first failure ends the run."""

from dataclasses import dataclass
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.exceptions import (
    ModelConnectionError,
    ModelServerError,
    RetryModelRequest,
)
from pydantic_ai.messages import ModelResponse
from pydantic_ai.models import ModelRequestContext


@dataclass
class Retries(AbstractCapability[Any]):
    """Attempts a failed request again, up to ``attempts`` in all, on a transient failure
    (a server error or a broken connection; never the provider's window refusal)."""

    attempts: int

    async def on_model_request_error(self, ctx: RunContext[Any], *,
                                     request_context: ModelRequestContext,
                                     error: Exception) -> ModelResponse:
        transient = isinstance(error, ModelServerError | ModelConnectionError)
        if transient and request_context.attempt < self.attempts:
            raise RetryModelRequest()
        raise error
