"""The Driver: the small interface through which the conformance harness and the models drive
any runtime (docs/architecture.md "Layers"), and the reference runtime's Driver.

A driver is configured with an Agent (a scenario's ``agent``) and the ports the harness
injects (scripted model, tools and hooks, the token estimator); then it is given stimuli —
ask, supplement, stop, advance — and finally asked for its neutral trace. It declares its
capabilities; a case needing one it lacks is reported unsupported, never passed.
"""

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, cast
from uuid import UUID

from ctxspec.conformance.driver_config import agent_config, workflow_node
from ctxspec.conformance.estimator import estimator_for
from ctxspec.conformance.history_steps import HistorySteps
from ctxspec.conformance.phases import CRASH_CAPABILITIES, REFERENCE_COMMITS
from ctxspec.conformance.scenario import (
    HistoryReadDoc,
    Scenario,
    ScenarioError,
    ScriptedHooks,
    ScriptedModel,
    ScriptedMoments,
    ScriptedTools,
    StepDoc,
    Triggers,
    WorkflowDoc,
    WriteDoc,
)
from ctxspec.limits import shown
from ctxspec.reference.commits import COMMIT_NAMES
from ctxspec.reference.ports import (
    HookPort,
    LogicalClock,
    ModelPort,
    MomentPort,
    NoMoments,
    ToolPort,
)
from ctxspec.reference.runtime import workflow as wf
from ctxspec.reference.runtime.ownership import HARNESS
from ctxspec.reference.runtime.restore import restore
from ctxspec.reference.runtime.runtime import (
    AuditGrants,
    Crash,
    CrashPlan,
    ReferenceRuntime,
)
from ctxspec.reference.runtime.store import CommitCoordinator, CommitFailed, Store
from ctxspec.reference.runtime.trace import (
    PersistenceFailed,
    Restarted,
    SessionOpened,
    Trace,
)
from ctxspec.reference.runtime.workflow import (
    AgentNode,
    Workflow,
    WorkflowControl,
    WorkflowRun,
)
from ctxspec.reference.tokens import TokenEstimator

CAPABILITIES = frozenset({
    "root_loop", "hooks", "compaction", "estimator_injection", "stop", "stop_mid_batch",
    "triggers", "planner_executor", "crash_points", "commit_failures", "retention",
    "history_api", "shared_scopes", "usage_reports", "tool_latency", "sessions", "workflow",
    "history_bodies", "error_figures", "final_answers", "moments", "writer",
    *CRASH_CAPABILITIES})
"""What the reference driver supports; each capability's meaning is the table of
docs/implementing-a-driver.md §4. Of the reference's own choices: it runs a batch's calls one by
one (``tool_latency`` records the scripted figure on ``tool_executed``, Q58), and its crash
points are the commits of conformance/phases.py (docs/recovery.md)."""



@dataclass(frozen=True)
class Ports:
    model: ModelPort
    tools: ToolPort
    hooks: HookPort
    estimator: TokenEstimator
    moments: MomentPort = field(default_factory=NoMoments)
    """The world at the loop's boundaries (capability ``moments``)."""


@dataclass(frozen=True)
class WorkflowPorts:
    """What the harness injects into a workflow: the tools and hooks every node shares (a
    CapabilityNode's tool and its ``capability.pre_call`` hooks, an AgentNode's tools and
    hooks), and each AgentNode's own Ports (its scripted model and its estimator), by node
    name."""

    tools: ToolPort
    hooks: HookPort
    nodes: Mapping[str, Ports]


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


_LAST_INPUT = "SELECT MAX(rowid) AS n FROM user_inputs"  # not a count: a step per input (#35)
class ReferenceDriver(HistorySteps):
    """The reference runtime behind the Driver interface. A scenario's ``crash`` kills the
    runtime at its commit: the object is dropped, a new one restores the Session from the same
    store (no Python state carried over) and the interrupted step continues — an ``advance`` is
    performed again, an input the dead runtime never committed is sent again, as a client
    whose request failed would.

    ``new_session()`` opens another Session of the same Agent: a new runtime on the same store,
    with its own identities, and the same Agent workspace; the earlier Sessions' runtimes stay
    idle. A crash counts its commit over the whole scenario, and the restart takes over the
    Session the steps talk to."""

    capabilities = CAPABILITIES
    phase_commits: Mapping[str, str] = REFERENCE_COMMITS
    """The commit each phase of the design is mapped onto (conformance/phases.py)."""

    def __init__(self) -> None:
        self.runtime: ReferenceRuntime | None = None
        self.sessions: list[ReferenceRuntime] = []
        """The runtimes of the earlier Sessions (idle; kept to delete the Agent)."""
        self.agent_workspace: dict[str, str] = {}
        """The Agent's workspace, the same for each of its Sessions and incarnations."""
        self.crashed = False
        self.counted: dict[str, int] = {}
        """Commits the earlier Sessions made before the planned crash fired, by name."""
        self.workflow_trace: Trace | None = None
        self.workflow_run: WorkflowRun | None = None
        self.workflow_control: WorkflowControl | None = None
        """Set while a workflow runs: the user's stop goes to its root Run."""
        self.earlier = Trace()
        """The events of incarnations that died, each followed by its Restarted marker."""
        self.observed = Trace()
        """What the retention and history steps saw, after the runtime's own events."""
        self.depth = 0
        """Driver calls in progress: a trigger's step runs inside another call, and only the
        outermost call may restart (the process dies under all of them)."""
        self.coordinator: Callable[[Store], CommitCoordinator] = CommitCoordinator
        """Builds each new Session's commit coordinator (conformance/crash_runup.py taps it)."""

    def configure(self, scenario: Scenario, ports: Ports) -> None:
        self._prepare(scenario, ports)
        self._open()

    def _prepare(self, scenario: Scenario, ports: Ports) -> None:
        """Everything ``configure`` sets up but the Session itself."""
        self.agent, self.ports, self.seed = agent_config(scenario.agent), ports, scenario.name
        self.scenario_name = scenario.name
        self.store, self.clock = Store(), LogicalClock()
        # The operator's grants for the audit readers the Agent names: each runtime built for
        # it admits them, and an audit read of the scenario is made with its reader's grant.
        self.audit = AuditGrants.issue(self.agent.audit_readers)
        crash = scenario.crash
        self.crash = None if crash is None else CrashPlan(
            self.phase_commits[crash.phase] if crash.phase is not None else str(crash.commit),
            crash.occurrence, crash.when)

    def _open(self) -> None:
        try:
            self.runtime = self._new(self._pending_crash())
        except (Crash, CommitFailed) as dead:
            self._planned(dead)
            if isinstance(dead, CommitFailed) and self.crash is not None:
                # A refused SESSION_OPENED: the runtime traced it, but its trace died with its
                # constructor; the refusal stays in the trace (the commit_failures probe at
                # session_opened reads it).
                self.earlier.add(PersistenceFailed(dead.name, self.crash.occurrence, str(dead)))
            self._restart()

    def _planned(self, dead: BaseException) -> None:
        """A failed commit the scenario did not inject is the runtime's own fault: it goes up
        (the harness reports an error); a planned crash or refused commit restarts."""
        if isinstance(dead, CommitFailed) and (self.crash is None or self.crash.when != "fails"):
            raise dead

    def _pending_crash(self) -> CrashPlan | None:
        """The scenario's crash, counted from where this incarnation starts: its occurrence
        counts the commits of the whole scenario, the earlier Sessions' too."""
        plan = self.crash
        if plan is None or self.crashed:
            return None
        return CrashPlan(plan.commit, plan.occurrence - self.counted.get(plan.commit, 0),
                         plan.when)

    def _new(self, crash: CrashPlan | None) -> ReferenceRuntime:
        runtime = ReferenceRuntime(self.agent, model=self.ports.model, tools=self.ports.tools,
                                   hooks=self.ports.hooks, estimator=self.ports.estimator,
                                   clock=self.clock, seed=self.seed, store=self.store, crash=crash,
                                   lease=HARNESS, coordinator=self.coordinator(self.store),
                                   audit=self.audit)
        runtime.workspace = self.agent_workspace
        runtime.moments = self.ports.moments
        return runtime

    def _restart(self) -> None:
        """Drop the dead runtime; a Session the store does not know yet is opened afresh."""
        if self.runtime is not None:
            self.earlier.events.extend(self.runtime.trace.events)
        plan = self.crash
        assert plan is not None  # only a planned crash restarts
        self.crashed = True
        self.earlier.add(Restarted(plan.commit, plan.occurrence, plan.when))
        earlier = {str(runtime.session_id) for runtime in self.sessions}
        current = [UUID(row["session_id"]) for row in self.store.query(
            "SELECT session_id FROM sessions") if row["session_id"] not in earlier]
        if not current:
            self.runtime = self._new(None)
            return
        [session_id] = current
        self.runtime = restore(self.store, self.agent, model=self.ports.model,
                               tools=self.ports.tools, hooks=self.ports.hooks,
                               estimator=self.ports.estimator, clock=self.clock, seed=self.seed,
                               session_id=session_id, lease=HARNESS, audit=self.audit)
        self.runtime.workspace = self.agent_workspace
        self.runtime.moments = self.ports.moments

    def new_session(self) -> None:
        """Open another Session of the same Agent (ending nothing): later stimuli go to it.
        Its identities come from its own seed, so nothing of the earlier Sessions is shared
        but the store, the Agent and its workspace."""
        previous = self._runtime()
        if not self.crashed:
            for name in {*COMMIT_NAMES, *self.phase_commits.values()}:
                self.counted[name] = self.counted.get(name, 0) + previous.commits_made(name)
        self.sessions.append(previous)
        self.earlier.events.extend([*previous.trace.events, *self.observed.events])
        self.observed = Trace()
        self.runtime = None
        ordinal = len(self.sessions) + 1
        self.earlier.add(SessionOpened(ordinal))
        self.seed = f"{self.scenario_name}:session:{ordinal}"
        self._open()

    def _runtime(self) -> ReferenceRuntime:
        if self.runtime is None:
            raise RuntimeError("configure the driver first")
        return self.runtime

    def _outermost(self, step: Callable[[], object], again: Callable[[], object]) -> None:
        """Perform ``step``; if the process dies in it, restart and perform ``again``."""
        self.depth += 1
        try:
            step()
        except (Crash, CommitFailed) as dead:
            if self.depth > 1:
                raise
            self._planned(dead)
            self._restart()
            again()
        finally:
            self.depth -= 1

    def _input(self, text: str, send: Callable[[ReferenceRuntime, str], object]) -> None:
        inputs = self.store.query(_LAST_INPUT)
        def resend() -> None:  # an input the dead runtime never committed is sent again
            if self.store.query(_LAST_INPUT) == inputs:
                send(self._runtime(), text)
        self._outermost(lambda: send(self._runtime(), text), resend)

    def ask(self, text: str) -> None:
        self._input(text, ReferenceRuntime.ask)

    def supplement(self, text: str) -> None:
        self._input(text, ReferenceRuntime.supplement)

    def write(self, write: WriteDoc) -> None:
        """An independent writer's correction (capability ``writer``), committed at once."""
        written = self.store.count("mutations")
        def once(again: bool = False) -> None:  # nothing behind a target: the scenario's fault
            if again and self.store.count("mutations") != written:
                return  # only a write the dead runtime never committed is made again
            try:
                self._runtime().write(write.target, write.field, write.value)
            except ValueError as error:
                raise ScenarioError(f"scenario.steps: write: {shown(str(error))}") from None
        self._outermost(once, lambda: once(again=True))

    def stop(self) -> None:
        if self.workflow_control is not None:
            self.workflow_control.stop()
            return
        self._runtime().stop()

    def advance(self) -> None:
        self._outermost(lambda: self._runtime().advance(), lambda: self._runtime().advance())

    def trace(self) -> list[dict[str, Any]]:
        """The neutral trace; a restart or a refused commit names its commit's phase too."""
        return list(self.trace_events())

    def trace_events(self) -> Iterator[dict[str, Any]]:
        """The events of :meth:`trace`, one at a time (what the linear form is made from
        without holding every request's whole view, issue #35)."""
        phase_of = {commit: phase for phase, commit in self.phase_commits.items()}
        for event in self.raw_trace().json_events():
            if event["kind"] in ("restarted", "persistence_failed"):
                event["phase"] = phase_of.get(event["commit"])
            yield event

    def crashed_runs(self, document: Mapping[str, Any],
                     crashes: Sequence[Mapping[str, Any] | None],
                     fresh: Callable[[], object]) -> "list[LaterTrace]":
        """Crashed runs sharing their run-up (:class:`CrashRunsDriver`)."""
        from ctxspec.conformance.crash_runup import crashed_runs  # it builds on this module
        return crashed_runs(document, crashes, fresh)

    def session_id(self) -> UUID:
        return self._runtime().session_id

    def raw_trace(self) -> Trace:
        if self.workflow_trace is not None:
            return self.workflow_trace
        return Trace([*self.earlier.events, *self._runtime().trace.events,
                      *self.observed.events])

    def run_workflow(self, scenario: Scenario, ports: WorkflowPorts) -> None:
        """Run the scenario's workflow: each AgentNode an AgentInvocation of its own Agent on
        its own Ports, all on one logical clock (the root Run's deadline); the trace is the
        workflow's own (``workflow.run_workflow``)."""
        document = scenario.workflow
        if document is None:
            raise ValueError("the scenario has no workflow")
        clock = LogicalClock()
        crash = scenario.crash
        plan = None if crash is None else CrashPlan(
            self.phase_commits[crash.phase] if crash.phase is not None else str(crash.commit),
            crash.occurrence, crash.when)
        stores: dict[str, Store] = {}
        started: list[ReferenceRuntime] = []
        """The invocations' runtimes before the crash: a crash counts its commit over the
        whole workflow."""

        def invoke(node: AgentNode) -> ReferenceRuntime:
            own = ports.nodes[node.name]
            pending = None if plan is None or self.crashed else CrashPlan(
                plan.commit, plan.occurrence - sum(r.commits_made(plan.commit) for r in started),
                plan.when)
            store = stores[node.name] = Store()
            runtime = ReferenceRuntime(node.agent, model=own.model, tools=own.tools,
                                       hooks=own.hooks, estimator=own.estimator, clock=clock,
                                       seed=f"{scenario.name}:{node.name}", store=store,
                                       crash=pending if pending and pending.occurrence > 0
                                       else None, lease=HARNESS)
            started.append(runtime)
            return runtime

        def recover(node: AgentNode) -> tuple[ReferenceRuntime, Restarted]:
            # The invocation's process died: a new runtime takes its Session over from the
            # invocation's own store, or opens it afresh if the store never got it (§10).
            assert plan is not None  # only a planned crash or refused commit gets here
            self.crashed = True
            own, store = ports.nodes[node.name], stores[node.name]
            sessions = store.query("SELECT session_id FROM sessions")
            seed = f"{scenario.name}:{node.name}"
            runtime = ReferenceRuntime(
                node.agent, model=own.model, tools=own.tools, hooks=own.hooks,
                estimator=own.estimator, clock=clock, seed=seed, store=store, lease=HARNESS) \
                if not sessions else restore(
                    store, node.agent, model=own.model, tools=own.tools, hooks=own.hooks,
                    estimator=own.estimator, clock=clock, seed=seed, lease=HARNESS)
            return runtime, Restarted(plan.commit, plan.occurrence, plan.when)

        stages = tuple(tuple(workflow_node(n) for n in stage) for stage in document.stages)
        self.workflow_control = WorkflowControl()
        try:
            result = wf.run_workflow(
                Workflow(stages, document.input_mapping, document.deadline,
                         document.loop_limit), document.input, tools=ports.tools,
                hooks=ports.hooks, invoke=invoke, stop_after=document.stop_after,
                control=self.workflow_control, clock=clock,
                recover=recover if plan is not None else None)
        finally:
            self.workflow_control = None
        self.workflow_trace = result.trace
        self.workflow_run = result


class WorkflowDriver(Driver, Protocol):
    """A driver with the optional ``workflow`` capability: it runs a scenario's outer
    workflow on the ports the harness injects; a ``stop`` during it is the root Run's stop."""

    def run_workflow(self, scenario: Scenario, ports: WorkflowPorts) -> None: ...


class RetentionDriver(Driver, Protocol):
    """A driver with the optional ``retention`` and ``history_api`` capabilities: it performs
    these steps and records what it saw in its trace (``retained``, ``history_read``)."""

    def observe_retention(self) -> None: ...

    def delete_agent(self) -> None: ...

    def history_step(self, read: HistoryReadDoc) -> None: ...


class WriterDriver(Driver, Protocol):
    """A driver with the optional ``writer`` capability: an independent writer's correction of
    a record of the active Run, committed as its own mutation (§9)."""

    def write(self, write: WriteDoc) -> None: ...


class SessionsDriver(Driver, Protocol):
    """A driver with the optional ``sessions`` capability: it opens another Session of the same
    Agent (same store, same Agent workspace) and traces ``session_opened``."""

    def new_session(self) -> None: ...


LaterTrace = Callable[[], list[dict[str, Any]] | None]  # computed when asked (None: not shared)


class CrashRunsDriver(Driver, Protocol):
    """A driver with the optional ability to run the crashed runs of one scenario sharing their
    run-up (conformance/crash_runup.py; docs/implementing-a-driver.md): for each ``crash`` of
    ``crashes``, a function giving the trace (as JSON) that running ``{**document, "crash":
    crash}`` on a fresh driver of ``fresh`` would give (for None: running ``document``), or
    None where it does not share that run — the harness then runs that document from scratch.
    The harness calls each function at most once, when a case needs that trace (a ``--jobs``
    worker only for its own cases)."""

    def crashed_runs(self, document: Mapping[str, Any],
                     crashes: Sequence[Mapping[str, Any] | None],
                     fresh: Callable[[], object]) -> list[LaterTrace]: ...


def perform(driver: Driver, step: StepDoc) -> None:
    if step.ask is not None:
        driver.ask(step.ask)
    elif step.supplement is not None:
        driver.supplement(step.supplement)
    elif step.stop:
        driver.stop()
    elif step.read_history is not None:
        cast(RetentionDriver, driver).history_step(step.read_history)
    elif step.observe_retention:
        cast(RetentionDriver, driver).observe_retention()
    elif step.delete_agent:
        cast(RetentionDriver, driver).delete_agent()
    elif step.new_session:
        cast(SessionsDriver, driver).new_session()
    elif step.write is not None:
        cast(WriterDriver, driver).write(step.write)
    else:
        driver.advance()


def run_scenario(scenario: Scenario,
                 driver_factory: Callable[[], Driver] = ReferenceDriver) -> Driver:
    """Build the scripted ports, configure a driver, perform the steps (or run the workflow);
    the driver holds the trace afterwards."""
    triggers = Triggers(scenario.triggers)
    if scenario.workflow is not None:
        return _run_workflow(scenario, scenario.workflow, triggers, driver_factory)
    asked = [0]  # questions asked so far: the Run a keyed model answer names
    ports = scripted_ports(scenario, triggers, lambda: asked[0])
    driver = driver_factory()
    driver.configure(scenario, ports)
    triggers.act = lambda step: perform(driver, step)
    for step in scenario.steps:
        asked[0] += step.ask is not None
        perform(driver, step)
    return driver


def scripted_ports(scenario: Scenario, triggers: Triggers, asked: Callable[[], int]) -> Ports:
    """The scripted ports of a scenario's steps; ``asked``: the questions asked so far (the
    Run a keyed model answer names)."""
    return Ports(ScriptedModel(scenario.model, triggers, asked),
                 ScriptedTools(scenario.tools, triggers),
                 ScriptedHooks(scenario.hooks, triggers), estimator_for(scenario, scenario.agent),
                 ScriptedMoments(triggers))


def _run_workflow(scenario: Scenario, document: WorkflowDoc, triggers: Triggers,
                  driver_factory: Callable[[], Driver]) -> Driver:
    """A workflow needs the ``workflow`` capability; every node shares the scripted tools and
    hooks, each AgentNode has its own model script and estimator, and a trigger's stop is the
    root Run's."""
    driver = driver_factory()
    if "workflow" not in driver.capabilities:
        raise NotImplementedError("the driver does not declare the workflow capability")
    tools, hooks = ScriptedTools(scenario.tools, triggers), ScriptedHooks(scenario.hooks)
    nodes = {node.agent_node.name: Ports(ScriptedModel(node.agent_node.model, triggers), tools,
                                         hooks, estimator_for(scenario, node.agent_node.agent))
             for stage in document.stages for node in stage if node.agent_node is not None}
    triggers.act = lambda step: perform(driver, step)
    cast(WorkflowDriver, driver).run_workflow(scenario, WorkflowPorts(tools, hooks, nodes))
    return driver
