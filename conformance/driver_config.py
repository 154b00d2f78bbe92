"""The reference driver's reading of a scenario (docs/scenarios.md): its Agent as the reference
runtime's ``AgentConfig`` (§1, §7 budget, §11 limits; a Planner's Executor with the ``delegate``
tool) and a workflow's nodes as the runtime's ``AgentNode`` and ``CapabilityNode`` (§1, §2).
Only the reference driver (conformance/driver.py) uses it: other drivers read the scenario
themselves."""

import json

from ctxspec.conformance.scenario import AgentDoc, NodeDoc
from ctxspec.reference.ports import ToolSpec
from ctxspec.reference.runtime.runtime import (
    DELEGATE_TOOL,
    AgentConfig,
    ExecutorConfig,
    SharedField,
)
from ctxspec.reference.runtime.workflow import AgentNode, CapabilityNode

DELEGATE_SCHEMA = json.dumps({"name": DELEGATE_TOOL, "parameters": {
    "type": "object", "properties": {"task": {"type": "string"},
                                     "constraints": {"type": "array"},
                                     "materials": {"type": "array"}}}}, sort_keys=True)


def workflow_node(node: NodeDoc) -> AgentNode | CapabilityNode:
    """A workflow node of a scenario, as the reference runtime runs it."""
    if node.agent_node is not None:
        doc = node.agent_node
        return AgentNode(doc.name, agent_config(doc.agent), doc.question_key, doc.output_key,
                         doc.on_error)
    if node.capability_node is None:
        raise ValueError("a node is an agent_node or a capability_node")
    capability = node.capability_node
    return CapabilityNode(capability.name, capability.tool, capability.input,
                          capability.output_key)


def agent_config(agent: AgentDoc) -> AgentConfig:
    """The Agent a scenario describes, as the reference runtime is configured."""
    executor = None if agent.executor is None else ExecutorConfig(
        agent.executor.system_prompt, tuple(t.spec() for t in agent.executor.tools))
    tools = tuple(t.spec() for t in agent.tools)
    if executor is not None and not any(t.name == DELEGATE_TOOL for t in tools):
        tools += (ToolSpec(DELEGATE_TOOL, DELEGATE_SCHEMA),)
    return AgentConfig(system_prompt=agent.system_prompt, budget=agent.budget(), tools=tools,
                       executor=executor, shared=tuple(SharedField(f.name, f.text, f.consumers)
                                                       for f in agent.shared),
                       recent_runs=agent.recent_runs, loop_limit=agent.loop_limit,
                       run_deadline=agent.run_deadline, model_attempts=agent.model_attempts,
                       tool_quota=agent.tool_quota, persistent_sandbox=agent.persistent_sandbox,
                       audit_readers=agent.audit_readers,
                       custom_compaction_prompt=agent.custom_compaction_prompt)


__all__ = ["DELEGATE_SCHEMA", "agent_config", "workflow_node"]
