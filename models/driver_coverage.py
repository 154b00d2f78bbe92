"""What a run of the driver-level model reached: a coverage table read from the neutral traces
(and the triggers the machine saw fire), one count per row over all examples.

``ROWS`` are the rows a CI run must reach at least once (tests/test_driver_machine.py): among
them every hook point × decision and every crash phase × moment. The table a run prints adds
informative breakdowns (failing and invalid hook items, Run failures by code). Everything is
read from what any driver reports and what the scripted ports were given, never from the
reference's store.
"""

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from ctxspec.models.driver_judge import PHASE_OF
from ctxspec.models.driver_rules import budget_of, decided_items, scripted_items
from ctxspec.models.driver_scripts import CRASH_PAIRS, HOOK_POINTS, TRIGGER_MOMENTS
from ctxspec.models.driver_settings import SETTINGS, SHARED_ITEM, odd_ratio

Trace = list[dict[str, Any]]

ENDINGS = ("succeeded", "failed", "stopped", "timed_out", "loop_exhausted")
TRIGGER_ON = ("business request", "compaction request", "tool run",
              *(f"moment {moment}" for moment in TRIGGER_MOMENTS))
"""Where a trigger fires: before the n-th request of a purpose or run of a tool, or at the
n-th time the loop passes a moment."""
DECISIONS = ("allow", "modify", "deny")
"""What a hook decides (§3): every point × each of these is a row."""
UNREACHABLE_CRASHES: dict[tuple[str, str], str] = {}
"""Crash point × moment pairs no Session of the model can reach, with the reason: none — every
phase of conformance/phases.py is passed by some Session the model builds, and dying before or
after it, or the store refusing it, is possible at each (docs/models.md)."""


def crash_row(phase: str, when: str) -> str:
    return f"crash at {phase} {when}"


ROWS: tuple[str, ...] = (
    "snapshot activated", "snapshot reused", "snapshot no longer applied",
    "snapshot refused at the switch", "episode resumed after a restart",
    "compaction refused below the chunk floor",
    "crash before a commit", "crash after a commit", "commit refused by the store",
    "crash during an episode", "crash with triggers",
    *(f"hook called: {point}" for point in HOOK_POINTS),
    *(f"hook {point} × {decision}" for point in HOOK_POINTS for decision in DECISIONS),
    "hook decision: failed",
    "hook item invalid", "hook item stale (revision conflict)",
    "trigger fired: supplement", "trigger fired: stop",
    *(f"trigger fired at: {on}" for on in TRIGGER_ON),
    "Executor started", "Session opened",
    *(f"Run ended: {status}" for status in ENDINGS),
    "Session of 20 steps or more",
    *(f"setting {name}" for name in SETTINGS),
    *("output cut at max_output (limit_output)", "tool refused: quota spent",
      "attempt 3 sent", "stop during a hook chain", "writer corrected a record",
      "shared field changed by a hook", "compaction with a custom prompt",
      "compaction T capped by the provider limit", "trigger fired: write"),
    *(crash_row(phase, when) for phase, when in CRASH_PAIRS
      if (phase, when) not in UNREACHABLE_CRASHES),
)
"""The rows every CI run must reach (a zero row is a part of the design the model missed)."""


def _snapshots(trace: Trace, found: Counter[str]) -> None:
    """Activated, reused (a later business request goes with it, no new episode for it), no
    longer applied (a later request of the same role goes without it, no new one in between),
    refused at the switch."""
    active: dict[str, str | None] = {}
    episodes: dict[str, str] = {}
    """episode → the role it compacts for (the role of the request that started it)."""
    last_role = "root"
    for event in trace:
        kind = event["kind"]
        if kind in ("restarted", "session_opened"):
            active = {}
        elif kind == "model_request" and event["purpose"] == "business":
            last_role = event.get("role", "root")
            used = event.get("snapshot_id")
            if active.get(last_role) and used == active[last_role] \
                    and event.get("compaction") != "compact":
                found["snapshot reused"] += 1
            elif active.get(last_role) and used is None:
                found["snapshot no longer applied"] += 1
                active[last_role] = None
        elif kind == "compaction":
            episodes.setdefault(event["episode_id"], last_role)
            if event["step"] == "snapshot_active":
                found["snapshot activated"] += 1
                active[episodes[event["episode_id"]]] = event["detail"]
            elif event["step"] == "snapshot_refused":
                found["snapshot refused at the switch"] += 1


def _crashes(document: Mapping[str, Any], trace: Trace, found: Counter[str]) -> None:
    restart = next((i for i, e in enumerate(trace) if e["kind"] == "restarted"), None)
    if restart is None:
        return
    event = trace[restart]
    found["commit refused by the store" if event["when"] == "fails"
          else f"crash {event['when']} a commit"] += 1
    found[crash_row(event.get("phase") or PHASE_OF[event["commit"]], event["when"])] += 1
    if document.get("triggers"):
        found["crash with triggers"] += 1
    before = {e["episode_id"] for e in trace[:restart] if e["kind"] == "compaction"}
    ended = {e["episode_id"] for e in trace[:restart] if e["kind"] == "compaction"
             and e["step"] in ("snapshot_active", "snapshot_refused")}
    after = {e["episode_id"] for e in trace[restart:] if e["kind"] == "compaction"}
    if before - ended:
        found["crash during an episode"] += 1
    if (before - ended) & after:
        found["episode resumed after a restart"] += 1


def hook_row(point: str, decision: str) -> str:
    return f"hook {point} × {decision}"


def decision_kind(item: Mapping[str, Any], decided: Mapping[str, Any]) -> str:
    """What a hook item did, from the item as scripted and the decision the trace reports:
    ``deny``; ``modify`` (an allow whose valid patch was applied); ``allow`` (an allow with no
    patch); otherwise what went wrong (a failing handler, an illegal decision, a patch refused
    whole)."""
    decision = decided["decision"]
    if decision != "allow":
        return decision if decided["patch_valid"] else f"{decision} (invalid)"
    if not decided["patch_valid"]:
        return "allow (invalid patch)"
    patched = item.get("payload_patch") or item.get("context_patch")
    return "modify" if patched else "allow"


def _hooks(document: Mapping[str, Any], trace: Trace, found: Counter[str]) -> None:
    """Each chain the trace shows, paired with the items the scripted port answered it with:
    the port counts a point's chains over the whole scenario, as the trace lists them."""
    asked: Counter[str] = Counter()
    items: list[Mapping[str, Any]] = []
    for event in trace:
        if event["kind"] == "hook_called":
            found[f"hook called: {event['point']}"] += 1
            asked[event["point"]] += 1
            items = scripted_items(document.get("hooks", ()), event["point"],
                                   asked[event["point"]])
        elif event["kind"] == "hook_decided":
            diagnostics = event.get("diagnostics") or ()
            if "CONTEXT_REVISION_CONFLICT" in diagnostics:
                found["hook item stale (revision conflict)"] += 1
            if not event["patch_valid"]:
                found["hook item invalid"] += 1
            found[f"hook decision: {event['decision']}"] += 1
            position = event["chain_position"]
            item = items[position] if position < len(items) else {}
            found[hook_row(event["point"], decision_kind(item, event))] += 1


def coverage(document: Mapping[str, Any], trace: Trace, fired: Iterable[tuple[str, str]],
             steps: int) -> Counter[str]:
    """The rows one example reached. ``fired``: the triggers that fired, each as where it fired
    (:data:`TRIGGER_ON`) and what it did (``supplement`` or ``stop``); ``steps``: the steps the
    machine performed."""
    found: Counter[str] = Counter()
    _snapshots(trace, found)
    _crashes(document, trace, found)
    _hooks(document, trace, found)
    for on, kind in fired:
        found[f"trigger fired: {kind}"] += 1
        found[f"trigger fired at: {on}"] += 1
    # An Executor's first request: its hand-over alone, before any answer of its own.
    found["Executor started"] += sum(
        1 for e in trace if e["kind"] == "model_request" and e.get("role", "root") != "root"
        and e["purpose"] == "business" and e["attempt"] == 1
        and not any(m["kind"] in ("assistant", "tool_result") for m in e["view"]["messages"]))
    found["Session opened"] += sum(1 for e in trace if e["kind"] == "session_opened")
    for event in trace:
        if event["kind"] == "run_ended":
            found[f"Run ended: {event['status']}"] += 1
            if event.get("error_code"):
                found[f"Run failed: {event['error_code']}"] += 1
            if "a useful chunk carries" in (event.get("message") or ""):
                found["compaction refused below the chunk floor"] += 1
        elif event["kind"] == "tool_executed":
            found["tool executed"] += 1
        elif event["kind"] == "model_request" and event.get("role", "root") == "root" \
                and "a useful chunk carries" in str(event["view"]):
            # An Executor's refusal reaches its Planner as the delegate's error (Q120).
            found["compaction refused below the chunk floor"] += 1
    if steps >= 20:
        found["Session of 20 steps or more"] += 1
    if any(e["kind"] == "run_ended" for e in trace):
        found.update(f"setting {name}" for name in settings_of(document))
    _effects(document, trace, fired, found)
    return +found


def settings_of(document: Mapping[str, Any]) -> list[str]:
    """The widened settings (models/driver_settings.py SETTINGS) a document has."""
    agent = document["agent"]
    has = {
        "output_reserve default": "output_reserve" not in agent,
        "safety_margin default": "safety_margin" not in agent,
        "tool_quota": agent.get("tool_quota") is not None,
        "tool_quota 0": agent.get("tool_quota") == 0,
        "loop_limit 1": agent.get("loop_limit") == 1,
        "model_attempts 3": agent.get("model_attempts") == 3,
        "tiny B": budget_of(agent).input_budget <= 200,
        "trigger_ratio odd": odd_ratio(agent.get("trigger_ratio", "0.80")),
        "estimator bytes": agent.get("estimator", "bytes") == "bytes",
        "shared field": bool(agent.get("shared")),
        "limit_output": bool(document["model"].get("limit_output")),
    }
    return [name for name in SETTINGS if has.get(name, agent.get(name) is not None)]


def _effects(document: Mapping[str, Any], trace: Trace, fired: Iterable[tuple[str, str]],
             found: Counter[str]) -> None:
    """Rows showing a widened setting took effect, read from the trace."""
    agent = document["agent"]
    for event in trace:
        kind = event["kind"]
        if kind == "model_usage" and event.get("cut"):
            found["output cut at max_output (limit_output)"] += 1
        elif kind == "model_request":
            found["attempt 3 sent"] += event["attempt"] == 3
            found["tool refused: quota spent"] += sum(
                (m.get("result_facts") or {}).get("code") == "QUOTA_EXHAUSTED"
                for m in event["view"]["messages"][-3:])
            if event["purpose"] == "compaction":
                found["compaction with a custom prompt"] += bool(
                    agent.get("custom_compaction_prompt"))
                found["compaction T capped by the provider limit"] += \
                    event["max_output_tokens"] == agent.get("provider_output_limit")
    for item, decided in decided_items(document.get("hooks", ()), trace):
        shared = item.get("context_patch") == SHARED_ITEM["context_patch"]
        found["shared field changed by a hook"] += shared and decided["decision"] == "allow" \
            and bool(decided["changes"])
    for on, what in fired:
        found["stop during a hook chain"] += on == "moment hook" and what == "stop"
        found["writer corrected a record"] += what == "write"


def table(reached: Counter[str], title: str) -> str:
    """The coverage table as Markdown: the required rows in order, then the breakdowns."""
    lines = [f"| {title} | count |", "|---|---|"]
    lines += [f"| {row} | {reached[row]} |" for row in ROWS]
    lines += [f"| {row} | {reached[row]} |" for row in sorted(reached) if row not in ROWS]
    return "\n".join(lines)


def missing(reached: Counter[str]) -> list[str]:
    return [row for row in ROWS if reached[row] == 0]


__all__ = ["DECISIONS", "ENDINGS", "ROWS", "TRIGGER_ON", "UNREACHABLE_CRASHES", "coverage",
           "crash_row", "decision_kind", "hook_row", "missing", "scripted_items", "table"]
