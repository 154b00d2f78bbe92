"""A takeover at each step boundary of the role's loop resumes from the persisted position alone
(§10 "回到模型前、工具等待或反馈消费等明确边界"; issue #34).

The cases are generated, not written one per step: each worked example runs once uncrashed with
every step of the loop logged (the stage it was given, the position it handed on, the commits
it made itself); every step that committed is a boundary — its last commit — and docs/
architecture.md's step table must name that commit for the stage the step reached. Then, for
each boundary, the example runs again with a crash just after that commit, and the takeover
must load the position the step committed and run exactly the steps the uncrashed Run had left:
the steps it was nested in (a Planner's batch member, which re-enters its Executor), then the
rest. Two differences are the design's own: a step that handed on more than it committed (a
member settled without a post-call hook) is run again from what it committed, and an attempt's
outcome, which lived only in the process that died, is asked again (§10, the answer in
flight; docs/recovery.md, T_FIRST_OUTPUT).
"""

import copy
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from ctxspec.conformance.case import example
from ctxspec.conformance.cases import by_id
from ctxspec.conformance.driver import ReferenceDriver
from ctxspec.conformance.harness import scenario_trace
from ctxspec.conformance.phases import REFERENCE_COMMITS
from ctxspec.reference.contracts import NodeCheckpoint
from ctxspec.reference.runtime.node_driver import NodeDriver
from ctxspec.reference.runtime.session import Crash, SessionState
from tests.test_role_loop import ARCHITECTURE

PHASE_OF = {commit: phase for phase, commit in REFERENCE_COMMITS.items()}
EXAMPLES = ("tool-batch-hook", "compaction-three-chunks-window-exceeded",
            "supplements-across-runs", "planner-two-executors", "EX8-ROW1")
"""The worked examples, and the §8 table's first row (a case's scenario): an episode of one
chunk after which the compacted request is frozen and answered, where the three-chunk example
ends at the hard window."""
EPISODE = ("prepared", "compacting", "summarised", "compacted")
"""The stages from a prepared request through its compaction episode to its freeze."""
COMPACTING = ("compaction-three-chunks-window-exceeded", "EX8-ROW1")
LOST_WITH_THE_PROCESS = {"answered": ["save_answer", "ask_model"]}
"""What a takeover runs again at a stage whose step's input lived only in memory: the
answered position finds no outcome and hands the frozen one on, whose attempt is asked
again (the table's ``answered`` row)."""


@dataclass
class StepRun:
    """One step the loop ran: its role, name, the position it was given and the one it handed
    on (None: the role ended), the commits it made itself (name, occurrence over the scenario),
    and where it sits among the steps (its index, its enclosing steps, its last descendant)."""

    session: int
    role: str
    step: str
    given: dict[str, Any]
    reached: dict[str, Any] | None = None
    commits: list[tuple[str, int]] = field(default_factory=list)
    index: int = 0
    enclosing: tuple[int, ...] = ()
    last_descendant: int = 0


@dataclass
class Log:
    runs: list[StepRun] = field(default_factory=list)
    stack: list[int] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)
    sessions: dict[int, int] = field(default_factory=dict)
    crashed_at: int | None = None
    """How many steps had started when the planned crash came."""


def _position(position: NodeCheckpoint) -> dict[str, Any]:
    return position.model_dump(mode="json", exclude={"tick"})


@pytest.fixture
def log(monkeypatch: pytest.MonkeyPatch) -> Iterator[Log]:
    """Every step of the loop and every commit it makes itself, as each still runs."""
    seen = Log()
    for name in set(NodeDriver.STEPS.values()):
        original = getattr(NodeDriver, name)

        def logged(self: NodeDriver, run: Any, position: NodeCheckpoint,
                   _name: str = name, _original: Any = original) -> Any:
            incarnation = seen.sessions.setdefault(id(self.s), len(seen.sessions))
            entry = StepRun(incarnation, f"{run.role}:{run.context_id}", _name,
                            _position(position), index=len(seen.runs),
                            enclosing=tuple(seen.stack))
            seen.runs.append(entry)
            seen.stack.append(entry.index)
            try:
                reached = _original(self, run, position)
            finally:
                seen.stack.pop()
                entry.last_descendant = len(seen.runs) - 1
            entry.reached = None if reached is None else _position(reached)
            return reached
        monkeypatch.setattr(NodeDriver, name, logged)
    commit = SessionState.commit

    def counted(self: SessionState, name: str, writes: Any, **how: Any) -> None:
        try:
            commit(self, name, writes, **how)
        except Crash:
            seen.crashed_at = len(seen.runs)
            raise
        seen.counts[name] += 1
        if seen.stack:
            seen.runs[seen.stack[-1]].commits.append((name, seen.counts[name]))
    monkeypatch.setattr(SessionState, "commit", counted)
    yield seen


def _table() -> dict[str, tuple[str, dict[str, frozenset[str]]]]:
    """docs/architecture.md's step table: stage → (its step, the stages it reaches → the commits
    that persist each)."""
    text = ARCHITECTURE.read_text("utf-8")
    start = text.index("| stage (`NodeStage`) | step (`NodeDriver.STEPS`)")
    table: dict[str, tuple[str, dict[str, frozenset[str]]]] = {}
    for line in text[start:].splitlines()[2:]:
        if not line.startswith("|"):
            break
        stages, step, _, reaches = (cell.strip() for cell in line.strip("|").split("|"))
        persisted = {stage: frozenset(re.findall(r"\b[A-Z][A-Z_-]+[A-Z]\b", commits))
                     for stage, commits in re.findall(r"`(\w+)` \(([^)]*)\)", reaches)}
        for stage in re.findall(r"`(\w+)`", stages):
            table[stage] = (step.strip("`"), persisted)
    return table


def _run(name: str, log: Log, crash: tuple[str, int] | None = None) -> list[StepRun]:
    log.runs.clear()
    log.counts.clear()
    log.sessions.clear()
    log.crashed_at = None
    document = copy.deepcopy(dict(by_id([name])[0].scenario)) if name.isupper() \
        else example(name)
    if crash is not None:
        document["crash"] = {"phase": PHASE_OF[crash[0]], "occurrence": crash[1],
                             "when": "after"}
    scenario_trace(ReferenceDriver(), document)
    return list(log.runs)


def _boundaries(runs: list[StepRun]) -> list[StepRun]:
    """The steps that committed, each checked against the table: its last commit persists the
    stage it reached (or, ending the role, is the Run's ending)."""
    table = _table()
    found = []
    for run in runs:
        if not run.commits:
            continue
        stage = run.given["stage"]
        step, persisted = table[stage]
        assert run.step == step, f"at {stage} the loop ran {run.step}, the table says {step}"
        commit = run.commits[-1][0]
        if run.reached is None:
            assert commit == "APP-FINALIZE", f"{run.step} ended the role with {commit}"
        else:
            reached = run.reached["stage"]
            assert commit in persisted.get(reached, ()), (
                f"{run.step} reached {reached} with {commit}; the table says "
                f"{sorted(persisted.get(reached, ()))}")
        found.append(run)
    return found


def _differences(seen: dict[str, Any] | None, expected: dict[str, Any] | None) -> str:
    """The fields of a position that differ, expected and seen."""
    if seen is None or expected is None:
        return f"expected {expected}, saw {seen}"
    return "; ".join(f"{key}: expected {expected.get(key)!r}, saw {seen.get(key)!r}"
                     for key in sorted(set(seen) | set(expected))
                     if seen.get(key) != expected.get(key))


def _expected_after(runs: list[StepRun], boundary: StepRun, persisted: bool) -> list[str]:
    """The steps a takeover just after ``boundary`` must run: the steps it was nested in, that
    step again if it handed on more than it committed, what the process lost, the rest."""
    again = [] if persisted else [boundary.step]
    lost = LOST_WITH_THE_PROCESS.get(boundary.reached["stage"], []) \
        if boundary.reached is not None and persisted else []
    rest = [r.step for r in runs[boundary.last_descendant + 1:]]
    return [runs[i].step for i in boundary.enclosing] + again + lost + rest


def _taken_over(name: str, log: Log, boundary: StepRun, runs: list[StepRun]) -> None:
    crashed = _run(name, log, boundary.commits[-1])
    assert log.crashed_at is not None, f"no crash at {boundary.commits[-1]}"
    after = crashed[log.crashed_at:]
    first = next((r for r in after if r.role == boundary.role), None)
    persisted = boundary.reached is None or first is None or first.given == boundary.reached
    if boundary.reached is not None and first is not None and not persisted:
        # Handed on more than it committed: the takeover runs the same step again from the
        # stage it committed, and that step reaches the very position the uncrashed one did.
        assert first.step == boundary.step and first.given["stage"] in (
            boundary.given["stage"], boundary.reached["stage"]), (first.step, first.given)
        assert first.reached == boundary.reached, (
            f"{boundary.step} again after a crash at {boundary.commits[-1]}: "
            f"{_differences(first.reached, boundary.reached)}")
    assert [r.step for r in after] == _expected_after(runs, boundary, persisted), (
        f"after a crash at {boundary.commits[-1]} ({boundary.step}): "
        f"{[r.step for r in after]}")


@pytest.mark.parametrize("name", [pytest.param(EXAMPLES[0], id=EXAMPLES[0]),
                                  *(pytest.param(n, id=n, marks=pytest.mark.slow)
                                    for n in EXAMPLES[1:])])
def test_a_takeover_at_each_step_boundary_resumes_from_its_position(name: str, log: Log
                                                                    ) -> None:
    runs = _run(name, log)
    boundaries = _boundaries(runs)
    assert boundaries, "the example passes no step boundary"
    for boundary in boundaries:
        _taken_over(name, log, boundary, runs)


def test_every_boundary_of_the_episode_is_a_takeover_point(log: Log) -> None:
    # Issue #34: a compaction episode is steps of the loop, each a boundary a takeover resumes
    # at. Every position docs/architecture.md's table says an episode's step reaches is one
    # some scenario's step commits, so the takeovers above are generated at each of them.
    table = _table()
    documented = {(stage, reached) for stage in EPISODE for reached in table[stage][1]}
    seen = {(boundary.given["stage"], boundary.reached["stage"])
            for name in COMPACTING for boundary in _boundaries(_run(name, log))
            if boundary.reached is not None and boundary.given["stage"] in EPISODE}
    assert seen == documented, (f"episode boundaries the scenarios never reach: "
                                f"{sorted(documented - seen)}; not in the table: "
                                f"{sorted(seen - documented)}")
