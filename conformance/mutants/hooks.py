"""Mutants of hook patches and decisions (§3): conflicts, and deny with an invalid patch."""

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from ctxspec.conformance.mutants import Mutant, Patch
from ctxspec.reference import hooks
from ctxspec.reference.contracts import HookDecision


def _payload_wins(original: Callable[..., Any]) -> Callable[..., Any]:
    def normalise(proposal: hooks.HookProposal, call: Any, registry: Any) -> Any:
        merged = original(proposal, call, registry)
        if isinstance(merged, tuple):  # a conflict: keep the payload side, drop the context's
            return original(replace(proposal, context_ops=()), call, registry)
        return merged
    return normalise


def _invalid_deny_allows(original: Callable[..., Any]) -> Callable[..., Any]:
    def evaluate(*args: Any, **kwargs: Any) -> Any:
        outcome = original(*args, **kwargs)
        invocation = outcome.invocation
        if invocation.decision is HookDecision.DENY and not invocation.patch_valid:
            return replace(outcome, control="continue")
        return outcome
    return evaluate


MUTANTS = (
    Mutant("PAYLOAD-WINS",
           "when payload_patch and context_patch disagree on a field, the payload's value wins "
           "(§3: the whole item is invalid, HOOK_PATCH_CONFLICT, no side preferred)",
           (Patch(hooks, "normalise", _payload_wins),)),
    Mutant("INVALID-DENY-ALLOWS",
           "a deny whose patch is invalid is treated as no decision and the call runs (§3: a "
           "legitimate deny still blocks)",
           (Patch(hooks, "evaluate", _invalid_deny_allows),)),
)
