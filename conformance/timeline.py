"""A readable timeline of a trace, for reviewers of the design (`ctxspec replay`): for each
model request what was sent and the budget figures, whether and why it compacted, which hooks
changed what, which tools ran with which arguments, how inputs moved and how Runs ended; for a
workflow, each node, its capability Operation, the graph state writes and the ending.

It reads the neutral trace as plain JSON (the events of docs/scenarios.md "The trace"), the
same a case reads, so it shows any driver's trace and depends on no runtime's internals.
"""

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ctxspec.conformance.replay_marks import Names

Event = Mapping[str, Any]


def _short(text: str, width: int = 70) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[:width - 1] + "…"


def _client_event(event: Event) -> list[str]:
    if event["event"] not in ("run_started", "run_ended"):
        return []
    return [f"[run_seq {event['run_seq']}] {event['event'].replace('_', ' ')}: "
            f"{event['detail']}"]


def _model_request(event: Event) -> list[str]:
    figures = (f"I={event['estimated_input_tokens']} max_output={event['max_output_tokens']} "
               f"W={event['window']} O={event['output_reserve']} S={event['safety_margin']} "
               f"B={event['input_budget']} trigger={event['trigger_threshold']}")
    why = f"; §8: {event['compaction']}" if event.get("compaction") else ""
    who = "" if event.get("role", "root") == "root" else f"{event['role']}, "
    lines = [f"  model request ({who}{event['purpose']}, {event['purpose_key']}, attempt "
             f"{event['attempt']}): {figures}{why}"]
    if event.get("snapshot_id"):
        lines.append(f"    summary in use: snapshot {event['snapshot_id']}")
    for message in event["view"]["messages"]:
        lines.append(f"    {message['role']:<9} {message['kind']:<13} {_short(message['text'])}")
        for call in message.get("tool_calls", ()):
            lines.append(f"    {'':<9} {'tool_call':<13} #{call['action_ordinal']} "
                         f"{call['name']}{_short(call['arguments'], 50)}")
    return lines


def _model_usage(event: Event) -> list[str]:
    deviation = "" if event["input_deviation"] is None \
        else f", deviation {event['input_deviation']:+d}"
    return [f"    usage reported (audit only): input {event['input_tokens']} "
            f"(estimate {event['estimated_input_tokens']}{deviation}), output "
            f"{event['output_tokens']}"]


def _hook_decided(event: Event, names: Names) -> list[str]:
    """Named as the scenario numbers it, its fields by name (Q430): ``hook tool.pre_call #1
    item 1 (allow): write #1 arguments.path="reports/a.md"``."""
    changed = ", ".join(names.field(key) + sep + value for key, sep, value in
                        (str(c).partition("=") for c in event["changes"])) or "no change"
    problems = f" [{', '.join(event['diagnostics'])}]" if event["diagnostics"] else ""
    return [f"  hook {names.hook(event)}: {changed}{problems}"]


def _tool_executed(event: Event) -> list[str]:
    arguments = json.dumps(dict(event["effective_arguments"]), ensure_ascii=False)
    proposed = json.dumps(dict(event["proposed_arguments"]), ensure_ascii=False)
    note = "" if arguments == proposed else f" (the model proposed {proposed})"
    took = "" if event.get("latency") is None else f" (took {event['latency']})"
    return [f"  tool {event['name']}{arguments}{note} → {event['outcome']}{took}"]


def _capability_called(event: Event) -> list[str]:
    arguments = json.dumps(dict(event["effective_input"]), ensure_ascii=False)
    proposed = json.dumps(dict(event["proposed_input"]), ensure_ascii=False)
    items = ", ".join(str(position + 1) for position in event["modified_by"])
    note = "" if arguments == proposed else f" (mapped {proposed}; changed by item {items})"
    return [f"  capability {event['tool']}{arguments}{note} → {event['outcome']}"]


def _node_ended(event: Event) -> list[str]:
    route = f" → route {event['route']}" if event.get("route") else ""
    code = f" {event['error_code']}" if event.get("error_code") else ""
    return [f"node {event['node']}: {event['status']}{code}{route}"]


def _run_ended(event: Event) -> list[str]:
    code = f" {event['error_code']}" if event.get("error_code") else ""
    why = f" — {event['message']}" if event.get("message") else ""
    return [f"run {event['run_no']} ended: {event['status']}{code}{why}"]


LINES: Mapping[str, Callable[[Event], list[str]]] = {
    "client_event": _client_event,
    "model_request": _model_request,
    "model_usage": _model_usage,
    "tool_executed": _tool_executed,
    "compaction": lambda e: [f"  compaction {e['step']}: {e['detail']}"],
    "delivery": lambda e: [f"  input {str(e['input_id'])[:8]} {e['state']}"],
    "node_started": lambda e: [
        f"node {e['node']} ({e['node_kind'].replace('_', ' ')}) starts"],
    "capability_called": _capability_called,
    "graph_state_written": lambda e: [
        f"  graph state {e['key']} = {_short(json.dumps(e['value'], ensure_ascii=False), 50)} "
        f"(by {e['source'].replace('_', ' ')})"],
    "workflow_ended": lambda e: [f"workflow ended: {e['status']}"],
    "node_ended": _node_ended,
    "run_ended": _run_ended,
    "restarted": lambda e: [f"-- the process died {e['when']} {e['commit']} "
                            f"#{e['occurrence']}; a new runtime takes the Session over --"],
    "session_opened": lambda e: [f"== Session {e['session']} opens =="],
}
"""How each kind of event reads; a kind not listed (an operation state, a history read, an
event another runtime adds) is left out."""


_BATCH = 10_000
"""Events after a hook read to name the call it changed (the batch it is in runs within them)."""


def timeline(events: Iterable[Event]) -> list[str]:
    """The timeline of a neutral trace (a driver's ``trace()``), one line per thing shown."""
    trace = list(events)
    names = Names({}, {}, {})
    lines: list[str] = []
    requests = 0
    for at, event in enumerate(trace):
        kind = str(event.get("kind"))
        if kind == "hook_called":
            names.invocations[event["point"]] = names.invocations.get(event["point"], 0) + 1
        elif kind == "hook_decided":
            later = trace[at + 1:at + 1 + _BATCH]
            for change in event["changes"]:
                if str(change).startswith("tool_call:"):
                    names.batch(str(change).split(".")[0].removeprefix("tool_call:"), later)
            lines.extend(_hook_decided(event, names))
        render = LINES.get(kind)
        if render is not None:
            lines.extend(render(event))
        if kind == "model_request":
            names.learn(requests, event["view"]["messages"])
            requests += 1
    return lines
