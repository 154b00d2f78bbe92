"""The scenario's tools as pydantic-ai function tools (``Tool.from_schema``, pydantic_ai/
tools.py): each offers the model the scenario's own JSON schema and its body asks the
scenario's scripted tool port. ``from_schema`` validates nothing against the schema (its
docstring says so): the arguments reach the body as the model sent them, after pydantic-ai
parsed their JSON.

A scripted business error is raised as ``ToolFailed``, the framework's terminal tool failure,
so pydantic-ai itself writes the failed result the model sees (outcome ``failed``). With the
scenario's ``tool.pre_call`` hooks each tool requires approval (hooks.py answers it).
"""

import asyncio
import json
from collections.abc import Callable
from typing import Any

from pydantic_ai import RunContext, Tool
from pydantic_ai.exceptions import ToolFailed

from ctxspec.conformance.scenario import ToolDoc
from ctxspec.reference.ports import ToolOutcome

Body = Callable[[RunContext[Any], str, dict[str, Any]], ToolOutcome]
"""The adapter's body of every tool: (context, tool name, arguments) → the scripted outcome."""
LATENCY_SECONDS = 0.002
"""Real time per tick of a scripted latency: a batch's calls, which pydantic-ai runs
concurrently, finish in their scripted latency order."""


async def result_text(outcome: ToolOutcome) -> str:
    if outcome.latency:
        await asyncio.sleep(outcome.latency * LATENCY_SECONDS)
    if outcome.error is not None:
        raise ToolFailed(outcome.error)
    if outcome.artifact is not None:  # metadata and a path, never the bytes (§6)
        artifact = outcome.artifact
        return json.dumps({"artifact": artifact.path, "media_type": artifact.media_type,
                           "size_bytes": artifact.size_bytes})
    return outcome.text


def build(tool: ToolDoc, body: Body, approval: bool) -> Tool[Any]:
    schema = dict(tool.schema_)  # its description is the tool's, sent once
    description = str(schema.pop("description", ""))
    name = tool.name

    async def invoke(ctx: RunContext[Any], **arguments: Any) -> str:
        # A tool's work starts once the event loop turns, as an awaiting tool's would: a stop
        # the user sent while another call of the batch ran cancels this one before it starts.
        await asyncio.sleep(0)
        return await result_text(body(ctx, name, arguments))

    built: Tool[Any] = Tool.from_schema(invoke, name=name, description=description,
                                        json_schema=schema, takes_ctx=True)
    built.requires_approval = approval
    return built
