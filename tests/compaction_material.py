"""Builders for the §8 compaction tests: view messages with chosen token counts, a character
estimator (one token per character, no overhead) that keeps the expected figures readable, a plan
of material under the byte estimator, an episode started for an operation, and the §8 table's
budget with requests of a given F and M."""

from datetime import UTC, datetime
from uuid import UUID

from ctxspec.reference.budget import BudgetConfig, ResolvedBudget, resolve_budget
from ctxspec.reference.compaction import (
    SUMMARY_ENVELOPE_TEXT,
    CompactionPlan,
    EpisodeRefused,
    RequestParts,
    plan_compaction,
    start_episode,
)
from ctxspec.reference.contracts import CompactionEpisode, MessageRole
from ctxspec.reference.tokens import ByteEstimator, EstimationRequest, TokenEstimate
from ctxspec.reference.view import ToolCall, ViewKind, ViewMessage
from tests.builders import ref, uuid

NOW = datetime(2026, 11, 29, tzinfo=UTC)


class CharEstimator:
    """A deterministic estimator for hand-derived numbers: one token per character, no
    protocol overhead (the conformance cases inject estimators like this one)."""

    name = "chars"

    def estimate(self, request: EstimationRequest) -> TokenEstimate:
        tokens = sum(len(m.text) for m in request.messages) + sum(map(len,
                                                                      request.tool_schemas))
        return TokenEstimate(tokens=tokens, accuracy="estimated", estimator=self.name)


def message(role: MessageRole, text: str, n: int, kind: ViewKind | None = None,
            input_id: UUID | None = None, calls: tuple[ToolCall, ...] = (),
            call: UUID | None = None) -> ViewMessage:
    return ViewMessage(role=role, kind=kind or ViewKind(
        {"user": "user_ref", "assistant": "assistant", "tool": "tool_result",
         "system": "system_prompt"}[role.value]), text=text, record_id=uuid(n),
        input_id=input_id, tool_calls=calls, call_id=call, source_run_id=uuid(2))


def plan_for(material: list[ViewMessage], window: int, target: int, margin: int,
             estimator: object = None, custom: str | None = "keep file paths") -> CompactionPlan:
    # floor=1 (one character beyond the labels): these tests are about packing; the floor of
    # a useful chunk (Q120) has tests of its own (tests/test_compaction_floor.py).
    plan = plan_compaction(material, episode_id=uuid(99), window=window, summary_target=target,
                           safety_margin=margin, estimator=ByteEstimator(), floor=1,
                           custom_prompt=custom)
    assert isinstance(plan, CompactionPlan)
    return plan


def episode(existing: tuple[CompactionEpisode, ...] = (), material: int = 100,
            op: int = 70) -> CompactionEpisode | EpisodeRefused:
    return start_episode(episode_id=uuid(99), run_id=uuid(2), owner_node_task_id=uuid(3),
                         triggering_model_operation_id=uuid(op), existing=existing,
                         material_tokens=material, source_view_hash="sha256:v",
                         source_manifest_ref=ref("manifest"),
                         source_effective_revisions={uuid(1): 4}, release_id=uuid(4),
                         input_tokens=1000, created_at=NOW)


TABLE = BudgetConfig(window=110_000, output_reserve=8192, safety_margin=1808)


def table_budget() -> ResolvedBudget:
    budget = resolve_budget(TABLE)
    assert isinstance(budget, ResolvedBudget) and budget.input_budget == 100_000
    return budget


def request(fixed: int, material: int) -> RequestParts:
    """A request whose F and M under the character estimator are ``fixed`` and ``material``:
    F includes the 30-character envelope of the summary that replaces the material."""
    fixed_text = fixed - (len(SUMMARY_ENVELOPE_TEXT) if material else 0)
    history = tuple(message(MessageRole.ASSISTANT, "m" * 1000, n) for n in range(material // 1000))
    rest = material - 1000 * len(history) + (len(SUMMARY_ENVELOPE_TEXT) if material else 0)
    if rest:
        history += (message(MessageRole.ASSISTANT, "m" * rest, 999),)
    return RequestParts(system=(message(MessageRole.SYSTEM, "s" * (fixed_text - 1), 1),),
                        tool_schemas=(), history=(
                            message(MessageRole.USER, "q", 2, input_id=uuid(20)), *history),
                        hook_increments=(), tail=(), protected_input_ids=frozenset({uuid(20)}))
