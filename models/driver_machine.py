"""A driver-level Hypothesis model: random Sessions played on any Driver, judged from the neutral
trace alone (§2 orderings, §4 and §5 protected inputs, §6 tool protocol, §7 hard window, §10
recovery, §11 stop).

An initialize rule picks the Agent (a small window measured with the ``chars`` estimator, so
compaction happens; the tools ``read`` and ``write``; a few recent Runs), the scripted model,
tool and hook answers (tool calls, failures, partial streams, answers reporting usage, tool
results with a latency, hooks that patch a call's arguments, deny it, fail, try to overwrite
the question, or annotate it with fixed material that may not fit), an optional stop trigger
on a tool run and an optional crash plan at a named commit (capability ``crash_points``).
Rules then ask, supplement, stop and advance, one step at a time, on a live driver
(``conformance.driver.perform``). The scripted ports never run out: they repeat their
pattern on demand, and what they handed out is written into the scenario document, so the
document replays exactly.

After every step the trace is read back as plain JSON and checked, with expectations derived
from the steps and the scripts — never from the driver's store or internals:

- the trace only grows: what was shown of an earlier request never changes (the events after
  step k are a prefix of those after step k+1; a restarted incarnation appends a ``restarted``
  marker and its own events after the dead one's, which stay as they were);
- raw facts stay raw: every user_ref message shows the text of an input exactly as sent, one
  input id always the same text; a tool runs with the arguments the model proposed unless a
  pre-call hook is registered;
- protected inputs: every business request shows, as user_ref messages in receive order and
  each once, the current Run's question and every supplement bound to the Run up to the
  request's cutoff — received while it was active, waiting for its question, or carried from a
  Run that never delivered it (a supplement is delivered by a request whose answer produced
  output) — and its protected input list is exactly those;
- tool protocol (§6): every tool result follows its call, every call shown in a request has
  exactly one result or placeholder after it, in action order;
- the hard window (§7): I + max_output_tokens + S ≤ W for every request, with the window,
  reserve and margin the Agent configured and I at least the characters the request shows;
- nothing fetched twice: no (purpose_key, attempt) asked twice, except the one answer in flight
  at a LOST_ANSWER crash point (conformance/crash_matrix.py), asked again after the restart;
  no call executed twice, no tool executed more often than the answered requests proposed it;
- orderings: run_seq strictly increasing per Run within an incarnation; input_cutoff (the only
  input_seq the trace shows) never decreasing, at least the Run's question, at most the inputs
  received; input_seq itself and context_seq are not in the trace (docs/models.md);
- Runs: each advance ends its Run; a stopped Run sends no request and ends ``stopped``; at most
  the planned restart, where the plan put it.

When a check fails (or the driver raises), the scenario built so far is written to a file named
in the failure (``$CTXSPEC_COUNTEREXAMPLES`` or the temporary directory); ``ctxspec replay
FILE`` shows it on the reference runtime and :func:`replay_checked` re-judges it on any driver.
"""

import json
import os
import tempfile
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, reject
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule

from ctxspec import catalogue
from ctxspec.conformance.crash_matrix import LOST_ANSWER
from ctxspec.conformance.driver import ESTIMATORS, Driver, Ports, ReferenceDriver, perform
from ctxspec.conformance.scenario import (
    ModelDoc,
    Scenario,
    ScriptedHooks,
    ScriptedModel,
    ScriptedTools,
    StepDoc,
    ToolResultDoc,
    Triggers,
    parse_scenario,
)
from ctxspec.reference.commits import COMMIT_NAMES
from ctxspec.reference.ports import ModelCall, ModelOutcome, ToolOutcome
from ctxspec.reference.registry import JSON

Trace = list[dict[str, Any]]
DriverFactory = Callable[[], Driver]
Tolerance = Callable[[Mapping[str, Any], str], bool]
"""A known, reported defect of the driver under test: given the scenario and the problem, whether
this failure is that defect (the example is then discarded, not passed)."""

STEPS = 15
"""Steps per example (each runs a Session step on the runtime under test, so they are few).
How many examples run is the Hypothesis profile's choice (tests/conftest.py); a runtime's own
test sets its own settings."""
HEALTH = [HealthCheck.too_slow, HealthCheck.data_too_large]
"""Health checks to suppress: a Session is slow to build and its scenario is large."""

NAME = "driver-machine"
TOOLS = ("read", "write")
SCHEMA = {"type": "object", "properties": {"path": {"type": "string"}}}
CRASH_COMMITS = tuple(c for c in COMMIT_NAMES
                      if c not in ("EXECUTION_STARTED", "EXECUTION_ENDED", "TAKEOVER"))
"""The commits a Session without Executors passes through (a takeover is never crashed)."""
NO_STEPS = [{"stop": True}]
"""A document needs a step: a failure while configuring is saved with a stop, which does nothing
while no Run is active."""
OUTPUT_KINDS = ("text", "partial")
"""Answers whose first output delivers the inputs the request claimed (§5)."""


class DriverViolation(AssertionError):
    """An invariant did not hold on the driver's trace; the message names it, the step, and the
    file the scenario was saved to."""


# --- what the machine generates ---------------------------------------------------------------

_ALPHABET = st.sampled_from([*"abcdefgh xyz.,!?\n\t", "，", "？", "é", "ß", "漢", "字", "😀"])
BODIES = st.one_of(st.text(_ALPHABET, max_size=40), st.text(_ALPHABET, min_size=300, max_size=700))
"""Input bodies: mostly short, sometimes large enough to crowd the window; whitespace at either
end and non-ASCII characters, which a runtime must keep verbatim."""

_PATHS = st.sampled_from(["a.md", "notes.md", "reports/x.md"])
_CALLS = st.lists(st.builds(lambda name, path: {"name": name, "arguments": {"path": path}},
                            st.sampled_from([*TOOLS, "shell"]), _PATHS), min_size=1, max_size=2)
_TEXT = st.one_of(
    st.builds(lambda n: {"text": f"answer {n}"}, st.integers(1, 99)),
    # A provider's usage report is audit data: whatever it says, no request may change (§7).
    st.builds(lambda n, used: {"text": f"answer {n}", "usage": {"input_tokens": used}},
              st.integers(1, 99), st.sampled_from([0, 1, 10 ** 6])))
_TOOL_CALLS = st.builds(lambda calls: {"text": "", "tool_calls": calls}, _CALLS)
_ANSWERS = st.one_of(
    # Repeated to weigh them: most answers complete, many call tools.
    _TEXT, _TOOL_CALLS, _TOOL_CALLS, _TEXT, _TOOL_CALLS,
    st.just({"fail": "provider_unavailable"}),
    st.just({"partial": "half an ans", "fail": "stream_broken"}),
    st.just({"context_length_exceeded": True}),
)
_RESULTS = st.one_of(
    # A latency lets a batch's calls finish out of order; feedback stays in action order (§2).
    st.builds(lambda n, latency: {"text": "r" * n, **({"latency": latency} if latency else {})},
              st.integers(0, 400), st.integers(0, 3)),
    st.builds(lambda n: {"text": "r" * n}, st.integers(0, 60)),
    st.just({"error": "ENOENT"}),
    st.just({"text": "L" * 4100}),
)
_SUMMARIES = st.one_of(st.builds(lambda n: {"text": f"summary {n}"}, st.integers(1, 9)),
                       st.just({"fail": "summariser_down"}))
_PRE_ITEMS = st.one_of(
    st.just({"decision": "allow", "payload_patch": [{"path": "arguments.path",
                                                     "value": "patched/p.md"}]}),
    st.just({"decision": "deny"}),
    st.just({"decision": "allow", "fails": True}),
    st.just({"decision": "allow", "payload_patch": [{"path": "arguments", "delete": True}]}),
    st.just({"decision": "maybe"}),
)
_HOOKS = st.one_of(
    st.builds(lambda ordinal, items: {"point": "tool.pre_call", "ordinal": ordinal,
                                      "items": items},
              st.one_of(st.none(), st.integers(1, 3)), st.lists(_PRE_ITEMS, min_size=1,
                                                                max_size=2)),
    st.builds(lambda ordinal, deny: {"point": "tool.post_call", "ordinal": ordinal, "items": [
        {"decision": "deny"} if deny else
        {"decision": "allow", "payload_patch": [{"path": "result", "value": "(redacted)"}]}]},
        st.one_of(st.none(), st.integers(1, 3)), st.booleans()),
    st.just({"point": "model.pre_request", "items": [{"decision": "allow", "context_patch": [
        {"target": "question", "field": "text", "value": "an overwritten question"}]}]}),
    # Fixed material: an annotation of the current question, sometimes too large to fit (§7).
    st.builds(lambda n: {"point": "model.pre_request", "items": [{"context_patch": [
        {"target": "question", "field": "note", "operation": "append_annotation",
         "value": "N" * n}]}]}, st.integers(1, 3000)),
)
_CRASHES = st.builds(lambda commit, occurrence, when: {"commit": commit,
                                                       "occurrence": occurrence, "when": when},
                     st.sampled_from(CRASH_COMMITS), st.integers(1, 3),
                     st.sampled_from(["before", "after"]))
_STOP_TRIGGERS = st.builds(lambda tool, ordinal: {"on": {"tool": tool, "ordinal": ordinal},
                                                  "do": {"stop": True}},
                           st.sampled_from(TOOLS), st.integers(1, 4))


@st.composite
def setups(draw: st.DrawFn) -> dict[str, Any]:
    """A scenario document without steps: the Agent and the patterns the ports repeat."""
    agent = {"system_prompt": "sys", "window": draw(st.integers(600, 3000), label="window"),
             "output_reserve": draw(st.integers(50, 150)),
             "safety_margin": draw(st.integers(10, 40)),
             "recent_runs": draw(st.integers(0, 2)), "loop_limit": 3,
             "model_attempts": draw(st.integers(1, 2)), "estimator": "chars",
             "tools": [{"name": name, "schema": SCHEMA} for name in TOOLS]}
    document: dict[str, Any] = {
        "scenario_version": 1, "name": NAME,
        "description": "built by models/driver_machine.py", "agent": agent,
        "model": {"business": draw(st.lists(_ANSWERS, min_size=1, max_size=5)),
                  "compaction": draw(st.lists(_SUMMARIES, min_size=1, max_size=2))},
        "tools": {name: draw(st.lists(_RESULTS, min_size=1, max_size=3)) for name in TOOLS},
        "hooks": draw(st.lists(_HOOKS, max_size=2)),
        "triggers": draw(st.lists(_STOP_TRIGGERS, max_size=1))}
    crash = draw(st.one_of(st.none(), _CRASHES), label="crash")
    if crash is not None:
        document["crash"] = crash
    return document


# --- ports that never run out -----------------------------------------------------------------


class EndlessModel(ScriptedModel):
    """A ScriptedModel that repeats each purpose's pattern whenever the next answer is asked for,
    so a Session of any length has one; the lists then hold exactly what was handed out."""

    def __init__(self, scenario: Scenario, triggers: Triggers) -> None:
        super().__init__(scenario.model, triggers)
        self.patterns = {key: list(queue) for key, queue in self.script.items()}

    def call(self, request: ModelCall) -> ModelOutcome:
        for key, queue in self.script.items():
            pattern = self.patterns[key]
            while pattern and len(queue) <= self.used[key]:
                queue.append(pattern[len(queue) % len(pattern)])
        return super().call(request)


class EndlessTools(ScriptedTools):
    def __init__(self, scenario: Scenario, triggers: Triggers) -> None:
        super().__init__(scenario.tools, triggers)
        self.patterns = {name: list(results) for name, results in self.script.items()}

    def run(self, name: str, arguments: Mapping[str, JSON], ordinal: int) -> ToolOutcome:
        queue, pattern = self.script.get(name), self.patterns.get(name)
        if queue is not None and pattern:
            while len(queue) <= self.calls.get(name, 0):
                queue.append(pattern[len(queue) % len(pattern)])
        return super().run(name, arguments, ordinal)


def _dump(docs: Sequence[ModelDoc | ToolResultDoc]) -> list[dict[str, Any]]:
    return [doc.model_dump(mode="json", exclude_defaults=True) for doc in docs]


# --- the checks -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Input:
    seq: int
    kind: str
    text: str
    run: int | None
    """The Run it was received into (None: it waits for the next question)."""


@dataclass
class Judge:
    """Judges a driver's trace after every step, from the scenario document and the steps alone.

    ``marks[k]`` is the trace length after the k-th step (``marks[0]``: after configure)."""

    document: Mapping[str, Any]
    steps: list[StepDoc] = field(default_factory=list)
    marks: list[int] = field(default_factory=list)
    previous: Trace = field(default_factory=list)

    def fail(self, message: str) -> None:
        raise DriverViolation(message)

    def expect(self, condition: bool, message: str) -> None:
        if not condition:
            self.fail(message)

    # What the steps mean, in the design's terms.

    def shadow(self) -> tuple[list[Input], list[int | None], dict[int, int]]:
        """The inputs (receive order), the Run active during each step, the step of each Run's
        first stop."""
        inputs: list[Input] = []
        active: int | None = None
        runs = 0
        during: list[int | None] = []
        stops: dict[int, int] = {}
        for index, step in enumerate(self.steps):
            if step.ask is not None:
                runs += 1
                active = runs
                inputs.append(Input(len(inputs) + 1, "question", step.ask, active))
            elif step.supplement is not None:
                inputs.append(Input(len(inputs) + 1, "supplement", step.supplement, active))
            elif step.stop and active is not None:
                stops.setdefault(active, index)
            during.append(active)
            if step.advance:
                active = None
        return inputs, during, stops

    def step_of(self, position: int) -> int:
        """The step whose performance added the event at ``position`` (-1: configure)."""
        for index, mark in enumerate(self.marks):
            if position < mark:
                return index - 1
        return len(self.marks) - 1

    def check(self, trace: Trace) -> None:
        at = f"after step {len(self.steps)} ({self._describe()})"
        try:
            self._check(trace)
        except DriverViolation as violation:
            raise DriverViolation(f"{violation} — {at}") from None
        self.previous = trace

    def _describe(self) -> str:
        if not self.steps:
            return "configure"
        return json.dumps(self.steps[-1].model_dump(exclude_defaults=True), ensure_ascii=False)

    def _check(self, trace: Trace) -> None:
        self.expect(trace[:len(self.previous)] == self.previous,
                    "the trace changed retroactively: the events seen before this step are no "
                    "longer a prefix of the trace")
        inputs, during, stops = self.shadow()
        requests = [(i, e) for i, e in enumerate(trace) if e["kind"] == "model_request"]
        self._restarts(trace)
        self._no_fetch_twice(trace, requests)
        answers = self._answers(requests)
        self._runs(trace, requests, during, stops)
        texts = {i.text for i in inputs}
        shown: dict[str, str] = {}
        new = len(self.previous)
        for position, request in requests:
            self._budget(request)
            executor = request.get("role", "root") != "root"
            if executor:
                # An Executor sees its hand-over only, never a user input (§1, §5).
                self.expect(not texts & {m["text"] for m in request["view"]["messages"]},
                            "an Executor's request shows a user input; it sees only its "
                            "hand-over")
            for message in request["view"]["messages"]:
                if executor or message["kind"] != "user_ref":
                    continue
                self.expect(message["text"] in texts,
                            f"a user_ref message shows {message['text']!r}, which is no input "
                            f"as sent")
                input_id = message.get("input_id")
                if input_id is not None:
                    self.expect(shown.setdefault(input_id, message["text"]) == message["text"],
                                f"input {input_id} is shown with two texts")
            if position >= new and request["purpose"] == "business":
                self._protocol(request)
        self._protected(requests, inputs, during, answers)
        self._orderings(trace, requests, inputs, during)
        self._tools(trace, answers)

    def _restarts(self, trace: Trace) -> None:
        restarts = [(e["commit"], e["occurrence"], e["when"]) for e in trace
                    if e["kind"] == "restarted"]
        crash = self.document.get("crash")
        planned = [] if crash is None else [(crash["commit"], crash.get("occurrence", 1),
                                             crash.get("when", "after"))]
        self.expect(restarts in ([], planned),
                    f"restarts {restarts}, but the plan was {planned or 'no crash'}")

    def _no_fetch_twice(self, trace: Trace, requests: list[tuple[int, dict[str, Any]]]) -> None:
        asked = Counter((r["purpose_key"], r["attempt"]) for _, r in requests)
        again = {key: n for key, n in asked.items() if n > 1}
        crash = self.document.get("crash")
        restart = next((i for i, e in enumerate(trace) if e["kind"] == "restarted"), None)
        lost = restart is not None and crash is not None and (
            crash["commit"], crash.get("when", "after")) in LOST_ANSWER
        if not again:
            return
        self.expect(lost and len(again) == 1 and set(again.values()) == {2},
                    f"requests asked again: {again}")
        ((key, _),) = again.items()
        where = [i for i, r in requests if (r["purpose_key"], r["attempt"]) == key]
        self.expect(restart is not None and where[0] < restart < where[1],
                    "the one request asked again was not the answer in flight at the restart")

    def _answers(self, requests: list[tuple[int, dict[str, Any]]]) -> dict[tuple[str, int],
                                                                            dict[str, Any]]:
        """Which scripted answer each business request got: the root role's (the Planner's)
        script and the Executors' are each taken in order of first asking; the same attempt
        asked again gets the same answer (scenario.py)."""
        answers: dict[tuple[str, int], dict[str, Any]] = {}
        taken = {"business": 0, "executor": 0}
        for _, request in requests:
            key = (request["purpose_key"], request["attempt"])
            if request["purpose"] != "business" or key in answers:
                continue
            script_name = "business" if request.get("role", "root") == "root" else "executor"
            script = self.document["model"].get(script_name, [])
            self.expect(taken[script_name] < len(script),
                        f"more {script_name} requests than answers")
            answers[key] = script[taken[script_name]]
            taken[script_name] += 1
        return answers

    def _runs(self, trace: Trace, requests: list[tuple[int, dict[str, Any]]],
              during: list[int | None], stops: dict[int, int]) -> None:
        endings: dict[int, str] = {}
        for event in trace:
            if event["kind"] == "run_ended":
                self.expect(1 <= event["run_no"] <= max((r or 0 for r in during), default=0),
                            f"run {event['run_no']} ended, but only "
                            f"{max((r or 0 for r in during), default=0)} questions were asked")
                endings[event["run_no"]] = event["status"]
        for index, performed in enumerate(self.steps):
            run = during[index]
            if performed.advance and run is not None:
                self.expect(run in endings, f"run {run} was advanced but never ended")
                if run in stops:
                    self.expect(endings[run] == "stopped",
                                f"run {run} was stopped but ended {endings[run]}")
        for position, request in requests:
            at = self.step_of(position)
            run = during[at] if at >= 0 else None
            self.expect(run is not None, f"a {request['purpose']} request was sent while no Run "
                                         f"was active")
            if run in stops:
                self.expect(at <= stops[run], f"run {run} sent a {request['purpose']} request "
                                                f"after it was stopped")

    def _budget(self, request: Mapping[str, Any]) -> None:
        agent = self.document["agent"]
        window, reserve, margin = agent["window"], agent["output_reserve"], agent["safety_margin"]
        seen = (request["window"], request["output_reserve"], request["safety_margin"])
        self.expect(seen == (window, reserve, margin),
                    f"a request carries W, O, S = {seen}; the Agent has "
                    f"{(window, reserve, margin)}")
        estimated = request["estimated_input_tokens"]
        self.expect(estimated + request["max_output_tokens"] + margin <= window,
                    f"I + max_output + S = {estimated} + {request['max_output_tokens']} + "
                    f"{margin} > W = {window}")
        if request["purpose"] == "business":
            self.expect(request["max_output_tokens"] == reserve,
                        f"a business request may answer {request['max_output_tokens']} tokens; "
                        f"O is {reserve}")
        # One token per character: the estimate covers at least the text the request shows.
        shown = sum(len(m["text"]) for m in request["view"]["messages"])
        self.expect(estimated >= shown, f"I = {estimated} is less than the {shown} characters "
                                        f"the request shows")

    def _protocol(self, request: Mapping[str, Any]) -> None:
        messages = request["view"]["messages"]
        calls: dict[str, tuple[int, int]] = {}
        """call_id → (position of its assistant message, action ordinal)."""
        answered: dict[str, list[int]] = {}
        for position, message in enumerate(messages):
            for call in message.get("tool_calls") or ():
                self.expect(call["call_id"] not in calls,
                            f"call {call['call_id']} is shown twice in one request")
                calls[call["call_id"]] = (position, call["action_ordinal"])
            if message["kind"] in ("tool_result", "placeholder") and message.get("call_id"):
                call_id = message["call_id"]
                self.expect(call_id in calls and calls[call_id][0] < position,
                            f"a {message['kind']} for call {call_id} is shown without its call "
                            f"before it")
                answered.setdefault(call_id, []).append(position)
        for call_id in calls:
            self.expect(len(answered.get(call_id, [])) == 1,
                        f"call {call_id} has {len(answered.get(call_id, []))} results or "
                        f"placeholders in a business request (a settled batch has exactly one)")
        by_message: dict[int, list[tuple[int, int]]] = {}
        for call_id, (position, ordinal) in calls.items():
            by_message.setdefault(position, []).append((answered[call_id][0], ordinal))
        for group in by_message.values():
            ordinals = [ordinal for _, ordinal in sorted(group)]
            self.expect(ordinals == sorted(ordinals),
                        f"a batch's results are shown in action order {ordinals}")

    def _protected(self, requests: list[tuple[int, dict[str, Any]]], inputs: list[Input],
                   during: list[int | None],
                   answers: Mapping[tuple[str, int], dict[str, Any]]) -> None:
        """§4, §5: each Run's protected inputs, with supplements bound and carried as the
        design says, in every business request of the Run."""
        questions = {i.run: i.seq for i in inputs if i.kind == "question" and i.run is not None}
        by_run: dict[int, list[tuple[int, dict[str, Any]]]] = {}
        for position, request in requests:
            step = self.step_of(position)
            run = during[step] if step >= 0 else None
            if request["purpose"] == "business" and request.get("role", "root") == "root" \
                    and run is not None:
                by_run.setdefault(run, []).append((position, request))
        ended = {during[i] for i, s in enumerate(self.steps) if s.advance}
        received = [0]
        for performed in self.steps:  # inputs received once each step was performed
            received.append(received[-1] + (performed.ask is not None
                                             or performed.supplement is not None))
        waiting: list[Input] = []
        """Supplements carried from a Run that never delivered them, waiting for a question."""
        for run in sorted(questions):
            question = questions[run]
            earlier = questions.get(run - 1, 0)
            bound = sorted([*waiting, *(i for i in inputs if i.kind == "supplement" and (
                i.run == run or (i.run is None and earlier < i.seq < question)))],
                key=lambda i: i.seq)
            delivered: set[int] = set()
            for position, request in by_run.get(run, []):
                cutoff = request["input_cutoff"]
                seen = received[self.step_of(position) + 1]
                self.expect(isinstance(cutoff, int) and question <= cutoff <= seen,
                            f"run {run}'s request has input_cutoff {cutoff}; its question is "
                            f"input {question} and {seen} inputs were received")
                expected = [inputs[question - 1], *(i for i in bound if i.seq <= cutoff)]
                expected.sort(key=lambda i: i.seq)
                shown = [m for m in request["view"]["messages"] if m["kind"] == "user_ref"]
                texts = [m["text"] for m in shown]
                for item in expected:
                    self.expect(texts.count(item.text) == 1,
                                f"run {run}'s request (cutoff {cutoff}) shows its input "
                                f"{item.seq} ({item.kind}, {item.text!r}) "
                                f"{texts.count(item.text)} times; protected inputs are shown "
                                f"once, verbatim")
                wanted = {i.text for i in expected}
                self.expect([t for t in texts if t in wanted] == [i.text for i in expected],
                            f"run {run}'s protected inputs are not shown in receive order")
                ids = {m["input_id"]: m["text"] for m in shown if m.get("input_id")}
                listed = [ids.get(i) for i in request["protected_input_ids"]]
                self.expect(sorted(map(str, listed)) == sorted(wanted),
                            f"run {run}'s request lists protected inputs {listed}, expected "
                            f"{[i.text for i in expected]}")
                answer = answers.get((request["purpose_key"], request["attempt"]), {})
                if any(kind in answer for kind in OUTPUT_KINDS):
                    delivered.update(i.seq for i in bound if i.seq <= cutoff)
            waiting = [i for i in bound if i.seq not in delivered] if run in ended else []

    def _orderings(self, trace: Trace, requests: list[tuple[int, dict[str, Any]]],
                   inputs: list[Input], during: list[int | None]) -> None:
        incarnation = 0
        last: dict[tuple[int, str], int] = {}
        for event in trace:
            if event["kind"] == "restarted":
                incarnation += 1
            elif event["kind"] == "client_event":
                key = (incarnation, event["run_id"])
                self.expect(event["run_seq"] > last.get(key, 0),
                            f"run_seq {event['run_seq']} after {last.get(key, 0)} in one Run")
                last[key] = event["run_seq"]
        cutoffs = [r["input_cutoff"] for _, r in requests
                   if r["purpose"] == "business" and r.get("role", "root") == "root"]
        self.expect(cutoffs == sorted(cutoffs),
                    f"input_cutoff went back: {cutoffs} (input_seq is the receive order)")

    def _tools(self, trace: Trace, answers: Mapping[tuple[str, int], dict[str, Any]]) -> None:
        executed = [e for e in trace if e["kind"] == "tool_executed"]
        ids = Counter(e["call_id"] for e in executed)
        self.expect(all(n == 1 for n in ids.values()),
                    f"calls executed more than once: {[c for c, n in ids.items() if n > 1]}")
        proposed = Counter(c["name"] for a in answers.values() for c in a.get("tool_calls", ()))
        ran = Counter(e["name"] for e in executed)
        self.expect(ran <= proposed, f"tools executed {dict(ran)}; the answered requests "
                                     f"proposed {dict(proposed)}")
        arguments = [c["arguments"] for a in answers.values() for c in a.get("tool_calls", ())]
        hooked = any(h["point"] == "tool.pre_call" for h in self.document.get("hooks", ()))
        for event in executed:
            self.expect(event["proposed_arguments"] in arguments,
                        f"{event['name']} was proposed with {event['proposed_arguments']}, which "
                        f"no answer proposed")
            if not hooked:
                self.expect(event["effective_arguments"] == event["proposed_arguments"],
                            f"{event['name']} ran with {event['effective_arguments']} though no "
                            f"hook changed its arguments")


# --- the machine ------------------------------------------------------------------------------


def counterexample_path(driver: object) -> Path:
    directory = Path(os.environ.get("CTXSPEC_COUNTEREXAMPLES")
                     or Path(tempfile.gettempdir()) / "ctxspec-counterexamples")
    return directory / f"{NAME}-{type(driver).__name__}.json"


@catalogue.covers(
    "CTX-1.9", "CTX-2.2", "CTX-2.3", "CTX-2.7", "CTX-2.27", "CTX-2.29", "CTX-3.57", "CTX-4.18",
    "CTX-5.1", "CTX-5.5", "CTX-5.24", "CTX-5.30", "CTX-6.1", "CTX-6.2", "CTX-6.3", "CTX-6.4",
    "CTX-6.7", "CTX-7.13", "CTX-7.24", "CTX-10.6", "CTX-10.9", "CTX-10.17")
class DriverMachine(RuleBasedStateMachine):
    """Random Sessions on a live driver; ``factory`` builds it (the reference by default)."""

    factory: DriverFactory = ReferenceDriver
    tolerated: tuple[Tolerance, ...] = ()

    def __init__(self) -> None:
        super().__init__()
        self.driver: Driver | None = None
        self.judge = Judge({})
        self.active = False
        self.count = 0

    @initialize(document=setups())
    def configure(self, document: dict[str, Any]) -> None:
        scenario = parse_scenario({**document, "steps": NO_STEPS})
        triggers = Triggers(scenario.triggers)
        self.model, self.tools = EndlessModel(scenario, triggers), EndlessTools(scenario, triggers)
        self.document = document
        self.judge = Judge(document)
        self.driver = type(self).factory()
        driver = self.driver
        self._guarded("configure", lambda: driver.configure(scenario, Ports(
            self.model, self.tools, ScriptedHooks(scenario.hooks),
            ESTIMATORS[scenario.agent.estimator]())))
        triggers.act = lambda step: perform(driver, step)
        self._judge()

    def scenario(self) -> dict[str, Any]:
        """The document built so far, with the answers the ports handed out: it replays."""
        document = dict(self.document)
        document["steps"] = [s.model_dump(exclude_defaults=True)
                             for s in self.judge.steps] or NO_STEPS
        document["model"] = {key: _dump(self.model.script[key])
                             for key in ("business", "compaction")}
        document["tools"] = {name: _dump(queue) for name, queue in self.tools.script.items()}
        return document

    def _save(self, problem: str) -> None:
        if any(known(self.scenario(), problem) for known in type(self).tolerated):
            reject()
        path = counterexample_path(self.driver)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.scenario(), indent=1, ensure_ascii=False) + "\n",
                        "utf-8")
        raise DriverViolation(f"{problem}\nthe scenario is saved in {path}: `ctxspec replay "
                              f"{path}` shows it on the reference runtime; "
                              f"models.driver_machine.replay_checked re-judges it on a driver")

    def _guarded(self, what: str, action: Callable[[], object]) -> None:
        try:
            action()
        except Exception as error:  # the driver broke: as much a finding as a violation
            self._save(f"the driver raised {error!r} in {what}")

    def _judge(self) -> None:
        assert self.driver is not None
        trace: Trace = json.loads(json.dumps(self.driver.trace(), default=str))
        self.judge.marks.append(len(trace))
        self.judge.document = self.scenario()  # with the answers handed out so far
        try:
            self.judge.check(trace)
        except DriverViolation as violation:
            self._save(str(violation))

    def _step(self, step: StepDoc) -> None:
        driver = self.driver
        assert driver is not None
        self.judge.steps.append(step)
        self._guarded(f"step {len(self.judge.steps)}", lambda: perform(driver, step))
        self._judge()

    def _text(self, tag: str, body: str) -> str:
        self.count += 1
        return f"{tag}{self.count}: {body}"

    @precondition(lambda self: not self.active)
    @rule(body=BODIES)
    def ask(self, body: str) -> None:
        self.active = True
        self._step(StepDoc(ask=self._text("Q", body)))

    @rule(body=BODIES)
    def supplement(self, body: str) -> None:
        self._step(StepDoc(supplement=self._text("S", body)))

    @precondition(lambda self: self.active)
    @rule(stop=st.sampled_from([False, False, True]))
    def advance(self, stop: bool) -> None:
        # A stop is only worth a step before an advance (the Run then ends stopped); drawing it
        # here keeps most Runs running.
        if stop:
            self._step(StepDoc(stop=True))
        self.active = False
        self._step(StepDoc(advance=True))


def machine(factory: DriverFactory,
            tolerated: Sequence[Tolerance] = ()) -> type[DriverMachine]:
    """The machine driving drivers made by ``factory`` (its TestCase runs it under pytest),
    discarding the examples that hit a ``tolerated`` known defect."""
    name = getattr(factory, "__name__", "Driver")
    return type(f"DriverMachine[{name}]", (DriverMachine,),
                {"factory": staticmethod(factory), "tolerated": tuple(tolerated)})


def replay_checked(document: Mapping[str, Any],
                   factory: DriverFactory = ReferenceDriver) -> Trace:
    """Play a saved scenario on a driver step by step, judging the trace after every step as the
    machine does; raises DriverViolation at the first broken invariant, else returns the trace.
    The saved answers are exactly those handed out, so plain scripted ports replay them."""
    scenario = parse_scenario(document)
    triggers = Triggers(scenario.triggers)
    driver = factory()
    driver.configure(scenario, Ports(ScriptedModel(scenario.model, triggers),
                                     ScriptedTools(scenario.tools, triggers),
                                     ScriptedHooks(scenario.hooks),
                                     ESTIMATORS[scenario.agent.estimator]()))
    triggers.act = lambda step: perform(driver, step)
    judge = Judge(document)
    trace: Trace = []

    def judged() -> None:
        nonlocal trace
        trace = json.loads(json.dumps(driver.trace(), default=str))
        judge.marks.append(len(trace))
        judge.check(trace)

    judged()
    for step in scenario.steps:
        judge.steps.append(step)
        perform(driver, step)
        judged()
    return trace


__all__ = ["HEALTH", "NAME", "STEPS", "DriverMachine", "DriverViolation", "EndlessModel",
           "EndlessTools", "Judge", "counterexample_path", "machine", "replay_checked",
           "setups"]
