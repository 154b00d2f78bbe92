"""A failing case's trace in a few lines (``ctxspec conformance -v``, issue #36): each model
request — its kind (purpose and role), attempt, I, the §8 decision and its messages (role,
kind, the start of the text) — then how each Run ended. It reads the neutral JSON trace
(docs/scenarios.md "The trace") and tolerates a field a runtime left out, so it can show any
driver's trace, even one that broke the trace contract."""

from collections.abc import Mapping, Sequence
from typing import Any

WIDTH = 60
"""Characters of a message's text shown."""
MESSAGES = 24
"""Messages shown per request: the first ones and the last ones, the middle elided."""


def _text(text: object) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= WIDTH else flat[:WIDTH - 1] + "…"


def _request(number: int, event: Mapping[str, Any]) -> list[str]:
    role = event.get("role", "?")
    who = "" if role == "root" else f", {role}"
    lines = [f"request {number} ({event.get('purpose', '?')}{who}, attempt "
             f"{event.get('attempt', '?')}): I={event.get('estimated_input_tokens', '?')}, "
             f"§8 {event.get('compaction') or 'no decision'}"]
    view = event.get("view")
    messages: Sequence[Any] = view.get("messages", ()) if isinstance(view, Mapping) else ()
    shown = list(enumerate(messages))
    if len(shown) > MESSAGES:
        half = MESSAGES // 2
        shown = [*shown[:half], (-1, None), *shown[-half:]]
    for index, message in shown:
        if not isinstance(message, Mapping):
            lines.append(f"  … {len(messages) - MESSAGES} more messages")
            continue
        calls = message.get("tool_calls") or ()
        called = "".join(f" → {c.get('name', '?')}" for c in calls if isinstance(c, Mapping))
        lines.append(f"  {index:>2} {message.get('role', '?'):<9} {message.get('kind', '?'):<13}"
                     f" {_text(message.get('text', ''))}{called}")
    return lines


def summary_lines(trace: Sequence[Mapping[str, Any]]) -> list[str]:
    """The trace summary: one block per model request, then the Runs' endings."""
    lines: list[str] = []
    requests = [e for e in trace if e.get("kind") == "model_request"]
    for number, event in enumerate(requests, start=1):
        lines += _request(number, event)
    endings = [f"run {e.get('run_no', '?')} {e.get('status', '?')}"
               + (f" {e['error_code']}" if e.get("error_code") else "")
               for e in trace if e.get("kind") == "run_ended"]
    if endings:
        lines.append("endings: " + ", ".join(endings))
    return lines or ["(the trace has no model request and no Run ending)"]


__all__ = ["summary_lines"]
