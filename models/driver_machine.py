"""A driver-level Hypothesis model: random Sessions played on any Driver, judged from the neutral
trace alone (§2 orderings, §4 and §5 protected inputs, §6 tool protocol, §7 hard window, §10
recovery, §11 stop).

An initialize rule draws a setup (models/driver_scripts.py: tiny to large windows measured
with the ``chars`` estimator, Planners with Executors, hooks at every hook point of a Session,
triggers at every moment, crash plans at every phase, a ``focus`` weighing it toward one part
of the design);
each rule then plays one Run and what surrounds it (waiting supplements, idle stops, another
Session, the question, supplements, a stop, the advance), one step at a time on a live driver
(``conformance.driver.perform``). The scripted ports never run out: they repeat their pattern
on demand, and what they handed out is written into the scenario document, so the document
replays exactly. What each run reached is counted in ``reached`` (models/driver_coverage.py).

After every step the trace is read back as plain JSON and checked, with expectations derived
from the steps and the scripts — never from the driver's store or internals:

- the trace only grows: what was shown of an earlier request never changes (the events after
  step k are a prefix of those after step k+1; a restarted incarnation appends a ``restarted``
  marker and its own events after the dead one's, which stay as they were);
- raw facts stay raw: every user_ref message shows the text of an input exactly as sent, one
  input id always the same text; a tool runs with the arguments the model proposed unless a
  pre-call hook is registered;
- protected inputs: every business request shows, as user_ref messages in receive order and
  each once, the current Run's question and every supplement bound to the Run up to the
  request's cutoff — received while it was active, waiting for its question, or carried from a
  Run that never delivered it (a supplement is delivered by a request whose answer produced
  output) — and its protected input list is exactly those;
- tool protocol (§6): every tool result follows its call, every call shown in a request has
  exactly one result or placeholder after it, in action order;
- the hard window (§7): I + max_output_tokens + S ≤ W for every request, with the window,
  reserve and margin the Agent configured and I at least the characters the request shows;
- nothing fetched twice: no (purpose_key, attempt) asked twice, except the one answer in flight
  at a LOST_ANSWER crash point (conformance/crash_matrix.py), asked again after the restart;
  no call executed twice, no tool executed more often than the answered requests proposed it;
- orderings: run_seq strictly increasing per Run within an incarnation; input_cutoff (the only
  input_seq the trace shows) never decreasing, at least the Run's question, at most the inputs
  received; input_seq itself and context_seq are not in the trace (docs/models.md);
- Runs: each advance ends its Run; a stopped Run sends no request and ends ``stopped``; at most
  the planned restart, where the plan put it.

When a check fails (or the driver raises), the scenario built so far is written to a file named
in the failure (``$CTXSPEC_COUNTEREXAMPLES`` or the temporary directory); ``ctxspec replay
FILE`` shows it on the reference runtime and :func:`replay_checked` re-judges it on any driver.
"""

import json
import os
import tempfile
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from hypothesis import HealthCheck, reject
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, rule

from ctxspec import catalogue
from ctxspec.conformance.driver import Driver, Ports, ReferenceDriver, perform
from ctxspec.conformance.estimator import estimator_for
from ctxspec.conformance.scenario import (
    ModelDoc,
    Scenario,
    ScriptedHooks,
    ScriptedModel,
    ScriptedMoments,
    ScriptedTools,
    StepDoc,
    ToolResultDoc,
    TriggerDoc,
    Triggers,
    parse_scenario,
)
from ctxspec.models.driver_coverage import coverage
from ctxspec.models.driver_judge import DriverViolation, Judge, Trace
from ctxspec.models.driver_scripts import BODIES, NAME, setups
from ctxspec.models.driver_twin import comparable, compare, player
from ctxspec.reference.ports import ModelCall, ModelOutcome, ToolOutcome
from ctxspec.reference.registry import JSON

DriverFactory = Callable[[], Driver]
Tolerance = Callable[[Mapping[str, Any], str], bool]
"""A known, reported defect of the driver under test: given the scenario and the problem, whether
this failure is that defect (the example is then discarded, not passed)."""

STEPS = 8
"""Rules per example: each rule plays one Run and what surrounds it on the runtime under test
(a few steps each), so they are few. How many examples run is the Hypothesis profile's choice
(tests/conftest.py; tests/test_driver_machine.py divides them among the focuses); a runtime's
own test sets its own settings."""
HEALTH = [HealthCheck.too_slow, HealthCheck.data_too_large]
"""Health checks to suppress: a Session is slow to build and its scenario is large."""

NO_STEPS = [{"stop": True}]
"""A document needs a step: a failure while configuring is saved with a stop, which does nothing
while no Run is active."""




# --- ports that never run out -----------------------------------------------------------------


class EndlessModel(ScriptedModel):
    """A ScriptedModel that repeats each purpose's pattern whenever the next answer is asked for,
    so a Session of any length has one; the lists then hold exactly what was handed out."""

    def __init__(self, scenario: Scenario, triggers: Triggers) -> None:
        super().__init__(scenario.model, triggers)
        self.patterns = {key: list(queue) for key, queue in self.script.items()}

    def call(self, request: ModelCall) -> ModelOutcome:
        for key, queue in self.script.items():
            pattern = self.patterns[key]
            while pattern and len(queue) <= self.used[key]:
                queue.append(pattern[len(queue) % len(pattern)])
        return super().call(request)


class EndlessTools(ScriptedTools):
    def __init__(self, scenario: Scenario, triggers: Triggers) -> None:
        super().__init__(scenario.tools, triggers)
        self.patterns = {name: list(results) for name, results in self.script.items()}

    def run(self, name: str, arguments: Mapping[str, JSON], ordinal: int) -> ToolOutcome:
        queue, pattern = self.script.get(name), self.patterns.get(name)
        if queue is not None and pattern:
            while len(queue) <= self.calls.get(name, 0):
                queue.append(pattern[len(queue) % len(pattern)])
        return super().run(name, arguments, ordinal)


class CountedTriggers(Triggers):
    """The scenario's triggers, noting where each one that fires fired (a request of a purpose,
    a tool run, a moment of the loop) for the coverage table."""

    def __init__(self, triggers: Sequence[TriggerDoc]) -> None:
        super().__init__(triggers)
        self.where = ""

    def fire(self, *, purpose: str | None = None, tool: str | None = None,
             moment: str | None = None, ordinal: int) -> None:
        self.where = f"{purpose} request" if purpose is not None else \
            "tool run" if tool is not None else f"moment {moment}"
        super().fire(purpose=purpose, tool=tool, moment=moment, ordinal=ordinal)


def endless_ports(document: Mapping[str, Any]) -> tuple[Scenario, Ports, Triggers]:
    """A document's scenario and ports that repeat its patterns on demand (its twin's)."""
    scenario = parse_scenario(document)
    triggers = Triggers(scenario.triggers)
    return scenario, Ports(EndlessModel(scenario, triggers), EndlessTools(scenario, triggers),
                           ScriptedHooks(scenario.hooks, triggers),
                           estimator_for(scenario, scenario.agent),
                           ScriptedMoments(triggers)), triggers


def _dump(docs: Sequence[ModelDoc | ToolResultDoc]) -> list[dict[str, Any]]:
    return [doc.model_dump(mode="json", exclude_defaults=True) for doc in docs]


# --- the machine ------------------------------------------------------------------------------


def counterexample_path(driver: object) -> Path:
    directory = Path(os.environ.get("CTXSPEC_COUNTEREXAMPLES")
                     or Path(tempfile.gettempdir()) / "ctxspec-counterexamples")
    return directory / f"{NAME}-{type(driver).__name__}.json"


@catalogue.covers(
    "CTX-1.9", "CTX-2.2", "CTX-2.3", "CTX-2.7", "CTX-2.27", "CTX-2.29", "CTX-3.57", "CTX-4.18",
    "CTX-5.1", "CTX-5.5", "CTX-5.24", "CTX-5.30", "CTX-6.1", "CTX-6.2", "CTX-6.3", "CTX-6.4",
    "CTX-6.7", "CTX-7.13", "CTX-7.24", "CTX-10.6", "CTX-10.9", "CTX-10.17")
class DriverMachine(RuleBasedStateMachine):
    """Random Sessions on a live driver; ``factory`` builds it (the reference by default).
    ``reached`` counts the coverage rows (models/driver_coverage.py) over every example run."""

    factory: DriverFactory = ReferenceDriver
    tolerated: tuple[Tolerance, ...] = ()
    reached: ClassVar[Counter[str]] = Counter()

    def __init__(self) -> None:
        super().__init__()
        self.driver: Driver | None = None
        self.judge = Judge({})
        self.count = 0
        self.sessions = 1
        self.fired: list[tuple[str, StepDoc]] = []
        """Each step a trigger performed, with where the trigger fired."""
        self.failed = False

    @initialize(document=setups())
    def configure(self, document: dict[str, Any]) -> None:
        scenario = parse_scenario({**document, "steps": NO_STEPS})
        triggers = self.triggers = CountedTriggers(scenario.triggers)
        self.model, self.tools = EndlessModel(scenario, triggers), EndlessTools(scenario, triggers)
        self.document = document
        self.judge = Judge(document)
        self.driver = type(self).factory()
        driver = self.driver
        self._guarded("configure", lambda: driver.configure(scenario, Ports(
            self.model, self.tools, ScriptedHooks(scenario.hooks, triggers),
            estimator_for(scenario, scenario.agent), ScriptedMoments(triggers))))
        triggers.act = self._triggered
        self._judge()

    def _triggered(self, step: StepDoc) -> None:
        """A trigger fired inside the step being performed: perform its step and list it."""
        assert self.driver is not None
        self.fired.append((self.triggers.where, step))
        driver = self.driver
        try:
            perform(driver, step)
        finally:  # also when the process dies inside it: its input was received
            self.judge.triggered_step(step, len(driver.trace()))

    def scenario(self) -> dict[str, Any]:
        """The document built so far, with the answers the ports handed out: it replays."""
        document = dict(self.document)
        document["steps"] = [s.model_dump(exclude_defaults=True)
                             for s in self.judge.performed()] or NO_STEPS
        document["model"] = {key: _dump(queue) for key, queue in self.model.script.items()
                             if queue or key != "executor"}
        document["tools"] = {name: _dump(queue) for name, queue in self.tools.script.items()}
        return document

    def _save(self, problem: str) -> None:
        self.failed = True
        if any(known(self.scenario(), problem) for known in type(self).tolerated):
            type(self).reached["discarded (tolerated)"] += 1
            reject()
        path = counterexample_path(self.driver)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.scenario(), indent=1, ensure_ascii=False) + "\n",
                        "utf-8")
        raise DriverViolation(f"{problem}\nthe scenario is saved in {path}: `ctxspec replay "
                              f"{path}` shows it on the reference runtime; "
                              f"models.driver_machine.replay_checked re-judges it on a driver")

    def _guarded(self, what: str, action: Callable[[], object]) -> None:
        try:
            action()
        except Exception as error:  # the driver broke: as much a finding as a violation
            self._save(f"the driver raised {error!r} in {what}")

    def _judge(self) -> None:
        assert self.driver is not None
        trace: Trace = json.loads(json.dumps(self.driver.trace(), default=str))
        self.judge.marks.append(len(trace))
        self.judge.document = self.scenario()  # with the answers handed out so far
        try:
            self.judge.check(trace)
        except DriverViolation as violation:
            self._save(str(violation))

    def _step(self, step: StepDoc) -> None:
        driver = self.driver
        assert driver is not None
        self.judge.steps.append(step)
        self._guarded(f"step {len(self.judge.steps)}", lambda: perform(driver, step))
        self._judge()

    def teardown(self) -> None:
        if self.driver is None or not self.judge.marks:
            return
        trace: Trace = json.loads(json.dumps(self.driver.trace(), default=str))
        if not self.failed and comparable(self.document, trace):
            # §10: the same Session without the crash, on a fresh driver of the same factory.
            twin = {**self.document, "steps": [s.model_dump(exclude_defaults=True)
                                               for s in self.judge.performed()] or NO_STEPS}
            difference = compare(twin, trace, player(type(self).factory, endless_ports))
            type(self).reached["crashed Session compared with its twin"] += 1
            if difference is not None:
                self._save(difference)
        type(self).reached["budget regained after a takeover (issue #34, not judged)"] += \
            len(self.judge.notes.regained)
        type(self).reached.update(coverage(
            self.document, trace,
            [(on, "stop" if s.stop else "write" if s.write else "supplement")
             for on, s in self.fired],
            len(self.judge.performed())))

    def _text(self, tag: str, body: str) -> str:
        self.count += 1
        return f"{tag}{self.count}: {body}"

    @rule(before=st.lists(st.sampled_from(["supplement", "stop", "new_session"]), max_size=2),
          waiting=st.lists(BODIES, max_size=2), question=BODIES,
          during=st.lists(BODIES, max_size=2), stop=st.sampled_from([False] * 5 + [True]))
    def run(self, before: list[str], waiting: list[str], question: str, during: list[str],
            stop: bool) -> None:
        """One Run and what surrounds it: first, while no Run is active, supplements that wait
        for the question (§5), a stop that stops nothing, or another Session (§10, at most
        three); then the question, supplements while it is active, sometimes a stop (the Run
        then ends stopped, §11), and the advance that runs it to its end. One rule per Run keeps
        every example a Session of Runs (Hypothesis switches whole rules off per example)."""
        bodies = iter(waiting)
        for kind in before:
            if kind == "supplement":
                self._step(StepDoc(supplement=self._text("S", next(bodies, "waiting"))))
            elif kind == "stop":
                self._step(StepDoc(stop=True))
            elif self.sessions < 3:
                self.sessions += 1
                self._step(StepDoc(new_session=True))
        self._step(StepDoc(ask=self._text("Q", question)))
        for body in during:
            self._step(StepDoc(supplement=self._text("S", body)))
        if stop:
            self._step(StepDoc(stop=True))
        self._step(StepDoc(advance=True))


def machine(factory: DriverFactory, tolerated: Sequence[Tolerance] = (),
            focus: str = "mixed") -> type[DriverMachine]:
    """The machine driving drivers made by ``factory`` (its TestCase runs it under pytest),
    discarding the examples that hit a ``tolerated`` known defect, its setups weighed toward
    ``focus`` (models/driver_scripts.py FOCUSES); its ``reached`` counts the coverage rows of
    its own runs."""
    name = getattr(factory, "__name__", "Driver")

    @initialize(document=setups(focus))
    def configure(self: DriverMachine, document: dict[str, Any]) -> None:
        DriverMachine.configure(self, document)

    return type(f"DriverMachine[{name}, {focus}]", (DriverMachine,),
                {"factory": staticmethod(factory), "tolerated": tuple(tolerated),
                 "reached": Counter(), "configure": configure})


def replay_checked(document: Mapping[str, Any],
                   factory: DriverFactory = ReferenceDriver) -> Trace:
    """Play a saved scenario on a driver step by step, judging the trace after every step as the
    machine does; raises DriverViolation at the first broken invariant, else returns the trace.
    The saved answers are exactly those handed out, so plain scripted ports replay them."""
    scenario = parse_scenario(document)
    triggers = Triggers(scenario.triggers)
    driver = factory()
    driver.configure(scenario, Ports(ScriptedModel(scenario.model, triggers),
                                     ScriptedTools(scenario.tools, triggers),
                                     ScriptedHooks(scenario.hooks, triggers),
                                     estimator_for(scenario, scenario.agent),
                                     ScriptedMoments(triggers)))
    judge = Judge(document)
    trace: Trace = []

    def triggered(step: StepDoc) -> None:
        try:
            perform(driver, step)
        finally:
            judge.triggered_step(step, len(driver.trace()))

    triggers.act = triggered

    def judged() -> None:
        nonlocal trace
        trace = json.loads(json.dumps(driver.trace(), default=str))
        judge.marks.append(len(trace))
        judge.check(trace)

    judged()
    for step in scenario.steps:
        judge.steps.append(step)
        perform(driver, step)
        judged()
    if comparable(document, trace):
        difference = compare(document, trace, player(factory, endless_ports))
        if difference is not None:
            raise DriverViolation(difference)
    return trace


__all__ = ["HEALTH", "NAME", "STEPS", "DriverMachine", "DriverViolation", "EndlessModel",
           "EndlessTools", "Judge", "counterexample_path", "machine", "replay_checked",
           "setups"]
