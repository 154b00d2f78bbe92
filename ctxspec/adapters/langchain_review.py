"""LangChain's own human-in-the-loop as the design's ``tool.pre_call`` hook point (the LangChain
driver, ctxspec/adapters/langchain.py).

``HumanInTheLoopMiddleware`` pauses the graph after the model's answer (a LangGraph
``interrupt``) and asks a reviewer for one decision per tool call: approve, edit (the arguments)
or reject; the Run goes on with ``Command(resume={"decisions": [...]})``. The scenario's hook
chain for a call is that reviewer: its items' decisions and argument writes become the answer
(allow → approve, allow with argument writes → edit, deny → reject). What LangChain then runs,
and what it feeds back to the model, is what the suite judges.

The reviewer can say only what a decision says. A hook item that failed is dropped, as the
design drops a failed item (§3 "处理器失败时，才按 Hook 故障规则继续"): the reviewer decides on
the chain's other items, as a careful user's reviewer does (Q290; Q191 had it answer no
decision, which LangChain refuses with a ValueError — the adapter's choice, not LangChain's). Writes
outside the call's ``name`` and ``arguments`` and context patches have nowhere to go in an
``edit`` and are not sent (Q192); a stale base revision is not LangChain's notion either.
"""

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain.agents.middleware import HumanInTheLoopMiddleware, InterruptOnConfig
from langchain.agents.middleware.human_in_the_loop import DecisionType
from langchain_core.messages import AIMessage, BaseMessage

from ctxspec.reference.ports import HookContext, HookPoint, HookPort, HookReply
from ctxspec.reference.registry import ABSENT

POINT: HookPoint = "tool.pre_call"
ALLOWED: list[DecisionType] = ["approve", "edit", "reject"]


def review_middleware(tool_names: list[str]) -> HumanInTheLoopMiddleware[Any, Any, Any]:
    """Every tool of the Agent goes through review, in LangChain's default (batched) mode: one
    interrupt per model answer, a decision per call in action order."""
    review: dict[str, bool | InterruptOnConfig] = {
        name: InterruptOnConfig(allowed_decisions=list(ALLOWED)) for name in tool_names}
    return HumanInTheLoopMiddleware(review)


@dataclass
class Reviewer:
    """Answers LangChain's review requests from the scenario's ``tool.pre_call`` hooks."""

    hooks: HookPort
    event: Callable[..., None]
    asked: int = 0

    def answer(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """The ``Command(resume=...)`` value for one ``HITLRequest``."""
        return {"decisions": [self._decide(str(action["name"]), dict(action["args"]))
                              for action in request["action_requests"]]}

    def _decide(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        self.asked += 1
        self.event("hook_called", point=POINT, stage="pre")
        items = self.hooks.items(HookContext(
            POINT, {"name": name, "arguments": arguments}, None, None, None,
            uuid.uuid5(uuid.NAMESPACE_URL, f"ctxspec:review:{self.asked}"), self.asked))
        edited = {"name": name, "arguments": dict(arguments)}
        denied = False
        for position, item in enumerate(items):
            changes = [] if item.failed else _apply(item, edited)
            self.event("hook_decided", point=POINT, chain_position=position,
                       decision="failed" if item.failed else item.decision,
                       patch_valid=not item.failed, diagnostics=[], changes=changes)
            denied = denied or (not item.failed and item.decision == "deny")
        if denied:
            return {"type": "reject"}
        if edited == {"name": name, "arguments": arguments}:
            return {"type": "approve"}
        return {"type": "edit", "edited_action": {"name": edited["name"],
                                                  "args": edited["arguments"]}}


def rejected_calls(messages: Sequence[BaseMessage], request: Mapping[str, Any],
                   answer: Mapping[str, Any]) -> set[str]:
    """The ids of the calls ``answer`` rejects: LangChain asks about the last answer's calls
    in their order (each action names the call's tool and arguments, not its id), so each
    action is the first call of that answer not yet paired with the same name and arguments.
    The adapter marks their results as pre-call denials (Q210)."""
    last = next((m for m in reversed(messages) if isinstance(m, AIMessage)), None)
    unpaired = list(last.tool_calls) if last is not None else []
    rejected: set[str] = set()
    for action, decision in zip(request["action_requests"], answer["decisions"], strict=False):
        call = next((c for c in unpaired
                     if (c["name"], c["args"]) == (action["name"], action["args"])), None)
        if call is None:
            continue
        unpaired.remove(call)
        if decision.get("type") == "reject" and call.get("id"):
            rejected.add(str(call["id"]))
    return rejected


def reviewed_states(graph: Any, checkpointer: Any, config: Any) -> list[list[BaseMessage]]:
    """The messages of the thread and of each Executor's subgraph paused with it: a review
    names the calls of the last answer of one of them (a subgraph invoked inside a tool is
    saved under its parent task's namespace, ``tools:<task id>``)."""
    snapshot = graph.get_state(config)
    states = [snapshot.values.get("messages", [])]
    for task in snapshot.tasks:
        saved = checkpointer.get_tuple({"configurable": {
            **config["configurable"], "checkpoint_ns": f"{task.name}:{task.id}"}})
        if saved is not None:
            states.append(saved.checkpoint["channel_values"].get("messages", []))
    return states


def _apply(item: HookReply, call: dict[str, Any]) -> list[str]:
    """Write the item's payload writes to the call's name and arguments, as a reviewer's edit
    can; returns the paths written. Other paths and context patches are not sent (Q192)."""
    written = []
    for op in item.payload_ops:
        head, _, rest = op.path.partition(".")
        if head == "name" and not rest and isinstance(op.value, str):
            call["name"] = op.value
        elif head == "arguments" and not rest:
            call["arguments"] = dict(op.value) if isinstance(op.value, dict) else {}
        elif head == "arguments" and "." not in rest:
            if op.value is ABSENT:
                call["arguments"].pop(rest, None)
            else:
                call["arguments"][rest] = op.value
        else:
            continue
        written.append(op.path)
    return written


__all__ = ["POINT", "Reviewer", "rejected_calls", "review_middleware", "reviewed_states"]
