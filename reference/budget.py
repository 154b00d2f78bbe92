"""Token budgets (§7 "预算公式与默认计算") and the summary target size (§8 "摘要目标").

Read beside the design: the functions below follow the §7 symbol table (W, O, S, B, r, I, the
trigger and the hard window), then the §8 target formulas in the order the design lists them
(q, A, H, P, C, D, T_auto, T), then the §8 boundary rules in their order.

Pure and exact: integers only. Ratios (0.80, 0.60, 0.25) are numerator/denominator pairs, so
``floor(r × B)`` is ``B * num // den`` and never suffers float rounding (floor(0.29 × 100) is 29
here, 28 with floats). The small formula functions carry PEP 316 contracts that CI proves with
CrossHair (``crosshair check --report_all``); keep them integer-only so they confirm in seconds.
"""

import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from typing import Final, Literal

from ctxspec.reference.errors import ErrorCode

K: Final = 1024
"""§7: the UI shows budgets in K; internally everything is integer tokens, 1K = 1024."""

# §7 defaults.
DEFAULT_OUTPUT_RESERVE_CAP: Final = 4096
"""O falls back to this when the model's maximum output is not known."""
SAFETY_MARGIN_FLOOR: Final = 256
"""S = max(256, ceil(W × 1%))."""
SAFETY_MARGIN_PERCENT: Final = 1
DEFAULT_TRIGGER_RATIO_TEXT: Final = "0.80"

# §8 "摘要目标" constants.
SOFT_TARGET_NUM: Final = 60
"""q = 0.60, the soft target (never a hard gate): numerator over 100."""
SOFT_TARGET_DEN: Final = 100
DEFAULT_SUMMARY_CAP: Final = 8192
"""A: the default upper bound of a summary."""
SUMMARY_SHARE_NUM: Final = 25
"""C includes floor(B × 0.25): numerator over 100."""
SUMMARY_SHARE_DEN: Final = 100


# --- §7 formulas ---------------------------------------------------------------------------


def default_output_reserve(window: int, known_max_output: int | None) -> int:
    """O when the Agent sets none: min(known max output or 4096, floor(W/4)).  CTX-7.5

    pre: window > 0
    pre: known_max_output is None or known_max_output > 0
    post: __return__ <= window // 4
    post: __return__ <= (4096 if known_max_output is None else known_max_output)
    post: __return__ in (window // 4, 4096 if known_max_output is None else known_max_output)
    """
    model_output = DEFAULT_OUTPUT_RESERVE_CAP if known_max_output is None else known_max_output
    return min(model_output, window // 4)


def default_safety_margin(window: int) -> int:
    """S when the Agent sets none: max(256, ceil(W × 1%)).  CTX-7.6

    pre: window > 0
    post: __return__ >= 256
    post: __return__ * 100 >= window
    post: __return__ == 256 or (__return__ - 1) * 100 < window
    """
    one_percent_ceiling = -(-window * SAFETY_MARGIN_PERCENT // 100)
    return max(SAFETY_MARGIN_FLOOR, one_percent_ceiling)


def input_budget(window: int, output_reserve: int, safety_margin: int) -> int:
    """B = W − O − S (the caller rejects B <= 0 as a configuration error).  CTX-7.7

    pre: window > 0 and output_reserve > 0 and safety_margin > 0
    post: __return__ + output_reserve + safety_margin == window
    post: __return__ < window
    """
    return window - output_reserve - safety_margin


def trigger_threshold(budget: int, ratio_num: int, ratio_den: int) -> int:
    """floor(r × B), with r = ratio_num / ratio_den exactly.  CTX-7.12, CTX-7.18

    pre: budget > 0
    pre: 0 < ratio_num < ratio_den
    post: __return__ * ratio_den <= budget * ratio_num < (__return__ + 1) * ratio_den
    post: 0 <= __return__ < budget
    """
    return budget * ratio_num // ratio_den


def should_compact(estimated_input: int, threshold: int) -> bool:
    """The trigger: I >= floor(r × B). At I = threshold − 1 nothing happens.  CTX-7.12

    post: __return__ == (estimated_input >= threshold)
    """
    return estimated_input >= threshold


def fits_hard_window(estimated_input: int, output_reserve: int, safety_margin: int,
                     window: int) -> bool:
    """The hard window: I + O + S <= W; equivalently I <= B.  CTX-7.13, CTX-7.17

    post: __return__ == (estimated_input <= input_budget(window, output_reserve, safety_margin))
    """
    return estimated_input + output_reserve + safety_margin <= window


# --- §8 "摘要目标" formulas, in the design's order --------------------------------------------


def summary_space(budget: int, fixed: int) -> int:
    """H = B − F: the room a summary actually has beside the fixed input.  CTX-8.34

    post: __return__ + fixed == budget
    """
    return budget - fixed


def summary_output_cap(output_reserve: int, provider_output_limit: int | None,
                       space: int) -> int:
    """P = min(O, provider_output_limit_if_known, H); an unknown limit takes no part.
    CTX-8.35, CTX-8.42

    pre: output_reserve > 0
    pre: provider_output_limit is None or provider_output_limit > 0
    post: __return__ <= output_reserve and __return__ <= space
    post: provider_output_limit is None or __return__ <= provider_output_limit
    post: space <= 0 or __return__ > 0
    """
    cap = min(output_reserve, space)
    if provider_output_limit is not None:
        cap = min(cap, provider_output_limit)
    return cap


def default_summary_cap(budget: int, output_cap: int) -> int:
    """C = min(A, floor(B × 0.25), P), A = 8192.  CTX-8.33, CTX-8.36

    pre: budget > 0
    post: __return__ <= 8192 and __return__ <= output_cap
    post: __return__ * 4 <= budget
    """
    return min(DEFAULT_SUMMARY_CAP, budget * SUMMARY_SHARE_NUM // SUMMARY_SHARE_DEN, output_cap)


def soft_target_space(budget: int, fixed: int) -> int:
    """D = floor(B × q) − F, q = 0.60: room below the 60% soft target (may be negative).
    CTX-8.32, CTX-8.37

    pre: budget > 0
    post: (__return__ + fixed) * 100 <= budget * 60 < (__return__ + fixed + 1) * 100
    """
    return budget * SOFT_TARGET_NUM // SOFT_TARGET_DEN - fixed


def auto_summary_target(default_cap: int, soft_space: int) -> int:
    """T_auto = min(C, D) if D > 0 else C.  CTX-8.38

    post: __return__ <= default_cap
    post: default_cap <= 0 or __return__ > 0
    """
    return min(default_cap, soft_space) if soft_space > 0 else default_cap


def summary_target(auto_target: int, output_cap: int, configured_target: int | None) -> int:
    """T = min(explicit summary target, P) if one is configured, else T_auto.  CTX-8.39

    pre: configured_target is None or configured_target > 0
    post: configured_target is None or __return__ <= output_cap
    post: configured_target is None or __return__ <= configured_target
    post: configured_target is not None or __return__ == auto_target
    """
    if configured_target is not None:
        return min(configured_target, output_cap)
    return auto_target


def summary_target_for(budget: int, fixed: int, output_reserve: int,
                       provider_output_limit: int | None, configured_target: int | None) -> int:
    """T from B, F and the configuration; the §8 claim "H > 0 and a valid configuration never
    give a negative T, even when F is at or above 60%" is its contract.  CTX-8.43

    pre: budget >= 4 and output_reserve > 0
    pre: provider_output_limit is None or provider_output_limit > 0
    pre: configured_target is None or configured_target > 0
    pre: budget - fixed > 0
    post: 0 < __return__ <= budget - fixed
    post: __return__ <= output_reserve
    """
    space = summary_space(budget, fixed)
    output_cap = summary_output_cap(output_reserve, provider_output_limit, space)
    auto = auto_summary_target(default_summary_cap(budget, output_cap),
                               soft_target_space(budget, fixed))
    return summary_target(auto, output_cap, configured_target)


# --- Configuration ---------------------------------------------------------------------------

ValueSource = Literal["explicit", "default"]


@dataclass(frozen=True)
class BudgetConfig:
    """The §7/§8 configuration of one Agent release, frozen per Run (None = use the default).

    ``known_max_output`` is the verified model metadata O defaults from; ``summary_target`` is
    ``context.summary_target_tokens``; ``trigger_ratio`` is decimal text such as "0.80".
    """

    window: int | None
    output_reserve: int | None = None
    known_max_output: int | None = None
    safety_margin: int | None = None
    trigger_ratio: str = DEFAULT_TRIGGER_RATIO_TEXT
    summary_target: int | None = None
    provider_output_limit: int | None = None


@dataclass(frozen=True)
class ResolvedBudget:
    """W, O, S, B and the trigger of a valid configuration, with where O and S came from."""

    window: int
    output_reserve: int
    safety_margin: int
    input_budget: int
    trigger_ratio_text: str
    trigger_ratio: Fraction
    trigger_threshold: int
    summary_target: int | None
    provider_output_limit: int | None
    output_reserve_source: ValueSource
    safety_margin_source: ValueSource


@dataclass(frozen=True)
class ConfigurationError:
    """A configuration the design forbids: the code, the offending field and the rule."""

    code: ErrorCode
    field: str
    rule: str

    def message(self) -> str:
        return f"{self.field}: {self.rule}"


_DECIMAL = re.compile(r"[0-9]{0,32}(?:\.[0-9]{1,32})?")


def parse_ratio(text: str) -> Fraction | None:
    """The exact value of decimal text such as "0.80"; None unless it is plain decimal text:
    ASCII digits and one point only (no sign, exponent, ``_`` separator or digits of other
    scripts, which ``Decimal`` would take), at most 32 digits each side."""
    stripped = text.strip(" \t")
    if not stripped or stripped == "." or not _DECIMAL.fullmatch(stripped):
        return None
    try:
        value = Decimal(stripped)
    except InvalidOperation:
        return None
    if not value.is_finite():
        return None
    return Fraction(value)


def _positive(field: str, value: int | None) -> ConfigurationError | None:
    if value is not None and value <= 0:
        return ConfigurationError(ErrorCode.BUDGET_CONFIGURATION_INVALID, field,
                                  f"must be a positive integer of tokens, got {value}")
    return None


def resolve_budget(config: BudgetConfig) -> ResolvedBudget | ConfigurationError:
    """Resolve W, O, S, B, r and the trigger threshold, or say which rule is broken.

    CTX-7.2 (W verified or explicit, never guessed), CTX-7.4 and CTX-7.5 (O), CTX-7.6 (S),
    CTX-7.7 and CTX-7.8 (B > 0), CTX-7.9 and CTX-7.10 (0 < r < 1), CTX-7.12 (threshold),
    CTX-8.40 (summary_target positive).
    """
    if config.window is None:
        return ConfigurationError(ErrorCode.CONTEXT_WINDOW_UNKNOWN, "window",
                                  "the context window must come from verified model metadata "
                                  "or an explicit value; it is never guessed")
    for field in ("window", "output_reserve", "known_max_output", "safety_margin",
                  "summary_target", "provider_output_limit"):
        error = _positive(field, getattr(config, field))
        if error is not None:
            return error
    window = config.window

    ratio = parse_ratio(config.trigger_ratio)
    if ratio is None or not 0 < ratio < 1:
        return ConfigurationError(ErrorCode.BUDGET_CONFIGURATION_INVALID, "trigger_ratio",
                                  "must be decimal text with 0 < r < 1, "
                                  f"got {config.trigger_ratio[:40]!r}"
                                  + ("…" if len(config.trigger_ratio) > 40 else ""))

    output_source: ValueSource = "explicit"
    margin_source: ValueSource = "explicit"
    if config.output_reserve is not None:
        output_reserve = config.output_reserve
    else:
        output_reserve, output_source = default_output_reserve(window, config.known_max_output), \
            "default"
        if output_reserve <= 0:
            return ConfigurationError(ErrorCode.BUDGET_CONFIGURATION_INVALID, "window",
                                      f"floor(W/4) must be positive for the default output "
                                      f"reserve, got W={window}")
    if config.safety_margin is not None:
        safety_margin = config.safety_margin
    else:
        safety_margin, margin_source = default_safety_margin(window), "default"

    budget = input_budget(window, output_reserve, safety_margin)
    if budget <= 0:
        return ConfigurationError(ErrorCode.BUDGET_CONFIGURATION_INVALID, "input_budget",
                                  f"B = W - O - S must be > 0, got {window} - {output_reserve} "
                                  f"- {safety_margin} = {budget}")
    return ResolvedBudget(
        window=window,
        output_reserve=output_reserve,
        safety_margin=safety_margin,
        input_budget=budget,
        trigger_ratio_text=config.trigger_ratio.strip(" \t"),
        trigger_ratio=ratio,
        trigger_threshold=trigger_threshold(budget, ratio.numerator, ratio.denominator),
        summary_target=config.summary_target,
        provider_output_limit=config.provider_output_limit,
        output_reserve_source=output_source,
        safety_margin_source=margin_source,
    )


# --- §8 boundary rules -----------------------------------------------------------------------

Decision = Literal["below_trigger", "compact", "no_compressible_material", "error"]


@dataclass(frozen=True)
class CompactionEvaluation:
    """The §8 verdict for a request of F fixed and M compressible tokens (I = F + M).

    The target quantities are present only when the rules reached them (decision "compact").
    """

    input_tokens: int
    decision: Decision
    error_code: ErrorCode | None = None
    summary_space: int | None = None
    summary_output_cap: int | None = None
    summary_default_cap: int | None = None
    soft_target_space: int | None = None
    summary_target: int | None = None


def evaluate_compaction(budget: ResolvedBudget, fixed: int,
                        material: int) -> CompactionEvaluation:
    """Apply §8's boundary rules, in the design's order, to one prepared request.

    1. Below the trigger nothing happens (the trigger is not a rejection line).  CTX-7.12,
       CTX-8.28 (with the configured r), CTX-8.46
    2. No compressible material: never call the summary model; run if I <= B, else
       CONTEXT_PROTECTED_INPUT_TOO_LARGE.  CTX-8.47, CTX-8.48, CTX-8.49
    3. Material but H <= 0: CONTEXT_PROTECTED_INPUT_TOO_LARGE.  CTX-8.50
    4. Otherwise compact with T; a T that is not positive is a configuration error.  CTX-8.51
    """
    if fixed < 0 or material < 0:
        raise ValueError("token counts are never negative")
    total = fixed + material
    if not should_compact(total, budget.trigger_threshold):
        return CompactionEvaluation(total, "below_trigger")
    if material == 0:
        if fits_hard_window(total, budget.output_reserve, budget.safety_margin, budget.window):
            return CompactionEvaluation(total, "no_compressible_material")
        return CompactionEvaluation(total, "error", ErrorCode.CONTEXT_PROTECTED_INPUT_TOO_LARGE)
    space = summary_space(budget.input_budget, fixed)
    if space <= 0:
        return CompactionEvaluation(total, "error", ErrorCode.CONTEXT_PROTECTED_INPUT_TOO_LARGE,
                                    summary_space=space)
    output_cap = summary_output_cap(budget.output_reserve, budget.provider_output_limit, space)
    default_cap = default_summary_cap(budget.input_budget, output_cap)
    soft_space = soft_target_space(budget.input_budget, fixed)
    target = summary_target(auto_summary_target(default_cap, soft_space), output_cap,
                            budget.summary_target)
    decision: Decision = "compact" if target > 0 else "error"
    return CompactionEvaluation(
        total, decision,
        None if target > 0 else ErrorCode.BUDGET_CONFIGURATION_INVALID,
        summary_space=space, summary_output_cap=output_cap, summary_default_cap=default_cap,
        soft_target_space=soft_space, summary_target=target,
    )


@dataclass(frozen=True)
class SummaryRecheck:
    """§8's re-check once a summary is back: the assembled request must satisfy I <= B."""

    assembled_tokens: int
    verdict: Literal["continue"] | ErrorCode


def recheck_after_summary(budget: ResolvedBudget, fixed: int, summary_tokens: int,
                          added_after_compaction: int = 0) -> SummaryRecheck:
    """Reassemble F + summary + what arrived meanwhile and apply the hard window once.

    Still too large: CONTEXT_WINDOW_EXCEEDED, never a second compaction, never a dropped input.
    Above the 80% trigger but within B: continue, no further episode for this operation.
    CTX-8.53, CTX-8.55, CTX-8.57, CTX-8.61
    """
    if fixed < 0 or summary_tokens < 0 or added_after_compaction < 0:
        raise ValueError("token counts are never negative")
    assembled = fixed + summary_tokens + added_after_compaction
    if fits_hard_window(assembled, budget.output_reserve, budget.safety_margin, budget.window):
        return SummaryRecheck(assembled, "continue")
    return SummaryRecheck(assembled, ErrorCode.CONTEXT_WINDOW_EXCEEDED)
