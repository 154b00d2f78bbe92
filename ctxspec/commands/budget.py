"""``ctxspec budget``: the §7 budget resolved, and with F and M the §8 decision."""

import json
from fractions import Fraction
from typing import Any

import click

from ctxspec.commands.options import TOKENS
from ctxspec.reference.budget import (
    BudgetConfig,
    CompactionEvaluation,
    ConfigurationError,
    K,
    ResolvedBudget,
    SummaryRecheck,
    evaluate_compaction,
    recheck_after_summary,
    resolve_budget,
)

# --- budget ------------------------------------------------------------------------------


def _in_k(tokens: int) -> str:
    """Tokens in K for people (1K = 1024): exact when whole, else ≈ to one decimal."""
    if tokens % K == 0:
        return f"{tokens // K}K"
    tenths = round(Fraction(tokens * 10, K))
    return f"≈{'-' if tenths < 0 else ''}{abs(tenths) // 10}.{abs(tenths) % 10}K"


def _budget_document(budget: ResolvedBudget, evaluation: CompactionEvaluation | None,
                     recheck: SummaryRecheck | None) -> dict[str, Any]:
    document: dict[str, Any] = {
        "window": budget.window,
        "output_reserve": budget.output_reserve,
        "output_reserve_source": budget.output_reserve_source,
        "safety_margin": budget.safety_margin,
        "safety_margin_source": budget.safety_margin_source,
        "input_budget": budget.input_budget,
        "trigger_ratio": budget.trigger_ratio_text,
        "trigger_threshold": budget.trigger_threshold,
    }
    if evaluation is not None:
        document.update(
            input_tokens=evaluation.input_tokens,
            decision=evaluation.decision,
            error_code=evaluation.error_code.value if evaluation.error_code else None,
            summary_space=evaluation.summary_space,
            summary_output_cap=evaluation.summary_output_cap,
            summary_default_cap=evaluation.summary_default_cap,
            soft_target_space=evaluation.soft_target_space,
            summary_target=evaluation.summary_target,
        )
    if recheck is not None:
        document.update(assembled_tokens=recheck.assembled_tokens,
                        after_summary=str(recheck.verdict))
    return document


_LABELS = {
    "window": "W  window",
    "output_reserve": "O  output reserve",
    "safety_margin": "S  safety margin",
    "input_budget": "B  input budget (W − O − S)",
    "trigger_threshold": "   trigger floor(r × B)",
    "input_tokens": "I  input (F + M)",
    "summary_space": "H  summary space (B − F)",
    "summary_output_cap": "P  summary output cap",
    "summary_default_cap": "C  default summary cap",
    "soft_target_space": "D  room below 60% (floor(B × 0.60) − F)",
    "summary_target": "T  summary target",
    "assembled_tokens": "   assembled after summary",
}


def _print_budget_table(document: dict[str, Any]) -> None:
    rows: list[tuple[str, str, str]] = []
    for key, label in _LABELS.items():
        value = document.get(key)
        if value is None:
            continue
        source = document.get(f"{key}_source", "")
        rows.append((label, _in_k(value), f"{value} tokens" + (f"  ({source})" if source else "")))
    width = max(len(r[0]) for r in rows)
    click.echo(f"{'r  trigger ratio'.ljust(width)}  {document['trigger_ratio']}")
    for label, in_k, tokens in rows:
        click.echo(f"{label.ljust(width)}  {in_k:>9}  {tokens}")
    if "decision" in document:
        verdict = document["decision"]
        if document["error_code"]:
            verdict += f" ({document['error_code']})"
        click.echo(f"{'decision'.ljust(width)}  {verdict}")
    if "after_summary" in document:
        click.echo(f"{'after summary'.ljust(width)}  {document['after_summary']}")


@click.command()
@click.option("--window", type=TOKENS, required=True,
              help="W, the model's context window in tokens (verified or explicit; 128K = 131072).")
@click.option("--output-reserve", type=TOKENS,
              help="O. Default: min(--max-output or 4096, floor(W/4)).")
@click.option("--max-output", type=TOKENS, help="The model's known maximum output tokens.")
@click.option("--safety-margin", type=TOKENS, help="S. Default: max(256, ceil(W × 1%)).")
@click.option("--trigger-ratio", default="0.80", show_default=True,
              help="r, as decimal text, 0 < r < 1.")
@click.option("--summary-target", type=TOKENS,
              help="context.summary_target_tokens, overriding T_auto (capped by P).")
@click.option("--provider-output-limit", type=TOKENS,
              help="The provider's output limit, when known (part of P).")
@click.option("--fixed", type=TOKENS, help="F: fixed input tokens of the request (§8).")
@click.option("--material", type=TOKENS, help="M: compressible material tokens of the request.")
@click.option("--summary-tokens", type=TOKENS,
              help="X: size of the summary returned, for the post-compaction re-check.")
@click.option("--added-after-compaction", type=TOKENS, default=0, show_default=True,
              help="Tokens that arrived during compaction (e.g. a supplement).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def budget(window: int, output_reserve: int | None, max_output: int | None,
           safety_margin: int | None, trigger_ratio: str, summary_target: int | None,
           provider_output_limit: int | None, fixed: int | None, material: int | None,
           summary_tokens: int | None, added_after_compaction: int, as_json: bool) -> None:
    """Resolve the §7 budget; with --fixed/--material evaluate the §8 decision."""
    resolved = resolve_budget(BudgetConfig(
        window=window, output_reserve=output_reserve, known_max_output=max_output,
        safety_margin=safety_margin, trigger_ratio=trigger_ratio,
        summary_target=summary_target, provider_output_limit=provider_output_limit))
    if isinstance(resolved, ConfigurationError):
        option = "--" + resolved.field.replace("_", "-")
        raise click.UsageError(f"{resolved.code.value}: {option}: {resolved.rule}")
    if (fixed is None) != (material is None):
        raise click.UsageError("--fixed and --material go together: a request has both F and M")
    if summary_tokens is None and added_after_compaction:
        raise click.UsageError("--added-after-compaction needs --summary-tokens")
    evaluation = None if fixed is None or material is None \
        else evaluate_compaction(resolved, fixed, material)
    if summary_tokens is not None and evaluation is None:
        raise click.UsageError("--summary-tokens needs --fixed and --material")
    recheck = None
    if evaluation is not None and summary_tokens is not None and fixed is not None \
            and evaluation.decision == "compact":
        recheck = recheck_after_summary(resolved, fixed, summary_tokens, added_after_compaction)
    document = _budget_document(resolved, evaluation, recheck)
    if as_json:
        click.echo(json.dumps(document, indent=2))
    else:
        _print_budget_table(document)
