"""The design's hook points at ADK's callbacks (the Google ADK driver, driver.py): an
``LlmAgent``'s ``before_model_callback`` is ``model.pre_request``, its ``after_model_callback``
``model.post_response``, its ``before_tool_callback`` ``tool.pre_call`` and its
``after_tool_callback`` ``tool.post_call`` — given to the Executor's agent too.

What each callback can do is ADK's (google/adk/agents/llm_agent.py, the callbacks' docstrings):

- before the model, mutate the ``LlmRequest`` (a write of ``params.<name>`` sets that field of
  its ``config``) or raise, which ends the invocation with nothing sent (a deny: HOOK_DENIED);
- after the model, return another ``LlmResponse`` (a write of ``text`` replaces the answer's
  text, and the event ADK saves is the edited one) or raise (a deny, the answer withheld);
- before a tool, mutate its ``args`` (a write of ``arguments``: the tool runs with them, the
  saved function_call keeps the model's) or return a dict, which skips the tool and is its
  result (a deny);
- after a tool, return a dict, which replaces the result (a write of ``result``, or a deny's
  denial).

A context patch — a named record's field on a base revision, checked against a registry — has
no counterpart in a callback: applying one would be the §3 protocol written by the adapter, so
it is not applied and the ``hook_decided`` event lists in ``changes`` only what was applied.
A failed item is dropped, as the design drops it (§3). The compaction points are not declared:
ADK's summarizer call has no callback.
"""

import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from google.adk.agents.callback_context import CallbackContext
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.tools.base_tool import BaseTool
from google.adk.tools.tool_context import ToolContext
from google.genai import types

from ctxspec.adapters.hook_chain import Chain, HookDenied
from ctxspec.reference.contracts import PatchOperationKind
from ctxspec.reference.hook_changes import ContextOp
from ctxspec.reference.ports import HookPoint, HookPort

POINTS: tuple[HookPoint, ...] = ("model.pre_request", "model.post_response", "tool.pre_call",
                                 "tool.post_call")
CAPABILITIES = frozenset(f"hooks:{point}" for point in POINTS)
PRE_DENIED = "denied by a before-tool callback"
POST_DENIED = "denied by an after-tool callback"


@dataclass
class Callbacks:
    """Asks the scenario's chain from ADK's callbacks and traces its decisions."""

    hooks: HookPort
    event: Callable[..., None]
    facts: dict[str, dict[str, Any]]
    """The driver's result facts by call_id, where a denial is written (Q210)."""
    annotations: list[str] = field(default_factory=list)
    """The texts annotations added to a request (the view shows them as annotations)."""
    shared: tuple[str, ...] = ()
    """The names of the Agent's shared fields, which a patch may target as ``shared:<name>``
    (ADK has no shared scope; the name only resolves)."""

    def __post_init__(self) -> None:
        self.chain = Chain(self.hooks, self.event)

    def agent_callbacks(self) -> dict[str, Any]:
        """The ``LlmAgent`` arguments for the points the scenario has hooks at."""
        given: dict[HookPoint, tuple[str, Any]] = {
            "model.pre_request": ("before_model_callback", self.before_model),
            "model.post_response": ("after_model_callback", self.after_model),
            "tool.pre_call": ("before_tool_callback", self.before_tool),
            "tool.post_call": ("after_tool_callback", self.after_tool)}
        return {name: callback for point, (name, callback) in given.items()
                if self.hooks.registered(point)}

    def before_model(self, context: CallbackContext, request: LlmRequest) -> None:
        def setting(path: str, value: Any) -> bool:
            head, _, name = path.partition(".")
            if head != "params" or not name or name not in types.GenerateContentConfig.model_fields:
                return False
            setattr(request.config, name, value)
            return True
        named = self._named(request.contents)
        places = {identity: at for identity in named.values()
                  if (at := _index(identity, request.contents)) >= 0}

        def patch(op: ContextOp) -> bool:
            """A context patch of a record's text, in this request only: an annotation is a
            user content after its record, a replacement the record's new text (ADK keeps
            neither in the session, so the next request does not have it)."""
            at = places.get(op.target_record_id)
            if at is None or op.field_key != "text" or not isinstance(op.value, str):
                return False
            content = types.Content(role="user", parts=[types.Part(text=op.value)])
            if op.operation == PatchOperationKind.APPEND_ANNOTATION:
                request.contents.insert(at + 1, content)
                self.annotations.append(op.value)
            else:  # the record's text replaced; its calls and results stay
                old = request.contents[at]
                kept = [p for p in old.parts or [] if p.text is None]
                request.contents[at] = types.Content(role=old.role, parts=[
                    types.Part(text=op.value), *kept])
            return True
        if self._chain("model.pre_request", {"params": {}}, "pre", setting, named, patch):
            raise HookDenied("HOOK_DENIED: a before-model callback denied the request")

    def after_model(self, context: CallbackContext, response: LlmResponse) -> LlmResponse | None:
        content = response.content
        if content is None or response.partial:
            return None
        text = "".join(p.text or "" for p in content.parts or [] if not p.thought)
        edited = {"text": text}

        def write(path: str, value: Any) -> bool:
            if path != "text" or not isinstance(value, str):
                return False
            edited["text"] = value
            return True
        if self._chain("model.post_response", {"text": text}, "post", write):
            raise HookDenied("HOOK_DENIED: an after-model callback denied the answer")
        if edited["text"] == text:
            return None
        others = [p for p in content.parts or [] if p.text is None]
        parts = [types.Part(text=edited["text"]), *others]
        return response.model_copy(update={"content": types.Content(role="model", parts=parts)})

    def before_tool(self, tool: BaseTool, args: dict[str, Any], context: ToolContext
                    ) -> dict[str, Any] | None:
        proposed = dict(args)
        edited = {"arguments": proposed}

        def write(path: str, value: Any) -> bool:
            head, _, name = path.partition(".")
            if head != "arguments" or (not name and not isinstance(value, dict)):
                return False
            edited["arguments"] = {**edited["arguments"], name: value} if name else value
            return True
        if self._chain("tool.pre_call", {"name": tool.name, "arguments": proposed}, "pre",
                       write):
            self.facts[str(context.function_call_id)] = {
                "status": "denied", "stage": "pre", "executed": False,
                "result_delivered": False}
            return {"result": PRE_DENIED}
        if edited["arguments"] != proposed:  # ADK runs the tool with this same dict
            args.clear()
            args.update(edited["arguments"])
        return None

    def after_tool(self, tool: BaseTool, args: dict[str, Any], context: ToolContext,
                   response: Any) -> dict[str, Any] | None:
        result = response["result"] if isinstance(response, dict) and set(response) == {
            "result"} else json.dumps(response, sort_keys=True, default=str)
        edited = {"result": str(result)}

        def write(path: str, value: Any) -> bool:
            if path != "result" or not isinstance(value, str):
                return False
            edited["result"] = value
            return True
        if self._chain("tool.post_call", {"result": str(result)}, "post", write):
            self.facts[str(context.function_call_id)] = {
                "status": "denied", "stage": "post", "executed": True,
                "result_delivered": False}
            return {"result": POST_DENIED}
        return None if edited["result"] == str(result) else {"result": edited["result"]}

    def _named(self, contents: list[types.Content]) -> dict[str, uuid.UUID]:
        """The records a hook item may name (the Run's question, its first answer, the last
        content, the shared fields), each an identity made from its place in the request: ADK
        keeps none a callback could address, and a context patch is never applied, so the
        name only has to resolve."""
        def identity(index: int) -> uuid.UUID:
            return uuid.uuid5(uuid.NAMESPACE_URL, f"ctxspec:google-adk:record:{index}")
        named = {f"shared:{name}": uuid.uuid5(uuid.NAMESPACE_URL, f"ctxspec:shared:{name}")
                 for name in self.shared}
        if contents:
            named["last"] = identity(len(contents) - 1)
        asked = [i for i, c in enumerate(contents) if c.role == "user"
                 and any(p.text for p in c.parts or [])]
        if asked:
            named["question"] = identity(asked[-1])
            answers = [i for i in range(asked[-1], len(contents)) if contents[i].role == "model"]
            if answers:
                named["first_assistant"] = identity(answers[0])
        return named

    def _chain(self, point: HookPoint, payload: dict[str, Any], stage: str,
               apply: Callable[[str, Any], bool],
               records: dict[str, uuid.UUID] | None = None,
               patch: Callable[[ContextOp], bool] | None = None) -> bool:
        """Run the chain; ``apply(path, value)`` carries one payload write (False: it has no
        place). True when an item denied."""
        if records is None:  # the answer or the call the chain is asked about, and the shared
            at = uuid.uuid5(uuid.NAMESPACE_URL,
                            f"ctxspec:google-adk:{point}:{self.chain.asked.get(point, 0) + 1}")
            records = {**self._named([]), "last": at, "question": at, "first_assistant": at}
        return self.chain.ask(point, payload, stage, apply, records, patch)


def _index(identity: uuid.UUID, contents: list[types.Content]) -> int:
    """The place in the request a record identity of ``_named`` stands for (-1: none)."""
    for index in range(len(contents)):
        if identity == uuid.uuid5(uuid.NAMESPACE_URL, f"ctxspec:google-adk:record:{index}"):
            return index
    return -1


__all__ = ["CAPABILITIES", "POINTS", "Callbacks"]
