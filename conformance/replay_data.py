"""What the replay page (``ctxspec replay --html``) draws, derived from a scenario and the neutral
trace its replay produced: one slot per model request (or per request refused or never sent,
per capability call), the Runs, workflow nodes and Executors they belong to, compaction
episodes with what they covered and the summary against its target T, crashes and takeovers,
the marks under the slots (:mod:`replay_marks`), and each input's deliveries request by request.
:mod:`replay_walk` walks the trace into it.

The trace gives every request's estimated input I and its budget figures (W, O, S, B and the
trigger floor(r × B)) as integers. It does not give how I divides into the parts §8 names, so
the split is derived here, and the page says so: each part but the fixed input is re-measured on
the request's own messages with the scenario's estimator (what the runtime measured I with), and
the fixed input is the remainder, I minus the others — the system prompt, tool schemas and
framing. A request measured but never sent (a §8 evaluation that started an episode, a request
refused before it was sent) is drawn from the figures its compaction step, §8 evaluation or Run
ending states.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ctxspec.conformance.replay_marks import Change, Mark
from ctxspec.conformance.scenario import AgentDoc
from ctxspec.reference.budget import ResolvedBudget, resolve_budget
from ctxspec.reference.tokens import TokenEstimator
from ctxspec.reference.view import VIEW_ADAPTER, ModelView, estimation_request

if TYPE_CHECKING:
    from ctxspec.conformance.scenario import Scenario

Event = Mapping[str, Any]
COMPONENTS = ("fixed", "protected", "material", "summary", "hooks")
"""The parts of a bar, bottom to top."""
LABELS = {"fixed": "fixed input", "protected": "protected inputs",
          "material": "compressible material", "summary": "summary",
          "hooks": "hook additions", "unsplit": "not split (see its note)"}
__all__ = ["Change", "Mark", "build_page"]


@dataclass(frozen=True)
class Budget:
    window: int
    output_reserve: int
    safety_margin: int
    input_budget: int
    trigger: int


@dataclass
class Bar:
    """One slot of the timeline: a request sent, or one measured but never sent."""

    kind: str
    """``business`` | ``compaction`` (sent); ``evaluated`` | ``unsent`` | ``none`` (not sent);
    ``capability`` (a CapabilityNode's Operation: no model request)."""
    title: str
    decision: str
    total: int | None
    segments: tuple[tuple[str, int], ...]
    budget: Budget | None
    run: int | None
    note: str = ""
    max_output: int | None = None
    episode: int | None = None
    role: str = "root"
    messages: tuple[Mapping[str, Any], ...] = ()
    changes: list[Change] = field(default_factory=list)
    target: int | None = None
    """T, the summary target of the episode whose summary this request holds (§8)."""


@dataclass
class Span:
    """Slots that belong together above the bars: a workflow node (its kind, ending and route)
    or an Executor execution nested in its Planner's Run."""

    label: str
    first: int
    last: int
    status: str = ""
    detail: str = ""


@dataclass
class Episode:
    """One compaction episode (§8): the slots from the evaluation that started it to its last
    chunk, what its chunks covered, its target T, and the summary it ended with."""

    first: int
    last: int
    label: str
    target: int | None = None
    fixed: int | None = None
    """F as the §8 evaluation that started it measured it."""
    coverage: list[str] = field(default_factory=list)
    """Per chunk: the records its material covered, named by where they were first sent."""
    summary: int | None = None
    """The final summary's tokens in the request that used it (I − F when it was refused)."""
    summary_note: str = ""


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
    kind: str = "supplement"
    """``question`` (the input a Run was created for) or ``supplement`` (§5)."""
    number: int = 0
    states: dict[int, list[tuple[int, str, int | None]]] = field(default_factory=dict)
    """Column (a Run's index, or len(runs) for after the last Run) → (delivery, state, slot)
    in order; deliveries are numbered 1, 2, … per input (a carried input gets a new delivery,
    §5); the slot is the request the state belongs to (claimed into it, delivered by its first
    output), None for a state between requests."""
    deliveries: dict[str, int] = field(default_factory=dict)


@dataclass
class ReplayPage:
    name: str
    description: str
    bars: list[Bar] = field(default_factory=list)
    runs: list[RunBand] = field(default_factory=list)
    crashes: list[Crash] = field(default_factory=list)
    episodes: list[Episode] = field(default_factory=list)
    nodes: list[Span] = field(default_factory=list)
    executors: list[Span] = field(default_factory=list)
    marks: list[Mark] = field(default_factory=list)
    lanes: list[Lane] = field(default_factory=list)
    later_changes: list[Change] = field(default_factory=list)
    """Changes after the last request (a capability node's hook, a tool after the last call)."""
    ratios: dict[str, str] = field(default_factory=dict)
    """The trigger ratio r of each Agent (by node; "" for the scenario's own Agent)."""
    partial: str = ""
    """Why the trace ends early (the script ran out): the page shows what happened until then."""


def _measure(estimator: TokenEstimator, messages: Sequence[Any]) -> int:
    """Tokens the estimator counts for these messages beyond an empty request's."""
    empty = estimator.estimate(estimation_request(ModelView(()))).tokens
    return estimator.estimate(estimation_request(ModelView(tuple(messages)))).tokens - empty


class Views:
    """Each message of the trace validated once: a request repeats most of the one before it
    (the expanded trace shares those messages), so validating per request would cost the
    square of the Session (#35)."""

    def __init__(self) -> None:
        self._seen: dict[int, tuple[Any, Any]] = {}

    def messages(self, request: Event) -> tuple[Any, ...]:
        out = []
        for message in request["view"]["messages"]:
            kept = self._seen.get(id(message))
            if kept is None or kept[0] is not message:
                kept = (message, VIEW_ADAPTER.validate_python({"messages": [message]})
                        .messages[0])
                self._seen[id(message)] = kept
            out.append(kept[1])
        return tuple(out)


def _part(message: Any, protected: frozenset[str], purpose: str, last: bool) -> str:
    kind = message.kind.value
    if purpose == "compaction":  # the data block (previous summary and chunk) comes last
        return "material" if last and kind == "prompt" else "fixed"
    if kind in ("system_prompt", "shared"):
        return "fixed"
    if kind == "user_ref" and str(message.input_id) in protected:
        return "protected"
    return {"summary": "summary", "annotation": "hooks"}.get(kind, "material")


def split_request(request: Event, estimator: TokenEstimator, views: Views | None = None
                  ) -> tuple[tuple[tuple[str, int], ...], str]:
    """The parts of one request's I (see the module's docstring), bottom to top, and a note
    when they cannot be told apart."""
    total = int(request["estimated_input_tokens"])
    messages = (views or Views()).messages(request)
    protected = frozenset(str(i) for i in request.get("protected_input_ids") or ())
    groups: dict[str, list[Any]] = {}
    for index, message in enumerate(messages):
        part = _part(message, protected, request["purpose"], index == len(messages) - 1)
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




def build_page(scenario: "Scenario", trace: Sequence[Event], partial: str = "") -> ReplayPage:
    """The replay page's model from a scenario and the JSON trace of its replay (``partial``:
    why the trace stops early, when it does)."""
    from ctxspec.conformance.replay_walk import walk

    return walk(scenario, trace, partial)
