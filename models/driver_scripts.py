"""What the driver-level model (models/driver_machine.py) generates: the Agent, the patterns the
scripted ports repeat, hooks at every hook point a Session has, triggers, crash plans.

Everything here is drawn from few bytes, so the step budget — not Hypothesis's data buffer —
ends an example: a large body is one character repeated (three draws, whatever its length),
lists are short, and the ports repeat their pattern for as long as the Session asks.

The mix is weighed so that one CI run reaches every row of the coverage table
(models/driver_coverage.py): windows tiny (compaction refused or folded in small chunks) and
large (snapshots activated and reused), summaries that mostly succeed, hooks that edit covered
material (snapshots invalidated), Planners with Executors, triggers on every event the scenario
language has, crashes before, after and refused at every phase (one focus per phase × moment).
"""

from typing import Any

from hypothesis import strategies as st

from ctxspec.conformance.phases import PHASES
from ctxspec.models.driver_rules import REDACTION
from ctxspec.models.driver_settings import (
    ODD_ANSWERS,
    WRITER_TRIGGERS,
    keep_valid,
    shared_hooks,
    stops_focus,
    widen_agent,
)

NAME = "driver-machine"
TOOLS = ("read", "write")
SCHEMA = {"type": "object", "properties": {"path": {"type": "string"}}}
CRASH_PHASES = tuple(PHASES)
"""The crash points: the phases the design names (conformance/phases.py), which a driver maps
onto its own commits."""
MOMENTS = ("before", "after", "fails")
"""When the crash comes at its phase: the process dies just before or just after the commit,
or the store refuses the commit (rolled back whole) and the runtime stops on it."""
HOOK_POINTS = ("tool.pre_call", "compaction.pre_request", "model.post_response",
               "tool.post_call", "compaction.post_response", "model.pre_request")
"""The hook points of a Session of one Agent (capability.pre_call belongs to workflows). The
first alternative of a strategy is Hypothesis's simplest and drawn most often, so the orders
here put the points, windows and answers that are hardest to reach first."""

_ALPHABET = st.sampled_from([*"abcdefgh xyz.,!?\n\t", "，", "？", "é", "ß", "漢", "字", "😀"])
BODIES = st.one_of(
    st.text(_ALPHABET, max_size=12),
    # Large enough to crowd the window, drawn in three draws whatever its length.
    st.builds(lambda char, n, tail: char * n + tail, st.sampled_from(["x", "漢", " ", "é"]),
              st.integers(200, 1500), st.text(_ALPHABET, max_size=2)))
"""Input bodies: mostly short, sometimes large; whitespace at either end and non-ASCII
characters, which a runtime must keep verbatim."""

_PATHS = st.sampled_from(["a.md", "notes.md", "reports/x.md"])


def _calls(tools: tuple[str, ...]) -> st.SearchStrategy[list[dict[str, Any]]]:
    return st.lists(st.builds(lambda name, path: {"name": name, "arguments": {"path": path}},
                              st.sampled_from(tools), _PATHS), min_size=1, max_size=2)


_TEXT = st.one_of(
    st.builds(lambda n: {"text": f"answer {n}"}, st.integers(1, 99)),
    # A provider's usage report is audit data: whatever it says, no request may change (§7).
    st.builds(lambda n, used: {"text": f"answer {n}", "usage": {"input_tokens": used}},
              st.integers(1, 99), st.sampled_from([0, 1, 10 ** 6])))
_FAILURES: st.SearchStrategy[dict[str, Any]] = st.sampled_from([
    {"fail": "provider_unavailable"},
    {"partial": "half an ans", "fail": "stream_broken"}, {"context_length_exceeded": True}])
_DELEGATE = st.builds(lambda n: {"text": "", "tool_calls": [
    {"name": "delegate", "arguments": {"task": f"task {n}", "constraints": [],
                                       "materials": []}}] * (1 + n % 2)}, st.integers(1, 9))


def _answers(planner: bool) -> st.SearchStrategy[dict[str, Any]]:
    """The root role's answers: most complete, many call tools (a Planner also delegates)."""
    calls = st.builds(lambda calls: {"text": "", "tool_calls": calls},
                      _calls((*TOOLS, "shell")))
    kinds = [calls, _TEXT, calls, _TEXT, calls, _FAILURES, ODD_ANSWERS]
    if planner:
        kinds += [_DELEGATE, _DELEGATE]
    return st.one_of(*kinds)


_EXECUTOR_ANSWERS = st.one_of(
    _TEXT, _TEXT, st.builds(lambda calls: {"text": "", "tool_calls": calls}, _calls(TOOLS)),
    _FAILURES)
_RESULTS = st.one_of(
    st.builds(lambda n: {"text": "R" * n}, st.integers(1000, 3900)),
    # A latency lets a batch's calls finish out of order; feedback stays in action order (§2).
    st.builds(lambda n, latency: {"text": "r" * n, **({"latency": latency} if latency else {})},
              st.integers(0, 400), st.integers(0, 3)),
    st.builds(lambda n: {"text": "r" * n}, st.integers(0, 60)),
    st.just({"error": "ENOENT"}),
    st.just({"text": "L" * 4100}),
)
_SUMMARIES = st.one_of(*[st.builds(lambda n: {"text": f"summary {n}"}, st.integers(1, 9))] * 4,
                       st.just({"fail": "summariser_down"}))
"""Mostly successes, so snapshots are activated, reused and invalidated."""

# --- hooks: every point, every kind of decision, fresh and stale bases ------------------------

_DECISIONS = st.sampled_from([{"decision": "deny"}, {"decision": "allow", "fails": True},
                              {"decision": "maybe"}, {"decision": "allow"}])
"""A deny, a failing handler, an illegal decision and a plain allow: asked of every point."""


def _edit(target: str, value: str) -> dict[str, Any]:
    return {"target": target, "field": "text", "value": value}


_QUESTION = "question"
_ITEMS: dict[str, list[tuple[bool, st.SearchStrategy[dict[str, Any]]]]] = {
    # (whether it targets the question, the item)
    "model.pre_request": [
        (True, st.just({"context_patch": [_edit(_QUESTION, "an overwritten question")]})),
        # Edits the newest record: covered material may change, a snapshot no longer applies.
        (False, st.just({"context_patch": [_edit("last", "an edited record")]})),
        (False, st.just({"payload_patch": [{"path": "params.temperature", "value": 0.5}]})),
        # Fixed material: an annotation of the current question, sometimes too large (§7, Q56).
        (True, st.builds(lambda n: {"context_patch": [
            {"target": _QUESTION, "field": "note", "operation": "append_annotation",
             "value": "N" * n}]}, st.integers(1, 3000))),
    ],
    "model.post_response": [
        (False, st.just({"payload_patch": [{"path": "text", "value": "a rewritten answer"}]})),
        (False, st.just({"context_patch": [_edit("last", "an edited record")]})),
    ],
    "tool.pre_call": [
        (False, st.just({"payload_patch": [{"path": "arguments.path",
                                            "value": "patched/p.md"}]})),
        (False, st.just({"payload_patch": [{"path": "arguments", "delete": True}]})),
        (False, st.just({"context_patch": [{"target": "call",
                                            "field": "tool_call:{call_id}.arguments",
                                            "value": {"path": "ctx/p.md"}}]})),
    ],
    "tool.post_call": [
        (False, st.just({"payload_patch": [{"path": "result", "value": "(redacted)"}]})),
    ],
    "compaction.pre_request": [
        # Corrects material the episode covers: its summary is refused at the switch (Q55).
        (False, st.just({"context_patch": [_edit("last", "a corrected record")]})),
        (True, st.just({"context_patch": [_edit(_QUESTION, "an overwritten question")]})),
    ],
    "compaction.post_response": [
        (False, st.just({"payload_patch": [{"path": "summary",
                                            "value": "(a hook's summary)"}]})),
    ],
}


def _item(point: str, planner: bool) -> st.SearchStrategy[dict[str, Any]]:
    def stale(item: dict[str, Any], base: bool) -> dict[str, Any]:
        return {**item, "stale_base": True} if base and "context_patch" in item else item
    # An Executor's context has no question: a Planner's hooks target the last record only.
    kinds = [kind for question, kind in _ITEMS[point] if not (planner and question)]
    return st.builds(stale, st.one_of(*kinds, _DECISIONS), st.booleans())


def hooks(planner: bool) -> st.SearchStrategy[dict[str, Any]]:
    """A hook at one point, for one invocation or all, with one or two items (a stale second
    item conflicts with the first's commit)."""
    return st.sampled_from(HOOK_POINTS).flatmap(lambda point: st.builds(
        lambda ordinal, items: {"point": point, "items": items,
                                **({"ordinal": ordinal} if ordinal else {})},
        st.one_of(st.none(), st.none(), st.integers(1, 3)),
        st.lists(_item(point, planner), min_size=1, max_size=2)))

# --- triggers and crashes -------------------------------------------------------------------


def _trigger_action(n: int, stop: bool) -> dict[str, Any]:
    return {"stop": True} if stop else {"supplement": f"T{n}: a supplement from a trigger"}


TRIGGER_MOMENTS = ("freeze", "first_output", "raw_saved", "batch_call", "hook")
"""The boundaries of the loop a trigger can fire at (docs/scenarios.md)."""
TRIGGERS = st.lists(st.builds(
    lambda on, ordinal, stop, n: {"on": {**on, "ordinal": ordinal},
                                  "do": _trigger_action(n, stop)},
    st.sampled_from([{"purpose": "compaction"}, {"tool": "read"}, {"purpose": "business"},
                     {"tool": "write"}, *({"moment": m} for m in TRIGGER_MOMENTS)]),
    st.integers(1, 3), st.booleans(), st.integers(1, 99)), max_size=2,
    # The judge knows an input by its text: two triggers never send the same one.
    unique_by=lambda trigger: str(trigger["do"]))
"""Stops and supplements just before the n-th model request of a purpose or run of a tool, or
at the n-th time the loop passes one of its moments — every moment the scenario language
names."""

EPISODE_PHASES = ("episode_started", "chunk_answer_saved", "chunk_committed",
                  "snapshot_published")
CRASHES = st.builds(lambda phase, occurrence, when: {"phase": phase, "occurrence": occurrence,
                                                     "when": when},
                    # Every phase; those of an episode weighed up, as fewer Sessions reach them.
                    st.one_of(st.sampled_from(EPISODE_PHASES), st.sampled_from(CRASH_PHASES)),
                    st.integers(1, 3), st.sampled_from(["after", "fails", "before", "after"]))

WINDOWS = st.one_of(st.integers(2500, 5000), st.integers(600, 1500), st.integers(2500, 5000),
                    st.integers(5000, 16000))
"""Tiny windows (compaction refused below the chunk floor, Q120, or folded in small chunks),
middling ones (snapshots activated, reused and invalidated) and large ones."""


FOCUSES = ("mixed", "snapshots", "crashes", "hooks", "decisions", "limits", "budgets", "stops")
"""Setups weighed toward one part of the design each; ``mixed`` weighs none. A CI run runs a
few examples of each, so every coverage row is reached in little time; the thorough run runs
many of each (docs/models.md)."""
CRASH_PAIRS = tuple((phase, when) for phase in CRASH_PHASES for when in MOMENTS)
"""Every crash point × moment. ``crash_focus(phase, when)`` names a focus whose every setup
crashes there, with the Session aimed at passing that phase (:func:`_aimed`)."""


def crash_focus(phase: str, when: str) -> str:
    return f"crash:{phase}:{when}"


@st.composite
def setups(draw: st.DrawFn, focus: str = "mixed") -> dict[str, Any]:
    """A scenario document without steps: the Agent and the patterns the ports repeat."""
    aimed = focus.split(":")[1:] if focus.startswith("crash:") else None
    planner = focus != "snapshots" and (
        draw(st.booleans()) or (aimed is not None and aimed[0].startswith("execution_")))
    windows = {"snapshots": st.integers(2500, 5000), "crashes": st.integers(2500, 5000),
               "decisions": st.integers(2500, 5000),
               "limits": st.integers(600, 1500)}.get(focus, WINDOWS)
    agent: dict[str, Any] = {
        "system_prompt": "sys", "window": draw(windows, label="window"),
        "recent_runs": draw(st.integers(0, 4)),
        "tools": [{"name": name, "schema": SCHEMA} for name in TOOLS]}
    if planner:
        agent["executor"] = {"system_prompt": "exec",
                             "tools": [{"name": name, "schema": SCHEMA} for name in TOOLS]}
    widen_agent(draw, agent, focus)
    if draw(st.integers(0, 3)) == 0:
        agent["summary_target"] = draw(st.integers(20, 400))
    if focus == "limits" or draw(st.integers(0, 5)) == 0:
        agent["run_deadline"] = draw(st.integers(2, 8))
    summaries = _SUMMARIES if focus in ("mixed", "hooks", "limits") else \
        st.builds(lambda n: {"text": f"summary {n}"}, st.integers(1, 9))
    model: dict[str, Any] = {
        "business": draw(st.lists(_answers(planner), min_size=1, max_size=5)),
        "compaction": draw(st.lists(summaries, min_size=1, max_size=3))}
    if planner:
        model["executor"] = draw(st.lists(_EXECUTOR_ANSWERS, min_size=1, max_size=3))
        if focus == "hooks":  # a delegation is a call at the tool points too (§3, §10)
            model["business"].insert(0, draw(_DELEGATE))
    document: dict[str, Any] = {
        "scenario_version": 1, "name": NAME,
        "description": "built by models/driver_machine.py", "agent": agent, "model": model,
        "tools": {name: draw(st.lists(_RESULTS, min_size=1, max_size=3)) for name in TOOLS},
        "hooks": draw(_hooks_for(focus, planner)) + draw(shared_hooks(agent)),
        "triggers": draw(TRIGGERS) + draw(WRITER_TRIGGERS)}
    if draw(st.integers(0, 3)) == 1:
        model["limit_output"] = True
    if focus == "stops":
        stops_focus(draw, document)
    if aimed is not None:
        document = _aimed(draw, document, *aimed)
        keep_valid(agent)
        return document
    keep_valid(agent)
    crash = draw(CRASHES if focus == "crashes" else st.one_of(CRASHES, st.none()),
                 label="crash")
    if crash is not None and focus in ("mixed", "crashes", "limits", "budgets"):
        document["crash"] = crash
    return document


_LONG = st.builds(lambda n: {"text": "R" * n}, st.integers(1500, 3900))
"""A tool result that brings a middling window to its compaction trigger."""


_FREQUENT = ("input_accepted", "request_frozen", "first_output", "raw_answer_saved",
             "effective_result_committed", "hook_started", "hook_decided", "tool_started",
             "tool_settled")
"""Phases every Session passes several times, so a crash at their second occurrence comes
early too."""


def _aimed(draw: st.DrawFn, document: dict[str, Any], phase: str, when: str) -> dict[str, Any]:
    """The setup crashed at ``phase`` ``when``, its first Run aimed at passing the phase: the
    first answer delegates (an execution), calls tools (a tool, a batch, an episode: with long
    results in a middling window that then compacts) or fails (an attempt); a hook chain is
    asked at every request (a hook phase). Everything else stays as drawn."""
    agent, model = document["agent"], document["model"]
    agent.pop("run_deadline", None)  # a deadline of a few ticks ends the Run before the phase
    # Nor may a budget end it first: a Loop limit of 1, a spent tool quota, a tiny B.
    agent.update(loop_limit=max(2, agent["loop_limit"]))
    agent.pop("tool_quota", None)
    if agent.get("output_reserve", 0) > agent["window"] // 4:
        agent["output_reserve"] = draw(st.integers(50, 400))
    first: st.SearchStrategy[dict[str, Any]] | None = None
    if phase.startswith("execution_"):
        first = _DELEGATE
    elif phase in ("tool_started", "tool_settled", "batch_fed_back", *EPISODE_PHASES):
        first = st.builds(lambda calls: {"text": "", "tool_calls": calls}, _calls(TOOLS))
    elif phase == "attempt_failed":
        first = _FAILURES
    if first is not None:
        model["business"] = [draw(first), *model["business"]]
    if phase in EPISODE_PHASES:
        # No hook either: a compaction hook's deny or a patch of the material would end the
        # episode before the phase.
        agent.update(window=draw(st.integers(2500, 4000)), trigger_ratio="0.3")
        agent.pop("summary_target", None)
        document["hooks"] = []
        document["tools"] = {name: [draw(_LONG), *results]
                             for name, results in document["tools"].items()}
    if phase.startswith("hook_"):
        document["hooks"] = [{"point": "model.pre_request", "items": [
            {"payload_patch": [{"path": "params.temperature", "value": 0.5}]}]},
            *document["hooks"]]
    # A later occurrence where a Session passes the phase often; the first where it is rare.
    occurrence = draw(st.sampled_from([1, 2, 1]), label="occurrence") \
        if phase in _FREQUENT else 1
    document["crash"] = {"phase": phase, "when": when, "occurrence": occurrence}
    return document


def _decisions(planner: bool) -> st.SearchStrategy[list[dict[str, Any]]]:
    """A hook at every point, each deciding one of allow, modify (a patch of a registered
    field) or deny; a deny answers one invocation only (its first to third), so the Session
    goes on to the other points."""
    def at(point: str) -> st.SearchStrategy[dict[str, Any]]:
        modify = st.one_of(*(kind for question, kind in _ITEMS[point]
                             if not (planner and question)))
        return st.one_of(
            st.builds(lambda item: {"point": point, "items": [item]},
                      st.one_of(st.just({"decision": "allow"}), modify)),
            st.builds(lambda ordinal: {"point": point, "ordinal": ordinal,
                                       "items": [{"decision": "deny"}]}, st.integers(1, 3)))
    return st.tuples(*(at(point) for point in HOOK_POINTS)).map(list)


REDACTING = {"point": "tool.post_call", "items": [REDACTION]}


def _hooks_for(focus: str, planner: bool) -> st.SearchStrategy[list[dict[str, Any]]]:
    if focus == "decisions":
        return _decisions(planner)
    if focus == "hooks":
        # The tool points, with chains of two (a stale second item meets the first's commit).
        tool_hooks = st.sampled_from(["tool.post_call", "tool.pre_call"]).flatmap(
            lambda point: st.builds(lambda items: {"point": point, "items": items},
                                    st.lists(_item(point, planner), min_size=2, max_size=2)))
        # Two items of one chain patching the same field, the second on the chain's base: it
        # meets the first's commit (CONTEXT_REVISION_CONFLICT).
        conflict = st.just({"point": "tool.pre_call", "items": [
            {"context_patch": [{"target": "call", "field": "tool_call:{call_id}.arguments",
                                "value": {"path": "one.md"}}]},
            {"context_patch": [{"target": "call", "field": "tool_call:{call_id}.arguments",
                                "value": {"path": "two.md"}}], "stale_base": True}]})
        # The only post-call hook redacts every result: a delegation's result too (§3, §10).
        redacting = st.builds(lambda more: [REDACTING, *(h for h in more
                                                         if h["point"] != "tool.post_call")],
                              st.lists(hooks(planner), max_size=2))
        return st.one_of(
            st.lists(st.one_of(conflict, tool_hooks, hooks(planner)), min_size=2, max_size=4),
            redacting)
    if focus == "snapshots" and not planner:
        # A compaction hook correcting covered material (the first answer): the summary is
        # refused at the switch (Q55).
        correcting = {"point": "compaction.pre_request", "ordinal": 1, "items": [
            {"context_patch": [_edit("first_assistant", "a corrected answer")]}]}
        return st.builds(lambda more: [correcting, *more], st.lists(hooks(planner), max_size=1))
    return st.lists(hooks(planner), max_size=4)


__all__ = ["BODIES", "CRASHES", "CRASH_PAIRS", "CRASH_PHASES", "FOCUSES", "HOOK_POINTS",
           "MOMENTS", "NAME", "SCHEMA", "TOOLS", "TRIGGERS", "TRIGGER_MOMENTS", "WINDOWS",
           "crash_focus", "hooks", "setups"]
