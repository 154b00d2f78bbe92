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
    CompactionRequest,
    EpisodeRefused,
    RequestParts,
    Split,
    TranscriptBlock,
    cancel_episode,
    chunk_capacity,
    commit_chunk,
    complete_episode,
    fail_episode,
    fits_window,
    label_cost,
    material_key,
    next_step,
    plan_chunks,
    plan_compaction,
    purpose_key,
    request_fits,
    split_request,
    start_episode,
    summary_message,
    summary_truncated,
    transcript,
    useful_chunk_floor,
)
from ctxspec.reference.contracts import CompactionEpisode, EpisodeStatus, MessageRole
from ctxspec.reference.errors import ErrorCode
from ctxspec.reference.tokens import (
    ByteEstimator,
    EstimationRequest,
    PromptMessage,
    TokenEstimate,
)
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
    # floor=1 (one character beyond the labels): these tests are about packing; the floor of
    # a useful chunk (Q120) has tests of its own below.
    plan = plan_compaction(material, episode_id=uuid(99), window=window, summary_target=target,
                           safety_margin=margin, estimator=ByteEstimator(), floor=1,
                           custom_prompt=custom)
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
                              estimator=ByteEstimator(), floor=1)
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


def test_material_key_of_every_kind_of_message() -> None:
    run, call, input_id, record = uuid(2), uuid(50), uuid(20), uuid(6)

    def key(kind: ViewKind, record_id: UUID | None = None, input_id: UUID | None = None,
            call_id: UUID | None = None) -> str:
        return material_key(ViewMessage(role=MessageRole.SYSTEM, kind=kind, text="t",
                                        source_run_id=run, record_id=record_id,
                                        input_id=input_id, call_id=call_id))

    assert key(ViewKind.SUMMARY, record_id=record) == f"snapshot:{record}"
    assert key(ViewKind.ASSISTANT, record_id=record) == f"record:{record}"
    assert key(ViewKind.USER_REF, input_id=input_id) == f"input:{input_id}@{run}"
    assert key(ViewKind.PLACEHOLDER, call_id=call) == f"placeholder:{call}"
    assert key(ViewKind.MARKER, input_id=input_id) == f"marker:{input_id}@{run}"
    # Without the id each kind is named by, a message falls back to its kind and Run.
    assert key(ViewKind.SUMMARY) == f"summary:{run}"
    assert key(ViewKind.USER_REF) == f"user_ref:{run}"
    assert key(ViewKind.PLACEHOLDER) == f"placeholder:{run}"
    assert key(ViewKind.MARKER) == f"marker:{run}"
    assert key(ViewKind.TOOL_RESULT, call_id=call) == f"tool_result:{run}"
    assert key(ViewKind.FRAGMENT, input_id=input_id) == f"fragment:{run}"


def test_transcript_writes_out_every_tool_call() -> None:
    calls = (ToolCall(call_id=uuid(50), action_ordinal=1, name="read", arguments="{}"),
             ToolCall(call_id=uuid(51), action_ordinal=2, name="write", arguments='{"p": 1}'))
    assert transcript(message(MessageRole.ASSISTANT, "do", 1, calls=calls)) == (
        f"do\n[call {uuid(50)} #1] read({{}})\n[call {uuid(51)} #2] write({{\"p\": 1}})")


@pytest.mark.covers("CTX-8.66", "CTX-8.67")
def test_transcript_block_labels() -> None:
    whole = TranscriptBlock("record:r", "tool", "tool_result", uuid(51), "abc", 0, 3, 3)
    assert whole.render() == (f"<<<record record:r role=tool kind=tool_result call={uuid(51)}>>>"
                              "\nabc\n<<<end record record:r>>>")
    piece = TranscriptBlock("record:r", "assistant", "assistant", None, "bc", 1, 3, 5)
    assert piece.render() == ("<<<record record:r role=assistant kind=assistant chars=1-3 of 5>>>"
                              "\nbc\n<<<end record record:r>>>")


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


def test_chunk_request_refuses_a_chunk_outside_the_plan_or_a_wrong_previous_summary() -> None:
    material = [message(MessageRole.ASSISTANT, "x" * 51, n) for n in (1, 2, 3)]
    plan = plan_compaction(material, episode_id=uuid(99), window=1890, summary_target=100,
                           safety_margin=256, estimator=ByteEstimator(), floor=1)
    assert isinstance(plan, CompactionPlan) and len(plan.chunks.chunks) == 2
    with pytest.raises(ValueError, match=r"^chunk 3 is not in a plan of 2$"):
        plan.request(3, "s")
    with pytest.raises(ValueError, match=r"^chunk 1 has no previous summary; every later chunk "
                                         r"folds one$"):
        plan.request(1, "s")
    second = plan.request(2, "S1").messages[-1].text
    assert second.startswith("<<<previous summary: chunks 1-1 of 2>>>\nS1\n"
                             "<<<end previous summary>>>\n<<<material: chunk 2 of 2>>>\n")


@pytest.mark.covers("CTX-8.62", "CTX-8.47")
def test_episode_refusals_say_why_and_one_token_of_material_is_enough() -> None:
    first = running()
    assert first.revision == 1
    assert episode(existing=(first,)) == EpisodeRefused(
        "EPISODE_EXISTS", "this business operation already had its compaction; no second one")
    assert episode(material=0, op=71) == EpisodeRefused("NO_COMPRESSIBLE_MATERIAL",
                                                        "nothing to compact")
    assert isinstance(episode(material=1, op=72), CompactionEpisode)


@pytest.mark.covers("CTX-8.70", "CTX-8.73", "CTX-8.79", "CTX-8.11")
def test_every_episode_transition_moves_the_revision_by_one() -> None:
    state = running()
    committed = commit_chunk(state, 1, ref("S1"), uuid(81))
    assert isinstance(committed, CompactionEpisode)
    assert (committed.chunk_cursor, committed.accumulated_summary_ref,
            committed.current_operation_id, committed.revision) == (1, ref("S1"), uuid(81), 2)
    assert commit_chunk(committed, 3, ref("S3"), uuid(83)) == EpisodeRefused(
        "OUT_OF_ORDER", "the next chunk is 2, not 3")
    assert complete_episode(committed, 3, uuid(90)) == EpisodeRefused(
        "OUT_OF_ORDER", "2 chunk(s) are not committed yet")
    done = complete_episode(committed, 1, uuid(90))
    assert isinstance(done, CompactionEpisode)
    assert (done.status, done.revision) == (EpisodeStatus.SUCCEEDED, 3)
    failed, _ = fail_episode(committed)
    assert (failed.status, failed.revision) == (EpisodeStatus.FAILED, 3)
    cancelled = cancel_episode(committed)
    assert (cancelled.status, cancelled.revision) == (EpisodeStatus.CANCELLED, 3)
    for ended in (failed, cancelled):
        reason = f"the episode is {ended.status.value}"
        assert commit_chunk(ended, 2, ref("S2"), uuid(82)) == EpisodeRefused("NOT_RUNNING", reason)
        assert complete_episode(ended, 1, uuid(90)) == EpisodeRefused("NOT_RUNNING", reason)


@pytest.mark.covers("CTX-8.73", "CTX-9.38")
def test_the_last_chunk_is_called_before_the_episode_finishes() -> None:
    first = commit_chunk(running(), 1, ref("S1"), uuid(81))
    assert isinstance(first, CompactionEpisode)
    state = commit_chunk(first, 2, ref("S2"), uuid(82))
    assert isinstance(state, CompactionEpisode)
    assert next_step(state, 3, {}) == ("call_model", 3)
    assert next_step(state, 2, {}) == ("finish", 2)


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
