"""§8 compaction, the episode (with §9's snapshot and §10's recovery): one per business operation,
resumed after a crash at the next chunk, failed by a failed chunk and cancelled by a stop, each
transition moving the revision by one, and a summary that reaches its target accepted as truncated.

Expected values by hand.
"""

import pytest

from ctxspec.reference.compaction import (
    ChunkProgress,
    EpisodeRefused,
    cancel_episode,
    commit_chunk,
    complete_episode,
    fail_episode,
    next_step,
    summary_truncated,
)
from ctxspec.reference.contracts import CompactionEpisode, EpisodeStatus
from ctxspec.reference.errors import ErrorCode
from tests.builders import ref, uuid
from tests.compaction_material import episode

# --- the episode ----------------------------------------------------------------------------------


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


# --- boundaries the mutation run (docs/mutation.md) showed untested ------------------------------


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
