"""Requirements that no other test pinned, about recovery (§9, §10): a crash after the snapshot
commit goes on with the same prepared operation, after a takeover the old summary never hides a
committed correction, checkpoints hold positions and ids, and a new session starts with nothing of
another.

Expected values are derived by hand from the design and the scenario; the character estimator (one
token per character, no overhead) keeps the numbers readable.
"""

import json

import pytest

from ctxspec.conformance.case import example
from ctxspec.reference.contracts import CompactionEpisode
from ctxspec.reference.runtime import trace as tr
from ctxspec.reference.runtime.store import TABLES
from tests.driven_scenarios import base, boundary, drive, ended, lines, scenario_of, texts

# --- recovery ------------------------------------------------------------------------------------


@pytest.mark.covers("CTX-9.42", "CTX-10.3")
def test_a_crash_after_the_snapshot_commit_goes_on_with_the_same_prepared_operation() -> None:
    # The summary is committed, the business request not yet sent: the takeover sends the
    # prepared Operation (not a new one, the snapshot does not count as the step done), with
    # the same messages, and asks neither the pre-request chain nor the compaction again.
    document = boundary()
    document["hooks"] = [{"point": "model.pre_request", "ordinal": 2, "items": [{}]}]
    plain, _ = drive(document)
    crashed, _ = drive({**document, "crash": {"commit": "SNAPSHOT_COMMITTED", "occurrence": 1,
                                              "when": "after"}})
    trace = crashed.raw_trace()
    assert len(trace.of(tr.Restarted)) == 1
    assert [r.purpose for r in trace.model_requests()] == ["business", "compaction", "business"]
    [row] = crashed.store.query("SELECT doc FROM episodes")
    episode = CompactionEpisode.model_validate_json(str(row["doc"]))
    last = trace.model_requests("business")[-1]
    assert episode.triggering_model_operation_id == last.operation_id
    assert (last.purpose_key, last.attempt) == (f"model:{last.operation_id}", 1)
    assert lines(last) == lines(plain.raw_trace().model_requests("business")[-1])
    assert len(trace.of(tr.HookCalled)) == 2  # one chain per loop, none again
    assert ended(trace) == [(1, "succeeded", None), (2, "succeeded", None)]


@pytest.mark.covers("CTX-10.8")
def test_after_a_takeover_the_old_summary_never_hides_a_committed_correction() -> None:
    # ROW-20 with a crash just before loop 4 is frozen (after the hook corrected a covered
    # record): the restored run re-materialises the covered records as they are now.
    document = {**scenario_of("ROW-20"),
                "crash": {"commit": "T_FREEZE", "occurrence": 4, "when": "before"}}
    driver, _ = drive(document)
    trace = driver.raw_trace()
    assert len(trace.of(tr.Restarted)) == 1
    fourth = trace.model_requests("business")[-1]
    assert (fourth.snapshot_id, fourth.compaction) == (None, "below_trigger")
    assert "A, corrected" in texts(fourth) and not any("SUM" in t for t in texts(fourth))


@pytest.mark.covers("CTX-10.1")
def test_checkpoints_hold_positions_and_ids_never_copies_of_messages() -> None:
    driver, _ = drive(example("tool-batch-hook"))
    words = ["Write the report and read my notes.", "wrote 6 bytes to reports/a.md",
             "ship on Friday", "Written to reports/a.md; your notes say: ship on Friday."]
    docs = [str(row["doc"]) for row in driver.store.query("SELECT doc FROM checkpoints")]
    assert docs
    assert not any(word in doc for doc in docs for word in words)
    loop = [json.loads(d) for d in docs if '"stage"' in d]
    assert loop and all("stage" in d and "loops" in d for d in loop)


@pytest.mark.covers("CTX-10.30", "CTX-10.31")
def test_a_new_session_starts_with_nothing_of_another() -> None:
    # Two Sessions of one Agent: the second one's request is its prompt and question only, and
    # a file the first one's tool left in a persistent workspace is not read into it.
    document = base(tools=[{"name": "save"}], persistent_sandbox=True)
    document["steps"] = [{"ask": "I prefer tabs"}, {"advance": True}]
    document["model"] = {"business": [{"text": "", "tool_calls": [{"name": "save"}]},
                                      {"text": "noted"}]}
    document["tools"] = {"save": [{"text": "saved", "workspace_writes": {"prefs.md": "tabs"}}]}
    first, _ = drive(document)
    assert first.workspace() == {"prefs.md": "tabs"}
    other = base()
    other["steps"] = [{"ask": "format this"}, {"advance": True}]
    other["model"] = {"business": [{"text": "ok"}]}
    second, _ = drive(other)
    [request] = second.raw_trace().model_requests()
    assert lines(request) == [("system", "system_prompt", "sys"),
                              ("user", "user_ref", "format this")]
    # No table outside the Session's own facts was written: nothing like a memory of the user.
    assert not any("memory" in name or "preference" in name for name in TABLES)
