"""§8 compaction, the split: the fixed input F and the compressible material M counted once each,
tool schemas in the whole and in F, the summary that replaces M (its envelope, its snapshot), and
the six §8 rows end to end through split, plan and recheck (§7's budget), a new question staying
verbatim (§5).

Expected values by hand.
"""

import pytest

from ctxspec.reference.budget import evaluate_compaction, recheck_after_summary
from ctxspec.reference.compaction import (
    SUMMARY_ENVELOPE_TEXT,
    CompactionPlan,
    EpisodeRefused,
    RequestParts,
    Split,
    fits_window,
    plan_compaction,
    split_request,
    summary_message,
    useful_chunk_floor,
)
from ctxspec.reference.contracts import CompactionEpisode, MessageRole
from ctxspec.reference.tokens import ByteEstimator
from ctxspec.reference.view import ViewKind, ViewMessage
from tests.builders import uuid
from tests.compaction_material import CharEstimator, episode, message, request, table_budget

# --- F and M ------------------------------------------------------------------------------------


@pytest.mark.covers("CTX-8.26", "CTX-8.27", "CTX-8.64")
def test_split_counts_everything_once_with_the_byte_estimator() -> None:
    question = message(MessageRole.USER, "q", 11, input_id=uuid(20))
    parts = RequestParts(system=(message(MessageRole.SYSTEM, "sys", 10),), tool_schemas=(),
                         history=(question, message(MessageRole.ASSISTANT, "x" * 200, 12)),
                         hook_increments=(), tail=(), protected_input_ids=frozenset({uuid(20)}))
    split = split_request(parts, ByteEstimator())
    # Byte estimator: 8 per request, and per message role bytes + text bytes + 8.
    # I = 8 + (6+3+8) + (4+1+8) + (9+200+8) = 255; fixed only = 8 + 17 + 13 = 38;
    # the summary's envelope = 6 + len("[summary of earlier material]\n") + 8 = 6 + 30 + 8 = 44.
    assert len(SUMMARY_ENVELOPE_TEXT) == 30
    assert (split.input_tokens, split.fixed_tokens, split.material_tokens) == (255, 82, 173)
    assert split.material == (parts.history[1],)
    assert question in split.fixed and question not in split.material


# --- the six §8 rows, end to end through planning -----------------------------------------------


@pytest.mark.covers("CTX-8.56", "CTX-8.57", "CTX-8.58", "CTX-8.59", "CTX-8.60", "CTX-8.61",
                    "CTX-8.77", "CTX-8.80")
@pytest.mark.parametrize(("fixed", "material", "summary", "added", "decision", "target",
                          "assembled", "after"), [
    # Row 1: T = 8192; 65000 + 8192 = 73192 continues.
    (65_000, 20_000, 8192, 0, "compact", 8192, 73_192, "continue"),
    # Row 2: 79000 + 8192 = 87192 > 80% but ≤ B: continues, no second episode.
    (79_000, 6000, 8192, 0, "compact", 8192, 87_192, "continue"),
    # Row 3: I = 102000 > B, H = 4000, T = 4000; 96000 + 4000 = 100000 ≤ B.
    (96_000, 6000, 4000, 0, "compact", 4000, 100_000, "continue"),
    # Row 4: H = 0: no room for a summary, no episode.
    (100_000, 6000, None, 0, "error", None, None, None),
    # Row 5: no compressible material, I = 85000: run without compaction.
    (85_000, 0, None, 0, "no_compressible_material", None, None, None),
    # Row 6: a summary of 8000, then 22001 re-attached: 70000 + 8000 + 22001 = 100001 > B.
    (70_000, 20_000, 8000, 22_001, "compact", 8192, 100_001, "CONTEXT_WINDOW_EXCEEDED"),
])
def test_section8_rows_through_split_plan_and_recheck(
        fixed: int, material: int, summary: int | None, added: int, decision: str,
        target: int | None, assembled: int | None, after: str | None) -> None:
    budget = table_budget()
    estimator = CharEstimator()
    split = split_request(request(fixed, material), estimator)
    assert (split.fixed_tokens, split.material_tokens) == (fixed, material)
    verdict = evaluate_compaction(budget, split.fixed_tokens, split.material_tokens)
    assert (verdict.decision, verdict.summary_target) == (decision, target)
    started = episode(material=split.material_tokens)
    if decision != "compact":
        assert verdict.decision != "compact"
        if material == 0:
            assert isinstance(started, EpisodeRefused)
        return
    assert target is not None and summary is not None
    plan = plan_compaction(split.material, episode_id=uuid(99), window=budget.window,
                           summary_target=target, safety_margin=budget.safety_margin,
                           estimator=estimator, floor=useful_chunk_floor(
                               target, verdict.summary_default_cap or target))
    assert isinstance(plan, CompactionPlan)
    for k in range(1, len(plan.chunks.chunks) + 1):
        assert fits_window(plan, plan.request(k, None if k == 1 else "s" * target), estimator)
    recheck = recheck_after_summary(budget, split.fixed_tokens, summary, added)
    assert (recheck.assembled_tokens, str(recheck.verdict)) == (assembled, after)
    # Whatever the re-check says, this business operation has had its episode.
    assert isinstance(started, CompactionEpisode)
    second = episode(existing=(started,), material=split.material_tokens)
    assert isinstance(second, EpisodeRefused) and second.code == "EPISODE_EXISTS"


@pytest.mark.covers("CTX-4.18", "CTX-5.5", "CTX-5.7", "CTX-8.64", "CTX-9.12", "CTX-9.25")
def test_a_new_question_that_triggers_compaction_stays_verbatim() -> None:
    # §12 "新问题本身触发压缩": the new question (and its supplement) are protected: never
    # material, and the request after compaction carries them word for word, not only a summary.
    from ctxspec.reference.protection import ProtectedInput, check_protected_inputs
    from ctxspec.reference.snapshots import apply_snapshot, build_manifest

    question = message(MessageRole.USER, "请完整阅读并回答：" + "细节" * 3000, 30,
                       input_id=uuid(20))
    supplement = message(MessageRole.USER, "只用 Docker", 31, input_id=uuid(21))
    history = tuple(message(MessageRole.ASSISTANT, "old work " * 400, n) for n in range(1, 6))
    parts = RequestParts(system=(message(MessageRole.SYSTEM, "sys", 10),), tool_schemas=(),
                         history=(*history, question, supplement), hook_increments=(), tail=(),
                         protected_input_ids=frozenset({uuid(20), uuid(21)}))
    split = split_request(parts, ByteEstimator())
    assert question not in split.material and supplement not in split.material
    manifest = build_manifest(list(split.material), {}, {}, chunk_capacity=1, chunk_count=1)
    after = apply_snapshot(parts.view(), manifest, "summary of old work", uuid(60))
    assert check_protected_inputs(after, [ProtectedInput(uuid(20), 1, question.text),
                                          ProtectedInput(uuid(21), 2, "只用 Docker")]) == ()
    assert [m.kind for m in after.messages] == [ViewKind.SYSTEM_PROMPT, ViewKind.SUMMARY,
                                                ViewKind.USER_REF, ViewKind.USER_REF]


# --- boundaries the mutation run (docs/mutation.md) showed untested ------------------------------


def test_split_counts_tool_schemas_in_the_whole_and_in_the_fixed_input() -> None:
    # Characters: system 3, protected question 1, a second (unprotected) user input 1, material
    # 100, one tool schema 6. I = 3 + 1 + 1 + 100 + 6 = 111; F = 3 + 1 + 6 + the envelope 30 =
    # 40; M = 111 − 40 = 71. An input that is not protected is material like any other.
    system = message(MessageRole.SYSTEM, "sys", 10)
    question = message(MessageRole.USER, "q", 11, input_id=uuid(20))
    older = message(MessageRole.USER, "o", 12, input_id=uuid(21))
    work = message(MessageRole.ASSISTANT, "m" * 100, 13)
    parts = RequestParts(system=(system,), tool_schemas=("abcdef",),
                         history=(question, older, work), hook_increments=(), tail=(),
                         protected_input_ids=frozenset({uuid(20)}))
    assert split_request(parts, CharEstimator()) == Split(
        fixed=(system, question), material=(older, work), input_tokens=111, fixed_tokens=40,
        material_tokens=71)


def test_split_without_material_is_all_fixed() -> None:
    # Only the protected question: I = F = 3 + 1 + 6 = 10, M = 0, and no envelope is counted.
    system = message(MessageRole.SYSTEM, "sys", 10)
    question = message(MessageRole.USER, "q", 11, input_id=uuid(20))
    parts = RequestParts(system=(system,), tool_schemas=("abcdef",), history=(question,),
                         hook_increments=(), tail=(), protected_input_ids=frozenset({uuid(20)}))
    assert split_request(parts, CharEstimator()) == Split((system, question), (), 10, 10, 0)


def test_material_smaller_than_the_summary_envelope_frees_nothing() -> None:
    # Material of 10 characters under a 30-character envelope: F = min(4 + 30, I = 14) = 14 and
    # M = max(14 − 34, 0) = 0: compaction could not make the request smaller.
    parts = RequestParts(system=(message(MessageRole.SYSTEM, "sys", 10),), tool_schemas=(),
                         history=(message(MessageRole.USER, "q", 11, input_id=uuid(20)),
                                  message(MessageRole.ASSISTANT, "m" * 10, 12)),
                         hook_increments=(), tail=(), protected_input_ids=frozenset({uuid(20)}))
    split = split_request(parts, CharEstimator())
    assert (split.input_tokens, split.fixed_tokens, split.material_tokens) == (14, 14, 0)


def test_summary_message_names_its_snapshot() -> None:
    assert summary_message("the gist", uuid(60)) == ViewMessage(
        role=MessageRole.SYSTEM, kind=ViewKind.SUMMARY,
        text="[summary of earlier material]\nthe gist", record_id=uuid(60), body="the gist")
