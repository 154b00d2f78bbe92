"""§7 budget and §8 target size: the design's worked examples and its boundary rules.

Every expected number is derived by hand from the design's text in the comment beside it, never
taken from the implementation's output.
"""

import math
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxspec.reference.budget import (
    BudgetConfig,
    CompactionEvaluation,
    ConfigurationError,
    ResolvedBudget,
    SummaryRecheck,
    evaluate_compaction,
    parse_ratio,
    recheck_after_summary,
    resolve_budget,
    summary_target_for,
)
from ctxspec.reference.errors import ErrorCode


def resolved(**config: Any) -> ResolvedBudget:
    result = resolve_budget(BudgetConfig(**config))
    assert isinstance(result, ResolvedBudget), result
    return result


def rejected(**config: Any) -> ConfigurationError:
    result = resolve_budget(BudgetConfig(**config))
    assert isinstance(result, ConfigurationError), result
    return result


# The §8 table: "B=100000、O=8192, provider output limit not below 8192". W and S are ours:
# 110000 − 8192 − 1808 = 100000.
TABLE = {"window": 110_000, "output_reserve": 8192, "safety_margin": 1808}


@pytest.mark.covers("CTX-7.7", "CTX-7.12", "CTX-7.16", "CTX-7.18")
def test_section7_example_explicit_o_and_s() -> None:
    # §7: W=128K=131072, O=8K=8192, S=1280 → B = 131072 − 8192 − 1280 = 121600;
    # floor(0.80 × 121600) = 97280 = 95 × 1024, "about 95K".
    budget = resolved(window=128 * 1024, output_reserve=8 * 1024, safety_margin=1280)
    assert budget.input_budget == 121_600
    assert budget.trigger_threshold == 97_280 == 95 * 1024


@pytest.mark.covers("CTX-7.5", "CTX-7.6", "CTX-7.9")
def test_section7_defaults() -> None:
    # S default: max(256, ceil(131072 / 100)) = max(256, ceil(1310.72)) = 1311.
    # O default with unknown max output: min(4096, floor(131072 / 4) = 32768) = 4096.
    budget = resolved(window=131_072)
    assert budget.safety_margin == 1311
    assert budget.output_reserve == 4096
    assert (budget.output_reserve_source, budget.safety_margin_source) == ("default", "default")
    # B = 131072 − 4096 − 1311 = 125665; floor(0.8 × 125665) = floor(100532) = 100532.
    assert budget.input_budget == 125_665
    assert budget.trigger_threshold == 100_532


@pytest.mark.covers("CTX-7.4", "CTX-7.5")
def test_output_reserve_default_takes_the_smaller_of_model_output_and_quarter_window() -> None:
    # Known max output 16384 < floor(131072/4) = 32768 → 16384.
    assert resolved(window=131_072, known_max_output=16_384).output_reserve == 16_384
    # Known max output 65536 > floor(8000/4) = 2000 → 2000.
    assert resolved(window=8000, known_max_output=65_536).output_reserve == 2000
    # An explicit O wins over both.
    assert resolved(window=8000, known_max_output=65_536, output_reserve=100).output_reserve == 100


@pytest.mark.covers("CTX-7.6")
@pytest.mark.parametrize(("window", "margin"), [
    (1000, 256),        # ceil(10) = 10 < 256
    (25_600, 256),      # ceil(256) = 256
    (25_601, 257),      # ceil(256.01) = 257
    (100_000, 1000),    # exactly 1%
    (100_001, 1001),    # ceil(1000.01)
])
def test_safety_margin_default(window: int, margin: int) -> None:
    assert resolved(window=window, output_reserve=1).safety_margin == margin


@pytest.mark.covers("CTX-7.12", "CTX-7.18", "CTX-8.31")
def test_trigger_threshold_is_exact_not_float() -> None:
    # floor(0.29 × 100) is 29; in binary floating point 0.29 * 100 = 28.999999999999996.
    assert int(0.29 * 100) == 28  # the float pitfall this guards against
    budget = resolved(window=100 + 1 + 1, output_reserve=1, safety_margin=1, trigger_ratio="0.29")
    assert budget.input_budget == 100
    assert budget.trigger_threshold == 29
    assert budget.trigger_ratio == Fraction(29, 100)


@pytest.mark.covers("CTX-7.12", "CTX-7.14", "CTX-8.28", "CTX-8.46")
def test_80_percent_boundary_both_sides() -> None:
    # §12: I = threshold − 1 does not compact, I = threshold does. threshold = 80000 here.
    budget = resolved(**TABLE)
    assert budget.trigger_threshold == 80_000
    assert evaluate_compaction(budget, 50_000, 29_999).decision == "below_trigger"
    assert evaluate_compaction(budget, 50_000, 30_000).decision == "compact"


@pytest.mark.covers("CTX-8.28")
def test_section8_trigger_uses_the_configured_ratio() -> None:
    # §8 writes the trigger as I >= floor(0.80 × B), the §7 rule with the default r; a configured
    # r = 0.5 moves it to floor(0.5 × 100000) = 50000 (docs/open-questions.md, Q13).
    budget = resolved(**TABLE, trigger_ratio="0.5")
    assert budget.trigger_threshold == 50_000
    assert evaluate_compaction(budget, 40_000, 9_999).decision == "below_trigger"
    assert evaluate_compaction(budget, 40_000, 10_000).decision == "compact"


@pytest.mark.covers("CTX-8.41")
def test_soft_target_ratio_is_not_configurable() -> None:
    # q = 0.60 is fixed by the design: no configuration field and no CLI option carries it.
    assert not [name for name in BudgetConfig.__dataclass_fields__
                if "soft" in name or name in {"q", "target_ratio"}]
    from ctxspec.cli import budget as budget_command

    assert not [p.name for p in budget_command.params
                if p.name and ("soft" in p.name or p.name in {"q", "target_ratio"})]


@pytest.mark.covers("CTX-7.13", "CTX-7.17")
def test_hard_window_counts_output_reserve_and_margin() -> None:
    budget = resolved(**TABLE)
    # I = B = 100000 fits (100000 + 8192 + 1808 = 110000 = W); one more does not.
    assert recheck_after_summary(budget, 90_000, 10_000).verdict == "continue"
    assert recheck_after_summary(budget, 90_000, 10_001).verdict == \
        ErrorCode.CONTEXT_WINDOW_EXCEEDED


# --- the six rows of the §8 table -----------------------------------------------------------


@pytest.mark.covers("CTX-8.34", "CTX-8.35", "CTX-8.36", "CTX-8.37", "CTX-8.38", "CTX-8.56")
def test_table_row1_f65000_material20000() -> None:
    # I = 85000 ≥ 80000 → compact. H = 100000 − 65000 = 35000; P = min(8192, 35000) = 8192;
    # C = min(8192, 25000, 8192) = 8192; D = 60000 − 65000 = −5000 ≤ 0 → T = C = 8192.
    budget = resolved(**TABLE)
    evaluation = evaluate_compaction(budget, 65_000, 20_000)
    assert evaluation == CompactionEvaluation(
        input_tokens=85_000, decision="compact", summary_space=35_000, summary_output_cap=8192,
        summary_default_cap=8192, soft_target_space=-5000, summary_target=8192)
    # A summary of 8192: 65000 + 8192 = 73192 ≤ 100000 → continue.
    recheck = recheck_after_summary(budget, 65_000, 8192)
    assert (recheck.assembled_tokens, recheck.verdict) == (73_192, "continue")


@pytest.mark.covers("CTX-8.30", "CTX-8.52", "CTX-8.55", "CTX-8.57")
def test_table_row2_still_above_80_percent_after_summary_continues() -> None:
    # F=79000: H = 21000, P = 8192, C = 8192, D = 60000 − 79000 < 0 → T = 8192.
    budget = resolved(**TABLE)
    evaluation = evaluate_compaction(budget, 79_000, 6000)
    assert (evaluation.decision, evaluation.summary_target) == ("compact", 8192)
    # 79000 + 8192 = 87192 ≥ 80000 but ≤ 100000: the business request runs, no second episode.
    recheck = recheck_after_summary(budget, 79_000, 8192)
    assert (recheck.assembled_tokens, recheck.verdict) == (87_192, "continue")


@pytest.mark.covers("CTX-8.46", "CTX-8.58")
def test_table_row3_source_request_over_window_still_compacts() -> None:
    # F=96000, material 6000, I = 102000 > B: H = 4000; P = min(8192, 4000) = 4000;
    # C = min(8192, 25000, 4000) = 4000; D < 0 → T = 4000.
    evaluation = evaluate_compaction(resolved(**TABLE), 96_000, 6000)
    assert (evaluation.decision, evaluation.summary_space, evaluation.summary_target) == \
        ("compact", 4000, 4000)


@pytest.mark.covers("CTX-8.50", "CTX-8.59")
def test_table_row4_no_room_for_a_summary() -> None:
    # F=100000 with material: H = 0 → CONTEXT_PROTECTED_INPUT_TOO_LARGE.
    evaluation = evaluate_compaction(resolved(**TABLE), 100_000, 1)
    assert (evaluation.decision, evaluation.error_code, evaluation.summary_space) == \
        ("error", ErrorCode.CONTEXT_PROTECTED_INPUT_TOO_LARGE, 0)


@pytest.mark.covers("CTX-8.30", "CTX-8.47", "CTX-8.48", "CTX-8.60")
def test_table_row5_no_compressible_material_runs_within_budget() -> None:
    # No material, I = 85000 ≥ trigger but ≤ B: record no_compressible_material and run.
    evaluation = evaluate_compaction(resolved(**TABLE), 85_000, 0)
    assert (evaluation.decision, evaluation.error_code) == ("no_compressible_material", None)
    assert evaluation.summary_target is None  # the summary model is never called


@pytest.mark.covers("CTX-8.53", "CTX-8.61")
def test_table_row6_supplement_after_summary_overflows() -> None:
    # After a successful summary, a supplement brings the request to 100001 > B.
    budget = resolved(**TABLE)
    recheck = recheck_after_summary(budget, 70_000, 8000, added_after_compaction=22_001)
    assert (recheck.assembled_tokens, recheck.verdict) == \
        (100_001, ErrorCode.CONTEXT_WINDOW_EXCEEDED)


@pytest.mark.covers("CTX-8.49")
def test_no_material_over_budget_is_protected_input_too_large() -> None:
    evaluation = evaluate_compaction(resolved(**TABLE), 100_001, 0)
    assert evaluation.error_code is ErrorCode.CONTEXT_PROTECTED_INPUT_TOO_LARGE


@pytest.mark.covers("CTX-8.29", "CTX-8.35", "CTX-8.38", "CTX-8.39", "CTX-8.42")
def test_soft_target_below_60_percent_and_explicit_target() -> None:
    budget = resolved(**TABLE)
    # F=55000: D = 60000 − 55000 = 5000 > 0 → T_auto = min(C=8192, 5000) = 5000.
    assert evaluate_compaction(budget, 55_000, 30_000).summary_target == 5000
    # Explicit target 20000 is capped by P = min(8192, H=45000) = 8192.
    explicit = resolved(**TABLE, summary_target=20_000)
    assert evaluate_compaction(explicit, 55_000, 30_000).summary_target == 8192
    # Explicit target 3000 < P → 3000, even though T_auto would be 5000.
    small = resolved(**TABLE, summary_target=3000)
    assert evaluate_compaction(small, 55_000, 30_000).summary_target == 3000
    # A known provider output limit of 2048 takes part in P.
    limited = resolved(**TABLE, provider_output_limit=2048)
    assert evaluate_compaction(limited, 65_000, 20_000).summary_output_cap == 2048


@pytest.mark.covers("CTX-8.51")
def test_t_not_positive_is_a_configuration_error() -> None:
    # B = 3: floor(3 × 0.25) = 0 → C = 0 → T = 0 without an explicit target.
    budget = resolved(window=5, output_reserve=1, safety_margin=1, trigger_ratio="0.5")
    assert budget.input_budget == 3
    evaluation = evaluate_compaction(budget, 1, 2)
    assert (evaluation.decision, evaluation.error_code, evaluation.summary_target) == \
        ("error", ErrorCode.BUDGET_CONFIGURATION_INVALID, 0)


# --- configuration errors --------------------------------------------------------------------


@pytest.mark.covers("CTX-7.2", "CTX-7.8", "CTX-7.10", "CTX-7.22", "CTX-8.40")
@pytest.mark.parametrize(("config", "code", "field"), [
    ({"window": None}, ErrorCode.CONTEXT_WINDOW_UNKNOWN, "window"),
    ({"window": 0}, ErrorCode.BUDGET_CONFIGURATION_INVALID, "window"),
    ({"window": 1000, "output_reserve": 0}, ErrorCode.BUDGET_CONFIGURATION_INVALID,
     "output_reserve"),
    ({"window": 1000, "output_reserve": 500, "safety_margin": 500},
     ErrorCode.BUDGET_CONFIGURATION_INVALID, "input_budget"),
    ({"window": 1000, "trigger_ratio": "1"}, ErrorCode.BUDGET_CONFIGURATION_INVALID,
     "trigger_ratio"),
    ({"window": 1000, "trigger_ratio": "0"}, ErrorCode.BUDGET_CONFIGURATION_INVALID,
     "trigger_ratio"),
    ({"window": 1000, "trigger_ratio": "0.8e0"}, ErrorCode.BUDGET_CONFIGURATION_INVALID,
     "trigger_ratio"),
    ({"window": 1000, "trigger_ratio": "nan"}, ErrorCode.BUDGET_CONFIGURATION_INVALID,
     "trigger_ratio"),
    ({"window": 1000, "summary_target": -5}, ErrorCode.BUDGET_CONFIGURATION_INVALID,
     "summary_target"),
    ({"window": 1000, "provider_output_limit": 0}, ErrorCode.BUDGET_CONFIGURATION_INVALID,
     "provider_output_limit"),
    ({"window": 3}, ErrorCode.BUDGET_CONFIGURATION_INVALID, "window"),  # floor(3/4) = 0
])
def test_invalid_configuration_names_code_and_field(config: dict[str, Any], code: ErrorCode,
                                                    field: str) -> None:
    error = rejected(**config)
    assert (error.code, error.field) == (code, field)


@pytest.mark.covers("CTX-7.2", "CTX-7.8", "CTX-7.10", "CTX-7.22")
@pytest.mark.parametrize(("config", "message"), [
    ({"window": None}, "window: the context window must come from verified model metadata or "
                       "an explicit value; it is never guessed"),
    ({"window": 0}, "window: must be a positive integer of tokens, got 0"),
    ({"window": 1000, "trigger_ratio": "1"},
     "trigger_ratio: must be decimal text with 0 < r < 1, got '1'"),
    ({"window": 3}, "window: floor(W/4) must be positive for the default output reserve, got W=3"),
    ({"window": 1000, "output_reserve": 500, "safety_margin": 500},
     "input_budget: B = W - O - S must be > 0, got 1000 - 500 - 500 = 0"),
])
def test_configuration_error_message_names_the_rule_and_the_value(config: dict[str, Any],
                                                                  message: str) -> None:
    # The message is what `ctxspec budget` prints: the field, the rule, and the value that broke it.
    assert rejected(**config).message() == message


@pytest.mark.covers("CTX-7.4", "CTX-7.6")
def test_explicit_values_are_reported_as_explicit_and_the_ratio_text_is_kept() -> None:
    budget = resolved(**TABLE, trigger_ratio=" 0.5 ")
    assert (budget.output_reserve_source, budget.safety_margin_source) == ("explicit", "explicit")
    assert (budget.trigger_ratio_text, budget.trigger_ratio) == ("0.5", Fraction(1, 2))


@pytest.mark.covers("CTX-7.5")
def test_a_default_output_reserve_of_one_token_is_valid() -> None:
    # O = min(known max output 1, floor(100000/4)) = 1 > 0; S = max(256, 1000) = 1000;
    # B = 100000 − 1 − 1000 = 98999.
    budget = resolved(window=100_000, known_max_output=1)
    assert (budget.output_reserve, budget.safety_margin, budget.input_budget) == (1, 1000, 98_999)


@pytest.mark.covers("CTX-7.6", "CTX-7.18")
def test_resolved_quantities_are_integers_never_floats() -> None:
    # 1311.0 == 1311, so only the type shows a float that slipped into ceil(W × 1%).
    budget = resolved(window=131_072)
    quantities = (budget.window, budget.output_reserve, budget.safety_margin,
                  budget.input_budget, budget.trigger_threshold)
    assert [type(value) for value in quantities] == [int] * 5
    assert quantities == (131_072, 4096, 1311, 125_665, 100_532)


@pytest.mark.covers("CTX-8.37", "CTX-8.38")
def test_soft_target_space_of_one_token_is_used() -> None:
    # F=59999, M=30000: I = 89999 ≥ 80000. H = 40001, P = min(8192, 40001) = 8192,
    # C = min(8192, 25000, 8192) = 8192, D = 60000 − 59999 = 1 > 0 → T = min(8192, 1) = 1.
    assert evaluate_compaction(resolved(**TABLE), 59_999, 30_000) == CompactionEvaluation(
        input_tokens=89_999, decision="compact", summary_space=40_001, summary_output_cap=8192,
        summary_default_cap=8192, soft_target_space=1, summary_target=1)


@pytest.mark.covers("CTX-8.50", "CTX-8.51")
def test_summary_space_of_one_token_compacts_with_t_of_one() -> None:
    # F=99999, M=1: I = 100000. H = 1 > 0, P = min(8192, 1) = 1, C = min(8192, 25000, 1) = 1,
    # D = 60000 − 99999 < 0 → T = C = 1, positive: compact, no error.
    assert evaluate_compaction(resolved(**TABLE), 99_999, 1) == CompactionEvaluation(
        input_tokens=100_000, decision="compact", summary_space=1, summary_output_cap=1,
        summary_default_cap=1, soft_target_space=-39_999, summary_target=1)


@pytest.mark.covers("CTX-8.46", "CTX-8.48", "CTX-8.49", "CTX-8.50")
@pytest.mark.parametrize(("fixed", "material", "expected"), [
    # I = 79999 < 80000.
    (50_000, 29_999, CompactionEvaluation(79_999, "below_trigger")),
    # No material, I = 85000 ≤ B.
    (85_000, 0, CompactionEvaluation(85_000, "no_compressible_material")),
    # No material, I = 100001 > B.
    (100_001, 0, CompactionEvaluation(100_001, "error",
                                      ErrorCode.CONTEXT_PROTECTED_INPUT_TOO_LARGE)),
    # Material, H = 100000 − 100000 = 0.
    (100_000, 6000, CompactionEvaluation(106_000, "error",
                                         ErrorCode.CONTEXT_PROTECTED_INPUT_TOO_LARGE,
                                         summary_space=0)),
])
def test_every_verdict_reports_the_whole_input(fixed: int, material: int,
                                               expected: CompactionEvaluation) -> None:
    assert evaluate_compaction(resolved(**TABLE), fixed, material) == expected


def test_negative_token_counts_are_refused_and_zero_is_a_count() -> None:
    budget = resolved(**TABLE)
    for fixed, material in ((-1, 5), (5, -1)):
        with pytest.raises(ValueError, match=r"^token counts are never negative$"):
            evaluate_compaction(budget, fixed, material)
    # F = 0: a request of material only, far below the trigger.
    assert evaluate_compaction(budget, 0, 5) == CompactionEvaluation(5, "below_trigger")
    for counts in ((-1, 0, 0), (0, -1, 0), (0, 0, -1)):
        with pytest.raises(ValueError, match=r"^token counts are never negative$"):
            recheck_after_summary(budget, *counts)
    assert recheck_after_summary(budget, 0, 0, 0) == SummaryRecheck(0, "continue")


def test_parse_ratio_is_exact_decimal() -> None:
    assert parse_ratio("0.80") == Fraction(4, 5)
    assert parse_ratio(".6") == Fraction(3, 5)
    assert parse_ratio("0.333") == Fraction(333, 1000)
    for bad in ("", "-0.5", "+0.5", "1e-1", "inf", "four", "4/5"):
        assert parse_ratio(bad) is None


# --- properties against a second, simpler computation ------------------------------------------


def naive_target(b: int, f: int, o: int, limit: int | None, explicit: int | None) -> int:
    """The §8 block transcribed with Fractions and math.floor, as a second opinion."""
    h = b - f
    p = min([o, h] + ([limit] if limit is not None else []))
    c = min(8192, math.floor(Fraction(b) * Fraction("0.25")), p)
    d = math.floor(Fraction(b) * Fraction("0.60")) - f
    t_auto = min(c, d) if d > 0 else c
    return min(explicit, p) if explicit is not None else t_auto


@pytest.mark.covers("CTX-8.32", "CTX-8.33", "CTX-8.34", "CTX-8.35", "CTX-8.36", "CTX-8.37",
                    "CTX-8.38", "CTX-8.39", "CTX-8.43")
@given(b=st.integers(4, 2_000_000), f_share=st.integers(0, 999), o=st.integers(1, 200_000),
       limit=st.none() | st.integers(1, 200_000), explicit=st.none() | st.integers(1, 50_000))
def test_target_matches_a_naive_transcription_and_is_positive(
        b: int, f_share: int, o: int, limit: int | None, explicit: int | None) -> None:
    f = b * f_share // 1000  # so that H = B − F > 0
    target = summary_target_for(b, f, o, limit, explicit)
    assert target == naive_target(b, f, o, limit, explicit)
    assert 0 < target <= b - f


@pytest.mark.covers("CTX-7.12")
@given(b=st.integers(1, 10**9), num=st.integers(1, 999))
def test_threshold_matches_fraction_floor(b: int, num: int) -> None:
    budget = resolved(window=b + 2, output_reserve=1, safety_margin=1,
                      trigger_ratio=f"0.{num:03d}")
    assert budget.trigger_threshold == math.floor(Fraction(b) * Fraction(num, 1000))
