"""What the replay page (``ctxspec replay --html``) draws, derived from a scenario and the neutral
trace its replay produced: one bar per model request, the Runs they belong to, compaction
episodes, crashes and takeovers, hook changes, and each input's delivery states per Run.

The trace gives every request's estimated input I and its budget figures (W, O, S, B and the
trigger floor(r × B)) as integers. It does not give how I divides into the parts §8 names, so
the split is derived here, and the page says so: each part but the fixed input is re-measured on
the request's own messages with the scenario's estimator (what the runtime measured I with), and
the fixed input is the remainder, I minus the others — the system prompt, tool schemas and
framing. A request measured but never sent (a §8 evaluation that started an episode, a request
refused before it was sent) is drawn from the figures its compaction step or Run ending states.
"""

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ctxspec.conformance.estimator import estimator_for
from ctxspec.conformance.scenario import AgentDoc, Scenario
from ctxspec.reference.budget import ResolvedBudget, resolve_budget
from ctxspec.reference.tokens import TokenEstimator
from ctxspec.reference.view import VIEW_ADAPTER, ModelView, estimation_request

Event = Mapping[str, Any]
COMPONENTS = ("fixed", "protected", "material", "summary", "hooks")
"""The parts of a bar, bottom to top."""
LABELS = {"fixed": "fixed input", "protected": "protected inputs",
          "material": "compressible material", "summary": "summary",
          "hooks": "hook additions", "unsplit": "not split (see its note)"}


@dataclass(frozen=True)
class Budget:
    window: int
    output_reserve: int
    safety_margin: int
    input_budget: int
    trigger: int


@dataclass(frozen=True)
class Change:
    """One value a hook (or a committed patch) changed, as the trace shows it."""

    by: str
    field: str
    before: str
    after: str


@dataclass
class Bar:
    """One slot of the timeline: a request sent, or one measured but never sent."""

    kind: str
    """``business`` | ``compaction`` (sent); ``evaluated`` | ``unsent`` | ``none`` (not sent)."""
    title: str
    decision: str
    total: int | None
    segments: tuple[tuple[str, int], ...]
    budget: Budget
    run: int
    note: str = ""
    max_output: int | None = None
    episode: int | None = None
    role: str = "root"
    messages: tuple[Mapping[str, Any], ...] = ()
    changes: list[Change] = field(default_factory=list)


@dataclass
class RunBand:
    label: str
    node: str | None
    session: int
    status: str | None = None
    code: str | None = None
    message: str | None = None
    bars: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class Crash:
    after_bars: int
    """How many bars precede it."""
    text: str


@dataclass
class Lane:
    input_id: str
    text: str
    states: dict[int, list[tuple[int, str]]] = field(default_factory=dict)
    """Column (a Run's index, or len(runs) for after the last Run) → (delivery, state) in order;
    deliveries are numbered 1, 2, … per input (a carried input gets a new delivery, §5)."""
    deliveries: dict[str, int] = field(default_factory=dict)


@dataclass
class ReplayPage:
    name: str
    description: str
    bars: list[Bar] = field(default_factory=list)
    runs: list[RunBand] = field(default_factory=list)
    crashes: list[Crash] = field(default_factory=list)
    episodes: list[tuple[int, int, str]] = field(default_factory=list)
    """(first bar, last bar, label) of each compaction episode."""
    lanes: list[Lane] = field(default_factory=list)
    later_changes: list[Change] = field(default_factory=list)
    """Changes after the last request (a capability node's hook, a tool after the last call)."""
    ratios: dict[str, str] = field(default_factory=dict)
    """The trigger ratio r of each Agent (by node; "" for the scenario's own Agent)."""


def _measure(estimator: TokenEstimator, messages: Sequence[Any]) -> int:
    """Tokens the estimator counts for these messages beyond an empty request's."""
    empty = estimator.estimate(estimation_request(ModelView(()))).tokens
    return estimator.estimate(estimation_request(ModelView(tuple(messages)))).tokens - empty


def _part(message: Any, protected: frozenset[str], purpose: str, last: bool) -> str:
    kind = message.kind.value
    if purpose == "compaction":  # the data block (previous summary and chunk) comes last
        return "material" if last and kind == "prompt" else "fixed"
    if kind in ("system_prompt", "shared"):
        return "fixed"
    if kind == "user_ref" and str(message.input_id) in protected:
        return "protected"
    return {"summary": "summary", "annotation": "hooks"}.get(kind, "material")


def split_request(request: Event, estimator: TokenEstimator
                  ) -> tuple[tuple[tuple[str, int], ...], str]:
    """The parts of one request's I (see the module's docstring), bottom to top, and a note
    when they cannot be told apart."""
    total = int(request["estimated_input_tokens"])
    view = VIEW_ADAPTER.validate_python(request["view"])
    protected = frozenset(str(i) for i in request.get("protected_input_ids") or ())
    groups: dict[str, list[Any]] = {}
    for index, message in enumerate(view.messages):
        part = _part(message, protected, request["purpose"], index == len(view.messages) - 1)
        groups.setdefault(part, []).append(message)
    sizes = {part: _measure(estimator, groups[part]) for part in COMPONENTS
             if part != "fixed" and part in groups}
    fixed = total - sum(sizes.values())
    if fixed < 0:
        return (("unsplit", total),), (f"the parts re-measured add up to more than I = {total}; "
                                       "the bar is not split")
    sizes["fixed"] = fixed
    return tuple((part, sizes[part]) for part in COMPONENTS if sizes.get(part)), ""


def budget_of(request: Event) -> Budget:
    return Budget(int(request["window"]), int(request["output_reserve"]),
                  int(request["safety_margin"]), int(request["input_budget"]),
                  int(request["trigger_threshold"]))


def configured_budget(agent: AgentDoc) -> Budget:
    """The budget an Agent's configuration resolves to (§7), for a slot with no request."""
    resolved = resolve_budget(agent.budget())
    if not isinstance(resolved, ResolvedBudget):  # a replayed scenario was configured validly
        raise ValueError(f"{resolved.code.value}: {resolved.field}: {resolved.rule}")
    return Budget(resolved.window, resolved.output_reserve, resolved.safety_margin,
                  resolved.input_budget, resolved.trigger_threshold)


_PLANNED = re.compile(r"\bI=(\d+)\b.*?\bM=(\d+)\b")
_NEEDS = re.compile(r"needs (\d+) input tokens")
_CHUNK = re.compile(r":chunk:(\d+)$")


_UNKNOWN = "(not in the trace)"


def _json_at(value: Any, path: Sequence[str]) -> str:
    """The value at a path of a JSON object, as JSON text; "(absent)" when it has none."""
    for name in path:
        if not isinstance(value, Mapping) or name not in value:
            return "(absent)"
        value = value[name]
    return json.dumps(value, ensure_ascii=False)


def hook_changes(event: Event, later: Sequence[Event]) -> list[Change]:
    """Each change of a hook decision, with the value before it where a later event shows it:
    a tool call's proposed arguments, a capability's mapped input."""
    by = f"{event['point']} #{event['chain_position']} ({event['decision']})"
    changes = []
    for entry in event.get("changes") or ():
        key, _, after = str(entry).partition("=")
        root, *path = key.split(".")
        before = _UNKNOWN
        if root.startswith("tool_call:") and path[:1] == ["arguments"]:
            call = root.removeprefix("tool_call:")
            executed = next((e for e in later if e["kind"] == "tool_executed"
                             and e["call_id"] == call), None)
            if executed is not None:
                before = _json_at(executed["proposed_arguments"], path[1:])
        elif root == "input" and event["point"].startswith("capability."):
            called = next((e for e in later if e["kind"] == "capability_called"), None)
            if called is not None:
                before = _json_at(called["proposed_input"], path)
        changes.append(Change(by, key, before, after))
    return changes


def _chunk_title(request: Event) -> str:
    match = _CHUNK.search(str(request["purpose_key"]))
    return f"chunk {match.group(1)}" if match else "compaction request"


class _Builder:
    """Walks the trace once, in order (the trace's order is the order things happened)."""

    def __init__(self, scenario: Scenario) -> None:
        self.scenario = scenario
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
        self.episode: int | None = None
        self.episode_label = "compaction episode"
        self.episodes: set[str] = set()
        self.changes: list[Change] = []
        self.waiting: list[tuple[Lane, tuple[int, str]]] = []
        self.lanes: dict[str, Lane] = {}
        self.last_state: dict[str, str] = {}
        self.texts: dict[str, str] = {}

    def agent(self) -> AgentDoc:
        return self.agents.get(self.node or "", self.scenario.agent)

    def run(self) -> int:
        if self.open_run is None:  # a request outside any Run the trace started
            self.page.runs.append(RunBand("(outside a Run)", self.node, self.session))
            self.open_run = len(self.page.runs) - 1
        return self.open_run

    def add(self, bar: Bar) -> None:
        bar.episode = self.episode
        self.page.bars.append(bar)
        self.page.runs[bar.run].bars.append(len(self.page.bars) - 1)

    def close_episode(self) -> None:
        if self.episode is not None:
            first = self.episode
            self.page.episodes.append((first, len(self.page.bars) - 1, self.episode_label))
            self.episode = None

    def request(self, event: Event) -> None:
        compaction = event["purpose"] == "compaction"
        if not compaction:
            self.close_episode()
        segments, note = split_request(event, estimator_for(self.scenario, self.agent()))
        changes, self.changes = self.changes, []
        for message in event["view"]["messages"]:
            self.record_change(message, changes)
        self.add(Bar(
            kind=event["purpose"], role=str(event.get("role", "root")),
            title=_chunk_title(event) if compaction else f"attempt {event['attempt']}",
            decision="chunk" if compaction else str(event.get("compaction") or "(none)"),
            total=int(event["estimated_input_tokens"]), segments=segments,
            budget=budget_of(event), run=self.run(), note=note,
            max_output=int(event["max_output_tokens"]),
            messages=tuple(event["view"]["messages"]), changes=changes))

    def record_change(self, message: Mapping[str, Any], changes: list[Change]) -> None:
        """A record whose text a hook's committed patch changed since an earlier request showed
        it: the value before goes to the hook's own change of ``text`` when one says the same
        value after, else it is listed as the patch's. Only a patch changes a record's text; a
        marker standing for an input shown elsewhere (§5) is the record projected differently."""
        record, text = message.get("record_id"), str(message.get("text", ""))
        patched = message.get("modified_by") or ()
        if record and patched and record in self.texts and self.texts[record] != text:
            before, after = (json.dumps(t, ensure_ascii=False) for t in (self.texts[record], text))
            own = [i for i, c in enumerate(changes) if c.field == "text" and c.after == after
                   and c.before == _UNKNOWN]
            if own:
                changes[own[0]] = Change(changes[own[0]].by, f"record {record[:8]} text", before,
                                         after)
            else:
                changes.append(Change(f"hook patch {', '.join(patched)}",
                                      f"record {record[:8]} text", before, after))
        if record:
            self.texts[record] = text

    def planned(self, event: Event) -> None:
        episode = str(event["episode_id"])
        if episode in self.episodes:  # a takeover resumes the same episode (§8, §10)
            if self.episode is None:
                self.episode = len(self.page.bars)
                self.episode_label = "compaction episode, resumed"
            return
        self.close_episode()
        self.episodes.add(episode)
        match = _PLANNED.search(str(event["detail"]))
        total, material = (int(match.group(1)), int(match.group(2))) if match else (None, 0)
        segments = () if total is None else tuple(
            (part, size) for part, size in (("fixed", total - material), ("material", material))
            if size > 0)
        self.add(Bar("evaluated", "§8 evaluation", "compact", total, segments,
                     configured_budget(self.agent()), self.run(),
                     note=f"measured, not sent; I and M as the compaction step states them: "
                          f"{event['detail']}"))
        self.episode = len(self.page.bars) - 1
        self.episode_label = "compaction episode"

    def run_ended(self, event: Event) -> None:
        self.close_episode()
        index = self.run()
        band = self.page.runs[index]
        band.status, band.code, band.message = event["status"], event["error_code"], \
            event["message"]
        needs = _NEEDS.search(str(event["message"] or ""))
        if needs and event["error_code"] in ("CONTEXT_WINDOW_EXCEEDED",
                                             "CONTEXT_PROTECTED_INPUT_TOO_LARGE"):
            total = int(needs.group(1))
            self.add(Bar("unsent", "not sent", str(event["error_code"]), total,
                         (("unsplit", total),), configured_budget(self.agent()), index,
                         note=f"never sent; I as the Run's ending states it: {event['message']}"))
        elif not band.bars:
            self.add(Bar("none", "no request", "none sent", None, (),
                         configured_budget(self.agent()), index))
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
        self.restarted = False
        for lane, state in self.waiting:
            lane.states.setdefault(self.open_run, []).append(state)
        self.waiting = []

    def delivery(self, event: Event) -> None:
        key = (str(event["delivery_id"]), str(event["state"]))
        if self.last_state.get(key[0]) == key[1]:
            return  # the same delivery traced in the same state again (a takeover, a commit)
        self.last_state[key[0]] = key[1]
        lane = self.lanes.setdefault(event["input_id"], Lane(event["input_id"], ""))
        number = lane.deliveries.setdefault(key[0], len(lane.deliveries) + 1)
        if self.open_run is None:
            self.waiting.append((lane, (number, key[1])))
        else:
            lane.states.setdefault(self.open_run, []).append((number, key[1]))

    def event(self, event: Event, later: Sequence[Event]) -> None:
        kind = event["kind"]
        if kind == "model_request":
            self.request(event)
        elif kind == "compaction" and event["step"] == "planned":
            self.planned(event)
        elif kind == "compaction" and event["step"].startswith("snapshot"):
            self.close_episode()
        elif kind == "run_ended":
            self.run_ended(event)
        elif kind == "client_event" and event["event"] == "run_started":
            self.run_started(event)
        elif kind == "delivery":
            self.delivery(event)
        elif kind == "hook_decided":
            self.changes.extend(hook_changes(event, later))
        elif kind == "restarted":
            self.restarted = True
            self.page.crashes.append(Crash(len(self.page.bars), (
                f"the process died {event['when']} {event['commit']} #{event['occurrence']}; "
                "a new runtime takes the Session over")))
        elif kind == "node_started":
            self.node = str(event["node"])
        elif kind == "session_opened":
            self.session = int(event["session"])

    def finish(self) -> ReplayPage:
        self.close_episode()
        for lane, state in self.waiting:
            lane.states.setdefault(len(self.page.runs), []).append(state)
        for lane in self.lanes.values():
            lane.text = next((str(m["text"]) for bar in self.page.bars for m in bar.messages
                              if m.get("input_id") == lane.input_id
                              and m.get("kind") == "user_ref"), "(its text is in no request)")
        self.page.lanes = list(self.lanes.values())
        self.page.later_changes = self.changes
        return self.page


def build_page(scenario: Scenario, trace: Sequence[Event]) -> ReplayPage:
    """The replay page's model from a scenario and the JSON trace of its replay."""
    builder = _Builder(scenario)
    for index, event in enumerate(trace):
        builder.event(event, trace[index + 1:])
    return builder.finish()
