"""§8 compaction, the floor of a useful chunk (Q120): the larger of the summary target and its
default cap, at least one token, left beyond a chunk's labels, so a tight window no longer folds a
record one character at a time.

Expected values by hand.
"""

import pytest

from ctxspec.reference.budget import evaluate_compaction
from ctxspec.reference.compaction import (
    CompactionPlan,
    EpisodeRefused,
    label_cost,
    plan_compaction,
    useful_chunk_floor,
)
from ctxspec.reference.contracts import MessageRole
from ctxspec.reference.view import ViewMessage
from tests.builders import uuid
from tests.compaction_material import CharEstimator, message, table_budget

# --- the floor of a useful chunk (Q120) --------------------------------------------------------


@pytest.mark.covers("CTX-8.71")
@pytest.mark.parametrize(("fixed", "material", "floor"), [
    # §8 table row 1: T = 8192 and C = min(8192, 25000, P = 8192) = 8192.
    (65_000, 20_000, 8192),
    # Row 3: H = 4000, P = 4000, C = min(8192, 25000, 4000) = 4000 = T.
    (96_000, 6_000, 4000),
    # F = 59_000: D = 60000 − 59000 = 1000 < C = 8192, so T = 1000 and the floor is C.
    (59_000, 21_000, 8192),
])
def test_the_floor_is_the_larger_of_the_summary_target_and_its_default_cap(
        fixed: int, material: int, floor: int) -> None:
    verdict = evaluate_compaction(table_budget(), fixed, material)
    assert verdict.decision == "compact"
    assert verdict.summary_target is not None and verdict.summary_default_cap is not None
    assert useful_chunk_floor(verdict.summary_target, verdict.summary_default_cap) == floor
    # An explicit T above C keeps T: a fold step never writes more than it read.
    assert useful_chunk_floor(2200, 900) == 2200


def _long_record() -> list[ViewMessage]:
    return [message(MessageRole.ASSISTANT, "x" * 4000, 7)]


# The character estimator: the default compaction prompt is 663, the skeleton 138, so the
# capacity is W − 2T − S − 801. The widest label of the 4000-character record is its fragment
# label with an empty text: "<<<record " 10 + "record:<uuid>" 43 + " role=assistant" 15 +
# " kind=assistant" 15 + " chars=4000-4000 of 4000" 24 + ">>>" 3 = 110, two line breaks,
# "<<<end record " 14 + 43 + ">>>" 3 = 60, and the block's own line break: 173.
LABEL = 173


@pytest.mark.covers("CTX-8.68", "CTX-8.71")
def test_a_tight_window_no_longer_folds_a_record_one_character_at_a_time() -> None:
    # W = 1000, T = 1, S = 20: capacity 1000 − 2 − 20 − 801 = 177, four characters beyond the
    # widest label. Without a floor the 4000 characters are folded in hundreds of chunks
    # (a fragment's label is at least 173 − 6 = 167: "chars=0-1 of 4000" is six shorter, so at
    # most 10 characters a chunk and at least 400 calls); with the floor, none.
    def plan(floor: int) -> CompactionPlan | EpisodeRefused:
        return plan_compaction(_long_record(), episode_id=uuid(99), window=1000,
                               summary_target=1, safety_margin=20, estimator=CharEstimator(),
                               floor=floor)
    unbounded = plan(1)
    assert isinstance(unbounded, CompactionPlan) and unbounded.chunks.capacity == 177
    assert len(unbounded.chunks.chunks) >= 400
    assert label_cost(_long_record(), lambda text: len(text) + 1) == LABEL
    assert plan(100) == EpisodeRefused(
        "CHUNK_BELOW_FLOOR", "a compaction request of this model (W=1000, T=1, S=20) leaves "
        "a chunk 4 tokens of material after its prompts and labels; a useful chunk carries at "
        "least 100")


@pytest.mark.covers("CTX-8.68", "CTX-8.71")
@pytest.mark.parametrize(("window", "planned"), [(1096, True), (1095, False)])
def test_a_chunk_must_leave_the_floor_beyond_its_labels(window: int, planned: bool) -> None:
    # T = 1, S = 20, floor 100: the room beyond the labels is W − 2 − 20 − 801 − 173 = W − 996;
    # exactly 100 at W = 1096 (planned: every full fragment carries at least 100 characters),
    # 99 at W = 1095 (refused).
    plan = plan_compaction(_long_record(), episode_id=uuid(99), window=window, summary_target=1,
                           safety_margin=20, estimator=CharEstimator(), floor=100)
    if not planned:
        assert isinstance(plan, EpisodeRefused) and plan.code == "CHUNK_BELOW_FLOOR"
        assert "leaves a chunk 99 tokens" in plan.reason
        return
    assert isinstance(plan, CompactionPlan) and plan.chunks.capacity == LABEL + 100
    pieces = [block for chunk in plan.chunks.chunks for block in chunk]
    assert "".join(p.text for p in pieces) == "x" * 4000
    assert all(len(p.text) >= 100 for p in pieces[:-1])
    assert len(plan.chunks.chunks) <= 40  # ceil(4000 / 100)


def test_the_floor_is_at_least_one_token() -> None:
    with pytest.raises(ValueError, match="at least one token"):
        plan_compaction(_long_record(), episode_id=uuid(99), window=20_000, summary_target=1,
                        safety_margin=20, estimator=CharEstimator(), floor=0)
