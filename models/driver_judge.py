"""The judge of the driver-level model (models/driver_machine.py): reads a driver's neutral
trace after every step and checks it against expectations derived from the scenario document
and the steps alone — never from the driver's store or internals (the invariants are listed in
driver_machine.py and docs/models.md)."""

import json
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ctxspec.conformance.crash_matrix import HOOK_DROPPED, LOST_ANSWER
from ctxspec.conformance.phases import REFERENCE_COMMITS
from ctxspec.conformance.scenario import StepDoc
from ctxspec.models.driver_rules import (
    Notes,
    budget_of,
    check_arithmetic,
    check_counts,
    check_hook_changes,
    check_no_episode_after_stop,
    check_post_call_chain,
)
from ctxspec.models.driver_twin import inside_a_request

Trace = list[dict[str, Any]]
OUTPUT_KINDS = ("text", "partial")
"""Answers whose first output delivers the inputs the request claimed (§5)."""


PHASE_OF = {commit: phase for phase, commit in REFERENCE_COMMITS.items()}
"""The design's phase of each reference commit (the crash tables are keyed by phase)."""


class DriverViolation(AssertionError):
    """An invariant did not hold on the driver's trace; the message names it, the step, and the
    file the scenario was saved to."""


@dataclass(frozen=True)
class Input:
    seq: int
    kind: str
    text: str
    run: int | None
    """The Run it was received into (None: it waits for the next question)."""
    session: int = 1
    """The Session it was sent to (1: the first; a ``new_session`` step opens the next)."""


@dataclass
class Judge:
    """Judges a driver's trace after every step, from the scenario document and the steps alone.

    ``marks[k]`` is the trace length after the k-th step (``marks[0]``: after configure). A
    step a trigger performed while another step ran is listed just before that step, with its
    own mark (:meth:`triggered_step`)."""

    document: Mapping[str, Any]
    steps: list[StepDoc] = field(default_factory=list)
    marks: list[int] = field(default_factory=list)
    previous: Trace = field(default_factory=list)
    triggered: set[int] = field(default_factory=set)
    """Indexes in ``steps`` of the steps triggers performed."""
    notes: Notes = field(default_factory=Notes)
    """What was noted without failing (driver_rules.py, issue #34)."""

    def triggered_step(self, step: StepDoc, length: int) -> None:
        """A trigger performed ``step`` while the last step ran, and the trace then had
        ``length`` events: its input was received before whatever that step does next."""
        self.steps.insert(len(self.steps) - 1, step)
        self.triggered.add(len(self.steps) - 2)  # earlier ones stay before it
        self.marks.append(length)

    def performed(self) -> list[StepDoc]:
        """The steps as the scenario lists them (without those triggers performed)."""
        return [s for i, s in enumerate(self.steps) if i not in self.triggered]

    def fail(self, message: str) -> None:
        raise DriverViolation(message)

    def expect(self, condition: bool, message: str) -> None:
        if not condition:
            self.fail(message)

    # What the steps mean, in the design's terms.

    def shadow(self) -> tuple[list[Input], list[int | None], dict[int, int]]:
        """The inputs (receive order), the Run active during each step, the step of each Run's
        first stop. Runs and inputs are numbered over the whole scenario; a Session numbers its
        own from 1 (:meth:`offsets` converts)."""
        inputs: list[Input] = []
        active: int | None = None
        runs = 0
        session = 1
        during: list[int | None] = []
        stops: dict[int, int] = {}
        for index, step in enumerate(self.steps):
            if step.ask is not None:
                runs += 1
                active = runs
                inputs.append(Input(len(inputs) + 1, "question", step.ask, active, session))
            elif step.supplement is not None:
                inputs.append(Input(len(inputs) + 1, "supplement", step.supplement, active,
                                    session))
            elif step.stop and active is not None:
                # A trigger's stop arrives while a request or a tool is in flight: it still
                # decides the ending — the operation winds up, nothing new starts, the Run
                # ends stopped (§11, Q76).
                stops.setdefault(active, index)
            elif step.new_session:
                session += 1
            during.append(active)
            if step.advance:
                active = None
        return inputs, during, stops

    def offsets(self) -> list[tuple[int, int]]:
        """Per Session (index 0: the first), the Runs and inputs of the Sessions before it."""
        found = [(0, 0)]
        runs = inputs = 0
        for step in self.steps:
            runs += step.ask is not None
            inputs += step.ask is not None or step.supplement is not None
            if step.new_session:
                found.append((runs, inputs))
        return found

    def scenario_wide(self, trace: Trace) -> Trace:
        """The trace with each Session's run_no and input_cutoff numbered over the scenario, as
        :meth:`shadow` numbers them."""
        offsets = self.offsets()
        session = 0
        wide: Trace = []
        for event in trace:
            if event["kind"] == "session_opened":
                session = min(session + 1, len(offsets) - 1)
            runs, inputs = offsets[session]
            if event["kind"] == "run_ended" and runs:
                event = {**event, "run_no": event["run_no"] + runs}
            elif event["kind"] == "model_request" and inputs \
                    and isinstance(event.get("input_cutoff"), int):
                event = {**event, "input_cutoff": event["input_cutoff"] + inputs}
            wide.append(event)
        return wide

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

    def _check(self, raw: Trace) -> None:
        self.expect(raw[:len(self.previous)] == self.previous,
                    "the trace changed retroactively: the events seen before this step are no "
                    "longer a prefix of the trace")
        trace = self.scenario_wide(raw)
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
        self._protected(requests, inputs, during, answers, self._lost_first_output(trace))
        self._orderings(trace, requests, inputs, during)
        self._tools(trace, answers)
        self._rules(trace, requests, during, stops)

    def _rules(self, trace: Trace, requests: list[tuple[int, dict[str, Any]]],
               during: list[int | None], stops: dict[int, int]) -> None:
        """§7 and §8's arithmetic, per-Run counts, no episode after a stop, the hook rules
        (models/driver_rules.py)."""
        agent, hooks = self.document["agent"], self.document.get("hooks", ())

        def run_of(position: int) -> int | None:
            step = self.step_of(position)
            return during[step] if step >= 0 else None
        check_arithmetic(self.expect, budget_of(agent), trace, requests)
        check_counts(self.expect, agent, trace, run_of, self.notes)
        check_no_episode_after_stop(self.expect, trace, self.step_of, during, stops)
        check_hook_changes(self.expect, hooks, trace)
        check_post_call_chain(self.expect, hooks, trace, self._crash_at() in HOOK_DROPPED,
                              any("write" in t["do"] for t in self.document.get("triggers", ())))

    def _crash_at(self) -> tuple[str, str] | None:
        """The planned crash's (phase, moment), a refused commit counted as dying before it (it
        is rolled back whole)."""
        crash = self.document.get("crash")
        if crash is None:
            return None
        when = crash.get("when", "after")
        return (crash.get("phase") or PHASE_OF[crash["commit"]],
                "before" if when == "fails" else when)

    def _lost_first_output(self, trace: Trace) -> int | None:
        """The position of the request whose first output was never persisted: the one in
        flight when the process died before (or the store refused) the first-output commit.
        §5 "delivered 以首个有效模型输出的内部接收证据已持久化为准": it delivers nothing; asked
        again after the takeover, the new asking does."""
        restart = next((i for i, e in enumerate(trace) if e["kind"] == "restarted"), None)
        if restart is None or self._crash_at() != ("first_output", "before"):
            return None
        return next((i for i in range(restart - 1, -1, -1)
                     if trace[i]["kind"] == "model_request"), None)

    def _restarts(self, trace: Trace) -> None:
        # A crash plan names a phase of the design; the driver reports its own commit and the
        # phase it stands for (conformance/phases.py).
        restarts = [(e.get("phase") or PHASE_OF.get(e["commit"]), e["occurrence"], e["when"])
                    for e in trace if e["kind"] == "restarted"]
        crash = self.document.get("crash")
        planned = [] if crash is None else [(crash.get("phase") or PHASE_OF[crash["commit"]],
                                             crash.get("occurrence", 1),
                                             crash.get("when", "after"))]
        self.expect(restarts in ([], planned),
                    f"restarts {restarts}, but the plan was {planned or 'no crash'}")

    def _no_fetch_twice(self, trace: Trace, requests: list[tuple[int, dict[str, Any]]]) -> None:
        asked = Counter((r["purpose_key"], r["attempt"]) for _, r in requests)
        again = {key: n for key, n in asked.items() if n > 1}
        crash = self.document.get("crash")
        restart = next((i for i, e in enumerate(trace) if e["kind"] == "restarted"), None)
        # A commit the store refused is rolled back whole: as if the process died before it.
        when = None if crash is None else crash.get("when", "after")
        phase = None if crash is None else crash.get("phase") or PHASE_OF.get(crash["commit"])
        lost = restart is not None and crash is not None and ((
            phase, "before" if when == "fails" else when) in LOST_ANSWER
            or inside_a_request(self.document, phase))
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
        budget = budget_of(agent)  # with §7's defaults where the Agent sets none
        window, reserve, margin = budget.window, budget.reserve, budget.margin
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
        # One token per character (chars), or per UTF-8 byte plus overheads (bytes, never fewer
        # than characters): the estimate covers at least the text the request shows. The
        # content estimator counts the scenario's own text only (docs/scenarios.md).
        if agent.get("estimator", "bytes") in ("chars", "bytes"):
            shown = sum(len(m["text"]) for m in request["view"]["messages"])
            self.expect(estimated >= shown, f"I = {estimated} is less than the {shown} "
                                            f"characters the request shows")

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
                   during: list[int | None], answers: Mapping[tuple[str, int], dict[str, Any]],
                   lost: int | None = None) -> None:
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
        received = self._received()
        waiting: list[Input] = []
        """Supplements carried from a Run that never delivered them, waiting for a question."""
        sessions = {i.run: i.session for i in inputs if i.kind == "question"}
        for run in sorted(questions):
            question = questions[run]
            earlier = questions.get(run - 1, 0)
            session = sessions[run]
            # Waiting supplements bind to the next question of their own Session only.
            bound = sorted([*(i for i in waiting if i.session == session),
                            *(i for i in inputs if i.kind == "supplement" and (
                                i.run == run or (i.run is None and i.session == session
                                                 and earlier < i.seq < question)))],
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
                # §5: delivered on the committed first-output receipt, so not by the asking
                # whose receipt the crash lost (``lost``).
                if position != lost and any(kind in answer for kind in OUTPUT_KINDS):
                    delivered.update(i.seq for i in bound if i.seq <= cutoff)
            waiting = [i for i in bound if i.seq not in delivered] if run in ended else []

    def _received(self) -> list[int]:
        """Inputs received once each step was performed (index 0: before any)."""
        received = [0]
        for performed in self.steps:
            received.append(received[-1] + (performed.ask is not None
                                             or performed.supplement is not None))
        return received

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
        arguments = [c.get("arguments", {}) for a in answers.values()
                     for c in a.get("tool_calls", ())]
        hooked = any(h["point"] == "tool.pre_call" for h in self.document.get("hooks", ()))
        for event in executed:
            self.expect(event["proposed_arguments"] in arguments,
                        f"{event['name']} was proposed with {event['proposed_arguments']}, which "
                        f"no answer proposed")
            if not hooked:
                self.expect(event["effective_arguments"] == event["proposed_arguments"],
                            f"{event['name']} ran with {event['effective_arguments']} though no "
                            f"hook changed its arguments")


__all__ = ["OUTPUT_KINDS", "DriverViolation", "Input", "Judge", "Trace"]
