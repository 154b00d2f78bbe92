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

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType
from typing import Any, Self
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

    @property
    def record_id(self) -> UUID:
        return self.record.record_id

    @property
    def kind(self) -> str:
        return self.record.message_kind


@dataclass(frozen=True, slots=True)
class ViewMessage:
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


@dataclass(frozen=True, slots=True)
class ModelView:
    """The ordered messages of one model request, provider-neutral."""

    messages: tuple[ViewMessage, ...]


VIEW_ADAPTER: TypeAdapter[ModelView] = TypeAdapter(ModelView)
"""Validates and serialises model views (JSON for traces and vectors)."""


def message_from_record(record: EffectiveRecord, kind: ViewKind | None = None, *,
                        role: MessageRole | None = None, text: str | None = None,
                        tool_calls: tuple[ToolCall, ...] | None = None,
                        keep_call: bool = True, source_run_id: UUID | None = None) -> ViewMessage:
    """The view message of one effective record, keeping its provenance (record, input, call,
    Run, flags). ``kind``, ``role``, ``text`` and ``tool_calls`` override what the record says,
    for the messages protocol repair re-labels (a fragment, an orphaned result);
    ``source_run_id``, when given, must equal the record's run_id (a shared id object)."""
    raw = record.record
    if kind is None:
        try:
            kind = ViewKind(raw.message_kind)
        except ValueError:
            raise ValueError(f"record {raw.record_id} has message_kind {raw.message_kind!r}, "
                             "which the model view does not know") from None
    # Positional, in the field order: a projection makes one message per record.
    return ViewMessage(
        role or raw.role, kind, record.text if text is None else text, raw.record_id,
        raw.origin_input_id, raw.call_id if keep_call else None,
        record.tool_calls if tool_calls is None else tool_calls,
        source_run_id or raw.run_id, None, record.truncation, record.incomplete,
        record.reasoning, record.annotation_source, record.modified_by)


# --- adapters: the neutral view to other shapes ------------------------------------------


def render_chat_messages(view: ModelView, *, accepts_reasoning: bool) -> list[dict[str, Any]]:
    """A chat-completions-shaped rendering (the adapter of §6).

    Reasoning is sent only to a provider that accepts it; otherwise the field is omitted (the
    record keeps it), never invented. Markers, placeholders, fragments and outcomes are sent as
    what they are: a placeholder answers its call as a tool message whose text says it did not
    run, so a provider sees a closed tool_calls group without a made-up result.
    """
    rendered: list[dict[str, Any]] = []
    for message in view.messages:
        item: dict[str, Any] = {"role": message.role.value, "content": message.text}
        if message.tool_calls:
            item["tool_calls"] = [
                {"id": str(call.call_id), "type": "function",
                 "function": {"name": call.name, "arguments": call.arguments}}
                for call in message.tool_calls]
        if message.role is MessageRole.TOOL and message.call_id is not None:
            item["tool_call_id"] = str(message.call_id)
        if accepts_reasoning and message.reasoning is not None:
            item["reasoning"] = message.reasoning
        rendered.append(item)
    return rendered


def estimation_request(view: ModelView, tool_schemas: tuple[str, ...] = ()) -> EstimationRequest:
    """The whole request as the TokenEstimator port counts it (§7: system, tools, messages).

    Tool calls are counted with their arguments as part of the assistant message's text, since
    they are sent with it.
    """
    messages = []
    role_names = _ROLE_NAMES
    for message in view.messages:
        text = message.text
        for call in message.tool_calls:
            text += f"\n{call.name}({call.arguments})"
        messages.append(PromptMessage(role_names[message.role], text))
    return EstimationRequest(messages=tuple(messages), tool_schemas=tool_schemas)


_ROLE_NAMES: Mapping[MessageRole, Role] = MappingProxyType({
    MessageRole.SYSTEM: "system", MessageRole.USER: "user",
    MessageRole.ASSISTANT: "assistant", MessageRole.TOOL: "tool"})
"""Each role's plain name (an enum's ``.value`` is a descriptor call; a request of 10k
messages asks for it 10k times)."""
