"""§12 fault rows 9, 10, 13, 14 and 21-25 as scenarios through the Driver; expected values are
derived by hand from the design and the scripted examples (rows 12 and 14's stream rules are
also in tests/test_scenarios.py)."""

import json
from typing import Any

import pytest

from ctxspec.conformance.case import example
from ctxspec.conformance.driver import ReferenceDriver, run_scenario
from ctxspec.conformance.scenario import parse_scenario
from ctxspec.reference.runtime import trace as tr
from ctxspec.reference.runtime.runtime import AccessDenied


def drive(document: dict[str, Any]) -> ReferenceDriver:
    driver = ReferenceDriver()
    run_scenario(parse_scenario(document), lambda: driver)
    return driver


def crash(commit: str, occurrence: int, when: str) -> dict[str, Any]:
    return {"crash": {"commit": commit, "occurrence": occurrence, "when": when}}


def statuses(driver: ReferenceDriver) -> list[tuple[int, str, str | None]]:
    """(run_no, status, error code) as stored: the trace of a dead runtime may hold an end it
    never committed."""
    return [(row["run_no"], row["status"], json.loads(row["doc"]).get("error_code"))
            for row in driver.store.query("SELECT run_no, status, doc FROM runs ORDER BY run_no")]


COMPACTION = "compaction-three-chunks-window-exceeded"
"""Run 1 fetches three reports; Run 2's question does not fit, so an episode summarises the
three loops in three chunks (S1, S2, S3); S3 is still too long, so Run 2 fails with
CONTEXT_WINDOW_EXCEEDED without a business request (docs/examples)."""


@pytest.mark.covers("CTX-10.9", "CTX-8.74")
def test_row9_after_the_second_chunk_the_same_episode_goes_on_with_the_third() -> None:
    driver = drive({**example(COMPACTION), **crash("CHUNK_COMMITTED", 2, "after")})
    trace = driver.raw_trace()
    chunks = trace.model_requests("compaction")
    # Three chunks, each asked once, with three different purpose keys — chunks 1 and 2 were
    # committed before the crash and are not asked again.
    assert len(chunks) == 3 and len({r.purpose_key for r in chunks}) == 3
    restarted = trace.events.index(trace.of(tr.Restarted)[0])
    assert trace.events.index(chunks[1]) < restarted < trace.events.index(chunks[2])
    # One episode all along, and no business Loop counted for the compaction: Run 2 sends no
    # business request at all (4 business requests, all Run 1's).
    assert len({step.episode_id for step in trace.of(tr.CompactionStep)}) == 1
    assert len(trace.model_requests("business")) == 4
    assert statuses(driver) == [(1, "succeeded", None), (2, "failed", "CONTEXT_WINDOW_EXCEEDED")]


@pytest.mark.covers("CTX-10.10", "CTX-9.45")
def test_row10_a_crash_before_the_summary_commit_loses_no_history() -> None:
    driver = drive({**example(COMPACTION), **crash("SNAPSHOT_COMMITTED", 1, "before")})
    trace = driver.raw_trace()
    assert len(trace.model_requests("compaction")) == 3  # the committed chunks are reused
    # Every record of Run 1 is still there (question, 3 decisions, 3 results, final answer)
    # plus Run 2's question; the summary is one snapshot, written once.
    kinds = [row["message_kind"] for row in driver.store.query(
        "SELECT message_kind FROM records ORDER BY rowid")]
    assert kinds == ["user_ref", "assistant", "tool_result", "assistant", "tool_result",
                     "assistant", "tool_result", "assistant", "user_ref"]
    assert driver.store.count("snapshots") == 1
    assert statuses(driver) == [(1, "succeeded", None), (2, "failed", "CONTEXT_WINDOW_EXCEEDED")]


@pytest.mark.covers("CTX-5.23", "CTX-5.24")
def test_row13_a_claimed_supplement_without_first_output_goes_to_the_next_question() -> None:
    document = {
        "scenario_version": 1, "name": "row13",
        "agent": {"window": 4000, "estimator": "chars", "model_attempts": 2},
        "steps": [{"ask": "q1"}, {"supplement": "use metric units"}, {"advance": True},
                  {"ask": "q2"}, {"advance": True}],
        "model": {"business": [{"fail": "reset"}, {"fail": "reset"}, {"text": "done"}]}}
    driver = drive(document)
    trace = driver.raw_trace()
    assert statuses(driver) == [(1, "failed", "MODEL_FAILED"), (2, "succeeded", None)]
    [supplement] = [row["input_id"] for row in driver.store.query(
        "SELECT input_id FROM user_inputs WHERE kind = 'supplement'")]
    moves = [e.state for e in trace.of(tr.DeliveryChanged) if str(e.input_id) == supplement]
    # Claimed by Run 1's request; Run 1 ends with no first output, so the claim is carried and
    # a new pending delivery (same UserInput) waits; Run 2's question binds it, its request
    # claims it and its first output delivers it — once.
    assert moves == ["pending", "claimed", "pending", "carried", "pending", "claimed",
                     "delivered"]
    sent = [m.text for m in trace.model_requests("business")[-1].view.messages]
    assert sum("use metric units" in text for text in sent) == 1
    assert driver.store.count("user_inputs") == 3


@pytest.mark.covers("CTX-5.19", "CTX-11.7", "CTX-11.8")
def test_row14_a_first_output_then_a_break_runs_no_tool_and_fakes_no_message() -> None:
    document = {
        "scenario_version": 1, "name": "row14",
        "agent": {"window": 4000, "estimator": "chars", "model_attempts": 1,
                  "tools": [{"name": "deploy"}]},
        "steps": [{"ask": "deploy it"}, {"advance": True}],
        "model": {"business": [{"partial": '{"name": "deploy", "argum', "fail": "reset"}]},
        "tools": {"deploy": []}}
    driver = drive(document)
    trace = driver.raw_trace()
    assert statuses(driver) == [(1, "failed", "MODEL_FAILED")]
    assert trace.of(tr.ToolExecuted) == []  # a fragment of arguments is never executed
    assert [e.state for e in trace.of(tr.DeliveryChanged)][-1] == "delivered"  # evidence kept
    assert all("argum" not in e.detail for e in trace.of(tr.ClientEvent))  # no token events
    rows = driver.store.query("SELECT message_kind, content FROM records ORDER BY rowid")
    assert [row["message_kind"] for row in rows] == ["user_ref", "assistant"]
    assert json.loads(rows[1]["content"])["incomplete"] is True  # not a complete message


@pytest.mark.covers("CTX-10.6", "CTX-10.7", "CTX-10.12")
@pytest.mark.parametrize(("row", "commit", "when"), [
    (21, "RAW_RESULT_SAVED", "after"), (22, "TOOL_SETTLED", "after"),
    (23, "BATCH_FEEDBACK", "after")])
def test_rows21_23_a_crash_after_a_saved_step_repeats_nothing(row: int, commit: str,
                                                             when: str) -> None:
    # tool-batch-hook: one decision with two calls (write, read), a pre-call hook that moves
    # write's path to reports/a.md, then the final answer. Two business requests, two tools.
    driver = drive({**example("tool-batch-hook"), **crash(commit, 1, when)})
    trace = driver.raw_trace()
    assert len(trace.model_requests("business")) == 2
    assert sorted(str(e.name) for e in trace.of(tr.ToolExecuted)) == ["read", "write"]
    assert [e.effective_arguments.get("path") for e in trace.of(tr.ToolExecuted)
            if e.name == "write"] == ["reports/a.md"]
    kinds = [row["message_kind"] for row in driver.store.query(
        "SELECT message_kind FROM records ORDER BY rowid")]
    # One feedback: the two results once each, after the decision and before the answer.
    assert kinds == ["user_ref", "assistant", "tool_result", "tool_result", "assistant"]
    assert statuses(driver) == [(1, "succeeded", None)]


@pytest.mark.covers("CTX-1.14", "CTX-1.15")
def test_row24_working_files_go_at_run_end_and_deleting_the_agent_removes_its_records() -> None:
    document = example("tool-batch-hook")
    document["tools"]["write"][0]["workspace_writes"] = {"reports/a.md": "report"}
    driver = drive(document)
    assert driver.workspace() == {}
    assert driver.stored_rows() > 0
    assert driver.store.count("records") == 5 and driver.store.count("blobs") > 0
    driver.delete_agent()
    assert driver.stored_rows() == 0


@pytest.mark.covers("CTX-11.15")
def test_row25_the_history_api_serves_only_its_own_session_and_authorised_roles() -> None:
    driver = drive(example("tool-batch-hook"))
    own = driver.session_id()
    assert [r["message_kind"] for r in driver.read_history(own, "role", "root")] == [
        "user_ref", "assistant", "tool_result", "tool_result", "assistant"]
    refused = r"^not authorised to read this history$"  # the same words, naming nothing
    with pytest.raises(AccessDenied, match=refused):
        driver.read_history(own, "role", "executor")
    with pytest.raises(AccessDenied, match=refused):
        driver.read_history(own, "script")
    with pytest.raises(AccessDenied, match=refused):
        driver.read_history(own, "script", "root")
    stranger = drive({**example("tool-batch-hook"), "name": "another Session"})
    assert stranger.session_id() != own
    with pytest.raises(AccessDenied, match=refused):
        driver.read_history(stranger.session_id(), "role", "root")


@pytest.mark.covers("CTX-10.12")
@pytest.mark.parametrize("occurrence", [1, 2])
def test_a_finished_execution_not_yet_consumed_is_fetched_never_re_created(
        occurrence: int) -> None:
    # planner-two-executors: one batch of two delegations; the Executors answer with the four
    # lines of the executor script (two requests each), the Planner with three business lines
    # over two Runs. Crashing just after an execution ended must not run it again: still four
    # Executor requests, two Executor contexts, both Runs succeed.
    driver = drive({**example("planner-two-executors"),
                    **crash("EXECUTION_ENDED", occurrence, "after")})
    trace = driver.raw_trace()
    executor = [r for r in trace.model_requests("business") if r.role == "executor"]
    assert len(executor) == 4 and len({r.purpose_key for r in executor}) == 4
    assert driver.store.count("role_contexts") == 2 + 2  # two root contexts, two Executors
    assert statuses(driver) == [(1, "succeeded", None), (2, "succeeded", None)]
