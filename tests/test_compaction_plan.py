"""§8 compaction, chunk capacity and the plan: what a chunk's capacity reserves (output, margin,
prompts, the previous summary, hook increments), a tool interaction kept in one chunk, an oversize
record cut into labelled character ranges, and every planned request within its window (§7).

Expected values by hand.
"""

import pytest

from ctxspec.reference.compaction import (
    DEFAULT_SYSTEM_PROMPT,
    CompactionPlan,
    CompactionRequest,
    EpisodeRefused,
    TranscriptBlock,
    chunk_capacity,
    fits_window,
    material_key,
    plan_chunks,
    plan_compaction,
    request_fits,
)
from ctxspec.reference.contracts import MessageRole
from ctxspec.reference.tokens import ByteEstimator, EstimationRequest, PromptMessage, TokenEstimate
from ctxspec.reference.view import ToolCall
from tests.builders import uuid
from tests.compaction_material import CharEstimator, message, plan_for

# --- capacity and the plan ----------------------------------------------------------------------


@pytest.mark.covers("CTX-8.25", "CTX-8.68")
def test_chunk_capacity_reserves_output_margin_prompts_and_previous_summary() -> None:
    # W=10000, T=1000, S=256, system 300, custom 50, hooks 0, framing 20:
    # 10000 − 1000 − 256 − 300 − 50 − 0 − 1000 − 20 = 7374.
    assert chunk_capacity(10_000, 1000, 256, 300, 50, 0, 20) == 7374


@pytest.mark.covers("CTX-8.63", "CTX-8.65", "CTX-8.71")
def test_plan_keeps_a_tool_interaction_in_one_chunk() -> None:
    call = ToolCall(call_id=uuid(50), action_ordinal=1, name="read", arguments="{}")
    material = [message(MessageRole.ASSISTANT, "A", 1),
                message(MessageRole.ASSISTANT, "B", 2, calls=(call,)),
                message(MessageRole.TOOL, "Br", 3, call=uuid(50)),
                message(MessageRole.ASSISTANT, "C", 4), message(MessageRole.ASSISTANT, "D", 5)]
    # Each block measures 100, the capacity is 250: [A] | [B, Br] (the interaction moves whole
    # to the next chunk rather than splitting) | [C, D].
    plan = plan_chunks(material, 250, lambda text: 100)
    assert [[b.material_key for b in chunk] for chunk in plan.chunks] == [
        [f"record:{uuid(1)}"], [f"record:{uuid(2)}", f"record:{uuid(3)}"],
        [f"record:{uuid(4)}", f"record:{uuid(5)}"]]


@pytest.mark.covers("CTX-8.66", "CTX-8.67")
def test_an_oversize_record_becomes_labelled_character_ranges() -> None:
    text = "".join(f"line {n};" for n in range(500))
    big = message(MessageRole.TOOL, text, 7, call=uuid(51))
    plan = plan_chunks([big], 400, len)
    pieces = [block for chunk in plan.chunks for block in chunk]
    assert len(pieces) > 1
    assert "".join(p.text for p in pieces) == text  # nothing lost, nothing repeated
    assert [(p.from_char, p.through_char) for p in pieces] == \
        list(zip([0, *[p.through_char for p in pieces[:-1]]],
                 [p.through_char for p in pieces], strict=True))
    for piece in pieces:
        assert len(piece.render()) <= 400
        assert f"record:{uuid(7)}" in piece.render()
        assert f"chars={piece.from_char}-{piece.through_char} of {len(text)}" in piece.render()
        assert piece.role == "tool"  # recorded as a label of transcript data, not a tool message


@pytest.mark.covers("CTX-7.13", "CTX-8.25", "CTX-8.68")
def test_every_planned_request_fits_its_window_with_a_full_previous_summary() -> None:
    material = [message(MessageRole.ASSISTANT, "中文 emoji 😀 " * (n * 50), n)
                for n in range(1, 12)]
    window, target, margin = 9000, 800, 256
    plan = plan_for(material, window, target, margin)
    estimator = ByteEstimator()
    previous = "s" * target  # a summary of T tokens under this estimator
    for k in range(1, len(plan.chunks.chunks) + 1):
        request = plan.request(k, None if k == 1 else previous)
        assert estimator.estimate(request.estimation()).tokens + target + margin <= window
        assert fits_window(plan, request, estimator)
    covered = {b.material_key for chunk in plan.chunks.chunks for b in chunk}
    assert covered == {material_key(m) for m in material}
    too_long = plan.request(2, "s" * window)
    assert not fits_window(plan, too_long, estimator)  # never sent: the episode fails instead


def test_no_room_for_material_is_refused() -> None:
    refused = plan_compaction([message(MessageRole.ASSISTANT, "x", 1)], episode_id=uuid(99),
                              window=2000, summary_target=500, safety_margin=256,
                              estimator=ByteEstimator(), floor=1)
    assert isinstance(refused, EpisodeRefused) and refused.code == "NO_ROOM_FOR_MATERIAL"


# --- boundaries the mutation run (docs/mutation.md) showed untested ------------------------------


@pytest.mark.covers("CTX-8.25", "CTX-8.68")
def test_chunk_capacity_reserves_hook_increments() -> None:
    # 10000 − 1000 − 256 − 300 − 50 − 7 − 1000 − 20 = 7367.
    assert chunk_capacity(10_000, 1000, 256, 300, 50, 7, 20) == 7367


@pytest.mark.covers("CTX-7.13", "CTX-8.68")
def test_request_fits_at_exactly_the_window() -> None:
    # system 20 + custom 5 + hooks 5 + framing 5 + previous 10 + chunk 40 + T 10 + S 5 = 100.
    assert request_fits(100, 10, 5, 20, 5, 5, 5, 10, 40)
    assert not request_fits(99, 10, 5, 20, 5, 5, 5, 10, 40)


def test_fits_window_counts_output_and_margin() -> None:
    # One message of 100 characters, T = 50, S = 10: 100 + 50 + 10 = 160.
    plan = CompactionPlan(uuid(99), 160, 50, 10, None, (), plan_chunks([], 1, len))
    request = CompactionRequest("compaction:x:chunk:1",
                                (PromptMessage(role="user", text="x" * 100),), 50)
    assert fits_window(plan, request, CharEstimator())
    smaller = CompactionPlan(uuid(99), 159, 50, 10, None, (), plan_chunks([], 1, len))
    assert not fits_window(smaller, request, CharEstimator())


def xs(rendered: str) -> int:
    """A measure that counts the x characters only: labels (ids, roles, ranges) hold none."""
    return rendered.count("x")


def keys(plan_chunks_of: list[list[TranscriptBlock]] | tuple[tuple[TranscriptBlock, ...], ...]
         ) -> list[list[tuple[str, int, int]]]:
    return [[(b.material_key.removeprefix("record:")[-2:], b.from_char, b.through_char)
             for b in chunk] for chunk in plan_chunks_of]


@pytest.mark.covers("CTX-8.63", "CTX-8.65")
def test_plan_fills_a_chunk_to_exactly_its_capacity() -> None:
    material = [message(MessageRole.ASSISTANT, "x" * 100, n) for n in (1, 2, 3, 4, 5)]
    # 100 each, capacity 300: three fill the first chunk exactly, two the second.
    plan = plan_chunks(material, 300, xs)
    assert plan.capacity == 300
    assert keys(plan.chunks) == [[("01", 0, 100), ("02", 0, 100), ("03", 0, 100)],
                                 [("04", 0, 100), ("05", 0, 100)]]
    # Capacity 200: [1, 2] | [3, 4] | [5], each new chunk starting empty.
    assert keys(plan_chunks(material, 200, xs).chunks) == [
        [("01", 0, 100), ("02", 0, 100)], [("03", 0, 100), ("04", 0, 100)], [("05", 0, 100)]]
    block = plan.chunks[0][0]
    assert block == TranscriptBlock(f"record:{uuid(1)}", "assistant", "assistant", None,
                                    "x" * 100, 0, 100, 100)


@pytest.mark.covers("CTX-8.63", "CTX-8.65")
def test_a_tool_interaction_after_other_units_moves_whole() -> None:
    call = ToolCall(call_id=uuid(50), action_ordinal=1, name="read", arguments="{}")
    material = [message(MessageRole.ASSISTANT, "x" * 100, 1),
                message(MessageRole.ASSISTANT, "x" * 100, 2),
                message(MessageRole.ASSISTANT, "x" * 100, 3, calls=(call,)),
                message(MessageRole.TOOL, "x" * 100, 4, call=uuid(50))]
    # Capacity 300: 1 and 2 (200), then the interaction 3+4 (200) does not fit beside them.
    # The call is written out after its text: "\n[call <36-character id> #1] read({})" is
    # 1 + 6 + 36 + 4 + 9 = 56 more characters (none of them an x).
    assert keys(plan_chunks(material, 300, xs).chunks) == [
        [("01", 0, 100), ("02", 0, 100)], [("03", 0, 156), ("04", 0, 100)]]
    # Capacity 200: the interaction fills its own chunk exactly; it is not split.
    assert keys(plan_chunks(material[1:], 200, xs).chunks) == [
        [("02", 0, 100)], [("03", 0, 156), ("04", 0, 100)]]


@pytest.mark.covers("CTX-8.65", "CTX-8.71")
def test_an_oversize_interaction_is_split_into_its_messages() -> None:
    call = ToolCall(call_id=uuid(50), action_ordinal=1, name="read", arguments="{}")
    material = [message(MessageRole.ASSISTANT, "x" * 100, 1),
                message(MessageRole.ASSISTANT, "x" * 150, 2, calls=(call,)),
                message(MessageRole.TOOL, "x" * 100, 3, call=uuid(50)),
                message(MessageRole.ASSISTANT, "x" * 100, 4)]
    # Capacity 200: the interaction (250) fits no chunk, so its messages are placed one by one:
    # [1] | [2] (150 + 100 > 200) | [3, 4] (100 + 100 = 200, exactly full).
    assert keys(plan_chunks(material, 200, xs).chunks) == [
        [("01", 0, 100)], [("02", 0, 206)], [("03", 0, 100), ("04", 0, 100)]]


@pytest.mark.covers("CTX-8.66", "CTX-8.67")
def test_character_ranges_are_the_longest_that_fit() -> None:
    big = message(MessageRole.TOOL, "x" * 12, 7, call=uuid(51))
    # Capacity 5 of 12 characters: 0-5, 5-10, 10-12; nothing empty after the end.
    pieces = [b for chunk in plan_chunks([big], 5, xs).chunks for b in chunk]
    assert [(p.from_char, p.through_char) for p in pieces] == [(0, 5), (5, 10), (10, 12)]
    assert {(p.material_key, p.role, p.kind, p.call_id, p.total_chars) for p in pieces} == \
        {(f"record:{uuid(7)}", "tool", "tool_result", uuid(51), 12)}
    # Capacity 1 is room for one character per range.
    assert [(p.from_char, p.through_char) for chunk in plan_chunks(
        [message(MessageRole.TOOL, "xxx", 7, call=uuid(51))], 1, xs).chunks for p in chunk] == \
        [(0, 1), (1, 2), (2, 3)]


def test_plan_chunks_refuses_a_capacity_without_room() -> None:
    with pytest.raises(ValueError, match=r"^a chunk needs room for material: the capacity must "
                                         r"be positive$"):
        plan_chunks([message(MessageRole.ASSISTANT, "x", 1)], 0, xs)
    with pytest.raises(ValueError, match=r"^the chunk capacity cannot hold even one character "
                                         r"with its label$"):
        plan_chunks([message(MessageRole.ASSISTANT, "x" * 20, 1)], 10, len)


# The skeleton that plan_compaction reserves for a request's labels, written out from the
# label format with generous chunk numbers: 50 + 1 + 1 + 26 + 1 + 40 + 1 + 18 = 138 characters.
SKELETON = ("<<<previous summary: chunks 1-999999 of 1000000>>>\n\n<<<end previous summary>>>\n"
            "<<<material: chunk 1000000 of 1000000>>>\n<<<end material>>>")


@pytest.mark.covers("CTX-8.25", "CTX-8.68", "CTX-8.17")
def test_plan_capacity_with_custom_prompt_and_hook_increments() -> None:
    # ByteEstimator: 8 per request, role + text + 8 per message. W=20000, T=1000, S=256;
    # system 6 + 663 + 8 = 677; custom "keep file paths" 4 + 15 + 8 = 27; two hooks of 8 bytes
    # 2 × (4 + 8 + 8) = 40; skeleton 8 + 4 + 138 + 8 = 158.
    # Capacity = 20000 − 1000 − 256 − 677 − 27 − 40 − 1000 − 158 = 16842.
    assert (len(DEFAULT_SYSTEM_PROMPT.encode()), len(SKELETON)) == (663, 138)
    material = [message(MessageRole.ASSISTANT, "x" * 10, 1)]
    plan = plan_compaction(material, episode_id=uuid(99), window=20_000, summary_target=1000,
                           safety_margin=256, estimator=ByteEstimator(), floor=1,
                           custom_prompt="keep file paths", hook_increments=("hook one",
                                                                             "hook two"))
    assert isinstance(plan, CompactionPlan)
    assert plan.chunks.capacity == 16_842
    request = plan.request(1, None)
    block = plan.chunks.chunks[0][0]
    assert [(m.role, m.text) for m in request.messages] == [
        ("system", DEFAULT_SYSTEM_PROMPT), ("user", "keep file paths"), ("user", "hook one"),
        ("user", "hook two"),
        ("user", f"<<<material: chunk 1 of 1>>>\n{block.render()}\n<<<end material>>>")]


@pytest.mark.covers("CTX-8.63", "CTX-8.68")
@pytest.mark.parametrize(("window", "chunks"), [(1891, 1), (1890, 2)])
def test_plan_measures_a_block_as_its_bytes_in_the_request(window: int, chunks: int) -> None:
    # ByteEstimator, T=100, S=256: capacity = W − 200 − 256 − 677 − 158 = W − 1291. A block of a
    # 51-character text renders as 86 + 1 + 51 + 1 + 60 = 199 characters and takes 200 bytes of
    # the request with its line break. Three fill 600 exactly (W = 1891); at 599 the third
    # moves to a second chunk.
    material = [message(MessageRole.ASSISTANT, "x" * 51, n) for n in (1, 2, 3)]
    plan = plan_compaction(material, episode_id=uuid(99), window=window, summary_target=100,
                           safety_margin=256, estimator=ByteEstimator(), floor=1)
    assert isinstance(plan, CompactionPlan)
    assert plan.chunks.capacity == window - 1291
    assert len(plan.chunks.chunks[0][0].render()) == 199
    assert len(plan.chunks.chunks) == chunks


class LongUserMessageEstimator:
    """One token per character, plus ``surcharge`` tokens on a user message longer than 300
    characters: an estimator that does not add up inside a text, so a planned chunk can measure
    over what its blocks add up to."""

    name = "surcharged-chars"

    def __init__(self, surcharge: int) -> None:
        self.surcharge = surcharge

    def estimate(self, request: EstimationRequest) -> TokenEstimate:
        tokens = sum(len(m.text) + (self.surcharge if m.role == "user" and len(m.text) > 300
                                    else 0) for m in request.messages)
        return TokenEstimate(tokens=tokens, accuracy="estimated", estimator=self.name)


@pytest.mark.covers("CTX-8.25", "CTX-8.68", "CTX-8.71")
@pytest.mark.parametrize(("surcharge", "capacity", "chunks"), [(91, 400, 2), (92, 399, 3),
                                                              (100, 391, 3)])
def test_a_chunk_that_measures_over_shrinks_the_capacity(surcharge: int, capacity: int,
                                                         chunks: int) -> None:
    # W=1657, T=100, S=256, system 663, skeleton 138: capacity 1657 − 200 − 256 − 663 − 138 =
    # 400. Blocks of 51 characters render as 199 and measure 200: the first plan is [1, 2] | [3].
    # Chunk 1's data block is "<<<material: chunk 1 of 2>>>" (28), a line break, each block
    # with its line break (2 × 200), the end label (18): 447 > 300, so surcharged by s. Its
    # request is 663 + 447 + s; with T + T + S = 456 that is s − 91 over W. Chunk 2's block,
    # "<<<previous summary: chunks 1-1 of 2>>>" (39) + 1 + 1 + "<<<end previous summary>>>"
    # (26) + 1 + 28 + 1 + 200 + 18 = 315, is 663 + 315 + s + 456 − 1657 = s − 223 over.
    # s = 91 fits exactly (overflow 0); s = 92 is one over and shrinks the capacity by 1 to 399;
    # s = 100 by 9 to 391. There every chunk holds one block: chunk 1's data block is then
    # 28 + 1 + 200 + 18 = 247 ≤ 300 (no surcharge), chunks 2 and 3 are s − 223 < 0 over.
    material = [message(MessageRole.ASSISTANT, "x" * 51, n) for n in (1, 2, 3)]
    estimator = LongUserMessageEstimator(surcharge)
    plan = plan_compaction(material, episode_id=uuid(99), window=1657, summary_target=100,
                           safety_margin=256, estimator=estimator, floor=1)
    assert isinstance(plan, CompactionPlan)
    assert (plan.chunks.capacity, len(plan.chunks.chunks)) == (capacity, chunks)
    for k in range(1, chunks + 1):
        assert fits_window(plan, plan.request(k, None if k == 1 else "s" * 100), estimator)


def test_empty_material_plans_no_chunk() -> None:
    plan = plan_compaction([], episode_id=uuid(99), window=20_000, summary_target=1000,
                           safety_margin=256, estimator=ByteEstimator(), floor=1)
    assert isinstance(plan, CompactionPlan)
    assert (plan.chunks.capacity, plan.chunks.chunks) == (20_000 - 2000 - 256 - 677 - 158, ())
    # Capacity W − 1291 = 1 is still room (for nothing here).
    tight = plan_compaction([], episode_id=uuid(99), window=1292, summary_target=100,
                            safety_margin=256, estimator=ByteEstimator(), floor=1)
    assert isinstance(tight, CompactionPlan) and tight.chunks.capacity == 1


@pytest.mark.covers("CTX-8.25", "CTX-8.68")
@pytest.mark.parametrize("window", [1291, 1292, 1400])
def test_a_capacity_too_small_for_one_labelled_character_is_refused(window: int) -> None:
    # Capacity W − 1291 (see above) is 0, 1 or 109, none of them room for a record's label
    # (about 150 bytes): the episode is refused, never an exception out of planning.
    refused = plan_compaction([message(MessageRole.ASSISTANT, "x" * 10, 1)],
                              episode_id=uuid(99), window=window, summary_target=100,
                              safety_margin=256, estimator=ByteEstimator(), floor=1)
    assert refused == EpisodeRefused(
        "NO_ROOM_FOR_MATERIAL", f"a compaction request of this model (W={window}, T=100, "
        "S=256) leaves a chunk 0 tokens of material after its prompts and labels; a useful "
        "chunk carries at least 1")


@pytest.mark.covers("CTX-8.25", "CTX-8.68")
@pytest.mark.parametrize(("surcharge", "capacity", "chunks"), [(173, 400, 2), (174, 249, 3)])
def test_a_later_chunk_is_measured_with_an_empty_previous_summary(surcharge: int, capacity: int,
                                                                   chunks: int) -> None:
    # As above (W=1657, capacity 400), blocks measuring 200 and 250 (texts of 51 and 101
    # characters): [1] | [2]. Chunk 1's data block, 28 + 1 + 200 + 18 = 247, is not surcharged.
    # Chunk 2's, 39 + 1 + 1 + 26 + 1 + 28 + 1 + 250 + 18 = 365, is: 663 + 365 + s + 456 − 1657
    # = s − 173 over W, its previous summary measured empty (the reserve T stands for its
    # text). s = 173 fits exactly. s = 174 is one over at every capacity that still holds block
    # 2 whole, so the capacity steps down by 1 until 249 < 250 splits it into two labelled
    # ranges: each then measures at most 249, its data block at most 364, s − 174 ≤ 0 over.
    material = [message(MessageRole.ASSISTANT, "x" * 51, 1),
                message(MessageRole.ASSISTANT, "x" * 101, 2)]
    plan = plan_compaction(material, episode_id=uuid(99), window=1657, summary_target=100,
                           safety_margin=256, estimator=LongUserMessageEstimator(surcharge),
                           floor=1)
    assert isinstance(plan, CompactionPlan)
    assert (plan.chunks.capacity, len(plan.chunks.chunks)) == (capacity, chunks)
