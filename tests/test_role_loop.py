"""The role's one loop (§10 "回到模型前、工具等待或反馈消费等明确边界"; issue #34): its position
is a persisted NodeCheckpoint, each stage runs one step, and a takeover enters the same loop at
the stage it loaded — no separate continuation path. The expected step sequences are read off
the design's Loop (request → raw result saved → effective result → post-response chain → the
decided answer's batch and feedback → the next Loop), not off the runtime."""

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ctxspec.conformance.driver_config import agent_config
from ctxspec.conformance.estimator import CharEstimator
from ctxspec.reference.contracts import NodeCheckpoint, NodeStage
from ctxspec.reference.ports import LogicalClock
from ctxspec.reference.runtime.node_driver import NodeDriver
from ctxspec.reference.runtime.ownership import HARNESS
from ctxspec.reference.runtime.restore import restore
from ctxspec.reference.runtime.runtime import Crash, CrashPlan
from ctxspec.reference.runtime.store import Store
from ctxspec.reference.runtime.trace import RunEnded
from tests.test_recovery import Counting, scenario, start

ASK = "Write the report and read my notes."
# One Loop of the design, as its steps: the request prepared (its pre-request chain), fitted
# and frozen (T_FREEZE), its attempt asked, its answer saved (RAW_RESULT_SAVED), the answer's
# effective record, its post-response chain, the decided answer (its batch, or the ending).
ANSWERED = ["next_loop", "fit_request", "ask_model", "save_answer", "effective_result",
            "post_response"]
# The decided answer's batch, one member a step, then its feedback; a final answer ends the Run.
BATCH = ["settle_batch", "settle_batch", "settle_batch"]
LOOP = ANSWERED + BATCH  # the first Loop: a batch of two calls
FINAL = [*ANSWERED, "settle_batch"]


@pytest.fixture
def steps(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The step methods the loop ran, in order (each still runs as it is)."""
    ran: list[str] = []
    for name in set(NodeDriver.STEPS.values()):
        original = getattr(NodeDriver, name)

        def logged(self: NodeDriver, run: Any, position: NodeCheckpoint,
                   _name: str = name, _original: Any = original) -> Any:
            ran.append(_name)
            return _original(self, run, position)
        monkeypatch.setattr(NodeDriver, name, logged)
    yield ran


def test_every_stage_has_its_step() -> None:
    assert set(NodeDriver.STEPS) == set(NodeStage)
    assert all(callable(getattr(NodeDriver, name)) for name in NodeDriver.STEPS.values())


def test_a_new_run_goes_loop_by_loop_through_the_steps(steps: list[str],
                                                       tmp_path: Path) -> None:
    # The scenario: a batch of two calls, then a final answer — two Loops.
    runtime = start(Store(tmp_path / "s.db"), Counting(scenario()), None, LogicalClock())
    runtime.ask(ASK)
    runtime.advance()
    assert steps == LOOP + FINAL


@pytest.mark.parametrize(("plan", "taken_up", "model_calls"), [
    # The raw answer saved: its effective record next; the model is not asked again (1 + 1).
    (CrashPlan("RAW_RESULT_SAVED", 1, "after"), LOOP[4:], 2),
    # The effective record saved: the post-response chain next.
    (CrashPlan("EFFECTIVE_RESULT", 1, "after"), LOOP[5:], 2),
    # A member's raw result saved: that member's step again (its post-call chain), then the
    # other member and the feedback.
    (CrashPlan("TOOL_SETTLED", 1, "after"), LOOP[6:], 2),
    # The second member settled: only the feedback is left of the batch.
    (CrashPlan("TOOL_SETTLED", 2, "after"), LOOP[7:], 2),
    # The feedback committed: the next Loop, nothing of the first one again.
    (CrashPlan("BATCH_FEEDBACK", 1, "after"), [], 2),
    # Frozen and answered, the answer never saved: the same request asked again (1 + 1 + 1)
    # from the answered position, which finds no outcome and hands the frozen one on.
    (CrashPlan("T_FIRST_OUTPUT", 1, "after"), ["save_answer", *LOOP[2:]], 3),
])
def test_a_takeover_enters_the_same_loop_at_its_stored_stage(
        plan: CrashPlan, taken_up: list[str], model_calls: int, steps: list[str],
        tmp_path: Path) -> None:
    store = Store(tmp_path / "crash.db")
    ports, clock = Counting(scenario()), LogicalClock()
    first = start(store, ports, plan, clock)
    with pytest.raises(Crash):
        first.ask(ASK)
        first.advance()
    before = len(steps)
    second = restore(store, agent_config(scenario().agent), model=ports, tools=ports,
                     hooks=ports, estimator=CharEstimator(), clock=clock, lease=HARNESS)
    second.advance()
    # The rest of the first Loop from the stored stage, then the final Loop: the same steps
    # as a Run that never stopped.
    assert steps[before:] == taken_up + FINAL
    assert len(ports.model_calls) == model_calls, ports.model_calls
    assert [e.status for e in second.trace.of(RunEnded)] == ["succeeded"]


ARCHITECTURE = Path(__file__).resolve().parents[1] / "docs" / "architecture.md"


def _documented_table() -> dict[str, tuple[str, frozenset[str]]]:
    """docs/architecture.md's step table, "The role's loop": each stage → (its step, the stages
    the step may reach, none for an ending)."""
    text = ARCHITECTURE.read_text("utf-8")
    start = text.index("| stage (`NodeStage`) | step (`NodeDriver.STEPS`)")
    table: dict[str, tuple[str, frozenset[str]]] = {}
    for line in text[start:].splitlines()[2:]:
        if not line.startswith("|"):
            break
        stages, step, _, reaches = (cell.strip() for cell in line.strip("|").split("|"))
        reached = frozenset(re.findall(r"`(\w+)`", reaches))
        for stage in re.findall(r"`(\w+)`", stages):
            table[stage] = (step.strip("`"), reached)
    return table


def test_the_documented_step_table_is_the_flow_of_a_traced_run(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # Issue #34: the page's table is checked against what a Run does, step by step — each
    # step run is the one the table names for the stage it was given, and the position it
    # hands on is the stage the table says it reaches.
    table = _documented_table()
    assert set(table) == {stage.value for stage in NodeStage}, "a stage the page leaves out"
    assert {stage: step for stage, (step, _) in table.items()} == {
        stage.value: step for stage, step in NodeDriver.STEPS.items()}
    seen: list[tuple[str, str, str | None]] = []
    for name in set(NodeDriver.STEPS.values()):
        original = getattr(NodeDriver, name)

        def logged(self: NodeDriver, run: Any, position: NodeCheckpoint,
                   _name: str = name, _original: Any = original) -> Any:
            reached = _original(self, run, position)
            seen.append((position.stage.value, _name,
                         None if reached is None else reached.stage.value))
            return reached
        monkeypatch.setattr(NodeDriver, name, logged)
    runtime = start(Store(tmp_path / "s.db"), Counting(scenario()), None, LogicalClock())
    runtime.ask(ASK)
    runtime.advance()
    assert len(seen) == len(LOOP) + len(FINAL), seen
    for stage, step, reached in seen[:-1]:
        documented_step, documented_reach = table[stage]
        assert step == documented_step, f"at {stage} the run took {step}, the page says " \
                                        f"{documented_step}"
        assert reached in documented_reach, (
            f"{step} reached {reached}, the page says one of {sorted(documented_reach)}")
    # The last step ends the Run; each other step hands on the stage the next one is run at.
    assert seen[-1][2] is None
    assert [reached for _, _, reached in seen[:-1]] == [stage for stage, _, _ in seen[1:]]
