"""A readable timeline of a trace, for reviewers of the design (`ctxspec replay`): for each
model request what was sent and the budget figures, whether and why it compacted, which hooks
changed what, which tools ran with which arguments, how inputs moved and how Runs ended; for a
workflow, each node, its capability Operation, the graph state writes and the ending."""

import json
from collections.abc import Iterable

from ctxspec.reference.runtime import trace as tr


def _short(text: str, width: int = 70) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[:width - 1] + "…"


def timeline(events: Iterable[tr.TraceEvent]) -> list[str]:
    lines: list[str] = []
    for event in events:
        if isinstance(event, tr.ClientEvent):
            if event.event in ("run_started", "run_ended"):
                lines.append(f"[run_seq {event.run_seq}] {event.event.replace('_', ' ')}: "
                             f"{event.detail}")
        elif isinstance(event, tr.ModelRequestSent):
            figures = (f"I={event.estimated_input_tokens} max_output={event.max_output_tokens} "
                       f"W={event.window} O={event.output_reserve} S={event.safety_margin} "
                       f"B={event.input_budget} trigger={event.trigger_threshold}")
            why = f"; §8: {event.compaction}" if event.compaction else ""
            who = "" if event.role == "root" else f"{event.role}, "
            lines.append(f"  model request ({who}{event.purpose}, {event.purpose_key}, attempt "
                         f"{event.attempt}): {figures}{why}")
            if event.snapshot_id:
                lines.append(f"    summary in use: snapshot {event.snapshot_id}")
            for message in event.view.messages:
                lines.append(f"    {message.role.value:<9} {message.kind.value:<13} "
                             f"{_short(message.text)}")
                for call in message.tool_calls:
                    lines.append(f"    {'':<9} {'tool_call':<13} #{call.action_ordinal} "
                                 f"{call.name}{_short(call.arguments, 50)}")
        elif isinstance(event, tr.ModelUsage):
            deviation = "" if event.input_deviation is None \
                else f", deviation {event.input_deviation:+d}"
            lines.append(f"    usage reported (audit only): input {event.input_tokens} "
                         f"(estimate {event.estimated_input_tokens}{deviation}), output "
                         f"{event.output_tokens}")
        elif isinstance(event, tr.HookDecided):
            changed = ", ".join(event.changes) or "no change"
            problems = f" [{', '.join(event.diagnostics)}]" if event.diagnostics else ""
            lines.append(f"  hook {event.point} #{event.chain_position}: {event.decision}, "
                         f"{changed}{problems}")
        elif isinstance(event, tr.ToolExecuted):
            arguments = json.dumps(dict(event.effective_arguments), ensure_ascii=False)
            proposed = json.dumps(dict(event.proposed_arguments), ensure_ascii=False)
            note = "" if arguments == proposed else f" (the model proposed {proposed})"
            took = "" if event.latency is None else f" (took {event.latency})"
            lines.append(f"  tool {event.name}{arguments}{note} → {event.outcome}{took}")
        elif isinstance(event, tr.CompactionStep):
            lines.append(f"  compaction {event.step}: {event.detail}")
        elif isinstance(event, tr.DeliveryChanged):
            lines.append(f"  input {str(event.input_id)[:8]} {event.state}")
        elif isinstance(event, tr.NodeStarted):
            lines.append(f"node {event.node} ({event.node_kind.replace('_', ' ')}) starts")
        elif isinstance(event, tr.CapabilityCalled):
            arguments = json.dumps(dict(event.effective_input), ensure_ascii=False)
            proposed = json.dumps(dict(event.proposed_input), ensure_ascii=False)
            note = "" if arguments == proposed else \
                f" (mapped {proposed}; changed by hook #{', #'.join(map(str, event.modified_by))})"
            lines.append(f"  capability {event.tool}{arguments}{note} → {event.outcome}")
        elif isinstance(event, tr.GraphStateWritten):
            value = json.dumps(event.value, ensure_ascii=False)
            lines.append(f"  graph state {event.key} = {_short(value, 50)} "
                         f"(by {event.source.replace('_', ' ')})")
        elif isinstance(event, tr.WorkflowEnded):
            lines.append(f"workflow ended: {event.status}")
        elif isinstance(event, tr.NodeEnded):
            route = f" → route {event.route}" if event.route else ""
            code = f" {event.error_code}" if event.error_code else ""
            lines.append(f"node {event.node}: {event.status}{code}{route}")
        elif isinstance(event, tr.RunEnded):
            code = f" {event.error_code}" if event.error_code else ""
            why = f" — {event.message}" if event.message else ""
            lines.append(f"run {event.run_no} ended: {event.status}{code}{why}")
        elif isinstance(event, tr.Restarted):
            lines.append(f"-- the process died {event.when} {event.commit} "
                         f"#{event.occurrence}; a new runtime takes the Session over --")
        elif isinstance(event, tr.SessionOpened):
            lines.append(f"== Session {event.session} opens ==")
    return lines
