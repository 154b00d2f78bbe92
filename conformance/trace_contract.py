"""The trace contract (docs/implementing-a-driver.md §3): every trace event and field a case
reads, as models the harness validates a driver's trace against before judging it, and
published as ``spec/schemas/Trace.json``. A violation is reported as the event's index, the
field's path and the rule, so a driver author fixes the trace without reading the cases.

Extra fields and event kinds the contract does not name are allowed (and ignored); a field the
contract names must be there, with ``null`` where it says a value may be absent.
"""

from typing import Any, Literal, Self, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic.config import JsonDict

TRACE_CONTRACT_VERSION = "2"
"""2: a trace may also come in its linear form (``trace_format`` 2, conformance/linear_trace.py:
each message once, each request referring to its messages); the events, once expanded, are
version 1's, and a plain list of events (whole views) is still accepted."""


class _Event(BaseModel):
    model_config = ConfigDict(extra="allow")


class ToolCall(_Event):
    call_id: str
    action_ordinal: int
    name: str
    arguments: str = Field(description="the effective arguments as JSON text")


class Truncation(_Event):
    from_char: int
    through_char: int
    total_chars: int
    result_ref: dict[str, Any]


class ResultFacts(_Event):
    """What a denied or failed tool result stands for, whatever its wording (Q210): a denial's
    stage, whether the call ran and that its ordinary result was not delivered (§3); an
    error's code (§11)."""

    status: Literal["denied", "error"]
    stage: Literal["pre", "post"] | None = None
    executed: bool | None = None
    result_delivered: bool | None = None
    code: str | None = None

    @model_validator(mode="after")
    def _complete(self) -> Self:
        if self.status == "denied" and None in (self.stage, self.executed,
                                                self.result_delivered):
            raise ValueError("a denial's result_facts carry stage, executed and "
                             "result_delivered")
        return self


WORDED_BODY = ("fragment", "summary", "shared", "annotation")
"""The message kinds that carry the text they stand for verbatim as ``body``."""


def _requires(kind: str, fields: JsonDict) -> JsonDict:
    return {"if": {"properties": {"kind": {"const": kind}}},
            "then": {"properties": fields, "required": list(fields)}}


_STANDS_FOR: JsonDict = {"allOf": [
    _requires("outcome", {"run_no": {"type": "integer"}, "status": {"type": "string"},
                          "final_result": {"type": "boolean"}}),
    *[_requires(kind, {"body": {"type": "string"}}) for kind in WORDED_BODY],
    _requires("placeholder", {"call_id": {"type": "string"}})]}
"""The message rules of :meth:`ViewMessage._stands_for`, as JSON Schema."""


class ViewMessage(_Event):
    model_config = ConfigDict(extra="allow", json_schema_extra=_STANDS_FOR)

    role: str
    kind: Literal["system_prompt", "user_ref", "assistant", "tool_result", "feedback",
                  "annotation", "outcome", "marker", "placeholder", "fragment", "summary",
                  "shared", "prompt"]
    text: str
    tool_calls: list[ToolCall]
    record_id: str | None = None
    input_id: str | None = None
    call_id: str | None = None
    source_run_id: str | None = None
    truncation: Truncation | None = None
    modified_by: list[str] = Field(default_factory=list)
    body: str | None = None
    run_no: int | None = None
    status: str | None = None
    final_result: bool | None = None
    result_facts: ResultFacts | None = Field(default=None, description=(
        "optional, on a tool_result that is a denial or a structured error: the facts it "
        "stands for (Q210); a driver that leaves it out fails the cases that read it"))

    @model_validator(mode="after")
    def _stands_for(self) -> Self:
        """A message the runtime words carries what it stands for (docs/conformance.md)."""
        if self.kind == "outcome" and None in (self.run_no, self.status, self.final_result):
            raise ValueError("an outcome message carries run_no, status and final_result")
        if self.kind in WORDED_BODY and self.body is None:
            raise ValueError(f"a {self.kind} message carries body: the text it carries verbatim")
        if self.kind == "marker" and self.input_id is None and self.body is None:
            raise ValueError("a marker carries input_id (an input shown elsewhere) or body")
        if self.kind == "placeholder" and self.call_id is None:
            raise ValueError("a placeholder carries the call_id of its unfinished call")
        return self


class View(_Event):
    messages: list[ViewMessage]


class ModelRequest(_Event):
    kind: Literal["model_request"]
    purpose: Literal["business", "compaction"]
    role: str
    purpose_key: str
    attempt: int = Field(ge=1)
    view: View
    estimated_input_tokens: int
    max_output_tokens: int
    window: int
    output_reserve: int
    safety_margin: int
    input_budget: int
    compaction: str | None
    snapshot_id: str | None = None
    trigger_threshold: int | None = None
    frozen_revisions: dict[str, int] | None = None
    protected_input_ids: list[str] | None = None
    input_cutoff: int | None = None
    view_hash: str | None = None
    operation_id: str | None = Field(default=None, description=(
        "the request's Operation, which its budget_decision names (read by the case whose "
        "request is never sent, S8-PROMPTS-LEAVE-NO-ROOM)"))
    rendered: dict[str, Any] | None = Field(default=None, description=(
        "what the adapter sent: messages with content, tool_calls, tool_call_id and marks as "
        "data (docs/scenarios.md); read by the cases about bounded previews and adjustments"))


class ModelUsage(_Event):
    kind: Literal["model_usage"]
    purpose: str
    purpose_key: str
    attempt: int
    estimated_input_tokens: int
    input_tokens: int | None
    output_tokens: int | None
    input_deviation: int | None
    cut: bool | None = Field(default=None, description=(
        "the provider cut the answer at max_output_tokens (a finish reason of length)"))


class ToolExecuted(_Event):
    kind: Literal["tool_executed"]
    call_id: str
    name: str
    effective_arguments: dict[str, Any]
    proposed_arguments: dict[str, Any]
    outcome: str
    latency: int | None = Field(default=None, description=(
        "the scripted latency of the call (capability tool_latency)"))


class HookCalled(_Event):
    kind: Literal["hook_called"]
    point: str
    stage: str


class HookDecided(_Event):
    kind: Literal["hook_decided"]
    point: str
    chain_position: int
    decision: str
    patch_valid: bool
    diagnostics: list[str]
    changes: list[str]


class Delivery(_Event):
    kind: Literal["delivery"]
    input_id: str
    delivery_id: str
    state: str
    target_run_id: str | None
    previous_delivery_id: str | None


class RunEnded(_Event):
    kind: Literal["run_ended"]
    run_id: str
    run_no: int
    status: str
    error_code: str | None
    message: str | None
    figures: dict[str, int] | None = Field(default=None, description=(
        "a window error's numbers: fixed_input_tokens, input_tokens, input_budget, window, "
        "output_reserve, safety_margin (capability error_figures)"))
    final_answer: str | None = Field(default=None, description=(
        "the answer delivered to the user: a succeeded Run's effective answer, null otherwise "
        "(capability final_answers)"))


class ClientEvent(_Event):
    kind: Literal["client_event"]
    run_id: str
    run_seq: int
    event: Literal["run_started", "input_received", "progress", "run_ended"]
    detail: str
    error_code: str | None = Field(default=None, description=(
        "on run_ended: the Run's error code (capability error_figures)"))


class BudgetDecision(_Event):
    """The §8 decision of a request, traced when it is made — also for a request never
    sent."""

    kind: Literal["budget_decision"]
    operation_id: str
    decision: str = Field(description="below_trigger, compact or no_compressible_material")
    input_tokens: int
    summary_target: int | None = Field(description="T when the decision compacts")


class Compaction(_Event):
    kind: Literal["compaction"]
    episode_id: str
    step: str
    detail: str


class Restarted(_Event):
    kind: Literal["restarted"]
    phase: str | None = Field(description="the design's phase the crash was placed at")
    occurrence: int
    when: str


class PersistenceFailed(_Event):
    kind: Literal["persistence_failed"]
    phase: str | None = Field(description="the design's phase of the refused commit")
    error: str


class Digest(_Event):
    chars: int = Field(description="length in characters (Unicode code points)")
    sha256: str = Field(description="hex SHA-256 of the UTF-8 bytes")


class RecordBody(_Event):
    message_kind: str
    text: Digest
    full_body: Digest | None = Field(description=(
        "the full body behind a bounded preview's result_ref, null for any other record"))


class HistoryRead(_Event):
    kind: Literal["history_read"]
    caller: str
    session: str
    allowed: bool
    message_kinds: list[str]
    refusal: str | None
    records: list[RecordBody] | None = Field(default=None, description=(
        "each served record when the read asks for bodies (capability history_bodies)"))


class Retained(_Event):
    kind: Literal["retained"]
    workspace_files: list[str]
    records: int
    blobs: int


class SessionOpened(_Event):
    kind: Literal["session_opened"]
    session: int


class NodeStarted(_Event):
    kind: Literal["node_started"]
    node: str
    node_kind: str


class NodeEnded(_Event):
    kind: Literal["node_ended"]
    node: str
    status: str
    route: str | None
    error_code: str | None


class CapabilityCalled(_Event):
    kind: Literal["capability_called"]
    node: str
    tool: str
    proposed_input: dict[str, Any]
    effective_input: dict[str, Any]
    modified_by: list[int]
    outcome: str


class GraphStateWritten(_Event):
    kind: Literal["graph_state_written"]
    key: str
    value: Any
    source: str


class WorkflowEnded(_Event):
    kind: Literal["workflow_ended"]
    status: str
    state: dict[str, Any]


OPTIONAL = frozenset({"snapshot_id", "trigger_threshold", "frozen_revisions",
                      "protected_input_ids", "input_cutoff", "view_hash", "rendered"})
"""Fields of a model request only some cases read: a driver may leave them out, and then
fails (never errs) the cases that read them, told which field it lacks."""


EVENTS: dict[str, type[_Event]] = {
    model.model_fields["kind"].annotation.__args__[0]: model  # type: ignore[union-attr]
    for model in (ModelRequest, ModelUsage, ToolExecuted, HookCalled, HookDecided, Delivery,
                  RunEnded, ClientEvent, BudgetDecision, Compaction, Restarted,
                  PersistenceFailed, HistoryRead, Retained, SessionOpened, NodeStarted,
                  NodeEnded, CapabilityCalled, GraphStateWritten, WorkflowEnded)}
"""The events the contract names, by kind."""


def model_of(annotation: Any) -> type[BaseModel] | None:
    """The contract model a field's annotation holds (inside a list or an optional), if any."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for argument in get_args(annotation):
        found = model_of(argument)
        if found is not None:
            return found
    return None


def field_status(kind: str, path: str) -> str | None:
    """``required`` or ``optional`` for a field of an event of ``kind`` at a dotted ``path``
    (lists walked through: ``view.messages.modified_by``), None where the contract names no
    such field. A path inside a field the contract types as free JSON (``rendered``) has that
    field's status."""
    if kind not in EVENTS:
        return None
    model: type[BaseModel] | None = EVENTS[kind]
    status = "required"
    for name in path.split(".") if path else ():
        if model is None:
            return status  # inside a free JSON value: as the value itself
        info = model.model_fields.get(name)
        if info is None:
            return None
        if not info.is_required():
            status = "optional"
        model = model_of(info.annotation)
    return status if model is None or path else "required"


def violations(trace: Any, limit: int = 5) -> list[str]:
    """What in ``trace`` breaks the contract, at most ``limit`` items, each ``event <index>
    (<kind>) <field path>: <rule>``; empty when it holds."""
    if not isinstance(trace, list):
        return [f"the trace is a {type(trace).__name__}, not a list of events"]
    found: list[str] = []
    for index, event in enumerate(trace):
        if not isinstance(event, dict) or not isinstance(event.get("kind"), str):
            found.append(f"event {index}: an event is an object with a kind")
        elif event["kind"] in EVENTS:
            try:
                EVENTS[event["kind"]].model_validate(event)
            except ValidationError as error:
                found.extend(f"event {index} ({event['kind']}) {_path(issue['loc'])}: "
                             f"{issue['msg']}" for issue in error.errors())
        if len(found) >= limit:
            return found[:limit]
    return found


def _path(location: tuple[int | str, ...]) -> str:
    path = ""
    for part in location:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path or "(the event)"


def trace_schema() -> dict[str, Any]:
    """The contract as JSON Schema (spec/schemas/Trace.json): a list of events, each validated
    by the model of its kind when the contract names it."""
    definitions: dict[str, Any] = {}
    branches = []
    for kind, model in EVENTS.items():
        schema = model.model_json_schema(ref_template="#/$defs/{model}")
        definitions.update(schema.pop("$defs", {}))
        definitions[model.__name__] = schema
        branches.append({"if": {"properties": {"kind": {"const": kind}}, "required": ["kind"]},
                         "then": {"$ref": f"#/$defs/{model.__name__}"}})
    events = {"type": "array",
              "items": {"type": "object", "required": ["kind"],
                        "properties": {"kind": {"type": "string"}}, "allOf": branches}}
    definitions["LinearTrace"] = {
        "type": "object", "required": ["trace_format", "messages", "events"],
        "description": "The linear form: each message once; a model_request's view and "
                       "rendered carry shared_prefix (refs repeated from the previous "
                       "model_request's) and message_refs (indexes into messages and "
                       "rendered_messages) in place of messages. Expanded, it is the list.",
        "properties": {"trace_format": {"const": 2},
                       "messages": {"type": "array", "items": {"type": "object"}},
                       "rendered_messages": {"type": "array", "items": {"type": "object"}},
                       "events": {"type": "array", "items": {"type": "object",
                                                            "required": ["kind"]}}}}
    return {"title": f"ctxspec trace, contract version {TRACE_CONTRACT_VERSION}",
            "description": "The neutral trace a driver returns: the events and fields the "
                           "conformance cases read (docs/implementing-a-driver.md §3), as a "
                           "list of events or in the linear form (LinearTrace). Other "
                           "kinds and fields are allowed and ignored.",
            "anyOf": [events, {"$ref": "#/$defs/LinearTrace"}],
            "$defs": definitions}


__all__ = ["EVENTS", "OPTIONAL", "TRACE_CONTRACT_VERSION", "field_status", "model_of",
           "trace_schema",
           "violations"]
