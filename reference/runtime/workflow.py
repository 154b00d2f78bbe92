"""Outer workflow nodes (§1 on outer CapabilityNodes and AgentNodes, §2 WorkflowSession, §11
error scope): a minimal graph of CapabilityNodes and AgentNodes over a graph state.

- Outer nodes have no model loop and no RoleContext. A hook's payload change on a
  CapabilityNode goes to the Operation's effective input (the proposed input is kept) and the
  result reaches the graph state only through the node's explicit output mapping; a
  context_patch needs an authorised ContextScope, which an outer node does not get by patching
  (CTX-1.16 to CTX-1.19, CTX-3.40).
- An AgentNode makes an AgentInvocation of an Agent: a reference runtime Session that asks the
  question its input mapping gives, under every rule of the design (CTX-1.19). A context or
  compaction error ends that invocation only: the node receives a failure result and routes it;
  nodes of the same stage are not cancelled (CTX-11.11, CTX-11.12).
- The root Run's stop, the whole tree's deadline and its Loop budget reach every node: the
  invocation running then ends with them, every node not yet started is not run, and no node's
  error routing turns them into a local failure (CTX-11.13).
- A WorkflowSession's inputs go through the outer input mapping into the graph state, never
  through the root role's delivery rule (CTX-2.21).
"""

import copy
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Literal
from uuid import UUID, uuid5

from ctxspec.reference.contracts import (
    HookDecision,
    Operation,
    OperationPurpose,
    OperationState,
)
from ctxspec.reference.hooks import HookCall, HookProposal, evaluate
from ctxspec.reference.ports import (
    HookContext,
    HookPoint,
    HookPort,
    LogicalClock,
    ToolPort,
)
from ctxspec.reference.registry import JSON, FieldRegistry, FieldSpec
from ctxspec.reference.runtime.runtime import AgentConfig, Crash, ReferenceRuntime
from ctxspec.reference.runtime.store import CommitFailed
from ctxspec.reference.runtime.trace import (
    CapabilityCalled,
    GraphStateWritten,
    HookCalled,
    HookDecided,
    NodeEnded,
    NodeStarted,
    RunEnded,
    Trace,
    TraceEvent,
    WorkflowEnded,
)

CAPABILITY_POINT: HookPoint = "capability.pre_call"
CAPABILITY_REGISTRY = FieldRegistry(CAPABILITY_POINT, "1", (FieldSpec(None, "input", "object"),))
"""An outer node's hook may change its input payload; it has no context fields of its own."""

NAMESPACE = UUID("0d3f6a52-7b1e-4c89-9a35-5e2b8f4c7a10")
TreeEnding = Literal["stopped", "timed_out", "loop_exhausted"]
"""How the root Run ends the whole tree (§11): never a node's local failure."""


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
NodeStatus = Literal["succeeded", "failed", "not_run", "stopped", "timed_out", "loop_exhausted"]
"""A node's ending: its own (succeeded, failed and routed), or the whole tree's."""


@dataclass
class NodeResult:
    node: str
    status: NodeStatus
    route: str | None
    value: JSON
    error_code: str | None = None


@dataclass
class WorkflowControl:
    """The root Run's stop while the workflow runs: it reaches the invocation running at that
    moment and every node not yet started (CTX-11.13)."""

    stop_requested: bool = False
    active: ReferenceRuntime | None = None

    def stop(self) -> None:
        self.stop_requested = True
        if self.active is not None:
            self.active.stop()


@dataclass
class WorkflowRun:
    """A WorkflowSession's execution: the graph state, each node's result, the operations of
    its capability nodes, the AgentInvocations' runtimes, and the neutral trace."""

    state: dict[str, JSON]
    results: list[NodeResult] = field(default_factory=list)
    operations: list[tuple[Operation, Mapping[str, JSON], Mapping[str, JSON]]] = \
        field(default_factory=list)
    """(operation, proposed input, effective input) of each capability call."""
    invocations: dict[str, ReferenceRuntime] = field(default_factory=dict)
    tool_calls: dict[str, int] = field(default_factory=dict)
    trace: Trace = field(default_factory=Trace)
    ended: TreeEnding | None = None
    """The whole tree's ending, once it came."""
    loops: int = 0
    """Business Loops the invocations used, all together."""
    started_at: int = 0


@dataclass(frozen=True)
class Workflow:
    stages: tuple[tuple[Node, ...], ...]
    """Stages run in order; the nodes of one stage are siblings (independent)."""
    input_mapping: Mapping[str, str]
    """WorkflowSession input name → graph state key."""
    deadline: int | None = None
    """The root Run's deadline: logical ticks for the whole tree (one per model call and tool
    run of any node); None for none."""
    loop_limit: int | None = None
    """The root Run's Loop budget: business Loops of every invocation together; None for
    none."""


Recover = Callable[[AgentNode], tuple[ReferenceRuntime, TraceEvent]]
"""Takes over an AgentNode's invocation whose runtime died (a crash or a refused commit): a
new runtime from the invocation's own store (§10), and the event that marks the restart."""


def run_workflow(workflow: Workflow, inputs: Mapping[str, JSON], *, tools: ToolPort,
                 hooks: HookPort, invoke: Callable[[AgentNode], ReferenceRuntime],
                 stop_after: str | None = None, control: WorkflowControl | None = None,
                 clock: LogicalClock | None = None,
                 recover: Recover | None = None) -> WorkflowRun:
    """Run the graph once. ``invoke`` builds the runtime of an AgentNode's invocation (with its
    own ports, on ``clock``); ``control`` carries the root Run's stop; ``stop_after`` stops the
    whole workflow once that node finished; ``recover`` takes over an invocation that died."""
    control = control if control is not None else WorkflowControl()
    clock = clock if clock is not None else LogicalClock()
    run = WorkflowRun(state={}, started_at=clock.now())
    for name, key in workflow.input_mapping.items():
        if name in inputs:  # only through the outer input mapping (CTX-2.21)
            _write(run, key, inputs[name], "input_mapping")
    counter = 0
    for stage in workflow.stages:
        for node in stage:
            if run.ended is None:
                run.ended = tree_ending(run, workflow, control, clock)
            if run.ended is not None:
                _finish(run, NodeResult(node.name, "not_run", None, None))
                continue
            counter += 1
            if isinstance(node, CapabilityNode):
                run.trace.add(NodeStarted(node.name, "capability_node"))
                run_capability_node(run, node, tools, hooks, counter, clock)
            else:
                run.trace.add(NodeStarted(node.name, "agent_node"))
                run_agent_node(run, node, invoke, workflow, control, clock, recover)
            if node.name == stop_after:
                control.stop()
    if run.ended is None and control.stop_requested:
        # A stop that came while the last node ran (or right after it) still stops the root
        # Run: the tree ends stopped with what ran kept, never "completed" (CTX-11.13).
        run.ended = "stopped"
    run.trace.add(WorkflowEnded(run.ended or "completed", dict(run.state)))
    return run


def tree_ending(run: WorkflowRun, workflow: Workflow, control: WorkflowControl,
                 clock: LogicalClock) -> TreeEnding | None:
    """The root Run's ending, if it came: its stop, its deadline, its Loop budget spent."""
    if control.stop_requested:
        return "stopped"
    if workflow.deadline is not None and clock.now() - run.started_at >= workflow.deadline:
        return "timed_out"
    if workflow.loop_limit is not None and run.loops >= workflow.loop_limit:
        return "loop_exhausted"
    return None


def _write(run: WorkflowRun, key: str, value: JSON, source: str) -> None:
    run.state[key] = value
    run.trace.add(GraphStateWritten(key, value, source))


def _finish(run: WorkflowRun, result: NodeResult) -> None:
    run.results.append(result)
    run.trace.add(NodeEnded(result.node, result.status, result.route, result.error_code))


def run_capability_node(run: WorkflowRun, node: CapabilityNode, tools: ToolPort,
                        hooks: HookPort, counter: int, clock: LogicalClock) -> None:
    """A CapabilityNode's step of the graph: its input mapped from the state, its pre-call
    hooks, the capability, its output mapped back (§2, §3)."""
    proposed: dict[str, JSON] = {arg: run.state.get(key) for arg, key in
                                 node.input_mapping.items()}
    payload: dict[str, JSON] = {"input": proposed}
    operation_id = uuid5(NAMESPACE, f"{node.name}:{counter}")
    modified_by: list[int] = []
    if hooks.registered(CAPABILITY_POINT):
        # The hook reads a copy: it changes the call only by a validated patch (CTX-3.7).
        context = HookContext(CAPABILITY_POINT, copy.deepcopy(payload), None, None, None,
                              None, counter)
        run.trace.add(HookCalled(CAPABILITY_POINT, "pre"))
        for position, reply in enumerate(hooks.items(context)):
            # An outer node has no RoleContext: a context_patch can only address an authorised
            # scope, and this node has none, so it is refused; no context is made up for it.
            outcome = evaluate(
                HookProposal(uuid5(NAMESPACE, f"{operation_id}:{position}"), reply.decision,
                             reply.payload_ops, None if not reply.context_ops else
                             uuid5(NAMESPACE, "no-scope"), reply.base_revision,
                             reply.context_ops, reply.failed),
                HookCall(operation_id=operation_id, hook_point=CAPABILITY_POINT, stage="pre",
                         actor_role=None, actor_context_id=None, call_id=None,
                         call_record_id=None),
                CAPABILITY_REGISTRY, {}, payload, chain_position=position,
                annotation_ids=lambda i: uuid5(NAMESPACE, f"{operation_id}:a:{i}"))
            invocation = outcome.invocation
            changed = invocation.patch_valid and dict(outcome.payload) != payload
            run.trace.add(HookDecided(
                CAPABILITY_POINT, position, invocation.decision.value, invocation.patch_valid,
                tuple(d.code for d in invocation.diagnostics),
                tuple(f"{path}={json.dumps(value, ensure_ascii=False, default=str)}"
                      for path, value, _ in outcome.changes.payload_only) if changed else ()))
            if invocation.decision is HookDecision.DENY:
                _finish(run, NodeResult(node.name, "failed", "denied", None, "DENIED"))
                return
            if changed:
                modified_by.append(position)
            payload = dict(outcome.payload)
    effective = payload.get("input")
    arguments = dict(effective) if isinstance(effective, dict) else dict(proposed)
    run.tool_calls[node.tool] = run.tool_calls.get(node.tool, 0) + 1
    clock.tick()  # a tool run takes one tick of the root Run's deadline
    result = tools.run(node.tool, arguments, run.tool_calls[node.tool])
    run.operations.append((Operation(
        operation_id=operation_id, run_id=operation_id, node_task_id=operation_id,
        purpose=OperationPurpose.TOOL, purpose_key=f"capability:{node.name}:{counter}",
        state=OperationState.FAILED if result.error else OperationState.SUCCEEDED),
        proposed, arguments))
    run.trace.add(CapabilityCalled(node.name, node.tool, proposed, arguments,
                                   tuple(modified_by), "error" if result.error else "ok"))
    if result.error:
        _write(run, f"{node.output_key}.error", result.error, node.name)
        _finish(run, NodeResult(node.name, "failed", "error", result.error, "TOOL_ERROR"))
        return
    _write(run, node.output_key, result.text, node.name)  # only through the output mapping
    _finish(run, NodeResult(node.name, "succeeded", None, result.text))


def run_agent_node(run: WorkflowRun, node: AgentNode,
                   invoke: Callable[[AgentNode], ReferenceRuntime], workflow: Workflow,
                   control: WorkflowControl, clock: LogicalClock,
                   recover: Recover | None = None) -> None:
    """An AgentNode's step of the graph: one AgentInvocation under what is left of the root
    Run's deadline and Loop budget, its final answer mapped to the state (§2, §11)."""
    # The invocation runs under the root Run's deadline and Loop budget, what is left of them.
    agent = node.agent
    if workflow.deadline is not None:
        left = workflow.deadline - (clock.now() - run.started_at)
        agent = replace(agent, run_deadline=left if agent.run_deadline is None
                        else min(agent.run_deadline, left))
    if workflow.loop_limit is not None:
        agent = replace(agent, loop_limit=min(agent.loop_limit,
                                              workflow.loop_limit - run.loops))
    node = replace(node, agent=agent)
    question = run.state.get(node.question_key)
    runtime, events = _invocation(node, invoke, question if isinstance(question, str)
                                  else str(question), control, recover)
    run.invocations[node.name] = runtime
    # Every business Loop of the invocation takes one of the root's, an Executor's too.
    run.loops += sum(state.loops for state in (*runtime.runs.values(), *runtime.tasks))
    run.trace.events.extend(events.events)
    ended = events.of(RunEnded)[-1]
    if ended.status == "succeeded":
        value = _final_answer(runtime)
        _write(run, node.output_key, value, node.name)
        _finish(run, NodeResult(node.name, "succeeded", None, value))
        return
    tree = tree_ending(run, workflow, control, clock)
    if tree is not None and tree == ended.status:
        # The root's stop, deadline or Loop budget ended the invocation: the whole tree ends
        # with it, and no error route turns it into a local failure (CTX-11.13).
        run.ended = tree
        _finish(run, NodeResult(node.name, tree, None, None))
        return
    failure: JSON = {"status": ended.status, "error_code": ended.error_code,
                     "message": ended.message}
    _write(run, f"{node.output_key}.{node.on_error}", failure, node.name)
    _finish(run, NodeResult(node.name, "failed", node.on_error, failure, ended.error_code))


def _invocation(node: AgentNode, invoke: Callable[[AgentNode], ReferenceRuntime],
                question: str, control: WorkflowControl,
                recover: Recover | None) -> tuple[ReferenceRuntime, Trace]:
    """The AgentInvocation asks its question and runs its Run to the end. The outer graph and
    the inner Agent each keep their own scope's state (§10): if the invocation's
    runtime dies, ``recover`` takes it over from its own store and it goes on — the question
    asked again only if the dead runtime never committed it — while the graph keeps its state
    and the node its place (Q162). Returns the runtime and the invocation's events, a dead
    incarnation's first."""
    events = Trace()
    runtime: ReferenceRuntime | None = None
    received: int | None = None
    """The user inputs the invocation's store held before its question was sent."""
    while True:
        try:
            if runtime is None:
                runtime = invoke(node)
            control.active = runtime
            if received is None:
                received = runtime.store.count("user_inputs")
            if runtime.store.count("user_inputs") == received:
                runtime.ask(question)
            runtime.advance()
            events.events.extend(runtime.trace.events)
            return runtime, events
        except (Crash, CommitFailed):
            if recover is None:
                raise
            if runtime is not None:
                events.events.extend(runtime.trace.events)
            runtime, marker = recover(node)
            events.add(marker)
        finally:
            control.active = None


def _final_answer(runtime: ReferenceRuntime) -> JSON:
    """The invocation's answer: its Run's last assistant record that calls no tool."""
    for run in runtime.runs.values():
        for raw in reversed(runtime.contexts[run.context_id].records):
            if raw.record.message_kind == "assistant" and not any(
                    key.startswith("tool_call:") for key in raw.content):
                text = raw.content.get("text")
                return text if isinstance(text, str) else None
    return None


__all__ = ["AgentNode", "CapabilityNode", "Node", "NodeResult", "TreeEnding", "Workflow",
           "WorkflowControl", "WorkflowRun", "run_workflow"]
