"""Conformance cases for the outer workflow (§1 outer nodes, §2 WorkflowSession inputs, §3 an
outer node's context_patch, §11 error scope): each a workflow scenario and a predicate over the
neutral trace, its expected values derived by hand from the design (see conformance/case.py).
They need the driver capability ``workflow``. IDs ``S<section>-<name>``, like the other
statements; they live together because they share the workflow scaffolding.

What a case reads of a workflow (docs/scenarios.md "The trace"): ``node_started`` …
``node_ended`` around each node's own events, ``capability_called`` (proposed and effective
input, the hook items that changed it), ``graph_state_written`` (key, value, who wrote it) and
``workflow_ended`` (the tree's ending and the final graph state). Siblings of a stage are
independent, so cases compare node endings by node, never the order of siblings.
"""

import json
from typing import Any

from ctxspec.conformance.case import Case, Trace, delivery_chains, equal, exactly, expect, lines, of
from ctxspec.conformance.phases import crash_need

WORKFLOW = frozenset({"workflow"})
GHOST = "00000000-0000-0000-0000-0000000000a1"
"""A record id no outer node can address: it has no RoleContext and no authorised scope."""
ROLE_EVENTS = frozenset({"model_request", "delivery", "run_ended", "client_event", "compaction",
                         "tool_executed"})
"""What only a role's model loop produces (a RoleContext, its deliveries, its Run)."""


# --- scaffolding ------------------------------------------------------------------------------


def _document(name: str, stages: list[list[dict[str, Any]]], inputs: dict[str, Any],
              mapping: dict[str, str], **workflow: Any) -> dict[str, Any]:
    return {"scenario_version": 1, "name": name,
            "agent": {"window": 4096, "estimator": "chars"},
            "workflow": {"input": inputs, "input_mapping": mapping, "stages": stages,
                         **workflow}}


def _agent(name: str, question_key: str, output_key: str, system_prompt: str,
           answers: list[dict[str, Any]], **agent: Any) -> dict[str, Any]:
    """An AgentNode measured with the character estimator in a 4096-token window."""
    return {"agent_node": {"name": name, "question_key": question_key, "output_key": output_key,
                           "agent": {"system_prompt": system_prompt, "window": 4096,
                                     "estimator": "chars", **agent},
                           "model": {"business": answers}}}


def _capability(name: str, tool: str, inputs: dict[str, str], output_key: str) -> dict[str, Any]:
    return {"capability_node": {"name": name, "tool": tool, "input": inputs,
                                "output_key": output_key}}


def _call(tool: str, **arguments: Any) -> dict[str, Any]:
    return {"text": "", "tool_calls": [{"name": tool, "arguments": arguments}]}


def _span(trace: Trace, node: str) -> Trace:
    """The events a node produced: those between its node_started and its node_ended."""
    start = next(i for i, e in enumerate(trace)
                 if e["kind"] == "node_started" and e["node"] == node)
    end = next(i for i, e in enumerate(trace)
               if i > start and e["kind"] == "node_ended" and e["node"] == node)
    return trace[start + 1:end]


def _endings(trace: Trace) -> dict[str, tuple[str, str | None, str | None]]:
    return {e["node"]: (e["status"], e["route"], e["error_code"])
            for e in of(trace, "node_ended")}


def _writes(trace: Trace) -> list[tuple[str, Any, str]]:
    return [(e["key"], e["value"], e["source"]) for e in of(trace, "graph_state_written")]


def _workflow_end(trace: Trace) -> tuple[str, dict[str, Any]]:
    [ended] = exactly(1, of(trace, "workflow_ended"), "workflow_ended events")
    return ended["status"], ended["state"]


def _calls(trace: Trace) -> list[tuple[str, dict[str, Any], dict[str, Any], list[int]]]:
    return [(e["node"], e["proposed_input"], e["effective_input"], e["modified_by"])
            for e in of(trace, "capability_called")]


def _no_role(trace: Trace, node: str) -> None:
    seen = sorted({e["kind"] for e in _span(trace, node)} & ROLE_EVENTS)
    equal(seen, [], f"events of a model loop or RoleContext in outer node {node}")


# --- §1: an outer node has no model loop, no RoleContext; its context_patch is refused -------


def _outer_scenario() -> dict[str, Any]:
    document = _document(
        "outer-node-no-context",
        [[_capability("polish", "polish", {"text": "draft"}, "polished")],
         [_agent("reviewer", "polished", "review", "Review.", [{"text": "Looks good."}])]],
        {"draft": "Draft v1"}, {"draft": "draft"})
    document["tools"] = {"polish": [{"text": "Draft v1, polished."}]}
    document["hooks"] = [{"point": "capability.pre_call", "items": [
        {"payload_patch": [{"path": "input.style", "value": "formal"}],
         "context_patch": [{"target": GHOST, "field": "text", "value": "INJECTED"}]},
        {"context_patch": [{"target": GHOST, "field": "budget", "value": "INJECTED",
                            "scope": "shared"}]},
        {"payload_patch": [{"path": "input.style", "value": "plain"}]}]}]
    return document


def _outer_check(trace: Trace) -> None:
    # §1: the CapabilityNode has no model loop and no RoleContext — nothing between its start
    # and its end is a model request, a delivery or a Run. §1/§3: a context_patch needs an
    # authorised ContextScope, which an outer node does not have and cannot obtain by patching:
    # item 0 (payload and context patch together) and item 1 (a shared-scope patch) are
    # refused as a whole with UNAUTHORISED_SCOPE (authorisation is checked before the target
    # is resolved, §3), their allow goes on with the input as it was; item 2's payload change
    # alone applies.
    _no_role(trace, "polish")
    equal([(e["chain_position"], e["decision"], e["patch_valid"], e["diagnostics"])
           for e in of(trace, "hook_decided") if e["point"] == "capability.pre_call"],
          [(0, "allow", False, ["UNAUTHORISED_SCOPE"]),
           (1, "allow", False, ["UNAUTHORISED_SCOPE"]), (2, "allow", True, [])],
          "the capability hook's items")
    equal(_calls(trace), [("polish", {"text": "Draft v1"}, {"text": "Draft v1", "style": "plain"},
                           [2])], "the capability's Operation")
    # No context came into being for the refused values: the reviewer's request carries only
    # its own system prompt and the question its input mapping gave it.
    [request] = exactly(1, of(trace, "model_request"), "model_request events")
    equal(lines(request), [("system", "system_prompt", "Review."),
                           ("user", "user_ref", "Draft v1, polished.")], "the reviewer's request")
    expect("INJECTED" not in json.dumps([of(trace, "model_request"), _writes(trace)]),
           "a refused context_patch value reached a request or the graph state")
    equal(_endings(trace), {"polish": ("succeeded", None, None),
                            "reviewer": ("succeeded", None, None)}, "node endings")
    equal(_workflow_end(trace), ("completed", {"draft": "Draft v1",
                                               "polished": "Draft v1, polished.",
                                               "review": "Looks good."}), "the workflow's end")


# --- §1: a payload change is the Operation's effective input, not graph state ----------------


def _effective_scenario() -> dict[str, Any]:
    document = _document(
        "outer-node-effective-input",
        [[_agent("writer", "topic", "report", "Write.", [{"text": "Three fixes shipped."}])],
         [_capability("publish", "publish", {"text": "report"}, "published")],
         [_capability("archive", "archive", {"text": "report", "receipt": "published"},
                      "archived")]],
        {"topic": "Weekly"}, {"topic": "topic"})
    document["tools"] = {"publish": [{"text": "posted as #1"}],
                         "archive": [{"text": "archived #1"}]}
    document["hooks"] = [{"point": "capability.pre_call", "ordinal": 1, "items": [
        {"payload_patch": [{"path": "input.text", "value": "Three fixes shipped (edited)."},
                           {"path": "input.channel", "value": "#weekly"}]}]}]
    return document


def _effective_check(trace: Trace) -> None:
    # §1: publish's hook changes its payload. The change is the Operation's effective input
    # (what the tool received), the proposed input (the output mapping of writer's answer)
    # is kept beside it, and the source of the change is hook item 0. The graph state takes
    # only publish's result, through its output mapping: archive, reading text and receipt
    # from the graph state, gets writer's unedited answer and publish's result.
    _no_role(trace, "publish")
    _no_role(trace, "archive")
    equal(_calls(trace), [
        ("publish", {"text": "Three fixes shipped."},
         {"text": "Three fixes shipped (edited).", "channel": "#weekly"}, [0]),
        ("archive", {"text": "Three fixes shipped.", "receipt": "posted as #1"},
         {"text": "Three fixes shipped.", "receipt": "posted as #1"}, [])],
          "the capability Operations (node, proposed, effective, modified by)")
    equal(_writes(trace), [("topic", "Weekly", "input_mapping"),
                           ("report", "Three fixes shipped.", "writer"),
                           ("published", "posted as #1", "publish"),
                           ("archived", "archived #1", "archive")], "graph state writes")
    equal(_workflow_end(trace), ("completed", {
        "topic": "Weekly", "report": "Three fixes shipped.", "published": "posted as #1",
        "archived": "archived #1"}), "the workflow's end")


# --- §1: the inner React task of an AgentNode follows every rule ----------------------------


def _inner_scenario() -> dict[str, Any]:
    document = _document(
        "inner-react-rules",
        [[_agent("researcher", "task", "notes", "Research.",
                 [_call("read", path="a.md"), {"text": "a.md says B."}],
                 tools=[{"name": "read"}])]],
        {"task": "Summarise a.md"}, {"task": "task"})
    document["tools"] = {"read": [{"text": "B"}]}
    document["hooks"] = [{"point": "tool.pre_call", "items": [
        {"payload_patch": [{"path": "arguments.path", "value": "b.md"}]}]}]
    return document


def _inner_check(trace: Trace) -> None:
    # The AgentNode's invocation is a React task under the whole design (§1):
    # - its question is a protected input, delivered pending → claimed → delivered (§5) and
    #   sent verbatim in every request;
    # - its budget is its own Agent's (§7): W = 4096, O = min(4096, floor(4096 / 4)) = 1024,
    #   S = max(256, ceil(4096 × 1%)) = 256, B = 4096 − 1024 − 256 = 2816, and every request
    #   fits: I + O + S ≤ W;
    # - its tool call passes the tool.pre_call hook (§3): the handler reads b.md, not the
    #   proposed a.md, and the next request shows the effective call with its result paired
    #   by call id (§6).
    span = _span(trace, "researcher")
    chains = delivery_chains(span, of(span, "delivery")[0]["input_id"])
    equal([states for _, states, _ in chains], [["pending", "claimed", "delivered"]],
          "the question's deliveries")
    expect(len({e["input_id"] for e in of(span, "delivery")}) == 1,
           "deliveries of inputs other than the node's question")
    question_id = of(span, "delivery")[0]["input_id"]
    sent = of(span, "model_request")
    equal(len(sent), 2, "requests of the invocation")
    for request in sent:
        equal((request["window"], request["output_reserve"], request["safety_margin"],
               request["input_budget"]), (4096, 1024, 256, 2816), "the invocation's budget")
        expect(request["estimated_input_tokens"] + request["max_output_tokens"] + 256 <= 4096,
               f"a request over the window: {request['estimated_input_tokens']}")
        equal(request["protected_input_ids"], [question_id], "the protected inputs")
        equal(lines(request)[:2], [("system", "system_prompt", "Research."),
                                   ("user", "user_ref", "Summarise a.md")],
              "the request's fixed input")
    equal([(e["name"], e["proposed_arguments"], e["effective_arguments"])
           for e in of(span, "tool_executed")], [("read", {"path": "a.md"}, {"path": "b.md"})],
          "the tool the handler ran")
    messages = sent[1]["view"]["messages"]
    decision = next(m for m in messages if m["tool_calls"])
    result = messages[messages.index(decision) + 1]
    equal([json.loads(c["arguments"]) for c in decision["tool_calls"]], [{"path": "b.md"}],
          "the call the second request shows")
    equal((result["kind"], result["call_id"], result["text"]),
          ("tool_result", decision["tool_calls"][0]["call_id"], "B"), "its paired result")
    equal(_endings(trace), {"researcher": ("succeeded", None, None)}, "node endings")
    equal(_workflow_end(trace), ("completed", {"task": "Summarise a.md",
                                               "notes": "a.md says B."}), "the workflow's end")


# --- §2: WorkflowSession inputs go through the input mapping --------------------------------


def _inputs_scenario() -> dict[str, Any]:
    return _document(
        "workflow-input-mapping",
        [[_agent("answerer", "question", "answer", "Answer.", [{"text": "Nothing."}])]],
        {"q": "What is new?", "note": "Internal note."}, {"q": "question"})


def _inputs_check(trace: Trace) -> None:
    # §2: the WorkflowSession's inputs are taken by the outer input mapping — q becomes the
    # graph state's question, note (unmapped) goes nowhere — and not by the root role's
    # delivery rule: no input of the WorkflowSession is delivered to an Agent's root role.
    # The one delivery is the AgentNode's own question, from its input mapping; its request
    # shows that question and nothing else of the inputs.
    equal([w for w in _writes(trace) if w[2] == "input_mapping"],
          [("question", "What is new?", "input_mapping")], "writes of the input mapping")
    inputs = {e["input_id"] for e in of(trace, "delivery")}
    equal(len(inputs), 1, "inputs delivered")
    equal([states for _, states, _ in delivery_chains(trace, inputs.pop())],
          [["pending", "claimed", "delivered"]], "the question's deliveries")
    [request] = exactly(1, of(trace, "model_request"), "model_request events")
    equal(lines(request), [("system", "system_prompt", "Answer."),
                           ("user", "user_ref", "What is new?")], "the answerer's request")
    equal(_workflow_end(trace), ("completed", {"question": "What is new?",
                                               "answer": "Nothing."}), "the workflow's end")


# --- §11: a context error fails its AgentNode only --------------------------------------------


def _failure_scenario() -> dict[str, Any]:
    document = _document(
        "workflow-node-failure-routed",
        [[_agent("analyst", "brief", "analysis", "Analyse.", [{"text": "An analysis."}],
                 window=2048, output_reserve=256, safety_margin=256),
          _agent("reporter", "topic", "report", "Report.", [{"text": "Three fixes shipped."}])],
         [_capability("publish", "publish", {"text": "report"}, "published")]],
        {"brief": "x" * 3000, "topic": "What changed?"}, {"brief": "brief", "topic": "topic"})
    document["workflow"]["stages"][0][0]["agent_node"]["on_error"] = "fallback"
    document["tools"] = {"publish": [{"text": "posted"}]}
    return document


def _failure_check(trace: Trace) -> None:
    # analyst: W = 2048, O = S = 256, B = 1536; its protected inputs alone are "Analyse." (8)
    # + the 3000-character brief = 3008 > B: CONTEXT_PROTECTED_INPUT_TOO_LARGE before any
    # request (§11). The error belongs to that AgentInvocation: the node gets a failed result,
    # routed by its on_error ("fallback") into analysis.fallback, never analysis; its sibling
    # reporter is not cancelled and answers; the next stage publishes the report.
    equal(_endings(trace), {
        "analyst": ("failed", "fallback", "CONTEXT_PROTECTED_INPUT_TOO_LARGE"),
        "reporter": ("succeeded", None, None), "publish": ("succeeded", None, None)},
        "node endings")
    equal(of(_span(trace, "analyst"), "model_request"), [], "the analyst's requests")
    equal([(e["status"], e["error_code"]) for e in of(_span(trace, "analyst"), "run_ended")],
          [("failed", "CONTEXT_PROTECTED_INPUT_TOO_LARGE")], "the analyst's Run")
    equal([lines(r)[1:] for r in of(_span(trace, "reporter"), "model_request")],
          [[("user", "user_ref", "What changed?")]], "the reporter's requests")
    routed = [(key, value["status"], value["error_code"]) for key, value, source
              in _writes(trace) if source == "analyst"]
    equal(routed, [("analysis.fallback", "failed", "CONTEXT_PROTECTED_INPUT_TOO_LARGE")],
          "the analyst's graph state writes")
    equal([c[:3] for c in _calls(trace)], [("publish", {"text": "Three fixes shipped."},
                                            {"text": "Three fixes shipped."})],
          "the capability Operation")
    status, state = _workflow_end(trace)
    equal((status, sorted(state)), ("completed", ["analysis.fallback", "brief", "published",
                                                  "report", "topic"]), "the workflow's end")


def _takeover_scenario() -> dict[str, Any]:
    document = _failure_scenario()
    document["crash"] = {"phase": "raw_answer_saved", "when": "before"}
    return document


def _takeover_check(trace: Trace) -> None:
    # S11-NODE-FAILURE-ROUTED's workflow, its process dying just before the reporter's raw
    # answer is saved (the analyst sends no request, so that is the first raw answer). §10:
    # the reporter's invocation is taken over from its own Session's stored facts — its
    # question was received, so it is not asked again; the request in flight is, once, as the
    # same request — and the outer graph keeps its state: the nodes end, route and write as
    # without the crash, and the workflow completes with the same state (Q162).
    equal([(e.get("phase"), e["when"]) for e in of(trace, "restarted")],
          [("raw_answer_saved", "before")], "restarts")
    asked = of(_span(trace, "reporter"), "model_request")
    equal([(r["purpose_key"], r["attempt"]) for r in asked[1:]],
          [(r["purpose_key"], r["attempt"]) for r in asked[:1]],
          "the reporter's request asked again after the takeover (the same request, once)")
    equal([lines(r)[1:] for r in asked], [[("user", "user_ref", "What changed?")]] * 2,
          "the reporter's requests")
    equal(_endings(trace), {
        "analyst": ("failed", "fallback", "CONTEXT_PROTECTED_INPUT_TOO_LARGE"),
        "reporter": ("succeeded", None, None), "publish": ("succeeded", None, None)},
        "node endings")
    equal([(key, source) for key, _, source in _writes(trace)],
          [("brief", "input_mapping"), ("topic", "input_mapping"),
           ("analysis.fallback", "analyst"), ("report", "reporter"),
           ("published", "publish")], "graph state writes")
    equal([c[:3] for c in _calls(trace)], [("publish", {"text": "Three fixes shipped."},
                                            {"text": "Three fixes shipped."})],
          "the capability Operation")
    status, state = _workflow_end(trace)
    equal((status, sorted(state)), ("completed", ["analysis.fallback", "brief", "published",
                                                  "report", "topic"]), "the workflow's end")


# --- §11: the root Run's stop, deadline and Loop budget end the whole tree -------------------


def _stop_scenario() -> dict[str, Any]:
    document = _document(
        "workflow-root-stop",
        [[_agent("researcher", "topic", "research", "Research.",
                 [_call("search", q="weekly"), {"text": "Found it."}],
                 tools=[{"name": "search"}])],
         [_agent("checker", "topic", "check", "Check.", [{"text": "Checked."}]),
          _capability("publish", "publish", {"text": "research"}, "published")]],
        {"topic": "Weekly"}, {"topic": "topic"})
    document["tools"] = {"search": [{"text": "results"}], "publish": [{"text": "posted"}]}
    document["triggers"] = [{"on": {"tool": "search", "ordinal": 1}, "do": {"stop": True}}]
    return document


def _stop_check(trace: Trace) -> None:
    # The user stops the root Run while researcher's search runs. The running invocation ends
    # stopped — no further business Attempt (§11) — and the stop is the whole tree's: it is not
    # a local failure routed by researcher's on_error (no research.error), and no later node
    # starts (checker asks nothing, publish runs nothing). The workflow ends stopped with the
    # graph state its input mapping wrote.
    equal(_endings(trace), {"researcher": ("stopped", None, None),
                            "checker": ("not_run", None, None),
                            "publish": ("not_run", None, None)}, "node endings")
    equal(len(of(trace, "model_request")), 1, "requests (researcher's first only)")
    equal([(e["status"], e["error_code"]) for e in of(trace, "run_ended")],
          [("stopped", None)], "Run endings")
    equal(_calls(trace), [], "capability Operations")
    equal(_workflow_end(trace), ("stopped", {"topic": "Weekly"}), "the workflow's end")


def _deadline_scenario() -> dict[str, Any]:
    search = {"name": "search"}
    document = _document(
        "workflow-root-deadline",
        [[_agent("quick", "topic", "quick", "Quick.",
                 [_call("search", q="a"), {"text": "Quick answer."}], tools=[search],
                 run_deadline=1)],
         [_agent("slow", "topic", "slow", "Slow.",
                 [_call("search", q="b"), {"text": "Slow answer."}], tools=[search])],
         [_agent("late", "topic", "late", "Late.", [{"text": "Late answer."}])]],
        {"topic": "Weekly"}, {"topic": "topic"}, deadline=3)
    document["tools"] = {"search": [{"text": "r1"}, {"text": "r2"}]}
    return document


def _deadline_check(trace: Trace) -> None:
    # Logical ticks, one per model call and tool run; the root Run's deadline is 3 ticks
    # for the whole tree. quick's own deadline is 1: its request takes tick 1, so its search
    # may not start and its next Loop ends it timed_out at tick 1 < 3 — its own deadline, a
    # local failure routed to quick.error. slow starts at tick 1 with 2 left: its request
    # (tick 2) and its search (tick 3) use them, and its next Loop finds the root's deadline
    # passed: slow ends timed_out, the whole tree's ending — not routed (no slow.error), and
    # late never starts.
    equal(_endings(trace), {"quick": ("failed", "error", None),
                            "slow": ("timed_out", None, None),
                            "late": ("not_run", None, None)}, "node endings")
    equal([(e["status"], e["error_code"]) for e in of(trace, "run_ended")],
          [("timed_out", None), ("timed_out", None)], "Run endings")
    equal([lines(r)[0][2] for r in of(trace, "model_request")], ["Quick.", "Slow."],
          "requests by system prompt")
    status, state = _workflow_end(trace)
    equal((status, sorted(state)), ("timed_out", ["quick.error", "topic"]),
          "the workflow's end")
    equal(state["quick.error"]["status"], "timed_out", "quick's routed result")


def _loops_scenario() -> dict[str, Any]:
    search = {"name": "search"}
    document = _document(
        "workflow-root-loops",
        [[_agent("first", "topic", "first", "First.",
                 [_call("search", q="a"), {"text": "First."}], tools=[search]),
          _agent("narrow", "topic", "narrow", "Narrow.",
                 [_call("search", q="b"), {"text": "Narrow."}], tools=[search], loop_limit=1)],
         [_agent("second", "topic", "second", "Second.",
                 [_call("search", q="c"), {"text": "Second."}], tools=[search])],
         [_agent("third", "topic", "third", "Third.", [{"text": "Third."}])]],
        {"topic": "Weekly"}, {"topic": "topic"}, loop_limit=4)
    document["tools"] = {"search": [{"text": "r1"}, {"text": "r2"}, {"text": "r3"}]}
    return document


def _loops_check(trace: Trace) -> None:
    # The root Run's Loop budget is 4 business Loops for the whole tree. first uses 2 (a call,
    # then its answer). narrow's own loop_limit is 1: its one Loop calls search, and it ends
    # loop_exhausted with 2 of the root's Loops still left — a local failure, routed to
    # narrow.error. second gets the 1 Loop left: it calls search, and the root's budget is
    # spent: second ends loop_exhausted for the whole tree, not routed, and third never starts.
    equal(_endings(trace), {"first": ("succeeded", None, None),
                            "narrow": ("failed", "error", None),
                            "second": ("loop_exhausted", None, None),
                            "third": ("not_run", None, None)}, "node endings")
    equal(sorted(lines(r)[0][2] for r in of(trace, "model_request")),
          ["First.", "First.", "Narrow.", "Second."], "requests by system prompt")
    status, state = _workflow_end(trace)
    equal((status, sorted(state)), ("loop_exhausted", ["first", "narrow.error", "topic"]),
          "the workflow's end")
    equal(state["narrow.error"]["status"], "loop_exhausted", "narrow's routed result")


CASES: tuple[Case, ...] = (
    Case("S1-OUTER-NODE-NO-CONTEXT", "an outer node has no model loop; its context_patch is "
         "refused", "§1", ("CTX-1.16", "CTX-1.18", "CTX-3.40"), _outer_scenario(),
         _outer_check, WORKFLOW | {"hooks"}),
    Case("S1-OUTER-EFFECTIVE-INPUT", "an outer node's changed input is its Operation's, not "
         "the graph state's", "§1", ("CTX-1.17",), _effective_scenario(), _effective_check,
         WORKFLOW | {"hooks"}),
    Case("S1-INNER-REACT-RULES", "an AgentNode's React task follows every rule", "§1",
         ("CTX-1.19",), _inner_scenario(), _inner_check,
         WORKFLOW | {"hooks", "estimator_injection"}),
    Case("S2-WORKFLOW-INPUT-MAPPING", "WorkflowSession inputs go through the input mapping",
         "§2", ("CTX-2.21",), _inputs_scenario(), _inputs_check, WORKFLOW),
    Case("S11-NODE-FAILURE-ROUTED", "a context error fails its AgentNode only, routed",
         "§11", ("CTX-11.11", "CTX-11.12"), _failure_scenario(), _failure_check,
         WORKFLOW | {"estimator_injection"}),
    Case("S10-WORKFLOW-NODE-TAKEOVER", "an AgentNode whose process dies is taken over from its "
         "own store; the workflow goes on as without the crash", "§10",
         ("CTX-10.6", "CTX-10.9"), _takeover_scenario(), _takeover_check,
         WORKFLOW | {"estimator_injection", crash_need("raw_answer_saved")}),
    Case("S11-ROOT-STOP-WHOLE-TREE", "the root Run's stop ends the whole tree", "§11",
         ("CTX-11.13",), _stop_scenario(), _stop_check, WORKFLOW | {"stop", "triggers"}),
    Case("S11-ROOT-DEADLINE-WHOLE-TREE", "the root Run's deadline ends the whole tree",
         "§11", ("CTX-11.13",), _deadline_scenario(), _deadline_check, WORKFLOW),
    Case("S11-ROOT-LOOPS-WHOLE-TREE", "the root Run's Loop budget ends the whole tree",
         "§11", ("CTX-11.13",), _loops_scenario(), _loops_check, WORKFLOW),
)
