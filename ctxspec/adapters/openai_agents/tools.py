"""The scenario's tools as real Agents SDK function tools.

A tool whose schema declares properties is made with ``function_tool`` from a function whose
signature has those parameters, so the SDK itself parses and validates a call's arguments
(pydantic) before the tool runs. A schema with no properties accepts any object, which no
Python signature says: such a tool is made with ``function_tool`` too, from a function without
parameters, and told the declared schema; its body reads the arguments as sent
(docs/open-questions.md Q150).

Either way the body asks the scenario's scripted tool port, and a scripted error is raised, so
the SDK's own failure handling (the default handler, worded by ``RunConfig.tool_error_formatter``)
makes what the model sees.
"""

import inspect
import json
from collections.abc import Callable, Mapping
from typing import Any

from agents import FunctionTool, function_tool
from agents.tool_context import ToolContext

from ctxspec.adapters.scripted_tools import JSON_TYPES, result_text
from ctxspec.conformance.scenario import ToolDoc
from ctxspec.reference.ports import ToolOutcome

Run = Callable[[ToolContext[Any], str, dict[str, Any]], ToolOutcome]
"""The adapter's body of every tool: (context, tool name, arguments) → the scripted outcome."""



def build(tool: ToolDoc, run: Run) -> FunctionTool:
    schema = tool.schema_
    description = str(schema.get("description", ""))
    properties = schema.get("properties")
    if isinstance(properties, Mapping) and properties:
        return _typed(tool.name, description, properties, schema.get("required", []), run)
    return _open(tool.name, description, schema, run)


def _typed(name: str, description: str, properties: Mapping[str, Any], required: Any,
           run: Run) -> FunctionTool:
    names = list(properties)
    needed = set(required) if isinstance(required, list) else set()
    parameters = [inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                    annotation=ToolContext)]
    annotations: dict[str, Any] = {"ctx": ToolContext, "return": str}
    for each in names:
        spec = properties[each]
        declared = spec.get("type") if isinstance(spec, Mapping) else None
        kind = JSON_TYPES.get(declared) if isinstance(declared, str) else None
        kind = Any if kind is None else kind
        optional = each not in needed
        annotations[each] = kind | None if optional and kind is not Any else kind
        parameters.append(inspect.Parameter(
            each, inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=annotations[each],
            default=None if optional else inspect.Parameter.empty))

    async def invoke(ctx: ToolContext[Any], *values: Any, **named: Any) -> str:
        arguments = {**dict(zip(names, values, strict=False)), **named}
        given = json.loads(ctx.tool_arguments or "{}")  # what the model sent, not defaults
        return await result_text(run(ctx, name, {k: v for k, v in arguments.items() if k in given}))

    invoke.__signature__ = inspect.Signature(parameters,  # type: ignore[attr-defined]
                                             return_annotation=str)
    invoke.__annotations__ = annotations
    return function_tool(invoke, name_override=name, description_override=description,
                         strict_mode=False)


def _open(name: str, description: str, schema: Mapping[str, Any], run: Run) -> FunctionTool:
    """``function_tool`` over a function of no parameters — the SDK still parses the call's
    JSON and refuses what is not an object — told the declared schema; the body reads the
    arguments as the model sent them."""

    async def invoke(ctx: ToolContext[Any]) -> str:
        return await result_text(run(ctx, name, json.loads(ctx.tool_arguments or "{}")))

    tool = function_tool(invoke, name_override=name, description_override=description,
                         strict_mode=False)
    tool.params_json_schema = dict(schema)
    return tool
