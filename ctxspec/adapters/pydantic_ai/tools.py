"""The scenario's tools as pydantic-ai function tools (pydantic_ai/tools.py): a tool whose
schema declares properties is a typed Python function, as pydantic-ai tools are written, so the
framework validates a call's arguments against its signature (pydantic) and answers a call that
breaks it with a retry prompt; a schema with no properties accepts any object, which no
signature says, and is given as it is with ``Tool.from_schema`` (which validates nothing).
Either way the body asks the scenario's scripted tool port.

A scripted business error is raised as ``ToolFailed``, the framework's terminal tool failure,
so pydantic-ai itself writes the failed result the model sees (outcome ``failed``). With the
scenario's ``tool.pre_call`` hooks each tool requires approval (hooks.py answers it).
"""

import asyncio
import inspect
from collections.abc import Callable, Mapping
from typing import Any

from pydantic_ai import RunContext, Tool
from pydantic_ai.exceptions import ToolFailed

from ctxspec.adapters.scripted_tools import JSON_TYPES, result_text
from ctxspec.conformance.scenario import ToolDoc
from ctxspec.reference.ports import ToolOutcome

Body = Callable[[RunContext[Any], str, dict[str, Any]], ToolOutcome]
"""The adapter's body of every tool: (context, tool name, arguments) → the scripted outcome."""




def build(tool: ToolDoc, body: Body, approval: bool) -> Tool[Any]:
    """A tool whose schema declares properties is a typed function — its parameters the
    properties, any other argument allowed as JSON Schema allows it — so pydantic-ai validates a
    call's arguments before it runs; a schema with none accepts any object and is given as it
    is (``Tool.from_schema``, which validates nothing)."""
    schema = dict(tool.schema_)  # its description is the tool's, sent once
    description = str(schema.pop("description", ""))
    name = tool.name
    properties = schema.get("properties")
    required = schema.get("required", [])
    needed = set(required) if isinstance(required, list) else set()

    async def invoke(ctx: RunContext[Any], **arguments: Any) -> str:
        # A tool's work starts once the event loop turns, as an awaiting tool's would: a stop
        # the user sent while another call of the batch ran cancels this one before it starts.
        await asyncio.sleep(0)
        sent = {k: v for k, v in arguments.items() if v is not None or k in needed}
        # without the defaults filled in; a business error is the framework's ToolFailed
        return await result_text(body(ctx, name, sent), ToolFailed)

    if isinstance(properties, Mapping) and properties:
        _sign(invoke, properties, needed)
        built: Tool[Any] = Tool(invoke, takes_ctx=True, name=name, description=description)
    else:
        built = Tool.from_schema(invoke, name=name, description=description, json_schema=schema,
                                 takes_ctx=True)
    built.requires_approval = approval
    return built


def _sign(function: Any, properties: Mapping[str, Any], needed: set[str]) -> None:
    """Give ``function`` the signature the schema's properties describe: a property of no
    simple type is ``Any``, one not required defaults to None, other arguments are taken."""
    parameters = [inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                    annotation=RunContext[Any])]
    annotations: dict[str, Any] = {"ctx": RunContext[Any], "return": str}
    for each, spec in properties.items():
        declared = spec.get("type") if isinstance(spec, Mapping) else None
        kind = JSON_TYPES.get(declared, Any) if isinstance(declared, str) else Any
        optional = each not in needed
        annotations[each] = kind | None if optional and kind is not Any else kind
        parameters.append(inspect.Parameter(
            each, inspect.Parameter.KEYWORD_ONLY, annotation=annotations[each],
            default=None if optional else inspect.Parameter.empty))
    parameters.append(inspect.Parameter("others", inspect.Parameter.VAR_KEYWORD,
                                        annotation=Any))
    annotations["others"] = Any
    function.__signature__ = inspect.Signature(parameters, return_annotation=str)
    function.__annotations__ = annotations
