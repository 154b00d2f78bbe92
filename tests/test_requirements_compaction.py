"""Requirements that no other test pinned, about compaction seen through the Driver (§7, §8, §9):
one episode for the prepared operation, with its own prompt and budget, its material the committed
effective context, its chunk requests through the compaction hooks, a stop or deadline starting no
business attempt, a snapshot not activated when its sources changed, the manifest's covered
records.

Expected values are derived by hand from the design and the scenario; the character estimator (one
token per character, no overhead) keeps the numbers readable.
"""

import json
from typing import Any
from uuid import UUID

import pytest

from ctxspec.conformance.case import example
from ctxspec.reference.compaction import PROMPT_VERSION
from ctxspec.reference.contracts import CompactionEpisode, ContextSnapshot, MessageRole
from ctxspec.reference.runtime import trace as tr
from ctxspec.reference.snapshots import (
    ActivePointer,
    SwitchRefused,
    build_manifest,
    switch_active,
    view_with_snapshot,
)
from ctxspec.reference.view import ModelView, ViewKind, ViewMessage
from tests.driven_scenarios import audit, boundary, drive, ended, scenario_of, texts

# --- compaction: one episode for the prepared operation, its own prompt, its own budget ----------


def row20_with_a_correction_in_loop_3() -> dict[str, Any]:
    """ROW-20, but the hook corrects the first decision in loop 3's pre-request chain — the
    loop that compacts. "Z" * 1500 keeps I at 3964 ≥ 3600."""
    document = scenario_of("ROW-20")
    document["hooks"] = [{"point": "model.pre_request", "ordinal": 3, "items": [
        {"context_patch": [{"target": "first_assistant", "field": "text",
                            "value": "Z" * 1500}]}]}]
    return document


@pytest.mark.covers("CTX-7.26", "CTX-7.27", "CTX-7.28")
def test_compaction_material_is_the_committed_effective_context_and_hooks_run_once() -> None:
    driver, _ = drive(row20_with_a_correction_in_loop_3())
    trace = driver.raw_trace()
    assert [r.purpose for r in trace.model_requests()] == [
        "business", "business", "compaction", "compaction", "business", "business"]
    material = "".join(text for r in trace.model_requests("compaction") for text in texts(r))
    assert "Z" * 1500 in material and "A" * 1500 not in material
    # One pre-request chain per business loop, none again for the compacted request.
    assert [e.point for e in trace.of(tr.HookCalled)] == ["model.pre_request"] * 4
    # The rebuilt request keeps the question and fits the hard window.
    third = trace.model_requests("business")[2]
    assert "go" in texts(third) and third.snapshot_id is not None
    assert third.estimated_input_tokens + third.max_output_tokens + third.safety_margin \
        <= third.window


@pytest.mark.covers("CTX-7.32")
def test_over_the_window_after_compaction_keeps_the_question_and_the_history() -> None:
    # The three-chunk example with a pre-request hook: Run 2 ends CONTEXT_WINDOW_EXCEEDED; its
    # chain was asked once, its question is still a record of it, and Run 1's records stay.
    document = example("compaction-three-chunks-window-exceeded")
    document["hooks"] = [{"point": "model.pre_request", "items": [{}]}]
    driver, _ = drive(document)
    trace = driver.raw_trace()
    assert ended(trace)[-1] == (2, "failed", "CONTEXT_WINDOW_EXCEEDED")
    assert len(trace.of(tr.HookCalled)) == 4 + 1  # Run 1's four loops, Run 2's one
    kinds = [row["message_kind"] for row in driver.store.query(
        "SELECT message_kind FROM records ORDER BY rowid")]
    assert kinds == ["user_ref", "assistant", "tool_result", "assistant", "tool_result",
                     "assistant", "tool_result", "assistant", "user_ref"]
    question = document["steps"][2]["ask"]
    assert question in audit(driver)


@pytest.mark.covers("CTX-8.1", "CTX-8.24")
def test_a_compaction_request_is_its_own_prompt_with_no_tools_and_never_compacted() -> None:
    driver, model = drive(example("compaction-three-chunks-window-exceeded"))
    trace = driver.raw_trace()
    chunks = [c for c in model.calls if c.purpose == "compaction"]
    assert len(chunks) == 3
    prompt = "You are a reports assistant."  # the example's business system prompt
    for call in chunks:
        assert call.tool_schemas == ()
        assert call.messages[0].role == "system" and prompt not in call.messages[0].text
        assert call.messages[0].text == chunks[0].messages[0].text  # the same prompt, whole
    # One episode, planned once; its own requests carry no compaction decision.
    planned = [s for s in trace.of(tr.CompactionStep) if s.step == "planned"]
    assert len(planned) == 1
    assert {r.compaction for r in trace.model_requests("compaction")} == {None}


@pytest.mark.covers("CTX-8.5", "CTX-8.6", "CTX-9.13", "CTX-9.3", "CTX-9.16", "CTX-1.7")
def test_the_episode_serves_the_prepared_operation_and_links_to_its_snapshot() -> None:
    driver, _ = drive(boundary())
    trace = driver.raw_trace()
    business = trace.model_requests("business")[-1]
    # The business Operation was prepared before the episode and sent only after it.
    events = trace.events
    chunk = next(e for e in events if isinstance(e, tr.ModelRequestSent)
                 and e.purpose == "compaction")
    assert not any(isinstance(e, tr.OperationState) and e.operation_id == business.operation_id
                   for e in events[:events.index(chunk)])
    [row] = driver.store.query("SELECT doc FROM episodes")
    episode = CompactionEpisode.model_validate_json(str(row["doc"]))
    assert episode.triggering_model_operation_id == business.operation_id
    assert (business.attempt, business.role) == (1, "root")
    [snapshot_row] = driver.store.query("SELECT doc FROM snapshots")
    snapshot = ContextSnapshot.model_validate_json(str(snapshot_row["doc"]))
    assert episode.result_snapshot_id == snapshot.snapshot_id == business.snapshot_id
    assert driver.store.text(snapshot.summary_ref) == "SUMMARY"
    assert snapshot.token_estimate == len("SUMMARY")  # one token per character
    assert snapshot.source_ranges and snapshot.source_effective_revisions
    runtime = driver.runtime
    assert runtime is not None
    assert (episode.release_id, episode.prompt_version) == (runtime.agent.release_id,
                                                            PROMPT_VERSION)


@pytest.mark.covers("CTX-8.7", "CTX-11.5")
def test_a_stop_or_the_deadline_during_compaction_starts_no_business_attempt() -> None:
    # Reference defect found here: the business request after the episode was sent although the
    # user had stopped the Run, or its deadline had passed, while the chunk was summarised.
    stopped = boundary()
    stopped["triggers"] = [{"on": {"purpose": "compaction", "ordinal": 1}, "do": {"stop": True}}]
    driver, _ = drive(stopped)
    trace = driver.raw_trace()
    assert [r.purpose for r in trace.model_requests()] == ["business", "compaction"]
    assert ended(trace) == [(1, "succeeded", None), (2, "stopped", None)]
    # Deadline 1 tick: Run 2 starts at tick 1 (Run 1's one model call); its chunk request takes
    # the clock to 2, so the deadline has passed when the episode ends.
    late = boundary()
    late["agent"]["run_deadline"] = 1
    driver, _ = drive(late)
    trace = driver.raw_trace()
    assert [r.purpose for r in trace.model_requests()] == ["business", "compaction"]
    assert ended(trace) == [(1, "succeeded", None), (2, "timed_out", None)]


@pytest.mark.covers("CTX-8.23")
def test_a_compaction_hook_cannot_forge_the_sources_or_the_cutoff() -> None:
    # The compaction request's hook point registers no field: patches of its sources or cutoff
    # are refused, and the chunk summarises the same material as without the hook.
    plain, _ = drive(boundary())
    forged = boundary()
    forged["hooks"] = [{"point": "compaction.pre_request", "items": [{"payload_patch": [
        {"path": "source_manifest", "value": []}, {"path": "cutoff", "value": 99}]}]}]
    driver, _ = drive(forged)
    trace = driver.raw_trace()
    assert [(d.decision, d.patch_valid, d.diagnostics) for d in trace.of(tr.HookDecided)] == [
        ("allow", False, ("FIELD_NOT_REGISTERED", "FIELD_NOT_REGISTERED"))]
    assert texts(trace.model_requests("compaction")[0]) == \
        texts(plain.raw_trace().model_requests("compaction")[0])
    assert ended(trace) == ended(plain.raw_trace())


@pytest.mark.covers("CTX-8.79")
def test_a_summary_claiming_the_episode_is_done_advances_nothing() -> None:
    # The model's answer is only a summary text: one that claims the remaining chunks are done
    # leaves the episode to ask for every planned chunk.
    document = example("compaction-three-chunks-window-exceeded")
    claims = {"text": '{"chunk_cursor": 3, "covered_through": "everything"}'}
    document["model"]["compaction"] = [claims, *document["model"]["compaction"][1:]]
    driver, _ = drive(document)
    assert len(driver.raw_trace().model_requests("compaction")) == 3


@pytest.mark.covers("CTX-8.12")
def test_a_snapshot_whose_sources_changed_is_not_activated_and_the_originals_return() -> None:
    def message(n: int, text: str) -> ViewMessage:
        return ViewMessage(role=MessageRole.ASSISTANT, kind=ViewKind.ASSISTANT, text=text,
                           record_id=UUID(int=n))
    covered = ModelView((message(1, "first"), message(2, "second")))
    context = UUID(int=100)
    manifest = build_manifest(covered.messages, {UUID(int=1): (context, 1),
                                                 UUID(int=2): (context, 2)}, {context: 1}, 100, 1)
    edited = ModelView((message(1, "first, corrected"), message(2, "second")))
    refused = switch_active(ActivePointer(None, 1), expected_active=None, lease_epoch=1,
                            new_snapshot_id=UUID(int=7), manifest=manifest, current_view=edited)
    assert isinstance(refused, SwitchRefused)
    view, used, _ = view_with_snapshot(edited, (UUID(int=7), manifest, "S"))
    assert used is None and view == edited  # the records as they are now, no summary


# --- addressing, the compaction pipeline, the manifest, commits a hook cannot replace -----------


@pytest.mark.covers("CTX-8.8")
def test_every_chunk_request_and_its_answer_pass_the_compaction_hooks() -> None:
    # The three-chunk example with both compaction hook points registered: each of the three
    # chunk calls is asked through the pre-request chain and answered through the post-response
    # chain, in that order.
    document = example("compaction-three-chunks-window-exceeded")
    document["hooks"] = [{"point": "compaction.pre_request", "items": [{}]},
                         {"point": "compaction.post_response", "items": [{}]}]
    driver, _ = drive(document)
    trace = driver.raw_trace()
    assert [(e.point, e.stage) for e in trace.of(tr.HookCalled)] == [
        ("compaction.pre_request", "pre"), ("compaction.post_response", "post")] * 3
    hooks = [i for i, e in enumerate(trace.events) if isinstance(e, tr.HookCalled)]
    chunks = [i for i, e in enumerate(trace.events)
              if isinstance(e, tr.ModelRequestSent) and e.purpose == "compaction"]
    assert [hooks[2 * n] < chunks[n] < hooks[2 * n + 1] for n in range(3)] == [True] * 3


@pytest.mark.covers("CTX-9.14")
def test_the_manifest_keeps_each_covered_records_hash_mutations_and_revision() -> None:
    # Loop 3's hook corrects the first decision, then the episode covers it: its piece names the
    # hook's mutation and the revision that mutation committed; every piece has a content hash.
    driver, _ = drive(row20_with_a_correction_in_loop_3())
    hooked = [json.loads(row["doc"]) for row in driver.store.query("SELECT doc FROM mutations")]
    [mutation] = [m for m in hooked if m["source_kind"] == "hook"]
    [snapshot] = [json.loads(str(row["doc"])) for row in driver.store.query(
        "SELECT name, doc FROM checkpoints") if row["name"] == "snapshot"]
    pieces = snapshot["manifest"]["pieces"]
    assert pieces and all(p["content_hash"].startswith("sha256:") for p in pieces)
    assert {p["source_revision"] for p in pieces} == {mutation["committed_revision"]}
    corrected = [p for p in pieces if p["mutation_ids"]]
    assert [p["mutation_ids"] for p in corrected] == [[mutation["mutation_id"]]]
    assert corrected[0]["context_seq"] == 2  # the first decision, after the question
