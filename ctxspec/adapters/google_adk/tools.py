"""The scenario's tools as Google ADK tools: a ``BaseTool`` subclass for each, declaring the
scenario's JSON schema as its ``FunctionDeclaration`` (``parameters_json_schema``), whose
``run_async`` asks the scripted tool port — ADK's documented way to make a tool from a schema
that no Python signature states (google/adk/tools/base_tool.py).

A scripted business error is raised, so ADK's own error path decides what the model sees
(the ``on_tool_error_callback`` of the best configuration answers it as a structured error;
without one the exception ends the invocation).
"""

from collections.abc import Callable
from typing import Any

from google.adk.tools.base_tool import BaseTool
from google.adk.tools.tool_context import ToolContext
from google.genai import types

from ctxspec.adapters.scripted_tools import result_text
from ctxspec.conformance.scenario import ToolDoc
from ctxspec.reference.ports import ToolOutcome

Run = Callable[[ToolContext, str, dict[str, Any]], ToolOutcome]
"""The adapter's body of every tool: (context, tool name, arguments) → the scripted outcome."""

class ScenarioTool(BaseTool):
    """One scenario tool."""

    def __init__(self, tool: ToolDoc, run: Run) -> None:
        schema = dict(tool.schema_)
        super().__init__(name=tool.name, description=str(schema.get("description", "")))
        self.schema = schema
        self.run = run

    def _get_declaration(self) -> types.FunctionDeclaration | None:
        parameters = {k: v for k, v in self.schema.items() if k != "description"}
        return types.FunctionDeclaration(name=self.name, description=self.description,
                                         parameters_json_schema=parameters or {
                                             "type": "object"})

    async def run_async(self, *, args: dict[str, Any], tool_context: ToolContext) -> Any:
        return await result_text(self.run(tool_context, self.name, dict(args)))
