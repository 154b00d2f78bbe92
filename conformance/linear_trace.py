"""The linear form of a trace (trace format 2, issue #35): each message written once, each
model request referring to its messages by their place in that list.

A trace in its expanded form (format 1, what cases, the timeline and drivers read) repeats a
request's whole view in every ``model_request`` event, so a long Session's trace grows with the
square of its length. The linear form keeps the same events with, in place of each
``view.messages`` and ``rendered.messages`` list, a ``message_refs`` list of indexes into the
document's ``messages`` (view messages) and ``rendered_messages`` (messages as the provider
receives them), after the first ``shared_prefix`` refs of the previous model_request's same
list (a request repeats the start of the one before it: the history of ended Runs), so each
request writes only what it adds. Reading it back (:func:`expanded`) gives the expanded events
exactly: equal messages share one entry, and nothing else changes. ``ctxspec replay --json``
writes it, and a runtime over stdio may answer with it or with whole views
(docs/stdio-protocol.md); :func:`events_of` accepts both.
"""

import json
from collections.abc import Iterable, Mapping
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
        self._seen: list[Any] = []
        """Every message object looked up, kept alive so that its id stays its own while the
        events are read one at a time (a dropped event's messages could be freed)."""

    def refs(self, messages: list[Any]) -> list[int]:
        """The row of each message (by identity first: one lookup per message a request
        repeats)."""
        by_id = self._by_id
        refs = [by_id.get(id(m), -1) for m in messages]
        for at, ref in enumerate(refs):
            if ref < 0:
                refs[at] = self._new(messages[at])
        return refs

    def _new(self, message: Any) -> int:
        known = self._by_id.get(id(message))
        if known is not None:  # met earlier in the same request
            return known
        text = json.dumps(message, sort_keys=True, default=str)
        known = self._by_text.get(text)
        if known is None:
            known = self._by_text[text] = len(self.rows)
            self.rows.append(message)
        self._by_id[id(message)] = known
        self._seen.append(message)
        return known


def _common_prefix(left: list[int], right: list[int]) -> int:
    """The length of the longest common prefix, by halving with list comparisons (C speed)."""
    low, high = 0, min(len(left), len(right))
    while low < high:
        middle = (low + high + 1) // 2
        if left[low:middle] == right[low:middle]:
            low = middle
        else:
            high = middle - 1
    return low


def linear(events: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The linear document of a trace's events (each message once; a request's refs that
    repeat the start of the previous request's are written as their count, ``shared_prefix``,
    so the document grows with what each request adds). ``events`` may be given one at a
    time (``ReferenceDriver.trace_events``): only the event read is held whole, so the
    document is made in memory linear in the Session."""
    tables = {name: _Table() for _, name in _LISTS}
    previous: dict[str, list[int]] = {name: [] for _, name in _LISTS}
    out: list[dict[str, Any]] = []
    for event in events:
        if event.get("kind") != "model_request":
            out.append(event)
            continue
        event = dict(event)
        for field, name in _LISTS:
            part = event.get(field)
            if isinstance(part, Mapping) and isinstance(part.get("messages"), list):
                refs = tables[name].refs(part["messages"])
                shared = _common_prefix(previous[name], refs)
                previous[name] = refs
                event[field] = {**{k: v for k, v in part.items() if k != "messages"},
                                "shared_prefix": shared, "message_refs": refs[shared:]}
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
    previous: dict[str, list[int]] = {name: [] for _, name in _LISTS}
    return [_expanded_event(event, at, tables, previous) for at, event in enumerate(events)]


def _expanded_event(event: Any, at: int, tables: Mapping[str, list[Any]],
                    previous: dict[str, list[int]]) -> Any:
    if not isinstance(event, dict) or event.get("kind") != "model_request":
        return event
    event = dict(event)
    for field, name in _LISTS:
        part = event.get(field)
        if not isinstance(part, Mapping) or "message_refs" not in part:
            continue
        refs, rows, shared = part["message_refs"], tables[name], part.get("shared_prefix", 0)
        if not isinstance(refs, list) or not all(
                type(r) is int and 0 <= r < len(rows) for r in refs):
            raise TraceFormatError(f"events[{at}].{field}.message_refs: each an index into "
                                   f"{name} (0 to {len(rows) - 1})")
        if type(shared) is not int or not 0 <= shared <= len(previous[name]):
            raise TraceFormatError(f"events[{at}].{field}.shared_prefix: a count of the "
                                   f"previous request's refs (0 to {len(previous[name])})")
        refs = previous[name] = [*previous[name][:shared], *refs]
        event[field] = {**{k: v for k, v in part.items()
                           if k not in ("message_refs", "shared_prefix")},
                        "messages": [rows[r] for r in refs]}
    return event


def events_of(trace: list[dict[str, Any]] | Mapping[str, Any]) -> list[dict[str, Any]]:
    """The expanded events of a trace in either form: a list of events (whole views) as it
    is, a linear document expanded."""
    if isinstance(trace, list):
        return trace
    return expanded(trace)


__all__ = ["LINEAR_TRACE_FORMAT", "TraceFormatError", "events_of", "expanded", "linear"]
