"""The reference runtime of one Session: the stimuli (ask, supplement, an independent write,
stop, advance), the history API and the Agent's deletion, over the §3 components it is built
from (docs/architecture.md):

- :class:`SessionState` (:mod:`session`) — the facts in memory and the pending write set;
- :class:`ContextManager` (:mod:`context_manager`) — drafts and context write sets;
- :class:`InvocationPipeline` (:mod:`pipeline`) — model, hook and tool calls;
- :class:`NodeDriver` (:mod:`node_driver`, :mod:`batch`) — the root role's loop and Executors,
  with its :class:`CompactionService` (:mod:`compaction_service`);
- the CommitCoordinator (:mod:`coordinator`, :mod:`store`) — the one writer.

:func:`restore.restore` builds the same runtime from a store (§10).
"""

import json
from uuid import UUID

from ctxspec.reference import delivery as dl
from ctxspec.reference.contracts import (
    InputKind,
    Operation,
    PayloadRef,
    UserInput,
)
from ctxspec.reference.effective import (
    ContextState,
    RawRecord,
    Scope,
    effective_record,
    new_context,
)
from ctxspec.reference.policy import CompactionPolicy, DesignCompactionPolicy
from ctxspec.reference.ports import (
    Clock,
    HookPort,
    ModelPort,
    MomentPort,
    ToolPort,
)
from ctxspec.reference.registry import JSON
from ctxspec.reference.runtime.access import AccessDenied, AuditGrant, AuditGrants, HistoryCaller
from ctxspec.reference.runtime.context_manager import ContextManager
from ctxspec.reference.runtime.node_driver import NodeDriver
from ctxspec.reference.runtime.ownership import Lease, Ownership
from ctxspec.reference.runtime.pipeline import InvocationPipeline
from ctxspec.reference.runtime.session import (
    DELEGATE_TOOL,
    REGISTRIES,
    ROOT_ROLE,
    AgentConfig,
    AgentDeleted,
    Crash,
    CrashPlan,
    ExecutorConfig,
    HistoryContent,
    RunState,
    SessionState,
    SharedField,
    resolved_budget,
)
from ctxspec.reference.runtime.store import (
    CommitCoordinator,
    RuntimeStopped,
    Store,
    Write,
    checkpoint_write,
    delete,
    insert,
    sweep_blobs,
    upsert,
)
from ctxspec.reference.runtime.trace import Trace
from ctxspec.reference.tokens import TokenEstimator
from ctxspec.reference.view import (
    EffectiveRecord,
)


class ReferenceRuntime:
    """The reference runtime of one Session."""

    def __init__(self, agent: AgentConfig, *, model: ModelPort, tools: ToolPort,
                 hooks: HookPort, estimator: TokenEstimator, clock: Clock,
                 seed: str | None = None, store: Store | None = None,
                 coordinator: CommitCoordinator | None = None,
                 policy: CompactionPolicy | None = None,
                 crash: CrashPlan | None = None, session: SessionState | None = None,
                 lease: Lease | None = None, audit: AuditGrants | None = None) -> None:
        """A new Session of ``agent`` on ``store``, owned by this runtime under ``lease`` (30 s
        of wall-clock time when None) — or, given ``session`` (a Session restored from a
        store, :func:`restore.restore`), that Session. ``audit``: the audit grants it admits
        (``access.py``; none when None)."""
        restored = session is not None
        self.audit = audit or AuditGrants.issue(())
        if session is None:
            store = store or Store()
            session = SessionState(agent, resolved_budget(agent), model=model, tools=tools,
                                   hooks=hooks, estimator=estimator, clock=clock,
                                   policy=policy or DesignCompactionPolicy(), store=store,
                                   coordinator=coordinator or CommitCoordinator(store),
                                   seed=seed, crash=crash)
            session.ownership = Ownership(session.owner_id(), 1, 0, lease or Lease(),
                                          opened=False)
        self.session = session
        self.context = ContextManager(session)
        self.pipeline = InvocationPipeline(session, self.context)
        self.driver = NodeDriver(session, self.context, self.pipeline)
        if restored:
            return
        # The Agent may have had Sessions before this one: its row is written once.
        session.commit("SESSION_OPENED", [
            upsert("agents", "agent_id", agent_id=agent.agent_id, config=json.dumps(
                {"system_prompt": agent.system_prompt, "recent_runs": agent.recent_runs,
                 "loop_limit": agent.loop_limit, "window": session.budget.window},
                sort_keys=True)),
            insert("sessions", **session.ownership.opening_row(session.session_id,
                                                               agent.agent_id))])
        session.ownership.opened_by_first_commit()

    # --- the Session's facts, as the driver and the tests read them ---------------------------

    @property
    def agent(self) -> AgentConfig:
        return self.session.agent

    @property
    def session_id(self) -> UUID:
        return self.session.session_id

    @property
    def store(self) -> Store:
        return self.session.store

    @property
    def coordinator(self) -> CommitCoordinator:
        return self.session.coordinator

    @property
    def trace(self) -> Trace:
        return self.session.trace

    @property
    def runs(self) -> dict[UUID, RunState]:
        return self.session.runs

    @property
    def tasks(self) -> list[RunState]:
        return self.session.tasks

    @property
    def contexts(self) -> dict[UUID, ContextState]:
        return self.session.contexts

    @property
    def operations(self) -> dict[UUID, Operation]:
        return self.session.operations

    @property
    def book(self) -> dl.DeliveryBook:
        return self.session.book

    @property
    def blobs(self) -> dict[str, str]:
        return self.session.blobs

    @property
    def deleted(self) -> bool:
        return self.session.deleted

    @property
    def active_run(self) -> RunState | None:
        return self.session.active_run

    @property
    def workspace(self) -> dict[str, str]:
        return self.session.workspace

    @workspace.setter
    def workspace(self, files: dict[str, str]) -> None:
        self.session.workspace = files

    @property
    def moments(self) -> MomentPort:
        return self.session.moments

    @moments.setter
    def moments(self, port: MomentPort) -> None:
        self.session.moments = port

    @property
    def hooks(self) -> HookPort:
        return self.session.hooks

    @hooks.setter
    def hooks(self, port: HookPort) -> None:
        self.session.hooks = port

    def commits_made(self, name: str) -> int:
        """How many RuntimeCommits of ``name`` this incarnation made (crash plans count them)."""
        return self.session.commits_made(name)

    # --- stimuli ------------------------------------------------------------------------------

    def advance(self) -> None:
        """Run the active Run until it ends (continuing a restored Run where it stopped)."""
        self._running()
        self.driver.advance()

    def _running(self) -> None:
        """A runtime that stopped at a failed commit takes no stimulus (RuntimeStopped)."""
        if self.session.stopped_at is not None:
            raise RuntimeStopped(self.session.stopped_at)

    def ask(self, text: str) -> UUID:
        """A question: APP-INPUT creates its Run and binds waiting supplements (§2, §5)."""
        self._running()
        self.session.require_agent()
        if self.session.active_run is not None:
            raise RuntimeError("a Run is active; a new question waits until it ends")
        run_id, context_id = self.session.new_id(), self.session.new_id()
        received = self._input(InputKind.QUESTION, text, run_id)
        applied = dl.app_input(self.session.book, received, delivery_id=self.session.new_id(),
                               run_id=run_id)
        if isinstance(applied, dl.DeliveryRejected):
            raise RuntimeError(f"{applied.code}: {applied.reason}")
        self.session.book, writes = applied
        self.session.deliveries_changed(writes)
        run = RunState(run_id, len(self.session.runs) + 1, received.input_id, context_id,
                       self.session.clock.now())
        self.session.runs[run_id] = run
        self.session.put_run(run, new=True)
        self.session.put_context(context_id, new_context(context_id, Scope("private", ROOT_ROLE)),
                          new=True)
        # The question, with the carried supplements bound to it in receive order, is a fact of
        # its Run from the start: a Run stopped before its first request still shows it (§4).
        self.session.put_delta(self.context.append_inputs(
            run, dl.inputs_of_run(self.session.book, run_id)))
        if self.session.agent.shared:
            scope = self.context.open_shared_scope(run)
            self.session.put_delta(scope)
            run.shared_context_id = scope.states[0][0]
        self.session.event(run, "run_started", f"run {run.run_no}")
        self.session.commit("APP-INPUT", [])
        return run_id

    def supplement(self, text: str) -> UUID:
        """A supplement: another UserInput, never a Run (§2, §5)."""
        self._running()
        self.session.require_agent()
        run = self.session.active_run
        received = self._input(InputKind.SUPPLEMENT, text, run.run_id if run else None)
        applied = dl.app_input(self.session.book, received, delivery_id=self.session.new_id())
        if isinstance(applied, dl.DeliveryRejected):
            raise RuntimeError(f"{applied.code}: {applied.reason}")
        self.session.book, writes = applied
        self.session.deliveries_changed(writes)
        if run is not None:
            self.session.event(run, "input_received", "supplement")
        self.session.commit("APP-INPUT", [])
        return received.input_id

    def _input(self, kind: InputKind, text: str, run_id: UUID | None) -> UserInput:
        input_id = self.session.new_id()
        self.session.texts[input_id] = text
        return UserInput(input_id=input_id, session_id=self.session.session_id,
                         input_seq=len(self.session.book.inputs) + 1, origin_run_id=run_id,
                         kind=kind,
                         body_ref=self.session.ref(text), received_at=self.session.time())

    def write(self, target: str, field_key: str, value: JSON) -> None:
        """An independent writer (§9 "覆盖材料在压缩期间被并发修改"): another part of the
        application corrects a field of a record of the active Run's root context, as its own
        ContextMutation and revision (source ``user:writer``), committed at once. Whatever runs
        meanwhile sees it only through the committed facts — a compaction's switch CAS
        included. ``target`` is a record id or ``question``, ``first_assistant``, ``last``."""
        self._running()
        run = self.session.active_run
        if run is None:
            raise RuntimeError("an independent write needs an active Run")
        self.session.put_delta(self.context.stage_write(run, target, field_key, value))
        self.session.commit("CONTEXT_WRITTEN", [])

    def stop(self) -> None:
        """The user stops the active Run: no new compaction or business attempt starts (§11)."""
        self._running()
        run = self.session.active_run
        if run is not None and not run.stop_requested:
            run.stop_requested = True
            # A stop is durable the moment it is accepted, so a takeover does not resume a Run
            # the user stopped. Only the request is written: the step in flight commits itself.
            self.session.commit("STOP_REQUESTED", [checkpoint_write(
                run.run_id, "stop", {"tick": self.session.clock.now()})], alone=True)

    def read_history(self, caller: "HistoryCaller", content: HistoryContent | None = None,
                     node_task: int | None = None) -> list[RawRecord]:
        """The history API, for a caller of this Session with a role that may read it — the
        root role, or authorised audit. Other Sessions, other roles and workspace scripts are
        refused, and the refusal says nothing of what exists (§1, §11). CTX-11.15, CTX-4.11

        What it serves (Q81): a role, a business consumer, reads the effective version — the
        common source of business consumers (§1), so a hook's change or a denied answer reads
        as the Loop received it; raw records, kept "用于审计和恢复核对", are served to audit
        (by default; audit may ask for the effective version too). ``node_task`` picks the
        n-th Executor execution of the Session (audit only: its context is private, §4)."""
        self.authorise(caller)
        effective = self.serves_effective(caller, content)
        if content == "raw" and caller.kind != "audit":
            raise AccessDenied("not authorised to read this history")
        if node_task is not None and caller.kind != "audit":
            raise AccessDenied("not authorised to read this history")
        served: list[RawRecord] = []
        for context_id in self._history_contexts(caller, node_task):
            _, overrides = self.session.store.head_revision(context_id)
            for raw in self.session.store.iter_records(context_id):
                served.append(RawRecord(raw.record, _served_content(effective_record(
                    raw, overrides.get(raw.record_id, {})))) if effective else raw)
        return served

    def serves_effective(self, caller: "HistoryCaller", content: HistoryContent | None) -> bool:
        """Whether the read is served the effective version: a role's by default (Q81)."""
        return content == "effective" or (content is None and caller.kind == "role")

    def _history_contexts(self, caller: "HistoryCaller", node_task: int | None) -> list[UUID]:
        """The root contexts of the Session's Runs (audit: and every Executor execution's, in
        creation order), or just the ``node_task``-th execution's."""
        roots: list[UUID] = []
        executions: list[UUID] = []
        for run in sorted(self.session.runs.values(), key=lambda r: r.run_no):
            for role_key, context_id in self.session.store.contexts_of_run(run.run_id):
                (roots if role_key == ROOT_ROLE else executions).append(context_id)
        if node_task is not None:
            if not 1 <= node_task <= len(executions):
                raise AccessDenied("not authorised to read this history")
            return [executions[node_task - 1]]
        return roots + executions if caller.kind == "audit" else roots

    def authorise(self, caller: "HistoryCaller") -> None:
        """The caller's own Session, read by its root role or by an audit reader with a grant
        this runtime was configured with (§4, §11; ``access.py``); anyone else is refused."""
        granted = caller.kind == "audit" and caller.grant is not None \
            and caller.grant.reader == caller.role \
            and self.audit.admits(caller.grant, self.session.agent.audit_readers)
        allowed = caller.session_id == self.session.session_id and (
            granted or (caller.kind == "role" and caller.role == ROOT_ROLE))
        if not allowed:
            raise AccessDenied("not authorised to read this history")

    def read_result_body(self, caller: "HistoryCaller", result_ref: PayloadRef) -> str:
        """The full body behind a bounded preview's ``result_ref``, read from its blob: for a
        caller the history API serves, and only for a reference one of the records it may read
        carries — the unread body stays available to authorised audit and on-demand reads,
        never to anyone else (§6).  CTX-6.19"""
        carried = any(
            isinstance(cut := raw.content.get("truncation"), dict)
            and isinstance(ref := cut.get("result_ref"), dict)
            and ref.get("digest") == result_ref.digest
            for raw in self.read_history(caller))
        if not carried:
            raise AccessDenied("not authorised to read this history")
        return self.session.store.text(result_ref)

    def delete_agent(self) -> None:
        """Deleting the Agent removes every record it owns: Sessions, Runs, inputs, contexts,
        records, revisions, operations, episodes, snapshots, checkpoints, events, and the blobs no
        other row refers to (§1, §12 row 24).  CTX-1.14"""
        run_ids = [str(run.run_id) for run in self.session.runs.values()]
        contexts = [str(c) for c in self.session.contexts]
        writes: list[Write] = []
        for table, column, values in (
                ("records", "context_id", contexts), ("revisions", "context_id", contexts),
                ("mutations", "context_id", contexts), ("snapshots", "context_id", contexts),
                ("role_contexts", "run_id", run_ids), ("operations", "run_id", run_ids),
                ("batches", "run_id", run_ids), ("checkpoints", "run_id", run_ids),
                ("events", "run_id", run_ids)):
            writes.extend(delete(table, **{column: value}) for value in values)
        writes += [delete(table, operation_id=str(operation_id))
                   for operation_id in self.session.operations
                   for table in ("attempts", "hook_invocations")]
        writes += [delete("deliveries", input_id=str(u.input_id)) for u in self.session.book.inputs]
        writes += [delete("episodes", episode_id=str(e.episode_id))
                   for run in self.session.runs.values() for e in run.episodes]
        writes += [delete("user_inputs", session_id=str(self.session.session_id)),
                   delete("runs", session_id=str(self.session.session_id)),
                   delete("checkpoints", run_id=str(self.session.session_id)),
                   delete("sessions", session_id=str(self.session.session_id)),
                   delete("agents", agent_id=str(self.session.agent.agent_id)),
                   sweep_blobs()]
        self.session.commit("AGENT_DELETED", writes, alone=True, guarded=False)
        self.session.workspace.clear()
        self.session.deleted = True


def _served_content(record: EffectiveRecord) -> dict[str, JSON]:
    """An effective record as the history API serves it: its effective text (a denied answer's
    denied state), the effective arguments of its calls and its bounded preview's range."""
    content: dict[str, JSON] = {"text": record.text}
    for call in record.tool_calls:
        content[f"tool_call:{call.call_id}"] = {
            "name": call.name, "action_ordinal": call.action_ordinal,
            "arguments": json.loads(call.arguments)}
    if record.truncation is not None:
        content["truncation"] = record.truncation.model_dump(mode="json")
    if record.incomplete:
        content["incomplete"] = True
    if record.denied:
        content["denied"] = True
    return content


__all__ = ["DELEGATE_TOOL", "REGISTRIES", "AccessDenied", "AgentConfig", "AgentDeleted",
           "AuditGrant", "AuditGrants", "Crash",
           "CrashPlan", "ExecutorConfig", "HistoryCaller", "ReferenceRuntime", "RunState",
           "SharedField"]
