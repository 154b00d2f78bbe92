"""A role's position as data (§10 "角色可恢复状态：当前阶段、上下文水位、待处理调用/批次"; "持久
GraphCheckpoint、NodeCheckpoint … 才是可恢复事实"): :class:`NodeStage`, the step the role's
loop runs next, and :class:`NodeCheckpoint`, everything a takeover needs to run it — the
request in flight, its failed attempts (:class:`AttemptsMade`), the compaction chunk it folds
(:class:`ChunkStep`), the open batch's members and the hook chain marked running
(:class:`HookStarted`). One record: recovery reads the position
from it alone. Re-exported by :mod:`contracts`.
"""

from enum import StrEnum
from typing import Any, Literal, Self
from uuid import UUID

from pydantic import Field, model_validator

from ctxspec.reference.contract_base import Contract, Count, PayloadRef


class NodeStage(StrEnum):
    """Where a role's loop stands, the "当前阶段" of §10's 角色可恢复状态, naming the step the loop
    runs next (for the role's own incarnation or a takeover): no request in flight (the next
    Loop; a new role starts here); the pre-request chain decided, or its deny (Q75); the
    request's compaction episode planned or at a chunk, its chunks all committed, its snapshot
    published (or refused); T_FREEZE, or a failed attempt; an attempt's
    outcome received (its first output's receipt saved); the raw answer saved; its effective
    record saved (its post-response chain next); the answer decided (its calls settle one by
    one, then the feedback)."""

    LOOP_DONE = "loop_done"
    PREPARED = "prepared"
    DENIED = "denied"
    COMPACTING = "compacting"
    SUMMARISED = "summarised"
    COMPACTED = "compacted"
    FROZEN = "frozen"
    ANSWERED = "answered"
    RAW_SAVED = "raw_saved"
    POST = "post"
    BATCH = "batch"


_EPISODE = frozenset({NodeStage.COMPACTING, NodeStage.SUMMARISED, NodeStage.COMPACTED})
_NEEDS_OPERATION = frozenset({NodeStage.PREPARED, NodeStage.DENIED, *_EPISODE,
                              NodeStage.FROZEN, NodeStage.ANSWERED,
                              NodeStage.RAW_SAVED})  # a request in flight
_REQUEST_SENT = frozenset({NodeStage.FROZEN, NodeStage.ANSWERED})


class AttemptsMade(Contract):
    """A request's failed attempts, stored facts a takeover goes on after, never renews (§10
    "attempt … 不重置"): how many failed, whether the last one had shown a partial output, the
    estimate the provider refused as over its window (never sent again, CTX-7.24), and the
    partial outputs of the failed ones, kept out of the context (§2 "不拼接 Attempt")."""

    failed: Count = 0
    partial: bool = False
    refused: Count | None = None
    fragments: list[PayloadRef] = Field(default_factory=list)


class ChunkStep(Contract):
    """A compaction episode's progress (§8 "每步先保存原始响应，完成后置 Hook，再提交累计摘要和
    chunk cursor"): the episode, its chunks committed (the cursor), and for the chunk it folds
    next — once its Operation exists — that Operation and purpose_key, its pre-request
    decision, its failed attempts, and its post-response chain's outcome (the effective
    summary, or a deny)."""

    episode_id: UUID
    cursor: Count
    purpose_key: str | None = None
    operation_id: UUID | None = None
    pre: Literal["allowed", "denied"] | None = None
    attempts: AttemptsMade = Field(default_factory=AttemptsMade)
    effective: PayloadRef | None = None
    denied: bool = False


class HookStarted(Contract):
    """A hook chain marked running before it is asked (HOOK_STARTED): its point, the call it
    is about (if any), its stage and the role's Loop. A takeover that finds its own chain so
    marked knows the process died while the hook ran: the outcome is unknown and follows the
    hook failure rule, never asked again (§10, CTX-3.59; Q50)."""

    point: str
    call_id: str | None
    stage: str
    loops: Count


class NodeCheckpoint(Contract):
    """A role's recoverable state, committed with each step of its loop: the stage, the Loops
    and tool calls spent (a takeover never regains them, §10 "剩余额度"), the request's
    Operation and input cutoff, its frozen manifest, the CompactionPolicy's decision it was
    fitted with, its failed attempts and whether its first output's receipt is saved; the
    compaction episode's chunk (COMPACTING, SUMMARISED, COMPACTED); the decision whose batch
    is open and that batch's members — settled (call_id → result), pre-call decisions,
    Executor executions started (call_id → context_id), raw results saved and the call
    started. Never copies of messages: identities, references and commit positions only."""

    stage: NodeStage
    loops: Count
    tool_calls_made: Count
    tick: Count
    operation_id: UUID | None = None
    cutoff: Count | None = None
    manifest: dict[str, Any] | None = None
    budget_decision: str | None = None
    attempts: AttemptsMade = Field(default_factory=AttemptsMade)
    first_output: bool = False
    compaction: ChunkStep | None = None
    decision: UUID | None = None
    settled: dict[str, dict[str, Any]] = Field(default_factory=dict)
    hooked: dict[str, dict[str, Any]] = Field(default_factory=dict)
    delegated: dict[str, str] = Field(default_factory=dict)
    raw: dict[str, dict[str, Any]] = Field(default_factory=dict)
    started: str | None = None
    hook: HookStarted | None = None

    @model_validator(mode="after")
    def _stage_facts(self) -> Self:
        if self.stage in _NEEDS_OPERATION and self.operation_id is None:
            raise ValueError(f"a {self.stage} position names its request's operation_id")
        if self.stage in (NodeStage.POST, NodeStage.BATCH) and self.decision is None:
            raise ValueError(f"a {self.stage} position names its decision")
        open_batch = (self.settled, self.hooked, self.delegated, self.raw, self.started)
        if self.stage is not NodeStage.BATCH and any(open_batch):
            raise ValueError("only a batch position holds batch members")
        if self.stage not in _EPISODE and self.compaction is not None:
            raise ValueError("only an episode's position holds the episode's chunk")
        sent = (self.attempts != AttemptsMade(), self.first_output, self.budget_decision)
        if self.stage not in _REQUEST_SENT and any(sent):
            raise ValueError("only a frozen or answered position holds its request's attempts")
        return self

    def document(self) -> dict[str, Any]:  # stored as the step set it: what it names
        return self.model_dump(mode="json", exclude_unset=True)
