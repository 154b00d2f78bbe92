"""Crashed runs that share their run-up: the reference driver's optional ``crashed_runs``
ability (conformance/driver.py ``CrashRunsDriver``, docs/implementing-a-driver.md "Optional:
crashed runs sharing their run-up"; issue #20).

A crashed run of a scenario (§10; conformance/crash_matrix.py) is the uncrashed run up to its
crash point: the runtime reads its crash plan only in the commit it dies at. So the scenario
runs once, its commit coordinator tapped, and at each crash point asked for, what the dead
process leaves behind is kept — the store's image (sqlite3 ``serialize``), the scripted ports'
positions, the logical clock, the Agent workspace, the trace so far, and the outermost step in
flight with the inputs and writes stored when it began. Each crashed run then goes on from its
point as ``ReferenceDriver`` goes on after a crash: a new runtime takes the Session over from
the store image (``_restart``), the interrupted step is performed again (an input or a write
the dead runtime never committed is sent again, an ``advance`` is performed again), then the
remaining steps.

Exact or not at all: tests/test_crash_runup.py holds each shared trace equal to the same
crashed document run from scratch. A run not shared is None, and the harness runs it from
scratch: a workflow, several Sessions, a crash that fails a commit (``when: fails``), a crash
point the run never reaches or one in a step that does not restart (a stop, a retention or
history step), a ``content`` estimator whose texts the ``crash`` changes, a continuation that
raised; what the run-up raises goes up (docs/open-questions.md Q241-Q246).
"""

import functools
import json
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ctxspec.conformance.driver import (
    LaterTrace,
    Ports,
    ReferenceDriver,
    perform,
    scripted_ports,
)
from ctxspec.conformance.estimator import scenario_texts
from ctxspec.conformance.scenario import (
    Scenario,
    ScriptedHooks,
    ScriptedModel,
    ScriptedMoments,
    ScriptedTools,
    StepDoc,
    Triggers,
    parse_scenario,
)
from ctxspec.reference.runtime.store import CommitCoordinator, Store, Write
from ctxspec.reference.runtime.trace import Trace, TraceEvent

Point = tuple[str, int, str]
"""A crash point as the driver's plan names it: (commit, occurrence, ``before`` or ``after``)."""


@dataclass(frozen=True)
class Positions:
    """How far the scripted ports (conformance/scripted.py) got: what they counted and the
    answers they gave, which a restarted runtime asking again receives again."""

    used: dict[str, int]
    operations: dict[tuple[str, int], list[str]]
    answered: dict[tuple[str, int], Any]
    replays: int
    requests: dict[str, int]
    tool_calls: dict[str, int]
    invocations: dict[str, int]
    hooks_asked: int
    moments: dict[str, int]
    asked: int
    """Questions the steps asked: the Run a keyed model answer names."""


@dataclass(frozen=True)
class Remains:
    """What a process that died at a crash point leaves behind, and where its steps were."""

    step: int
    """The outermost step in flight; -1 while the Session was being opened."""
    began: tuple[int, int]
    """User inputs and writes stored when that step began (to send again what never was)."""
    image: bytes
    blobs: frozenset[str] | None
    now: int
    workspace: dict[str, str]
    earlier: tuple[TraceEvent, ...]
    """The trace up to the crash: earlier incarnations' and the dying runtime's events."""
    observed: tuple[TraceEvent, ...]
    positions: Positions


@dataclass
class Tapped(CommitCoordinator):
    """A commit coordinator that reports each commit just before and just after it."""

    tap: Callable[[str, str], None] = field(default=lambda name, when: None)

    def commit(self, name: str, writes: Sequence[Write]) -> None:
        self.tap(name, "before")
        super().commit(name, writes)
        self.tap(name, "after")


class Steps:
    """A scenario's steps on a reference driver as ``run_scenario`` performs them, knowing
    the outermost step in flight."""

    def __init__(self, scenario: Scenario, driver: ReferenceDriver) -> None:
        self.scenario, self.driver = scenario, driver
        triggers = Triggers(scenario.triggers)
        self.asked = 0
        self.ports: Ports = scripted_ports(scenario, triggers, lambda: self.asked)
        self.triggers = triggers
        self.step, self.began = -1, (0, 0)

    def connect(self) -> None:
        """Let the triggers act on the driver: as ``run_scenario`` does, once the Session is
        open (a trigger firing while it opens acts on nothing)."""
        driver = self.driver
        self.triggers.act = lambda step: perform(driver, step)

    def perform_from(self, first: int) -> None:
        for index in range(first, len(self.scenario.steps)):
            step = self.scenario.steps[index]
            store = self.driver.store
            self.step, self.began = index, (store.count("user_inputs"), store.count("mutations"))
            self.asked += step.ask is not None
            perform(self.driver, step)

    def restartable(self) -> bool:
        return self.step < 0 or restarts(self.scenario.steps[self.step])

    def scripted(self) -> tuple[ScriptedModel, ScriptedTools, ScriptedHooks, ScriptedMoments]:
        model, tools, hooks, moments = (self.ports.model, self.ports.tools, self.ports.hooks,
                                        self.ports.moments)
        assert isinstance(model, ScriptedModel) and isinstance(tools, ScriptedTools)
        assert isinstance(hooks, ScriptedHooks) and isinstance(moments, ScriptedMoments)
        return model, tools, hooks, moments

    def positions(self) -> Positions:
        model, tools, hooks, moments = self.scripted()
        return Positions(dict(model.used), {k: list(v) for k, v in model.operations.items()},
                         dict(model.answered), model.replays, dict(model.requests),
                         dict(tools.calls), dict(hooks.invocations), hooks.asked,
                         dict(moments.seen), self.asked)

    def place(self, at: Positions) -> None:
        """Move fresh ports to where the dead process's ports were (copies: one Remains may
        serve several crashed runs)."""
        model, tools, hooks, moments = self.scripted()
        model.used, model.answered = dict(at.used), dict(at.answered)
        model.operations = {k: list(v) for k, v in at.operations.items()}
        model.replays, model.requests = at.replays, dict(at.requests)
        tools.calls, hooks.invocations = dict(at.tool_calls), dict(at.invocations)
        hooks.asked, moments.seen, self.asked = at.hooks_asked, dict(at.moments), at.asked


def restarts(step: StepDoc) -> bool:
    """ReferenceDriver performs the step again after a crash in it (a crash in another step,
    a stop or a retention or history step, escapes the driver)."""
    return step.ask is not None or step.supplement is not None or step.advance \
        or step.write is not None


class Recorder:
    """Counts the commits of the run-up as a crash plan counts them (over the whole scenario)
    and keeps the remains at each crash point asked for."""

    def __init__(self, steps: Steps, wanted: Collection[Point]) -> None:
        self.steps, self.wanted = steps, wanted
        self.counts: dict[str, int] = {}
        self.kept: dict[Point, Remains] = {}

    def tap(self, name: str, when: str) -> None:
        if when == "before":
            self.counts[name] = self.counts.get(name, 0) + 1
        point = (name, self.counts[name], when)
        if point in self.wanted and self.steps.restartable():
            self.kept[point] = self.remains()

    def remains(self) -> Remains:
        driver, steps = self.steps.driver, self.steps
        store, dying = driver.store, driver.runtime
        return Remains(
            steps.step, steps.began, store.db.conn.serialize(),
            None if store.stored_blobs is None else frozenset(store.stored_blobs),
            driver.clock.now(), dict(driver.agent_workspace),
            (*driver.earlier.events, *(() if dying is None else dying.trace.events)),
            tuple(driver.observed.events), steps.positions())


def crashed_runs(document: Mapping[str, Any], crashes: Sequence[Mapping[str, Any] | None],
                 fresh: Callable[[], object]) -> list[LaterTrace]:
    """For each crash of ``crashes``: a function giving the trace of ``{**document, "crash":
    crash}`` run on a fresh driver of ``fresh`` (for None: of ``document``, the run-up itself),
    or None where the run is not shared. The run-up runs now, each crashed run when its
    function is called (then its remains can go). What the uncrashed run raises goes up: it is
    the document's own run that broke."""
    base, first = parse_scenario(document), fresh()
    if not isinstance(first, ReferenceDriver) or not _shareable(base):
        return [_unshared] * len(crashes)
    scenarios = [None if crash is None else _crashed(document, crash, base)
                 for crash in crashes]
    points = [None if s is None else _point(first, s) for s in scenarios]
    kept, uncrashed = _run_up(first, base, {p for p in points if p is not None})
    traces: list[LaterTrace] = []
    for crash, scenario, point in zip(crashes, scenarios, points, strict=True):
        remains = None if point is None else kept.get(point)
        if crash is None:
            traces.append(functools.partial(_copy, json.dumps(uncrashed)))
        elif scenario is None or remains is None:
            traces.append(_unshared)
        else:
            traces.append(functools.partial(_continued, fresh, scenario, remains, first))
    return traces


def _unshared() -> None:
    return None


def _copy(trace: str) -> list[dict[str, Any]]:
    copied: list[dict[str, Any]] = json.loads(trace)
    return copied


def _shareable(base: Scenario) -> bool:
    """One Session's steps, no crash of its own (workflows and several Sessions run from
    scratch)."""
    return base.workflow is None and base.crash is None and not any(
        step.new_session for step in base.steps)


def _crashed(document: Mapping[str, Any], crash: Mapping[str, Any], base: Scenario
             ) -> Scenario | None:
    """The crashed document, unless its ``crash`` changes what the run-up did: the texts a
    ``content`` estimator counts are the document's."""
    crashed = {**document, "crash": crash}
    try:
        scenario = parse_scenario(crashed)
    except Exception:
        return None
    if base.agent.estimator == "content" and scenario_texts(crashed) != scenario_texts(
            document):
        return None
    return scenario


def _point(driver: ReferenceDriver, scenario: Scenario) -> Point | None:
    """The crash point as the driver's ``configure`` plans it."""
    crash = scenario.crash
    if crash is None or crash.when == "fails":
        return None
    if crash.phase is None:
        return str(crash.commit), crash.occurrence, crash.when
    commit = driver.phase_commits.get(crash.phase)
    return None if commit is None else (commit, crash.occurrence, crash.when)


def _run_up(driver: ReferenceDriver, base: Scenario, wanted: Collection[Point]
            ) -> tuple[dict[Point, Remains], list[dict[str, Any]]]:
    """The uncrashed run, keeping the remains at each wanted point, and its trace."""
    steps = Steps(base, driver)
    recorder = Recorder(steps, wanted)
    driver.coordinator = lambda store: Tapped(store, tap=recorder.tap)
    driver.configure(base, steps.ports)
    steps.connect()
    steps.perform_from(0)
    trace: list[dict[str, Any]] = json.loads(json.dumps(driver.trace(), default=str))
    return recorder.kept, trace


def _continued(fresh: Callable[[], object], scenario: Scenario, remains: Remains,
               first: ReferenceDriver) -> list[dict[str, Any]] | None:
    """The crashed run from its crash point on, as ReferenceDriver restarts: None if it
    raised (the run from scratch then reports what it saw) or ``fresh`` gave no fresh
    reference driver."""
    try:
        driver = fresh()
        if not isinstance(driver, ReferenceDriver) or driver is first:
            return None
        steps = Steps(scenario, driver)
        steps.place(remains.positions)
        driver._prepare(scenario, steps.ports)
        driver.store = _store(remains)
        for _ in range(remains.now):
            driver.clock.tick()
        driver.agent_workspace = dict(remains.workspace)
        driver.earlier, driver.observed = Trace([*remains.earlier]), Trace([*remains.observed])
        if remains.step >= 0:  # the restart of a step; else of the opening, still unconnected
            steps.connect()
        driver._restart()
        steps.connect()
        if remains.step >= 0:
            _again(driver, scenario.steps[remains.step], remains.began)
        steps.perform_from(remains.step + 1)
        trace: list[dict[str, Any]] = json.loads(json.dumps(driver.trace(), default=str))
    except Exception:
        return None
    return trace


def _store(remains: Remains) -> Store:
    store = Store()
    store.db.conn.deserialize(remains.image)
    store.stored_blobs = None if remains.blobs is None else set(remains.blobs)
    return store


def _again(driver: ReferenceDriver, step: StepDoc, began: tuple[int, int]) -> None:
    """The interrupted step performed again, as ReferenceDriver does after a restart: an
    input or a write the dead runtime never committed is sent again, an ``advance`` is
    performed again."""
    inputs, written = began
    if step.write is not None:
        unsent = driver.store.count("mutations") == written
    elif step.ask is not None or step.supplement is not None:
        unsent = driver.store.count("user_inputs") == inputs
    else:
        unsent = True
    if unsent:
        perform(driver, step)


__all__ = ["Positions", "Remains", "crashed_runs"]
