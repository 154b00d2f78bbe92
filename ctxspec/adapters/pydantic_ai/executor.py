"""The design's Planner and Executor (§2, §3, §10) with pydantic-ai's agent delegation: the
Planner is the root ``Agent``; its ``delegate`` tool runs the Executor ``Agent`` inside the tool
(``await executor.run(...)``, with ``usage=ctx.usage`` so the delegate's requests count against
the Planner's ``UsageLimits``, as pydantic-ai's multi-agent documentation has it). The Executor
sees none of the Planner's messages: its one input is the hand-over, which the tool renders
from its arguments (task, constraints, material references) as JSON — pydantic-ai has no
rendering of its own — and its output is the ``delegate`` call's result.
"""

import asyncio
import itertools
import json
from collections.abc import Sequence
from typing import Any

from pydantic_ai import Agent, RunContext, Tool
from pydantic_ai.capabilities import AbstractCapability, HandleDeferredToolCalls
from pydantic_ai.exceptions import ToolFailed
from pydantic_ai.settings import ModelSettings
from pydantic_ai.usage import UsageLimits

from ctxspec.adapters.hook_chain import HookDenied
from ctxspec.adapters.pydantic_ai.model import Observer, scenario_model
from ctxspec.adapters.pydantic_ai.tools import Body, build
from ctxspec.adapters.run_facts import BudgetRefused, root_cause
from ctxspec.conformance.scenario import AgentDoc

DELEGATE = "delegate"
DESCRIPTION = "Hand one task to an Executor."
HANDOVER = {"type": "object", "properties": {
    "task": {"type": "string"}, "constraints": {"type": "array"},
    "materials": {"type": "array"}}, "required": ["task"]}
"""The ``delegate`` call's arguments: what the design's hand-over carries (§3)."""


def delegate_tool(doc: AgentDoc, observer: Observer, body: Body, settings: ModelSettings,
                  limits: UsageLimits, ids: "itertools.count[int]",
                  capabilities: Sequence[AbstractCapability[Any]],
                  facts: dict[str, dict[str, Any]]) -> tuple[Tool[Any], list[Tool[Any]]]:
    """The Planner's ``delegate`` tool and the Executor's own tools. Each call runs the
    Executor afresh, with the Planner's ``capabilities`` (its hooks, approvals and retries),
    one at a time: the scripted world answers the Executors' requests in the
    order they arrive, so two in flight at once would take each other's lines (Q380).

    An Executor's request refused over B is raised through the Planner's run, which ends
    (§11: a context error acts on the whole invocation); any other failure of the execution
    is the call's failed result (``ToolFailed``; its code, HOOK_DENIED or EXECUTOR_FAILED, in
    ``facts``), and the Planner goes on."""
    assert doc.executor is not None
    approval = any(isinstance(each, HandleDeferredToolCalls) for each in capabilities)
    tools = [build(tool, body, approval) for tool in doc.executor.tools]
    executor = Agent(scenario_model(observer, "executor", ids),
                     system_prompt=doc.executor.system_prompt, tools=tools,
                     model_settings=settings, capabilities=list(capabilities))
    lock = asyncio.Lock()

    async def delegate(ctx: RunContext[Any], **handover: Any) -> str:
        async with lock:
            try:
                result = await executor.run(json.dumps(handover, sort_keys=True),
                                            usage=ctx.usage, usage_limits=limits)
            except Exception as failure:
                cause = root_cause(failure, (BudgetRefused, HookDenied))
                if isinstance(cause, BudgetRefused):
                    raise
                code = "HOOK_DENIED" if isinstance(cause, HookDenied) else "EXECUTOR_FAILED"
                facts[str(ctx.tool_call_id)] = {"status": "error", "code": code}
                raise ToolFailed(f"{code}: {failure}") from failure
        return str(result.output)

    schema = next((dict(t.schema_) for t in doc.tools if t.name == DELEGATE), dict(HANDOVER))
    tool: Tool[Any] = Tool.from_schema(delegate, name=DELEGATE, description=str(
        schema.pop("description", DESCRIPTION)), json_schema=schema, takes_ctx=True)
    tool.requires_approval = approval
    return tool, tools


__all__ = ["DELEGATE", "delegate_tool"]
