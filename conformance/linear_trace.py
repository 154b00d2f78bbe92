"""The linear form of a trace (trace format 2, issue #35): each message written once, each
model request referring to its messages by their place in that list.

A trace in its expanded form (format 1, what cases, the timeline and drivers read) repeats a
request's whole view in every ``model_request`` event, so a long Session's trace grows with the
square of its length. The linear form keeps the same events with, in place of each
``view.messages`` and ``rendered.messages`` list, a ``message_refs`` list of indexes into the
document's ``messages`` (view messages) and ``rendered_messages`` (messages as the provider
receives them). Reading it back (:func:`expanded`) gives the expanded events exactly: equal
messages share one entry, and nothing else changes. ``ctxspec replay --json`` writes it, and a
runtime over stdio may answer with it or with whole views (docs/stdio-protocol.md);
:func:`events_of` accepts both.
"""

import json
from collections.abc import Mapping
from typing import Any

LINEAR_TRACE_FORMAT = 2
"""The ``trace_format`` of a linear trace document (format 1 is the plain list of events)."""

_LISTS = (("view", "messages"), ("rendered", "rendered_messages"))
"""Per model_request field holding a message list: the table its messages go into."""


class TraceFormatError(ValueError):
    """A document that claims the linear form but breaks it (the field and the rule)."""


class _Table:
    """Messages by identity, then by content: each distinct message once."""

    def __init__(self) -> None:
        self.rows: list[Any] = []
        self._by_id: dict[int, int] = {}
        self._by_text: dict[str, int] = {}

    def ref(self, message: Any) -> int:
        known = self._by_id.get(id(message))
        if known is not None:
            return known
        text = json.dumps(message, sort_keys=True, default=str)
        known = self._by_text.get(text)
        if known is None:
            known = self._by_text[text] = len(self.rows)
            self.rows.append(message)
        self._by_id[id(message)] = known
        return known


def linear(events: list[dict[str, Any]]) -> dict[str, Any]:
    """The linear document of a trace's events (each message once)."""
    tables = {name: _Table() for _, name in _LISTS}
    out: list[dict[str, Any]] = []
    for event in events:
        if event.get("kind") != "model_request":
            out.append(event)
            continue
        event = dict(event)
        for field, name in _LISTS:
            part = event.get(field)
            if isinstance(part, Mapping) and isinstance(part.get("messages"), list):
                refs = [tables[name].ref(m) for m in part["messages"]]
                event[field] = {**{k: v for k, v in part.items() if k != "messages"},
                                "message_refs": refs}
        out.append(event)
    return {"trace_format": LINEAR_TRACE_FORMAT, "messages": tables["messages"].rows,
            "rendered_messages": tables["rendered_messages"].rows, "events": out}


def expanded(document: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The expanded events of a linear document (refused with the field and the rule)."""
    if document.get("trace_format") != LINEAR_TRACE_FORMAT:
        raise TraceFormatError(f"trace_format: expected {LINEAR_TRACE_FORMAT}, got "
                               f"{str(document.get('trace_format'))[:80]}")
    events = document.get("events")
    if not isinstance(events, list):
        raise TraceFormatError("events: a list of trace events is required")
    tables: dict[str, list[Any]] = {}
    for _, name in _LISTS:
        rows = document.get(name, [])
        if not isinstance(rows, list):
            raise TraceFormatError(f"{name}: a list of messages is required")
        tables[name] = rows
    return [_expanded_event(event, at, tables) for at, event in enumerate(events)]


def _expanded_event(event: Any, at: int, tables: Mapping[str, list[Any]]) -> Any:
    if not isinstance(event, dict) or event.get("kind") != "model_request":
        return event
    event = dict(event)
    for field, name in _LISTS:
        part = event.get(field)
        if not isinstance(part, Mapping) or "message_refs" not in part:
            continue
        refs, rows = part["message_refs"], tables[name]
        if not isinstance(refs, list) or not all(
                type(r) is int and 0 <= r < len(rows) for r in refs):
            raise TraceFormatError(f"events[{at}].{field}.message_refs: each an index into "
                                   f"{name} (0 to {len(rows) - 1})")
        event[field] = {**{k: v for k, v in part.items() if k != "message_refs"},
                        "messages": [rows[r] for r in refs]}
    return event


def events_of(trace: list[dict[str, Any]] | Mapping[str, Any]) -> list[dict[str, Any]]:
    """The expanded events of a trace in either form: a list of events (whole views) as it
    is, a linear document expanded."""
    if isinstance(trace, list):
        return trace
    return expanded(trace)


__all__ = ["LINEAR_TRACE_FORMAT", "TraceFormatError", "events_of", "expanded", "linear"]
