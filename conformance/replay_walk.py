"""The walk of a trace into the replay page's model (:mod:`replay_data`), once, in order: the
trace's order is the order things happened (docs/scenarios.md "The trace"). Each event kind has
its step; a kind it does not know is passed over, so another runtime's extra events do no harm.

Where a thing goes on the timeline: a request is its own slot; a refused or never-sent request,
a §8 evaluation that started an episode, a CapabilityNode's call and a Run or node with no
request each get one too. A mark (:mod:`replay_marks`) goes under the request it belongs to: an
input under the request it was claimed into (§5), a ``*.pre_request`` hook under the request it
prepared, any other hook, a tool call or a graph state write under the request whose answer led
to it (Q431).
"""

import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from ctxspec.conformance.estimator import estimator_for
from ctxspec.conformance.replay_data import (
    Bar,
    Crash,
    Episode,
    Lane,
    ReplayPage,
    RunBand,
    Views,
    budget_of,
    configured_budget,
    split_request,
)
from ctxspec.conformance.replay_episodes import EpisodeTracker
from ctxspec.conformance.replay_marks import (
    UNKNOWN,
    Change,
    Mark,
    Names,
    capability_mark,
    graph_mark,
    hook_changes,
    hook_mark,
    input_mark,
    tool_mark,
)
from ctxspec.conformance.replay_spans import Spans
from ctxspec.conformance.scenario import AgentDoc, Scenario

Event = Mapping[str, Any]
_NEEDS = re.compile(r"needs (\d+) (?:input )?tokens")
_CHUNK = re.compile(r":chunk:(\d+)$")


def _chunk_title(request: Event) -> str:
    match = _CHUNK.search(str(request["purpose_key"]))
    return f"chunk {match.group(1)}" if match else "compaction request"


class _Walk:
    def __init__(self, scenario: Scenario, trace: Sequence[Event]) -> None:
        self.scenario = scenario
        self.trace, self.at = trace, 0
        self.page = ReplayPage(scenario.name, scenario.description)
        self.agents: dict[str, AgentDoc] = {}
        if scenario.workflow is not None:
            self.agents = {node.agent_node.name: node.agent_node.agent
                           for stage in scenario.workflow.stages for node in stage
                           if node.agent_node is not None}
        self.page.ratios = {name: agent.trigger_ratio for name, agent in
                            {"": scenario.agent, **self.agents}.items()}
        self.node: str | None = None
        self.session = 1
        self.open_run: int | None = None
        self.restarted = False
        self.changes: list[Change] = []
        self.ahead: list[Mark] = []
        """Marks of the next slot (a pre_request hook, an input claimed into it)."""
        self.claimed: list[tuple[Lane, int]] = []
        self.waiting: list[tuple[Lane, tuple[int, str, int | None]]] = []
        self.lanes: dict[str, Lane] = {}
        self.last_state: dict[str, str] = {}
        self.first_target: dict[str, str | None] = {}
        self.texts: dict[str, str] = {}
        self.graph: dict[str, Any] = {}
        self.input_texts: dict[str, str] = {}
        """Each input's text, from the first request that carried it."""
        self.names = Names({}, {}, {})
        self.views = Views()
        self.episodes = EpisodeTracker(self.page, self.names)
        self.spans = Spans(self.page)

    def agent(self) -> AgentDoc:
        return self.agents.get(self.node or "", self.scenario.agent)

    def run(self) -> int:
        if self.open_run is None:  # a request outside any Run the trace started
            self.page.runs.append(RunBand("(outside a Run)", self.node, self.session))
            self.open_run = len(self.page.runs) - 1
        return self.open_run

    def last_slot(self) -> int:
        return max(len(self.page.bars) - 1, 0)

    def add(self, bar: Bar) -> int:
        slot = len(self.page.bars)
        self.page.bars.append(bar)
        if bar.run is not None:
            self.page.runs[bar.run].bars.append(slot)
        self.episodes.added(slot, bar)
        for mark in self.ahead:
            self.page.marks.append(Mark(mark.row, slot, mark.name, mark.label, mark.title))
        self.ahead = []
        for lane, column in self.claimed:
            for i, (number, state, at) in enumerate(lane.states[column]):
                if state == "claimed" and at is None:
                    lane.states[column][i] = (number, state, slot)
        self.claimed = []
        return slot

    def request(self, event: Event) -> None:
        compaction = event["purpose"] == "compaction"
        if not compaction:
            self.episodes.close()
        segments, note = split_request(event, estimator_for(self.scenario, self.agent()),
                                       self.views)
        changes, self.changes = self.changes, []
        for message in event["view"]["messages"]:
            self.record_change(message, changes)
        slot = self.add(Bar(
            kind=event["purpose"], role=str(event.get("role", "root")),
            title=_chunk_title(event) if compaction else f"attempt {event['attempt']}",
            decision="chunk" if compaction else str(event.get("compaction") or "(none)"),
            total=int(event["estimated_input_tokens"]), segments=segments,
            budget=budget_of(event), run=self.run(), note=note,
            max_output=int(event["max_output_tokens"]),
            messages=tuple(event["view"]["messages"]), changes=changes))
        self.names.learn(slot, event["view"]["messages"])
        for message in event["view"]["messages"]:
            if message.get("kind") == "user_ref" and message.get("input_id"):
                self.input_texts.setdefault(str(message["input_id"]), str(message["text"]))
        self.spans.request(slot, event)
        self.episodes.request(slot, event)

    def record_change(self, message: Mapping[str, Any], changes: list[Change]) -> None:
        """A record whose text a hook's committed patch changed since an earlier request showed
        it: the value before goes to the hook's own change of ``text`` when one says the same
        value after, else it is listed as the patch's. Only a patch changes a record's text; a
        marker standing for an input shown elsewhere (§5) is the record projected differently."""
        record, text = message.get("record_id"), str(message.get("text", ""))
        patched = message.get("modified_by") or ()
        if record and patched and record in self.texts and self.texts[record] != text:
            before, after = (json.dumps(t, ensure_ascii=False) for t in (self.texts[record], text))
            field = f"{self.names.field(f'record:{record}')} text"
            own = [i for i, c in enumerate(changes) if c.field.endswith("text")
                   and c.after == after and c.before == UNKNOWN]
            if own:
                changes[own[0]] = Change(changes[own[0]].by, field, before, after)
            else:
                changes.append(Change(f"hook patch {', '.join(patched)}", field, before, after))
        if record:
            self.texts[record] = text

    def run_ended(self, event: Event) -> None:
        self.episodes.close()
        index = self.run()
        band = self.page.runs[index]
        band.status, band.code, band.message = event["status"], event["error_code"], \
            event["message"]
        figures = event.get("figures") or {}
        needs = _NEEDS.search(str(event["message"] or ""))
        total = figures.get("input_tokens") if figures else \
            (int(needs.group(1)) if needs else None)
        if total is not None and event["error_code"] in ("CONTEXT_WINDOW_EXCEEDED",
                                                         "CONTEXT_PROTECTED_INPUT_TOO_LARGE"):
            total = int(total)
            segments, note, target = self.episodes.refused(total)
            self.add(Bar("unsent", "not sent", str(event["error_code"]), total, segments,
                         configured_budget(self.agent()), index,
                         note=f"never sent; I as the Run's ending states it: "
                              f"{event['message']}{note}", target=target))
        elif not band.bars:
            self.add(Bar("none", "no request", "none sent", None, (),
                         configured_budget(self.agent()), index))
        for lane in self.lanes.values():  # a carried input is handed on as its Run ends
            lane.states[index] = [(n, state, self.last_slot() if state == "carried" and at is None
                                   else at) for n, state, at in lane.states.get(index, ())]
            if not lane.states[index]:
                del lane.states[index]
        self.open_run = None

    def run_started(self, event: Event) -> None:
        label = str(event["detail"])
        runs = self.page.runs
        if self.open_run is not None and runs[self.open_run].label == label:
            return  # a takeover announces the Run it goes on with
        if self.restarted and runs and (runs[-1].label, runs[-1].node, runs[-1].session) == \
                (label, self.node, self.session):
            self.open_run = len(runs) - 1  # the dead incarnation had traced its ending
        else:
            runs.append(RunBand(label, self.node, self.session))
            self.open_run = len(runs) - 1
            self.question(str(event.get("run_id")))
        self.restarted = False
        for lane, state in self.waiting:
            lane.states.setdefault(self.open_run, []).append(state)
        self.waiting = []

    def question(self, run_id: str) -> None:
        """The input the new Run was created for: its first delivery, the first to target this
        Run (§5: a supplement binds to the Run after its question)."""
        ident = next((i for i, target in self.first_target.items() if target == run_id), None)
        if ident is not None and ident in self.lanes:
            self.lanes[ident].kind = "question"

    def delivery(self, event: Event) -> None:
        key = (str(event["delivery_id"]), str(event["state"]))
        if self.last_state.get(key[0]) == key[1]:
            return  # the same delivery traced in the same state again (a takeover, a commit)
        self.last_state[key[0]] = key[1]
        ident = str(event["input_id"])
        if ident not in self.lanes:
            self.lanes[ident] = Lane(ident, "", number=len(self.lanes) + 1)
            self.first_target[ident] = str(event.get("target_run_id"))
        lane = self.lanes[ident]
        number = lane.deliveries.setdefault(key[0], len(lane.deliveries) + 1)
        slot = self.last_slot() if key[1] == "delivered" and self.page.bars else None
        if self.open_run is None:
            self.waiting.append((lane, (number, key[1], slot)))
            return
        lane.states.setdefault(self.open_run, []).append((number, key[1], slot))
        if key[1] == "claimed":
            self.claimed.append((lane, self.open_run))

    def hook(self, event: Event) -> None:
        changes = hook_changes(event, self.later, self.names)
        self.changes.extend(changes)
        mark = hook_mark(event, 0, changes, self.names)
        if str(event["point"]).endswith(".pre_request"):
            self.ahead.append(mark)
        else:
            self.page.marks.append(Mark(mark.row, self.last_slot(), mark.name, mark.label,
                                        mark.title))

    def later(self) -> Iterator[Event]:
        """The events after the current one (read only by a hook's step)."""
        return (self.trace[i] for i in range(self.at + 1, len(self.trace)))

    def finish(self, partial: str) -> ReplayPage:
        self.episodes.close()
        self.episodes.resolve()
        for lane, state in self.waiting:
            lane.states.setdefault(len(self.page.runs), []).append(state)
        for lane in self.lanes.values():
            lane.text = self.input_texts.get(lane.input_id) or self.unsent_text(lane)
        self.page.marks.extend(
            input_mark(slot, lane.kind, lane.number, lane.text, state)
            for lane in self.lanes.values() for states in lane.states.values()
            for _, state, slot in states
            if slot is not None and state in ("claimed", "carried"))
        self.page.lanes = list(self.lanes.values())
        self.page.later_changes = self.changes
        self.page.partial = partial
        return self.page

    def unsent_text(self, lane: Lane) -> str:
        """An input no request carried (its Run was refused before sending): for a workflow
        node's question, the graph state value its ``question_key`` names; else the scenario's
        ask of the same number, the k-th question being the k-th ask (said as such)."""
        if lane.kind != "question":
            return "(its text is in no request)"
        column = next(iter(lane.states), None)
        run = self.page.runs[column] if column is not None and column < len(self.page.runs) \
            else None
        if run is not None and run.node is not None and self.scenario.workflow is not None:
            key = next((n.agent_node.question_key for s in self.scenario.workflow.stages
                        for n in s if n.agent_node is not None
                        and n.agent_node.name == run.node), None)
            if key is not None and isinstance(self.graph.get(key), str):
                return str(self.graph[key])
        questions = [la for la in self.lanes.values() if la.kind == "question"]
        asks = [str(s.ask) for s in self.scenario.steps if getattr(s, "ask", None)]
        at = questions.index(lane)
        if self.scenario.workflow is None and len(asks) == len(questions) and at < len(asks):
            return asks[at]
        return "(its text is in no request)"


def _planned(walk: _Walk, event: Event) -> None:
    bar = walk.episodes.planned(event, walk.run(), configured_budget(walk.agent()))
    if bar is not None:
        walk.add(bar)


def _compaction(walk: _Walk, event: Event) -> None:
    if event["step"] == "planned":
        _planned(walk, event)
    elif str(event["step"]).startswith("snapshot"):
        walk.episodes.close()


def _restarted(walk: _Walk, event: Event) -> None:
    walk.restarted = True
    walk.page.crashes.append(Crash(len(walk.page.bars), (
        f"the process died {event['when']} {event['commit']} #{event['occurrence']}; "
        "a new runtime takes the Session over")))


def _node_started(walk: _Walk, event: Event) -> None:
    walk.node = str(event["node"])
    walk.spans.node_started(event)
    if event["node_kind"] == "capability_node":
        walk.add(Bar("capability", str(event["node"]), "capability call", None, (), None,
                     None))


def _node_ended(walk: _Walk, event: Event) -> None:
    if walk.spans.empty():  # a node not run, or one whose Run sent nothing, still has its slot
        walk.add(Bar("none", "not run", str(event["status"]), None, (), None, None))
    walk.spans.node_ended(event)


def _graph(walk: _Walk, event: Event) -> None:
    walk.graph[str(event["key"])] = event["value"]
    walk.page.marks.append(graph_mark(event, walk.last_slot()))


def _hook_called(walk: _Walk, event: Event) -> None:
    point = str(event["point"])
    walk.names.invocations[point] = walk.names.invocations.get(point, 0) + 1


_STEPS: Mapping[str, Callable[[_Walk, Event], None]] = {
    "model_request": lambda w, e: w.request(e),
    "budget_decision": lambda w, e: w.episodes.decision(e),
    "compaction": _compaction,
    "run_ended": lambda w, e: w.run_ended(e),
    "client_event": lambda w, e: w.run_started(e) if e["event"] == "run_started"
    else None,
    "delivery": lambda w, e: w.delivery(e),
    "hook_called": _hook_called,
    "hook_decided": lambda w, e: w.hook(e),
    "tool_executed": lambda w, e: w.page.marks.append(tool_mark(e, w.last_slot())),
    "capability_called": lambda w, e: w.page.marks.append(
        capability_mark(e, w.last_slot())),
    "graph_state_written": _graph,
    "restarted": _restarted,
    "node_started": _node_started,
    "node_ended": _node_ended,
    "session_opened": lambda w, e: setattr(w, "session", int(e["session"])),
}
"""Each event kind's step of the walk."""


def walk(scenario: Scenario, trace: Sequence[Event], partial: str = "") -> ReplayPage:
    """The replay page's model from a scenario and the JSON trace of its replay."""
    walker = _Walk(scenario, trace)
    for index, event in enumerate(trace):
        step = _STEPS.get(str(event.get("kind")))
        if step is not None:
            walker.at = index
            step(walker, event)
    return walker.finish(partial)


__all__ = ["Episode", "walk"]
