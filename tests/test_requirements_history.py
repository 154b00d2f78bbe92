"""Requirements that no other test pinned, about history (§1, §3, §4): the current Run whole even
with recent_runs = 0, recent history with effective arguments and deny states, every original text
kept through compaction and trimming, and an executor's file sharing none of its messages.

Expected values are derived by hand from the design and the scenario; the character estimator (one
token per character, no overhead) keeps the numbers readable.
"""

import json

import pytest

from ctxspec.reference.runtime import trace as tr
from ctxspec.reference.runtime.runtime import HistoryCaller
from tests.driven_scenarios import audit, base, boundary, drive, lines, scenario_of, texts

# --- history: the current Run, the actual process, originals kept --------------------------------


@pytest.mark.covers("CTX-4.2")
def test_the_current_run_is_whole_even_with_recent_runs_zero() -> None:
    # recent_runs = 0: Run 1 is older history (question, result, status), while Run 2's own
    # decision and tool result are in its second request — the current Run is not one of the
    # recent Runs to select.
    document = base(recent_runs=0, tools=[{"name": "t"}])
    document["steps"] = [{"ask": "q1"}, {"advance": True}, {"ask": "q2"}, {"advance": True}]
    document["model"] = {"business": [{"text": "a1"}, {"text": "", "tool_calls": [{"name": "t"}]},
                                      {"text": "a2"}]}
    document["tools"] = {"t": [{"text": "tool says hi"}]}
    driver, _ = drive(document)
    last = driver.raw_trace().model_requests("business")[-1]
    assert [(role, kind, text) for role, kind, text in lines(last)] == [
        ("system", "system_prompt", "sys"), ("user", "user_ref", "q1"),
        ("assistant", "assistant", "a1"), ("system", "outcome", "[run 1 ended: succeeded]"),
        ("user", "user_ref", "q2"), ("assistant", "assistant", ""),
        ("tool", "tool_result", "tool says hi")]


@pytest.mark.covers("CTX-4.9")
def test_recent_history_shows_effective_arguments_and_deny_states() -> None:
    # Run 1: write(a.md) moved to reports/a.md by a hook, rm denied. Run 2's request shows Run 1's
    # actual process: the decision with the effective path, write's result and rm's refusal.
    document = base(tools=[{"name": "write"}, {"name": "rm"}])
    document["steps"] = [{"ask": "q1"}, {"advance": True}, {"ask": "q2"}, {"advance": True}]
    document["model"] = {"business": [
        {"text": "", "tool_calls": [{"name": "write", "arguments": {"path": "a.md"}},
                                    {"name": "rm", "arguments": {"path": "/"}}]},
        {"text": "a1"}, {"text": "a2"}]}
    document["tools"] = {"write": [{"text": "wrote"}]}
    document["hooks"] = [
        {"point": "tool.pre_call", "ordinal": 1, "items": [
            {"payload_patch": [{"path": "arguments.path", "value": "reports/a.md"}]}]},
        {"point": "tool.pre_call", "ordinal": 2, "items": [{"decision": "deny"}]}]
    driver, _ = drive(document)
    last = driver.raw_trace().model_requests("business")[-1]
    decision = next(m for m in last.view.messages if m.tool_calls)
    assert [json.loads(c.arguments) for c in decision.tool_calls] == [{"path": "reports/a.md"},
                                                                     {"path": "/"}]
    results = [m.text for m in last.view.messages if m.kind.value == "tool_result"]
    assert results[0] == "wrote"
    refusal = json.loads(results[1])
    assert (refusal["status"], refusal["executed"]) == ("denied", False)


@pytest.mark.covers("CTX-1.13", "CTX-4.19")
def test_compaction_and_trimming_keep_every_original_text() -> None:
    # Compaction: Run 1's question and answer are summarised out of Run 2's request, and stay in
    # the records word for word.
    driver, _ = drive(boundary())
    after = driver.raw_trace().model_requests("business")[-1]
    assert "a" * 1000 not in texts(after) and "b" * 1000 not in texts(after)
    kept = audit(driver)
    assert "a" * 1000 in kept and "b" * 1000 in kept
    # Trimming: an older Run loses its tool process from the view, never from the records.
    driver, _ = drive(scenario_of("EX4-OLDER-RUN"))
    assert "docker docs" not in texts(driver.raw_trace().model_requests("business")[-1])
    assert "docker docs" in audit(driver)


@pytest.mark.covers("CTX-3.76")
def test_a_file_the_executor_writes_shares_none_of_its_messages() -> None:
    # The Executor's tool writes a workspace file the Planner could read; its private request,
    # tool result and the file's words never enter the Planner's requests or its history read.
    # The scenario of S3-FILES-NOT-MESSAGES; the case judges its trace, this test the objects.
    driver, _ = drive(scenario_of("S3-FILES-NOT-MESSAGES"))
    assert driver.workspace() == {"notes.md": "secret words"}
    trace = driver.raw_trace()
    for request in trace.model_requests("business"):
        if request.role == "root":
            assert not any(word in text for text in texts(request)
                           for word in ("private thinking", "note stored", "secret words"))
    assert "noted" in texts(trace.model_requests("business")[-1])
    [read] = driver.observed.of(tr.HistoryRead)
    assert read.allowed and "tool_result" not in read.message_kinds[:2]
    runtime = driver.runtime
    assert runtime is not None
    root = [str(raw.content.get("text", "")) for raw in
            runtime.read_history(HistoryCaller(runtime.session_id, "role", "root"))]
    assert not any("private thinking" in t or "note stored" in t for t in root)
