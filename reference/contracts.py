"""The design's data contracts as frozen pydantic v2 models (§2, §3, §9, and the runtime facts
§5, §6, §10 refer to).

Names and fields are the design's own: UserInput, UserInputDelivery, ContextRecord and
RoleContext (§2); ContextPatch, ContextPatchOperation, ContextMutation and
EffectiveContextRevision (§3); ContextSourceRange, ContextSnapshot and CompactionEpisode (§9).
The minimal runtime contracts (Run, Operation, Attempt, HookInvocation, Batch, and a role's
NodeCheckpoint of §10) carry only what the design's rules need. Validation enforces what the
design implies (sequence numbers >= 1, states from closed sets, ranges with from <= through,
state-dependent fields) and nothing more.

Inside the reference every model forbids unknown fields; the JSON Schemas published from them
(spec/schemas/) are a projection of the core fields (§9) and stay open to additional properties.
Ids, times and blobs arrive as values: nothing here reads a clock or makes an id.
"""

from enum import StrEnum
from itertools import pairwise
from typing import Self
from uuid import UUID

from pydantic import Field, model_validator

from ctxspec.reference.contract_base import (
    SCHEMA_VERSION,
    Contract,
    Count,
    PayloadRef,
    SchemaVersion,
    Seq,
    Timestamp,
)
from ctxspec.reference.node_checkpoint import (
    AttemptsMade,
    ChunkStep,
    HookStarted,
    NodeCheckpoint,
    NodeStage,
)

# --- §2 enums ------------------------------------------------------------------------------


class InputKind(StrEnum):
    """§2: a question creates a Run; a supplement is another UserInput of a running Run."""

    QUESTION = "question"
    SUPPLEMENT = "supplement"


class DeliveryState(StrEnum):
    """§5 delivery states of one binding of a UserInput to a Run."""

    PENDING = "pending"
    CLAIMED = "claimed"
    DELIVERED = "delivered"
    CARRIED = "carried"


class MessageRole(StrEnum):
    """§2: ContextRecord.role is the model-protocol role, not the configured role."""

    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"
    SYSTEM = "system"


# --- §2 identities and records -------------------------------------------------------------


class UserInput(Contract):
    """One user input as received: its text, receive order and original attribution (§1, §2).

    A supplement is its own UserInput, never a Run. input_seq is strictly increasing per Session.
    """

    schema_version: SchemaVersion = SCHEMA_VERSION
    input_id: UUID
    session_id: UUID
    input_seq: Seq
    origin_run_id: UUID | None
    kind: InputKind
    body_ref: PayloadRef
    received_at: Timestamp


class UserInputDelivery(Contract):
    """One binding or hand-over of a UserInput to a Run (§2, §5); never overwritten, a move to
    a new Run is a new delivery pointing back through previous_delivery_id.

    Only a delivered binding has a first-output receipt and a delivery time; a claimed or
    delivered one names the Run and the model Operation that took it.
    """

    schema_version: SchemaVersion = SCHEMA_VERSION
    delivery_id: UUID
    input_id: UUID
    target_run_id: UUID | None
    operation_id: UUID | None
    previous_delivery_id: UUID | None
    state: DeliveryState
    context_seq: Seq | None
    first_output_receipt_ref: PayloadRef | None = Field(
        description="internal first-output evidence of the Operation/Attempt; "
                    "not a bus or client event")
    delivered_at: Timestamp | None

    @model_validator(mode="after")
    def _state_fields(self) -> Self:
        if self.previous_delivery_id == self.delivery_id:
            raise ValueError("previous_delivery_id must name an earlier delivery, not itself")
        delivered = self.state is DeliveryState.DELIVERED
        if delivered != (self.first_output_receipt_ref is not None):
            raise ValueError("first_output_receipt_ref is set exactly when state is 'delivered'")
        if delivered != (self.delivered_at is not None):
            raise ValueError("delivered_at is set exactly when state is 'delivered'")
        if self.state in (DeliveryState.CLAIMED, DeliveryState.DELIVERED) and (
                self.target_run_id is None or self.operation_id is None):
            raise ValueError(f"a {self.state.value} delivery names its target_run_id and the "
                             "operation_id that claimed it")
        return self


class ContextRecord(Contract):
    """One appended message fact of a role's context (§2); never overwritten.

    (context_id, context_seq) is unique; a tool record always names its call.
    """

    schema_version: SchemaVersion = SCHEMA_VERSION
    record_id: UUID
    context_id: UUID
    context_seq: Seq
    run_id: UUID
    role: MessageRole
    message_kind: str = Field(pattern=r"^[a-z][a-z0-9_]*$",
                              description="user_ref / assistant / tool_result / feedback / "
                                          "outcome / ...")
    payload_ref: PayloadRef
    operation_id: UUID | None
    call_id: UUID | None
    origin_input_id: UUID | None

    @model_validator(mode="after")
    def _tool_has_call(self) -> Self:
        if self.role is MessageRole.TOOL and self.call_id is None:
            raise ValueError("a record with role 'tool' must name its call_id")
        if self.message_kind == "user_ref" and self.origin_input_id is None:
            raise ValueError("a user_ref record must name the origin_input_id it refers to")
        return self


class RoleContext(Contract):
    """The context of one React-style NodeTask (§2). effective_revision is the head, read as a
    projection inside the commit; revision 1 is the context's initial, empty revision."""

    schema_version: SchemaVersion = SCHEMA_VERSION
    context_id: UUID
    invocation_id: UUID
    owner_node_task_id: UUID
    role_key: str = Field(min_length=1)
    record_head: Count
    effective_revision: Seq
    active_snapshot_id: UUID | None
    last_model_operation_id: UUID | None


# --- §3 effective context ------------------------------------------------------------------


class PatchOperationKind(StrEnum):
    """§3: the two permitted patch operations; there is no array-index patch protocol."""

    REPLACE_VALUE = "replace_value"
    APPEND_ANNOTATION = "append_annotation"


class MutationSourceKind(StrEnum):
    HOOK = "hook"
    RUNTIME = "runtime"
    USER = "user"


class ContextPatchOperation(Contract):
    """Addresses a stable record and a registered semantic field, never a view index (§3)."""

    target_record_id: UUID
    field_key: str = Field(min_length=1, pattern=r"^[^/]",
                           description="semantic field declared by the hook point, e.g. "
                                       "tool_call:<call_id>.arguments.path; not a "
                                       "/messages/3/... view path")
    operation: PatchOperationKind
    value_ref: PayloadRef


class ContextPatch(Contract):
    """A hook's proposed context change against one base revision (§3)."""

    context_id: UUID
    base_revision: Seq
    operations: tuple[ContextPatchOperation, ...] = Field(min_length=1)


class ContextMutation(Contract):
    """One authorised, committed change (§3); append-only. Committing the same mutation_id
    again returns the original revision without re-applying the patch."""

    mutation_id: UUID
    context_id: UUID
    base_revision: Seq
    committed_revision: Seq
    source_kind: MutationSourceKind
    source_ref: str = Field(min_length=1, description="e.g. a hook_invocation_id or input_id")
    cause_operation_id: UUID | None
    patch_ref: PayloadRef
    created_at: Timestamp

    @model_validator(mode="after")
    def _advances(self) -> Self:
        if self.committed_revision <= self.base_revision:
            raise ValueError("committed_revision must be greater than base_revision")
        return self


class EffectiveContextRevision(Contract):
    """An immutable effective version every consumer reads (§3). mutation_ids are the ones newly
    committed relative to the parent; the manifest maps stable record ids to effective content
    refs, visible fields and sources (references, not copies of the raw text)."""

    context_id: UUID
    revision: Seq
    parent_revision: Seq | None
    record_watermark: Count
    mutation_ids: tuple[UUID, ...]
    effective_manifest_ref: PayloadRef
    commit_ref: str = Field(min_length=1)
    created_at: Timestamp

    @model_validator(mode="after")
    def _lineage(self) -> Self:
        if self.revision == 1 and self.parent_revision is not None:
            raise ValueError("revision 1 is a context's first revision and has no parent")
        if self.revision > 1 and (self.parent_revision is None
                                  or self.parent_revision >= self.revision):
            raise ValueError("parent_revision must be an earlier revision of the same context")
        if len(set(self.mutation_ids)) != len(self.mutation_ids):
            raise ValueError("mutation_ids must not repeat a mutation")
        return self


# --- §9 snapshots and episodes -------------------------------------------------------------


class ContextSourceRange(Contract):
    """A covered range of one context's records; never a bare sequence number (§9)."""

    context_id: UUID
    from_seq: Seq
    through_seq: Seq

    @model_validator(mode="after")
    def _ordered(self) -> Self:
        if self.from_seq > self.through_seq:
            raise ValueError(f"from_seq ({self.from_seq}) must be <= through_seq "
                             f"({self.through_seq})")
        return self


class ContextSnapshot(Contract):
    """A successful compaction's summary with its exact coverage and source versions (§9).

    Every source range's context has its fixed effective revision; ranges of one context never
    overlap. tail_after_seq is the read watermark of this snapshot's own context only.
    """

    schema_version: SchemaVersion = SCHEMA_VERSION
    snapshot_id: UUID
    context_id: UUID
    generation: Seq
    source_ranges: tuple[ContextSourceRange, ...] = Field(min_length=1)
    source_effective_revisions: dict[UUID, Seq]
    protected_input_ids: tuple[UUID, ...]
    summary_ref: PayloadRef
    tail_after_seq: Count
    token_estimate: Count

    @model_validator(mode="after")
    def _coverage(self) -> Self:
        for source in self.source_ranges:
            if source.context_id not in self.source_effective_revisions:
                raise ValueError(f"source range of context {source.context_id} has no entry in "
                                 "source_effective_revisions")
        by_context = sorted(self.source_ranges, key=lambda r: (str(r.context_id), r.from_seq))
        for earlier, later in pairwise(by_context):
            if earlier.context_id == later.context_id and later.from_seq <= earlier.through_seq:
                raise ValueError(f"source ranges of context {later.context_id} overlap")
        return self


class EpisodeStatus(StrEnum):
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


class CompactionEpisode(Contract):
    """One independent, resumable compaction (§8, §9): running -> succeeded | failed | cancelled.

    result_snapshot_id is set exactly when it succeeded (one-to-one with its snapshot);
    chunk_cursor counts completed material chunks, from 0.
    """

    schema_version: SchemaVersion = SCHEMA_VERSION
    episode_id: UUID
    run_id: UUID
    owner_node_task_id: UUID
    triggering_model_operation_id: UUID
    current_operation_id: UUID | None
    result_snapshot_id: UUID | None
    source_view_hash: str = Field(min_length=1)
    source_manifest_ref: PayloadRef
    source_effective_revisions: dict[UUID, Seq]
    release_id: UUID
    prompt_version: str = Field(min_length=1)
    chunk_cursor: Count
    accumulated_summary_ref: PayloadRef | None
    input_tokens_estimated: Count
    created_at: Timestamp
    status: EpisodeStatus
    revision: Seq

    @model_validator(mode="after")
    def _result(self) -> Self:
        succeeded = self.status is EpisodeStatus.SUCCEEDED
        if succeeded != (self.result_snapshot_id is not None):
            raise ValueError("result_snapshot_id is set exactly when status is 'succeeded'")
        if succeeded and self.accumulated_summary_ref is None:
            raise ValueError("a succeeded episode has its accumulated_summary_ref")
        return self


# --- Minimal runtime contracts the design refers to (§2, §5, §6, §10, §11) -----------------


class RunStatus(StrEnum):
    """A Run is running or ended; failed, stopped, timed out and loop exhausted all count as
    ended questions for history projection (§4)."""

    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    STOPPED = "stopped"
    TIMED_OUT = "timed_out"
    LOOP_EXHAUSTED = "loop_exhausted"


TERMINAL_RUN_STATUSES = frozenset(RunStatus) - {RunStatus.RUNNING}


class Run(Contract):
    """One question's execution in a Session (§2); run_no is the Session's question order."""

    schema_version: SchemaVersion = SCHEMA_VERSION
    run_id: UUID
    session_id: UUID
    run_no: Seq
    question_input_id: UUID
    status: RunStatus
    error_code: str | None = None
    owner_epoch: Seq = 1
    started_at: Timestamp
    ended_at: Timestamp | None = None

    @model_validator(mode="after")
    def _terminal(self) -> Self:
        ended = self.status in TERMINAL_RUN_STATUSES
        if ended != (self.ended_at is not None):
            raise ValueError("ended_at is set exactly when the Run has a terminal status")
        if self.error_code is not None and self.status in (RunStatus.RUNNING,
                                                           RunStatus.SUCCEEDED):
            raise ValueError("only a Run that ended without success carries an error_code")
        return self


class OperationPurpose(StrEnum):
    MODEL = "model"
    TOOL = "tool"
    HOOK = "hook"
    COMPACTION = "compaction"


class OperationState(StrEnum):
    """Real execution states; a protocol placeholder never rewrites unknown or cancelled (§6)."""

    PREPARED = "prepared"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    UNKNOWN = "unknown"


class Operation(Contract):
    """A logical call (model, tool, hook or compaction chunk) with its stable purpose_key and the
    raw and effective result refs kept apart (§2, §10)."""

    schema_version: SchemaVersion = SCHEMA_VERSION
    operation_id: UUID
    run_id: UUID
    node_task_id: UUID
    purpose: OperationPurpose
    purpose_key: str = Field(min_length=1,
                             description="e.g. compaction:<episode_id>:chunk:<ordinal>")
    state: OperationState
    raw_result_ref: PayloadRef | None = None
    effective_result_ref: PayloadRef | None = None

    @model_validator(mode="after")
    def _effective_after_raw(self) -> Self:
        if self.effective_result_ref is not None and self.raw_result_ref is None:
            raise ValueError("an effective_result_ref exists only after the raw_result_ref")
        return self


class Attempt(Contract):
    """One try of an Operation; a retry never splices material of another Attempt (§5, §12)."""

    schema_version: SchemaVersion = SCHEMA_VERSION
    attempt_id: UUID
    operation_id: UUID
    attempt_no: Seq
    state: OperationState
    owner_epoch: Seq
    raw_result_ref: PayloadRef | None = None
    partial_material_ref: PayloadRef | None = None
    first_output_receipt_ref: PayloadRef | None = None


class HookDecision(StrEnum):
    """A hook item's control decision; 'failed' is a handler error or timeout (fail-open),
    'unknown' an item whose outcome was never committed (§3, §10)."""

    ALLOW = "allow"
    DENY = "deny"
    FAILED = "failed"
    UNKNOWN = "unknown"


class HookDiagnostic(Contract):
    code: str = Field(min_length=1)
    field_key: str | None = None
    detail: str = ""


class HookInvocation(Contract):
    """One hook item on an Operation's chain: decision, patches, diagnostics and the cursor, reused
    by hook_invocation_id on recovery and never re-run (§3, §10)."""

    schema_version: SchemaVersion = SCHEMA_VERSION
    hook_invocation_id: UUID
    operation_id: UUID
    hook_point: str = Field(min_length=1)
    chain_position: Count
    decision: HookDecision
    payload_patch_ref: PayloadRef | None = None
    context_patch: ContextPatch | None = None
    patch_valid: bool = True
    change_set_hash: str | None = None
    registry_version: str = Field(min_length=1, description="field registry and mapping version")
    diagnostics: tuple[HookDiagnostic, ...] = ()


class BatchMemberState(StrEnum):
    PENDING = "pending"
    SETTLED = "settled"


class BatchMember(Contract):
    action_ordinal: Seq
    call_id: UUID
    operation_id: UUID
    state: BatchMemberState


class Batch(Contract):
    """A model decision's tool batch: members in action order (ordinals 1..n), settled one by
    one, fed back to the role once when all are settled (§6, §10)."""

    schema_version: SchemaVersion = SCHEMA_VERSION
    batch_id: UUID
    run_id: UUID
    context_id: UUID
    model_operation_id: UUID
    members: tuple[BatchMember, ...] = Field(min_length=1)
    feedback_record_id: UUID | None = None

    @model_validator(mode="after")
    def _ordered(self) -> Self:
        ordinals = [m.action_ordinal for m in self.members]
        if ordinals != list(range(1, len(ordinals) + 1)):
            raise ValueError(f"member action_ordinal must be 1..{len(ordinals)} in order, "
                             f"got {ordinals}")
        if len({m.call_id for m in self.members}) != len(self.members):
            raise ValueError("each batch member has its own call_id")
        if self.feedback_record_id is not None and any(
                m.state is not BatchMemberState.SETTLED for m in self.members):
            raise ValueError("feedback exists only once every member is settled")
        return self


CONTRACTS: tuple[type[Contract], ...] = (
    PayloadRef, UserInput, UserInputDelivery, ContextRecord, RoleContext,
    ContextPatchOperation, ContextPatch, ContextMutation, EffectiveContextRevision,
    ContextSourceRange, ContextSnapshot, CompactionEpisode,
    Run, Operation, Attempt, HookDiagnostic, HookInvocation, BatchMember, Batch,
    NodeCheckpoint,
)
"""Every published contract, in the order of the design; each gets spec/schemas/<name>.json."""

__all__ = [
    "CONTRACTS",
    "SCHEMA_VERSION",
    "TERMINAL_RUN_STATUSES",
    "Attempt",
    "AttemptsMade",
    "Batch",
    "BatchMember",
    "BatchMemberState",
    "ChunkStep",
    "CompactionEpisode",
    "ContextMutation",
    "ContextPatch",
    "ContextPatchOperation",
    "ContextRecord",
    "ContextSnapshot",
    "ContextSourceRange",
    "Contract",
    "Count",
    "DeliveryState",
    "EffectiveContextRevision",
    "EpisodeStatus",
    "HookDecision",
    "HookDiagnostic",
    "HookInvocation",
    "HookStarted",
    "InputKind",
    "MessageRole",
    "MutationSourceKind",
    "NodeCheckpoint",
    "NodeStage",
    "Operation",
    "OperationPurpose",
    "OperationState",
    "PatchOperationKind",
    "PayloadRef",
    "RoleContext",
    "Run",
    "RunStatus",
    "SchemaVersion",
    "Seq",
    "Timestamp",
    "UserInput",
    "UserInputDelivery",
]
