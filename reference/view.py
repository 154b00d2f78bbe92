"""The model view: the provider-neutral form of what one model request contains (§1 ContextView,
§4, §5, §6).

A model view is an ordered list of messages, each with the protocol role, a kind, its text and
the provenance the design requires: the record it comes from, the user input it carries, the
call it answers or makes, the Run it comes from, and flags for a truncated preview (with its
covered range and ``result_ref``), an incomplete stream fragment, a protocol placeholder, an
annotation with its source. Rendering to a provider's wire format is an adapter
(:func:`render_chat_messages`); the view itself never depends on a provider.

:class:`EffectiveRecord` is the other half: one ContextRecord as the effective revision shows it
(§3), the unit the history projection (§4) and protocol repair (§6) consume.
"""

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType
from typing import Any, Final, Literal, Self
from uuid import UUID

from pydantic import Field, TypeAdapter, model_validator

from ctxspec.reference.contracts import (
    ContextRecord,
    Contract,
    Count,
    MessageRole,
    PayloadRef,
    Seq,
)
from ctxspec.reference.segments import Segment, around, mark, marked
from ctxspec.reference.tokens import EstimationRequest, PromptMessage, Role


class ViewKind(StrEnum):
    """What a view message is. The first five are the design's record kinds (§2)."""

    USER_REF = "user_ref"
    ASSISTANT = "assistant"
    TOOL_RESULT = "tool_result"
    FEEDBACK = "feedback"
    OUTCOME = "outcome"
    """A Run's explicit terminal status, a system fact (§4: never a made-up answer)."""
    ANNOTATION = "annotation"
    """An appended, sourced note (§3 append_annotation); never passes for user input."""
    MARKER = "marker"
    """A system marker: an input shown elsewhere (§5 de-duplication), an orphaned fact (§6)."""
    PLACEHOLDER = "placeholder"
    """A protocol placeholder for a call that never finished (§6); not a tool output."""
    FRAGMENT = "fragment"
    """An incomplete model stream, kept as a marked fragment, never a decision (§6)."""
    SUMMARY = "summary"
    """A compaction summary standing in for the material it covers (§8, §9)."""
    SYSTEM_PROMPT = "system_prompt"
    SHARED = "shared"
    """A field of the Run's shared scope, shown to its authorised consumers (§3)."""
    PROMPT = "prompt"
    """A message of a request that is not a business request (a compaction chunk's prompt
    or data block), shown as sent."""


class ToolCall(Contract):
    """One call of an assistant decision: its stable id, action ordinal and effective arguments."""

    call_id: UUID
    action_ordinal: Seq
    name: str = Field(min_length=1)
    arguments: str = Field(description="effective arguments as JSON text")
    proposed_arguments: str | None = Field(
        default=None, description="the model's own arguments as JSON text, when a committed "
        "change made the effective ones differ (§2: never passed off as the provider's)")
    adjusted_by: tuple[str, ...] = Field(
        default=(), description="the sources of that change ('<source kind>:<source ref>')")


class Truncation(Contract):
    """A bounded preview of a large result (§6): characters [from_char, through_char) of a body
    of total_chars, the whole of which stays in the blob behind result_ref."""

    from_char: Count
    through_char: Count
    total_chars: Count
    result_ref: PayloadRef

    @model_validator(mode="after")
    def _range(self) -> Self:
        if not self.from_char <= self.through_char <= self.total_chars:
            raise ValueError("a preview covers from_char <= through_char <= total_chars")
        if self.through_char - self.from_char == self.total_chars:
            raise ValueError("a preview that covers the whole body is not truncated")
        return self


class EffectiveRecord(Contract):
    """One ContextRecord as its effective revision shows it (§3): the raw identity and order,
    the effective text, and what the projection needs to keep protocol and provenance."""

    record: ContextRecord
    text: str
    tool_calls: tuple[ToolCall, ...] = ()
    truncation: Truncation | None = None
    incomplete: bool = False
    """A model stream that never completed: material kept, never a decision (§6)."""
    denied: bool = False
    """A model response a post-response hook denied: the raw stays for audit, the view shows
    only the explicit denied state, never its text or calls (§2, §3; Q75)."""
    reasoning: str | None = None
    """Reasoning the provider returned; kept in the record, rendered only where accepted."""
    annotation_source: str | None = None
    """For an annotation: the HookInvocation (or other source) that appended it (§3)."""
    modified_by: tuple[str, ...] = ()
    """Mutation ids whose committed changes this effective text includes (§3, §6)."""
    text_changed_by: tuple[str, ...] = ()
    """When a committed change made the text differ from the record's own: the change's
    sources ('<source kind>:<source ref>'), for the mark the adapter sends (§2, §6; Q170)."""

    @model_validator(mode="after")
    def _shape(self) -> Self:
        if self.tool_calls and self.record.role is not MessageRole.ASSISTANT:
            raise ValueError("only an assistant record carries tool_calls")
        ordinals = [call.action_ordinal for call in self.tool_calls]
        if ordinals != list(range(1, len(ordinals) + 1)):
            raise ValueError(f"tool_calls carry action ordinals 1..n in order, got {ordinals}")
        if len({call.call_id for call in self.tool_calls}) != len(self.tool_calls):
            raise ValueError("each tool call has its own call_id")
        if self.truncation is not None and self.record.message_kind != "tool_result":
            raise ValueError("only a tool result carries a truncated preview")
        return self

    def view_message(self, run_id: UUID | None = None) -> "ViewMessage":
        """This revision's own view message (:func:`message_from_record` with nothing
        overridden), made on first use and kept with the revision, so that every later
        projection of an unchanged record reuses it (issue #20). ``run_id``, when given, must
        equal the record's own: one id object shared by the messages of a Run."""
        memo: ViewMessage | None = self.__dict__.get(_VIEW_MEMO)
        if memo is None:
            # A frozen model's fields cannot change, so the message cannot go stale; the memo
            # is no field (equality, hashing and serialisation ignore it).
            memo = self.__dict__[_VIEW_MEMO] = message_from_record(self, source_run_id=run_id)
        return memo

    def model_copy(self, *, update: Mapping[str, Any] | None = None,
                   deep: bool = False) -> Self:
        """A copy without this revision's kept view message: an update makes another
        revision, whose message is its own."""
        copied = super().model_copy(update=update, deep=deep)
        copied.__dict__.pop(_VIEW_MEMO, None)
        return copied

    @property
    def record_id(self) -> UUID:
        return self.record.record_id

    @property
    def kind(self) -> str:
        return self.record.message_kind


_VIEW_MEMO: Final = "_view_message"
"""The key of a revision's kept view message in the record's ``__dict__``."""


class _KeptRendering:
    """Slots for what a view message keeps once made: its rendering (:func:`render_request`),
    the prompt message it is counted as (:func:`estimation_request`) and its view-hash item.
    All are functions of its own fields, so they are no fields (equality, hashing, copies and
    serialisation ignore them). A warm request of an unchanged history renders nothing again
    (issue #20)."""

    __slots__ = ("_digest", "_prompt", "_rendered")
    _rendered: "RenderedMessage | None"
    _prompt: PromptMessage | None
    _digest: str | None
    """Its item of a view hash (``snapshots.view_hash``): its material key and content hash
    as JSON, made once per message (Q321)."""


@dataclass(frozen=True, slots=True)
class ViewMessage(_KeptRendering):
    """One message of a model view, with its provenance.

    A slotted dataclass rather than a pydantic model: a projection makes one per record, and
    this keeps it at a fraction of the cost (see tests/benchmarks/bench_history.py). Values
    arriving from outside (a conformance trace) are validated with :data:`VIEW_ADAPTER`.
    """

    role: MessageRole
    kind: ViewKind
    text: str
    record_id: UUID | None = None
    """The record it comes from; None for what the projection synthesises (markers,
    placeholders, terminal status)."""
    input_id: UUID | None = None
    call_id: UUID | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    source_run_id: UUID | None = None
    carried_from_run_id: UUID | None = None
    """For an input shown in a Run other than the one it was received in: where it came from
    (§5: shown once, with its original source)."""
    truncation: Truncation | None = None
    incomplete: bool = False
    reasoning: str | None = None
    annotation_source: str | None = None
    modified_by: tuple[str, ...] = ()
    body: str | None = None
    """For a message whose wording the runtime chooses (a summary, a broken stream's fragment,
    an annotation, a shared field, an orphaned result): the text of the scenario, the model or
    a hook it carries, verbatim — what a conformance case compares instead of the wording."""
    run_no: int | None = None
    """For an outcome: the Run whose end state it states (with ``status``, ``final_result``)."""
    status: str | None = None
    final_result: bool | None = None
    """For an outcome: whether the Run has a final result (an answer that completed)."""
    text_changed_by: tuple[str, ...] = ()
    """The sources of the committed changes that made ``text`` differ from the record's own
    (a hook's edit of a model answer, a correction of a record): marked when sent (Q170)."""
    result_facts: Mapping[str, Any] | None = None
    """For a tool result that is a denial or a structured error: what it stands for, whatever
    its wording (Q210) — ``status`` ("denied" or "error"); for a denial ``stage`` ("pre" or
    "post"), ``executed`` and ``result_delivered``; for an error its ``code`` (§11)."""


class _KeptSegment:
    """A slot for where a kept segment lies among a request value's messages
    (:mod:`~ctxspec.reference.segments`): no field, so equality, copies and serialisation
    ignore it."""

    __slots__ = ("_segment",)
    _segment: "tuple[int, Segment] | None"


@dataclass(frozen=True, slots=True)
class ModelView(_KeptSegment):
    """The ordered messages of one model request, provider-neutral."""

    messages: tuple[ViewMessage, ...]


VIEW_ADAPTER: TypeAdapter[ModelView] = TypeAdapter(ModelView)
"""Validates and serialises model views (JSON for traces and vectors)."""


def message_from_record(record: EffectiveRecord, kind: ViewKind | None = None, *,
                        role: MessageRole | None = None, text: str | None = None,
                        tool_calls: tuple[ToolCall, ...] | None = None,
                        keep_call: bool = True, source_run_id: UUID | None = None,
                        body: str | None = None) -> ViewMessage:
    """The view message of one effective record, keeping its provenance (record, input, call,
    Run, flags). ``kind``, ``role``, ``text`` and ``tool_calls`` override what the record says,
    for the messages protocol repair re-labels (a fragment, an orphaned result), ``body`` the
    text such a message carries verbatim (an annotation carries its own text);
    ``source_run_id``, when given, must equal the record's run_id (a shared id object)."""
    raw = record.record
    if kind is None:
        kind = _KINDS.get(raw.message_kind)
        if kind is None:
            raise ValueError(f"record {raw.record_id} has message_kind {raw.message_kind!r}, "
                             "which the model view does not know")
    own = record.text
    facts = result_facts(own) if kind is _TOOL_RESULT and own[:2] == '{"' else None
    # Positional, in the field order: a projection makes one message per record.
    return ViewMessage(
        role or raw.role, kind, own if text is None else text, raw.record_id,
        raw.origin_input_id, raw.call_id if keep_call else None,
        record.tool_calls if tool_calls is None else tool_calls,
        source_run_id or raw.run_id, None, record.truncation, record.incomplete,
        record.reasoning, record.annotation_source, record.modified_by,
        own if body is None and kind is _ANNOTATION else body, None, None, None,
        record.text_changed_by if text is None else (), facts)


_TOOL_RESULT: Final = ViewKind.TOOL_RESULT
_ANNOTATION: Final = ViewKind.ANNOTATION
_TOOL: Final = MessageRole.TOOL
"""Members read once per message, as module names: reading an enum member through its class
costs about 0.14 µs on Python 3.11 (a projection and a request read several per message)."""

_KINDS: Final[Mapping[str, ViewKind]] = MappingProxyType({kind.value: kind for kind in ViewKind})
"""Each record kind's view kind (a dictionary, not the enum's own lookup: a projection asks
for it once per record)."""


def result_facts(text: str) -> dict[str, Any] | None:
    """The facts of a tool result the reference itself wrote as a denial
    (:func:`ctxspec.reference.hooks.denial_feedback`) or a structured error
    (:func:`ctxspec.reference.protocol.structured_error`); None for any other result (a tool's
    own output, even JSON, states no such fact). Q210"""
    if not text.startswith('{"'):
        return None
    try:
        document = json.loads(text)
    except ValueError:
        return None
    if not isinstance(document, dict):
        return None
    status = document.get("status")
    if status == "denied" and document.get("stage") in ("pre", "post"):
        return {"status": "denied", "stage": document["stage"],
                "executed": document["stage"] == "post", "result_delivered": False}
    error = document.get("error")
    if status == "error" and isinstance(error, dict) and isinstance(error.get("code"), str):
        return {"status": "error", "code": error["code"]}
    return None


# --- adapters: the neutral view to other shapes ------------------------------------------


@dataclass(frozen=True, slots=True)
class Mark:
    """A mark the adapter adds to what it sends, as data (the words are the adapter's own):
    ``truncated`` — a bounded preview, its covered range and the ``result_ref`` behind it (§6);
    ``arguments_adjusted`` — a call whose arguments a committed change made differ from the
    model's, with the change's sources (§2, §6 "按变更和来源标记", §12 参数修改反馈);
    ``text_modified`` — a message whose text a committed change made differ from the record's
    own (a hook's edit of a model answer), with the change's sources (§2, §6; Q170)."""

    kind: Literal["truncated", "arguments_adjusted", "text_modified"]
    call_id: UUID | None
    text: str
    """The words sent for it, part of the message's content (and so of I, §7)."""
    from_char: int | None = None
    through_char: int | None = None
    total_chars: int | None = None
    result_ref: str | None = None
    proposed_arguments: str | None = None
    effective_arguments: str | None = None
    sources: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class RenderedCall:
    id: UUID
    name: str
    arguments: str


class _KeptPrompt:
    """A slot for the prompt message a rendered message keeps once counted
    (:func:`rendered_estimation`), as :class:`_KeptRendering` keeps a rendering."""

    __slots__ = ("_prompt",)
    _prompt: PromptMessage | None


@dataclass(frozen=True, slots=True)
class RenderedMessage(_KeptPrompt):
    """One message as the provider receives it: its content with the marks in it, the calls
    an assistant message makes, the call a tool message answers, reasoning only when the
    provider accepts it."""

    role: MessageRole
    content: str
    tool_calls: tuple[RenderedCall, ...] = ()
    tool_call_id: UUID | None = None
    reasoning: str | None = None
    marks: tuple[Mark, ...] = ()


@dataclass(frozen=True, slots=True)
class RenderedRequest(_KeptSegment):
    """What the adapter sends for one request (§6): messages and tool schemas."""

    messages: tuple[RenderedMessage, ...]
    tool_schemas: tuple[str, ...] = ()
    reasoning_sent: bool = False
    """The provider accepts historical reasoning: sent where a record has it; else omitted."""


RENDERED_ADAPTER: TypeAdapter[RenderedRequest] = TypeAdapter(RenderedRequest)


def truncation_mark(call_id: UUID | None, cut: Truncation) -> Mark:
    text = (f"[truncated: characters {cut.from_char}-{cut.through_char} of "
            f"{cut.total_chars} shown; the whole result is {cut.result_ref.digest}, readable "
            "with result.read]")
    return Mark("truncated", call_id, text, from_char=cut.from_char,
                through_char=cut.through_char, total_chars=cut.total_chars,
                result_ref=cut.result_ref.digest)


def adjustment_mark(call: ToolCall) -> Mark:
    text = (f"[arguments adjusted by {', '.join(call.adjusted_by)} before the call ran; the "
            f"model proposed {call.proposed_arguments}]")
    return Mark("arguments_adjusted", call.call_id, text,
                proposed_arguments=call.proposed_arguments, effective_arguments=call.arguments,
                sources=call.adjusted_by)


def text_mark(message: ViewMessage) -> Mark:
    text = (f"[this text was changed by {', '.join(message.text_changed_by)} after it was "
            "written; it is not the original]")
    return Mark("text_modified", message.call_id, text, sources=message.text_changed_by)


def render_request(view: ModelView, tool_schemas: tuple[str, ...] = (), *,
                   accepts_reasoning: bool = False) -> RenderedRequest:
    """The adapter of §6: the neutral view as a chat-completions-shaped request.

    A text a committed change made differ from the record's own carries a mark naming the
    change's sources in the content of its own message (Q170: the edit is the runtime's, so the
    mark is not words put in the model's mouth but a statement beside them). A truncated
    preview carries its mark in the content sent, and a call whose arguments were
    adjusted is marked in the tool message answering it (the runtime's own message, so the
    assistant's tool_calls/result pairing stays whole and no words are put in the model's
    mouth). Reasoning is sent only to a provider that accepts it; otherwise omitted (the record
    keeps it), never invented. Markers, placeholders, fragments and outcomes are sent as what
    they are: a placeholder answers its call as a tool message saying it did not run.
    CTX-6.14, CTX-6.17, CTX-2.33"""
    found = marked(view)
    if found is None:
        rendered = _rendered(view.messages, {}, accepts_reasoning)
        return RenderedRequest(tuple(rendered), tool_schemas, accepts_reasoning)
    at, segment = found
    rendered, kept = around(view.messages, at, segment, ("rendered", accepts_reasoning),
                             lambda items, adjusted: _rendered(items, adjusted,
                                                               accepts_reasoning))
    request = RenderedRequest(tuple(rendered), tool_schemas, accepts_reasoning)
    return mark(request, request.messages, at, kept)


def _rendered(messages: Iterable[ViewMessage], adjusted: dict[UUID, ToolCall],
              accepts_reasoning: bool) -> list[RenderedMessage]:
    rendered: list[RenderedMessage] = []
    for message, adjustment in _with_adjustments(messages, adjusted):
        answered = message.call_id if message.role is _TOOL else None
        if adjustment is not None or (accepts_reasoning and message.reasoning is not None):
            rendered.append(_render(message, answered, adjustment, accepts_reasoning))
            continue
        # Otherwise the rendering depends on the message alone: made once, then kept.
        kept: RenderedMessage | None = getattr(message, "_rendered", None)
        if kept is None:
            kept = _render(message, answered, None, False)
            object.__setattr__(message, "_rendered", kept)
        rendered.append(kept)
    return rendered


def _with_adjustments(messages: Iterable[ViewMessage], adjusted: dict[UUID, ToolCall]
                      ) -> Iterator[tuple[ViewMessage, ToolCall | None]]:
    """Each message with the call it answers if a hook adjusted that call's arguments (its
    mark goes in this tool message, §6), else None; ``adjusted`` holds the adjusted calls
    not answered yet (those of earlier messages on entry, updated as the messages pass)."""
    for message in messages:
        for call in message.tool_calls:
            if call.proposed_arguments is not None:
                adjusted[call.call_id] = call
        adjustment = None
        if adjusted and message.role is _TOOL and message.call_id is not None:
            adjustment = adjusted.pop(message.call_id, None)
        yield message, adjustment


def _render(message: ViewMessage, answered: UUID | None, adjustment: ToolCall | None,
            accepts_reasoning: bool) -> RenderedMessage:
    """One message as sent: its marks (a changed text, a truncated preview, then the adjusted
    call it answers) in its content."""
    content, marks = _content(message, adjustment)
    calls = message.tool_calls
    return RenderedMessage(
        message.role, content,
        tuple([RenderedCall(c.call_id, c.name, c.arguments) for c in calls]) if calls else (),
        answered, message.reasoning if accepts_reasoning else None, marks)


def _content(message: ViewMessage, adjustment: ToolCall | None) -> tuple[str, tuple[Mark, ...]]:
    """A message's content as sent and the marks in it (one place for both the rendering and
    the estimate)."""
    if not message.text_changed_by and message.truncation is None and adjustment is None:
        return message.text, ()
    marks = tuple(mark for mark in (
        text_mark(message) if message.text_changed_by else None,
        None if message.truncation is None else truncation_mark(message.call_id,
                                                                message.truncation),
        None if adjustment is None else adjustment_mark(adjustment)) if mark is not None)
    return "\n".join((message.text, *(mark.text for mark in marks))), marks


def render_chat_messages(view: ModelView, *, accepts_reasoning: bool) -> list[dict[str, Any]]:
    """The rendered request's messages as chat-completions dictionaries."""
    out: list[dict[str, Any]] = []
    for message in render_request(view, accepts_reasoning=accepts_reasoning).messages:
        item: dict[str, Any] = {"role": message.role.value, "content": message.content}
        if message.tool_calls:
            item["tool_calls"] = [
                {"id": str(call.id), "type": "function",
                 "function": {"name": call.name, "arguments": call.arguments}}
                for call in message.tool_calls]
        if message.tool_call_id is not None:
            item["tool_call_id"] = str(message.tool_call_id)
        if message.reasoning is not None:
            item["reasoning"] = message.reasoning
        out.append(item)
    return out


def estimation_request(view: ModelView, tool_schemas: tuple[str, ...] = ()) -> EstimationRequest:
    """The whole request as the TokenEstimator port counts it (§7: system, tools, messages):
    what the adapter sends, marks included — the same as ``rendered_estimation(
    render_request(view, tool_schemas))``, without building the rendered messages.

    Tool calls are counted with their arguments as part of the assistant message's text, since
    they are sent with it. A message keeps the prompt message it is counted as, unless an
    adjustment mark makes it depend on the view (the answer to an adjusted call).
    """
    found = marked(view)
    if found is None:
        messages = _prompts(view.messages, {})
        return EstimationRequest.model_construct(messages=tuple(messages),
                                                 tool_schemas=tool_schemas)
    at, segment = found
    messages, kept = around(view.messages, at, segment, "prompts", _prompts)
    request = EstimationRequest.model_construct(messages=tuple(messages),
                                                tool_schemas=tool_schemas)
    return mark(request, request.messages, at, kept)


def _prompts(messages: Iterable[ViewMessage], adjusted: dict[UUID, ToolCall]
             ) -> list[PromptMessage]:
    prompts: list[PromptMessage] = []
    for message, adjustment in _with_adjustments(messages, adjusted):
        if adjustment is not None:
            prompts.append(_counted(message, adjustment))
            continue
        prompt: PromptMessage | None = getattr(message, "_prompt", None)
        if prompt is None:  # not counted before: made once, then kept with the message
            prompt = _counted(message, None)
            object.__setattr__(message, "_prompt", prompt)
        prompts.append(prompt)
    return prompts


def _counted(message: ViewMessage, adjustment: ToolCall | None) -> PromptMessage:
    """What one view message is counted as: its content as sent, then its calls (reasoning
    is never sent to the estimate's provider-neutral request, as :func:`render_request`
    leaves it out by default)."""
    text = message.text  # most messages carry no mark: no call for them
    if message.text_changed_by or message.truncation is not None or adjustment is not None:
        text = _content(message, adjustment)[0]
    if message.tool_calls:
        text = _with_calls(text, message.tool_calls)
    return PromptMessage(_ROLE_NAMES[message.role], text)


def rendered_estimation(request: RenderedRequest) -> EstimationRequest:
    """A rendered request as the TokenEstimator port counts it: each message's content, its
    calls and the reasoning sent with it."""
    found = marked(request)
    if found is None:
        return EstimationRequest.model_construct(
            messages=tuple(_rendered_prompts(request.messages)),
            tool_schemas=request.tool_schemas)
    at, segment = found
    kept = segment.memo("prompts", lambda: Segment(tuple(_rendered_prompts(segment.items))),
                        lambda made, items: made.extended(tuple(_rendered_prompts(items))))
    messages = (*_rendered_prompts(request.messages[:at]), *kept.items,
                *_rendered_prompts(request.messages[at + len(segment):]))
    return mark(EstimationRequest.model_construct(messages=messages,
                                                  tool_schemas=request.tool_schemas),
                messages, at, kept)


def _rendered_prompts(messages: Iterable[RenderedMessage]) -> list[PromptMessage]:
    prompts = []
    for message in messages:
        prompt: PromptMessage | None = getattr(message, "_prompt", None)
        if prompt is None:  # not counted before: made once, then kept with the message
            prompt = _prompt(message)
            object.__setattr__(message, "_prompt", prompt)
        prompts.append(prompt)
    return prompts


def _prompt(message: RenderedMessage) -> PromptMessage:
    text = message.content
    if message.tool_calls:
        text = _with_calls(text, message.tool_calls)
    if message.reasoning is not None:
        text += f"\n{message.reasoning}"
    return PromptMessage(_ROLE_NAMES[message.role], text)


def _with_calls(text: str, calls: Iterable[ToolCall | RenderedCall]) -> str:
    """A message's text as counted: its content, then each call it makes on a line of its own
    (a loop, not a generator: a generator is a frame per message on Python 3.11)."""
    parts = [text]
    for call in calls:
        parts.append(f"\n{call.name}({call.arguments})")
    return "".join(parts)


_ROLE_NAMES: Mapping[MessageRole, Role] = MappingProxyType({
    MessageRole.SYSTEM: "system", MessageRole.USER: "user",
    MessageRole.ASSISTANT: "assistant", MessageRole.TOOL: "tool"})
"""Each role's plain name (an enum's ``.value`` is a descriptor call; a request of 10k
messages asks for it 10k times)."""
