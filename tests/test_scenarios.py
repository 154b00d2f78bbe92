"""§12 rows as scenarios run on the reference runtime through the Driver; each assertion is over
the neutral trace and its expected values are derived by hand from the design (the conformance
suite of issue #9 reuses these scenarios).

The character estimator (one token per character, no overhead) makes the numbers readable:
a request's I is the sum of its messages' text lengths.
"""

import json
from copy import deepcopy
from pathlib import Path
from typing import Any

import pytest

from ctxspec.conformance.driver import ReferenceDriver, run_scenario
from ctxspec.conformance.scenario import ScenarioError, load_scenario, parse_scenario
from ctxspec.reference.runtime import trace as tr
from ctxspec.reference.runtime.runtime import ScriptExhausted

EXAMPLES = Path(__file__).resolve().parent.parent / "docs" / "examples"


def run(document: dict[str, Any]) -> tr.Trace:
    driver = ReferenceDriver()
    run_scenario(parse_scenario(document), lambda: driver)
    return driver.raw_trace()


def lines(request: tr.ModelRequestSent) -> list[tuple[str, str, str]]:
    return [(m.role.value, m.kind.value, m.text) for m in request.view.messages]


def base(**agent: Any) -> dict[str, Any]:
    return {"scenario_version": 1, "name": "t", "steps": [],
            "agent": {"system_prompt": "sys", "window": 4000, "output_reserve": 400,
                      "safety_margin": 100, "estimator": "chars", **agent}}


def ended(trace: tr.Trace) -> list[tuple[int, str, str | None]]:
    return [(e.run_no, e.status, e.error_code) for e in trace.of(tr.RunEnded)]


# --- row 1: N = 2 with succeeded, failed, stopped -------------------------------------------------


@pytest.mark.covers("CTX-4.4", "CTX-4.5", "CTX-4.6", "CTX-4.7", "CTX-4.12", "CTX-4.13",
                    "CTX-4.14", "CTX-5.14", "CTX-5.23", "CTX-5.24", "CTX-5.25")
def test_row1_recent_two_runs_failed_and_stopped() -> None:
    trace = run(json.loads((EXAMPLES / "supplements-across-runs.json").read_text("utf-8")))
    assert ended(trace) == [(1, "succeeded", None), (2, "failed", "MODEL_FAILED"),
                            (3, "stopped", None), (4, "succeeded", None)]
    final = trace.model_requests("business")[-1]
    carried = "[user input {}: text shown in the current request]"
    supplement = next(e.input_id for e in trace.of(tr.DeliveryChanged)
                      if e.state == "carried")
    # Derived from §4/§5: run 1 is older (inputs, final result, status); runs 2 and 3 are the
    # recent two (their process and status; no made-up answer); the supplement claimed by run 2
    # and carried through run 3 is shown once, in the current request, and marked elsewhere.
    assert lines(final) == [
        ("system", "system_prompt", "You are a deployment assistant."),
        ("user", "user_ref", "写部署方案"), ("user", "user_ref", "只用 Docker"),
        ("user", "user_ref", "不开放公网端口"),
        ("assistant", "assistant", "方案见下：一个 compose 文件，只暴露内网端口。"),
        ("system", "outcome", "[run 1 ended: succeeded]"),
        ("user", "user_ref", "检查镜像大小"), ("system", "marker", carried.format(supplement)),
        ("system", "outcome", "[run 2 ended: failed; no final result]"),
        ("system", "marker", carried.format(supplement)), ("user", "user_ref", "再试一次"),
        ("system", "outcome", "[run 3 ended: stopped; no final result]"),
        ("user", "user_ref", "包括构建缓存"), ("user", "user_ref", "总结一下")]


# --- row 2: five supplements in one run -----------------------------------------------------------


@pytest.mark.covers("CTX-2.2", "CTX-2.3", "CTX-4.15", "CTX-4.17")
def test_row2_five_supplements_one_run_all_kept_after_trimming() -> None:
    document = base()
    document["steps"] = [{"ask": "q1"}, *({"supplement": f"s{n}"} for n in range(1, 6)),
                         {"advance": True}, {"ask": "q2"}, {"advance": True}, {"ask": "q3"},
                         {"advance": True}, {"ask": "q4"}, {"advance": True}]
    document["model"] = {"business": [{"text": f"a{n}"} for n in range(1, 5)]}
    trace = run(document)
    assert [e.detail for e in trace.of(tr.ClientEvent) if e.event == "run_started"] == \
        ["run 1", "run 2", "run 3", "run 4"]  # five supplements, still four Runs
    final = lines(trace.model_requests("business")[-1])
    assert final[1:9] == [("user", "user_ref", t) for t in ("q1", "s1", "s2", "s3", "s4", "s5")] \
        + [("assistant", "assistant", "a1"), ("system", "outcome", "[run 1 ended: succeeded]")]


# --- rows 4 and 5: the 80% boundary, a new question that triggers compaction ----------------------


def boundary(question_length: int) -> dict[str, Any]:
    """W=5000, O=400, S=100: B = 4500, trigger floor(0.8 × 4500) = 3600. Run 1 leaves 1000 +
    1000 characters and the 24 of "[run 1 ended: succeeded]"; with "sys" (3) run 2's request is
    I = 2027 + the question's length, so 1572 and 1573 sit on both sides of the trigger."""
    document = base(window=5000)
    question = "Q" * question_length
    document["steps"] = [{"ask": "a" * 1000}, {"advance": True}, {"ask": question},
                         {"advance": True}]
    document["model"] = {"business": [{"text": "b" * 1000}, {"text": "done"}],
                         "compaction": [{"text": "SUMMARY"}]}
    return document


@pytest.mark.covers("CTX-7.12", "CTX-7.13", "CTX-8.28", "CTX-8.46")
def test_row4_eighty_percent_boundary_both_sides() -> None:
    below = run(boundary(1572)).model_requests()
    assert [(r.purpose, r.estimated_input_tokens, r.compaction) for r in below] == [
        ("business", 1003, "below_trigger"), ("business", 3599, "below_trigger")]
    at = run(boundary(1573)).model_requests()
    assert [(r.purpose, r.compaction) for r in at] == [
        ("business", "below_trigger"), ("compaction", None), ("business", "compact")]
    # After the summary: "sys" + the 30-character envelope + "SUMMARY" + the question.
    assert at[-1].estimated_input_tokens == 3 + 30 + 7 + 1573
    for request in (*below, *at):
        assert request.estimated_input_tokens + request.max_output_tokens + \
            request.safety_margin <= request.window


@pytest.mark.covers("CTX-4.18", "CTX-5.5", "CTX-5.7", "CTX-8.64", "CTX-9.25")
def test_row5_a_new_question_that_triggers_compaction_stays_verbatim() -> None:
    requests = run(boundary(1573)).model_requests()
    business = requests[-1]
    assert business.snapshot_id is not None
    assert lines(business) == [("system", "system_prompt", "sys"),
                               ("system", "summary", "[summary of earlier material]\nSUMMARY"),
                               ("user", "user_ref", "Q" * 1573)]
    data = requests[1].view.messages[-1].text
    assert "a" * 1000 in data and "b" * 1000 in data and "Q" * 1573 not in data


# --- row 6: a supplement during compaction --------------------------------------------------------


@pytest.mark.covers("CTX-5.28", "CTX-5.29", "CTX-9.44", "CTX-8.72")
def test_row6_supplement_during_compaction_joins_the_next_request_verbatim() -> None:
    document = boundary(1573)
    document["agent"]["tools"] = [{"name": "look"}]
    document["model"]["business"] = [{"text": "b" * 1000},
                                     {"text": "", "tool_calls": [{"name": "look"}]},
                                     {"text": "done"}]
    document["tools"] = {"look": [{"text": "seen"}]}
    document["triggers"] = [{"on": {"purpose": "compaction", "ordinal": 1},
                             "do": {"supplement": "late words"}}]
    requests = run(document).model_requests("business")
    after_summary, next_loop = requests[1], requests[2]
    assert "late words" not in [m.text for m in after_summary.view.messages]
    assert [m.text for m in next_loop.view.messages if m.kind.value == "user_ref"] == \
        ["Q" * 1573, "late words"]
    assert after_summary.input_cutoff is not None and next_loop.input_cutoff is not None
    assert next_loop.input_cutoff == after_summary.input_cutoff + 1


# --- row 7: tool protocol over several rounds, a run stopped mid-batch ----------------------------


@pytest.mark.covers("CTX-6.1", "CTX-6.2", "CTX-6.3", "CTX-6.6", "CTX-6.10", "CTX-6.12")
def test_row7_every_result_has_its_call_and_a_stopped_batch_gets_placeholders() -> None:
    document = base(tools=[{"name": "a"}, {"name": "b"}])
    document["steps"] = [{"ask": "do a and b"}, {"advance": True}, {"ask": "what happened?"},
                         {"advance": True}]
    document["model"] = {"business": [
        {"text": "", "tool_calls": [{"name": "a"}, {"name": "b"}]}, {"text": "a ran, b did not"}]}
    document["tools"] = {"a": [{"text": "a done"}]}
    document["triggers"] = [{"on": {"tool": "a", "ordinal": 1}, "do": {"stop": True}}]
    trace = run(document)
    assert ended(trace) == [(1, "stopped", None), (2, "succeeded", None)]
    assert [e.name for e in trace.of(tr.ToolExecuted)] == ["a"]  # b never ran
    request = trace.model_requests("business")[-1]
    group = [m for m in request.view.messages if m.tool_calls or m.role.value == "tool"]
    calls = [c.call_id for c in group[0].tool_calls]
    assert [(m.kind.value, m.call_id) for m in group[1:]] == [("tool_result", calls[0]),
                                                             ("placeholder", calls[1])]
    placeholder = json.loads(group[2].text)
    assert placeholder["status"] == "not_executed" and placeholder["tool"] == "b"


# --- row 8: a huge tool result --------------------------------------------------------------------


@pytest.mark.covers("CTX-6.13", "CTX-6.14", "CTX-6.15", "CTX-6.17", "CTX-6.18")
def test_row8_huge_result_is_a_preview_and_a_read_is_a_new_record() -> None:
    body = "".join(f"row {n:05d}\n" for n in range(2000))  # 20000 characters
    document = base(window=40_000, output_reserve=2000, safety_margin=500,
                    tools=[{"name": "dump"}, {"name": "result.read"}])
    document["steps"] = [{"ask": "dump the table"}, {"advance": True}]
    document["model"] = {"business": [
        {"text": "", "tool_calls": [{"name": "dump"}]},
        {"text": "", "tool_calls": [{"name": "result.read",
                                     "arguments": {"from": 4000, "to": 4020}}]},
        {"text": "row 00400 is there"}]}
    document["tools"] = {"dump": [{"text": body}], "result.read": [{"text": body[4000:4020]}]}
    requests = run(document).model_requests("business")
    results = [m for m in requests[-1].view.messages if m.kind.value == "tool_result"]
    assert results[0].text == body[:4000]  # the preview, never the whole body
    truncation = results[0].truncation
    assert truncation is not None
    assert (truncation.from_char, truncation.through_char, truncation.total_chars) == \
        (0, 4000, 20_000)
    assert truncation.result_ref.size_bytes == 20_000
    assert results[1].text == "row 00400\nrow 00401\n" and results[1].truncation is None


# --- row 11: the summary succeeds but the request is still over the window ------------------------


@pytest.mark.covers("CTX-8.53", "CTX-8.77", "CTX-8.15", "CTX-11.4", "CTX-11.11", "CTX-11.14",
                    "CTX-7.17")
def test_row11_still_over_the_window_after_the_summary_ends_the_run() -> None:
    trace = run(json.loads((EXAMPLES / "compaction-three-chunks-window-exceeded.json")
                           .read_text("utf-8")))
    requests = trace.model_requests()
    assert [r.purpose for r in requests] == ["business"] * 4 + ["compaction"] * 3
    assert [r.purpose_key.rsplit(":", 2)[-2:] for r in requests[4:]] == \
        [["chunk", "1"], ["chunk", "2"], ["chunk", "3"]]
    assert "<<<previous summary" not in requests[4].view.messages[-1].text
    assert "S1: report 1 says revenue grew." in requests[5].view.messages[-1].text
    assert ended(trace)[-1] == (2, "failed", "CONTEXT_WINDOW_EXCEEDED")
    message = trace.of(tr.RunEnded)[-1].message
    assert message is not None and "window is 4000" in message and "You are" not in message
    for request in requests:  # nothing over the window was ever sent
        assert request.estimated_input_tokens + request.max_output_tokens + \
            request.safety_margin <= request.window


# --- rows 15 to 18: hooks -------------------------------------------------------------------------


@pytest.mark.covers("CTX-7.25", "CTX-3.61", "CTX-5.6")
def test_row15_a_hook_changes_the_model_input_in_chain_order() -> None:
    document = base(tools=[{"name": "t"}])
    document["steps"] = [{"ask": "go"}, {"advance": True}]
    document["model"] = {"business": [{"text": "first", "tool_calls": [{"name": "t"}]},
                                      {"text": "done"}]}
    document["tools"] = {"t": [{"text": "ok"}]}
    document["hooks"] = [{"point": "model.pre_request", "ordinal": 2, "items": [
        {"context_patch": [{"target": "first_assistant", "field": "text",
                            "value": "first (as corrected by a hook)"}]},
        {"fails": True},
        {"context_patch": [{"target": "question", "field": "text", "value": "tampered"}]}]}]
    trace = run(document)
    decisions = [(d.decision, d.patch_valid, d.diagnostics) for d in trace.of(tr.HookDecided)]
    assert decisions == [("allow", True, ()), ("failed", False, ("HOOK_FAILED",)),
                         ("allow", False, ("PROTECTED_INPUT",))]
    second = trace.model_requests("business")[1]
    texts = [m.text for m in second.view.messages]
    assert "first (as corrected by a hook)" in texts and "go" in texts
    # Re-measured after the hook: "sys" + "go" + the corrected text with its call written out
    # ("\nt({})", 6) + "ok" + the tool schema '{"name": "t", "parameters": {"type": "object"}}'.
    schema = json.dumps({"name": "t", "parameters": {"type": "object"}}, sort_keys=True)
    assert second.estimated_input_tokens == \
        3 + 2 + len("first (as corrected by a hook)") + 6 + 2 + len(schema)


@pytest.mark.covers("CTX-3.57", "CTX-3.69", "CTX-3.15", "CTX-6.16")
def test_rows16_17_the_changed_argument_is_what_runs_and_what_the_model_sees() -> None:
    trace = run(json.loads((EXAMPLES / "tool-batch-hook.json").read_text("utf-8")))
    executed = {e.name: (dict(e.proposed_arguments), dict(e.effective_arguments))
                for e in trace.of(tr.ToolExecuted)}
    assert executed["write"] == ({"path": "a.md", "body": "report"},
                                 {"path": "reports/a.md", "body": "report"})
    assert list(executed) == ["write", "read"]
    decision = next(m for m in trace.model_requests("business")[1].view.messages
                    if m.tool_calls)
    assert json.loads(decision.tool_calls[0].arguments)["path"] == "reports/a.md"


@pytest.mark.covers("CTX-3.70", "CTX-6.11", "CTX-3.59", "CTX-3.61")
def test_row18_deny_blocks_and_a_failed_hook_drops_only_itself() -> None:
    document = base(tools=[{"name": "rm"}, {"name": "ls"}])
    document["steps"] = [{"ask": "clean up"}, {"advance": True}]
    document["model"] = {"business": [
        {"text": "", "tool_calls": [{"name": "rm", "arguments": {"path": "/"}},
                                    {"name": "ls", "arguments": {"path": "."}}]},
        {"text": "done"}]}
    document["tools"] = {"ls": [{"text": "a b c"}]}
    document["hooks"] = [
        {"point": "tool.pre_call", "ordinal": 1, "items": [{"decision": "deny"}]},
        {"point": "tool.pre_call", "ordinal": 2, "items": [
            {"fails": True, "payload_patch": [{"path": "arguments.path", "value": "/etc"}]}]}]
    trace = run(document)
    assert [e.name for e in trace.of(tr.ToolExecuted)] == ["ls"]  # the denied rm never ran
    assert dict(trace.of(tr.ToolExecuted)[0].effective_arguments) == {"path": "."}
    results = [m for m in trace.model_requests("business")[1].view.messages
               if m.kind.value == "tool_result"]
    denied = json.loads(results[0].text)
    assert (denied["status"], denied["stage"], denied["executed"]) == ("denied", "pre", False)
    assert results[1].text == "a b c"


# --- scenarios themselves -------------------------------------------------------------------------


def test_every_example_replays() -> None:
    names = sorted(p.name for p in EXAMPLES.glob("*.json"))
    assert len(names) >= 3
    for path in EXAMPLES.glob("*.json"):
        driver = run_scenario(load_scenario(path))
        assert isinstance(driver, ReferenceDriver)
        assert driver.raw_trace().of(tr.RunEnded), path.name


def test_a_script_that_runs_out_fails_loudly() -> None:
    document = base()
    document["steps"] = [{"ask": "hello"}, {"advance": True}]
    with pytest.raises(ScriptExhausted, match="business model script ran out at request #1"):
        run(document)


@pytest.mark.parametrize(("change", "message"), [
    (lambda d: d["agent"].pop("window"), "scenario.agent.window: Field required"),
    (lambda d: d.update(steps=[{"ask": "x", "stop": True}]),
     "scenario.steps[0]: Value error, a step is exactly one of"),
    (lambda d: d["agent"].update(window=0), "scenario.agent.window: Input should be greater"),
    (lambda d: d.update(surprise=1), "scenario.surprise: Extra inputs are not permitted"),
    (lambda d: d.update(model={"business": [{"text": "a", "fail": "b"}]}),
     "scenario.model.business[0]: Value error, a model response is exactly one of"),
])
def test_malformed_scenarios_name_the_field(change: Any, message: str) -> None:
    document = base()
    document["steps"] = [{"ask": "x"}]
    broken = deepcopy(document)
    change(broken)
    with pytest.raises(ScenarioError) as caught:
        parse_scenario(broken)
    assert message in str(caught.value)


# --- row 20: the old summary's material was modified ----------------------------------------------


@pytest.mark.covers("CTX-9.26", "CTX-9.27", "CTX-9.28", "CTX-9.32", "CTX-6.16")
def test_row20_a_modified_covered_record_retires_the_old_summary() -> None:
    document = base(window=5000, tools=[{"name": "t"}])
    document["steps"] = [{"ask": "go"}, {"advance": True}]
    document["model"] = {
        "business": [{"text": "A" * 1500, "tool_calls": [{"name": "t"}]},
                     {"text": "B" * 700, "tool_calls": [{"name": "t"}]},
                     {"text": "C", "tool_calls": [{"name": "t"}]},
                     {"text": "done"}],
        "compaction": [{"text": "SUM1"}, {"text": "SUM2"}]}
    document["tools"] = {"t": [{"text": "r" * 1500}, {"text": "s" * 200}, {"text": "x"}]}
    # Before the fourth request a hook corrects the first decision, which SUM1 covers.
    document["hooks"] = [{"point": "model.pre_request", "ordinal": 4, "items": [
        {"context_patch": [{"target": "first_assistant", "field": "text",
                            "value": "A, corrected"}]}]}]
    requests = run(document).model_requests()
    # Loop 3 crosses the trigger (I = 3 + 2 + 1506 + 1500 + 706 + 200 + 47 = 3964 ≥ 3600) and
    # compacts in two chunks (3882 compressible tokens, chunks of at most 3299).
    assert [r.purpose for r in requests] == ["business", "business", "compaction", "compaction",
                                             "business", "business"]
    third, fourth = requests[4], requests[5]
    assert third.snapshot_id is not None
    assert [m.kind.value for m in third.view.messages][:3] == ["system_prompt", "user_ref",
                                                              "summary"]
    assert third.view.messages[2].text.endswith("SUM2")
    # Loop 4: the correction changed a record SUM2 covers, so the snapshot no longer stands for
    # anything; the covered records come back as they are now. I = 3 + 2 + (12 + 6) + 1500 +
    # (700 + 6) + 200 + (1 + 6) + 1 + 47 = 2484, below the trigger: no new episode needed.
    assert fourth.snapshot_id is None and fourth.compaction == "below_trigger"
    assert fourth.estimated_input_tokens == 2484
    texts = [m.text for m in fourth.view.messages]
    assert "A, corrected" in texts and "r" * 1500 in texts and "B" * 700 in texts
    assert not any("SUM" in text for text in texts)


@pytest.mark.covers("CTX-8.19", "CTX-8.20", "CTX-8.21", "CTX-8.22", "CTX-8.9", "CTX-11.2",
                    "CTX-11.3")
def test_compaction_calls_pass_through_hooks_and_a_deny_fails_the_episode() -> None:
    document = boundary(1573)
    document["hooks"] = [{"point": "compaction.post_response", "items": [
        {"fails": True},
        {"payload_patch": [{"path": "summary", "value": "SUMMARY (redacted)"}]}]}]
    trace = run(document)
    business = trace.model_requests("business")[-1]
    assert business.view.messages[1].text.endswith("SUMMARY (redacted)")
    assert [(d.point, d.decision) for d in trace.of(tr.HookDecided)] == [
        ("compaction.post_response", "failed"), ("compaction.post_response", "allow")]
    document["hooks"] = [{"point": "compaction.pre_request", "items": [{"decision": "deny"}]}]
    denied = run(document)
    assert ended(denied)[-1] == (2, "failed", "COMPACTION_FAILED")
    assert [r.purpose for r in denied.model_requests()] == ["business"]  # nothing summarised


@pytest.mark.covers("CTX-2.29", "CTX-2.33", "CTX-5.19", "CTX-5.20", "CTX-11.7", "CTX-11.8",
                    "CTX-6.8")
def test_partial_stream_then_failure_is_no_decision_and_no_client_fragment() -> None:
    # §12 "partial 流后重试": attempt 1 streams "I will wri" then breaks; attempt 2 fails before
    # any output. No attempt is spliced onto another; the first output was recorded once; the
    # client sees lifecycle events only; the next question's history shows a marked fragment.
    document = base()
    document["steps"] = [{"ask": "write it"}, {"advance": True}, {"ask": "again"},
                         {"advance": True}]
    document["model"] = {"business": [{"partial": "I will wri", "fail": "reset"},
                                      {"fail": "reset"}, {"text": "ok"}]}
    trace = run(document)
    assert ended(trace) == [(1, "failed", "MODEL_FAILED"), (2, "succeeded", None)]
    assert [r.attempt for r in trace.model_requests("business")] == [1, 2, 1]
    states = [e.state for e in trace.of(tr.DeliveryChanged)][:3]
    assert states == ["pending", "claimed", "delivered"]  # delivered once, by the first output
    events = {e.event for e in trace.of(tr.ClientEvent)}
    assert events <= {"run_started", "input_received", "progress", "run_ended"}
    assert not any("wri" in e.detail for e in trace.of(tr.ClientEvent))
    history = lines(trace.model_requests("business")[-1])
    assert ("system", "fragment", "[incomplete model output, not a decision] I will wri") in \
        history
    assert ("system", "outcome", "[run 1 ended: failed; no final result]") in history
