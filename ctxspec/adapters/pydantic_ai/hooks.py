"""The design's hook points where pydantic-ai's own capability hooks reach them
(pydantic_ai/capabilities/abstract.py), written as a user writes a capability (§3):

- ``model.pre_request`` — ``before_model_request``, once per request step before any attempt:
  a deny raises, so nothing is sent and the Run ends HOOK_DENIED; a write of ``params.<name>``
  goes into that request's ``model_settings``; a context patch of a named record's ``text`` is
  made through ``RunContext.messages``, the run's persistent history, as the hook's docstring
  says persistent changes are made;
- ``model.post_response`` — ``after_model_request``: a write of ``text`` replaces the answer's
  text parts; a deny raises and the Run ends HOOK_DENIED, its calls never run;
- ``tool.pre_call`` — pydantic-ai's approval of a deferred call: every tool requires approval
  and ``HandleDeferredToolCalls`` answers within the run, ``ToolApproved(override_args=...)``
  for a write of ``arguments`` (the best configuration also writes them into the history's
  call, as ``before_tool_validate``'s docstring asks), ``ToolDenied`` for a deny (the call
  never runs, its return's outcome ``denied``);
- ``tool.post_call`` — ``after_tool_execute``: a write of ``result`` replaces the result; a
  deny replaces it with a denial.

A failed item is dropped, as the design drops it (§3). A context patch at another point, a base
revision and a field registry have no counterpart in a capability: they are not applied, and
``hook_decided`` lists in ``changes`` only what was applied.
"""

import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

from pydantic_ai import RunContext
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models import ModelRequestContext
from pydantic_ai.settings import ModelSettings
from pydantic_ai.tools import (
    DeferredToolRequests,
    DeferredToolResults,
    ToolApproved,
    ToolDefinition,
    ToolDenied,
)

from ctxspec.adapters.hook_chain import Chain, HookDenied
from ctxspec.reference.contracts import PatchOperationKind
from ctxspec.reference.hook_changes import ContextOp
from ctxspec.reference.ports import HookPoint

POINTS: tuple[HookPoint, ...] = ("model.pre_request", "model.post_response", "tool.pre_call",
                                 "tool.post_call")
CAPABILITIES = frozenset(f"hooks:{point}" for point in POINTS)
PRE_DENIED = "denied by a pre-call hook"
POST_DENIED = "denied by a post-call hook"


def _identity(index: int) -> uuid.UUID:
    return uuid.uuid5(uuid.NAMESPACE_URL, f"ctxspec:pydantic-ai:record:{index}")


def _parts(messages: list[ModelMessage]) -> list[tuple[Any, Any]]:
    """(message, part) of every user prompt, tool return and answer (its text part, or None
    for an answer of calls only), in order: what a patch may name."""
    named: list[tuple[Any, Any]] = []
    for each in messages:
        if isinstance(each, ModelResponse):
            named.append((each, next((p for p in each.parts if isinstance(p, TextPart)), None)))
        else:
            named.extend((each, p) for p in each.parts
                         if isinstance(p, UserPromptPart | ToolReturnPart))
    return named


def _named(messages: list[ModelMessage]) -> dict[str, uuid.UUID]:
    """The records a scenario's patch may name: the current question, the last message, the
    first answer (an identity made from its place: pydantic-ai keeps no record ids)."""
    parts = _parts(messages)
    named = {"last": _identity(len(parts) - 1)} if parts else {}
    questions = [i for i, (_, p) in enumerate(parts) if isinstance(p, UserPromptPart)]
    if questions:
        named["question"] = _identity(questions[-1])
        first = next((i for i in range(questions[-1], len(parts))
                      if isinstance(parts[i][0], ModelResponse)), None)
        if first is not None:
            named["first_assistant"] = _identity(first)
    return named


@dataclass
class DesignHooks(AbstractCapability[Any]):
    """The capability a user following the design writes for the four points."""

    chain: Chain
    facts: dict[str, dict[str, Any]]
    """The driver's result facts by call_id, where a denial is written (Q210)."""
    worded: dict[str, str]
    """The driver's kinds of the texts it wrote, where an annotation is recorded."""
    record_rewrite: bool = True
    """Write an approved call's changed arguments into the history's call as well."""
    shared: tuple[str, ...] = ()
    """The names of the Agent's shared fields, which a patch may target as ``shared:<name>``
    (pydantic-ai has no shared scope; the name only resolves, and no write to it is made)."""
    proposed: dict[str, dict[str, Any]] = field(default_factory=dict)
    """The arguments each call was proposed with, by call_id, before a hook changed them."""
    saved: Callable[[], None] = lambda: None
    """Reports the moment a raw result is saved, before its post hook (capability
    ``moments``)."""

    def registered(self, point: HookPoint) -> bool:
        return self.chain.hooks.registered(point)

    def records(self, messages: list[ModelMessage]) -> dict[str, uuid.UUID]:
        named = _named(messages)
        named.update({f"shared:{name}": uuid.uuid5(uuid.NAMESPACE_URL, f"ctxspec:shared:{name}")
                      for name in self.shared})
        return named

    async def before_model_request(self, ctx: RunContext[Any],
                                   request_context: ModelRequestContext) -> ModelRequestContext:
        if not self.registered("model.pre_request"):
            return request_context
        settings: dict[str, Any] = {}
        parts = _parts(ctx.messages)

        def setting(path: str, value: Any) -> bool:
            head, _, name = path.partition(".")
            if head != "params" or not name:
                return False
            settings[name] = value
            return True

        def patch(op: ContextOp) -> bool:
            index = next((i for i in range(len(parts)) if _identity(i) == op.target_record_id),
                         None)
            if index is None or op.field_key != "text" or not isinstance(op.value, str):
                return False
            holder, part = parts[index]
            if op.operation == PatchOperationKind.APPEND_ANNOTATION:
                if not isinstance(holder, ModelRequest):
                    return False
                holder.parts = [*holder.parts, UserPromptPart(op.value)]
                self.worded[op.value] = "annotation"
            elif part is None:
                holder.parts = [TextPart(op.value), *holder.parts]
            else:
                part.content = op.value
            return True

        if self.chain.ask("model.pre_request", {"params": {}}, "pre", setting,
                          self.records(ctx.messages), patch):
            raise HookDenied("HOOK_DENIED: a model.pre_request hook denied the request")
        if settings:  # a patch of a part changed it in place, in the request and the history
            request_context.model_settings = cast(
                ModelSettings, {**(request_context.model_settings or {}), **settings})
        return request_context

    async def after_model_request(self, ctx: RunContext[Any], *,
                                  request_context: ModelRequestContext,
                                  response: ModelResponse) -> ModelResponse:
        self.saved()
        if not self.registered("model.post_response"):
            return response
        text = "".join(p.content for p in response.parts if isinstance(p, TextPart))
        edited = {"text": text}

        def apply(path: str, value: Any) -> bool:
            if path != "text" or not isinstance(value, str):
                return False
            edited["text"] = value
            return True

        if self.chain.ask("model.post_response", {"text": text}, "post", apply,
                          self.records([*ctx.messages, response])):
            raise HookDenied("HOOK_DENIED: a model.post_response hook denied the answer")
        if edited["text"] != text:
            others = [p for p in response.parts if not isinstance(p, TextPart)]
            response.parts = [TextPart(edited["text"]), *others]
        return response

    def approve(self, ctx: RunContext[Any], requests: DeferredToolRequests
                ) -> DeferredToolResults:
        """``tool.pre_call`` as pydantic-ai's in-run approval (``HandleDeferredToolCalls``)."""
        results = DeferredToolResults()
        for call in requests.approvals:
            results.approvals[call.tool_call_id] = self._approval(call,
                                                                  self.records(ctx.messages))
        return results

    def _approval(self, call: ToolCallPart, records: dict[str, uuid.UUID]
                  ) -> ToolApproved | ToolDenied:
        arguments = call.args_as_dict()
        self.proposed[call.tool_call_id] = arguments
        changed: dict[str, Any] = {}

        def apply(path: str, value: Any) -> bool:
            head, _, name = path.partition(".")
            if head != "arguments" or (not name and not isinstance(value, dict)):
                return False
            current = changed.get("arguments", arguments)
            changed["arguments"] = {**current, name: value} if name else value
            return True

        if self.chain.ask("tool.pre_call", {"name": call.tool_name, "arguments": arguments},
                          "pre", apply, records):
            self.facts[call.tool_call_id] = {"status": "denied", "stage": "pre",
                                             "executed": False, "result_delivered": False}
            return ToolDenied(PRE_DENIED)
        if "arguments" not in changed:
            return ToolApproved()
        if self.record_rewrite:
            call.args = json.dumps(changed["arguments"])
        return ToolApproved(override_args=changed["arguments"])

    async def after_tool_execute(self, ctx: RunContext[Any], *, call: ToolCallPart,
                                 tool_def: ToolDefinition, args: dict[str, Any],
                                 result: Any) -> Any:
        self.saved()
        if not self.registered("tool.post_call"):
            return result
        edited = {"result": str(result)}

        def apply(path: str, value: Any) -> bool:
            if path != "result" or not isinstance(value, str):
                return False
            edited["result"] = value
            return True

        if self.chain.ask("tool.post_call", {"result": str(result)}, "post", apply,
                          self.records(ctx.messages)):
            self.facts[call.tool_call_id] = {"status": "denied", "stage": "post",
                                             "executed": True, "result_delivered": False}
            return POST_DENIED
        return edited["result"]


__all__ = ["CAPABILITIES", "POINTS", "DesignHooks"]
