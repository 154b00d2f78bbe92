"""The role's one loop (§10 "回到模型前、工具等待或反馈消费等明确边界"; issue #34): its position
is a persisted NodeCheckpoint, each stage runs one step, and a takeover enters the same loop at
the stage it loaded — no separate continuation path. The expected step sequences are read off
the design's Loop (request → raw result saved → effective result → post-response chain → the
decided answer's batch and feedback → the next Loop), not off the runtime."""

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
# One Loop of the design, as its steps: the request up to its saved answer, the answer's
# effective record, its post-response chain, the decided answer (its batch, or the ending).
LOOP = ["next_loop", "effective_result", "post_response", "settle_batch"]


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
    assert steps == LOOP + LOOP


@pytest.mark.parametrize(("plan", "taken_up", "model_calls"), [
    # The raw answer saved: its effective record next; the model is not asked again (1 + 1).
    (CrashPlan("RAW_RESULT_SAVED", 1, "after"), LOOP[1:], 2),
    # The effective record saved: the post-response chain next.
    (CrashPlan("EFFECTIVE_RESULT", 1, "after"), LOOP[2:], 2),
    # A member settled: the batch goes on from its position.
    (CrashPlan("TOOL_SETTLED", 1, "after"), LOOP[3:], 2),
    # The feedback committed: the next Loop, nothing of the first one again.
    (CrashPlan("BATCH_FEEDBACK", 1, "after"), [], 2),
    # Frozen and answered, the answer never saved: the same request asked again (1 + 1 + 1).
    (CrashPlan("T_FIRST_OUTPUT", 1, "after"), ["request_again", *LOOP[1:]], 3),
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
    assert steps[before:] == taken_up + LOOP
    assert len(ports.model_calls) == model_calls, ports.model_calls
    assert [e.status for e in second.trace.of(RunEnded)] == ["succeeded"]
