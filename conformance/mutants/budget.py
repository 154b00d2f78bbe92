"""Mutants of the token budget (§7): the trigger, the hard window and the estimator."""

from collections.abc import Callable
from typing import Any

from ctxspec.conformance.mutants import Mutant, Patch
from ctxspec.reference import budget, tokens
from ctxspec.reference.errors import ErrorCode
from ctxspec.reference.runtime import compaction_service, node_driver, request_fit
from ctxspec.reference.runtime import trace as tr
from ctxspec.reference.runtime.node_driver import NodeDriver


def _rounded_threshold(original: Callable[..., int]) -> Callable[..., int]:
    def threshold(input_budget: int, ratio_num: int, ratio_den: int) -> int:
        return round(input_budget * (ratio_num / ratio_den))
    return threshold


def _strict_trigger(original: Callable[..., bool]) -> Callable[..., bool]:
    def should_compact(estimated_input: int, threshold: int) -> bool:
        return estimated_input > threshold
    return should_compact


def _no_margin(original: Callable[..., bool]) -> Callable[..., bool]:
    def fits(estimated_input: int, output_reserve: int, safety_margin: int, window: int) -> bool:
        return estimated_input + output_reserve <= window
    return fits


def _characters(original: Callable[[str], int]) -> Callable[[str], int]:
    return len


def _no_room_as_failure(original: Callable[..., None]) -> Callable[..., None]:
    def end(self: Any, run: Any, status: Any, error: ErrorCode | None = None,
            message: str | None = None, figures: dict[str, int] | None = None) -> None:
        if error is ErrorCode.BUDGET_CONFIGURATION_INVALID:
            error = ErrorCode.COMPACTION_FAILED  # reported as if a summary call had failed,
            events = self.s.trace.events  # and the decision that was never sent is not traced
            last = max(i for i, e in enumerate(events) if isinstance(e, tr.BudgetDecision))
            del events[last]
        original(self, run, status, error, message, figures)
    return end


class _NeverRaised:
    """Stands for ContextLengthExceeded in the runtime's checks, which then never match."""


MUTANTS = (
    Mutant("FLOAT-THRESHOLD",
           "the trigger is round(B × 0.8) in floating point instead of floor(r × B) exactly "
           "(§7: integer tokens)",
           (Patch(budget, "trigger_threshold", _rounded_threshold),)),
    Mutant("STRICT-TRIGGER", "compaction triggers at I > threshold instead of I ≥ threshold (§7)",
           (Patch(budget, "should_compact", _strict_trigger),)),
    Mutant("MARGIN-LEFT-OUT",
           "the hard window checks I + O ≤ W and forgets the safety margin (§7: I + O + S ≤ W)",
           (Patch(budget, "fits_hard_window", _no_margin),
            Patch(request_fit, "fits_hard_window", _no_margin))),
    Mutant("CJK-UNDERCOUNT",
           "the conservative estimator counts characters, not UTF-8 bytes, so CJK text is "
           "undercounted (§7)",
           (Patch(tokens, "utf8_length", _characters),)),
    Mutant("NO-ROOM-AS-COMPACTION-FAILED",
           "compaction prompts that leave no room for material end the Run COMPACTION_FAILED, "
           "with no §8 decision traced, though no summary call was made (§8: a budget "
           "configuration error)",
           (Patch(NodeDriver, "end", _no_room_as_failure),)),
    Mutant("CONTEXT-LENGTH-RETRIED",
           "a provider's context_length_exceeded is retried like a transient failure (§7: end "
           "the role, never resend the same over-window request)",
           (Patch(node_driver, "ContextLengthExceeded", lambda _: _NeverRaised),
            Patch(compaction_service, "ContextLengthExceeded", lambda _: _NeverRaised))),
)

