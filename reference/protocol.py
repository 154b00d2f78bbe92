"""Complete messages and protocol repair (§6).

One context's effective records become view messages with the model protocol intact:

- a batch is the assistant message with its tool_calls followed by every result in action order
  (CTX-6.1, CTX-6.2, CTX-6.4); a failed item is a structured error inside its own result and the
  other results stay (CTX-6.5, :func:`structured_error`);
- in an ended Run, a call that never finished gets a "not executed" placeholder that states the
  Operation's real state, which the projection never changes (CTX-6.6, CTX-6.10, CTX-6.12);
- while the current batch is unsettled no next business request is built: the repair answers
  :class:`UnsettledBatch` instead of a view (CTX-6.7);
- an incomplete model stream is a marked fragment, never an assistant decision, and its partial
  tool-call arguments are never shown (CTX-6.8);
- a large result stays a bounded preview with its truncation range and ``result_ref``; the view
  never expands it (CTX-6.14, CTX-6.15, CTX-6.17);
- a tool result whose call is not in view (the cut started inside a batch) is shown as a marked
  transcript line, never as a tool message without its call (CTX-6.3).

Records arrive in context_seq order and the repair streams: it holds at most one open batch.
"""

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final
from uuid import UUID

from ctxspec.reference.contracts import MessageRole, OperationState, PayloadRef
from ctxspec.reference.view import (
    EffectiveRecord,
    ToolCall,
    Truncation,
    ViewKind,
    ViewMessage,
    message_from_record,
)

NO_STATES: Final[Mapping[UUID, OperationState]] = MappingProxyType({})


@dataclass(frozen=True)
class UnsettledBatch:
    """The current context's last batch still waits for results (§6): no next request now."""

    assistant_record_id: UUID
    pending_call_ids: tuple[UUID, ...]


def structured_error(code: str, detail: str) -> str:
    """The text of a tool result for a single failed item: a structured error (CTX-6.5)."""
    return json.dumps({"status": "error", "error": {"code": code, "detail": detail}},
                      ensure_ascii=False, sort_keys=True)


def placeholder_text(call: ToolCall, state: OperationState | None) -> str:
    """What a placeholder says: the call did not run to a result; its Operation's real state,
    or — a call with no Operation — that it never started (not "unknown", which would say it
    may have acted: Q69).

    Never a success, never a made-up output (CTX-6.6, CTX-6.10, CTX-6.12).
    """
    if state is None:
        return json.dumps({"status": "not_executed", "tool": call.name,
                           "reason": "the run ended before this call started",
                           "operation_state": "not_started"}, ensure_ascii=False,
                          sort_keys=True)
    return json.dumps({"status": "not_executed", "tool": call.name,
                       "reason": "the run ended before this call produced a result",
                       "operation_state": state.value}, ensure_ascii=False, sort_keys=True)


def bounded_preview(body: str, max_chars: int,
                    result_ref: PayloadRef) -> tuple[str, Truncation | None]:
    """What a tool returns to the model for a large body (CTX-6.13, CTX-6.14): the first
    ``max_chars`` characters and a truncation mark with the covered range and the blob's ref;
    the whole body, when it fits. The body itself stays in the blob behind ``result_ref``."""
    if max_chars < 1:
        raise ValueError("a preview shows at least one character")
    if len(body) <= max_chars:
        return body, None
    return body[:max_chars], Truncation(from_char=0, through_char=max_chars,
                                        total_chars=len(body), result_ref=result_ref)


def read_range(body: str, from_char: int, through_char: int) -> str:
    """The text ``result.read`` returns: characters [from_char, through_char) of the body.
    The runtime appends it as a new tool result of the result.read call (CTX-6.18)."""
    if not 0 <= from_char <= through_char:
        raise ValueError("a read range has 0 <= from_char <= through_char")
    return body[from_char:through_char]


def fragment_text(text: str) -> str:
    return f"[incomplete model output, not a decision] {text}"


def orphan_text(record: EffectiveRecord) -> str:
    call = record.record.call_id
    return f"[tool result for call {call}, whose call is not in view] {record.text}"


class _OpenBatch:
    """An assistant decision waiting for its calls' results (a plain slotted class: a
    projection opens one per decision of the session)."""

    __slots__ = ("decision", "held", "pending", "results")

    def __init__(self, decision: EffectiveRecord) -> None:
        self.decision = decision
        self.pending: dict[int, ToolCall] = {}
        """The calls still without a result, by the integer of their id: a UUID hashes and
        compares in Python, an int in C, and a projection looks up every result."""
        for call in decision.tool_calls:  # a loop: a comprehension is a frame on Python 3.11
            self.pending[call.call_id.int] = call
        self.results: dict[int, EffectiveRecord] = {}
        """Each answered call's result, by the integer of its call id."""
        self.held: tuple[EffectiveRecord, ...] = ()
        """Records that arrived while the batch was open; shown after it, so nothing splits
        it. Rare, so a tuple that grows instead of a list made for every decision."""

    def answer(self, record: EffectiveRecord) -> bool:
        """Take ``record`` as the result of one of the calls still pending, if it is one."""
        call_id = record.record.call_id
        if call_id is None:
            return False
        key = call_id.int
        if self.pending.pop(key, None) is None:
            return False
        self.results[key] = record
        return True

    def missing(self) -> tuple[UUID, ...]:
        return tuple(call.call_id for call in self.decision.tool_calls
                     if call.call_id.int not in self.results)


class ProtocolRepair:
    """Streaming repair of one context. Feed records in context_seq order, then close.

    ``run_ended`` says whether the Run is over (placeholders close its open batch) or current
    (an open batch at the end means :class:`UnsettledBatch`). Messages are appended to the
    caller's list (no generator per record: a projection feeds every record of a session).
    """

    def __init__(self, *, run_ended: bool,
                 call_states: Mapping[UUID, OperationState] = NO_STATES,
                 run_id: UUID | None = None) -> None:
        self._run_ended = run_ended
        self._call_states = call_states
        self._run_id = run_id
        """The Run whose context this is, stamped as every message's source (one shared id
        object instead of one per record: a view of 100k messages keeps them all alive)."""
        self._run_int = None if run_id is None else run_id.int
        self._open: _OpenBatch | None = None

    def feed(self, record: EffectiveRecord, out: list[ViewMessage]) -> None:
        batch = self._open
        kind = record.record.message_kind
        if batch is not None:
            if kind == "tool_result" and batch.answer(record):
                if not batch.pending:
                    self._emit(batch, out, placeholders=False)
                return
            if kind != "assistant":
                batch.held = (*batch.held, record)
                return
            # A new decision means this batch never settled; only an ended history has that.
            self._emit(batch, out, placeholders=True)
        if kind == "assistant":
            if record.incomplete:
                out.append(message_from_record(
                    record, ViewKind.FRAGMENT, role=MessageRole.SYSTEM,
                    text=fragment_text(record.text), tool_calls=(), source_run_id=self._run_id,
                    body=record.text))
            elif record.denied:  # the denied state, a system fact (Q75)
                out.append(message_from_record(record, ViewKind.FEEDBACK,
                                               role=MessageRole.SYSTEM, tool_calls=(),
                                               source_run_id=self._run_id))
            elif record.tool_calls:
                self._open = _OpenBatch(record)
            else:
                out.append(self._own(record))
        elif kind == "tool_result":
            out.append(message_from_record(record, ViewKind.MARKER, role=MessageRole.SYSTEM,
                                           text=orphan_text(record), keep_call=False,
                                           source_run_id=self._run_id, body=record.text))
        else:
            out.append(self._own(record))

    def _own(self, record: EffectiveRecord) -> ViewMessage:
        """The record's own message, kept with its revision (made once, reused by every later
        projection); a message stamped with another Run than the record's is made afresh."""
        run_int = self._run_int
        if run_int is None or run_int == record.record.run_id.int:
            return record.view_message(self._run_id)
        return message_from_record(record, source_run_id=self._run_id)

    def close(self, out: list[ViewMessage]) -> UnsettledBatch | None:
        """Emit what is left, or answer :class:`UnsettledBatch` for a live unsettled batch."""
        batch = self._open
        if batch is None:
            return None
        if not self._run_ended:
            return UnsettledBatch(batch.decision.record_id, batch.missing())
        self._emit(batch, out, placeholders=True)
        return None

    def _emit(self, batch: _OpenBatch, out: list[ViewMessage], *, placeholders: bool) -> None:
        self._open = None
        out.append(self._own(batch.decision))
        # A decision's tool_calls carry the action ordinals 1..n in order (EffectiveRecord
        # checks it), so answering them in that order is the protocol order (CTX-6.1) without
        # sorting the results by the order they completed in.
        results = batch.results
        for call in batch.decision.tool_calls:
            result = results.get(call.call_id.int)
            if result is not None:
                out.append(self._own(result))
            elif placeholders:
                out.append(ViewMessage(
                    role=MessageRole.TOOL, kind=ViewKind.PLACEHOLDER,
                    text=placeholder_text(call, self._call_states.get(call.call_id)),
                    call_id=call.call_id,
                    source_run_id=self._run_id or batch.decision.record.run_id))
        for held in batch.held:
            self.feed(held, out)


def repair(records: Iterable[EffectiveRecord], *, run_ended: bool,
           call_states: Mapping[UUID, OperationState] = NO_STATES
           ) -> list[ViewMessage] | UnsettledBatch:
    """Repair one whole context (convenience over :class:`ProtocolRepair`)."""
    repairer = ProtocolRepair(run_ended=run_ended, call_states=call_states)
    messages: list[ViewMessage] = []
    for record in records:
        repairer.feed(record, messages)
    unsettled = repairer.close(messages)
    return unsettled if unsettled is not None else messages


_JSON_TYPES: Final[Mapping[str, tuple[type, ...]]] = MappingProxyType({
    "string": (str,), "integer": (int,), "number": (int, float), "boolean": (bool,),
    "array": (list,), "object": (dict,), "null": (type(None),)})


def argument_problems(parameters: Mapping[str, Any], arguments: Mapping[str, Any]
                      ) -> tuple[str, ...]:
    """What makes a call's arguments break its tool's declared parameters schema: a required
    property missing, or a declared property of another JSON type (the schema's top level;
    deeper keywords are the tool's own to enforce). A call that breaks it is an output-format
    error, answered with an error result for the business role's next Loop (§11; Q82)."""
    # A malformed schema (a scenario's own) declares nothing it cannot say: only names and
    # type names that are strings count.
    required = parameters.get("required", ())
    names = [n for n in required if isinstance(n, str)] if isinstance(required, list) else []
    problems = [f"missing required argument {name!r}" for name in names if name not in arguments]
    declared = parameters.get("properties", {})
    for name, value in arguments.items():
        spec = declared.get(name) if isinstance(declared, Mapping) else None
        kind = spec.get("type") if isinstance(spec, Mapping) else None
        listed = kind if isinstance(kind, list) else [kind]
        kinds = [k for k in listed if isinstance(k, str)]
        allowed = tuple(t for k in kinds for t in _JSON_TYPES.get(k, ()))
        wrong_bool = isinstance(value, bool) and bool not in allowed
        if allowed and (not isinstance(value, allowed) or wrong_bool):
            problems.append(f"argument {name!r} is not of type {kind}")
    return tuple(problems)
