"""The ports a runtime is driven through (§3 "可替换端口", §7, §8): the model, the tools, the
hooks, the clock, the token estimator (``tokens.py``) and the world at the loop's named
moments come from outside. The runtime never
decides what a model says or what a tool returns; scripted ports (conformance/scenario.py)
and a production runtime's adapters implement these.

A public seam (docs/architecture.md "Layers"): the reference runtime (``reference/runtime/``)
and the conformance package both import it, and neither owns it, so the scenario schema does
not depend on the implementation it judges. Values only: no I/O, no process-wide state.
"""

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, Protocol
from uuid import UUID

from ctxspec.reference.hooks import ContextOp, PayloadOp
from ctxspec.reference.registry import JSON
from ctxspec.reference.tokens import PromptMessage

Purpose = Literal["business", "compaction"]


@dataclass(frozen=True)
class ModelCall:
    """One attempt of a model Operation as the port sees it."""

    purpose: Purpose
    operation_id: UUID
    purpose_key: str
    attempt: int
    messages: tuple[PromptMessage, ...]
    tool_schemas: tuple[str, ...]
    max_output_tokens: int
    ordinal: int
    """The n-th request of this purpose and role this runtime made (1-based). A restarted
    runtime counts afresh, so the world — a scripted port, a scenario's triggers — counts the
    requests it receives itself."""
    role: str = "root"
    """The role making the request: root (or Planner), executor."""


@dataclass(frozen=True)
class ProposedCall:
    name: str
    arguments: Mapping[str, JSON]
    provider_call_id: str | None = None
    """The id the provider gave the call: kept as its metadata, never a platform key (§2;
    two calls may even share one)."""
    malformed_arguments: str | None = None
    """The provider's argument text when it is not a JSON object (``arguments`` is then
    empty): an output-format error (§11)."""


@dataclass(frozen=True)
class Complete:
    """A complete model response. ``output_tokens`` and ``input_tokens`` are the actual usage
    the provider reported for it, None when it reported none: for audit and deviation
    monitoring only, never a reason to change the request that was sent (§7, CTX-7.21)."""

    text: str
    tool_calls: tuple[ProposedCall, ...] = ()
    reasoning: str | None = None
    output_tokens: int | None = None
    input_tokens: int | None = None
    cut: bool = False
    """The provider stopped the answer at the request's max_output_tokens (a finish reason of
    "length"): complete as a stream, but cut."""


@dataclass(frozen=True)
class Failed:
    """The attempt failed before any output."""

    code: str


@dataclass(frozen=True)
class PartialThenFailed:
    """Some output arrived (a first output), then the stream broke: never a decision (§6)."""

    fragment: str
    code: str


@dataclass(frozen=True)
class ContextLengthExceeded:
    """The provider itself refused the request as over its window (§7): never retried."""


ModelOutcome = Complete | Failed | PartialThenFailed | ContextLengthExceeded


class ModelPort(Protocol):
    def call(self, request: ModelCall) -> ModelOutcome: ...


@dataclass(frozen=True)
class Artifact:
    """A non-text result (§6): metadata and an accessible path, never bytes as chat text."""

    path: str
    media_type: str
    size_bytes: int


@dataclass(frozen=True)
class ToolOutcome:
    """A tool's result: its text, or a business error (a structured error result, §6), or an
    artifact; ``workspace_writes`` are files the tool wrote in the workspace (path → text),
    which are never session facts (§1)."""

    text: str = ""
    error: str | None = None
    artifact: Artifact | None = None
    workspace_writes: Mapping[str, str] = field(default_factory=dict)
    latency: int | None = None
    """The logical time the call took, as the world reports it (None: not known). Calls of a
    batch that run concurrently finish in latency order; the model protocol order is still the
    action order, never the completion order (§2, CTX-2.28)."""


@dataclass(frozen=True)
class ToolSpec:
    """A tool as the Agent declares it and the model request carries it."""

    name: str
    schema: str
    """The tool's JSON schema as canonical JSON text (what the model request carries)."""


class ToolPort(Protocol):
    def run(self, name: str, arguments: Mapping[str, JSON], ordinal: int) -> ToolOutcome: ...


Moment = Literal["freeze", "first_output", "raw_saved", "batch_call"]
"""Boundaries of the loop the design names, where the outside world may act (a scenario's
trigger): ``freeze`` — a business request's input cutoff is fixed and it is about to be frozen
(§5); ``first_output`` — the first output of an answer arrived, its stream has not ended (§5);
``raw_saved`` — a raw result (an answer's, a tool's, a chunk's) is saved and its post chain not
asked yet (§3, §10); ``batch_call`` — a call of a batch is about to pass the execution gate, the
calls before it settled (§6)."""


class MomentPort(Protocol):
    def at(self, moment: Moment) -> None:
        """The runtime reached ``moment``; whatever the world does now happens there."""
        ...


class NoMoments:
    """A world that does nothing at the loop's boundaries."""

    def at(self, moment: Moment) -> None:
        return None


HookPoint = Literal["model.pre_request", "model.post_response", "tool.pre_call",
                    "tool.post_call", "compaction.pre_request", "compaction.post_response",
                    "capability.pre_call"]


@dataclass(frozen=True)
class HookReply:
    """What a hook returned: a decision and patches, or a handler failure / timeout."""

    decision: str = "allow"
    payload_ops: tuple[PayloadOp, ...] = ()
    context_ops: tuple[ContextOp, ...] = ()
    base_revision: int | None = None
    failed: bool = False
    scope: Literal["own", "shared"] = "own"
    """Which scope the context operations address: the role's own context, or the Run's
    shared scope (valid only for an authorised consumer, §3)."""


@dataclass(frozen=True)
class HookContext:
    """What a hook item reads: the point, the payload, the stable ids it may address, and the
    head revision of each scope it may write — each scope its own (§3 "共享字段与私有 context
    使用各自 revision"), so a patch of a shared field names the shared scope's revision as its
    base, never the role's private one."""

    point: HookPoint
    payload: Mapping[str, JSON]
    context_id: UUID | None
    revision: int | None
    """The head revision of the role's own (private) context."""
    call_id: UUID | None
    record_id: UUID | None
    ordinal: int
    """The n-th invocation of this hook point in the Run (1-based)."""
    records: Mapping[str, UUID] = field(default_factory=dict)
    """Named stable record ids a script may address (e.g. "system_prompt", "question")."""
    shared_revision: int | None = None
    """The head revision of the Run's shared scope, given only to a role that is one of its
    authorised consumers (None: no shared scope, or the role may not read it, §3 作用域)."""


class HookPort(Protocol):
    def registered(self, point: HookPoint) -> bool:
        """Whether any hook is registered at ``point`` (the Agent's configuration): a point
        without one is never asked and costs no commit."""
        ...

    def items(self, context: HookContext) -> tuple[HookReply, ...]:
        """The chain's items for this invocation, in order (may be empty)."""
        ...


class NoHooks:
    def registered(self, point: HookPoint) -> bool:
        return False

    def items(self, context: HookContext) -> tuple[HookReply, ...]:
        return ()


class Clock(Protocol):
    def now(self) -> int:
        """Logical time in ticks; every model call and tool run advances it by one."""
        ...

    def tick(self) -> None: ...


class LogicalClock:
    def __init__(self) -> None:
        self._now = 0

    def now(self) -> int:
        return self._now

    def tick(self) -> None:
        self._now += 1


class ScriptExhausted(RuntimeError):
    """A scripted port ran out: the scenario did not say what should happen next."""
