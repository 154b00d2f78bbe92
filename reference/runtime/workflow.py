"""Outer workflow nodes (§1 on outer CapabilityNodes and AgentNodes, §2 WorkflowSession, §11
error scope): a minimal graph of CapabilityNodes and AgentNodes over a graph state.

- Outer nodes have no model loop and no RoleContext. A hook's payload change on a
  CapabilityNode goes to the Operation's effective input (the proposed input is kept) and the
  result reaches the graph state only through the node's explicit output mapping; a
  context_patch needs an authorised ContextScope, which an outer node does not get by patching
  (CTX-1.16 to CTX-1.19, CTX-3.40).
- An AgentNode makes an AgentInvocation of an Agent: a reference runtime Session that asks the
  question its input mapping gives. A context or compaction error ends that invocation only: the
  node receives a failure result and routes it; nodes of the same stage are not cancelled
  (CTX-11.11, CTX-11.12). A stop of the whole workflow still stops every node not yet finished
  (CTX-11.13).
- A WorkflowSession's inputs go through the outer input mapping into the graph state, never
  through the root role's delivery rule (CTX-2.21).
"""

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal
from uuid import UUID, uuid5

from ctxspec.reference.contracts import (
    HookDecision,
    Operation,
    OperationPurpose,
    OperationState,
)
from ctxspec.reference.hooks import HookCall, HookProposal, evaluate
from ctxspec.reference.registry import JSON, FieldRegistry, FieldSpec
from ctxspec.reference.runtime.ports import HookContext, HookPort, ToolPort
from ctxspec.reference.runtime.runtime import AgentConfig, ReferenceRuntime
from ctxspec.reference.runtime.trace import RunEnded

CAPABILITY_REGISTRY = FieldRegistry("capability.pre_call", "1", (
    FieldSpec(None, "input", "object"),))
"""An outer node's hook may change its input payload; it has no context fields of its own."""

NAMESPACE = UUID("0d3f6a52-7b1e-4c89-9a35-5e2b8f4c7a10")


@dataclass(frozen=True)
class CapabilityNode:
    name: str
    tool: str
    input_mapping: Mapping[str, str]
    """Tool argument → graph state key."""
    output_key: str


@dataclass(frozen=True)
class AgentNode:
    name: str
    agent: AgentConfig
    question_key: str
    """The graph state key whose value is the question this invocation asks."""
    output_key: str
    on_error: str = "error"
    """The route a failure takes: its result lands in the graph state under
    ``<output_key>.<on_error>`` instead of ``output_key``."""


Node = CapabilityNode | AgentNode


@dataclass
class NodeResult:
    node: str
    status: Literal["succeeded", "failed", "not_run"]
    route: str | None
    value: JSON
    error_code: str | None = None


@dataclass
class WorkflowRun:
    """A WorkflowSession's execution: the graph state, each node's result, the operations of
    its capability nodes, and the AgentInvocations' runtimes (for their traces)."""

    state: dict[str, JSON]
    results: list[NodeResult] = field(default_factory=list)
    operations: list[tuple[Operation, Mapping[str, JSON], Mapping[str, JSON]]] = \
        field(default_factory=list)
    """(operation, proposed input, effective input) of each capability call."""
    invocations: dict[str, ReferenceRuntime] = field(default_factory=dict)
    tool_calls: dict[str, int] = field(default_factory=dict)
    stopped: bool = False


@dataclass(frozen=True)
class Workflow:
    stages: tuple[tuple[Node, ...], ...]
    """Stages run in order; the nodes of one stage are siblings (independent)."""
    input_mapping: Mapping[str, str]
    """WorkflowSession input name → graph state key."""


def run_workflow(workflow: Workflow, inputs: Mapping[str, JSON], *, tools: ToolPort,
                 hooks: HookPort, invoke: Callable[[AgentNode], ReferenceRuntime],
                 stop_after: str | None = None) -> WorkflowRun:
    """Run the graph once. ``invoke`` builds the runtime of an AgentNode's invocation (with its
    own ports); ``stop_after`` stops the whole workflow once that node finished."""
    run = WorkflowRun(state={key: inputs[name] for name, key in workflow.input_mapping.items()
                             if name in inputs})
    counter = 0
    for stage in workflow.stages:
        for node in stage:
            if run.stopped:
                run.results.append(NodeResult(node.name, "not_run", None, None))
                continue
            counter += 1
            if isinstance(node, CapabilityNode):
                _capability(run, node, tools, hooks, counter)
            else:
                _agent(run, node, invoke)
            if node.name == stop_after:
                run.stopped = True
    return run


def _capability(run: WorkflowRun, node: CapabilityNode, tools: ToolPort, hooks: HookPort,
                counter: int) -> None:
    proposed: dict[str, JSON] = {arg: run.state.get(key) for arg, key in
                                 node.input_mapping.items()}
    payload: dict[str, JSON] = {"input": proposed}
    operation_id = uuid5(NAMESPACE, f"{node.name}:{counter}")
    # The hook reads a copy: it changes the call only by a validated patch (CTX-3.7).
    context = HookContext("capability.pre_call", copy.deepcopy(payload), None, None, None,
                          None, counter)
    for position, reply in enumerate(hooks.items(context)):
        # An outer node has no RoleContext: a context_patch can only address an authorised
        # scope, and this node has none, so it is refused; the payload part stands alone.
        outcome = evaluate(
            HookProposal(uuid5(NAMESPACE, f"{operation_id}:{position}"), reply.decision,
                         reply.payload_ops, None if not reply.context_ops else
                         uuid5(NAMESPACE, "no-scope"), reply.base_revision, reply.context_ops,
                         reply.failed),
            HookCall(operation_id=operation_id, hook_point="capability.pre_call", stage="pre",
                     actor_role=None, actor_context_id=None, call_id=None,
                     call_record_id=None),
            CAPABILITY_REGISTRY, {}, payload, chain_position=position,
            annotation_ids=lambda i: uuid5(NAMESPACE, f"{operation_id}:a:{i}"))
        if outcome.invocation.decision is HookDecision.DENY:
            run.results.append(NodeResult(node.name, "failed", "denied", None, "DENIED"))
            return
        payload = dict(outcome.payload)
    effective = payload.get("input")
    arguments = dict(effective) if isinstance(effective, dict) else dict(proposed)
    run.tool_calls[node.tool] = run.tool_calls.get(node.tool, 0) + 1
    result = tools.run(node.tool, arguments, run.tool_calls[node.tool])
    run.operations.append((Operation(
        operation_id=operation_id, run_id=operation_id, node_task_id=operation_id,
        purpose=OperationPurpose.TOOL, purpose_key=f"capability:{node.name}:{counter}",
        state=OperationState.FAILED if result.error else OperationState.SUCCEEDED),
        proposed, arguments))
    if result.error:
        run.results.append(NodeResult(node.name, "failed", "error", result.error, "TOOL_ERROR"))
        run.state[f"{node.output_key}.error"] = result.error
        return
    run.state[node.output_key] = result.text  # only through the explicit output mapping
    run.results.append(NodeResult(node.name, "succeeded", None, result.text))


def _agent(run: WorkflowRun, node: AgentNode,
           invoke: Callable[[AgentNode], ReferenceRuntime]) -> None:
    runtime = invoke(node)
    run.invocations[node.name] = runtime
    question = run.state.get(node.question_key)
    runtime.ask(question if isinstance(question, str) else str(question))
    runtime.advance()
    ended = runtime.trace.of(RunEnded)[-1]
    if ended.status == "succeeded":
        value = _final_answer(runtime)
        run.state[node.output_key] = value
        run.results.append(NodeResult(node.name, "succeeded", None, value))
        return
    failure: JSON = {"status": ended.status, "error_code": ended.error_code,
                     "message": ended.message}
    run.state[f"{node.output_key}.{node.on_error}"] = failure
    run.results.append(NodeResult(node.name, "failed", node.on_error, failure,
                                  ended.error_code))


def _final_answer(runtime: ReferenceRuntime) -> JSON:
    """The invocation's answer: its Run's last assistant record that calls no tool."""
    for run in runtime.runs.values():
        for raw in reversed(runtime.contexts[run.context_id].records):
            if raw.record.message_kind == "assistant" and not any(
                    key.startswith("tool_call:") for key in raw.content):
                text = raw.content.get("text")
                return text if isinstance(text, str) else None
    return None


__all__ = ["AgentNode", "CapabilityNode", "Node", "NodeResult", "Workflow", "WorkflowRun",
           "run_workflow"]
