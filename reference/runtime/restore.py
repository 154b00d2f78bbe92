"""Recovery (§10 "上下文与执行现场的边界"): a new runtime built on the same store continues from
stored facts alone — no Python call stack is restored.

:func:`restore` reads back the Session: its inputs and deliveries (with the input manifests of
frozen Operations), its Runs, each root role's records, revisions and mutations, the
Operations and the compaction episodes, and the loop checkpoint of the active Run. The active
Run is taken over: its owner epoch moves on, so a late result of the previous owner cannot
advance it (CTX-10.23, CTX-10.24), and its loop count, deadline and quota are the stored ones,
not renewed. :meth:`ReferenceRuntime.advance` then continues where the last commit left it.

The Session's facts are read into :class:`StoredFacts`, the :class:`SessionState` is constructed
from them (``SessionState(..., stored=...)``, the constructor of a new Session's) and the runtime
is built on it through its own constructor (``ReferenceRuntime(..., session=...)``): the same
components, the same commit path; no field is written after construction.
"""

import json
from dataclasses import replace
from uuid import UUID

from ctxspec.reference import delivery as dl
from ctxspec.reference.contracts import (
    CompactionEpisode,
    ContextMutation,
    NodeCheckpoint,
    Operation,
    Run,
    RunStatus,
    UserInputDelivery,
)
from ctxspec.reference.effective import (
    CommittedMutation,
    ContextState,
    FieldChange,
    Revision,
    Scope,
)
from ctxspec.reference.policy import CompactionPolicy, DesignCompactionPolicy
from ctxspec.reference.ports import Clock, HookPort, ModelPort, ToolPort
from ctxspec.reference.protection import ProtectedInput
from ctxspec.reference.registry import JSON
from ctxspec.reference.runtime.access import AccessDenied, AuditGrants
from ctxspec.reference.runtime.ownership import Lease, OwnerAlive, Ownership
from ctxspec.reference.runtime.runtime import ReferenceRuntime
from ctxspec.reference.runtime.session import (
    EPOCH,
    ROOT_ROLE,
    AgentConfig,
    CrashPlan,
    RunState,
    SessionState,
    StoredFacts,
    loop_key,
    resolved_budget,
)
from ctxspec.reference.runtime.store import (
    CommitCoordinator,
    Store,
    checkpoint_write,
    decode_overrides,
)
from ctxspec.reference.snapshots import ActivePointer, manifest_from_document
from ctxspec.reference.tokens import TokenEstimator


def restore(store: Store, agent: AgentConfig, *, model: ModelPort, tools: ToolPort,
            hooks: HookPort, estimator: TokenEstimator, clock: Clock, seed: str | None = None,
            crash: CrashPlan | None = None,
            coordinator: CommitCoordinator | None = None,
            session_id: UUID | None = None,
            policy: CompactionPolicy | None = None,
            lease: Lease | None = None, audit: AuditGrants | None = None) -> ReferenceRuntime:
    """A new runtime on ``store`` that takes its Session over and continues it from the
    stored facts: the Session ``session_id``, or the store's only Session when it is None.
    Nothing of the store's other Sessions is read into it, and a Session of another Agent than
    ``agent`` is refused (``AccessDenied``). ``policy``: the CompactionPolicy the runtime was
    built with (the design's default when None), like every other port handed in again (Q222);
    ``audit`` the audit grants it admits, handed in again like the ports (none when None).

    The facts are read in one read transaction; the takeover is refused while the previous
    owner's lease runs (``OwnerAlive``; ``lease`` is this owner's, 30 s when None), and its
    first commit (TAKEOVER) claims the Session fenced on the epoch and commit sequence it
    read: an owner that committed after the read makes the takeover fail (``CommitFailed``)
    rather than go on from stale facts (§10; ``ownership.py``)."""
    lease = lease or Lease()
    with store.reading():
        session_id = _session_of(store, agent, session_id)
        row = store.session_owner(session_id)
        if row is None or row["owner_epoch"] is None:
            raise ValueError(f"Session {session_id} has no owner row to take over from")
        if not lease.expired(row["lease_until"]):
            raise OwnerAlive(session_id, str(row["owner_id"]), int(row["lease_until"]))
        incarnation = _incarnation(store, session_id)
        facts = _stored_facts(store, session_id)
    session = SessionState(
        agent, resolved_budget(agent), model=model, tools=tools, hooks=hooks,
        estimator=estimator, clock=clock, policy=policy or DesignCompactionPolicy(), store=store,
        coordinator=coordinator or CommitCoordinator(store),
        seed=None if seed is None else f"{seed}:takeover:{incarnation}", crash=crash,
        stored=facts)
    epoch = int(row["owner_epoch"])
    session.ownership = Ownership(session.owner_id(), epoch + 1, int(row["commit_seq"]), lease,
                                  claimed_from=epoch)
    for state in session.runs.values():
        if state.status is RunStatus.RUNNING:  # taken over: the owner epoch moves on
            state.pointer = replace(state.pointer, lease_epoch=state.pointer.lease_epoch + 1)
            session.put_run(state)
    session.commit("TAKEOVER", [checkpoint_write(session_id, "incarnation",
                                                 {"incarnation": incarnation})])
    return ReferenceRuntime(agent, model=model, tools=tools, hooks=hooks, estimator=estimator,
                            clock=clock, session=session, audit=audit)


def _stored_facts(store: Store, session_id: UUID) -> StoredFacts:
    """The Session's facts as the last commit left them: inputs and deliveries, Runs with
    their roles' contexts and shared scopes, the running Executor executions, Operations, and
    the loop checkpoints a takeover continues from."""
    facts = StoredFacts(session_id, dl.empty_book(session_id))
    runs = store.runs_of_session(session_id)
    loops: dict[UUID, dict[str, JSON]] = {}
    for run in runs:
        checkpoint = store.checkpoint(run.run_id, "loop")
        if isinstance(checkpoint, dict):
            loops[run.run_id] = checkpoint
    _read_inputs(store, facts, runs, loops)
    episodes = [CompactionEpisode.model_validate_json(row["doc"])
                for row in store.query("SELECT doc FROM episodes")]
    for run in runs:
        state = _run_state(store, run, loops.get(run.run_id, {}), episodes)
        facts.runs[run.run_id] = state
        facts.contexts[state.context_id] = _context(store, state.context_id)
        shared = _shared_scope(store, run.run_id)
        if shared is not None:
            state.shared_context_id = shared.context_id
            facts.contexts[shared.context_id] = shared
        if run.status is RunStatus.RUNNING and loops.get(run.run_id):
            facts.positions[run.run_id] = NodeCheckpoint.model_validate(loops[run.run_id])
    for state in list(facts.runs.values()):
        if state.status is RunStatus.RUNNING:
            _restore_executions(store, facts, state, loops.get(state.run_id, {}))
    facts.operations.update((op.operation_id, op) for op in (
        Operation.model_validate_json(row["doc"]) for row in store.query(
            "SELECT doc FROM operations WHERE run_id IN (SELECT run_id FROM runs "
            "WHERE session_id = ?)", (str(session_id),))))
    return facts


def _session_of(store: Store, agent: AgentConfig, session_id: UUID | None) -> UUID:
    """The Session to restore: the given one, or the store's only one; refused when it belongs
    to another Agent."""
    if session_id is None:
        sessions = store.query("SELECT session_id FROM sessions")
        if len(sessions) != 1:
            raise ValueError(f"a store holds one Session to restore, found {len(sessions)}")
        session_id = UUID(sessions[0]["session_id"])
    owner = store.session_agent(session_id)
    if owner is None:
        raise ValueError(f"the store holds no Session {session_id}")
    if owner != agent.agent_id:  # a runtime built for one Agent never serves another's Session
        raise AccessDenied(f"Session {session_id} belongs to another Agent")
    return session_id


def _read_inputs(store: Store, facts: StoredFacts, runs: list[Run],
                 loops: dict[UUID, dict[str, JSON]]) -> None:
    """The Session's UserInputs, their texts and deliveries, and the input manifests of its
    frozen requests (§5)."""
    inputs = store.inputs_of_session(facts.session_id)
    deliveries = [UserInputDelivery.model_validate_json(row["doc"]) for row in store.query(
        "SELECT doc FROM deliveries WHERE input_id IN (SELECT input_id FROM user_inputs "
        "WHERE session_id = ?) ORDER BY rowid", (str(facts.session_id),))]
    manifests = tuple(dl.InputManifest.model_validate(loop["manifest"])
                      for loop in loops.values() if isinstance(loop.get("manifest"), dict))
    active = next((r.run_id for r in runs if r.status is RunStatus.RUNNING), None)
    facts.book = dl.DeliveryBook(facts.session_id, tuple(inputs), tuple(deliveries),
                                 tuple(r.run_id for r in runs), active, manifests)
    facts.texts.update((u.input_id, store.text(u.body_ref)) for u in inputs)


def _run_state(store: Store, run: Run, loop: dict[str, JSON],
               episodes: list[CompactionEpisode]) -> RunState:
    """A Run's root role as it stood: its loop count, quota spent, episodes, active snapshot
    (with its summary), owner epoch, client event position and stop request (§10)."""
    context_id = store.root_context_of_run(run.run_id)
    if context_id is None:
        raise ValueError(f"run {run.run_no} has no root context")
    role_context = store.role_context(context_id)
    count, made = loop.get("loops"), loop.get("tool_calls_made")
    state = RunState(
        run.run_id, run.run_no, run.question_input_id, context_id,
        int((run.started_at - EPOCH).total_seconds()), status=run.status,
        error_code=run.error_code,
        loops=count if isinstance(count, int) else 0,
        tool_calls_made=made if isinstance(made, int) else 0,
        episodes=[e for e in episodes if e.run_id == run.run_id],
        pointer=ActivePointer(
            role_context.active_snapshot_id if role_context else None, run.owner_epoch),
        run_seq=store.last_run_seq(run.run_id),
        last_model_operation_id=role_context.last_model_operation_id
        if role_context else None)
    state.stop_requested = store.checkpoint(run.run_id, "stop") is not None
    saved = store.checkpoint(run.run_id, "snapshot")
    if isinstance(saved, dict) and role_context is not None and \
            str(role_context.active_snapshot_id) == saved.get("snapshot_id"):
        manifest, summary = saved.get("manifest"), saved.get("summary")
        if isinstance(manifest, dict) and isinstance(summary, str):
            state.snapshot = (UUID(str(saved["snapshot_id"])),
                              manifest_from_document(manifest), summary)
    return state


def _restore_executions(store: Store, facts: StoredFacts, planner: RunState,
                        loop: dict[str, JSON]) -> None:
    """The Planner's Executor executions: those its open batch started and has not settled go
    on where they stood (§10); the Loops of all the others still count against the Run's shared
    Loop budget (§11)."""
    delegated, settled, raws = loop.get("delegated"), loop.get("settled"), loop.get("raw")
    if loop.get("stage") == "batch" and isinstance(delegated, dict):
        # An execution whose answer was saved (its member's raw result, waiting for its
        # post-call chain) or settled is over: it is never taken up again (§10).
        over = {*(settled if isinstance(settled, dict) else {}),
                *(raws if isinstance(raws, dict) else {})}
        _restore_running_executions(store, facts, planner, delegated, over)
    running = {loop_key(task, "loop") for task in facts.tasks if task.parent is planner}
    finished = 0
    for name, doc in store.checkpoints_of(planner.run_id).items():
        loops = doc.get("loops") if isinstance(doc, dict) else None
        if name.startswith("loop:") and name not in running and isinstance(loops, int):
            finished += loops
    planner.finished_executor_loops = finished


def _restore_running_executions(store: Store, facts: StoredFacts, planner: RunState,
                                delegated: dict[str, JSON], over: set[str]) -> None:
    """Each execution of the open batch not over yet: its NodeTask with its private
    context, its hand-over (its own first records) and its loop checkpoint."""
    for call_id, context in delegated.items():
        if not isinstance(context, str) or call_id in over:
            continue
        context_id = UUID(context)
        state = _context(store, context_id)
        handover = tuple(ProtectedInput(raw.record.origin_input_id, position,
                                        str(raw.content.get("text", "")))
                         for position, raw in enumerate(state.records, start=1)
                         if raw.record.origin_input_id is not None)
        task = RunState(planner.run_id, planner.run_no, planner.question_input_id, context_id,
                        planner.started_at_tick, role="executor", parent=planner,
                        handover=handover)
        checkpoint = store.checkpoint(planner.run_id, loop_key(task, "loop"))
        if isinstance(checkpoint, dict):
            count, made = checkpoint.get("loops"), checkpoint.get("tool_calls_made")
            task.loops = count if isinstance(count, int) else 0
            # The Run's quota as the execution's last commit left it: a call it started after
            # the Planner's last commit is spent too (§10, §11).
            if isinstance(made, int):
                planner.tool_calls_made = max(planner.tool_calls_made, made)
            facts.positions[context_id] = NodeCheckpoint.model_validate(checkpoint)
        role_context = store.role_context(context_id)
        if role_context is not None:
            task.last_model_operation_id = role_context.last_model_operation_id
        # Its own compaction episodes (read with the Run's), so a running one resumes at its
        # cursor and a finished one is never started again for the same operation (§8-§10).
        task.episodes = [e for e in planner.episodes if e.owner_node_task_id == context_id]
        facts.tasks.append(task)
        facts.contexts[context_id] = state


def _shared_scope(store: Store, run_id: UUID) -> ContextState | None:
    """A Run's shared scope: its field records carry their names and consumers, from which the
    scope's registration is rebuilt as the runtime made it (§3)."""
    rows = store.query("SELECT DISTINCT context_id FROM records WHERE run_id = ? AND "
                       "message_kind = 'shared'", (str(run_id),))
    if not rows:
        return None
    state = _context(store, UUID(rows[0]["context_id"]))
    consumers = frozenset(str(c) for raw in state.records
                          for c in _strings(raw.content.get("consumers")))
    return replace(state, scope=Scope(
        "shared", registered_fields=frozenset((raw.record_id, "text") for raw in state.records),
        consumers=consumers))


def _strings(value: JSON) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _incarnation(store: Store, session_id: UUID) -> int:
    previous = store.checkpoint(session_id, "incarnation")
    number = previous.get("incarnation") if isinstance(previous, dict) else None
    return number + 1 if isinstance(number, int) else 1


def _context(store: Store, context_id: UUID) -> ContextState:
    """A root role's context from its stored records, revisions and mutations."""
    records = tuple(store.iter_records(context_id))
    mutations = {m.mutation_id: m for m in (
        ContextMutation.model_validate_json(row["doc"]) for row in store.query(
            "SELECT doc FROM mutations WHERE context_id = ?", (str(context_id),)))}
    revisions: list[Revision] = []
    committed: dict[UUID, CommittedMutation] = {}
    rows = store.query("SELECT revision, parent, record_watermark, overrides, doc FROM revisions "
                       "WHERE context_id = ? ORDER BY revision", (str(context_id),))
    previous_watermark = 0
    for row in rows:
        overrides = {(rid, key): o for rid, by_key in decode_overrides(row["overrides"]).items()
                     for key, o in by_key.items()}
        mutation_ids = tuple(UUID(m) for m in json.loads(row["doc"])["mutation_ids"])
        revisions.append(Revision(row["revision"], row["parent"], row["record_watermark"],
                                  overrides, mutation_ids, 0))
        for mutation_id in mutation_ids:
            doc = mutations[mutation_id]
            changes = tuple(FieldChange(rid, key, o.value, ())
                            for (rid, key), o in overrides.items()
                            if o.mutation_id == mutation_id)
            appended = tuple(r.record_id for r in records
                             if previous_watermark < r.record.context_seq
                             <= row["record_watermark"])
            committed[mutation_id] = CommittedMutation(
                mutation_id, doc.source_kind, doc.source_ref, doc.base_revision,
                doc.committed_revision, changes, appended if not changes else (),
                rebased=doc.base_revision != (row["parent"] or 0))
        previous_watermark = row["record_watermark"]
    role = store.role_context(context_id)
    return ContextState(context_id, Scope("private", role.role_key if role else ROOT_ROLE),
                        records, tuple(revisions), committed)


__all__ = ["restore"]
