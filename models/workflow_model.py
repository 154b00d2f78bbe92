"""A model of workflows (§1, §2, §11): random WorkflowSessions — stages of AgentNodes and
CapabilityNodes, failures routed to error keys, the user's stop after a node, a tree deadline
and a tree Loop limit — played on any driver with the ``workflow`` capability and judged from
the neutral trace alone:

- the tree ends once, last: ``workflow_ended``, ``completed`` unless the root Run's stop,
  deadline or Loop limit ended it (§11);
- every node ends exactly once; a node never started ends ``not_run`` and has no other event;
  nodes report their events between their own ``node_started`` and ``node_ended``, never
  interleaved;
- stages in order: a node starts only after every node of the stage before it ended;
- the graph state is written only through the mappings: the inputs through ``input_mapping``
  (mapped names only, before any node), a node only under its own ``output_key`` (a failure
  under ``<output_key>.<on_error>``, routed), a node not run never;
- a local failure never cancels its siblings (§11): only a tree ending (the root Run's stop,
  deadline or Loop limit) leaves nodes ``not_run``, and no node starts after it;
- ``stop_after`` names a node: the tree ends ``stopped`` once it finished.

A workflow scenario has no steps and no crash (docs/scenarios.md), so this is a property over
whole scenarios, not a state machine: each example is one workflow. ``coverage`` counts the
rows it reached (``ROWS``).
"""

import json
from collections import Counter
from collections.abc import Mapping
from typing import Any

from hypothesis import strategies as st

Trace = list[dict[str, Any]]
TREE_ENDINGS = ("stopped", "timed_out", "loop_exhausted")
CAPABILITY_POINT = "capability.pre_call"
_ITEMS: dict[str, dict[str, Any]] = {
    "modify": {"payload_patch": [{"path": "input.channel", "value": "#weekly"}]},
    "allow": {"decision": "allow"}, "deny": {"decision": "deny"}}
"""A capability node's hook item for each decision (§3): a deny fails the node, routed."""
ROWS: tuple[str, ...] = (
    "workflow run", "node succeeded", "node failed (routed)", "node not run",
    "capability node called", "capability input changed by a hook", "siblings in a stage",
    "workflow completed", "workflow stopped", "workflow timed_out", "workflow loop_exhausted",
    # The seventh hook point is a workflow's (the driver model's table has the other six).
    *(f"hook {CAPABILITY_POINT} × {decision}" for decision in _ITEMS),
    *(f"node taken over after a crash {when}" for when in ("before", "after", "fails")))
NODE_PHASES = ("session_opened", "input_accepted", "request_frozen", "attempt_failed",
               "first_output", "raw_answer_saved", "effective_result_committed",
               "run_finalised")
"""The crash points an AgentNode's invocation passes here (its Agent has no tools, hooks of
its own, Executor or compaction): the workflow dies there, and the invocation is taken over
from its own store while the graph keeps its state (Q162)."""
_CRASHES = st.builds(lambda phase, occurrence, when: {"phase": phase, "occurrence": occurrence,
                                                      "when": when},
                     st.sampled_from(NODE_PHASES), st.integers(1, 2),
                     st.sampled_from(["before", "after", "fails"]))




class WorkflowViolation(AssertionError):
    """An invariant did not hold on the workflow's trace."""


def _expect(condition: bool, message: str) -> None:
    if not condition:
        raise WorkflowViolation(message)


_ANSWERS = st.sampled_from([
    [{"text": "an answer"}],
    [{"fail": "provider_unavailable"}, {"fail": "provider_unavailable"}],
    [{"partial": "half", "fail": "stream_broken"}, {"text": "a second try"}],
])


@st.composite
def workflows(draw: st.DrawFn) -> dict[str, Any]:
    """A workflow scenario: 1 to 3 stages of 1 or 2 nodes, each AgentNode asked the topic or an
    earlier node's output; some with a window too small for their question."""
    stages: list[list[dict[str, Any]]] = []
    keys = ["topic"]
    names: list[str] = []
    for s in range(draw(st.integers(1, 3))):
        stage = []
        for n in range(draw(st.integers(1, 2))):
            name = f"n{s}{n}"
            if draw(st.integers(0, 3)) == 0:
                node = {"capability_node": {"name": name, "tool": "publish",
                                            "input": {"text": draw(st.sampled_from(keys))},
                                            "output_key": f"{name}_out"}}
            else:
                window = draw(st.sampled_from([4096, 4096, 300]))
                node = {"agent_node": {
                    "name": name, "question_key": draw(st.sampled_from(keys)),
                    "output_key": f"{name}_out", "on_error": "error",
                    "agent": {"system_prompt": "Work.", "window": window,
                              "estimator": "chars",
                              **({"output_reserve": 64, "safety_margin": 16}
                                 if window < 1000 else {})},
                    "model": {"business": draw(_ANSWERS)}}}
            stage.append(node)
            names.append(name)
        stages.append(stage)
        keys += [f"{n}_out" for n in names[-len(stage):]]
    workflow: dict[str, Any] = {
        "input": {"topic": "What changed?", "unused": "never mapped"},
        "input_mapping": {"topic": "topic"}, "stages": stages}
    ending = draw(st.sampled_from(["none", "none", "stop_after", "deadline", "loop_limit"]))
    if ending == "stop_after":
        workflow["stop_after"] = draw(st.sampled_from(names))
    elif ending == "deadline":
        workflow["deadline"] = draw(st.integers(1, 3))
    elif ending == "loop_limit":
        workflow["loop_limit"] = draw(st.integers(1, 2))
    decision = draw(st.sampled_from(["none", "modify", "allow", "deny"]))
    hooks = [] if decision == "none" else [{"point": CAPABILITY_POINT, "items": [_ITEMS[decision]]}]
    crash = draw(st.one_of(st.none(), _CRASHES))
    return {"scenario_version": 1, "name": "workflow-model",
            "description": "built by models/workflow_model.py",
            "agent": {"window": 4096, "estimator": "chars"}, "workflow": workflow,
            "tools": {"publish": [{"text": "posted"}] * 6}, "hooks": hooks,
            **({"crash": crash} if crash is not None else {})}


def _spans(trace: Trace) -> dict[str, tuple[int | None, int]]:
    """Each node's (node_started position or None, node_ended position)."""
    started: dict[str, int] = {}
    ended: dict[str, int] = {}
    current: str | None = None
    for position, event in enumerate(trace):
        if event["kind"] == "node_started":
            _expect(current is None, f"node {event['node']} started inside node {current}")
            _expect(event["node"] not in started, f"node {event['node']} started twice")
            started[event["node"]] = position
            current = event["node"]
        elif event["kind"] == "node_ended":
            _expect(event["node"] not in ended, f"node {event['node']} ended twice")
            _expect(current in (None, event["node"]),
                    f"node {event['node']} ended inside node {current}")
            ended[event["node"]] = position
            current = None
    return {node: (started.get(node), end) for node, end in ended.items()}


def check(document: Mapping[str, Any], trace: Trace) -> None:
    """Raise WorkflowViolation at the first broken invariant."""
    workflow = document["workflow"]
    nodes = [(index, node.get("agent_node") or node["capability_node"])
             for index, stage in enumerate(workflow["stages"]) for node in stage]
    endings = [e for e in trace if e["kind"] == "workflow_ended"]
    _expect(len(endings) == 1 and trace[-1] is endings[0],
            f"the workflow ended {len(endings)} times, or not last")
    status = endings[0]["status"]
    spans = _spans(trace)
    _expect(set(spans) == {n["name"] for _, n in nodes},
            f"nodes ended {sorted(spans)}, the workflow has {[n['name'] for _, n in nodes]}")
    ended_by = {e["node"]: e for e in trace if e["kind"] == "node_ended"}
    stage_end: dict[int, int] = {}
    for stage, node in nodes:
        stage_end[stage] = max(stage_end.get(stage, -1), spans[node["name"]][1])
    # Where the tree ended, if it did: a node ending with the tree's status, the first node
    # left not run (the ending came between nodes), or the end of the stop_after node.
    cuts = [end for _, end in spans.values()
            if trace[end]["status"] in (*TREE_ENDINGS, "not_run")]
    stop_after = workflow.get("stop_after")
    if stop_after in spans and spans[stop_after][0] is not None:
        cuts.append(spans[stop_after][1])
    tree_end = min(cuts, default=None)
    for stage, node in nodes:
        start = spans[node["name"]][0]
        if start is None:
            _expect(ended_by[node["name"]]["status"] == "not_run",
                    f"node {node['name']} never started but ended "
                    f"{ended_by[node['name']]['status']}")
            continue
        _expect(stage == 0 or start > stage_end[stage - 1],
                f"node {node['name']} started before stage {stage - 1} ended")
        _expect(tree_end is None or start < tree_end,
                f"node {node['name']} started after the tree ended")
    _expect((tree_end is None) == (status == "completed"),
            f"the workflow ended {status}, but "
            f"{'no tree ending came' if tree_end is None else 'a node was cut short'}")
    _expect(status in ("completed", *TREE_ENDINGS), f"the workflow ended {status}")
    _expect(stop_after not in spans or spans[stop_after][0] is None or status == "stopped"
            or (tree_end is not None and tree_end < spans[stop_after][1]),
            f"the stop after {stop_after} did not end the tree stopped ({status})")
    _graph_writes(workflow, nodes, trace, spans, ended_by)
    _recovery(document, trace, spans)


LOST_ANSWER = frozenset({("first_output", "before"), ("first_output", "after"),
                         ("raw_answer_saved", "before"), ("attempt_failed", "before")})
"""The crash points at which the answer in flight was not saved yet, so it is asked again
once (conformance/crash_matrix.py has the whole table; a refused commit counts as before)."""


def _recovery(document: Mapping[str, Any], trace: Trace,
              spans: Mapping[str, tuple[int | None, int]]) -> None:
    """§10 inside a workflow: at most the planned restart; no request asked again but the one
    in flight at a lost-answer crash point, across the restart; each invocation's Run ends
    once, within its node."""
    crash = document.get("crash")
    restarts = [i for i, e in enumerate(trace) if e["kind"] == "restarted"]
    planned = [] if crash is None else [(crash["phase"], crash["when"])]
    _expect([(trace[i].get("phase"), trace[i]["when"]) for i in restarts] in ([], planned),
            f"restarts {[trace[i] for i in restarts]}, but the plan was {planned or 'no crash'}")
    asked: dict[tuple[str, int], list[int]] = {}
    for position, event in enumerate(trace):
        if event["kind"] == "model_request":
            asked.setdefault((event["purpose_key"], event["attempt"]), []).append(position)
    again = {key: where for key, where in asked.items() if len(where) > 1}
    lost = crash is not None and (crash["phase"], "before" if crash["when"] == "fails"
                                  else crash["when"]) in LOST_ANSWER
    _expect(not again or (lost and len(again) == 1 and all(
        len(w) == 2 and w[0] < restarts[0] < w[1] for w in again.values())),
            f"requests asked again: {sorted(again)}")
    for node, (start, end) in spans.items():
        if start is None or trace[start]["node_kind"] != "agent_node":
            continue
        # A dead incarnation may have traced an ending it never committed; each incarnation
        # ends the invocation's Run at most once, and some incarnation does.
        cut = next((i for i in restarts if start < i < end), end)
        runs = [sum(e["kind"] == "run_ended" for e in trace[a:b])
                for a, b in ((start, cut), (cut, end))]
        _expect(max(runs) <= 1 and sum(runs) >= 1,
                f"node {node}'s invocation ended {runs} times (before, after a restart)")


def outcome(trace: Trace) -> tuple[object, ...]:
    """What a workflow produced: each node's ending and route, the tree's ending and its final
    graph state."""
    return (tuple((e["node"], e["status"], e["route"]) for e in trace
                  if e["kind"] == "node_ended"),
            tuple((e["status"], json.dumps(e["state"], sort_keys=True)) for e in trace
                  if e["kind"] == "workflow_ended"))


def check_recovered(document: Mapping[str, Any], crashed: Trace, plain: Trace) -> None:
    """§10: a workflow whose invocation died and was taken over ends as the same workflow
    without the crash — every node, route, the tree's ending and the graph state. Only a tree
    deadline may differ: the answer in flight when the process died is asked again, which
    takes a tick of the root's deadline (so ``document`` must have none)."""
    _expect(outcome(crashed) == outcome(plain),
            f"crashed at {document['crash']}, the workflow ended {outcome(crashed)}; without "
            f"the crash, {outcome(plain)}")


def _graph_writes(workflow: Mapping[str, Any], nodes: list[tuple[int, dict[str, Any]]],
                  trace: Trace, spans: Mapping[str, tuple[int | None, int]],
                  ended_by: Mapping[str, dict[str, Any]]) -> None:
    first_start = min((s for s, _ in spans.values() if s is not None), default=len(trace))
    mapped = {workflow["input_mapping"][name]: value
              for name, value in workflow["input"].items() if name in workflow["input_mapping"]}
    owners = {n["name"]: n for _, n in nodes}
    for position, event in enumerate(trace):
        if event["kind"] != "graph_state_written":
            continue
        if event["source"] == "input_mapping":
            _expect(position < first_start and mapped.get(event["key"]) == event["value"],
                    f"input_mapping wrote {event['key']!r} (mapped: {sorted(mapped)}), or "
                    f"after a node started")
            continue
        node = owners.get(event["source"])
        _expect(node is not None, f"{event['source']!r} wrote the graph state")
        assert node is not None
        status = ended_by[node["name"]]["status"]
        key = node["output_key"]
        allowed = {key} if status == "succeeded" else \
            {f"{key}.{node.get('on_error', 'error')}"} if status == "failed" else {key}
        _expect(event["key"] in allowed,
                f"node {node['name']} ({status}) wrote {event['key']!r}, not {sorted(allowed)}")
    for name, ending in ended_by.items():
        if ending["status"] == "failed" and "question_key" in owners[name]:
            _expect(ending["route"] == owners[name].get("on_error", "error"),
                    f"node {name} failed but was routed to {ending['route']}")


def coverage(document: Mapping[str, Any], trace: Trace) -> Counter[str]:
    found: Counter[str] = Counter({"workflow run": 1})
    for event in trace:
        if event["kind"] == "node_ended":
            status = event["status"]
            found["node succeeded" if status == "succeeded" else "node failed (routed)"
                  if status == "failed" else "node not run" if status == "not_run"
                  else f"node {status}"] += 1
        elif event["kind"] == "capability_called":
            found["capability node called"] += 1
            found["capability input changed by a hook"] += bool(event["modified_by"])
        elif event["kind"] == "workflow_ended":
            found[f"workflow {event['status']}"] += 1
        elif event["kind"] == "hook_decided" and event["point"] == CAPABILITY_POINT:
            decision = "modify" if event["decision"] == "allow" and event["changes"] \
                else event["decision"]
            found[f"hook {CAPABILITY_POINT} × {decision}"] += 1
    found["siblings in a stage"] += any(len(s) > 1 for s in document["workflow"]["stages"])
    for event in trace:
        if event["kind"] == "restarted":
            found[f"node taken over after a crash {event['when']}"] += 1
            found[f"workflow crash at {event.get('phase')} {event['when']}"] += 1
    return +found


__all__ = ["NODE_PHASES", "ROWS", "WorkflowViolation", "check", "check_recovered", "coverage",
           "outcome", "workflows"]
