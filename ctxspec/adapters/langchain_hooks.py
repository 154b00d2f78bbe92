"""The design's hook points that LangChain's own middleware reaches (the LangChain driver,
ctxspec/adapters/langchain.py): an ``AgentMiddleware`` written as a user writes one, asking the
scenario's hook chain where LangChain hands the middleware the request, the answer or the
result.

- ``model.pre_request`` — ``before_model``, a node before the model's: a deny sends no request
  (the Run ends HOOK_DENIED); a context patch of a message's ``text`` is a state update of the
  thread (the message replaced by id, an annotation appended as a SystemMessage); a write of
  ``params.<name>`` goes into that request's ``model_settings`` (``wrap_model_call``,
  ``ModelRequest.override``);
- ``model.post_response`` — ``after_model``, a node after the model's (whose checkpoint holds
  the raw answer): a write of ``text`` replaces the AIMessage in the thread (same id); a deny
  withholds the answer (HOOK_DENIED);
- ``tool.post_call`` — ``wrap_tool_call`` once the tool ran: a write of ``result`` replaces the
  ToolMessage's content; a deny replaces it with a denial, its status ``error``.

A failed item is dropped, as the design drops it (§3). What a middleware cannot carry — a
context patch at another point, a base revision (LangChain keeps no effective context with
revisions), a field registry — is not applied: the ``hook_decided``
event lists in ``changes`` only what was applied, so a case that needs the design's patch rules
fails on LangChain's lack of them.
"""

import uuid
from collections.abc import Callable, Sequence
from typing import Any

from langchain.agents.middleware import (
    AgentMiddleware,
    ModelRequest,
    ModelResponse,
    hook_config,
)
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
    trim_messages,
)
from langgraph.prebuilt.tool_node import ToolCallRequest

from ctxspec.adapters.hook_chain import Chain, HookDenied
from ctxspec.reference.contracts import PatchOperationKind
from ctxspec.reference.hook_changes import ContextOp
from ctxspec.reference.ports import HookPoint

POINTS: tuple[HookPoint, ...] = ("model.pre_request", "model.post_response", "tool.post_call")
COMPACTION_POINTS: tuple[HookPoint, ...] = ("compaction.pre_request", "compaction.post_response")
"""The points around SummarizationMiddleware's summary call (langchain_summary.py)."""
CAPABILITIES = frozenset(f"hooks:{point}" for point in (*POINTS, *COMPACTION_POINTS))
DENIED_RESULT = "denied by a post-call hook"


def uid(message: BaseMessage) -> uuid.UUID:
    """A message's id as the uuid a hook addresses it by."""
    return uuid.uuid5(uuid.NAMESPACE_URL, f"ctxspec:message:{message.id}")


def names(messages: Sequence[BaseMessage]) -> dict[str, uuid.UUID]:
    """The records a scenario's patch may name: the current question, the last message, the
    first answer."""
    named: dict[str, uuid.UUID] = {}
    question = next((m for m in reversed(messages) if isinstance(m, HumanMessage)), None)
    answer = next((m for m in messages if isinstance(m, AIMessage)), None)
    for name, message in (("question", question), ("last", messages[-1] if messages else None),
                          ("first_assistant", answer)):
        if message is not None:
            named[name] = uid(message)
    return named


class DesignHooks(AgentMiddleware[Any, Any, Any]):
    """The middleware a user following the design writes for the three points."""

    def __init__(self, chain: Chain, on_post_denied: Callable[[str], None]) -> None:
        super().__init__()
        self.chain = chain
        self.on_post_denied = on_post_denied
        self.registered = {point for point in POINTS if chain.hooks.registered(point)}
        self.denied = False
        """Whether a post-response hook withheld the last answer."""
        self.settings: dict[str, Any] = {}
        """The request parameters the last pre-request chain wrote, for its model call."""

    def before_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """``model.pre_request``: a node of its own before the model's, so what it changes is
        written to the thread (LangGraph's checkpoint), as a context patch persists."""
        if "model.pre_request" not in self.registered:
            return None
        messages: list[BaseMessage] = list(state["messages"])
        named = names(messages)
        self.settings = {}
        changed: list[BaseMessage] = []

        def apply(op: ContextOp) -> bool:
            target = next((m for m in messages if uid(m) == op.target_record_id), None)
            if target is None or op.field_key != "text" or not isinstance(op.value, str):
                return False
            if op.operation == PatchOperationKind.APPEND_ANNOTATION:
                changed.append(SystemMessage(content=op.value))
            else:
                changed.append(target.model_copy(update={"content": op.value}))
            return True

        def setting(path: str, value: Any) -> bool:
            head, _, name = path.partition(".")
            if head != "params" or not name:
                return False
            self.settings[name] = value
            return True

        if self.chain.ask("model.pre_request", {"params": {}}, "pre", setting, named, apply):
            raise HookDenied("a hook denied the model request; it was not sent")
        return {"messages": changed} if changed else None

    @hook_config(can_jump_to=["end"])
    def after_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """``model.post_response``: a node of its own after the model's, whose checkpoint holds
        the raw answer; the edited answer replaces it in the thread (same message id). A deny
        removes the answer from the thread and jumps to the end: its calls never run, and the
        driver ends the Run HOOK_DENIED (``denied``). A context patch may name the answer
        (``last``) and write its ``text``, carried the same way."""
        if "model.post_response" not in self.registered:
            return None
        answer = next((m for m in reversed(state["messages"]) if isinstance(m, AIMessage)), None)
        if answer is None:
            return None
        edited = {"text": str(answer.text)}

        def text(path: str, value: Any) -> bool:
            if path != "text" or not isinstance(value, str):
                return False
            edited["text"] = value
            return True

        def patch(op: ContextOp) -> bool:  # a context patch of the answer's own text
            if op.target_record_id != uid(answer) or op.field_key != "text" or not isinstance(
                    op.value, str) or op.operation == PatchOperationKind.APPEND_ANNOTATION:
                return False
            edited["text"] = op.value
            return True

        if self.chain.ask("model.post_response", {"text": answer.text}, "post", text,
                          {"last": uid(answer)}, patch):
            self.denied = True
            return {"messages": [RemoveMessage(id=str(answer.id))], "jump_to": "end"}
        if edited["text"] == answer.text:
            return None
        return {"messages": [answer.model_copy(update={"content": edited["text"]})]}

    def wrap_model_call(self, request: ModelRequest[Any],
                        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]]
                        ) -> ModelResponse[Any]:
        if self.settings:
            request = request.override(model_settings={**request.model_settings,
                                                       **self.settings})
        return handler(request)

    def wrap_tool_call(self, request: ToolCallRequest,
                       handler: Callable[[ToolCallRequest], Any]) -> Any:
        result = handler(request)
        if "tool.post_call" not in self.registered or not isinstance(result, ToolMessage):
            return result
        edited = {"result": str(result.text)}

        def content(path: str, value: Any) -> bool:
            if path != "result" or not isinstance(value, str):
                return False
            edited["result"] = value
            return True

        if self.chain.ask("tool.post_call", {"result": result.text}, "post", content):
            self.on_post_denied(str(result.tool_call_id))
            return result.model_copy(update={"content": DENIED_RESULT, "status": "error"})
        if edited["result"] == result.text:
            return result
        return result.model_copy(update={"content": edited["result"]})


class TrimBeforeModel(AgentMiddleware[Any, Any, Any]):
    """The other path of LangChain's short-term memory: no summary, the request's messages
    trimmed to the last ``max_tokens`` with ``trim_messages(strategy="last")`` before each
    model call (a pre-model hook; the thread keeps every message). Run by the bug corpus
    (tests/real_bugs/), not by the compatibility reports."""

    def __init__(self, max_tokens: int, count: Callable[[Any], int]) -> None:
        super().__init__()
        self.max_tokens, self.count = max_tokens, count

    def wrap_model_call(self, request: ModelRequest[Any],
                        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]]
                        ) -> ModelResponse[Any]:
        kept = trim_messages(request.messages, max_tokens=self.max_tokens, strategy="last",
                             token_counter=self.count)
        return handler(request.override(messages=kept))  # type: ignore[arg-type]


__all__ = ["CAPABILITIES", "COMPACTION_POINTS", "DENIED_RESULT", "POINTS", "DesignHooks",
           "TrimBeforeModel", "names", "uid"]
