"""The Session the reference runtime holds (§1 "Session", §2 identities, §3 "一致提交", §10):
the Agent's resolved configuration, the ports, the facts of one Session in memory (its inputs
and deliveries, Runs, role contexts, Operations, Executor tasks) and the pending write set of
the next RuntimeCommit.

Every component of the runtime (:mod:`context_manager`, :mod:`compaction_service`,
:mod:`pipeline`, :mod:`node_driver`) works on one :class:`SessionState`. A step that changes a
fact puts its rows into the pending write set with the ``put_*`` methods at once; only
:meth:`SessionState.commit` hands a named RuntimeCommit to the CommitCoordinator. Recovery
(:mod:`restore`) builds a SessionState from the store through the same constructor.
"""


import itertools
import uuid as uuidlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Literal
from uuid import UUID

from ctxspec.reference import delivery as dl
from ctxspec.reference.budget import (
    BudgetConfig,
    ResolvedBudget,
    resolve_budget,
)
from ctxspec.reference.context_contracts import mutation_contract, revision_contract
from ctxspec.reference.contracts import (
    TERMINAL_RUN_STATUSES,
    ChunkStep,
    CompactionEpisode,
    NodeCheckpoint,
    NodeStage,
    Operation,
    OperationPurpose,
    OperationState,
    PayloadRef,
    RoleContext,
    Run,
    RunStatus,
)
from ctxspec.reference.effective import (
    ContextState,
)
from ctxspec.reference.errors import ErrorCode
from ctxspec.reference.hooks import ChainOutcome
from ctxspec.reference.policy import CompactionPolicy
from ctxspec.reference.ports import (
    Clock,
    HookPoint,
    HookPort,
    ModelPort,
    MomentPort,
    NoMoments,
    ToolPort,
    ToolSpec,
)
from ctxspec.reference.protection import ProtectedInput
from ctxspec.reference.registry import JSON, FieldRegistry, FieldSpec
from ctxspec.reference.runtime import trace as tr
from ctxspec.reference.runtime.context_writes import (
    ContextDelta,
    ContextWriteSet,
    ModelFreezeWriteSet,
)
from ctxspec.reference.runtime.coordinator import PendingCommit
from ctxspec.reference.runtime.operations import OperationTable
from ctxspec.reference.runtime.ownership import Lease, Ownership
from ctxspec.reference.runtime.store import (
    CommitCoordinator,
    CommitFailed,
    Store,
    Write,
    checkpoint_write,
    event_write,
    insert_doc,
    record_write,
    revision_write,
    update_doc,
)
from ctxspec.reference.snapshots import (
    ActivePointer,
    SourceManifest,
)
from ctxspec.reference.tokens import TokenEstimator

EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
REQUEST_DENIED = "a hook denied the model request; it was not sent"
RESPONSE_DENIED = "a hook denied the model response; it was not delivered"
INVOCATION_ERRORS = frozenset({ErrorCode.CONTEXT_PROTECTED_INPUT_TOO_LARGE.value,
                               ErrorCode.CONTEXT_WINDOW_EXCEEDED.value,
                               ErrorCode.COMPACTION_FAILED.value})
"""The context and compaction errors that end the whole AgentInvocation, wherever in it they
happen (§8 "终结所属 AgentInvocation", §11; Q77)."""
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

    def __post_init__(self) -> None:
        # An Agent built without an id gets one of its own configuration, so two Agents
        # configured differently are never taken for one (a takeover refuses the other's
        # Session, issue #34); the same configuration keeps the same id across processes.
        if self.agent_id == DEFAULT_AGENT_ID:
            object.__setattr__(self, "agent_id", uuidlib.uuid5(
                uuidlib.NAMESPACE_URL, f"ctxspec:agent:{self!r}"))


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
    at: NodeCheckpoint | None = None
    """The position the role's step in flight was given (a hook chain marked running before
    anything of that step is committed marks it, HOOK_STARTED)."""
    chunk: ChunkStep | None = None
    """The compaction episode's progress of the request in flight, as the role's COMPACTING
    position commits it (a takeover takes it from the position it loaded)."""
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
    cutoff: int | None = None
    """The input cutoff the role's current request was prepared with (§5: kept through its
    compaction, re-materialisation and freeze, and committed with each of their positions)."""
    finished_executor_loops: int = 0
    """The Loops of this Run's Executor executions that a takeover found finished (their tasks
    are not restored); with the tasks still held they make the Run's shared Loop budget."""


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



def resolved_budget(agent: AgentConfig) -> ResolvedBudget:
    """The Agent's budget resolved once for all its Runs (§7); a configuration error is refused
    with its code, field and rule."""
    budget = resolve_budget(agent.budget)
    if not isinstance(budget, ResolvedBudget):
        raise ValueError(f"{budget.code.value}: {budget.field}: {budget.rule}")
    return budget


@dataclass
class StoredFacts:
    """A Session's facts as recovery reads them back from the store (§10): what a restored
    :class:`SessionState` is constructed from instead of an empty Session."""

    session_id: UUID
    book: dl.DeliveryBook
    texts: dict[UUID, str] = field(default_factory=dict)
    runs: dict[UUID, RunState] = field(default_factory=dict)
    contexts: dict[UUID, ContextState] = field(default_factory=dict)
    tasks: list[RunState] = field(default_factory=list)
    operations: dict[UUID, Operation] = field(default_factory=dict)
    positions: dict[UUID, NodeCheckpoint] = field(default_factory=dict)


class SessionState:
    """One Session's facts in memory, its ports and the pending write set (the runtime's
    components share it; only :meth:`commit` writes)."""

    deleted = False
    """Set once the Agent is deleted: its records are gone, so no stimulus can be served."""

    def __init__(self, agent: AgentConfig, budget: ResolvedBudget, *, model: ModelPort,
                 tools: ToolPort, hooks: HookPort, estimator: TokenEstimator, clock: Clock,
                 policy: CompactionPolicy, store: Store, coordinator: CommitCoordinator,
                 seed: str | None, crash: CrashPlan | None,
                 stored: StoredFacts | None = None, ownership: Ownership | None = None) -> None:
        """A new Session, or — given ``stored`` — the stored one a takeover continues, held
        by ``ownership`` (a new owner with the default lease when None)."""
        self.agent = agent
        self.budget = budget
        self.model, self.tools, self.hooks = model, tools, hooks
        self.estimator, self.clock = estimator, clock
        self.policy = policy
        """The CompactionPolicy port (§3): replaceable; whatever it decides, the runtime still
        re-checks the protected inputs and the hard window before anything is sent."""
        # Identities are unique per runtime unless a caller (a scenario) asks for determinism
        # with a seed: two default runtimes on one store never collide.
        self.seed = uuidlib.uuid4().hex if seed is None else seed
        self.counter = 0
        opened = self.new_id()  # a restored Session keeps its id; the counter moves the same
        facts = stored or StoredFacts(opened, dl.empty_book(opened))
        self.session_id = facts.session_id
        self.book = facts.book
        self.runs = facts.runs
        self.contexts = facts.contexts
        self.texts = facts.texts
        """input_id → the original text of every UserInput."""
        self.blobs: dict[str, str] = {}
        """digest → the whole body of a tool result (content-addressed)."""
        self.moments: MomentPort = NoMoments()
        """The outside world at the loop's boundaries (a scenario's moment triggers)."""
        self.workspace: dict[str, str] = {}
        """The Agent's workspace: files tools and scripts write. Session facts (records,
        inputs, checkpoints) never live here, so writing a file never changes them (§1)."""
        self.trace = tr.Trace()
        self.ordinals: dict[str, int] = {}
        self.store = store
        self.coordinator = coordinator
        self.operations = OperationTable(facts.operations)
        self.tasks = facts.tasks
        """Executor executions (each a NodeTask with its own RoleContext)."""
        self.pending = PendingCommit()
        self.stopped_at: str | None = None
        """The commit that failed, after which this runtime takes no stimulus."""
        """The facts changed since the previous commit, each put there by the step that
        changed it: the next named commit writes them (no comparison with the store)."""
        self.ownership = ownership or Ownership(self.owner_id(), 1, 0, Lease(), opened=False)
        """This runtime's hold on the Session: every guarded commit is fenced by its epoch."""
        self.crash = crash
        self.commit_counts: dict[str, int] = {}
        self.positions = facts.positions
        """Run id (root role) or Executor context id → the NodeCheckpoint a restored runtime's
        one loop takes the role up from (§10)."""

    def new_id(self) -> UUID:
        self.counter += 1
        return uuidlib.uuid5(uuidlib.NAMESPACE_URL, f"ctxspec:{self.seed}:{self.counter}")

    def owner_id(self) -> UUID:
        """This incarnation's owner id, apart from the id counter (so owning changes no other
        identity)."""
        return uuidlib.uuid5(uuidlib.NAMESPACE_URL, f"ctxspec:{self.seed}:owner")

    def time(self) -> datetime:
        return EPOCH + timedelta(seconds=self.clock.now())

    def ordinal(self, key: str) -> int:
        self.ordinals[key] = self.ordinals.get(key, 0) + 1
        return self.ordinals[key]

    def ref(self, text: str) -> PayloadRef:
        """A content-addressed blob of ``text``, written with the next commit."""
        return self.pending.blob(text)

    def commit(self, name: str, writes: Sequence[Write], *, alone: bool = False,
               guarded: bool = True) -> None:
        """One RuntimeCommit: ``writes`` and the facts the steps since the previous commit put
        into the pending write set, in one transaction. A failure is a runtime fault
        (CommitFailed propagates), never a hook failure, and nothing continues on a value
        storage does not have (CTX-3.90).

        ``alone``: a stimulus outside the loop's steps (a stop request, the Agent's deletion)
        writes only its own rows; what the step in flight put stays pending for that step's
        own commit. Every commit carries the owner's fence (``ownership.py``: a commit of a
        previous owner — of a Run in flight, a finalising one, or of an idle Session — matches
        no row and is refused whole; CTX-10.23, CTX-10.24), except with ``guarded=False`` (a
        deletion removes the Session whoever owns its Run)."""
        count = self.commit_counts.get(name, 0) + 1
        self.commit_counts[name] = count
        plan = self.crash
        hit = plan is not None and plan.commit == name and plan.occurrence == count
        if hit and plan is not None and plan.when == "before":
            raise Crash(f"before {name} #{count}")
        taken = PendingCommit().take() if alone else self.pending.take()
        fence = self.ownership.fence(self.session_id) if guarded else ()
        all_writes = [*taken.blob_writes(self.store.stored_blobs or ()), *fence, *taken.rows(),
                      *writes]
        try:
            if hit and plan is not None and plan.when == "fails":
                raise CommitFailed(name, RuntimeError("the store refused the commit"))
            self.coordinator.commit(name, all_writes)
        except CommitFailed as failed:
            if not alone:
                self.pending.give_back(taken)
            # Surfaced as what it is — a required write that did not happen — and the runtime
            # stops on it: nothing goes on with values the store does not have, and it is never
            # taken for a hook failure (CTX-3.90, CTX-3.91, CTX-10.28).
            self.trace.add(tr.PersistenceFailed(name, count, str(failed)))
            self.stopped_at = name
            raise
        self.ownership.committed(guarded)
        if hit:
            raise Crash(f"after {name} #{count}")

    def commits_made(self, name: str) -> int:
        """How many RuntimeCommits of ``name`` this incarnation made (crash plans count them)."""
        return self.commit_counts.get(name, 0)

    def position(self, run: RunState, stage: NodeStage | str, **facts: JSON) -> NodeCheckpoint:
        """The role's position at ``stage`` now: its Loops, the Run's tool calls spent and the
        step's own facts (§10: where the role is, which operation, what is settled; never
        copies of messages)."""
        return NodeCheckpoint.model_validate({
            "stage": stage, "loops": run.loops,
            "tool_calls_made": (run.parent or run).tool_calls_made,
            "tick": self.clock.now(), **facts})

    def checkpoint(self, run: RunState, stage: NodeStage | str, **facts: JSON) -> Write:
        """The write of the role's :meth:`position` at ``stage`` (its NodeCheckpoint, §10)."""
        return self.record_position(run, self.position(run, stage, **facts))

    def record_position(self, run: RunState, position: NodeCheckpoint) -> Write:
        return checkpoint_write(run.run_id, loop_key(run, "loop"), position.document())

    def put_context(self, context_id: UUID, state: ContextState, *, new: bool = False
                     ) -> None:
        """Keep a context's new state and stage what it adds: its new records, mutations and
        revisions (rendered at the commit, which dates them), and its role's RoleContext."""
        before = self.contexts.get(context_id)
        self.contexts[context_id] = state
        key: tuple[object, ...] = ("context", context_id)
        if key not in self.pending.entries:
            done = (0, 0) if before is None else (len(before.records), len(before.revisions))
            self.pending.put(key, lambda _new: self.context_rows(context_id, *done))
        # Each role has a context of its own: the newest roles first, since a step changes
        # the current one (a Session of 5,000 Runs keeps 5,000, issue #35).
        role = next((r for r in itertools.chain(reversed(self.tasks),
                                                reversed(self.runs.values()))
                     if r.context_id == context_id), None)
        if role is not None:
            self.put_role(role, new=new)

    def put_delta(self, delta: ContextDelta) -> None:
        """Take what the ContextManager prepared for the next commit: each changed context's
        new state (its rows staged by :meth:`put_context`) and the bodies its records point
        at."""
        for body in delta.bodies:
            self.ref(body)
        for context_id, state in delta.states:
            self.put_context(context_id, state)

    def put_context_writes(self, writes: ContextWriteSet) -> ChainOutcome:
        """Take a hook chain's write set: its Operation (purpose hook) and the contexts' new
        head revisions; the chain, for the caller's HOOK_DECISION."""
        self.operations[writes.operation.operation_id] = writes.operation
        self.pending.put_doc(writes.operation, new=True)
        self.put_delta(writes.delta)
        return writes.chain

    def put_model_freeze(self, run: RunState, frozen: ModelFreezeWriteSet) -> list[Write]:
        """Take T_FREEZE's write set: the claimed deliveries, the business Operation running
        and the role's last model Operation; the frozen position, for the commit's own
        writes."""
        if frozen.book is not None:
            self.book = frozen.book
        if frozen.deliveries is not None:
            self.deliveries_changed(frozen.deliveries)
        self.put_operation(frozen.operation_id, run, OperationPurpose.MODEL, frozen.purpose_key,
                           OperationState.RUNNING)
        run.last_model_operation_id = frozen.operation_id
        self.put_role(run)
        return [self.record_position(run, frozen.position)]

    def keep_body(self, text: str) -> PayloadRef:
        """A tool result's whole body, kept in memory and staged as its blob (§6: a bounded
        preview's ``result_ref`` points at it)."""
        ref = self.ref(text)
        self.blobs[ref.digest] = text
        return ref

    def put_role(self, run: RunState, *, new: bool = False) -> None:
        """Stage a role's RoleContext as it is when the commit is taken."""
        def rows(inserted: bool) -> list[Write]:
            doc = self.role_context(run)
            return [insert_doc(doc, run_id=doc.invocation_id) if inserted
                    else update_doc(doc, run_id=doc.invocation_id)]
        self.pending.put(("role_contexts", run.context_id), rows, new=new)

    def put_run(self, run: RunState, *, new: bool = False) -> None:
        """Stage a Run's row as it is when the commit is taken (its end, its owner epoch)."""
        self.pending.put(("runs", run.run_id), lambda inserted: [
            insert_doc(self.run_contract(run)) if inserted
            else update_doc(self.run_contract(run))], new=new)

    def put_episode(self, run: RunState, episode: CompactionEpisode, *, new: bool = False
                     ) -> None:
        if new:
            run.episodes.append(episode)
        else:
            run.episodes = [episode if e.episode_id == episode.episode_id else e
                            for e in run.episodes]
        self.pending.put_doc(episode, new=new)

    def context_rows(self, context_id: UUID, records: int, revisions: int) -> list[Write]:
        state = self.contexts[context_id]
        writes = [record_write(raw) for raw in state.records[records:]]
        for revision in state.revisions[revisions:]:
            for mutation_id in revision.mutation_ids:
                writes.append(insert_doc(mutation_contract(
                    state, mutation_id, cause_operation_id=None, created_at=self.time())))
            writes.append(revision_write(revision_contract(
                state, revision.revision, commit_ref=f"rev:{context_id}:{revision.revision}",
                created_at=self.time()), revision.overrides))
        return writes

    def put_operation(self, operation_id: UUID, run: RunState, purpose: OperationPurpose,
                   purpose_key: str, state: OperationState, raw: PayloadRef | None = None,
                   effective: PayloadRef | None = None) -> None:
        operation = Operation(
            operation_id=operation_id, run_id=run.run_id, node_task_id=run.context_id,
            purpose=purpose, purpose_key=purpose_key, state=state, raw_result_ref=raw,
            effective_result_ref=effective)
        self.pending.put_doc(operation, new=operation_id not in self.operations)
        self.operations[operation_id] = operation
        self.trace.add(tr.OperationState(operation_id, purpose_key, state.value))

    def record_seqs(self) -> dict[UUID, tuple[UUID, int]]:
        return {raw.record_id: (context_id, raw.record.context_seq)
                for context_id, state in self.contexts.items() for raw in state.records}

    def seqs(self) -> dict[UUID, list[int]]:
        return {context_id: [raw.record.context_seq for raw in state.records]
                for context_id, state in self.contexts.items()}

    def heads(self) -> dict[UUID, int]:
        return {context_id: state.head.revision for context_id, state in self.contexts.items()}

    def run_contract(self, run: RunState) -> Run:
        ended = run.status in TERMINAL_RUN_STATUSES
        return Run(run_id=run.run_id, session_id=self.session_id, run_no=run.run_no,
                   question_input_id=run.question_input_id, status=run.status,
                   error_code=run.error_code if ended and run.status is not RunStatus.SUCCEEDED
                   else None, owner_epoch=run.pointer.lease_epoch,
                   started_at=EPOCH + timedelta(seconds=run.started_at_tick),
                   ended_at=EPOCH + timedelta(seconds=run.ended_at_tick) if ended else None)

    def role_context(self, run: RunState) -> RoleContext:
        state = self.contexts[run.context_id]
        return RoleContext(context_id=run.context_id, invocation_id=run.run_id,
                           owner_node_task_id=run.context_id, role_key=run.role,
                           record_head=state.head.record_watermark,
                           effective_revision=state.head.revision,
                           active_snapshot_id=run.pointer.snapshot_id,
                           last_model_operation_id=run.last_model_operation_id)

    def event(self, run: RunState, event: ClientEventKind, detail: str,
               error_code: str | None = None) -> None:
        run.run_seq += 1
        self.pending.put_rows(("events", run.run_id, run.run_seq), [
            event_write(run.run_id, run.run_seq, {"run_seq": str(run.run_seq)})])
        self.trace.add(tr.ClientEvent(run.run_id, run.run_seq, event, detail, error_code))

    def deliveries_changed(self, writes: dl.WriteSet) -> None:
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

    def require_agent(self) -> None:
        if self.deleted:
            raise AgentDeleted("the Agent of this Session was deleted")

    def named_records(self, run: RunState, state: ContextState) -> dict[str, UUID]:
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
