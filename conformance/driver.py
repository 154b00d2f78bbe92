"""The Driver: the small interface through which the conformance harness and the models drive
any runtime (ARCHITECTURE.md "The conformance suite"), and the reference runtime's Driver.

A driver is configured with an Agent (a scenario's ``agent``) and the ports the harness
injects (scripted model, tools and hooks, the token estimator); then it is given stimuli —
ask, supplement, stop, advance — and finally asked for its neutral trace. It declares its
capabilities; a case needing one it lacks is reported unsupported, never passed.
"""

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from ctxspec.conformance.scenario import (
    AgentDoc,
    NodeDoc,
    Scenario,
    ScriptedHooks,
    ScriptedModel,
    ScriptedTools,
    StepDoc,
    Triggers,
)
from ctxspec.reference.runtime.ports import HookPort, LogicalClock, ModelPort, ToolPort
from ctxspec.reference.runtime.runtime import (
    DELEGATE_TOOL,
    AgentConfig,
    ExecutorConfig,
    ReferenceRuntime,
    SharedField,
    ToolSpec,
)
from ctxspec.reference.runtime.trace import NodeEnded, Trace
from ctxspec.reference.runtime.workflow import (
    AgentNode,
    CapabilityNode,
    Workflow,
    WorkflowRun,
    run_workflow,
)
from ctxspec.reference.tokens import ByteEstimator, EstimationRequest, TokenEstimate, TokenEstimator

CAPABILITIES = frozenset({"root_loop", "hooks", "compaction", "estimator_injection", "stop",
                          "triggers", "planner_executor"})
DELEGATE_SCHEMA = json.dumps({"name": DELEGATE_TOOL, "parameters": {
    "type": "object", "properties": {"task": {"type": "string"},
                                     "constraints": {"type": "array"},
                                     "materials": {"type": "array"}}}}, sort_keys=True)
"""What the reference driver supports today; Planner/Executor, outer workflows, crash points,
commit-failure injection, shared scopes and workspaces follow in later issues."""


@dataclass(frozen=True)
class Ports:
    model: ModelPort
    tools: ToolPort
    hooks: HookPort
    estimator: TokenEstimator


class Driver(Protocol):
    capabilities: frozenset[str]

    def configure(self, scenario: Scenario, ports: Ports) -> None: ...

    def ask(self, text: str) -> None: ...

    def supplement(self, text: str) -> None: ...

    def stop(self) -> None: ...

    def advance(self) -> None: ...

    def trace(self) -> list[dict[str, Any]]:
        """The neutral trace as JSON-ready objects (the events of runtime/trace.py)."""
        ...


class CharEstimator:
    """One token per character, no overhead: a deterministic estimator scenarios can inject so
    every runtime is measured alike."""

    name = "chars"

    def estimate(self, request: EstimationRequest) -> TokenEstimate:
        tokens = sum(len(m.text) for m in request.messages) + sum(map(len,
                                                                      request.tool_schemas))
        return TokenEstimate(tokens=tokens, accuracy="estimated", estimator=self.name)


ESTIMATORS: dict[str, Callable[[], TokenEstimator]] = {"bytes": ByteEstimator,
                                                       "chars": CharEstimator}


class ReferenceDriver:
    """The reference runtime behind the Driver interface."""

    capabilities = CAPABILITIES

    def __init__(self) -> None:
        self.runtime: ReferenceRuntime | None = None
        self.workflow_trace: Trace | None = None
        self.workflow_run: WorkflowRun | None = None

    def configure(self, scenario: Scenario, ports: Ports) -> None:
        self.runtime = ReferenceRuntime(
            _agent_config(scenario.agent), model=ports.model, tools=ports.tools,
            hooks=ports.hooks, estimator=ports.estimator, clock=LogicalClock(),
            seed=scenario.name)

    def _runtime(self) -> ReferenceRuntime:
        if self.runtime is None:
            raise RuntimeError("configure the driver first")
        return self.runtime

    def ask(self, text: str) -> None:
        self._runtime().ask(text)

    def supplement(self, text: str) -> None:
        self._runtime().supplement(text)

    def stop(self) -> None:
        self._runtime().stop()

    def advance(self) -> None:
        self._runtime().advance()

    def trace(self) -> list[dict[str, Any]]:
        return self.raw_trace().to_json()

    def raw_trace(self) -> Trace:
        return self.workflow_trace if self.workflow_trace is not None else self._runtime().trace

    def run_workflow(self, scenario: Scenario) -> None:
        """Run the scenario's workflow: each AgentNode an AgentInvocation of its own Agent with
        its own scripted model; the trace is each node's events, then how the node ended."""
        document = scenario.workflow
        if document is None:
            raise ValueError("the scenario has no workflow")
        triggers = Triggers(())
        tools = ScriptedTools(scenario.tools, triggers)
        agents = {node.agent_node.name: node.agent_node for stage in document.stages
                  for node in stage if node.agent_node is not None}

        def invoke(node: AgentNode) -> ReferenceRuntime:
            doc = agents[node.name]
            return ReferenceRuntime(node.agent, model=ScriptedModel(doc.model, triggers),
                                    tools=tools, hooks=ScriptedHooks(()),
                                    estimator=ESTIMATORS[doc.agent.estimator](),
                                    clock=LogicalClock(), seed=f"{scenario.name}:{node.name}")

        stages = tuple(tuple(_node(n) for n in stage) for stage in document.stages)
        result = run_workflow(Workflow(stages, document.input_mapping), document.input,
                              tools=tools, hooks=ScriptedHooks(scenario.hooks), invoke=invoke,
                              stop_after=document.stop_after)
        trace = Trace()
        for node_result in result.results:
            runtime = result.invocations.get(node_result.node)
            if runtime is not None:
                trace.events.extend(runtime.trace.events)
            trace.add(NodeEnded(node_result.node, node_result.status, node_result.route,
                                node_result.error_code))
        self.workflow_trace = trace
        self.workflow_run = result


def _node(node: NodeDoc) -> AgentNode | CapabilityNode:
    if node.agent_node is not None:
        doc = node.agent_node
        return AgentNode(doc.name, _agent_config(doc.agent), doc.question_key, doc.output_key,
                         doc.on_error)
    if node.capability_node is None:
        raise ValueError("a node is an agent_node or a capability_node")
    capability = node.capability_node
    return CapabilityNode(capability.name, capability.tool, capability.input,
                          capability.output_key)


def _agent_config(agent: AgentDoc) -> AgentConfig:
    executor = None if agent.executor is None else ExecutorConfig(
        agent.executor.system_prompt, tuple(t.spec() for t in agent.executor.tools))
    tools = tuple(t.spec() for t in agent.tools)
    if executor is not None and not any(t.name == DELEGATE_TOOL for t in tools):
        tools += (ToolSpec(DELEGATE_TOOL, DELEGATE_SCHEMA),)
    return AgentConfig(system_prompt=agent.system_prompt, budget=agent.budget(), tools=tools,
                       executor=executor,
                       shared=tuple(SharedField(f.name, f.text, f.consumers)
                                    for f in agent.shared),
                       recent_runs=agent.recent_runs, loop_limit=agent.loop_limit,
                       run_deadline=agent.run_deadline, model_attempts=agent.model_attempts,
                       tool_quota=agent.tool_quota,
                       persistent_sandbox=agent.persistent_sandbox,
                       custom_compaction_prompt=agent.custom_compaction_prompt)


def perform(driver: Driver, step: StepDoc) -> None:
    if step.ask is not None:
        driver.ask(step.ask)
    elif step.supplement is not None:
        driver.supplement(step.supplement)
    elif step.stop:
        driver.stop()
    else:
        driver.advance()


def run_scenario(scenario: Scenario,
                 driver_factory: Callable[[], Driver] = ReferenceDriver) -> Driver:
    """Build the scripted ports, configure a driver, perform the steps (or run the workflow);
    the driver holds the trace afterwards."""
    if scenario.workflow is not None:
        driver = driver_factory()
        if not isinstance(driver, ReferenceDriver):
            raise NotImplementedError("outer workflows run on the reference driver only")
        driver.run_workflow(scenario)
        return driver
    triggers = Triggers(scenario.triggers)
    ports = Ports(ScriptedModel(scenario.model, triggers), ScriptedTools(scenario.tools, triggers),
                  ScriptedHooks(scenario.hooks), ESTIMATORS[scenario.agent.estimator]())
    driver = driver_factory()
    driver.configure(scenario, ports)
    triggers.act = lambda step: perform(driver, step)
    for step in scenario.steps:
        perform(driver, step)
    return driver
