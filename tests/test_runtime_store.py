"""The reference runtime writes every fact through the CommitCoordinator, one named commit per
step of the design, and a failed commit stops the runtime instead of going on with a value
storage does not have (§3, §10)."""

import json
from pathlib import Path
from typing import Any

import pytest

from ctxspec.conformance.driver import Ports
from ctxspec.conformance.estimator import ESTIMATORS
from ctxspec.conformance.scenario import (
    ScriptedHooks,
    ScriptedModel,
    ScriptedTools,
    Triggers,
    parse_scenario,
)
from ctxspec.reference.ports import LogicalClock, ToolSpec
from ctxspec.reference.runtime.ownership import HARNESS
from ctxspec.reference.runtime.runtime import AgentConfig, ReferenceRuntime
from ctxspec.reference.runtime.store import CommitCoordinator, CommitFailed, Store

EXAMPLES = Path(__file__).resolve().parent.parent / "docs" / "examples"


def runtime(store: Store, fault: Any = None) -> ReferenceRuntime:
    scenario = parse_scenario(json.loads((EXAMPLES / "tool-batch-hook.json").read_text("utf-8")))
    triggers = Triggers(())
    ports = Ports(ScriptedModel(scenario.model, triggers), ScriptedTools(scenario.tools, triggers),
                  ScriptedHooks(scenario.hooks), ESTIMATORS["chars"]())
    agent = AgentConfig(system_prompt="You write reports.", budget=scenario.agent.budget(),
                        tools=(ToolSpec("write", "{}"), ToolSpec("read", "{}")))
    return ReferenceRuntime(agent, model=ports.model, tools=ports.tools, hooks=ports.hooks,
                            estimator=ports.estimator, clock=LogicalClock(), store=store,
                            coordinator=CommitCoordinator(store, fault))


@pytest.mark.covers("CTX-3.6", "CTX-3.77", "CTX-5.9", "CTX-5.12", "CTX-5.13", "CTX-2.23",
                    "CTX-3.16")
def test_a_run_is_a_sequence_of_named_commits_in_a_file_store(tmp_path: Path) -> None:
    store = Store(tmp_path / "session.db")
    rt = runtime(store)
    rt.ask("Write the report and read my notes.")
    rt.advance()
    by_name = dict(rt.coordinator.by_name)
    # Derived from the loop of §3/§5/§6/§10: two model loops (the batch, then the final
    # answer), one question, the registered tool.pre_call point asked for each of the two
    # calls (marked started, then decided: items for the first, none for the second), two
    # tools each started then settled, one feedback, one finalisation.
    assert by_name == {"SESSION_OPENED": 1, "APP-INPUT": 1, "T_FREEZE": 2, "T_FIRST_OUTPUT": 2,
                       "RAW_RESULT_SAVED": 2, "EFFECTIVE_RESULT": 2, "HOOK_STARTED": 2,
                       "HOOK_DECISION": 2,
                       "TOOL_STARTED": 2, "TOOL_SETTLED": 2, "BATCH_FEEDBACK": 1,
                       "APP-FINALIZE": 1}
    assert store.query("PRAGMA integrity_check")[0]["integrity_check"] == "ok"
    # question, assistant batch decision, two results, final answer
    assert store.count("records") == 5
    assert [row["state"] for row in store.query("SELECT state FROM deliveries")] == ["delivered"]
    assert [row["status"] for row in store.query("SELECT status FROM runs")] == ["succeeded"]
    assert store.count("hook_invocations") == 1 and store.count("mutations") >= 2
    store.close()
    reopened = Store(tmp_path / "session.db")
    assert reopened.count("records") == 5  # durable: a new process sees every fact


@pytest.mark.covers("CTX-3.90", "CTX-3.91", "CTX-10.28")
def test_a_failed_commit_stops_the_runtime_and_leaves_nothing_half_written() -> None:
    store = Store()

    def fail_freeze(name: str, index: int) -> None:
        if name == "T_FREEZE" and index == 1:
            raise OSError("disk full")

    rt = runtime(store, fail_freeze)
    rt.ask("Write the report and read my notes.")
    with pytest.raises(CommitFailed) as failure:
        rt.advance()
    assert failure.value.name == "T_FREEZE"
    # Nothing of the freeze is stored: the input is still pending, no operation exists, and
    # the model was never called with a request storage does not know.
    assert [row["state"] for row in store.query("SELECT state FROM deliveries")] == ["pending"]
    assert store.count("operations") == 0
    assert rt.trace.model_requests() == []


@pytest.mark.covers("CTX-3.9", "CTX-3.10", "CTX-7.17")
def test_a_replaced_compaction_policy_cannot_bypass_the_hard_window() -> None:
    from ctxspec.conformance.estimator import CharEstimator
    from ctxspec.reference.budget import BudgetConfig, CompactionEvaluation, ResolvedBudget
    from ctxspec.reference.ports import Complete, ModelCall, ModelOutcome, NoHooks
    from ctxspec.reference.runtime.trace import RunEnded

    class NeverCompact:
        """A replacement CompactionPolicy (§3: a replaceable port) that never compacts."""

        def evaluate(self, resolved: ResolvedBudget, fixed: int,
                     material: int) -> CompactionEvaluation:
            return CompactionEvaluation(fixed + material, "below_trigger")

    class Model:
        def call(self, request: ModelCall) -> ModelOutcome:
            return Complete("x" * 600)

    class Tools:
        def run(self, name: str, arguments: Any, ordinal: int) -> Any:
            raise AssertionError("no tools here")

    rt = ReferenceRuntime(AgentConfig(system_prompt="s", budget=BudgetConfig(
        window=2000, output_reserve=200, safety_margin=100)), model=Model(), tools=Tools(),
        hooks=NoHooks(), estimator=CharEstimator(), clock=LogicalClock(), policy=NeverCompact())
    for question in ("q" * 600, "r" * 600):
        rt.ask(question)
        rt.advance()
    # The second request would be 1 + 600 + 600 + 24 + 600 = 1825 > B = 1700: the policy said
    # "no compaction", the runtime still refuses to send it.
    assert [e.error_code for e in rt.trace.of(RunEnded)] == [None, "CONTEXT_WINDOW_EXCEEDED"]
    assert len(rt.trace.model_requests()) == 1


def test_a_takeover_keeps_the_compaction_policy_it_is_handed() -> None:
    """Q222: recovery takes the CompactionPolicy like the other ports; without one it is the
    design's default, as a new runtime's."""
    from ctxspec.conformance.estimator import CharEstimator
    from ctxspec.reference.budget import BudgetConfig, CompactionEvaluation, ResolvedBudget
    from ctxspec.reference.policy import DesignCompactionPolicy
    from ctxspec.reference.ports import NoHooks
    from ctxspec.reference.runtime.restore import restore

    class NeverCompact:
        def evaluate(self, resolved: ResolvedBudget, fixed: int,
                     material: int) -> CompactionEvaluation:
            return CompactionEvaluation(fixed + material, "below_trigger")

    agent = AgentConfig(system_prompt="s", budget=BudgetConfig(
        window=2000, output_reserve=200, safety_margin=100))
    ports: dict[str, Any] = {"model": None, "tools": None, "hooks": NoHooks(),
                             "estimator": CharEstimator(), "clock": LogicalClock()}
    first = ReferenceRuntime(agent, **ports, lease=HARNESS)
    first.ask("q")
    kept = NeverCompact()
    assert restore(first.store, agent, **ports, policy=kept, lease=HARNESS).session.policy is kept
    default = restore(first.store, agent, **ports, lease=HARNESS).session.policy
    assert isinstance(default, DesignCompactionPolicy)
