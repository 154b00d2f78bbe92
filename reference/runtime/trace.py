"""The neutral trace: what the design makes observable of a runtime, recorded as events
(docs/architecture.md "Layers"). The conformance cases assert over these, never over
the reference's internals: model requests as sent, the usage a provider reported for them,
tools executed with their effective
arguments, deliveries, operation states, run terminal states and error codes, client events
(run_seq: lifecycle, progress, terminal; never model tokens, §2), hook decisions.
"""

import hashlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any, Literal
from uuid import UUID

from ctxspec.reference.segments import marked
from ctxspec.reference.view import ModelView, RenderedMessage, RenderedRequest, ViewMessage

_Parts = tuple[tuple[Any, ...], list[Any] | None, int, tuple[Any, ...]]
"""A request value's messages as the trace keeps them: those before a kept segment, the
segment's shared list and length, those after it."""


def _parts(messages: tuple[Any, ...], holder: object) -> _Parts:
    found = marked(holder)
    if found is None:
        return messages, None, 0, ()
    at, segment = found
    return messages[:at], segment.backing, len(segment), messages[at + len(segment):]


def _known(messages: tuple[Any, ...], known: dict[Any, Any]) -> tuple[Any, ...]:
    """``messages`` with each one ``known`` holds an equal of replaced by it (a message whose
    fields are not hashable is kept as it is)."""
    out = []
    for message in messages:
        try:
            out.append(known.setdefault(message, message))
        except TypeError:  # a field of it is a mapping: compared by value, never shared
            out.append(message)
    return tuple(out)


def _joined(parts: _Parts) -> tuple[Any, ...]:
    before, backing, length, after = parts
    return before if backing is None else (*before, *backing[:length], *after)


class _KeptInParts:
    """The field of a request's view or rendering, kept as :data:`_Parts`: every request of a
    Run sends the older Runs' messages (the kept segment of :mod:`~ctxspec.reference.segments`),
    and a trace that kept a tuple of them per request would grow with the square of the
    Session (5,000 short Runs: a gigabyte, issue #35). Reading the field gives the value whole
    (without the mark), made from its parts."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.key = f"_{name}_parts"

    def __get__(self, instance: object, owner: type | None = None) -> Any:
        if instance is None:
            return self
        kept = instance.__dict__[self.key]
        if not isinstance(kept, tuple):
            return kept
        kind, parts, *rest = kept
        if kind is ModelView:
            return ModelView(_joined(parts))
        return RenderedRequest(_joined(parts), *rest)

    def share(self, instance: object, known: dict[Any, Any]) -> None:
        """Give the messages around the kept segment as the equal ones ``known`` holds (the
        trace's), adding those it lacks: a request re-projects the current Run's messages, and
        a trace that kept each request's own copies would hold every recent message once per
        request that sent it (issue #35)."""
        kept = instance.__dict__[self.key]
        if not isinstance(kept, tuple):
            return
        kind, (before, backing, length, after), *rest = kept
        instance.__dict__[self.key] = (kind, (_known(before, known), backing, length,
                                              _known(after, known)), *rest)

    def __set__(self, instance: object, value: Any) -> None:
        if isinstance(value, ModelView):
            kept: Any = (ModelView, _parts(value.messages, value))
        elif isinstance(value, RenderedRequest):
            kept = (RenderedRequest, _parts(value.messages, value), value.tool_schemas,
                    value.reasoning_sent)
        else:
            kept = value
        instance.__dict__[self.key] = kept


@dataclass(frozen=True)
class ModelRequestSent:
    """One attempt of a model request, exactly as sent, with its budget figures."""

    purpose: Literal["business", "compaction"]
    operation_id: UUID
    purpose_key: str
    attempt: int
    view: ModelView
    estimated_input_tokens: int
    max_output_tokens: int
    window: int
    output_reserve: int
    safety_margin: int
    input_budget: int
    trigger_threshold: int
    frozen_revisions: Mapping[str, int]
    snapshot_id: UUID | None
    protected_input_ids: tuple[UUID, ...]
    input_cutoff: int | None
    view_hash: str
    compaction: str | None = None
    """For a business request: what the §8 evaluation decided before it was frozen."""
    role: str = "root"
    rendered: RenderedRequest | None = None
    """What the adapter sent for ``view`` (§6): the messages as the provider receives them,
    tool-call pairing, the marks in them, the tool schemas, whether reasoning was sent."""
    kind: Literal["model_request"] = "model_request"


_KEPT = tuple(_KeptInParts(_name) for _name in ("view", "rendered"))
for _kept in _KEPT:  # set after the dataclass made its fields and __init__
    setattr(ModelRequestSent, _kept.name, _kept)


@dataclass(frozen=True)
class BudgetDecision:
    """The §8 evaluation of one prepared business request, traced when it is made — also when
    it ends the Run and nothing is sent (F, M, I and B in tokens; T when it reached one)."""

    operation_id: UUID
    decision: str
    input_tokens: int
    fixed_tokens: int
    material_tokens: int
    input_budget: int
    trigger_threshold: int
    summary_target: int | None
    error_code: str | None
    role: str = "root"
    kind: Literal["budget_decision"] = "budget_decision"


@dataclass(frozen=True)
class ModelUsage:
    """The actual usage the provider reported for one answered request, beside the estimate
    the request was sent with (§7): audit and deviation monitoring only. ``input_deviation``
    is reported input tokens minus the estimate (negative: the estimate was conservative). The
    request's own event is never changed by it (CTX-7.21)."""

    purpose: Literal["business", "compaction"]
    operation_id: UUID
    purpose_key: str
    attempt: int
    estimated_input_tokens: int
    input_tokens: int | None
    output_tokens: int | None
    input_deviation: int | None
    role: str = "root"
    cut: bool = False
    """The provider stopped the answer at max_output_tokens (reported as such)."""
    kind: Literal["model_usage"] = "model_usage"


@dataclass(frozen=True)
class ToolExecuted:
    call_id: UUID
    name: str
    effective_arguments: Mapping[str, Any]
    proposed_arguments: Mapping[str, Any]
    outcome: str
    latency: int | None = None
    """The logical time the tool port reported the call took (None: not reported). The
    reference runs a batch's calls one by one; the figure is recorded, never used to order
    anything (§2, CTX-2.28)."""
    kind: Literal["tool_executed"] = "tool_executed"


@dataclass(frozen=True)
class HookCalled:
    """A hook chain was asked (the hook port called), before its answer is known: a takeover
    that asks again for a decision it had committed shows as a second call."""

    point: str
    stage: str
    kind: Literal["hook_called"] = "hook_called"


@dataclass(frozen=True)
class HookDecided:
    point: str
    chain_position: int
    decision: str
    patch_valid: bool
    diagnostics: tuple[str, ...]
    changes: tuple[str, ...]
    kind: Literal["hook_decided"] = "hook_decided"


@dataclass(frozen=True)
class DeliveryChanged:
    input_id: UUID
    delivery_id: UUID
    state: str
    target_run_id: UUID | None
    previous_delivery_id: UUID | None
    kind: Literal["delivery"] = "delivery"


@dataclass(frozen=True)
class OperationState:
    operation_id: UUID
    purpose_key: str
    state: str
    kind: Literal["operation"] = "operation"


@dataclass(frozen=True)
class RunEnded:
    run_id: UUID
    run_no: int
    status: str
    error_code: str | None
    message: str | None
    figures: dict[str, int] | None = None
    """The numbers a window error reports (§11: numbers, configuration sources, the stage):
    for CONTEXT_PROTECTED_INPUT_TOO_LARGE the fixed input F that does not fit, the whole input
    I and the budget (§8 "明确提示固定输入超窗"; Q83); for CONTEXT_WINDOW_EXCEEDED the input and
    the budget."""
    final_answer: str | None = None
    """The final answer delivered to the user with the Run's end (§2 "Run 结束才交付最终答案"):
    the effective answer of a succeeded Run, None for any other ending."""
    kind: Literal["run_ended"] = "run_ended"


@dataclass(frozen=True)
class ClientEvent:
    """A low-frequency client event with its run_seq (§2)."""

    run_id: UUID
    run_seq: int
    event: Literal["run_started", "input_received", "progress", "run_ended"]
    detail: str
    error_code: str | None = None
    """For run_ended: the Run's error code, so the client is told why it failed (Q84)."""
    kind: Literal["client_event"] = "client_event"


@dataclass(frozen=True)
class CompactionStep:
    episode_id: UUID
    step: str
    detail: str
    kind: Literal["compaction"] = "compaction"


@dataclass(frozen=True)
class NodeStarted:
    """An outer workflow node starts (§1): the events up to its ``node_ended`` are its own — an
    AgentNode's AgentInvocation's events, or a CapabilityNode's hook chain, Operation and graph
    state write."""

    node: str
    node_kind: Literal["agent_node", "capability_node"]
    kind: Literal["node_started"] = "node_started"


@dataclass(frozen=True)
class NodeEnded:
    """An outer workflow node finished (or was not run): its status and the route taken.
    ``succeeded``, ``failed`` (a local failure, its result routed under ``route``),
    ``not_run``, or the whole tree's ending that reached it: ``stopped``, ``timed_out``,
    ``loop_exhausted`` (never routed, §11)."""

    node: str
    status: str
    route: str | None
    error_code: str | None
    kind: Literal["node_ended"] = "node_ended"


@dataclass(frozen=True)
class CapabilityCalled:
    """An outer CapabilityNode's Operation ran its tool (§1): the proposed input (its input
    mapping over the graph state), the effective input the tool received, and the chain
    positions of the ``capability.pre_call`` hook items whose patch changed it (the
    modification source)."""

    node: str
    tool: str
    proposed_input: Mapping[str, Any]
    effective_input: Mapping[str, Any]
    modified_by: tuple[int, ...]
    outcome: Literal["ok", "error"]
    kind: Literal["capability_called"] = "capability_called"


@dataclass(frozen=True)
class GraphStateWritten:
    """A write to a WorkflowSession's graph state (§1, §2): by the outer input mapping
    (``source`` = ``input_mapping``) or by a node's output mapping (``source`` = the node)."""

    key: str
    value: Any
    source: str
    kind: Literal["graph_state_written"] = "graph_state_written"


@dataclass(frozen=True)
class WorkflowEnded:
    """A WorkflowSession's Run ended: ``completed`` (every node ran or was routed), or the
    whole tree's ending — ``stopped``, ``timed_out``, ``loop_exhausted`` (§11) — and the final
    graph state."""

    status: str
    state: Mapping[str, Any]
    kind: Literal["workflow_ended"] = "workflow_ended"


@dataclass(frozen=True)
class PersistenceFailed:
    """A required commit failed and was rolled back whole (§3, §10): the runtime stops on it
    instead of going on with values the store does not have."""

    commit: str
    occurrence: int
    error: str
    kind: Literal["persistence_failed"] = "persistence_failed"


@dataclass(frozen=True)
class Restarted:
    """The process died at a commit boundary and a new runtime took the Session over from the
    store (§10): the events before it are the dead incarnation's."""

    commit: str
    occurrence: int
    when: Literal["before", "after", "fails"]
    kind: Literal["restarted"] = "restarted"


@dataclass(frozen=True)
class BodyDigest:
    """A text as a black box shows it: its length in characters and the SHA-256 of its UTF-8
    bytes (hex), so a case can compare it with a text it derives itself."""

    chars: int
    sha256: str

    @classmethod
    def of(cls, text: str) -> "BodyDigest":
        return cls(len(text), hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest())


@dataclass(frozen=True)
class RecordBody:
    """One record a history read served (§6, §11): its kind, the digest of its text, and for a
    tool result shown as a bounded preview the digest of the full body behind its result_ref,
    as the caller could read it on demand (None for any other record)."""

    message_kind: str
    text: BodyDigest
    full_body: BodyDigest | None


@dataclass(frozen=True)
class HistoryRead:
    """A history API call (§11): the caller, whether it was served, the kinds of the records
    returned, and the refusal's words (which must name nothing that exists). ``records``, when
    the read asked for bodies: each served record's text and full body as digests."""

    caller: str
    session: Literal["own", "other"]
    allowed: bool
    message_kinds: tuple[str, ...]
    refusal: str | None
    records: tuple[RecordBody, ...] | None = None
    content: str | None = None
    """What the read asked for, raw or effective (None: the caller's default, Q81)."""
    node_task: int | None = None
    """The Executor execution it named, if any."""
    kind: Literal["history_read"] = "history_read"


@dataclass(frozen=True)
class SessionOpened:
    """A scenario opened another Session of the same Agent (the ``new_session`` step): the
    events after it, up to the next one, belong to Session ``session`` (the first Session is 1
    and opens without this event)."""

    session: int
    kind: Literal["session_opened"] = "session_opened"


@dataclass(frozen=True)
class Retained:
    """What a Session keeps (§1): the working files still there, and how many context records
    and blobs are stored."""

    workspace_files: tuple[str, ...]
    records: int
    blobs: int
    kind: Literal["retained"] = "retained"


TraceEvent = (ModelRequestSent | BudgetDecision | ModelUsage | ToolExecuted | HookCalled
              | HookDecided | DeliveryChanged | OperationState | RunEnded | ClientEvent
              | CompactionStep | NodeStarted | NodeEnded | CapabilityCalled | GraphStateWritten
              | WorkflowEnded | PersistenceFailed | Restarted | HistoryRead | Retained
              | SessionOpened)


@dataclass
class Trace:
    events: list[TraceEvent] = field(default_factory=list)
    known: dict[Any, Any] = field(default_factory=dict, compare=False, repr=False)
    """Each distinct view or rendered message the trace's requests sent around their kept
    segments, once (:meth:`_KeptInParts.share`)."""

    def add(self, event: TraceEvent) -> None:
        if isinstance(event, ModelRequestSent):
            for kept in _KEPT:
                kept.share(event, self.known)
        self.events.append(event)

    def of(self, kind: type[Any]) -> list[Any]:
        return [e for e in self.events if isinstance(e, kind)]

    def model_requests(self, purpose: str | None = None) -> list[ModelRequestSent]:
        return [e for e in self.of(ModelRequestSent) if purpose in (None, e.purpose)]

    def to_json(self) -> list[dict[str, Any]]:
        """The events as JSON-ready objects (:meth:`json_events`, all of them): each request
        holds a list of its whole view, so the list grows with the square of a long Session
        (issue #35); a reader that needs one event at a time takes :meth:`json_events`."""
        return list(self.json_events())

    def json_events(self) -> Iterator[dict[str, Any]]:
        """The events as JSON-ready objects, one at a time. A message object several requests
        send (the messages of ended Runs are kept with their revisions, the others are shared
        by :meth:`add`) is converted once and its dict shared by those requests, so a reader
        that keeps what each request adds (the linear form) holds each message once (issue
        #35); readers treat the events as read-only."""
        shared: dict[int, Any] = {}
        for event in self.events:
            yield _jsonable(event, shared)


_PLAIN = frozenset({str, int, float, bool, type(None)})
"""Types a JSON conversion keeps as they are: most leaves of an event, converted inline
without a call (issue #20)."""


def _jsonable(value: Any, shared: dict[int, Any]) -> Any:
    """One pass over an event: what ``asdict`` then a JSON conversion would give, without
    ``asdict``'s deep copy of every leaf (a fifth of a conformance case, issue #20). A view or
    rendered message met again (by identity) is given the dict made the first time."""
    kind = type(value)
    if kind in _PLAIN:
        return value
    if kind in _SHARED:
        known = shared.get(id(value))
        if known is None:
            known = shared[id(value)] = _converted(value, kind, shared)
        return known
    return _converted(value, kind, shared)


def _converted(value: Any, kind: type, shared: dict[int, Any]) -> Any:
    names = _FIELDS.get(kind)
    if names is None:
        if isinstance(value, str | int | float | bool):
            return value  # a StrEnum member is a str: json.dumps writes its value
        if is_dataclass(value) and not isinstance(value, type):
            names = _FIELDS[kind] = tuple(f.name for f in fields(value))
    if names is not None:
        return {name: item if type(item := getattr(value, name)) in _PLAIN
                else _jsonable(item, shared) for name in names}
    if isinstance(value, dict):
        return {str(k): v if type(v) in _PLAIN else _jsonable(v, shared)
                for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [v if type(v) in _PLAIN else _jsonable(v, shared) for v in value]
    if isinstance(value, UUID):
        return str(value)
    if hasattr(value, "value"):
        return value.value
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    return value


_SHARED = frozenset({ViewMessage, RenderedMessage})
"""The values converted once per trace and shared wherever they recur."""


_FIELDS: dict[type, tuple[str, ...]] = {}
"""A dataclass's field names, read once per class (``fields`` costs a call per event)."""
