"""Outer workflow nodes through the Driver (§1, §2, §11): expectations derived by hand."""

import json
from collections.abc import Mapping
from copy import deepcopy
from pathlib import Path
from typing import Any

import pytest

from ctxspec.conformance.cases import by_id
from ctxspec.conformance.driver import CAPABILITIES, ReferenceDriver, run_scenario
from ctxspec.conformance.harness import run_case
from ctxspec.conformance.scenario import parse_scenario
from ctxspec.conformance.timeline import timeline
from ctxspec.reference.ports import HookContext, HookReply, ToolOutcome
from ctxspec.reference.registry import JSON
from ctxspec.reference.runtime import trace as tr
from ctxspec.reference.runtime.runtime import ReferenceRuntime
from ctxspec.reference.runtime.workflow import AgentNode, CapabilityNode, Workflow, run_workflow

EXAMPLE = Path(__file__).resolve().parent.parent / "docs" / "examples" / \
    "workflow-sibling-failure.json"


def run(document: dict[str, Any]) -> ReferenceDriver:
    driver = ReferenceDriver()
    run_scenario(parse_scenario(document), lambda: driver)
    return driver


def example() -> dict[str, Any]:
    document: dict[str, Any] = json.loads(EXAMPLE.read_text("utf-8"))
    return document


@pytest.mark.covers("CTX-11.11", "CTX-11.12", "CTX-11.1", "CTX-2.21", "CTX-1.16", "CTX-1.17",
                    "CTX-1.19")
def test_a_failing_agent_node_routes_its_failure_and_its_sibling_completes() -> None:
    driver = run(example())
    result = driver.workflow_run
    assert result is not None
    assert [(n.node, n.status, n.route, n.error_code) for n in result.results] == [
        ("analyst", "failed", "error", "CONTEXT_PROTECTED_INPUT_TOO_LARGE"),
        ("reporter", "succeeded", None, None),
        ("publish", "succeeded", None, None)]
    # The WorkflowSession's inputs reached the graph state through the input mapping, and the
    # results only through each node's output mapping.
    assert result.state["topic"] == "What changed this week?"
    assert result.state["report"] == "Three fixes shipped; no incidents."
    failure = result.state["analysis.error"]
    assert isinstance(failure, dict)
    assert (failure["status"], failure["error_code"]) == \
        ("failed", "CONTEXT_PROTECTED_INPUT_TOO_LARGE")
    assert "analysis" not in result.state
    assert result.state["published"] == "posted to #weekly"
    # The analyst's question (3500 characters) never fit B = 2048 − 256 − 256 = 1536: no model
    # request was sent for it; the reporter's was.
    requests = driver.raw_trace().model_requests()
    assert [r.view.messages[0].text for r in requests] == ["Report."]
    # The AgentNode's invocation follows every root rule: its question went pending → claimed
    # → delivered, and is protected in its request.
    reporter = result.invocations["reporter"]
    assert [e.state for e in reporter.trace.of(tr.DeliveryChanged)] == \
        ["pending", "claimed", "delivered"]
    assert requests[0].protected_input_ids == (reporter.book.inputs[0].input_id,)


@pytest.mark.covers("CTX-1.17", "CTX-1.18", "CTX-3.40", "CTX-1.16")
def test_an_outer_nodes_hook_changes_its_operations_input_not_a_context() -> None:
    driver = run(example())
    result = driver.workflow_run
    assert result is not None
    ((operation, proposed, effective),) = result.operations
    assert proposed == {"text": "Three fixes shipped; no incidents."}
    assert effective == {"text": "Three fixes shipped; no incidents.", "channel": "#weekly"}
    assert operation.purpose_key == "capability:publish:3"
    # A context_patch without an authorised scope is invalid: the item fails open and the
    # input stays as it was; no private chat context is made up for the node.
    document = example()
    document["hooks"] = [{"point": "capability.pre_call", "items": [{
        "payload_patch": [{"path": "input.channel", "value": "#weekly"}],
        "context_patch": [{"target": "00000000-0000-0000-0000-000000000001",
                           "field": "text", "value": "x"}]}]}]
    refused = run(document).workflow_run
    assert refused is not None
    ((_, _, effective),) = refused.operations
    assert effective == {"text": "Three fixes shipped; no incidents."}


class Meddling:
    """A capability hook that writes into the payload it reads instead of answering a patch."""

    def registered(self, point: str) -> bool:
        return point == "capability.pre_call"

    def items(self, context: HookContext) -> tuple[HookReply, ...]:
        given = context.payload.get("input")
        if isinstance(given, dict):
            given["channel"] = "#leak"
        return (HookReply(),)


@pytest.mark.covers("CTX-3.7")
def test_an_outer_nodes_hook_cannot_change_its_input_by_writing_into_it() -> None:
    class Echo:
        def __init__(self) -> None:
            self.seen: list[dict[str, JSON]] = []

        def run(self, name: str, arguments: Mapping[str, JSON], ordinal: int) -> ToolOutcome:
            self.seen.append(dict(arguments))
            return ToolOutcome("posted")

    def no_agent(node: AgentNode) -> ReferenceRuntime:
        raise AssertionError(f"this workflow has no agent node, asked for {node.name}")

    tools = Echo()
    node = CapabilityNode("publish", "post", {"text": "report"}, "receipt")
    run_workflow(Workflow(((node,),), {"report": "report"}), {"report": "Three fixes."},
                 tools=tools, hooks=Meddling(), invoke=no_agent)
    assert tools.seen == [{"text": "Three fixes."}]


@pytest.mark.covers("CTX-11.13")
def test_a_stop_of_the_workflow_stops_every_node_not_yet_run() -> None:
    document = deepcopy(example())
    document["workflow"]["stop_after"] = "analyst"
    driver = run(document)
    result = driver.workflow_run
    assert result is not None
    assert [(n.node, n.status) for n in result.results] == [
        ("analyst", "failed"), ("reporter", "not_run"), ("publish", "not_run")]
    assert [e.node for e in driver.raw_trace().of(tr.NodeEnded)] == \
        ["analyst", "reporter", "publish"]
    [ended] = driver.raw_trace().of(tr.WorkflowEnded)
    assert ended.status == "stopped"
    assert "report" not in ended.state and "published" not in ended.state


def test_a_workflow_scenario_is_checked_before_it_runs() -> None:
    for change, problem in (
            ({"triggers": [{"on": {"tool": "publish", "ordinal": 1},
                            "do": {"supplement": "x"}}]}, "triggers do stop only"),):
        with pytest.raises(ValueError, match=problem):
            parse_scenario({**example(), **change})
    document = example()
    document["workflow"]["stop_after"] = "nobody"
    with pytest.raises(ValueError, match="names no node"):
        parse_scenario(document)
    document = example()
    document["workflow"]["stages"].append(document["workflow"]["stages"][-1])
    with pytest.raises(ValueError, match="unique"):
        parse_scenario(document)


@pytest.mark.covers("CTX-10.6", "CTX-10.9")
def test_an_agent_node_whose_process_dies_is_taken_over_and_the_workflow_goes_on() -> None:
    # The analyst never sends a request (its brief exceeds its input budget), so the first
    # raw answer to be saved is the reporter's: the process dies just before it. The outer
    # graph keeps its state; the reporter's invocation is taken over from its own store and
    # asks the one request in flight again (its answer was never saved), never its question
    # (that was received); the workflow then ends exactly as without the crash (Q162).
    plain = run(example())
    crashed_document = example()
    crashed_document["crash"] = {"phase": "raw_answer_saved", "when": "before"}
    crashed = run(crashed_document)

    def outcome(driver: ReferenceDriver) -> tuple[object, ...]:
        trace = driver.raw_trace()
        [ended] = trace.of(tr.WorkflowEnded)
        return ([(n.node, n.status, n.route) for n in trace.of(tr.NodeEnded)], ended.status,
                dict(ended.state))

    assert outcome(crashed) == outcome(plain)
    events = crashed.trace()
    [restart] = [i for i, e in enumerate(events) if e["kind"] == "restarted"]
    assert events[restart]["phase"] == "raw_answer_saved"
    asked = [(i, e["purpose_key"]) for i, e in enumerate(events) if e["kind"] == "model_request"]
    assert len(asked) == 2 and asked[0][1] == asked[1][1]
    assert asked[0][0] < restart < asked[1][0]
    invocation = crashed.workflow_run.invocations["reporter"] if crashed.workflow_run else None
    assert invocation is not None and invocation.store.count("user_inputs") == 1


class Sessionless(ReferenceDriver):
    """A driver of Sessions only: it lacks the workflow capability."""

    capabilities = CAPABILITIES - {"workflow"}


def test_a_workflow_needs_the_capability() -> None:
    with pytest.raises(NotImplementedError, match="workflow capability"):
        run_scenario(parse_scenario(example()), Sessionless)
    [case] = by_id(["S11-NODE-FAILURE-ROUTED"])
    result = run_case(case, Sessionless)
    assert (result.status, result.detail) == ("unsupported", "the driver lacks workflow")


def test_a_scenario_is_steps_or_a_workflow() -> None:
    document = example()
    document["steps"] = [{"ask": "x"}]
    with pytest.raises(ValueError, match="either steps"):
        parse_scenario(document)


def test_the_replay_timeline_shows_the_nodes_and_the_graph_state() -> None:
    lines = timeline(run(example()).trace())
    assert "node publish (capability node) starts" in lines
    assert '  capability publish{"text": "Three fixes shipped; no incidents.", "channel": ' \
        '"#weekly"} (mapped {"text": "Three fixes shipped; no incidents."}; changed by item ' \
        '1) → ok' in lines  # the chain's first item, numbered from 1 as a scenario numbers it
    assert '  hook capability.pre_call #1 item 1 (allow): input.channel="#weekly"' in lines
    assert '  graph state published = "posted to #weekly" (by publish)' in lines
    assert lines[-1] == "workflow ended: completed"


@pytest.mark.covers("CTX-11.13")
def test_a_stop_after_the_last_node_still_stops_the_root_run() -> None:
    # The example's last node is "publish": a stop arriving once it finished comes before the
    # workflow's ending, so the root Run ends stopped (what ran kept), never "completed".
    document = example()
    document["workflow"]["stop_after"] = "publish"
    driver = run(document)
    result = driver.workflow_run
    assert result is not None
    assert [n.status for n in result.results] == ["failed", "succeeded", "succeeded"]
    [ended] = [e for e in driver.trace() if e["kind"] == "workflow_ended"]
    assert ended["status"] == "stopped"
    assert ended["state"]["published"] == "posted to #weekly"
