"""A scenario tool's scripted outcome as a framework's tool returns it, the same for every
Python adapter (§6): its latency waited in real time, so a batch's calls the framework runs
concurrently finish in their scripted order; its business error raised, so the framework's own
failure handling decides what the model sees; an artifact as its metadata and path, never its
bytes. Each adapter's ``tools`` module makes its framework's tool around it."""

import asyncio
import json
from collections.abc import Callable, Mapping
from typing import Any

from ctxspec.reference.ports import ToolOutcome

LATENCY_SECONDS = 0.002
"""Real time per tick of a scripted latency."""
JSON_TYPES: Mapping[str, Any] = {"string": str, "integer": int, "number": float,
                                 "boolean": bool, "array": list, "object": dict}
"""The Python type of a JSON schema type, for a tool written as a typed function."""


class ToolFailed(Exception):
    """A tool's scripted business error, raised so the framework handles it."""


async def result_text(outcome: ToolOutcome,
                      failed: Callable[[str], Exception] = ToolFailed) -> str:
    """The tool's result as the framework is given it; ``failed`` makes the exception its
    business error is raised as (a framework may have its own for a tool's failure)."""
    if outcome.latency:
        await asyncio.sleep(outcome.latency * LATENCY_SECONDS)
    if outcome.error is not None:
        raise failed(outcome.error)
    if outcome.artifact is not None:
        artifact = outcome.artifact
        return json.dumps({"artifact": artifact.path, "media_type": artifact.media_type,
                           "size_bytes": artifact.size_bytes})
    return outcome.text
