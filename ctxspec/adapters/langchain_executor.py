"""The design's Planner and Executor (§2, §3, §10) with LangChain's own parts (the LangChain
driver, ctxspec/adapters/langchain.py): the Planner is the root ``create_agent``; its
``delegate`` tool runs an Executor, a second ``create_agent`` with the Executor's system prompt
and tools — LangChain's "sub-agent behind a tool" — invoked on a fresh state holding only the
hand-over, so it sees none of the Planner's messages; its last answer is the ``delegate``
call's result, which the Planner's ToolNode feeds back like any tool result.

The hand-over is one HumanMessage in our own words: the task, then each constraint and each
material reference on a line of its own.
"""

import uuid
from collections.abc import Callable, Sequence
from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import BaseTool, ToolException
from langgraph.errors import GraphBubbleUp

from ctxspec.adapters.langchain_model import ScriptedChatModel, make_tool
from ctxspec.conformance.scenario import AgentDoc, ToolDoc

DELEGATE = "delegate"
DELEGATE_DOC = ToolDoc.model_validate({"name": DELEGATE, "schema": {
    "type": "object", "description": "Hand one task to an Executor.",
    "properties": {"task": {"type": "string"}, "constraints": {"type": "array"},
                   "materials": {"type": "array"}}}})


def handover(arguments: dict[str, Any]) -> str:
    """The Executor's only input: the task, its constraints and its material references."""
    lines = [f"Task: {arguments.get('task', '')}"]
    lines += [f"- must: {each}" for each in arguments.get("constraints") or ()]
    lines += [f"- see: {each}" for each in arguments.get("materials") or ()]
    return "\n".join(lines)


class Executors:
    """Runs one Executor per ``delegate`` call: a fresh ``create_agent`` each time."""

    def __init__(self, agent: AgentDoc, model: ScriptedChatModel,
                 run_tool: Callable[[str, str | None, dict[str, Any]], str],
                 mint: Callable[[], str],
                 middleware: Callable[[ScriptedChatModel, str],
                                      list[AgentMiddleware[Any, Any, Any]]]) -> None:
        assert agent.executor is not None
        self.doc = agent.executor
        self.model, self.run_tool, self.mint = model, run_tool, mint
        self.middleware = middleware
        self.handovers: set[str] = set()
        """The ids of the hand-over messages (the Executor's inputs, no user's)."""

    def tools(self, own: Sequence[BaseTool]) -> list[BaseTool]:
        """The Planner's tools: its own and ``delegate``."""
        if any(tool.name == DELEGATE for tool in own):
            return list(own)
        return [*own, make_tool(DELEGATE_DOC, lambda name, call_id, arguments:
                                self.run(arguments))]

    def run(self, arguments: dict[str, Any]) -> str:
        """One execution: the hand-over in, the Executor's last answer out."""
        middleware = self.middleware(self.model, self.doc.system_prompt)
        graph: Any = create_agent(
            self.model, [make_tool(t, self.run_tool) for t in self.doc.tools],
            system_prompt=self.doc.system_prompt, middleware=middleware)
        message_id = str(uuid.UUID(self.mint()))
        self.handovers.add(message_id)
        try:
            state = graph.invoke({"messages": [HumanMessage(content=handover(arguments),
                                                            id=message_id)]})
        except GraphBubbleUp:  # its review paused it: the thread pauses with it
            raise
        except Exception as failure:  # the Executor failed: the Planner reads it as a result
            raise ToolException(f"the Executor failed: {failure}") from failure
        if any(getattr(each, "denied", False) for each in middleware):
            raise ToolException("the Executor failed: a hook denied its answer")
        last = next((m for m in reversed(state["messages"]) if isinstance(m, AIMessage)), None)
        return last.text if last is not None else ""


__all__ = ["DELEGATE", "Executors", "handover"]
