"""The spans above the replay page's bars (§1, §2): each workflow node over the slots it ran
(its kind, ending and route), and each Executor execution nested in its Planner's Run over its
own requests. An Executor execution is told from the next by its hand-over: every request of
one execution starts with the same hand-over records (the task, constraints and material refs,
§2), a new execution with new ones (Q432)."""

from collections.abc import Mapping
from typing import Any

from ctxspec.conformance.replay_data import ReplayPage, Span

Event = Mapping[str, Any]


class Spans:
    def __init__(self, page: ReplayPage) -> None:
        self.page = page
        self.node: Span | None = None
        self.executor: Span | None = None
        self.handover: str | None = None

    def node_started(self, event: Event) -> None:
        kind = str(event["node_kind"]).replace("_", " ")
        first = len(self.page.bars)
        self.node = Span(f"{event['node']} ({kind})", first, first - 1)

    def empty(self) -> bool:
        """The open node has no slot yet (it was not run, or ran no request)."""
        return self.node is not None and self.node.first >= len(self.page.bars)

    def node_ended(self, event: Event) -> None:
        span = self.node or Span(str(event["node"]), len(self.page.bars) - 1, 0)
        span.last = len(self.page.bars) - 1
        span.status = str(event["status"])
        route = f" → route {event['route']}" if event.get("route") else ""
        code = f" {event['error_code']}" if event.get("error_code") else ""
        span.detail = f"{span.status}{code}{route}"
        self.page.nodes.append(span)
        self.node = None

    def request(self, slot: int, event: Event) -> None:
        if event.get("role") != "executor":
            self.executor = self.handover = None
            return
        messages = event["view"]["messages"]
        first = next((m for m in messages if m.get("kind") == "user_ref"), None)
        handover = str(first.get("record_id") or first.get("text")) if first else None
        if self.executor is not None and self.executor.last == slot - 1 and \
                handover == self.handover:
            self.executor.last = slot
            return
        task = " ".join(str(first.get("text", "")).split()) if first else ""
        self.executor = Span(f"executor {len(self.page.executors) + 1}: {task}", slot, slot)
        self.handover = handover
        self.page.executors.append(self.executor)
