"""The design's Planner and Executor (§2, §3, §10) with ADK's own parts (the Google ADK driver,
driver.py): the Planner is the root ``LlmAgent``; its ``delegate`` tool is the Executor
``LlmAgent`` behind ADK's ``AgentTool`` — "an agent as a tool": each call runs the Executor in
a session of its own (an in-memory runner made by the tool, google/adk/tools/agent_tool.py),
so it sees none of the Planner's events, and its last answer is the call's result.

The call's arguments are the design's hand-over (task, constraints, material references) as
the Executor's ``input_schema``: ADK declares them as the tool's parameters, validates them
and hands them to the Executor as its one user message (the arguments as JSON). Nothing of
that wording is ours.
"""

from typing import Any

from google.adk.agents.llm_agent import LlmAgent
from google.adk.tools.agent_tool import AgentTool
from google.adk.tools.base_tool import BaseTool
from google.genai import types
from pydantic import BaseModel, Field

from ctxspec.adapters.google_adk.model import ScriptedLlm

DELEGATE = "delegate"
DESCRIPTION = "Hand one task to an Executor."


class Handover(BaseModel):
    """The ``delegate`` call's arguments: what the design's hand-over carries (§3)."""

    task: str
    constraints: list[Any] = Field(default_factory=list)
    materials: list[Any] = Field(default_factory=list)


def delegate_tool(prompt: str, tools: list[BaseTool], observer: Any, max_output: int,
                  callbacks: dict[str, Any]) -> AgentTool:
    """The Planner's ``delegate`` tool over an Executor agent with ``tools`` and the same
    callbacks as the Planner's."""
    executor = LlmAgent(
        name=DELEGATE, description=DESCRIPTION, instruction=prompt,
        model=ScriptedLlm(model="scripted", observer=observer, role="executor"),
        tools=list(tools), input_schema=Handover,
        generate_content_config=types.GenerateContentConfig(max_output_tokens=max_output),
        **callbacks)
    return AgentTool(agent=executor)
