"""pydantic-ai under the conformance suite (extra ``pydantic-ai``):
``ctxspec conformance --driver ctxspec.adapters.pydantic_ai:make_driver`` (the best
configuration; ``make_default_driver``: pydantic-ai's defaults)."""

from ctxspec.adapters.pydantic_ai.driver import (
    PydanticAIDriver,
    make_default_driver,
    make_driver,
)

__all__ = ["PydanticAIDriver", "make_default_driver", "make_driver"]
