"""The design's hook points at the grain the Agents SDK has them (the Agents SDK driver,
ctxspec/adapters/openai_agents/driver.py): a function tool's ``ToolInputGuardrail`` is
``tool.pre_call``, its ``ToolOutputGuardrail`` ``tool.post_call``, and
``RunConfig.call_model_input_filter`` ``model.pre_request``.

The filter runs before every model call and may raise, which ends the Run before the call
(a deny), or return the input (an allow). It could also return other input, but the design's
patch (a target, a field, a base revision, checked against a registry) has no counterpart in
it: applying one would be the §3 protocol written by the adapter, so its writes are not
applied either (Q381).

A guardrail answers allow, ``reject_content`` (a message in place of the call or of its result)
or ``raise_exception`` (agents/tool_guardrails.py: ToolGuardrailFunctionOutput): it can deny,
never modify. So a chain's deny rejects — before the call (it never runs) or after it (its
result is withheld) — and its writes have no place: the ``hook_decided`` event lists in
``changes`` nothing, and a case that needs the edit fails on the SDK's grain, as it should
(issue #32: allow/deny without modify is a grain the suite judges). A failed item is dropped,
as the design drops it (§3).
"""

import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agents import Agent, FunctionTool, RunContextWrapper, RunHooks
from agents.items import ModelResponse
from agents.tool_guardrails import (
    ToolGuardrailFunctionOutput,
    ToolInputGuardrailData,
    ToolOutputGuardrailData,
    tool_input_guardrail,
    tool_output_guardrail,
)

from ctxspec.adapters.hook_chain import Chain, HookDenied
from ctxspec.adapters.openai_agents.model import response_text
from ctxspec.reference.ports import HookPoint, HookPort

POINTS: tuple[HookPoint, ...] = ("tool.pre_call", "tool.post_call", "model.pre_request",
                                 "model.post_response")
CAPABILITIES = frozenset(f"hooks:{point}" for point in POINTS)
PRE_DENIED = "denied by a pre-call guardrail"
POST_DENIED = "denied by a post-call guardrail"


@dataclass
class Guardrails:
    """Asks the scenario's chain from the SDK's tool guardrails."""

    hooks: HookPort
    event: Callable[..., None]
    facts: dict[str, dict[str, Any]]
    """The driver's result facts by call_id, where a denial is written (Q210)."""

    def __post_init__(self) -> None:
        self.chain = Chain(self.hooks, self.event, failed_diagnostics=())  # Q550

    def attach(self, tools: list[FunctionTool]) -> None:
        """Give every tool the guardrails of the points the scenario has hooks at."""
        for tool in tools:
            if self.hooks.registered("tool.pre_call"):
                tool.tool_input_guardrails = [tool_input_guardrail(self._before)]
            if self.hooks.registered("tool.post_call"):
                tool.tool_output_guardrails = [tool_output_guardrail(self._after)]

    def _before(self, data: ToolInputGuardrailData) -> ToolGuardrailFunctionOutput:
        context = data.context
        if self.call_denied(context.tool_name, context.tool_arguments, context.tool_call_id):
            return ToolGuardrailFunctionOutput.reject_content(PRE_DENIED)
        return ToolGuardrailFunctionOutput.allow()

    def call_denied(self, name: str, arguments: str | None, call_id: str) -> bool:
        """``tool.pre_call``: the chain asked with a proposed call (from a guardrail or, in
        the approvals mapping, an approval, approvals.py); a deny is written as the call's
        result facts (Q210)."""
        proposed = json.loads(arguments or "{}")
        if not self._denies("tool.pre_call", {"name": name, "arguments": proposed}, "pre"):
            return False
        self.facts[call_id] = {"status": "denied", "stage": "pre", "executed": False,
                               "result_delivered": False}
        return True

    def _after(self, data: ToolOutputGuardrailData) -> ToolGuardrailFunctionOutput:
        context = data.context
        if self._denies("tool.post_call", {"result": str(data.output)}, "post"):
            self.facts[context.tool_call_id] = {"status": "denied", "stage": "post",
                                                "executed": True, "result_delivered": False}
            return ToolGuardrailFunctionOutput.reject_content(POST_DENIED)
        return ToolGuardrailFunctionOutput.allow()

    shared: tuple[str, ...] = ()
    """The names of the Agent's shared fields, which a patch may target as ``shared:<name>``
    (the SDK has no shared scope; the name only resolves, Q381)."""

    def request_denied(self, messages: list[dict[str, Any]], question: str | None) -> bool:
        """``model.pre_request`` from ``RunConfig.call_model_input_filter``: the chain asked
        with the request about to be sent; a deny raises there, so the SDK never calls the
        model and ends the Run (agents/run_internal/turn_preparation.py). ``question``: the
        input id of the current Run's question, which names the records a patch may target."""
        if not self.hooks.registered("model.pre_request"):
            return False
        named = _named(messages, question)
        named.update({f"shared:{name}": uuid.uuid5(uuid.NAMESPACE_URL, f"ctxspec:shared:{name}")
                      for name in self.shared})
        return self._denies("model.pre_request", {"messages": messages}, "pre", named)

    def response_denied(self, text: str) -> bool:
        """``model.post_response`` from ``RunHooks.on_llm_end`` (Q383): the chain asked with
        the answer's text; a deny raises there and ends the Run before the answer's calls."""
        if not self.hooks.registered("model.post_response"):
            return False
        return self._denies("model.post_response", {"text": text}, "post")

    def _denies(self, point: HookPoint, payload: dict[str, Any], stage: str,
                records: dict[str, uuid.UUID] | None = None) -> bool:
        """The chain asked; a write has no place in a guardrail (Q381)."""
        return self.chain.ask(point, payload, stage, lambda path, value: False, records)


def _named(messages: list[dict[str, Any]], question: str | None) -> dict[str, uuid.UUID]:
    """The records a hook item may name (the Run's question, its first assistant message, the
    last message), each an identity made from its place in the request: the SDK keeps none
    for a user item, and a write is never applied (Q381), so the name only has to resolve."""
    def identity(index: int) -> uuid.UUID:
        return uuid.uuid5(uuid.NAMESPACE_URL, f"ctxspec:openai-agents:record:{index}")

    named = {"last": identity(len(messages) - 1)} if messages else {}
    start = next((i for i, m in enumerate(messages)
                  if question is not None and m.get("input_id") == question), None)
    if start is not None:
        named["question"] = identity(start)
        first = next((i for i in range(start, len(messages))
                      if messages[i]["kind"] == "assistant"), None)
        if first is not None:
            named["first_assistant"] = identity(first)
    return named


class ResponseHooks(RunHooks[Any]):
    """The SDK's hook after each model call: the provider's reported usage, beside the
    request's estimate (§7: audit only), and ``model.post_response`` (Q383): the SDK awaits
    it after the response is validated and before its tool calls run, so a deny raised
    there ends the Run with the answer withheld and its calls never run."""

    def __init__(self, usage: Callable[[ModelResponse], None], guardrails: Guardrails) -> None:
        self.usage, self.guardrails = usage, guardrails

    async def on_llm_end(self, context: RunContextWrapper[Any], agent: Agent[Any],
                         response: ModelResponse) -> None:
        self.usage(response)
        if self.guardrails.response_denied(response_text(response)):
            raise HookDenied("HOOK_DENIED: a model.post_response hook denied the answer")


__all__ = ["CAPABILITIES", "POINTS", "Guardrails", "ResponseHooks"]
