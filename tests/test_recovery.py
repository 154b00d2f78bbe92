"""Crash at a commit boundary, build a new runtime on the same store, continue from stored facts
alone (§10, §12 rows 21-23): no model or tool call repeated for a saved result, no record lost,
no feedback appended twice."""

import json
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest

from ctxspec.conformance.driver_config import agent_config
from ctxspec.conformance.estimator import ESTIMATORS, CharEstimator, estimator_for
from ctxspec.conformance.scenario import (
    Scenario,
    ScriptedHooks,
    ScriptedModel,
    ScriptedTools,
    Triggers,
    parse_scenario,
)
from ctxspec.reference.contracts import NodeCheckpoint
from ctxspec.reference.ports import (
    HookContext,
    HookPoint,
    HookReply,
    LogicalClock,
    ModelCall,
    ModelOutcome,
    ToolOutcome,
)
from ctxspec.reference.runtime.ownership import HARNESS
from ctxspec.reference.runtime.restore import restore
from ctxspec.reference.runtime.runtime import Crash, CrashPlan, ReferenceRuntime
from ctxspec.reference.runtime.store import CommitFailed, Store
from ctxspec.reference.runtime.trace import HookDecided, RunEnded, ToolExecuted

EXAMPLES = Path(__file__).resolve().parent.parent / "docs" / "examples"


class Counting:
    """Scripted ports that count every external call across incarnations."""

    def __init__(self, scenario: Scenario) -> None:
        triggers = Triggers(())
        self.model = ScriptedModel(scenario.model, triggers)
        self.tools = ScriptedTools(scenario.tools, triggers)
        self.hooks = ScriptedHooks(scenario.hooks)
        self.model_calls: list[str] = []
        self.tool_calls: list[str] = []
        self.answers: dict[str, ModelOutcome] = {}
        self.hook_calls: list[tuple[str, Any]] = []

    def call(self, request: ModelCall) -> ModelOutcome:
        """A deterministic model: asked the same Operation again, it answers the same."""
        self.model_calls.append(request.purpose_key)
        if request.purpose_key not in self.answers:
            self.answers[request.purpose_key] = self.model.call(request)
        return self.answers[request.purpose_key]

    def run(self, name: str, arguments: Any, ordinal: int) -> ToolOutcome:
        self.tool_calls.append(name)
        return self.tools.run(name, arguments, ordinal)

    def registered(self, point: HookPoint) -> bool:
        return self.hooks.registered(point)

    def items(self, context: HookContext) -> tuple[HookReply, ...]:
        self.hook_calls.append((context.point, context.call_id))
        return self.hooks.items(context)


def scenario() -> Scenario:
    return parse_scenario(json.loads((EXAMPLES / "tool-batch-hook.json").read_text("utf-8")))


def start(store: Store, ports: Counting, crash: CrashPlan | None, clock: LogicalClock
          ) -> ReferenceRuntime:
    return ReferenceRuntime(agent_config(scenario().agent), model=ports, tools=ports,
                            hooks=ports, estimator=ESTIMATORS["chars"](), clock=clock,
                            store=store, crash=crash, lease=HARNESS)


def crash_and_recover(plan: CrashPlan, tmp_path: Path) -> tuple[Counting, Store, ReferenceRuntime]:
    store = Store(tmp_path / "crash.db")
    ports, clock = Counting(scenario()), LogicalClock()
    first = start(store, ports, plan, clock)
    with pytest.raises(Crash):
        first.ask("Write the report and read my notes.")
        first.advance()
    del first  # abandoned mid-step: nothing of it is used again
    second = restore(store, agent_config(scenario().agent), model=ports, tools=ports,
                     hooks=ports, estimator=CharEstimator(), clock=clock, lease=HARNESS)
    second.advance()
    return ports, store, second


BOUNDARIES = [CrashPlan("APP-INPUT", 1, "after"), CrashPlan("T_FREEZE", 1, "after"),
              CrashPlan("T_FIRST_OUTPUT", 1, "after"), CrashPlan("TOOL_STARTED", 1),
              CrashPlan("RAW_RESULT_SAVED", 1, "after"), CrashPlan("EFFECTIVE_RESULT", 1),
              CrashPlan("HOOK_DECISION", 1), CrashPlan("TOOL_SETTLED", 1),
              CrashPlan("TOOL_SETTLED", 2), CrashPlan("BATCH_FEEDBACK", 1),
              CrashPlan("RAW_RESULT_SAVED", 2), CrashPlan("EFFECTIVE_RESULT", 2),
              CrashPlan("TOOL_SETTLED", 1, "before"), CrashPlan("BATCH_FEEDBACK", 1, "before")]


@pytest.mark.covers("CTX-10.2", "CTX-10.6", "CTX-10.7", "CTX-10.9", "CTX-10.10", "CTX-10.12",
                    "CTX-10.14", "CTX-10.17", "CTX-10.19", "CTX-10.25", "CTX-8.74")
@pytest.mark.parametrize("plan", BOUNDARIES, ids=lambda p: f"{p.when}-{p.commit}-{p.occurrence}")
def test_a_crash_at_any_boundary_repeats_no_saved_call_and_loses_no_record(
        plan: CrashPlan, tmp_path: Path) -> None:
    ports, store, runtime = crash_and_recover(plan, tmp_path)
    # The run completes; each tool ran once; the model answered each saved request once (a
    # request frozen but never answered is asked again as a new attempt of the same operation).
    assert [e.status for e in runtime.trace.of(RunEnded)] == ["succeeded"]
    unknown = plan in (CrashPlan("TOOL_STARTED", 1), CrashPlan("TOOL_SETTLED", 1, "before"))
    assert sorted(set(ports.tool_calls)) == (["read"] if plan == CrashPlan("TOOL_STARTED", 1)
                                             else ["read", "write"])
    assert len(ports.tool_calls) == len(set(ports.tool_calls))  # no tool ran twice
    assert len(set(ports.model_calls)) == 2
    saved_before_crash = plan.commit in ("RAW_RESULT_SAVED", "EFFECTIVE_RESULT",
                                         "HOOK_DECISION", "TOOL_SETTLED", "BATCH_FEEDBACK")
    if saved_before_crash and plan.occurrence == 1 and plan.when == "after":
        assert len(ports.model_calls) == 2  # the saved first answer was never asked again
    # Nothing lost, nothing appended twice: question, decision, two results, final answer.
    kinds = [row["message_kind"] for row in store.query(
        "SELECT message_kind FROM records ORDER BY context_seq")]
    assert kinds == ["user_ref", "assistant", "tool_result", "tool_result", "assistant"]
    assert store.query("PRAGMA integrity_check")[0]["integrity_check"] == "ok"
    # A committed hook decision is reused, never asked again: each call's pre-call hook (and
    # post-call hook, once its result is settled) was invoked at most once.
    tool_hooks = [call for call in ports.hook_calls if call[0].startswith("tool.")]
    assert len(tool_hooks) == len(set(tool_hooks))
    assert store.count("hook_invocations") == 1
    # The effective argument the hook set before the crash is the one that ran; a call that
    # started but whose result was never saved is reported as unknown, never run twice.
    results = [json.loads(row["content"])["text"] for row in store.query(
        "SELECT content FROM records WHERE message_kind = 'tool_result' ORDER BY context_seq")]
    if unknown:
        assert json.loads(results[0])["error"]["code"] == "UNKNOWN_OUTCOME"
        assert results[1] == "ship on Friday"
    else:
        assert results == ["wrote 6 bytes to reports/a.md", "ship on Friday"]


@pytest.mark.covers("CTX-3.59", "CTX-10.12")
def test_a_hook_that_was_running_at_the_crash_is_dropped_never_asked_again(
        tmp_path: Path) -> None:
    # The process dies while the tool.pre_call hook of the first call (write) runs: it was
    # marked started, its decision never committed. Its outcome is unknown, so it follows the
    # hook failure rule: the item is dropped (HOOK_FAILED) and the call runs with the path the
    # model proposed, a.md, instead of the hook's reports/a.md.
    ports, store, runtime = crash_and_recover(CrashPlan("HOOK_STARTED", 1, "after"), tmp_path)
    assert [e.status for e in runtime.trace.of(RunEnded)] == ["succeeded"]
    pre_call = [call for call in ports.hook_calls if call[0] == "tool.pre_call"]
    assert len(pre_call) == 1  # asked for the second call (read) only, after the takeover
    [dropped] = [e for e in runtime.trace.of(HookDecided) if e.point == "tool.pre_call"
                 and "HOOK_FAILED" in e.diagnostics]
    assert dropped.changes == ()
    [write] = [e for e in runtime.trace.of(ToolExecuted) if e.name == "write"]
    assert write.effective_arguments["path"] == "a.md"
    run = next(iter(runtime.runs.values()))
    position = store.checkpoint(run.run_id, "loop")  # settled: no chain left marked running
    assert isinstance(position, dict) and "hook" not in position, position


def test_a_hook_chain_marked_running_is_part_of_the_role_position(tmp_path: Path) -> None:
    # Issue #34, one position contract: the mark HOOK_STARTED commits is the role's position
    # (the one a takeover loads) with the chain — tool.pre_call of the first call, in the
    # first Loop — never a checkpoint of its own; the chain's decision clears it.
    store = Store(tmp_path / "crash.db")
    first = start(store, Counting(scenario()), CrashPlan("HOOK_STARTED", 1, "after"),
                  LogicalClock())
    with pytest.raises(Crash):
        first.ask("Write the report and read my notes.")
        first.advance()
    [run_id] = [UUID(row["run_id"]) for row in store.query("SELECT run_id FROM runs")]
    position = NodeCheckpoint.model_validate(store.checkpoint(run_id, "loop"))
    assert position.hook is not None, "HOOK_STARTED left the role's position unmarked"
    assert (position.hook.point, position.hook.stage, position.hook.loops) == (
        "tool.pre_call", "pre", 1)
    assert position.hook.call_id is not None  # a pre-call chain is about its call
    assert store.checkpoint(run_id, "hook") is None, "the mark kept apart from the position"


@pytest.mark.covers("CTX-10.24")
def test_a_takeover_moves_the_owner_epoch_and_renews_no_budget(tmp_path: Path) -> None:
    _, store, runtime = crash_and_recover(CrashPlan("TOOL_SETTLED", 1), tmp_path)
    epochs = [row["owner_epoch"] for row in store.query("SELECT owner_epoch FROM runs")]
    assert epochs == [2]
    run = next(iter(runtime.runs.values()))
    assert run.loops == 2  # the two loops of the Run, not restarted from zero


@pytest.mark.covers("CTX-10.23", "CTX-10.24")
def test_the_previous_owner_cannot_advance_a_taken_over_run(tmp_path: Path) -> None:
    store = Store(tmp_path / "late.db")
    ports, clock = Counting(scenario()), LogicalClock()
    old = start(store, ports, CrashPlan("TOOL_SETTLED", 1), clock)
    with pytest.raises(Crash):
        old.ask("Write the report and read my notes.")
        old.advance()
    new = restore(store, agent_config(scenario().agent), model=ports, tools=ports, hooks=ports,
                  estimator=CharEstimator(), clock=clock, lease=HARNESS)
    records = store.count("records")
    # The old owner wakes up and tries to go on (its late result): its commit's owner fence
    # finds the Session's row at a newer epoch and the whole commit is refused; nothing it did
    # reaches the store.
    old.session.crash = None
    old.runs[next(iter(old.runs))].loops += 1  # some progress of its own to write
    with pytest.raises(CommitFailed, match="StaleOwner: the sessions row is no longer at"):
        old.session.commit("TOOL_SETTLED", [])
    assert store.count("records") == records
    new.advance()
    assert [e.status for e in new.trace.of(RunEnded)] == ["succeeded"]
    run = next(iter(new.runs.values()))
    assert run.tool_calls_made == 2  # the quota already used is not given back


def compaction_scenario() -> Scenario:
    return parse_scenario(json.loads(
        (EXAMPLES / "compaction-three-chunks-window-exceeded.json").read_text("utf-8")))


def run_compaction(plan: CrashPlan | None, tmp_path: Path) -> tuple[Counting, ReferenceRuntime]:
    """The three-chunk example's two questions, with an optional crash and a takeover."""
    scenario_doc = compaction_scenario()
    tmp_path.mkdir(parents=True, exist_ok=True)
    store = Store(tmp_path / "compaction.db")
    ports, clock = Counting(scenario_doc), LogicalClock()
    agent = agent_config(scenario_doc.agent)
    estimator = estimator_for(scenario_doc, scenario_doc.agent)  # the example's own

    def fresh() -> ReferenceRuntime:
        return ReferenceRuntime(agent, model=ports, tools=ports, hooks=ports,
                                estimator=estimator, clock=clock, store=store, crash=plan,
                                lease=HARNESS)

    runtime = fresh()
    try:
        runtime.ask("Collect the three reports.")
        runtime.advance()
        runtime.ask(str(scenario_doc.steps[2].ask))
        runtime.advance()
    except Crash:
        runtime = restore(store, agent, model=ports, tools=ports, hooks=ports,
                          estimator=estimator, clock=clock, lease=HARNESS)
        runtime.advance()
    return ports, runtime


@pytest.mark.covers("CTX-9.38", "CTX-9.39", "CTX-9.40", "CTX-8.73", "CTX-8.74", "CTX-8.78",
                    "CTX-9.18", "CTX-8.3")
@pytest.mark.parametrize("plan", [CrashPlan("CHUNK_COMMITTED", 2), CrashPlan("CHUNK_COMMITTED", 1),
                                  CrashPlan("EPISODE_STARTED", 1),
                                  CrashPlan("SNAPSHOT_COMMITTED", 1, "before")],
                         ids=lambda p: f"{p.when}-{p.commit}-{p.occurrence}")
def test_a_crash_during_compaction_resumes_the_same_episode_at_its_cursor(
        plan: CrashPlan, tmp_path: Path) -> None:
    # §12 rows 9 and 10: after the second chunk the episode goes on with the third; before the
    # snapshot commit nothing is lost and no chunk is asked again. The outcome is the one of
    # the run without a crash: CONTEXT_WINDOW_EXCEEDED after three chunks.
    clean, _ = run_compaction(None, tmp_path / "clean")
    ports, runtime = run_compaction(plan, tmp_path / "crash")
    chunks = [key for key in ports.model_calls if key.startswith("compaction:")]
    assert [key.rsplit(":", 1)[-1] for key in chunks] == ["1", "2", "3"]
    assert len({key.rsplit(":", 2)[0] for key in chunks}) == 1  # one episode, one identity
    assert len(ports.model_calls) == len(clean.model_calls)  # no business loop repeated
    assert [e.error_code for e in runtime.trace.of(RunEnded)][-1] == "CONTEXT_WINDOW_EXCEEDED"


@pytest.mark.covers("CTX-10.6", "CTX-9.43")
def test_an_executors_episode_is_resumed_after_a_refused_snapshot_commit() -> None:
    # Found by the thorough driver model: an Executor's compaction whose snapshot commit the
    # store refuses. The episode was committed (EPISODE_STARTED) before the refusal, so the
    # takeover must resume it; a restored Executor that forgot its episodes started a second
    # one for the same operation and the store refused that (UNIQUE triggering operation).
    import copy

    from ctxspec.conformance.cases import by_id
    from ctxspec.conformance.driver import ReferenceDriver
    from ctxspec.conformance.harness import scenario_trace

    [case] = by_id(["HM-CPOST-ALLOW-EXECUTOR-SUCCEEDED"])  # a Planner whose Executor compacts
    document: dict[str, Any] = {**copy.deepcopy(dict(case.scenario)), "hooks": []}
    uncrashed = scenario_trace(ReferenceDriver(), document)
    document["crash"] = {"phase": "snapshot_published", "occurrence": 1, "when": "fails"}
    crashed = scenario_trace(ReferenceDriver(), document)
    kinds = [e["kind"] for e in crashed if e["kind"] in ("persistence_failed", "restarted")]
    assert kinds == ["persistence_failed", "restarted"]

    def endings(trace: list[dict[str, Any]]) -> list[tuple[str, str | None]]:
        return [(e["status"], e["error_code"]) for e in trace if e["kind"] == "run_ended"]

    assert endings(crashed) == endings(uncrashed) == [("succeeded", None)]


def test_a_takeover_reads_the_records_by_index_never_whole(tmp_path: Path) -> None:
    # The takeover hunt (issue #34) slowed as its store grew: restoring a Session scanned
    # every record of the store once per Run to find the Run's shared scope. Each query a
    # takeover makes of the records table now searches an index.
    store = Store(tmp_path / "plans.db")
    ports, clock = Counting(scenario()), LogicalClock()
    first = start(store, ports, None, clock)
    first.ask("Write the report and read my notes.")
    first.advance()
    statements: list[str] = []
    store.db.conn.set_trace_callback(statements.append)
    restore(store, agent_config(scenario().agent), model=ports, tools=ports, hooks=ports,
            estimator=CharEstimator(), clock=clock, lease=HARNESS)
    store.db.conn.set_trace_callback(None)
    reads = [s for s in statements if s.lstrip().upper().startswith("SELECT")
             and " records" in s]
    assert reads, "restore reads the records"
    scans = [(s, detail) for s in reads for (*_, detail) in
             store.db.conn.execute("EXPLAIN QUERY PLAN " + s).fetchall()
             if detail.startswith("SCAN records")]
    assert scans == []
