"""What a Python adapter traces of the calls it sees its framework make, the same for every one
of them: the Agent's budget resolved (§7: W, O, S, B and the trigger), a model request as sent
with those figures and its §8 decision, the scripted model port asked for it, the provider's
usage against the estimate (§7), and a tool executed with its effective arguments (§6). Each
adapter reads its framework's request into the view (its ``view`` module, ``sent_view.py``)
and decides its attempt and purpose key; these are what is left once it has."""

import hashlib
import json
import uuid
from collections.abc import Sequence
from typing import Any

from ctxspec.conformance.scenario import AgentDoc
from ctxspec.reference.budget import (
    ConfigurationError,
    ResolvedBudget,
    evaluate_compaction,
    resolve_budget,
)
from ctxspec.reference.ports import ModelCall, ToolOutcome
from ctxspec.reference.tokens import PromptMessage

Message = dict[str, Any]


def budget_of(doc: AgentDoc) -> ResolvedBudget:
    """The Agent's budget (§7); a configuration the design refuses is a scenario error."""
    budget = resolve_budget(doc.budget())
    if isinstance(budget, ConfigurationError):
        raise ValueError(f"{budget.code.value}: {budget.message()}")
    return budget


def whole_input_decision(budget: ResolvedBudget, view: Sequence[Message], tokens: int,
                         current: set[str], role: str) -> str:
    """§8's decision for an adapter that does not split F from the material: with any
    material (a message neither the system prompt nor the current Run's input; for an
    Executor, whose fixed input is its prompt and its hand-over, any but its user message)
    the whole input may be compacted, else all of it is fixed; ``error`` when refused."""
    material = any(m["kind"] != "system_prompt" and m.get("input_id") not in current
                   and (role == "root" or m["kind"] != "user_ref") for m in view)
    verdict = evaluate_compaction(budget, 0 if material else tokens, tokens if material else 0)
    return verdict.decision if verdict.error_code is None else "error"


def fingerprint(purpose: str, role: str, view: Sequence[Message]) -> str:
    """What tells a request from another: who asks, for what, with which messages (an
    adapter whose framework does not number its attempts knows a retry by it)."""
    return json.dumps([purpose, role, view], sort_keys=True)


def request_event(budget: ResolvedBudget, purpose: str, role: str, key: str, attempt: int,
                  view: list[Message], tokens: int, max_output: int, decision: str | None,
                  run_no: int | None) -> Message:
    """The ``model_request`` event of a request as sent: its view, I, its output cap, the
    budget's figures, its §8 decision and the hash of its fingerprint."""
    return {
        "kind": "model_request", "purpose": purpose, "role": role, "purpose_key": key,
        "attempt": attempt, "view": {"messages": view}, "estimated_input_tokens": tokens,
        "max_output_tokens": max_output, "window": budget.window,
        "output_reserve": budget.output_reserve, "safety_margin": budget.safety_margin,
        "input_budget": budget.input_budget, "trigger_threshold": budget.trigger_threshold,
        "compaction": decision, "snapshot_id": None, "run_no": run_no,
        "view_hash": hashlib.sha256(fingerprint(purpose, role, view).encode()).hexdigest()}


def model_call(asked: dict[str, int], purpose: str, role: str, key: str, attempt: int,
               view: Sequence[Message], max_output: int) -> ModelCall:
    """The scripted port's call for a request; ``asked`` counts each purpose and role's
    requests, a retry keeping its request's ordinal."""
    counted = f"{purpose}:{role}"
    asked[counted] = ordinal = asked.get(counted, 0) + (attempt == 1)
    return ModelCall(
        "compaction" if purpose == "compaction" else "business",
        uuid.uuid5(uuid.NAMESPACE_URL, key), key, attempt,
        tuple(PromptMessage("user" if m["role"] == "user" else "system", m["text"])
              for m in view), (), max_output, ordinal, role)


def usage_event(purpose: str, key: str, attempt: int, estimated: int, input_tokens: int,
                output_tokens: int | None) -> Message:
    """The provider's usage of a request beside the adapter's estimate of it (§7)."""
    return {"kind": "model_usage", "purpose": purpose, "purpose_key": key, "attempt": attempt,
            "estimated_input_tokens": estimated, "input_tokens": input_tokens,
            "output_tokens": output_tokens, "input_deviation": input_tokens - estimated}


def tool_ordinal(events: Sequence[Message]) -> int:
    """The ordinal of the next tool execution (the scripted tool port's)."""
    return sum(1 for e in events if e["kind"] == "tool_executed") + 1


def tool_event(call_id: str | None, name: str, arguments: dict[str, Any], proposed: dict[str, Any],
               outcome: ToolOutcome) -> Message:
    """The ``tool_executed`` event: the arguments the tool ran with and those proposed (§6)."""
    return {"kind": "tool_executed", "call_id": call_id, "name": name,
            "effective_arguments": arguments, "proposed_arguments": proposed,
            "outcome": "error" if outcome.error else "ok", "latency": outcome.latency}
