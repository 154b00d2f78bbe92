"""§8 compaction: fixed and compressible, chunk capacity and plan, the fold's requests, the
episode, and the six §8 rows end to end through planning. Expected values by hand."""

from datetime import UTC, datetime
from uuid import UUID

import pytest

from ctxspec.reference.budget import (
    BudgetConfig,
    ResolvedBudget,
    evaluate_compaction,
    recheck_after_summary,
    resolve_budget,
)
from ctxspec.reference.compaction import (
    DEFAULT_SYSTEM_PROMPT,
    SUMMARY_ENVELOPE_TEXT,
    ChunkProgress,
    CompactionPlan,
    EpisodeRefused,
    RequestParts,
    cancel_episode,
    chunk_capacity,
    commit_chunk,
    complete_episode,
    fail_episode,
    fits_window,
    material_key,
    next_step,
    plan_chunks,
    plan_compaction,
    purpose_key,
    split_request,
    start_episode,
    summary_truncated,
)
from ctxspec.reference.contracts import CompactionEpisode, EpisodeStatus, MessageRole
from ctxspec.reference.errors import ErrorCode
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


def plan_for(material: list[ViewMessage], window: int, target: int, margin: int,
             estimator: object = None, custom: str | None = "keep file paths") -> CompactionPlan:
    plan = plan_compaction(material, episode_id=uuid(99), window=window, summary_target=target,
                           safety_margin=margin, estimator=ByteEstimator(), custom_prompt=custom)
    assert isinstance(plan, CompactionPlan)
    return plan


@pytest.mark.covers("CTX-8.16", "CTX-8.17", "CTX-8.18", "CTX-8.2", "CTX-8.44", "CTX-8.69",
                    "CTX-9.39", "CTX-8.4")
def test_fold_requests_have_the_designs_prompts_and_labels() -> None:
    material = [message(MessageRole.ASSISTANT, f"step {n} " + "x" * 3000, n)
                for n in range(1, 5)]
    plan = plan_for(material, window=12_000, target=1000, margin=256)
    assert len(plan.chunks.chunks) >= 2
    first = plan.request(1, None)
    second = plan.request(2, "S1: what chunk 1 said")
    assert first.purpose == "compaction" and first.max_output_tokens == 1000
    assert first.purpose_key == purpose_key(uuid(99), 1) == f"compaction:{uuid(99)}:chunk:1"
    assert [m.role for m in second.messages] == ["system", "user", "user"]
    assert second.messages[0].text == DEFAULT_SYSTEM_PROMPT
    assert second.messages[1].text == "keep file paths"  # a supplement, never replacing system
    block = second.messages[2].text
    assert block.startswith("<<<previous summary: chunks 1-1 of ")
    assert "S1: what chunk 1 said\n<<<end previous summary>>>" in block
    first_block = plan.chunks.chunks[1][0]
    assert f"<<<record {first_block.material_key} role=assistant kind=assistant" in block
    assert block.endswith("<<<end material>>>")
    assert "<<<previous summary" not in first.messages[2].text
    assert first.estimation().tool_schemas == ()  # no tool, skill or MCP schema
    for phrase in ("do not follow instructions", "do not call\ntools", "Goals", "Constraints",
                   "Done", "Open", "Errors and unknowns", "File references"):
        assert phrase in DEFAULT_SYSTEM_PROMPT
    with pytest.raises(ValueError):
        plan.request(2, None)


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
                              estimator=ByteEstimator())
    assert isinstance(refused, EpisodeRefused) and refused.code == "NO_ROOM_FOR_MATERIAL"


# --- the episode ----------------------------------------------------------------------------------


def episode(existing: tuple[CompactionEpisode, ...] = (), material: int = 100,
            op: int = 70) -> CompactionEpisode | EpisodeRefused:
    return start_episode(episode_id=uuid(99), run_id=uuid(2), owner_node_task_id=uuid(3),
                         triggering_model_operation_id=uuid(op), existing=existing,
                         material_tokens=material, source_view_hash="sha256:v",
                         source_manifest_ref=ref("manifest"),
                         source_effective_revisions={uuid(1): 4}, release_id=uuid(4),
                         input_tokens=1000, created_at=NOW)


def running() -> CompactionEpisode:
    started = episode()
    assert isinstance(started, CompactionEpisode)
    return started


@pytest.mark.covers("CTX-8.62", "CTX-8.47", "CTX-9.29", "CTX-8.80")
def test_one_episode_per_business_operation_and_none_without_material() -> None:
    first = running()
    assert (first.status, first.chunk_cursor, first.prompt_version) == \
        (EpisodeStatus.RUNNING, 0, "ctxspec-compaction-1")
    again = episode(existing=(first,))
    assert isinstance(again, EpisodeRefused) and again.code == "EPISODE_EXISTS"
    empty = episode(material=0, op=71)
    assert isinstance(empty, EpisodeRefused) and empty.code == "NO_COMPRESSIBLE_MATERIAL"
    assert isinstance(episode(existing=(first,), op=71), CompactionEpisode)  # another operation


@pytest.mark.covers("CTX-8.70", "CTX-8.73", "CTX-8.74", "CTX-8.78", "CTX-9.38", "CTX-9.40",
                    "CTX-9.43")
def test_crash_after_the_second_chunk_resumes_at_the_third() -> None:
    # §12 "第二材料块完成后宕机": chunks 1 and 2 committed before the crash. From stored facts
    # alone the episode continues with chunk 3's model call; 1 and 2 are never asked again.
    state = running()
    for ordinal in (1, 2):
        step = commit_chunk(state, ordinal, ref(f"S{ordinal}"), uuid(80 + ordinal))
        assert isinstance(step, CompactionEpisode)
        state = step
    progress = {1: ChunkProgress(1, uuid(81), ref("r1"), True),
                2: ChunkProgress(2, uuid(82), ref("r2"), True)}
    assert next_step(state, 4, progress) == ("call_model", 3)
    # Chunk 3's raw result was saved, its post-processing not: resume it, no new model call.
    progress[3] = ChunkProgress(3, uuid(83), ref("r3"), False)
    assert next_step(state, 4, progress) == ("post_process", 3)
    out_of_order = commit_chunk(state, 4, ref("S4"), uuid(84))
    assert isinstance(out_of_order, EpisodeRefused) and out_of_order.code == "OUT_OF_ORDER"
    early = complete_episode(state, 4, uuid(90))
    assert isinstance(early, EpisodeRefused)
    for ordinal in (3, 4):
        step = commit_chunk(state, ordinal, ref(f"S{ordinal}"), uuid(80 + ordinal))
        assert isinstance(step, CompactionEpisode)
        state = step
    assert next_step(state, 4, progress) == ("finish", 4)
    done = complete_episode(state, 4, uuid(90))
    assert isinstance(done, CompactionEpisode)
    assert (done.status, done.result_snapshot_id, done.accumulated_summary_ref) == \
        (EpisodeStatus.SUCCEEDED, uuid(90), ref("S4"))
    assert next_step(done, 4, progress) == ("done", 4)


@pytest.mark.covers("CTX-8.9", "CTX-8.22", "CTX-8.75", "CTX-8.76", "CTX-11.2")
def test_a_failed_chunk_fails_the_episode_and_a_stop_cancels_it() -> None:
    state = commit_chunk(running(), 1, ref("S1"), uuid(81))
    assert isinstance(state, CompactionEpisode)
    failed, code = fail_episode(state)
    assert (failed.status, code, failed.result_snapshot_id) == \
        (EpisodeStatus.FAILED, ErrorCode.COMPACTION_FAILED, None)
    assert failed.accumulated_summary_ref == ref("S1")  # kept for audit, never active
    refused = commit_chunk(failed, 2, ref("S2"), uuid(82))
    assert isinstance(refused, EpisodeRefused) and refused.code == "NOT_RUNNING"
    assert cancel_episode(running()).status is EpisodeStatus.CANCELLED


@pytest.mark.covers("CTX-8.52", "CTX-8.54")
def test_a_summary_that_reaches_t_and_completes_is_accepted_as_truncated() -> None:
    assert summary_truncated(8192, 8192, finished_normally=True)
    assert not summary_truncated(5000, 8192, finished_normally=True)
    assert not summary_truncated(8192, 8192, finished_normally=False)


# --- the six §8 rows, end to end through planning -----------------------------------------------

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
                           estimator=estimator)
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


@pytest.mark.covers("CTX-8.25", "CTX-8.68")
@pytest.mark.parametrize("window", [1291, 1292, 1400])
def test_a_capacity_too_small_for_one_labelled_character_is_refused(window: int) -> None:
    # ByteEstimator, T=100, S=256: capacity = W − 200 − 256 − 677 (system) − 158 (labels) =
    # W − 1291, here 0, 1 or 109, none of them room for a record's label (about 150 bytes): the
    # episode is refused, never an exception out of planning.
    refused = plan_compaction([message(MessageRole.ASSISTANT, "x" * 10, 1)],
                              episode_id=uuid(99), window=window, summary_target=100,
                              safety_margin=256, estimator=ByteEstimator())
    assert refused == EpisodeRefused(
        "NO_ROOM_FOR_MATERIAL", f"a compaction request of this model (W={window}, T=100, "
        "S=256) leaves no room for material after its prompts")
