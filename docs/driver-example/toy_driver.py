"""A toy agent runtime and its ctxspec Driver: the example of docs/implementing-a-driver.md.

The runtime is deliberately small and written apart from the reference: one root role, a model
loop with tools and retries, questions and supplements with their deliveries (§5), a history
projection of the recent Runs (§4), fragments of broken streams (§11), every request measured
with the injected estimator. It has no compaction, no hooks, no stop, no crash recovery, no
Executors — so it declares only ``root_loop``, ``estimator_injection`` and ``triggers``, and
the suite reports every case that needs more as ``unsupported``. Four cases it runs it fails,
for what it really lacks: bounded previews of large results (§6: ROW-08, S6-PREVIEW-STAYS and
the two cases reading what is sent and read back).

Run it: ``PYTHONPATH=docs/driver-example ctxspec conformance --driver toy_driver:ToyDriver``.
"""

import hashlib
import json
import math
import uuid
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from ctxspec.conformance.driver import Ports
from ctxspec.conformance.scenario import Scenario
from ctxspec.reference.ports import (
    Complete,
    ContextLengthExceeded,
    ModelCall,
    PartialThenFailed,
)
from ctxspec.reference.tokens import EstimationRequest, PromptMessage

Message = dict[str, Any]


@dataclass
class Delivery:
    input_id: str
    delivery_id: str
    run_no: int | None
    state: str = "pending"
    previous: str | None = None


@dataclass
class Run:
    no: int
    run_id: str
    records: list[Message] = field(default_factory=list)
    inputs: list[Delivery] = field(default_factory=list)
    """This Run's deliveries: carried supplements first, then its question and supplements."""
    question_id: str = ""
    loops: int = 0
    seq: int = 0
    status: str = "running"
    final: str | None = None
    ticks: int = 0
    """Model calls and tool runs so far: the Run's deadline counts them (§8)."""


class ToyDriver:
    capabilities: frozenset[str] = frozenset({"root_loop", "estimator_injection", "triggers"})
    """A root loop; every request measured with the injected estimator; steps arriving while
    a tool runs are taken in (the harness calls them through the ports)."""

    def configure(self, scenario: Scenario, ports: Ports) -> None:
        agent = scenario.agent
        window = agent.window
        reserve = agent.output_reserve or min(agent.max_output or 4096, window // 4)
        margin = agent.safety_margin or max(256, math.ceil(window / 100))
        if window - reserve - margin <= 0:
            raise ValueError(f"BUDGET_CONFIGURATION_INVALID: window {window} leaves no input "
                             f"budget after output reserve {reserve} and safety margin {margin}")
        ratio = Fraction(agent.trigger_ratio)
        if not 0 < ratio < 1:
            raise ValueError(f"BUDGET_CONFIGURATION_INVALID: trigger ratio {ratio} is not "
                             f"between 0 and 1")
        self.trigger = math.floor((window - reserve - margin) * ratio)
        self.agent, self.ports = agent, ports
        self.window, self.reserve, self.margin = window, reserve, margin
        self.runs: list[Run] = []
        self.texts: dict[str, str] = {}
        self.waiting: list[Delivery] = []
        """Carried supplements waiting for the next question."""
        self.events: list[Message] = []
        self.ordinal = 0

    # --- the Driver's stimuli -------------------------------------------------------------

    def ask(self, text: str) -> None:
        run = Run(len(self.runs) + 1, self._id())
        self.runs.append(run)
        self._client(run, "run_started", f"run {run.no}")
        for carried in self.waiting:  # bound to this question, in receive order, before it
            carried.run_no = run.no
            run.inputs.append(carried)
            self._delivery(carried)
        self.waiting = []
        question = self._receive(text, run)
        run.question_id = question.input_id
        run.inputs.append(question)
        self._take_inputs(run)  # the question is in the Run's context from the start

    def supplement(self, text: str) -> None:
        run = self._active()
        if run is not None:
            run.inputs.append(self._receive(text, run))
            self._client(run, "input_received", "supplement")  # stored, not "understood"
        else:  # §5: no Run to join: it waits, and the next question takes it
            self.waiting.append(self._receive(text, None))

    def stop(self) -> None:
        raise NotImplementedError("the toy runtime has no stop")

    def advance(self) -> None:
        run = self._active()
        while run is not None and run.status == "running":
            self._loop(run)

    def trace(self) -> list[Message]:
        return self.events

    # --- the loop ---------------------------------------------------------------------------

    def _out_of_time(self, run: Run) -> bool:
        deadline = self.agent.run_deadline
        if deadline is not None and run.ticks >= deadline:
            self._end(run, "timed_out")
            return True
        return False

    def _loop(self, run: Run) -> None:
        if self._out_of_time(run):
            return
        if run.loops == self.agent.loop_limit:
            self._end(run, "loop_exhausted")
            return
        run.loops += 1
        self._take_inputs(run)
        view = self._view(run)
        claimed = [d for d in run.inputs if d.state == "pending"]
        for delivery in claimed:
            delivery.state = "claimed"
            self._delivery(delivery)
        self.ordinal += 1
        key = f"model:{run.no}:{self.ordinal}"
        tokens = self.ports.estimator.estimate(EstimationRequest(messages=tuple(
            PromptMessage(role=m["role"], text=m["text"]) for m in view))).tokens
        decision = self._evaluate(run, view, tokens)
        if decision is None:
            return
        delivered = False
        fragments: list[str] = []
        for attempt in range(1, self.agent.model_attempts + 1):
            if attempt > 1 and self._out_of_time(run):  # a retry is a call under the deadline
                return
            run.ticks += 1
            self._event("model_request", purpose="business", role="root", purpose_key=key,
                        attempt=attempt, view={"messages": view},
                        estimated_input_tokens=tokens, max_output_tokens=self.reserve,
                        window=self.window, output_reserve=self.reserve,
                        safety_margin=self.margin,
                        input_budget=self.window - self.reserve - self.margin,
                        trigger_threshold=self.trigger,
                        compaction=decision, snapshot_id=None,
                        view_hash=hashlib.sha256(json.dumps(view).encode()).hexdigest())
            outcome = self.ports.model.call(ModelCall(
                "business", uuid.uuid4(), key, attempt,
                tuple(PromptMessage(role=m["role"], text=m["text"]) for m in view), (),
                self.reserve, self.ordinal))
            if isinstance(outcome, ContextLengthExceeded):
                self._end(run, "failed", "CONTEXT_LENGTH_EXCEEDED",
                          f"the provider refused a request of {tokens} estimated input tokens; "
                          f"the window is {self.window}")
                return
            if isinstance(outcome, Complete | PartialThenFailed) and not delivered:
                delivered = True
                for delivery in claimed:
                    delivery.state = "delivered"
                    self._delivery(delivery)
            if isinstance(outcome, Complete):  # a good retry: the fragments stay out (§12 row 12)
                self._decide(run, outcome)
                return
            if isinstance(outcome, PartialThenFailed):
                fragments.append(outcome.fragment)
        for fragment in fragments:  # kept, marked, only once the model finally failed
            run.records.append({**_message(
                "system", "fragment", f"(cut off, not a decision) {fragment}"), "body": fragment})
        self._end(run, "failed", "MODEL_FAILED", "the model failed")

    def _decide(self, run: Run, outcome: Complete) -> None:
        calls: list[Message] = [
            {"call_id": self._id(), "action_ordinal": n,  # our own id, never the provider's
             "name": c.name, "arguments": json.dumps(dict(c.arguments), sort_keys=True)}
            for n, c in enumerate(outcome.tool_calls, 1)]
        malformed = {call["call_id"] for call, proposed in zip(calls, outcome.tool_calls,
                                                                strict=True)
                     if proposed.malformed_arguments is not None}
        run.records.append({**_message("assistant", "assistant", outcome.text),
                            "tool_calls": calls})
        if not calls:
            run.final = outcome.text
            self._end(run, "succeeded")
            return
        allowed = {tool.name for tool in self.agent.tools}
        for number, call in enumerate(calls, start=1):
            if call["name"] not in allowed:  # §6, §11: an error result, never a run
                run.records.append(_error("TOOL_NOT_AVAILABLE", f"{call['name']} is not a "
                                          "tool of this role", call["call_id"]))
                continue
            arguments = json.loads(call["arguments"])
            schema = next(t.schema_ for t in self.agent.tools if t.name == call["name"])
            wrong = ["the arguments are not a JSON object"] if call["call_id"] in malformed \
                else _argument_errors(schema, arguments)
            if wrong:  # §11: a format error goes back to the model, never to the tool
                run.records.append(_error("INVALID_ARGUMENTS", "; ".join(wrong),
                                          call["call_id"]))
                continue
            run.ticks += 1
            result = self.ports.tools.run(call["name"], arguments, number)
            self._event("tool_executed", call_id=call["call_id"], name=call["name"],
                        effective_arguments=arguments, proposed_arguments=arguments,
                        outcome="error" if result.error else "ok")
            run.records.append(_error("TOOL_ERROR", result.error, call["call_id"])
                               if result.error else
                               {**_message("tool", "tool_result", result.text),
                                "call_id": call["call_id"]})

    def _end(self, run: Run, status: str, code: str | None = None,
             message: str | None = None) -> None:
        run.status = status
        for delivery in run.inputs:  # §5: an undelivered supplement waits for the next question
            if delivery.state in ("pending", "claimed") and delivery.input_id != run.question_id:
                successor = Delivery(delivery.input_id, self._id(), None,
                                     previous=delivery.delivery_id)
                delivery.state = "carried"
                self._delivery(delivery)
                self._delivery(successor)
                self.waiting.append(successor)
        self._event("run_ended", run_id=run.run_id, run_no=run.no, status=status,
                    error_code=code, message=message)
        self._client(run, "run_ended", status)

    # --- the view: §4 history projection, then the current Run -------------------------------

    def _evaluate(self, run: Run, view: list[Message], tokens: int) -> str | None:
        """§8 before a request leaves: below the trigger it goes; at or above it with nothing
        compressible it goes if it fits B, else the Run fails. The toy cannot compact, so
        material above the trigger is beyond it (it declares no compaction)."""
        if tokens < self.trigger:
            return "below_trigger"
        current = {d.input_id for d in run.inputs}
        if any(m["kind"] != "system_prompt" and m.get("input_id") not in current for m in view):
            raise NotImplementedError("the toy cannot compact")
        budget = self.window - self.reserve - self.margin
        if tokens > budget:
            self._end(run, "failed", "CONTEXT_PROTECTED_INPUT_TOO_LARGE",
                      f"the fixed input needs {tokens} input tokens; the input budget is "
                      f"{budget}")
            return None
        return "no_compressible_material"

    def _view(self, run: Run) -> list[Message]:
        view = [_message("system", "system_prompt", self.agent.system_prompt)]
        ended = [r for r in self.runs if r.no < run.no]
        recent_n = self.agent.recent_runs
        recent = ended[-recent_n:] if recent_n else []
        current = {d.input_id for d in run.inputs}
        for old in ended[:len(ended) - len(recent)]:
            for delivery in old.inputs:
                view.append(self._input(delivery.input_id, current))
            if old.final is not None:
                view.append(_message("assistant", "assistant", old.final))
            view.append(_outcome(old))
        for past in recent:
            view += [self._input(m["input_id"], current) if m["kind"] == "user_ref" else m
                     for m in past.records]
            view.append(_outcome(past))
        return view + run.records

    def _input(self, input_id: str, current: set[str]) -> Message:
        if input_id in current:  # shown once, where the current request has it
            return {**_message("system", "marker", "(this input is quoted further down)"),
                    "input_id": input_id}
        return {**_message("user", "user_ref", self.texts[input_id]), "input_id": input_id}

    # --- inputs and deliveries --------------------------------------------------------------

    def _receive(self, text: str, run: Run | None) -> Delivery:
        input_id = self._id()
        self.texts[input_id] = text
        delivery = Delivery(input_id, self._id(), None if run is None else run.no)
        self._delivery(delivery)
        return delivery

    def _take_inputs(self, run: Run) -> None:
        """Inputs not yet in the Run's context join it, in receive order."""
        present = {m.get("input_id") for m in run.records}
        for delivery in run.inputs:
            if delivery.input_id not in present:
                run.records.append({**_message("user", "user_ref",
                                               self.texts[delivery.input_id]),
                                    "input_id": delivery.input_id})

    def _delivery(self, delivery: Delivery) -> None:
        run = None if delivery.run_no is None else self.runs[delivery.run_no - 1]
        self._event("delivery", input_id=delivery.input_id, delivery_id=delivery.delivery_id,
                    state=delivery.state, target_run_id=None if run is None else run.run_id,
                    previous_delivery_id=delivery.previous)

    def _active(self) -> Run | None:
        return self.runs[-1] if self.runs and self.runs[-1].status == "running" else None

    def _client(self, run: Run, event: str, detail: str) -> None:
        """A lifecycle event for the client (§2: run_seq, never model text)."""
        run.seq += 1
        self._event("client_event", run_id=run.run_id, run_seq=run.seq, event=event,
                    detail=detail)

    def _event(self, kind: str, **fields: Any) -> None:
        self.events.append({**fields, "kind": kind})

    @staticmethod
    def _id() -> str:
        return str(uuid.uuid4())


def _error(code: str, detail: str, call_id: str) -> Message:
    """A call's structured error: the toy's own JSON text, and the facts it stands for as
    ``result_facts``, which is what cases read (docs/implementing-a-driver.md §3)."""
    text = json.dumps({"status": "error", "error": {"code": code, "detail": detail}})
    return {**_message("tool", "tool_result", text), "call_id": call_id,
            "result_facts": {"status": "error", "code": code}}


def _message(role: str, kind: str, text: str) -> Message:
    return {"role": role, "kind": kind, "text": text, "tool_calls": []}


def _outcome(run: Run) -> Message:
    """The toy's own wording; cases read the fields (docs/implementing-a-driver.md §3)."""
    ending = "" if run.final is not None else ", without a final answer"
    return {**_message("system", "outcome", f"Run {run.no} finished: {run.status}{ending}."),
            "run_no": run.no, "status": run.status, "final_result": run.final is not None}


_KINDS: dict[str, type | tuple[type, ...]] = {
    "string": str, "integer": int, "number": (int, float), "boolean": bool, "array": list,
    "object": dict}


def _argument_errors(schema: dict[str, Any], arguments: dict[str, Any]) -> list[str]:
    """The call against its tool's declared schema: required names and declared types."""
    errors = [f"{name} is required" for name in schema.get("required", [])
              if name not in arguments]
    for name, value in arguments.items():
        kind = schema.get("properties", {}).get(name, {}).get("type")
        expected = _KINDS.get(kind) if isinstance(kind, str) else None
        if expected is not None and (not isinstance(value, expected)
                                     or (isinstance(value, bool) and kind != "boolean")):
            errors.append(f"{name} must be {kind}")
    return errors
