"""The reference runtime: the imperative shell that runs the ReAct root role's common loop by
composing the pure core (§1 to §11). It loads facts, calls the core, keeps what the core returns
and calls the ports; it decides nothing the core decides.

One Session of one Agent, one Run per question. A business loop is (§3, §5, §6, §7, §8):

    prepare context at a fixed input cutoff → request hooks → measure → a compaction episode
    when triggered → hard-window check → T_FREEZE → model attempts on the same frozen request
    → first output (T_FIRST_OUTPUT) → raw result → response hooks → effective result → the
    tool batch (per call: pre-hook, the handler with the effective arguments, post-hook) →
    one feedback commit in action order → next loop.

The Run ends with a final answer, a stop, the loop limit, the deadline (a logical clock), or an
error with the design's code; APP-FINALIZE then carries undelivered supplements. A compaction
never counts as a business loop. This first runtime keeps the pure-core values in memory;
storage and crash recovery are layered on in issues #6 and #8.
"""

import copy
import json
import uuid as uuidlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Literal
from uuid import UUID

from ctxspec.reference import delivery as dl
from ctxspec.reference.budget import (
    BudgetConfig,
    CompactionEvaluation,
    ResolvedBudget,
    evaluate_compaction,
    fits_hard_window,
    resolve_budget,
)
from ctxspec.reference.compaction import (
    ChunkProgress,
    CompactionPlan,
    CompactionRequest,
    RequestParts,
    next_step,
    plan_compaction,
    split_request,
    start_episode,
    useful_chunk_floor,
)
from ctxspec.reference.compaction import commit_chunk as commit_episode_chunk
from ctxspec.reference.compaction import complete_episode as finish_episode
from ctxspec.reference.compaction import fail_episode as fail_compaction
from ctxspec.reference.compaction import fits_window as compaction_fits
from ctxspec.reference.contracts import (
    TERMINAL_RUN_STATUSES,
    CompactionEpisode,
    ContextRecord,
    EpisodeStatus,
    InputKind,
    MessageRole,
    MutationSourceKind,
    Operation,
    OperationPurpose,
    OperationState,
    PayloadRef,
    RoleContext,
    Run,
    RunStatus,
    UserInput,
)
from ctxspec.reference.effective import (
    Committed,
    ContextState,
    FieldChange,
    RawRecord,
    RevisionConflict,
    Scope,
    append_records,
    commit_changes,
    effective_record,
    effective_records,
    mutation_contract,
    new_context,
    revision_contract,
)
from ctxspec.reference.errors import ErrorCode
from ctxspec.reference.history import EndedRun, InputOccurrence, InputPlacement, project_history
from ctxspec.reference.hooks import (
    BudgetRoom,
    ChainOutcome,
    ChangeSet,
    GateChecks,
    HookCall,
    HookProposal,
    denial_feedback,
    execution_gate,
    run_chain,
)
from ctxspec.reference.ports import (
    Artifact,
    Clock,
    Complete,
    ContextLengthExceeded,
    HookContext,
    HookPoint,
    HookPort,
    HookReply,
    ModelCall,
    ModelOutcome,
    ModelPort,
    MomentPort,
    NoMoments,
    PartialThenFailed,
    ProposedCall,
    Purpose,
    ToolOutcome,
    ToolPort,
    ToolSpec,
)
from ctxspec.reference.protection import ProtectedInput, check_protected_inputs
from ctxspec.reference.protocol import (
    UnsettledBatch,
    argument_problems,
    bounded_preview,
    read_range,
    structured_error,
)
from ctxspec.reference.registry import JSON, FieldRegistry, FieldSpec
from ctxspec.reference.runtime import trace as tr
from ctxspec.reference.runtime.coordinator import PendingCommit, committed_runs
from ctxspec.reference.runtime.history_source import StoredHistory
from ctxspec.reference.runtime.store import (
    CommitCoordinator,
    CommitFailed,
    Store,
    Write,
    checkpoint_write,
    delete,
    event_write,
    insert,
    insert_doc,
    record_write,
    revision_write,
    sweep_blobs,
    update,
    update_doc,
    upsert,
)
from ctxspec.reference.snapshots import (
    ActivePointer,
    SourceManifest,
    build_manifest,
    make_snapshot,
    manifest_document,
    switch_active,
    view_hash,
    view_with_snapshot,
)
from ctxspec.reference.tokens import EstimationRequest, PromptMessage, TokenEstimator
from ctxspec.reference.view import (
    VIEW_ADAPTER,
    EffectiveRecord,
    ModelView,
    RenderedRequest,
    ViewKind,
    ViewMessage,
    estimation_request,
    render_request,
    rendered_estimation,
)

EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
REQUEST_DENIED = "a hook denied the model request; it was not sent"
RESPONSE_DENIED = "a hook denied the model response; it was not delivered"
INVOCATION_ERRORS = frozenset({ErrorCode.CONTEXT_PROTECTED_INPUT_TOO_LARGE.value,
                               ErrorCode.CONTEXT_WINDOW_EXCEEDED.value,
                               ErrorCode.COMPACTION_FAILED.value})
"""The context and compaction errors that end the whole AgentInvocation, wherever in it they
happen (§8 "终结所属 AgentInvocation", §11; Q77)."""
CompactionPolicy = Callable[[ResolvedBudget, int, int], CompactionEvaluation]
ClientEventKind = Literal["run_started", "input_received", "progress", "run_ended"]
HistoryContent = Literal["raw", "effective"]
ROOT_ROLE = "root"
DEFAULT_AGENT_ID = UUID(int=1)
DEFAULT_RELEASE_ID = UUID(int=2)
NO_SCOPE = UUID(int=0)
"""The scope a shared-scope patch addresses when the Run registers no shared field."""

REGISTRIES: dict[HookPoint, FieldRegistry] = {
    "model.pre_request": FieldRegistry("model.pre_request", "1", (
        FieldSpec("text", None, "string"),
        FieldSpec(None, "params.temperature", "number"))),
    "model.post_response": FieldRegistry("model.post_response", "1", (
        FieldSpec("text", "text", "string"),)),
    "tool.pre_call": FieldRegistry("tool.pre_call", "1", (
        FieldSpec("tool_call:{call_id}.arguments", "arguments", "object", required=True),)),
    "tool.post_call": FieldRegistry("tool.post_call", "1", (
        FieldSpec(None, "result", "string"),)),
    # A compaction request's hook may correct a record of the role's context (say, redact it
    # before it is summarised); the request's own sources and cutoff are not writable (§8).
    "compaction.pre_request": FieldRegistry("compaction.pre_request", "2", (
        FieldSpec("text", None, "string"),)),
    "compaction.post_response": FieldRegistry("compaction.post_response", "1", (
        FieldSpec(None, "summary", "string"),)),
}
"""The field registries of the reference hook points (versioned; recorded with decisions)."""


@dataclass(frozen=True)
class ExecutorConfig:
    """The Executor role of a Planner Agent: its own system prompt and tools (§1, §2, §5)."""

    system_prompt: str = "You carry out one task the Planner handed over."
    tools: tuple[ToolSpec, ...] = ()


@dataclass(frozen=True)
class SharedField:
    """A Run-level shared field registered for named consumer roles (§3 作用域)."""

    name: str
    text: str
    consumers: tuple[str, ...]


DELEGATE_TOOL = "delegate"
READ_TOOL = "result.read"
"""The runtime's own tool behind a bounded preview (§6): arguments ``result_ref`` (the digest a
truncated mark names), ``from`` and ``to`` (characters); it answers the stored range."""
"""The Planner's call that starts an Executor: arguments task, constraints, materials."""


@dataclass(frozen=True)
class AgentConfig:
    """An Agent's resolved configuration, frozen for every Run (§7: the platform resolves it)."""

    system_prompt: str
    budget: BudgetConfig
    tools: tuple[ToolSpec, ...] = ()
    recent_runs: int = 2
    loop_limit: int = 8
    run_deadline: int | None = None
    """Logical ticks from the Run's start; None for no deadline."""
    model_attempts: int = 2
    custom_compaction_prompt: str | None = None
    shared: tuple[SharedField, ...] = ()
    tool_quota: int | None = None
    """Tool calls a Run may make (its roles together); None for no quota."""
    persistent_sandbox: bool = False
    """Without a persistent sandbox the workspace files are deleted when a Run ends; history,
    context and blobs stay (§1)."""
    retry_unknown_tools: bool = False
    """After a takeover, run again a tool that started but whose result was never saved (its
    side effect is unknown, §10); by default its outcome is reported as unknown."""
    executor: ExecutorConfig | None = None
    """Set for a Planner Agent: a ``delegate`` call in its batch runs an Executor."""
    preview_chars: int = 4000
    """A tool result longer than this reaches the model as a bounded, marked preview (§6)."""
    agent_id: UUID = DEFAULT_AGENT_ID
    release_id: UUID = DEFAULT_RELEASE_ID
    audit_readers: tuple[str, ...] = ()
    """The audit callers the Agent's owner authorised to read its Sessions' history (§1, §11
    "经授权的审计"); an audit caller names itself and is refused unless granted here."""


@dataclass
class RunState:
    run_id: UUID
    run_no: int
    question_input_id: UUID
    context_id: UUID
    started_at_tick: int
    status: RunStatus = RunStatus.RUNNING
    error_code: str | None = None
    message: str | None = None
    loops: int = 0
    stop_requested: bool = False
    episodes: list[CompactionEpisode] = field(default_factory=list)
    snapshot: tuple[UUID, SourceManifest, str] | None = None
    pointer: ActivePointer = field(default_factory=lambda: ActivePointer(None, 1))
    run_seq: int = 0
    role: str = ROOT_ROLE
    parent: "RunState | None" = None
    """For an Executor execution: the Planner's task it belongs to (same Run)."""
    handover: tuple[ProtectedInput, ...] = ()
    final_text: str | None = None
    tool_calls_made: int = 0
    shared_context_id: UUID | None = None
    """The Run's shared scope (its own revisions; §3: shared fields are not a role's context)."""
    ended_at_tick: int = 0
    last_model_operation_id: UUID | None = None
    resume_attempt: int = 1
    """The attempt a restored Run's frozen request goes on with (its failed ones are stored)."""
    resume_partial: bool = False
    """Whether the last stored failed attempt had shown a partial output."""
    finished_executor_loops: int = 0
    """The Loops of this Run's Executor executions that a takeover found finished (their tasks
    are not restored); with the tasks still held they make the Run's shared Loop budget."""


@dataclass(frozen=True)
class HistoryCaller:
    """Who asks the history API: a Session, and a role, audit or a workspace script. For
    ``audit``, ``role`` names the audit caller, which the Agent must grant
    (``AgentConfig.audit_readers``)."""

    session_id: UUID
    kind: Literal["role", "audit", "script"]
    role: str | None = None


class AccessDenied(PermissionError):
    """The history API refused a caller; the message names nothing of what exists."""


def loop_key(run: "RunState", name: str) -> str:
    """A role's checkpoint name: the root role's is plain; an Executor's carries its context,
    since its NodeTask shares the Run."""
    return name if run.parent is None else f"{name}:{run.context_id}"


class Crash(BaseException):
    """A simulated process death at a commit boundary: the runtime object is abandoned."""


@dataclass(frozen=True)
class CrashPlan:
    """Crash just before or just after the n-th commit of a name (in this incarnation), or —
    ``fails`` — have the store refuse that commit (an injected persistence fault)."""

    commit: str
    occurrence: int = 1
    when: Literal["before", "after", "fails"] = "after"


class AgentDeleted(RuntimeError):
    """A stimulus for a Session whose Agent was deleted: nothing of it is left to run (§1)."""


class ReferenceRuntime:
    """The reference runtime of one Session."""

    def __init__(self, agent: AgentConfig, *, model: ModelPort, tools: ToolPort,
                 hooks: HookPort, estimator: TokenEstimator, clock: Clock,
                 seed: str | None = None, store: Store | None = None,
                 coordinator: CommitCoordinator | None = None,
                 policy: CompactionPolicy = evaluate_compaction,
                 crash: CrashPlan | None = None, restoring: bool = False) -> None:
        budget = resolve_budget(agent.budget)
        if not isinstance(budget, ResolvedBudget):
            raise ValueError(f"{budget.code.value}: {budget.field}: {budget.rule}")
        self.agent = agent
        self.budget = budget
        self.model, self.tools, self.hooks = model, tools, hooks
        self.estimator, self.clock = estimator, clock
        self.policy = policy
        """The CompactionPolicy port (§3): replaceable; whatever it decides, the runtime still
        re-checks the protected inputs and the hard window before anything is sent."""
        # Identities are unique per runtime unless a caller (a scenario) asks for determinism
        # with a seed: two default runtimes on one store never collide.
        self._seed = uuidlib.uuid4().hex if seed is None else seed
        self._counter = 0
        self.session_id = self._id()
        self.book = dl.empty_book(self.session_id)
        self.runs: dict[UUID, RunState] = {}
        self.contexts: dict[UUID, ContextState] = {}
        self.texts: dict[UUID, str] = {}
        self.blobs: dict[str, str] = {}
        self.moments: MomentPort = NoMoments()
        """The outside world at the loop's boundaries (a scenario's moment triggers)."""
        self.workspace: dict[str, str] = {}
        """The Agent's workspace: files tools and scripts write. Session facts (records,
        inputs, checkpoints) never live here, so writing a file never changes them (§1)."""
        """digest → the whole body of a tool result (content-addressed)."""
        """input_id → the original text of every UserInput."""
        self.trace = tr.Trace()
        self._ordinals: dict[str, int] = {}
        self.store = store or Store()
        self.coordinator = coordinator or CommitCoordinator(self.store)
        self.operations: dict[UUID, Operation] = {}
        self.tasks: list[RunState] = []
        """Executor executions (each a NodeTask with its own RoleContext)."""
        self.pending = PendingCommit()
        """The facts changed since the previous commit, each put there by the step that
        changed it: the next named commit writes them (no comparison with the store)."""
        self._committed_runs: dict[UUID, Run] = {}
        """The last committed version of each Run: the owner guard's expected epoch."""
        self.crash = crash
        self._commit_counts: dict[str, int] = {}
        self._resume: dict[UUID, dict[str, JSON]] = {}
        """Run id (root role) or Executor context id → the loop checkpoint a restored runtime
        continues from (§10)."""
        if restoring:
            return
        # The Agent may have had Sessions before this one: its row is written once.
        self._commit("SESSION_OPENED", [
            upsert("agents", "agent_id", agent_id=agent.agent_id, config=json.dumps(
                {"system_prompt": agent.system_prompt, "recent_runs": agent.recent_runs,
                 "loop_limit": agent.loop_limit, "window": budget.window},
                sort_keys=True)),
            insert("sessions", session_id=self.session_id, agent_id=agent.agent_id)])

    # --- identities and small helpers ---------------------------------------------------------

    def _id(self) -> UUID:
        self._counter += 1
        return uuidlib.uuid5(uuidlib.NAMESPACE_URL, f"ctxspec:{self._seed}:{self._counter}")

    def _time(self) -> datetime:
        return EPOCH + timedelta(seconds=self.clock.now())

    def _ordinal(self, key: str) -> int:
        self._ordinals[key] = self._ordinals.get(key, 0) + 1
        return self._ordinals[key]

    def _ref(self, text: str) -> PayloadRef:
        """A content-addressed blob of ``text``, written with the next commit."""
        return self.pending.blob(text)

    # --- the store: every change through one named commit ----------------------------------

    def _commit(self, name: str, writes: Sequence[Write]) -> None:
        """One RuntimeCommit: ``writes`` and the facts the steps since the previous commit put
        into the pending write set, in one transaction. A failure is a runtime fault
        (CommitFailed propagates), never a hook failure, and nothing continues on a value
        storage does not have (CTX-3.90)."""
        count = self._commit_counts.get(name, 0) + 1
        self._commit_counts[name] = count
        plan = self.crash
        hit = plan is not None and plan.commit == name and plan.occurrence == count
        if hit and plan is not None and plan.when == "before":
            raise Crash(f"before {name} #{count}")
        taken = self.pending.take()
        all_writes = [*taken.blob_writes(), *self._owner_guard(), *taken.rows(), *writes]
        try:
            if hit and plan is not None and plan.when == "fails":
                raise CommitFailed(name, RuntimeError("the store refused the commit"))
            self.coordinator.commit(name, all_writes)
        except CommitFailed as failed:
            self.pending.give_back(taken)
            # Surfaced as what it is — a required write that did not happen — and the runtime
            # stops on it: nothing goes on with values the store does not have, and it is never
            # taken for a hook failure (CTX-3.90, CTX-3.91, CTX-10.28).
            self.trace.add(tr.PersistenceFailed(name, count, str(failed)))
            raise
        self._committed_runs.update((r.run_id, r) for r in committed_runs(all_writes))
        if hit:
            raise Crash(f"after {name} #{count}")

    def commits_made(self, name: str) -> int:
        """How many RuntimeCommits of ``name`` this incarnation made (crash plans count them)."""
        return self._commit_counts.get(name, 0)

    def _owner_guard(self) -> list[Write]:
        """A takeover moved the owner epoch on: a commit of the previous owner of the active
        Run matches no row and fails, so its late result can never advance the Run
        (CTX-10.23, CTX-10.24)."""
        run = self.active_run
        stored = None if run is None else self._committed_runs.get(run.run_id)
        if run is None or stored is None:
            return []
        # Sets the status it already has: the write matters only for its WHERE clause.
        return [update("runs", ("run_id", "owner_epoch"), run_id=run.run_id,
                       owner_epoch=stored.owner_epoch, status=stored.status)]

    def _checkpoint(self, run: RunState, stage: str, **facts: JSON) -> Write:
        """The root loop's position, committed with the step that reached it (§10: where the
        role is, which operation, what is settled; never copies of messages)."""
        return checkpoint_write(run.run_id, loop_key(run, "loop"), {
            "stage": stage, "loops": run.loops, "tool_calls_made": run.tool_calls_made,
            "tick": self.clock.now(), **facts})

    # --- staging: each change puts its own rows into the next commit ------------------------

    def _put_context(self, context_id: UUID, state: ContextState, *, new: bool = False
                     ) -> None:
        """Keep a context's new state and stage what it adds: its new records, mutations and
        revisions (rendered at the commit, which dates them), and its role's RoleContext."""
        before = self.contexts.get(context_id)
        self.contexts[context_id] = state
        key: tuple[object, ...] = ("context", context_id)
        if key not in self.pending.entries:
            done = (0, 0) if before is None else (len(before.records), len(before.revisions))
            self.pending.put(key, lambda _new: self._context_rows(context_id, *done))
        role = next((r for r in (*self.runs.values(), *self.tasks)
                     if r.context_id == context_id), None)
        if role is not None:
            self._put_role(role, new=new)

    def _put_role(self, run: RunState, *, new: bool = False) -> None:
        """Stage a role's RoleContext as it is when the commit is taken."""
        def rows(inserted: bool) -> list[Write]:
            doc = self._role_context(run)
            return [insert_doc(doc, run_id=doc.invocation_id) if inserted
                    else update_doc(doc, run_id=doc.invocation_id)]
        self.pending.put(("role_contexts", run.context_id), rows, new=new)

    def _put_run(self, run: RunState, *, new: bool = False) -> None:
        """Stage a Run's row as it is when the commit is taken (its end, its owner epoch)."""
        self.pending.put(("runs", run.run_id), lambda inserted: [
            insert_doc(self._run_contract(run)) if inserted
            else update_doc(self._run_contract(run))], new=new)

    def _put_episode(self, run: RunState, episode: CompactionEpisode, *, new: bool = False
                     ) -> None:
        if new:
            run.episodes.append(episode)
        else:
            run.episodes = [episode if e.episode_id == episode.episode_id else e
                            for e in run.episodes]
        self.pending.put_doc(episode, new=new)

    def _context_rows(self, context_id: UUID, records: int, revisions: int) -> list[Write]:
        state = self.contexts[context_id]
        writes = [record_write(raw) for raw in state.records[records:]]
        for revision in state.revisions[revisions:]:
            for mutation_id in revision.mutation_ids:
                writes.append(insert_doc(mutation_contract(
                    state, mutation_id, cause_operation_id=None, created_at=self._time())))
            writes.append(revision_write(revision_contract(
                state, revision.revision, commit_ref=f"rev:{context_id}:{revision.revision}",
                created_at=self._time()), revision.overrides))
        return writes

    def _operation(self, operation_id: UUID, run: RunState, purpose: OperationPurpose,
                   purpose_key: str, state: OperationState, raw: PayloadRef | None = None,
                   effective: PayloadRef | None = None) -> None:
        operation = Operation(
            operation_id=operation_id, run_id=run.run_id, node_task_id=run.context_id,
            purpose=purpose, purpose_key=purpose_key, state=state, raw_result_ref=raw,
            effective_result_ref=effective)
        self.pending.put_doc(operation, new=operation_id not in self.operations)
        self.operations[operation_id] = operation
        self.trace.add(tr.OperationState(operation_id, purpose_key, state.value))

    def _record_seqs(self) -> dict[UUID, tuple[UUID, int]]:
        return {raw.record_id: (context_id, raw.record.context_seq)
                for context_id, state in self.contexts.items() for raw in state.records}

    def _seqs(self) -> dict[UUID, list[int]]:
        return {context_id: [raw.record.context_seq for raw in state.records]
                for context_id, state in self.contexts.items()}

    def _heads(self) -> dict[UUID, int]:
        return {context_id: state.head.revision for context_id, state in self.contexts.items()}

    def _run_contract(self, run: RunState) -> Run:
        ended = run.status in TERMINAL_RUN_STATUSES
        return Run(run_id=run.run_id, session_id=self.session_id, run_no=run.run_no,
                   question_input_id=run.question_input_id, status=run.status,
                   error_code=run.error_code if ended and run.status is not RunStatus.SUCCEEDED
                   else None, owner_epoch=run.pointer.lease_epoch,
                   started_at=EPOCH + timedelta(seconds=run.started_at_tick),
                   ended_at=EPOCH + timedelta(seconds=run.ended_at_tick) if ended else None)

    def _role_context(self, run: RunState) -> RoleContext:
        state = self.contexts[run.context_id]
        return RoleContext(context_id=run.context_id, invocation_id=run.run_id,
                           owner_node_task_id=run.context_id, role_key=run.role,
                           record_head=state.head.record_watermark,
                           effective_revision=state.head.revision,
                           active_snapshot_id=run.pointer.snapshot_id,
                           last_model_operation_id=run.last_model_operation_id)

    def _event(self, run: RunState, event: ClientEventKind, detail: str,
               error_code: str | None = None) -> None:
        run.run_seq += 1
        self.pending.put_rows(("events", run.run_id, run.run_seq), [
            event_write(run.run_id, run.run_seq, {"run_seq": str(run.run_seq)})])
        self.trace.add(tr.ClientEvent(run.run_id, run.run_seq, event, detail, error_code))

    def _trace_deliveries(self, writes: dl.WriteSet) -> None:
        """Stage the inputs and deliveries a delivery step wrote, and trace the deliveries."""
        for received in writes.inputs:
            self.pending.put_doc(received, new=True)
        for delivery in writes.inserted:
            self.pending.put_doc(delivery, new=True)
        for delivery in writes.updated:
            self.pending.put_doc(delivery, new=False)
        for delivery in (*writes.inserted, *writes.updated):
            self.trace.add(tr.DeliveryChanged(delivery.input_id, delivery.delivery_id,
                                              delivery.state.value, delivery.target_run_id,
                                              delivery.previous_delivery_id))

    @property
    def active_run(self) -> RunState | None:
        run_id = dl.active_run(self.book)
        return self.runs.get(run_id) if run_id is not None else None

    # --- stimuli ------------------------------------------------------------------------------

    def ask(self, text: str) -> UUID:
        """A question: APP-INPUT creates its Run and binds waiting supplements (§2, §5)."""
        self._require_agent()
        if self.active_run is not None:
            raise RuntimeError("a Run is active; a new question waits until it ends")
        run_id, context_id = self._id(), self._id()
        received = self._input(InputKind.QUESTION, text, run_id)
        applied = dl.app_input(self.book, received, delivery_id=self._id(), run_id=run_id)
        if isinstance(applied, dl.DeliveryRejected):
            raise RuntimeError(f"{applied.code}: {applied.reason}")
        self.book, writes = applied
        self._trace_deliveries(writes)
        run = RunState(run_id, len(self.runs) + 1, received.input_id, context_id,
                       self.clock.now())
        self.runs[run_id] = run
        self._put_run(run, new=True)
        self._put_context(context_id, new_context(context_id, Scope("private", ROOT_ROLE)),
                          new=True)
        # The question, with the carried supplements bound to it in receive order, is a fact of
        # its Run from the start: a Run stopped before its first request still shows it (§4).
        self._append_inputs(run, [u for u in self.book.inputs if any(
            d.target_run_id == run_id for d in dl.deliveries_of(self.book, u.input_id))])
        if self.agent.shared:
            run.shared_context_id = self._shared_scope(run)
        self._event(run, "run_started", f"run {run.run_no}")
        self._commit("APP-INPUT", [])
        return run_id

    def supplement(self, text: str) -> UUID:
        """A supplement: another UserInput, never a Run (§2, §5)."""
        self._require_agent()
        run = self.active_run
        received = self._input(InputKind.SUPPLEMENT, text, run.run_id if run else None)
        applied = dl.app_input(self.book, received, delivery_id=self._id())
        if isinstance(applied, dl.DeliveryRejected):
            raise RuntimeError(f"{applied.code}: {applied.reason}")
        self.book, writes = applied
        self._trace_deliveries(writes)
        if run is not None:
            self._event(run, "input_received", "supplement")
        self._commit("APP-INPUT", [])
        return received.input_id

    def _input(self, kind: InputKind, text: str, run_id: UUID | None) -> UserInput:
        input_id = self._id()
        self.texts[input_id] = text
        return UserInput(input_id=input_id, session_id=self.session_id,
                         input_seq=len(self.book.inputs) + 1, origin_run_id=run_id, kind=kind,
                         body_ref=self._ref(text), received_at=self._time())

    def write(self, target: str, field_key: str, value: JSON) -> None:
        """An independent writer (§9 "覆盖材料在压缩期间被并发修改"): another part of the
        application corrects a field of a record of the active Run's root context, as its own
        ContextMutation and revision (source ``user:writer``), committed at once. Whatever runs
        meanwhile sees it only through the committed facts — a compaction's switch CAS
        included. ``target`` is a record id or ``question``, ``first_assistant``, ``last``."""
        run = self.active_run
        if run is None:
            raise RuntimeError("an independent write needs an active Run")
        state = self.contexts[run.context_id]
        named = self._named_records(run, state)
        record_id = named[target] if target in named else UUID(target)
        raw = state.record(record_id)
        if raw is None or raw.record.message_kind == "user_ref":
            raise ValueError(f"{target}: no record of the Run a writer may correct (a user "
                             "input is never rewritten, §3)")
        committed = commit_changes(
            state, [FieldChange(record_id, field_key, value, (f"writer:{field_key}",))], [],
            base_revision=state.head.revision, mutation_id=self._id(),
            source_kind=MutationSourceKind.USER, source_ref="writer")
        if isinstance(committed, RevisionConflict):
            raise RuntimeError(f"CONTEXT_REVISION_CONFLICT: {committed.reason}")
        self._put_context(run.context_id, committed.state)
        self._commit("CONTEXT_WRITTEN", [])

    def stop(self) -> None:
        """The user stops the active Run: no new compaction or business attempt starts (§11)."""
        run = self.active_run
        if run is not None and not run.stop_requested:
            run.stop_requested = True
            # A stop is durable the moment it is accepted, so a takeover does not resume a Run
            # the user stopped. Only the request is written: the step in flight commits itself.
            self.coordinator.commit("STOP_REQUESTED", [
                *self._owner_guard(), checkpoint_write(run.run_id, "stop",
                                                       {"tick": self.clock.now()})])

    # --- the loop -----------------------------------------------------------------------------

    def advance(self) -> None:
        """Run the active Run until it ends (continuing a restored Run where it stopped)."""
        self._require_agent()
        run = self.active_run
        if run is not None and run.run_id in self._resume:
            self._continue(run, self._resume.pop(run.run_id))
        while run is not None and run.status is RunStatus.RUNNING:
            self._loop(run)

    def _continue(self, run: RunState, checkpoint: Mapping[str, JSON]) -> None:
        """§10: continue from the last committed step, from stored facts alone. A saved raw
        result goes on to post-processing (no new model call); settled batch members are
        reused and only the rest run; a committed feedback is not appended again; a frozen
        request whose result was never saved is asked again as a new attempt of the same
        Operation with the same frozen inputs."""
        stage = checkpoint.get("stage")
        operation = checkpoint.get("operation_id")
        if stage == "raw_saved" and isinstance(operation, str):
            op = self.operations[UUID(operation)]
            if op.raw_result_ref is None:
                raise AssertionError("a raw_saved checkpoint has its raw result")
            raw = json.loads(self.store.text(op.raw_result_ref))
            self._accept(run, op.operation_id, Complete(raw["text"], tuple(
                ProposedCall(c["name"], c["arguments"], c.get("provider_call_id"),
                             c.get("malformed_arguments")) for c in raw["tool_calls"])))
        elif stage == "post" and isinstance(checkpoint.get("decision"), str):
            record_id = UUID(str(checkpoint["decision"]))
            raw_record = self.contexts[run.context_id].record(record_id)
            text = raw_record.content.get("text") if raw_record is not None else None
            self._after_response(run, record_id, text if isinstance(text, str) else "")
        elif stage == "batch":
            decision = checkpoint.get("decision")
            settled = checkpoint.get("settled")
            if not isinstance(decision, str):
                raise AssertionError("a batch checkpoint names its decision")
            record = next(r for r in effective_records(self.contexts[run.context_id])
                          if r.record_id == UUID(decision))
            if record.denied:  # a post-response deny committed before the crash (Q75)
                self._end(run, RunStatus.FAILED, ErrorCode.HOOK_DENIED, RESPONSE_DENIED)
                return
            if not record.tool_calls:
                run.final_text = record.text  # an Executor's answer is its member's result
                self._end(run, RunStatus.SUCCEEDED)
                return
            started = checkpoint.get("started")
            hooked = checkpoint.get("hooked")
            delegated = checkpoint.get("delegated")
            raws = checkpoint.get("raw")
            self._batch(run, record.record_id, [c.call_id for c in record.tool_calls],
                        settled if isinstance(settled, dict) else {},
                        started if isinstance(started, str) else None,
                        hooked if isinstance(hooked, dict) else {},
                        delegated if isinstance(delegated, dict) else {},
                        raws if isinstance(raws, dict) else {})
        elif stage == "denied":
            self._end(run, RunStatus.FAILED, ErrorCode.HOOK_DENIED, REQUEST_DENIED)
        elif stage in ("prepared", "frozen", "compacting") and isinstance(operation, str):
            run.loops -= 1  # the prepared request is the same loop, taken up again
            attempts = self.store.checkpoint(run.run_id, loop_key(run, "attempts"))
            refused = attempts.get("refused") if isinstance(attempts, dict) \
                and attempts.get("operation_id") == operation else None
            if isinstance(refused, int):  # the provider refused it: never sent again
                self._end(run, RunStatus.FAILED, ErrorCode.CONTEXT_LENGTH_EXCEEDED,
                          self._window_message(refused, "sent; the provider refused it"))
                return
            if isinstance(attempts, dict) and attempts.get("operation_id") == operation:
                failed = attempts.get("failed")
                run.resume_attempt = failed + 1 if isinstance(failed, int) else 1
                run.resume_partial = attempts.get("partial") is True
            self._loop(run, resume_operation=UUID(operation))

    def _end(self, run: RunState, status: RunStatus, error: ErrorCode | None = None,
             message: str | None = None, figures: dict[str, int] | None = None) -> None:
        status, error, message = self._ending(run, status, error, message)
        figures = figures if error is not None else None
        if run.parent is not None:
            # An Executor execution ends; its outcome becomes the Planner's batch member result
            # (committed by the delegation, EXECUTION_ENDED).
            run.status, run.message = status, message
            run.error_code = error.value if error is not None else None
            return
        run.status = status
        run.error_code = error.value if error is not None else None
        run.message = message
        self._put_run(run)
        carry = dl.to_carry(self.book, run.run_id)
        applied = dl.finalize(self.book, run_id=run.run_id,
                              carry_ids=[self._id() for _ in carry])
        if isinstance(applied, dl.DeliveryRejected):
            raise RuntimeError(f"{applied.code}: {applied.reason}")
        self.book, writes = applied
        self._trace_deliveries(writes)
        delivered = run.final_text if status is RunStatus.SUCCEEDED else None
        self.trace.add(tr.RunEnded(run.run_id, run.run_no, status.value, run.error_code,
                                   message, figures, delivered))
        run.ended_at_tick = self.clock.now()
        self._event(run, "run_ended", status.value, run.error_code)
        if not self.agent.persistent_sandbox:
            self.workspace.clear()  # working files only: no session fact lives there (CTX-1.15)
        self._commit("APP-FINALIZE", [])

    def _stop_pending(self, run: RunState) -> bool:
        return run.stop_requested or (run.parent is not None and run.parent.stop_requested)

    def _ending(self, run: RunState, status: RunStatus, error: ErrorCode | None,
                message: str | None) -> tuple[RunStatus, ErrorCode | None, str | None]:
        """A stop accepted before the role ends wins over whatever the operation in flight
        then did — a final answer, a failed or denied answer, a failed compaction chunk, a
        context error: the operation is wound up and kept as a fact, the Run ends ``stopped``
        (§11: no new attempt after a stop, "已有操作收束"; a root Run's stop "不能被局部错误处理
        吞掉"; Q76)."""
        if status is not RunStatus.STOPPED and self._stop_pending(run):
            return RunStatus.STOPPED, None, None
        return status, error, message

    def _stopped_or_out_of_time(self, run: RunState) -> bool:
        if run.stop_requested or (run.parent is not None and run.parent.stop_requested):
            self._end(run, RunStatus.STOPPED)
            return True
        deadline = self.agent.run_deadline
        # One deadline per Run: an Executor's calls count from the Run's start (§8, §11).
        started = (run.parent or run).started_at_tick
        if deadline is not None and self.clock.now() - started >= deadline:
            self._end(run, RunStatus.TIMED_OUT)
            return True
        return False

    def _stopped_before_freeze(self, run: RunState) -> bool:
        """A stop (or the deadline) that came while the request was prepared: no business
        attempt starts (§11 "不启动新的压缩或业务 Attempt").  CTX-11.5"""
        return self._stopped_or_out_of_time(run)

    def _loops_taken(self, run: RunState) -> int:
        """The Run's shared Loop budget spent: the business Loops of its root role and of every
        Executor execution it delegated (§11: a Loop "占 Run 共享 Loop"; root Loop exhaustion
        ends the whole tree).  CTX-11.9, CTX-11.13"""
        owner = run.parent or run
        return owner.loops + owner.finished_executor_loops + sum(
            task.loops for task in self.tasks if task.parent is owner)

    def _loop(self, run: RunState, resume_operation: UUID | None = None) -> None:
        if self._stopped_or_out_of_time(run):
            return
        if self._loops_taken(run) >= self.agent.loop_limit:
            self._end(run, RunStatus.LOOP_EXHAUSTED)
            return
        run.loops += 1
        operation_id = resume_operation or self._id()
        cutoff = self.book.inputs[-1].input_seq
        protected = run.handover if run.parent is not None else self._prepare_inputs(run, cutoff)
        view = self._view(run, protected)
        if isinstance(view, UnsettledBatch):
            raise AssertionError("the shell settles every batch before the next loop")
        # A resumed request passed its pre-request chain before it was compacted or frozen;
        # the chain's changes are in the effective context, so it is not run again (§10).
        chain = None if resume_operation is not None else self._hooks(
            "model.pre_request", run, {"params": {}}, None, None, extra=lambda outcome:
            self._request_decided(run, operation_id, outcome),
            budget=self._fixed_room(run, view, protected)
            if self.hooks.registered("model.pre_request") else None)
        if chain is not None and chain.blocked:  # never sent; the role ends (Q75)
            self._end(run, RunStatus.FAILED, ErrorCode.HOOK_DENIED, REQUEST_DENIED)
            return
        if chain is not None and chain.items:
            view = self._view(run, protected)
            if isinstance(view, UnsettledBatch):
                raise AssertionError("hooks never unsettle a batch")
        prepared = self._fit(run, operation_id, view, protected)
        if prepared is None:
            return
        view, decision, snapshot_id = prepared
        self.moments.at("freeze")
        if self._stopped_before_freeze(run):
            return
        checkpoint = [self._checkpoint(run, "frozen", operation_id=str(operation_id))]
        if run.parent is None:  # an Executor claims no user input: it has its hand-over
            frozen = dl.freeze(self.book, run_id=run.run_id, operation_id=operation_id,
                               input_cutoff=cutoff)
            if isinstance(frozen, dl.DeliveryRejected):
                raise RuntimeError(f"{frozen.code}: {frozen.reason}")
            self.book, writes, manifest = frozen
            self._trace_deliveries(writes)
            checkpoint = [self._checkpoint(
                run, "frozen", operation_id=str(operation_id), cutoff=cutoff,
                manifest=json.loads(manifest.model_dump_json()))]
        self._operation(operation_id, run, OperationPurpose.MODEL, f"model:{operation_id}",
                        OperationState.RUNNING)
        run.last_model_operation_id = operation_id
        self._put_role(run)
        self._commit("T_FREEZE", checkpoint)
        self._call_business_model(run, operation_id, view, protected, cutoff, decision,
                                  snapshot_id)

    def _request_decided(self, run: RunState, operation_id: UUID,
                         chain: ChainOutcome | None) -> list[Write]:
        """The loop's position after the pre-request chain, committed with its decision: a
        deny is a fact a takeover ends the role on, never a request it sends (§3, Q75)."""
        stage = "denied" if chain is not None and chain.blocked else "prepared"
        return [self._checkpoint(run, stage, operation_id=str(operation_id))]

    def _prepare_inputs(self, run: RunState, cutoff: int) -> tuple[ProtectedInput, ...]:
        """The protected inputs of this request (the Run's inputs up to the cutoff), their
        user_ref records appended to the Run's context once (§5)."""
        state = self.contexts[run.context_id]
        shown = {raw.record.origin_input_id for raw in state.records
                 if raw.record.message_kind == "user_ref"}
        bound = [u for u in self.book.inputs if u.input_seq <= cutoff and any(
            d.target_run_id == run.run_id for d in dl.deliveries_of(self.book, u.input_id))]
        self._append_inputs(run, [u for u in bound if u.input_id not in shown])
        return tuple(ProtectedInput(u.input_id, u.input_seq, self.texts[u.input_id])
                     for u in bound)

    def _append_inputs(self, run: RunState, inputs: Sequence[UserInput]) -> None:
        if not inputs:
            return
        state = self.contexts[run.context_id]
        seq = len(state.records)
        records = [RawRecord(ContextRecord(
            record_id=self._id(), context_id=run.context_id, context_seq=seq + i,
            run_id=run.run_id, role=MessageRole.USER, message_kind="user_ref",
            payload_ref=u.body_ref, operation_id=None, call_id=None,
            origin_input_id=u.input_id), {"text": self.texts[u.input_id]})
            for i, u in enumerate(inputs, start=1)]
        self._put_context(run.context_id, append_records(
            state, records, mutation_id=self._id(), source_kind=MutationSourceKind.USER,
            source_ref="inputs").state)

    def _view(self, run: RunState, protected: Sequence[ProtectedInput]
              ) -> ModelView | UnsettledBatch:
        """The §4 projection: ended Runs read from the store page by page (the facts), the
        current role's context from its effective state."""
        view = self._projection(run, protected)
        shared = self._shared_messages(run)
        if isinstance(view, UnsettledBatch) or not shared:
            return view
        return ModelView((*shared, *view.messages))

    def _projection(self, run: RunState, protected: Sequence[ProtectedInput]
                    ) -> ModelView | UnsettledBatch:
        if run.parent is not None:  # an Executor sees no history: only its own context
            return project_history(
                ended_runs=[], recent_runs=0, source=_HandoverOnly(),
                current_run_id=run.run_id,
                current_records=effective_records(self.contexts[run.context_id]),
                protected_input_ids={p.input_id for p in protected})
        history = StoredHistory(self.store, self.session_id)
        # A placeholder states its call's real Operation state; a call with none never
        # started (§6: the projection never changes a state, Q69).
        states = {UUID(op.purpose_key.split(":", 1)[1]): op.state
                  for op in self.operations.values() if op.purpose is OperationPurpose.TOOL}
        return project_history(
            ended_runs=history.ended_runs(run.run_no), recent_runs=self.agent.recent_runs,
            source=history, current_run_id=run.run_id,
            current_records=effective_records(self.contexts[run.context_id]),
            protected_input_ids={p.input_id for p in protected}, call_states=states)

    def _system(self, run: RunState) -> ViewMessage:
        executor = self.agent.executor
        text = executor.system_prompt if run.parent is not None and executor else \
            self.agent.system_prompt
        return ViewMessage(role=MessageRole.SYSTEM, kind=ViewKind.SYSTEM_PROMPT, text=text)

    def _tools(self, run: RunState) -> tuple[ToolSpec, ...]:
        """The role's own tools: an Executor never gets the Planner's, nor ``delegate``."""
        executor = self.agent.executor
        return executor.tools if run.parent is not None and executor else self.agent.tools

    def _schemas(self, run: RunState) -> tuple[str, ...]:
        return tuple(tool.schema for tool in self._tools(run))

    def _fit(self, run: RunState, operation_id: UUID, view: ModelView,
             protected: Sequence[ProtectedInput]
             ) -> tuple[ModelView, str, UUID | None] | None:
        """§7/§8: apply the active snapshot if it still applies, measure, compact once when
        triggered, then the hard window. None when the Run ended on the way."""
        view, snapshot_id, _ = view_with_snapshot(view, run.snapshot)
        split = split_request(self._parts(run, view, protected), self.estimator)
        verdict = self.policy(self.budget, split.fixed_tokens, split.material_tokens)
        decision = verdict.decision
        self.trace.add(tr.BudgetDecision(
            operation_id, decision, split.input_tokens, split.fixed_tokens,
            split.material_tokens, self.budget.input_budget, self.budget.trigger_threshold,
            verdict.summary_target, verdict.error_code.value if verdict.error_code else None,
            run.role))
        if decision == "error":  # the fixed input itself does not fit (§8; Q83)
            self._end(run, RunStatus.FAILED, verdict.error_code,
                      self._fixed_message(split.fixed_tokens, split.input_tokens),
                      self._figures(split.input_tokens, fixed=split.fixed_tokens))
            return None
        if decision == "compact":
            if verdict.summary_target is None or verdict.summary_default_cap is None:
                raise AssertionError("a compact decision has a summary target and its cap")
            floor = useful_chunk_floor(verdict.summary_target, verdict.summary_default_cap)
            compacted = self._compact(run, operation_id, view, split.material,
                                      verdict.summary_target, split.input_tokens,
                                      split.material_tokens, protected, floor)
            # A stop or the Run's deadline that came while the episode ran starts no business
            # attempt: the episode and the business task share the Run's cancellation and
            # deadline (§8, §11; CTX-8.7, CTX-11.5).
            if compacted is None or self._stopped_or_out_of_time(run):
                return None
            view, snapshot_id = compacted
        final = ModelView((self._system(run), *view.messages))
        tokens = self.estimator.estimate(estimation_request(final, self._schemas(run))).tokens
        if check_protected_inputs(final, protected):
            raise AssertionError("a protected input is missing from the request")
        if not fits_hard_window(tokens, self.budget.output_reserve, self.budget.safety_margin,
                                self.budget.window):
            self._end(run, RunStatus.FAILED, ErrorCode.CONTEXT_WINDOW_EXCEEDED,
                      self._window_message(tokens, "after compaction" if decision == "compact"
                                           else "preparing the request"),
                      self._figures(tokens))
            return None
        return final, decision, snapshot_id

    def _parts(self, run: RunState, view: ModelView, protected: Sequence[ProtectedInput]
               ) -> RequestParts:
        """The request's parts for §8's F and M. A hook's annotation of a current protected
        input is a hook increment kept verbatim: it rides with its input and is never
        summarised (Q56)."""
        pinned = self._protected_annotations(run, protected)
        return RequestParts((self._system(run),), self._schemas(run),
                            tuple(m for m in view.messages if m.record_id not in pinned),
                            tuple(m for m in view.messages if m.record_id in pinned), (),
                            frozenset(p.input_id for p in protected))

    def _protected_records(self, run: RunState, protected: Sequence[ProtectedInput]
                           ) -> frozenset[UUID]:
        inputs = {p.input_id for p in protected}
        return frozenset(raw.record_id for raw in self.contexts[run.context_id].records
                         if raw.record.message_kind == "user_ref"
                         and raw.record.origin_input_id in inputs)

    def _protected_annotations(self, run: RunState, protected: Sequence[ProtectedInput]
                               ) -> frozenset[UUID]:
        questions = {str(r) for r in self._protected_records(run, protected)}
        return frozenset(raw.record_id for raw in self.contexts[run.context_id].records
                         if raw.record.message_kind == "annotation"
                         and raw.content.get("annotates") in questions)

    def _fixed_room(self, run: RunState, view: ModelView | UnsettledBatch,
                    protected: Sequence[ProtectedInput]) -> BudgetRoom | None:
        """§7: what a pre-request item adds to the fixed input (its annotations of current
        protected inputs) must fit the input budget B by itself, with the fixed input and what
        earlier items added; otherwise the item is discarded (ITEM_DOES_NOT_FIT, CTX-7.30).
        Everything else it changes is compressible and left to the compaction policy."""
        if isinstance(view, UnsettledBatch):
            return None
        split = split_request(self._parts(run, view, protected), self.estimator)
        questions = self._protected_records(run, protected)

        def tokens(messages: tuple[ViewMessage, ...]) -> int:
            return self.estimator.estimate(estimation_request(ModelView(messages),
                                                              self._schemas(run))).tokens

        def measure(changes: ChangeSet) -> int:
            added = tuple(ViewMessage(role=MessageRole.SYSTEM, kind=ViewKind.ANNOTATION,
                                      text=str(note.text)) for note in changes.annotations
                          if note.target_record_id in questions)
            return tokens((*split.fixed, *added)) - tokens(split.fixed) if added else 0
        return BudgetRoom(split.fixed_tokens, self.budget.input_budget, measure)

    def _fixed_message(self, fixed: int, tokens: int) -> str:
        """§8 "明确提示固定输入超窗": the fixed input — system prompt, tool schemas, current
        protected inputs — is what does not fit, with its figure; §11: numbers only."""
        b = self.budget
        return (f"the fixed input (system prompt, tool schemas, current protected inputs) needs "
                f"{fixed} tokens, over the input budget {b.input_budget}; the whole request "
                f"needs {tokens}; the window is {b.window} (output reserve {b.output_reserve} "
                f"[{b.output_reserve_source}], safety margin {b.safety_margin} "
                f"[{b.safety_margin_source}])")

    def _figures(self, tokens: int, *, fixed: int | None = None) -> dict[str, int]:
        b = self.budget
        figures = {"input_tokens": tokens, "input_budget": b.input_budget,
                   "window": b.window, "output_reserve": b.output_reserve,
                   "safety_margin": b.safety_margin}
        return figures if fixed is None else {**figures, "fixed_input_tokens": fixed}

    def _window_message(self, tokens: int, stage: str) -> str:
        """§11: numbers, configuration sources and the stage; never the prompt or secrets."""
        b = self.budget
        return (f"the request needs {tokens} input tokens {stage}; the window is {b.window} "
                f"(output reserve {b.output_reserve} [{b.output_reserve_source}], safety margin "
                f"{b.safety_margin} [{b.safety_margin_source}], input budget {b.input_budget})")

    # --- compaction -----------------------------------------------------------------------------

    def _compact(self, run: RunState, operation_id: UUID, view: ModelView,
                 material: Sequence[ViewMessage], target: int, input_tokens: int,
                 material_tokens: int, protected: Sequence[ProtectedInput], floor: int
                 ) -> tuple[ModelView, UUID | None] | None:
        """One episode for this business operation: started, or resumed at its cursor after a
        takeover (the same chunks, the same purpose_keys; committed chunks never asked again),
        or — when it already finished — no second one (§8, §9). ``floor``: the material a
        useful chunk carries (Q120), frozen with the episode's source."""
        existing = next((e for e in run.episodes
                         if e.triggering_model_operation_id == operation_id), None)
        if existing is not None and existing.status is not EpisodeStatus.RUNNING:
            applied, used, _ = view_with_snapshot(view, run.snapshot)
            return applied, used
        if existing is not None:
            # A takeover resumes the episode on the material and target it started with: the
            # records may have changed since, which the switch's CAS is there to see (§8, §9).
            material, target = self._episode_source(existing)
            floor = int(json.loads(self.store.text(existing.source_manifest_ref))["chunk_floor"])
        episode_id = existing.episode_id if existing is not None else self._id()
        plan = plan_compaction(material, episode_id=episode_id,
                               window=self.budget.window, summary_target=target,
                               safety_margin=self.budget.safety_margin,
                               estimator=self.estimator, floor=floor,
                               custom_prompt=self.agent.custom_compaction_prompt)
        if not isinstance(plan, CompactionPlan):
            # Decided before any episode or call. Prompts that leave no room for material at
            # all: a budget configuration that cannot compact (§8 "其余配置导致 T 无法为正时属于
            # 预算配置错误", Q67); room below a useful chunk's floor: COMPACTION_FAILED (Q120).
            code = ErrorCode.BUDGET_CONFIGURATION_INVALID \
                if plan.code == "NO_ROOM_FOR_MATERIAL" else ErrorCode.COMPACTION_FAILED
            self._end(run, RunStatus.FAILED, code,
                      f"{plan.reason} (the §8 decision was to compact)")
            return None
        if existing is None:
            source_doc = json.dumps({"summary_target": target, "chunk_floor": floor,
                                     "material": VIEW_ADAPTER.dump_python(
                                         ModelView(tuple(material)), mode="json")},
                                    sort_keys=True)
            started = start_episode(
                episode_id=episode_id, run_id=run.run_id, owner_node_task_id=run.context_id,
                triggering_model_operation_id=operation_id, existing=run.episodes,
                material_tokens=material_tokens, source_view_hash=view_hash(view),
                source_manifest_ref=self._ref(source_doc), source_effective_revisions={},
                release_id=self.agent.release_id, input_tokens=input_tokens,
                created_at=self._time())
            if not isinstance(started, CompactionEpisode):
                return view, None
            self._put_episode(run, started, new=True)
            self._commit("EPISODE_STARTED", [
                self._checkpoint(run, "compacting", operation_id=str(operation_id))])
        episode = next(e for e in run.episodes
                       if e.triggering_model_operation_id == operation_id)
        self.trace.add(tr.CompactionStep(
            episode.episode_id, "planned",
            f"I={input_tokens} ≥ trigger {self.budget.trigger_threshold}; M={material_tokens} "
            f"compressible; T={target}; {len(plan.chunks.chunks)} chunk(s) of at most "
            f"{plan.chunks.capacity} tokens"))
        summary: str | None = None
        if episode.chunk_cursor > 0 and episode.accumulated_summary_ref is not None:
            summary = self.store.text(episode.accumulated_summary_ref)
        for ordinal in range(episode.chunk_cursor + 1, len(plan.chunks.chunks) + 1):
            if self._stopped_or_out_of_time(run):  # every chunk is under the Run's deadline
                return None
            request = plan.request(ordinal, summary)
            chunk = self._chunk(run, episode, plan, request, ordinal, target)
            if chunk is None:
                return None
            chunk_operation, raw, summary = chunk
            committed = commit_episode_chunk(episode, ordinal, self._ref(summary),
                                             chunk_operation)
            if not isinstance(committed, CompactionEpisode):
                raise AssertionError(committed.reason)
            episode = committed
            self._put_episode(run, episode)
            self._operation(chunk_operation, run, OperationPurpose.COMPACTION,
                            request.purpose_key, OperationState.SUCCEEDED,
                            self._ref(raw), self._ref(summary))
            self._commit("CHUNK_COMMITTED", [])
            self.trace.add(tr.CompactionStep(episode.episode_id, "chunk_committed",
                                             f"chunk {ordinal} of {len(plan.chunks.chunks)}"))
        if summary is None:
            raise AssertionError("a plan has at least one chunk")
        return self._switch_snapshot(run, episode, material, plan, summary, protected)

    def _switch_snapshot(self, run: RunState, episode: CompactionEpisode,
                         material: Sequence[ViewMessage], plan: CompactionPlan, summary: str,
                         protected: Sequence[ProtectedInput]
                         ) -> tuple[ModelView, UUID | None]:
        """§9: the finished episode's snapshot and, in the same commit, the CAS of the active
        pointer against the records as they are now. The view goes on with the new summary, or
        — refused — is rebuilt from the current records.  CTX-9.17, CTX-9.18, CTX-9.30, CTX-9.33"""
        manifest = build_manifest(material, self._record_seqs(), self._heads(),
                                  plan.chunks.capacity,
                                  len(plan.chunks.chunks),
                                  previous=[(run.snapshot[0], run.snapshot[1])]
                                  if run.snapshot else [])
        snapshot_id = self._id()
        # The CAS reads the records as they are now, not as the episode found them: a hook of
        # the episode's own chunk requests may have corrected covered material meanwhile (§9).
        current = self._view(run, protected)
        if isinstance(current, UnsettledBatch):
            raise AssertionError("an episode runs between batches")
        switched = switch_active(run.pointer, expected_active=run.pointer.snapshot_id,
                                 lease_epoch=run.pointer.lease_epoch,
                                 new_snapshot_id=snapshot_id, manifest=manifest,
                                 current_view=current)
        done = finish_episode(episode, len(plan.chunks.chunks), snapshot_id)
        if not isinstance(done, CompactionEpisode):
            raise AssertionError(done.reason)
        self._put_episode(run, done)
        snapshot_rows: list[Write] = []
        if any(piece.context_seq is not None for piece in manifest.pieces):
            snapshot_rows.append(insert_doc(make_snapshot(
                snapshot_id=snapshot_id, context_id=run.context_id, generation=len(run.episodes),
                manifest=manifest, seqs_by_context=self._seqs(),
                source_revisions=self._heads(), protected_input_ids=[],
                summary_ref=self._ref(summary), summary_tokens=self.estimator.estimate(
                    EstimationRequest(messages=(PromptMessage(role="system", text=summary),))
                ).tokens)))
        if isinstance(switched, ActivePointer):
            run.pointer = switched
            self._put_role(run)
            run.snapshot = (snapshot_id, manifest, summary)
            if run.parent is None:
                snapshot_rows.append(checkpoint_write(run.run_id, "snapshot", {
                    "snapshot_id": str(snapshot_id), "summary": summary,
                    "manifest": manifest_document(manifest)}))
            step = tr.CompactionStep(done.episode_id, "snapshot_active", str(snapshot_id))
        else:
            # Not made the head: the episode's model facts and summary stay (the snapshot row)
            # with why it was refused; the view is rebuilt from the records as they are now.
            # Neither the hooks nor the finished chunks are asked again, and this Operation
            # gets no second episode (§9 rebuild steps 3 and 4; CTX-9.33).
            snapshot_rows.append(checkpoint_write(run.run_id, loop_key(run, "snapshot_refused"), {
                "snapshot_id": str(snapshot_id), "reason": switched.reason,
                "detail": switched.detail}))
            step = tr.CompactionStep(done.episode_id, "snapshot_refused",
                                     f"{switched.reason}: {switched.detail}")
        self._commit("SNAPSHOT_COMMITTED", snapshot_rows)
        self.trace.add(step)  # traced once it is a fact
        # A summary folded into this one is part of its coverage: the new snapshot is checked
        # against, and applied to, the records themselves, never the view with the old summary
        # (CTX-9.21).
        new_view, used, _ = view_with_snapshot(current, run.snapshot)
        return new_view, used

    def _episode_source(self, episode: CompactionEpisode
                        ) -> tuple[tuple[ViewMessage, ...], int]:
        """The material and summary target an episode froze when it started (its source
        manifest blob)."""
        document = json.loads(self.store.text(episode.source_manifest_ref))
        material = VIEW_ADAPTER.validate_python(document["material"])
        return material.messages, int(document["summary_target"])

    def _fail_episode(self, run: RunState, episode: CompactionEpisode, message: str) -> None:
        """§8: the whole episode fails and ends the Run; the old snapshot stays active, the
        committed chunks are audit only (CTX-8.75, CTX-8.76)."""
        failed, code = fail_compaction(episode)
        self._put_episode(run, failed)
        self._end(run, RunStatus.FAILED, code, message)

    def _chunk(self, run: RunState, episode: CompactionEpisode, plan: CompactionPlan,
               request: CompactionRequest, ordinal: int, target: int
               ) -> tuple[UUID, str, str] | None:
        """One fold step (§8, CTX-8.70): the raw answer is saved first (CHUNK_RAW_SAVED), then
        the post-response chain makes the effective summary; the caller commits it with the
        cursor. A takeover reads the chunk's Operation by its purpose_key (§9: never a new
        identity): a saved raw answer is post-processed without asking the model again
        (CTX-9.43), a committed post-chain decision is reused, failed attempts are not renewed.
        Returns (operation, raw answer, effective summary), or None when the Run ended."""
        key = request.purpose_key
        stored = next((op for op in self.operations.values()
                       if op.purpose is OperationPurpose.COMPACTION and op.purpose_key == key),
                      None)
        progress = {} if stored is None else {ordinal: ChunkProgress(
            ordinal, stored.operation_id, stored.raw_result_ref)}
        step, _ = next_step(episode, len(plan.chunks.chunks), progress)
        saved = self.store.checkpoint(run.run_id, loop_key(run, "chunk"))
        facts: dict[str, JSON] = dict(saved) if isinstance(saved, dict) and \
            saved.get("purpose_key") == key else {}
        known = facts.get("operation_id")
        operation_id = stored.operation_id if stored is not None else \
            UUID(known) if isinstance(known, str) else self._id()
        facts.update(operation_id=str(operation_id), purpose_key=key)
        if step == "post_process" and stored is not None and stored.raw_result_ref is not None:
            raw: str | None = self.store.text(stored.raw_result_ref)
        else:
            raw = self._ask_chunk(run, episode, plan, request, operation_id, target, facts)
        if raw is None:
            return None
        effective, denied = facts.get("effective"), facts.get("denied") is True
        if not isinstance(effective, str) and not denied:
            def decided(chain: ChainOutcome | None, text: str = raw) -> list[Write]:
                # The post chain's outcome is committed with its decision (HOOK_DECISION), so a
                # takeover before the chunk commit reuses it instead of asking the hook again.
                summary = chain.payload.get("summary") if chain is not None else None
                outcome: dict[str, JSON] = {"denied": True} if chain is not None and \
                    chain.blocked else {"effective": summary if isinstance(summary, str)
                                        else text}
                facts.update(outcome)
                return [checkpoint_write(run.run_id, loop_key(run, "chunk"), facts)]
            self._hooks("compaction.post_response", run, {"summary": raw}, None, None,
                        stage="post", extra=decided)
            effective, denied = facts.get("effective"), facts.get("denied") is True
        if denied:
            self._fail_episode(run, episode, "a hook denied a compaction response")
            return None
        return operation_id, raw, effective if isinstance(effective, str) else raw

    def _ask_chunk(self, run: RunState, episode: CompactionEpisode, plan: CompactionPlan,
                   request: CompactionRequest, operation_id: UUID, target: int,
                   facts: dict[str, JSON]) -> str | None:
        """A chunk's model call with the role's attempts (§8 inherits its model and connection
        retries, CTX-8.2): each failed attempt is saved (ATTEMPT_FAILED) so a takeover goes on
        with the next one; the episode fails only when the last attempt fails (CTX-8.75). A
        request the provider refused as over its window is never sent again. The raw answer of
        a successful attempt is saved before anything else happens to it (CHUNK_RAW_SAVED)."""
        failed = facts.get("failed")
        first = failed + 1 if isinstance(failed, int) else 1
        if facts.get("refused") is not None:
            self._fail_episode(run, episode, "the provider refused a compaction request")
            return None
        if first == 1:  # an attempt already sent passed these checks and its pre-request chain
            if not compaction_fits(plan, request, self.estimator):
                self._fail_episode(run, episode, "a compaction request would not fit")
                return None
            pre = facts.get("pre")
            if pre is None:  # a committed pre-request decision is reused, never asked again
                def decided(chain: ChainOutcome | None) -> list[Write]:
                    facts["pre"] = "denied" if chain is not None and chain.blocked else "allowed"
                    return [checkpoint_write(run.run_id, loop_key(run, "chunk"), facts)]
                self._hooks("compaction.pre_request", run, {"purpose": "compaction"}, None, None,
                            extra=decided)
                pre = facts.get("pre")
            if pre == "denied":
                self._fail_episode(run, episode, "a hook denied a compaction request")
                return None
        sent = ModelView(tuple(ViewMessage(
            role=MessageRole(m.role), kind=ViewKind.SYSTEM_PROMPT if m.role == "system"
            else ViewKind.PROMPT, text=m.text) for m in request.messages))
        estimation = self.estimator.estimate(request.estimation()).tokens
        for attempt in range(first, self.agent.model_attempts + 1):
            if attempt > first and self._stopped_or_out_of_time(run):
                return None  # a retry is under the Run's cancellation and deadline too
            outcome = self._model(run, "compaction", operation_id, request.purpose_key, attempt,
                                  request.messages, (), target, sent, compaction=None,
                                  snapshot_id=None, protected=(), cutoff=None,
                                  estimation=estimation, rendered=render_request(sent))
            if isinstance(outcome, Complete):
                self._operation(operation_id, run, OperationPurpose.COMPACTION,
                                request.purpose_key, OperationState.RUNNING,
                                self._ref(outcome.text))
                self._commit("CHUNK_RAW_SAVED", [])
                self.moments.at("raw_saved")
                return outcome.text
            facts["failed"] = attempt
            if isinstance(outcome, ContextLengthExceeded):
                facts["refused"] = estimation
            self._operation(operation_id, run, OperationPurpose.COMPACTION, request.purpose_key,
                            OperationState.RUNNING)
            self._commit("ATTEMPT_FAILED", [checkpoint_write(run.run_id, loop_key(run, "chunk"),
                                                             facts)])
            if isinstance(outcome, ContextLengthExceeded):
                self._fail_episode(run, episode, "the provider refused a compaction request")
                return None
        self._fail_episode(run, episode, "a compaction chunk failed")
        return None

    # --- the model ------------------------------------------------------------------------------

    def _model(self, run: RunState, purpose: Purpose, operation_id: UUID, purpose_key: str,
               attempt: int, messages: tuple[PromptMessage, ...], schemas: tuple[str, ...],
               max_output: int, view: ModelView, *, compaction: str | None,
               snapshot_id: UUID | None, protected: Sequence[ProtectedInput],
               cutoff: int | None, estimation: int, rendered: RenderedRequest) -> ModelOutcome:
        """Send one attempt: the request is traced as sent, then asked. An answer's reported
        usage is traced beside the estimate for audit and deviation monitoring; nothing reads
        it back — not this request's figures, not a later budget (§7; Q57 "Reported usage").
        CTX-7.21"""
        ordinal = self._ordinal(f"{purpose}:{run.role}")
        self.trace.add(tr.ModelRequestSent(
            purpose=purpose, operation_id=operation_id, purpose_key=purpose_key,
            attempt=attempt, view=view,
            estimated_input_tokens=estimation, max_output_tokens=max_output,
            window=self.budget.window, output_reserve=self.budget.output_reserve,
            safety_margin=self.budget.safety_margin, input_budget=self.budget.input_budget,
            trigger_threshold=self.budget.trigger_threshold,
            frozen_revisions={str(run.context_id):
                              self.contexts[run.context_id].head.revision},
            snapshot_id=snapshot_id, protected_input_ids=tuple(p.input_id for p in protected),
            input_cutoff=cutoff, view_hash=view_hash(view), compaction=compaction,
            role=run.role, rendered=rendered))
        self.clock.tick()
        outcome = self.model.call(ModelCall(purpose, operation_id, purpose_key, attempt,
                                            messages, schemas, max_output, ordinal, run.role))
        if isinstance(outcome, Complete) and (outcome.input_tokens is not None
                                              or outcome.output_tokens is not None
                                              or outcome.cut):
            self.trace.add(tr.ModelUsage(
                purpose=purpose, operation_id=operation_id, purpose_key=purpose_key,
                attempt=attempt, estimated_input_tokens=estimation,
                input_tokens=outcome.input_tokens, output_tokens=outcome.output_tokens,
                input_deviation=None if outcome.input_tokens is None
                else outcome.input_tokens - estimation, role=run.role, cut=outcome.cut))
        return outcome

    def _call_business_model(self, run: RunState, operation_id: UUID, view: ModelView,
                             protected: Sequence[ProtectedInput], cutoff: int, decision: str,
                             snapshot_id: UUID | None) -> None:
        # What the adapter sends, marks included, is what is counted and what is traced (§6,
        # §7: I counts everything sent).
        rendered = render_request(view, self._schemas(run))
        counted = rendered_estimation(rendered)
        messages = counted.messages
        estimation = self.estimator.estimate(counted).tokens
        delivered = False
        first_attempt, run.resume_attempt = run.resume_attempt, 1
        last_fragment, run.resume_partial = run.resume_partial, False
        fragments = self._stored_fragments(run, operation_id) if first_attempt > 1 else []
        for attempt in range(first_attempt, self.agent.model_attempts + 1):
            if attempt > 1 and self._halted_before_retry(run):
                return  # no new attempt after a stop or past the Run's deadline
            outcome = self._model(run, "business", operation_id, f"model:{operation_id}",
                                  attempt, messages, self._schemas(run),
                                  self.budget.output_reserve, view, compaction=decision,
                                  snapshot_id=snapshot_id, protected=protected, cutoff=cutoff,
                                  estimation=estimation, rendered=rendered)
            if isinstance(outcome, ContextLengthExceeded):
                # The refusal is a fact saved before the Run ends, so a takeover ends the Run
                # the same way instead of sending the over-window request again (CTX-7.24).
                self._commit("ATTEMPT_FAILED", [checkpoint_write(
                    run.run_id, loop_key(run, "attempts"), {
                        "operation_id": str(operation_id), "failed": attempt,
                        "partial": False, "refused": estimation})])
                self._end(run, RunStatus.FAILED, ErrorCode.CONTEXT_LENGTH_EXCEEDED,
                          self._window_message(estimation, "sent; the provider refused it"))
                return
            if isinstance(outcome, (Complete, PartialThenFailed)) and not delivered \
                    and run.parent is None:
                first = dl.first_output(self.book, operation_id=operation_id,
                                        receipt_ref=self._ref(f"first-output:{operation_id}"),
                                        delivered_at=self._time())
                if isinstance(first, dl.DeliveryRejected):
                    raise RuntimeError(f"{first.code}: {first.reason}")
                self.book, writes = first
                self._trace_deliveries(writes)
                delivered = True
                self._commit("T_FIRST_OUTPUT", [])
                self.moments.at("first_output")
            if isinstance(outcome, Complete):
                raw = self._ref(json.dumps({"text": outcome.text, "tool_calls": [
                    _raw_call(c) for c in outcome.tool_calls]}, sort_keys=True,
                    ensure_ascii=False))
                self._operation(operation_id, run, OperationPurpose.MODEL,
                                f"model:{operation_id}", OperationState.RUNNING, raw)
                self._commit("RAW_RESULT_SAVED", [
                    self._checkpoint(run, "raw_saved", operation_id=str(operation_id))])
                self._settle_fragments(run, fragments, succeeded=True)
                self.moments.at("raw_saved")
                self._accept(run, operation_id, outcome)
                return
            if isinstance(outcome, PartialThenFailed):
                fragments.append(outcome.fragment)
            # A failed attempt is a fact: a takeover goes on with the next one, never renews
            # the attempts (§10). Its fragment is kept with it, out of the role's context.
            last_fragment = isinstance(outcome, PartialThenFailed)
            self._commit("ATTEMPT_FAILED", [checkpoint_write(
                run.run_id, loop_key(run, "attempts"), {
                    "operation_id": str(operation_id), "failed": attempt,
                    "partial": last_fragment, "fragments": list(fragments)})])
        self._settle_fragments(run, fragments, succeeded=False)
        self._end(run, RunStatus.FAILED, ErrorCode.MODEL_FAILED,
                  "the model failed " + ("after a partial output" if last_fragment
                                         else "before any output"))

    def _asks_pre_call(self, run: RunState) -> bool:
        """A pre-call hook decides about a call that will run: none is asked once a stop is
        accepted (Q80)."""
        return not self._stop_pending(run)

    def _halted_before_retry(self, run: RunState) -> bool:
        """A retry is a new model call: under the Run's stop and its deadline like every call
        (§8 "所有调用受同一 Run deadline", §3, §11). Ends the role when either came."""
        return self._stopped_or_out_of_time(run)

    def _stored_fragments(self, run: RunState, operation_id: UUID) -> list[str]:
        """The fragments of an Operation's failed attempts a crashed incarnation saved."""
        saved = self.store.checkpoint(run.run_id, loop_key(run, "attempts"))
        if not isinstance(saved, dict) or saved.get("operation_id") != str(operation_id):
            return []
        kept = saved.get("fragments")
        return [f for f in kept if isinstance(f, str)] if isinstance(kept, list) else []

    def _settle_fragments(self, run: RunState, fragments: Sequence[str], *,
                          succeeded: bool) -> None:
        """Failed attempts' fragments are references kept with their attempts; they enter the
        role's context, as marked incomplete fragments, only when the Operation finally fails.
        After a good retry the complete response alone enters the business view (§12 row 12
        "不拼接 Attempt", "完整响应才进入业务视图", §2, §6; CTX-2.30)."""
        if succeeded:
            return
        for fragment in fragments:
            self._append(run, MessageRole.ASSISTANT, "assistant", {"text": fragment},
                         incomplete=True)

    def _append(self, run: RunState, role: MessageRole, kind: str, content: dict[str, JSON],
                call_id: UUID | None = None, operation_id: UUID | None = None,
                incomplete: bool = False) -> UUID:
        state = self.contexts[run.context_id]
        record_id = self._id()
        if incomplete:
            content = {**content, "incomplete": True}
        record = ContextRecord(record_id=record_id, context_id=run.context_id,
                               context_seq=len(state.records) + 1, run_id=run.run_id, role=role,
                               message_kind=kind, payload_ref=self._ref(json.dumps(
                                   content, sort_keys=True, ensure_ascii=False)),
                               operation_id=operation_id, call_id=call_id,
                               origin_input_id=None)
        self._put_context(run.context_id, append_records(
            state, [RawRecord(record, content)], mutation_id=self._id(),
            source_kind=MutationSourceKind.RUNTIME, source_ref=kind).state)
        return record_id

    def _accept(self, run: RunState, operation_id: UUID, outcome: Complete) -> None:
        """The raw result is kept; response hooks make the effective one; then the batch."""
        calls = [(self._id(), call) for call in outcome.tool_calls]
        content: dict[str, JSON] = {"text": outcome.text}
        if outcome.reasoning is not None:
            content["reasoning"] = outcome.reasoning
        for ordinal, (call_id, call) in enumerate(calls, start=1):
            # The platform's own call_id keys the call; the provider's id is metadata only
            # (§2 "外部提供的 tool_call_id 不能直接作为平台主键").
            content[f"tool_call:{call_id}"] = {**_raw_call(call), "action_ordinal": ordinal}
        record_id = self._append(run, MessageRole.ASSISTANT, "assistant", content,
                                 operation_id=operation_id)
        operation = self.operations[operation_id]
        self._operation(operation_id, run, OperationPurpose.MODEL, operation.purpose_key,
                        OperationState.SUCCEEDED, operation.raw_result_ref,
                        self._ref(outcome.text))
        # Until its post-response chain is decided the answer is not the Loop's: a takeover
        # at "post" asks that chain (unless a hook was running: Q50), never skips it (§10
        # "只有原始结果时继续后处理").
        self._commit("EFFECTIVE_RESULT", [
            self._checkpoint(run, "post", decision=str(record_id))])
        self._after_response(run, record_id, outcome.text)

    def _after_response(self, run: RunState, record_id: UUID, raw_text: str) -> None:
        """The post-response chain makes the effective answer; only then does the Loop get it:
        its batch, its final answer, or — denied — nothing (§2, §3)."""
        self._hooks("model.post_response", run, {"text": raw_text}, None, record_id,
                    stage="post", extra=lambda chain: self._response_decided(run, record_id,
                                                                             chain))
        answer = next(r for r in effective_records(self.contexts[run.context_id])
                      if r.record_id == record_id)
        if answer.denied:  # neither its calls run nor is it delivered (§2, §3; Q75)
            self._end(run, RunStatus.FAILED, ErrorCode.HOOK_DENIED, RESPONSE_DENIED)
            return
        if not answer.tool_calls:
            run.final_text = self._answer_text(answer, raw_text)
            self._end(run, RunStatus.SUCCEEDED)
            return
        self._batch(run, record_id, [call.call_id for call in answer.tool_calls])

    def _response_decided(self, run: RunState, record_id: UUID,
                          chain: ChainOutcome | None) -> list[Write]:
        """A legitimate post-response deny marks the response denied in the effective context,
        committed with the decision (HOOK_DECISION): its raw stays for audit; the Loop, history
        and a takeover see only the explicit denied state (§2 "后置拒绝则交明确拒绝状态", §3
        "合法 deny … 必须阻止执行或交付"; Q75)."""
        decided = [self._checkpoint(run, "batch", decision=str(record_id), settled={})]
        if chain is None or not chain.blocked:
            return decided
        hook_id = chain.items[-1].invocation.hook_invocation_id
        state = self.contexts[run.context_id]
        denial: JSON = json.loads(denial_feedback("post", hook_id, {}))
        committed = commit_changes(state, [FieldChange(record_id, "denied", denial, ())], [],
                                   base_revision=state.head.revision, mutation_id=self._id(),
                                   source_kind=MutationSourceKind.RUNTIME,
                                   source_ref=f"denied:{hook_id}")
        if not isinstance(committed, Committed):
            raise AssertionError("a runtime mark on the head revision cannot conflict")
        self._put_context(run.context_id, committed.state)
        return decided

    def _answer_text(self, answer: EffectiveRecord, raw_text: str) -> str:
        """The answer the waiter receives is the effective one, after the post-response hooks
        (§3 response row: "保存 raw_result，再提交 Hook 后有效结果 → 当前等待者"): the user's
        final result, or the Planner's delegate result — with or without a crash between."""
        return answer.text

    def _batch(self, run: RunState, decision_id: UUID, call_ids: Sequence[UUID],
               settled: Mapping[str, JSON] | None = None, started: str | None = None,
               hooked: Mapping[str, JSON] | None = None,
               delegations: Mapping[str, JSON] | None = None,
               unprocessed: Mapping[str, JSON] | None = None) -> None:
        """§6, §10: every call settles (pre-hook, handler with the effective arguments,
        post-hook); the results are fed back once, in action order. ``settled`` holds the
        members a crashed incarnation settled already: they are reused, never run again."""
        results: list[tuple[UUID, dict[str, JSON]]] = []
        done: dict[str, JSON] = dict(settled or {})
        decided: dict[str, JSON] = dict(hooked or {})
        delegated: dict[str, JSON] = dict(delegations or {})
        """call_id → the context of the Executor execution started for it."""
        """call_id → its committed pre-call decision (blocked, hook id, candidate)."""
        raws: dict[str, JSON] = dict(unprocessed or {})
        """call_id → the saved raw result of a call whose post-call chain is not decided."""

        def position(**facts: JSON) -> list[Write]:
            return [self._checkpoint(run, "batch", decision=str(decision_id), settled=done,
                                     hooked=decided, delegated=delegated, raw=raws, **facts)]

        for call_id in call_ids:
            reused = done.get(str(call_id))
            if isinstance(reused, dict):
                results.append((call_id, reused))
                continue
            if str(call_id) in raws:  # ran and saved before a takeover: post-processed now
                results.append((call_id, self._post_call(run, decision_id, call_id, raws, done,
                                                         position)))
                continue
            if started == str(call_id) and not self.agent.retry_unknown_tools:
                # It started before the crash and its result was never saved: its external
                # effect is unknown; never reported as a success (§10).
                unknown: dict[str, JSON] = {"text": structured_error(
                    ErrorCode.UNKNOWN_OUTCOME, "the call started before a takeover and its result "
                    "was never saved; whether it took effect is unknown")}
                results.append((call_id, unknown))
                done[str(call_id)] = unknown
                continue
            state = self.contexts[run.context_id]
            current = next(r for r in effective_records(state) if r.record_id == decision_id)
            call = next(c for c in current.tool_calls if c.call_id == call_id)
            arguments: dict[str, JSON] = json.loads(call.arguments)
            proposed = dict(arguments)
            payload: dict[str, JSON] = {"name": call.name, "arguments": arguments}
            earlier = decided.get(str(call_id))
            blocked: dict[str, JSON] | None = None
            if isinstance(earlier, dict):
                # Decided before a takeover: reuse the committed decision; the effective
                # arguments are already in the effective record.
                if earlier.get("blocked") is True:
                    blocked = earlier
            elif not self._asks_pre_call(run):
                break  # the call will never run: its pre-call hook is not asked (Q80)
            else:
                def remember(chain: ChainOutcome | None, key: str = str(call_id)) -> list[Write]:
                    if chain is None:  # no hook answered: nothing blocks, nothing to re-ask
                        decided[key] = {"blocked": False}
                        return position()
                    last = chain.items[-1]
                    decided[key] = {"blocked": chain.blocked,
                                    "hook_invocation_id": str(last.invocation.hook_invocation_id),
                                    "candidate": dict(last.candidate_payload)}
                    return position()

                chain = self._hooks("tool.pre_call", run, payload, call_id, decision_id,
                                    extra=remember)
                if chain is not None:
                    raw_arguments = dict(chain.payload).get("arguments")
                    arguments = raw_arguments if isinstance(raw_arguments, dict) else arguments
                    entry = decided[str(call_id)]
                    if chain.blocked and isinstance(entry, dict):
                        blocked = entry
            self.moments.at("batch_call")
            owner = run.parent or run
            quota = self.agent.tool_quota
            deadline = self.agent.run_deadline
            verdict = execution_gate(ChainOutcome((), {}, {}, blocked is not None), GateChecks(
                tool_allowed=any(t.name == call.name for t in self._tools(run)),
                quota_left=1 if quota is None else quota - owner.tool_calls_made,
                deadline_passed=deadline is not None
                and self.clock.now() - owner.started_at_tick >= deadline,
                stopped=run.stop_requested or owner.stop_requested))
            if verdict == "stopped":
                break  # the Run stops mid-batch: what ran is kept; the rest stays unanswered
            raw_call = state.record(decision_id)
            malformed = raw_call is not None and isinstance(
                entry := raw_call.content.get(f"tool_call:{call_id}"), dict) \
                and entry.get("malformed_arguments") is not None
            problems = self._argument_problems(run, call.name, arguments, malformed) \
                if verdict == "execute" else ()
            if problems:  # a format error: the business role's next Loop corrects it (Q82)
                results.append((call_id, {"text": structured_error(
                    "INVALID_ARGUMENTS", f"{call.name} was not run: {'; '.join(problems)}")}))
                continue
            if verdict != "execute":
                if verdict == "denied" and blocked is not None:
                    candidate = blocked.get("candidate")
                    text = denial_feedback("pre", UUID(str(blocked["hook_invocation_id"])),
                                           candidate if isinstance(candidate, dict) else {})
                else:
                    text = structured_error(verdict.upper(), f"{call.name} was not run")
                results.append((call_id, {"text": text}))
                continue
            if call.name == DELEGATE_TOOL and run.parent is None and self.agent.executor:
                def settle(text: str, key: str = str(call_id)) -> list[Write]:
                    done[key] = {"text": text}
                    return position()

                def begin(context_id: UUID, key: str = str(call_id)) -> list[Write]:
                    delegated[key] = str(context_id)
                    return position()
                running = delegated.get(str(call_id))
                handed = self._delegate(run, call_id, arguments, begin, settle,
                                        UUID(running) if isinstance(running, str) else None)
                if handed is None:
                    return  # the Executor's context error ended the whole invocation
                results.append((call_id, {"text": handed}))
                continue
            self._commit("TOOL_STARTED", position(started=str(call_id)))
            self.clock.tick()
            owner.tool_calls_made += 1
            outcome = self._read_result(run, arguments) if call.name == READ_TOOL else \
                self.tools.run(call.name, arguments, self._ordinal(f"tool:{call.name}"))
            self.trace.add(tr.ToolExecuted(call_id, call.name, arguments, proposed,
                                           "error" if outcome.error else "ok",
                                           outcome.latency))
            text = structured_error("TOOL_ERROR", outcome.error) if outcome.error \
                else outcome.text
            self.workspace.update(outcome.workspace_writes)
            if outcome.artifact is not None and not outcome.error:
                text = artifact_text(outcome.artifact)
            tool_operation = self._id()
            self._operation(tool_operation, run, OperationPurpose.TOOL, f"tool:{call_id}",
                            OperationState.FAILED if outcome.error else OperationState.SUCCEEDED,
                            self._ref(text))
            # Only the raw result is settled here; the post-call chain makes the effective one
            # (§3 "保存 raw_result，再提交 Hook 后有效结果"), so a takeover after this commit goes
            # on with that chain, never with the raw result (§10, §12 "原始结果保存后宕机").
            raws[str(call_id)] = {"text": text, "operation_id": str(tool_operation)}
            self._commit("TOOL_SETTLED", position())
            self.moments.at("raw_saved")
            results.append((call_id, self._post_call(run, decision_id, call_id, raws, done,
                                                     position)))
        self._feed_back(run, results)
        self._commit("BATCH_FEEDBACK", [self._checkpoint(run, "loop_done")])
        if run.stop_requested:
            self._end(run, RunStatus.STOPPED)

    def _argument_problems(self, run: RunState, name: str, arguments: Mapping[str, JSON],
                           malformed: bool = False) -> tuple[str, ...]:
        """The effective arguments (after the pre-call hooks) against the tool's declared
        parameters schema (§11 "输出格式错误": never run, answered for a new Loop; Q82); the
        provider's argument text that was no JSON object is such an error too."""
        if malformed:
            return ("the arguments are not a JSON object",)
        spec = next((tool for tool in self._tools(run) if tool.name == name), None)
        declared = json.loads(spec.schema).get("parameters") if spec is not None else None
        return argument_problems(declared, arguments) if isinstance(declared, dict) else ()

    def _read_result(self, run: RunState, arguments: Mapping[str, JSON]) -> ToolOutcome:
        """``result.read``: characters [from, to) of a body whose preview this role was shown,
        read from its blob; it becomes a new tool result by the same rules as any (§6 "模型后续
        通过 result.read 读取的内容成为新的工具结果"). A reference the role's records do not carry
        is refused, never guessed.  CTX-6.18"""
        digest, start, end = (arguments.get(k) for k in ("result_ref", "from", "to"))
        refs = [ref for raw in self.contexts[run.context_id].records
                if isinstance(cut := raw.content.get("truncation"), dict)
                and isinstance(ref := cut.get("result_ref"), dict)
                and ref.get("digest") == digest]
        if not refs or not isinstance(start, int) or not isinstance(end, int) \
                or not 0 <= start <= end:
            return ToolOutcome("", "no stored result with that result_ref and range 0 <= from "
                               "<= to for this role")
        body = self.store.text(PayloadRef.model_validate(refs[0]))
        return ToolOutcome(read_range(body, start, min(end, len(body))))

    def _post_call(self, run: RunState, decision_id: UUID, call_id: UUID,
                   raws: dict[str, JSON], done: dict[str, JSON],
                   position: Callable[..., list[Write]]) -> dict[str, JSON]:
        """The post-call chain on a settled call's raw result, its outcome committed with the
        decision (HOOK_DECISION) as the member's effective result: the hook's change, or — on a
        deny — a feedback that the call ran and its result is withheld (§3, §6). A takeover
        after the raw save comes here too, so neither a change nor a deny is bypassed (§10).
        CTX-10.9"""
        key = str(call_id)
        saved = raws[key]
        if not isinstance(saved, dict) or not isinstance(saved.get("text"), str):
            raise AssertionError("a saved raw result has its text")
        raw_text = str(saved["text"])

        def after_post(chain: ChainOutcome | None) -> list[Write]:
            if chain is None:
                final = raw_text
            elif chain.blocked:
                final = denial_feedback("post", chain.items[-1].invocation.hook_invocation_id, {})
            else:
                changed = chain.payload.get("result")
                final = changed if isinstance(changed, str) else raw_text
            done[key] = self._result_content(final)
            raws.pop(key, None)
            operation = self.operations.get(UUID(str(saved["operation_id"])))
            if operation is not None:  # the tool Operation gets its effective result
                settled = operation.model_copy(
                    update={"effective_result_ref": self._ref(final)})
                self.pending.put_doc(settled, new=False)
                self.operations[operation.operation_id] = settled
            return position()

        self._hooks("tool.post_call", run, {"result": raw_text}, call_id, decision_id,
                    stage="post", extra=after_post)
        if key in raws:  # no post-call hook is registered: the raw result is the effective one
            after_post(None)
        content = done[key]
        if not isinstance(content, dict):
            raise AssertionError("a settled member has its result content")
        return content

    def _feed_back(self, run: RunState, results: Sequence[tuple[UUID, dict[str, JSON]]]
                   ) -> None:
        """A settled batch's feedback: its results appended in action order, whatever order
        the calls completed in, so context_seq follows the action order too (§2, §10:
        "按固定动作顺序提交父角色反馈"). CTX-2.28"""
        for call_id, content in results:
            self._append(run, MessageRole.TOOL, "tool_result", content, call_id=call_id)

    def _result_content(self, text: str) -> dict[str, JSON]:
        """A large result becomes a bounded preview with its range and result_ref; the whole
        body stays in its blob (§6)."""
        preview, truncation = bounded_preview(text, self.agent.preview_chars, self._ref(text))
        self.blobs[truncation.result_ref.digest if truncation else self._ref(text).digest] = text
        if truncation is None:
            return {"text": text}
        return {"text": preview, "truncation": truncation.model_dump(mode="json")}

    # --- access and retention --------------------------------------------------------------------

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
        self._authorise(caller)
        effective = self._serves_effective(caller, content)
        if content == "raw" and caller.kind != "audit":
            raise AccessDenied("not authorised to read this history")
        if node_task is not None and caller.kind != "audit":
            raise AccessDenied("not authorised to read this history")
        served: list[RawRecord] = []
        for context_id in self._history_contexts(caller, node_task):
            _, overrides = self.store.head_revision(context_id)
            for raw in self.store.iter_records(context_id):
                served.append(RawRecord(raw.record, _served_content(effective_record(
                    raw, overrides.get(raw.record_id, {})))) if effective else raw)
        return served

    def _serves_effective(self, caller: "HistoryCaller", content: HistoryContent | None) -> bool:
        return content == "effective" or (content is None and caller.kind == "role")

    def _history_contexts(self, caller: "HistoryCaller", node_task: int | None) -> list[UUID]:
        """The root contexts of the Session's Runs (audit: and every Executor execution's, in
        creation order), or just the ``node_task``-th execution's."""
        roots: list[UUID] = []
        executions: list[UUID] = []
        for run in sorted(self.runs.values(), key=lambda r: r.run_no):
            for role_key, context_id in self.store.contexts_of_run(run.run_id):
                (roots if role_key == ROOT_ROLE else executions).append(context_id)
        if node_task is not None:
            if not 1 <= node_task <= len(executions):
                raise AccessDenied("not authorised to read this history")
            return [executions[node_task - 1]]
        return roots + executions if caller.kind == "audit" else roots

    def _authorise(self, caller: "HistoryCaller") -> None:
        granted = caller.kind == "audit" and caller.role is not None \
            and caller.role in self.agent.audit_readers
        allowed = caller.session_id == self.session_id and (
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
        return self.store.text(result_ref)

    def delete_agent(self) -> None:
        """Deleting the Agent removes every record it owns: Sessions, Runs, inputs, contexts,
        records, revisions, operations, episodes, snapshots, checkpoints, events, and the blobs no
        other row refers to (§1, §12 row 24).  CTX-1.14"""
        run_ids = [str(run.run_id) for run in self.runs.values()]
        contexts = [str(c) for c in self.contexts]
        writes: list[Write] = []
        for table, column, values in (
                ("records", "context_id", contexts), ("revisions", "context_id", contexts),
                ("mutations", "context_id", contexts), ("snapshots", "context_id", contexts),
                ("role_contexts", "run_id", run_ids), ("operations", "run_id", run_ids),
                ("batches", "run_id", run_ids), ("checkpoints", "run_id", run_ids),
                ("events", "run_id", run_ids)):
            writes.extend(delete(table, **{column: value}) for value in values)
        writes += [delete(table, operation_id=str(operation_id))
                   for operation_id in self.operations
                   for table in ("attempts", "hook_invocations")]
        writes += [delete("deliveries", input_id=str(u.input_id)) for u in self.book.inputs]
        writes += [delete("episodes", episode_id=str(e.episode_id))
                   for run in self.runs.values() for e in run.episodes]
        writes += [delete("user_inputs", session_id=str(self.session_id)),
                   delete("runs", session_id=str(self.session_id)),
                   delete("checkpoints", run_id=str(self.session_id)),
                   delete("sessions", session_id=str(self.session_id)),
                   delete("agents", agent_id=str(self.agent.agent_id)),
                   sweep_blobs()]
        self.coordinator.commit("AGENT_DELETED", writes)
        self.workspace.clear()
        self.deleted = True

    deleted = False
    """Set once the Agent is deleted: its records are gone, so no stimulus can be served."""

    def _require_agent(self) -> None:
        if self.deleted:
            raise AgentDeleted("the Agent of this Session was deleted")

    # --- shared scope ----------------------------------------------------------------------------

    def _shared_scope(self, run: RunState) -> UUID:
        """The Run's shared scope: one record per shared field, registered for its consumers."""
        context_id = self._id()
        records = [RawRecord(ContextRecord(
            record_id=self._id(), context_id=context_id, context_seq=i, run_id=run.run_id,
            role=MessageRole.SYSTEM, message_kind="shared", payload_ref=self._ref(f.text),
            operation_id=None, call_id=None, origin_input_id=None),
            {"text": f.text, "name": f.name, "consumers": list(f.consumers)})
            for i, f in enumerate(self.agent.shared, start=1)]
        consumers = frozenset(c for f in self.agent.shared for c in f.consumers)
        state = new_context(context_id, Scope(
            "shared", registered_fields=frozenset((r.record_id, "text") for r in records),
            consumers=consumers))
        self._put_context(context_id, append_records(
            state, records, mutation_id=self._id(), source_kind=MutationSourceKind.RUNTIME,
            source_ref="shared-fields").state)
        return context_id

    def _shared_messages(self, run: RunState) -> tuple[ViewMessage, ...]:
        """The shared fields this role may read, at the shared scope's current revision; a
        request already frozen keeps what it had (CTX-3.75, CTX-3.87)."""
        owner = run.parent or run
        if owner.shared_context_id is None:
            return ()
        state = self.contexts[owner.shared_context_id]
        messages = []
        for record in effective_records(state):
            raw = state.record(record.record_id)
            consumers = raw.content.get("consumers") if raw is not None else None
            if isinstance(consumers, list) and run.role in consumers:
                name = raw.content.get("name") if raw is not None else ""
                messages.append(ViewMessage(role=MessageRole.SYSTEM, kind=ViewKind.SHARED,
                                            text=f"[shared {name}] {record.text}",
                                            record_id=record.record_id, body=record.text,
                                            source_run_id=run.run_id))
        return tuple(messages)

    # --- Planner and Executors -----------------------------------------------------------------

    def _delegate(self, planner: RunState, call_id: UUID, arguments: Mapping[str, JSON],
                  begin: Callable[[UUID], Sequence[Write]],
                  settle: Callable[[str], Sequence[Write]], running: UUID | None) -> str | None:
        """One Executor execution for a ``delegate`` call: its own NodeTask and RoleContext,
        its protected inputs exactly the hand-over (task, constraints, material refs), never the
        Planner's messages, prompt or undelivered supplements. Its final answer, or its failure,
        is this batch member's result (§1, §2, §5, §10), settled in the Planner's batch by the
        same commit that ends the execution: a finished execution is fetched after a takeover,
        never re-created; one that was running goes on from its own loop checkpoint.
        CTX-2.4, CTX-5.2, CTX-5.3, CTX-4.11"""
        task = next((t for t in self.tasks if t.context_id == running), None)
        if task is not None:  # restored after a takeover: continue where it stood
            checkpoint = self._resume.pop(task.context_id, None)
            if checkpoint is not None:
                self._continue(task, checkpoint)
        else:
            task = self._start_execution(planner, call_id, arguments, begin)
        while task.status is RunStatus.RUNNING:
            self._loop(task)
        if self._ends_invocation(task):
            # §11, §8: a context or compaction error acts on the whole AgentInvocation — the
            # Executor is a NodeTask of it — so the direct Agent Run ends with it (Q77).
            self._end(planner, task.status, ErrorCode(str(task.error_code)), task.message)
            return None
        text = task.final_text if task.status is RunStatus.SUCCEEDED and \
            task.final_text is not None else structured_error(
                task.error_code or task.status.value.upper(),
                task.message or f"the Executor ended {task.status.value}")
        self._commit("EXECUTION_ENDED", settle(text))
        return text

    def _ends_invocation(self, task: RunState) -> bool:
        return task.status is RunStatus.FAILED and task.error_code in INVOCATION_ERRORS

    def _start_execution(self, planner: RunState, call_id: UUID, arguments: Mapping[str, JSON],
                         begin: Callable[[UUID], Sequence[Write]]) -> RunState:
        """A new Executor NodeTask with its private context holding the hand-over."""
        items: list[tuple[str, str]] = [("task", str(arguments.get("task", "")))]
        constraints = arguments.get("constraints", [])
        materials = arguments.get("materials", [])
        for kind, values in (("constraint", constraints), ("material_ref", materials)):
            if isinstance(values, list):
                items.extend((kind, str(v)) for v in values)
        handover = tuple(ProtectedInput(self._id(), position, f"{kind}: {text}")
                         for position, (kind, text) in enumerate(items, start=1))
        task = RunState(planner.run_id, planner.run_no, planner.question_input_id, self._id(),
                        self.clock.now(), role="executor", parent=planner, handover=handover)
        self.tasks.append(task)
        self._put_context(task.context_id, new_context(task.context_id,
                                                       Scope("private", "executor")), new=True)
        state = self.contexts[task.context_id]
        records = [RawRecord(ContextRecord(
            record_id=self._id(), context_id=task.context_id, context_seq=i,
            run_id=planner.run_id, role=MessageRole.USER, message_kind="user_ref",
            payload_ref=self._ref(item.text), operation_id=None, call_id=None,
            origin_input_id=item.input_id), {"text": item.text})
            for i, item in enumerate(handover, start=1)]
        self._put_context(task.context_id, append_records(
            state, records, mutation_id=self._id(), source_kind=MutationSourceKind.RUNTIME,
            source_ref=f"delegate:{call_id}").state)
        self._commit("EXECUTION_STARTED", begin(task.context_id))
        return task

    # --- hooks ----------------------------------------------------------------------------------

    def _named_records(self, run: RunState, state: ContextState) -> dict[str, UUID]:
        """The records a hook item or a writer may name instead of an id: the last one, the
        first assistant decision, the Run's question, a shared field by its name."""
        named = {"last": state.records[-1].record_id} if state.records else {}
        shared_id = (run.parent or run).shared_context_id
        if shared_id is not None:
            for raw in self.contexts[shared_id].records:
                named[f"shared:{raw.content.get('name')}"] = raw.record_id
        assistants = [raw.record_id for raw in state.records
                      if raw.record.message_kind == "assistant"]
        if assistants:
            named["first_assistant"] = assistants[0]
        for raw in state.records:
            if raw.record.message_kind == "user_ref" and raw.record.origin_input_id is not None \
                    and raw.record.origin_input_id == run.question_input_id:
                named["question"] = raw.record_id
        return named

    def _hooks(self, point: HookPoint, run: RunState, payload: Mapping[str, JSON],
               call_id: UUID | None, record_id: UUID | None, stage: str = "pre",
               extra: Callable[[ChainOutcome | None], Sequence[Write]] | None = None,
               always: Sequence[Write] = (), budget: BudgetRoom | None = None
               ) -> ChainOutcome | None:
        """Run a hook chain and commit its decisions (HOOK_DECISION) together with ``extra``
        writes made from the outcome and the ``always`` writes — the loop checkpoint that
        records the chain as done (§10: a committed decision is reused, never re-run)."""
        if not self.hooks.registered(point):
            return None
        state = self.contexts[run.context_id]
        named = self._named_records(run, state)
        # The hook reads a copy: it changes a call only by a validated patch, never by writing
        # into the payload the runtime goes on with (§3; CTX-3.7).
        context = HookContext(point, copy.deepcopy(payload), run.context_id,
                              state.head.revision, call_id, record_id,
                              self._ordinal(f"hook:{point}"), named)
        # The chain is marked as running before it is asked. Finding the same mark at a
        # takeover means the process died while the hook ran: its outcome is unknown, so it
        # follows the hook failure rule — dropped, never asked again (§10, CTX-3.59).
        marker: JSON = {"point": point, "call_id": None if call_id is None else str(call_id),
                        "stage": stage, "loops": run.loops}
        if self.store.checkpoint(run.run_id, "hook") == marker:
            replies: tuple[HookReply, ...] = (HookReply(failed=True),)
        else:
            self._commit("HOOK_STARTED", [checkpoint_write(run.run_id, "hook", marker)])
            self.trace.add(tr.HookCalled(point, stage))
            replies = self.hooks.items(context)
        settled = checkpoint_write(run.run_id, "hook", None)
        if not replies:
            # Saved like any decision, so a takeover does not ask the hooks again.
            self._commit("HOOK_DECISION", [settled, *(extra(None) if extra else ()), *always])
            return None
        shared_id = (run.parent or run).shared_context_id
        states = {run.context_id: state}
        if shared_id is not None:
            states[shared_id] = self.contexts[shared_id]
        # A patch for the shared scope of a Run that has none addresses no context: it is
        # invalid (UNAUTHORISED_SCOPE), never redirected to the role's own (CTX-1.18).
        proposals = [HookProposal(self._id(), r.decision, r.payload_ops,
                                  run.context_id if r.scope != "shared" else
                                  shared_id or NO_SCOPE, r.base_revision, r.context_ops,
                                  r.failed)
                     for r in replies]
        authorised = frozenset({shared_id}) if shared_id is not None and \
            self.contexts[shared_id].scope.may_read(run.role) else frozenset()
        chain_operation = self._id()
        # The chain is an Operation of its own (purpose hook) so its invocations belong to the
        # Run in the store; the trace shows its decisions (HookDecided), not its state.
        self.operations[chain_operation] = Operation(
            operation_id=chain_operation, run_id=run.run_id, node_task_id=run.context_id,
            purpose=OperationPurpose.HOOK, purpose_key=f"hook:{point}:{chain_operation}",
            state=OperationState.SUCCEEDED)
        self.pending.put_doc(self.operations[chain_operation], new=True)
        call = HookCall(operation_id=chain_operation, hook_point=point,
                        stage="post" if stage == "post" else "pre", actor_role=run.role,
                        actor_context_id=run.context_id, call_id=call_id,
                        call_record_id=record_id, authorised_scopes=authorised)
        chain = run_chain(proposals, call, REGISTRIES[point], states, payload,
                          annotation_ids=lambda _p, _i: self._id(), budget=budget)
        for context_id in states:
            self._put_context(context_id, chain.states[context_id])
        self._commit("HOOK_DECISION", [*(insert_doc(item.invocation) for item in chain.items),
                                       *(extra(chain) if extra is not None else ()), settled,
                                       *always])
        for item in chain.items:
            inv = item.invocation
            self.trace.add(tr.HookDecided(
                point, inv.chain_position, inv.decision.value, inv.patch_valid,
                tuple(d.code for d in inv.diagnostics),
                tuple(f"{c.field_key}={json.dumps(c.value, ensure_ascii=False, default=str)}"
                      for _, c in item.changes.context_changes)))
        return chain



def _raw_call(call: ProposedCall) -> dict[str, JSON]:
    """A proposed call as the raw answer keeps it: what the provider sent, its id included."""
    raw: dict[str, JSON] = {"name": call.name, "arguments": dict(call.arguments)}
    if call.provider_call_id is not None:
        raw["provider_call_id"] = call.provider_call_id
    if call.malformed_arguments is not None:
        raw["malformed_arguments"] = call.malformed_arguments
    return raw


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


def artifact_text(artifact: Artifact) -> str:
    """How a non-text result enters the view: its metadata and accessible path (§6)."""
    return json.dumps({"artifact": {"path": artifact.path, "media_type": artifact.media_type,
                                    "size_bytes": artifact.size_bytes}}, sort_keys=True)


class _HandoverOnly:
    """The history an Executor's view reads: none. Its hand-over items are its own inputs,
    not the Session's UserInputs."""

    def user_inputs(self, run: EndedRun) -> list[InputOccurrence]:
        return []

    def root_records(self, run: EndedRun) -> list[EffectiveRecord]:
        return []

    def placement(self, input_id: UUID) -> InputPlacement:
        return InputPlacement(None, None)


__all__ = ["REGISTRIES", "AccessDenied", "AgentConfig", "AgentDeleted", "Crash", "CrashPlan",
           "HistoryCaller", "ReferenceRuntime", "RunState"]
