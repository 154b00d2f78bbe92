"""The design's Planner and Executor (§2, §3, §10) with the Agents SDK's own parts (the Agents
SDK driver, ctxspec/adapters/openai_agents/driver.py): the Planner is the root ``Agent``; its
``delegate`` tool is the Executor ``Agent`` turned into a tool by ``Agent.as_tool`` — the SDK's
"agent as a tool": a nested ``Runner.run`` on generated input, so the Executor sees none of the
Planner's items, and its final output is the ``delegate`` call's result, which the Planner's
turn feeds back like any function tool's.

The call's arguments are the design's hand-over (task, constraints, material references) as
``as_tool(parameters=...)``; the SDK validates them and renders them into the Executor's one
input with its own structured-input builder (agents/agent_tool_input.py:
default_tool_input_builder): a preamble and the arguments as JSON. Nothing of that wording is
ours.
"""

import asyncio
import itertools
from collections.abc import Callable
from typing import Any

from agents import Agent, FunctionTool, ModelSettings, RunConfig, RunContextWrapper, RunHooks
from agents.agent_tool_input import StructuredToolInputBuilder
from agents.tool import default_tool_error_function
from agents.tool_context import ToolContext
from pydantic import BaseModel, Field

from ctxspec.adapters.openai_agents.model import Observer, ScenarioModel
from ctxspec.adapters.openai_agents.tools import Run, build
from ctxspec.conformance.scenario import AgentDoc

DELEGATE = "delegate"
CONTEXT_ERROR = "CONTEXT_PROTECTED_INPUT_TOO_LARGE"
"""The code of the driver's refusal of a request over B (driver.py ``BudgetRefused``)."""
DESCRIPTION = "Hand one task to an Executor."


class Handover(BaseModel):
    """The ``delegate`` call's arguments: what the design's hand-over carries (§3)."""

    task: str
    constraints: list[Any] = Field(default_factory=list)
    materials: list[Any] = Field(default_factory=list)


def delegate_tool(doc: AgentDoc, observer: Observer, run_tool: Run, settings: ModelSettings,
                  config: RunConfig, sdk_defaults: bool, ids: "itertools.count[int]",
                  builder: StructuredToolInputBuilder | None = None,
                  failed: Callable[[RunContextWrapper[Any], Exception], str] | None = None,
                  hooks: RunHooks[Any] | None = None
                  ) -> tuple[FunctionTool, list[FunctionTool]]:
    """The Planner's ``delegate`` tool and the Executor's own tools (so the driver can give
    them the scenario's guardrails). Each call runs the Executor afresh: ``as_tool`` starts a
    new nested Run with only the hand-over as its input, under the Planner's ``RunConfig``
    (its input filter refuses an Executor's request over B too).

    Best configuration: a ``failure_error_function`` raising an Executor's context error
    through the Planner's Run, which ends the whole invocation (§11); the SDK's default
    answers every failure to the Planner as a tool error, and the Planner goes on."""
    assert doc.executor is not None
    tools = [build(tool, run_tool) for tool in doc.executor.tools]
    executor = Agent[Any](name="executor", instructions=doc.executor.system_prompt,
                          tools=[*tools], model=ScenarioModel(observer, "executor", ids),
                          model_settings=settings)
    tool = executor.as_tool(
        tool_name=DELEGATE, tool_description=DESCRIPTION, parameters=Handover,
        input_builder=builder,
        max_turns=doc.loop_limit, run_config=config, hooks=hooks,
        failure_error_function=default_tool_error_function if sdk_defaults or failed is None
        else _context_errors_raised(failed))
    return _one_at_a_time(tool), tools


def _context_errors_raised(failed: Callable[[RunContextWrapper[Any], Exception], str]
                           ) -> Callable[[RunContextWrapper[Any], Exception], str]:
    """The best configuration's ``failure_error_function``: a context error of the Executor
    (its request refused over B) is raised through the Planner's Run, which ends (§11: it
    acts on the whole invocation); any other failure of the execution is answered to the
    Planner by ``failed`` (a structured error), and the Planner goes on."""

    def answer(context: RunContextWrapper[Any], error: Exception) -> str:
        seen: BaseException | None = error
        while seen is not None:
            if getattr(seen, "code", None) == CONTEXT_ERROR:
                raise error
            seen = seen.__cause__ or seen.__context__
        return failed(context, error)

    return answer


def _one_at_a_time(tool: FunctionTool) -> FunctionTool:
    """The tool's ``on_invoke_tool`` wrapped so its executions run one after another: the SDK
    runs a batch's function tools concurrently (asyncio), and the scripted world answers the
    Executor's requests in the order they arrive, so two Executors in flight at once would
    take each other's lines (Q380). The design lets a batch run either way (§2)."""
    invoke, lock = tool.on_invoke_tool, asyncio.Lock()

    async def serial(context: ToolContext[Any], arguments: str) -> Any:
        async with lock:
            return await invoke(context, arguments)

    tool.on_invoke_tool = serial
    return tool


__all__ = ["DELEGATE", "Handover", "delegate_tool"]
