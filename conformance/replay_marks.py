"""What the replay page shows of a trace besides its requests (§1, §2, §5, §6): the marks under
the bars — the inputs each request carried (questions and supplements told apart), the hooks
that decided and what they changed, the tools and capabilities called, the graph state
written — and the names they are shown by.

A hook is named as a scenario numbers it (docs/scenarios.md): its point, the invocation of that
point (the scenario's ``ordinal``, from 1) and the item's place in the chain (from 1; the
trace's ``chain_position`` counts from 0). A field is named by what it belongs to — the tool
call by its name and action ordinal, a record by its kind and the request that first sent it —
never by a raw UUID (Q430).
"""

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

Event = Mapping[str, Any]
ROWS = (("inputs", "inputs"), ("hooks", "hooks"), ("tools", "tools"),
        ("graph", "graph state"))
"""The rows under the bars, top to bottom: the row's name and its label."""
UNKNOWN = "(not in the trace)"


@dataclass(frozen=True)
class Change:
    """One value a hook (or a committed patch) changed, as the trace shows it."""

    by: str
    field: str
    before: str
    after: str


@dataclass(frozen=True)
class Mark:
    """One thing drawn in a row under a slot: ``name`` is what a reader looks for (a tool's
    name, a hook's point, ``question`` or ``supplement``, a graph state key), ``label`` its short
    text and ``title`` the whole of it."""

    row: str
    slot: int
    name: str
    label: str
    title: str


@dataclass
class Names:
    """What the trace has said so far that a UUID can be named by."""

    calls: dict[str, str]
    """call id → ``name #ordinal`` (from the requests' tool calls)."""
    records: dict[str, str]
    """record id → ``kind of request #n``, the request that first sent it."""
    invocations: dict[str, int]
    """hook point → invocations so far (``hook_called`` events)."""

    def learn(self, slot: int, messages: Sequence[Mapping[str, Any]]) -> None:
        for message in messages:
            record = message.get("record_id")
            if record and str(record) not in self.records:
                self.records[str(record)] = f"{message.get('kind', 'record')} of request " \
                                            f"#{slot + 1}"
            for call in message.get("tool_calls") or ():
                self.calls.setdefault(str(call.get("call_id")),
                                      f"{call.get('name', '?')} #{call.get('action_ordinal', '?')}")

    def batch(self, call: str, later: Iterable[Event]) -> None:
        """Name a call no request has shown yet by the batch the tools run next: its name and
        its place among the calls executed before the next request (action order, §2)."""
        if call in self.calls:
            return
        ordinal = 0
        for event in later:
            if event["kind"] == "model_request":
                return
            if event["kind"] == "tool_executed":
                ordinal += 1
                if str(event["call_id"]) == call:
                    self.calls[call] = f"{event['name']} #{ordinal}"
                    return

    def field(self, key: str) -> str:
        """A change's field with its UUIDs named (``tool_call:<id>.arguments.path`` →
        ``write #1 arguments.path``)."""
        root, dot, rest = key.partition(".")
        for prefix, table in (("tool_call:", self.calls), ("record:", self.records),
                              ("record ", self.records)):
            if root.startswith(prefix):
                ident = root.removeprefix(prefix)
                named = table.get(ident) or next(
                    (v for k, v in table.items() if k.startswith(ident)), None)
                if named is not None:
                    return f"{named}{' ' if dot else ''}{rest}"
        return key

    def hook(self, event: Event) -> str:
        """``tool.pre_call #1 item 1 (allow)``: the point's invocation and the chain item, both
        from 1, as a scenario numbers them."""
        point = str(event["point"])
        invocation = self.invocations.get(point, 0)
        number = f" #{invocation}" if invocation else ""
        return f"{point}{number} item {int(event['chain_position']) + 1} ({event['decision']})"


def _json_at(value: Any, path: Sequence[str]) -> str:
    """The value at a path of a JSON object, as JSON text; "(absent)" when it has none."""
    for name in path:
        if not isinstance(value, Mapping) or name not in value:
            return "(absent)"
        value = value[name]
    return json.dumps(value, ensure_ascii=False)


def hook_changes(event: Event, later: Callable[[], Iterable[Event]], names: Names
                 ) -> list[Change]:
    """Each change of a hook decision, with the value before it where a later event shows it:
    a tool call's proposed arguments, a capability's mapped input."""
    by = names.hook(event)
    changes = []
    for entry in event.get("changes") or ():
        key, _, after = str(entry).partition("=")
        root, *path = key.split(".")
        before = UNKNOWN
        if root.startswith("tool_call:"):
            call = root.removeprefix("tool_call:")
            names.batch(call, later())
            executed = next((e for e in later() if e["kind"] == "tool_executed"
                             and e["call_id"] == call), None)
            if executed is not None and path[:1] == ["arguments"]:
                before = _json_at(executed["proposed_arguments"], path[1:])
        elif root == "input" and event["point"].startswith("capability."):
            called = next((e for e in later() if e["kind"] == "capability_called"), None)
            if called is not None:
                before = _json_at(called["proposed_input"], path)
        changes.append(Change(by, names.field(key), before, after))
    return changes


def hook_mark(event: Event, slot: int, changes: Sequence[Change], names: Names) -> Mark:
    problems = f" [{', '.join(event['diagnostics'])}]" if event.get("diagnostics") else ""
    said = "; ".join(f"{c.field} = {c.after}" for c in changes) or "no change"
    by = names.hook(event)
    return Mark("hooks", slot, str(event["point"]), by.split(" item")[0].split(".", 1)[-1],
                f"hook {by}: {said}{problems}")


def tool_mark(event: Event, slot: int) -> Mark:
    arguments = json.dumps(dict(event["effective_arguments"]), ensure_ascii=False)
    proposed = json.dumps(dict(event["proposed_arguments"]), ensure_ascii=False)
    note = "" if arguments == proposed else f" (the model proposed {proposed})"
    return Mark("tools", slot, str(event["name"]), str(event["name"]),
                f"tool {event['name']}{arguments}{note} → {event['outcome']}")


def capability_mark(event: Event, slot: int) -> Mark:
    arguments = json.dumps(dict(event["effective_input"]), ensure_ascii=False)
    proposed = json.dumps(dict(event["proposed_input"]), ensure_ascii=False)
    items = ", ".join(str(int(p) + 1) for p in event.get("modified_by") or ())
    note = "" if arguments == proposed else f" (mapped {proposed}; changed by item {items})"
    return Mark("tools", slot, str(event["tool"]), str(event["tool"]),
                f"capability {event['tool']}{arguments}{note} → {event['outcome']}")


def graph_mark(event: Event, slot: int) -> Mark:
    value = json.dumps(event["value"], ensure_ascii=False)
    shown = value if len(value) <= 120 else f"{value[:119]}… ({len(value)} characters)"
    return Mark("graph", slot, str(event["key"]), str(event["key"]),
                f"graph state {event['key']} = {shown} (by {event['source']})")


def input_mark(slot: int, kind: str, number: int, text: str, state: str) -> Mark:
    """An input a request carried (claimed into it, §5) or a Run handed on (carried): ``Q`` for
    a question, ``S`` for a supplement, numbered by the input's lane."""
    letter = "Q" if kind == "question" else "S"
    shown = " ".join(text.split())
    shown = shown if len(shown) <= 120 else shown[:119] + "…"
    label = f"{letter}{number}" if state == "claimed" else f"{letter}{number}→"
    return Mark("inputs", slot, kind, label, f"{kind} {number} {state}: {shown}")
