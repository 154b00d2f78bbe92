"""The scripted world's part of a scenario document: the model's answers per purpose, each
tool's results and each hook point's items (docs/scenarios.md). The ports that answer from them
are in ``scripted.py``; the rest of the document (the Agent, the steps, the triggers, a crash) in
``scenario.py``, which re-exports these names.
"""

import json
from typing import Any, Literal
from uuid import UUID

from pydantic import Field, model_validator

from ctxspec.conformance.documents import Doc
from ctxspec.limits import shown
from ctxspec.reference.ports import (
    Complete,
    ContextLengthExceeded,
    Failed,
    ModelOutcome,
    PartialThenFailed,
    ProposedCall,
)


class CallDoc(Doc):
    name: str = Field(min_length=1)
    arguments: dict[str, Any] = Field(default_factory=dict)
    id: str | None = Field(default=None, description=(
        "the provider's own call id (two calls may share one): never a platform key (§2)"))
    arguments_text: str | None = Field(default=None, description=(
        "the provider's raw argument text instead of arguments, e.g. malformed JSON"))

    @model_validator(mode="after")
    def _one_argument_form(self) -> "CallDoc":
        if self.arguments_text is not None and self.arguments:
            raise ValueError("a call gives arguments or arguments_text, not both")
        return self

    def proposed(self) -> ProposedCall:
        if self.arguments_text is None:
            return ProposedCall(self.name, self.arguments, self.id)
        try:
            parsed = json.loads(self.arguments_text)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            return ProposedCall(self.name, parsed, self.id)
        return ProposedCall(self.name, {}, self.id, self.arguments_text)


class UsageDoc(Doc):
    """The actual usage a provider reports with a complete response (§7): audit data only."""

    input_tokens: int | None = Field(default=None, ge=0)
    output_tokens: int | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _some(self) -> "UsageDoc":
        if self.input_tokens is None and self.output_tokens is None:
            raise ValueError("a usage report gives input_tokens, output_tokens or both")
        return self


class ModelDoc(Doc):
    """One scripted model response: exactly one of text, fail (optionally after partial), or
    context_length_exceeded; a response with text may report its actual ``usage``."""

    text: str | None = None
    tool_calls: tuple[CallDoc, ...] = ()
    reasoning: str | None = None
    usage: UsageDoc | None = None
    fail: str | None = None
    partial: str | None = None
    context_length_exceeded: bool = False
    run: int | None = Field(default=None, ge=1, description=(
        "with request: answer only this Run's (the n-th question's) request, whatever the "
        "order the runtime asks in"))
    request: int | None = Field(default=None, ge=1, description=(
        "with run: the k-th model Operation of this purpose and role in that Run"))
    attempt: int = Field(default=1, ge=1, description="with run and request: which attempt")

    @property
    def key(self) -> tuple[int, int, int] | None:
        """(run, request, attempt) of a keyed answer, None for one taken in order."""
        return None if self.run is None or self.request is None else (
            self.run, self.request, self.attempt)

    @model_validator(mode="after")
    def _keyed(self) -> "ModelDoc":
        if (self.run is None) != (self.request is None):
            raise ValueError("a keyed answer gives both run and request")
        if self.attempt != 1 and self.run is None:
            raise ValueError("attempt belongs to a keyed answer (run and request)")
        return self

    @model_validator(mode="after")
    def _one_kind(self) -> "ModelDoc":
        kinds = [self.text is not None, self.fail is not None, self.context_length_exceeded]
        if sum(kinds) != 1:
            raise ValueError("a model response is exactly one of: text, fail, "
                             "context_length_exceeded")
        if self.partial is not None and self.fail is None:
            raise ValueError("partial goes with fail: a partial stream then a failure")
        if self.tool_calls and self.text is None:
            raise ValueError("tool_calls belong to a response with text")
        if self.usage is not None and self.text is None:
            raise ValueError("usage belongs to a response with text")
        return self

    def outcome(self) -> ModelOutcome:
        if self.context_length_exceeded:
            return ContextLengthExceeded()
        if self.fail is not None:
            return PartialThenFailed(self.partial, self.fail) if self.partial is not None \
                else Failed(self.fail)
        usage = self.usage
        return Complete(self.text or "", tuple(c.proposed() for c in self.tool_calls),
                        self.reasoning,
                        output_tokens=None if usage is None else usage.output_tokens,
                        input_tokens=None if usage is None else usage.input_tokens)


class ScriptDoc(Doc):
    """Responses by purpose and role: ``business`` for the root role (or Planner),
    ``executor`` for Executor executions, ``compaction`` for chunks of any role."""

    business: tuple[ModelDoc, ...] = ()
    executor: tuple[ModelDoc, ...] = ()
    compaction: tuple[ModelDoc, ...] = ()
    limit_output: bool = Field(default=False, description=(
        "the scripted provider honours each request's max_output_tokens: an answer whose "
        "output tokens (its usage.output_tokens, else one a character) exceed it is cut to "
        "that many characters, without tool calls, and reported cut (Q68)"))

    @model_validator(mode="after")
    def _keys_once(self) -> "ScriptDoc":
        for name in ("business", "executor", "compaction"):
            keys = [doc.key for doc in getattr(self, name) if doc.key is not None]
            if len(keys) != len(set(keys)):
                raise ValueError(f"{name}: two answers keyed to the same run, request and "
                                 "attempt")
        return self


class ArtifactDoc(Doc):
    path: str = Field(min_length=1)
    media_type: str = Field(min_length=1)
    size_bytes: int = Field(ge=0)


class ToolResultDoc(Doc):
    text: str = ""
    error: str | None = None
    artifact: ArtifactDoc | None = None
    workspace_writes: dict[str, str] = Field(default_factory=dict)
    latency: int | None = Field(default=None, ge=1, description=(
        "the logical time the call takes: calls of a batch run concurrently finish in latency "
        "order (ties in call order); the protocol order stays the action order (§2)"))


class PayloadPatchDoc(Doc):
    path: str = Field(min_length=1)
    value: Any = None
    delete: bool = False


PATCH_TARGETS = ("call", "question", "last", "first_assistant")
"""The names a context_patch target may use besides ``shared:<field>`` and a record uuid."""


class ContextPatchDoc(Doc):
    target: str = Field(min_length=1, description=(
        "call | question | last | first_assistant | shared:<field> | a record uuid"))
    field: str = Field(min_length=1, description="a field key; {call_id} is replaced")
    operation: Literal["replace_value", "append_annotation"] = "replace_value"
    value: Any = None
    scope: Literal["own", "shared"] = "own"

    @model_validator(mode="after")
    def _target(self) -> "ContextPatchDoc":
        # Checked when the scenario is read, so a bad target never surfaces half-way through a
        # run as an exception of the port (Q107).
        if self.target in PATCH_TARGETS or (self.target.startswith("shared:")
                                            and len(self.target) > len("shared:")):
            return self
        try:
            UUID(self.target)
        except ValueError:
            raise ValueError(f"target {shown(self.target)} is none of {', '.join(PATCH_TARGETS)}"
                             ", shared:<field> or a record uuid") from None
        return self


class HookItemDoc(Doc):
    decision: str = "allow"
    payload_patch: tuple[PayloadPatchDoc, ...] = ()
    context_patch: tuple[ContextPatchDoc, ...] = ()
    fails: bool = False
    stale_base: bool = Field(default=False, description=(
        "patch against the revision the chain started from, ignoring what earlier items of the "
        "same chain committed — of the scope the item patches (the shared scope has its own)"))

    @model_validator(mode="after")
    def _one_scope(self) -> "HookItemDoc":
        if len({patch.scope for patch in self.context_patch}) > 1:
            raise ValueError("one hook item's context_patch addresses one scope")
        return self


class HookDoc(Doc):
    point: Literal["model.pre_request", "model.post_response", "tool.pre_call",
                   "tool.post_call", "compaction.pre_request", "compaction.post_response",
                   "capability.pre_call"]
    ordinal: int | None = Field(default=None, ge=1,
                                description="the n-th invocation of the point; None: every one")
    items: tuple[HookItemDoc, ...] = Field(min_length=1)
