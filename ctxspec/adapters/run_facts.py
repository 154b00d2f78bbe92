"""What the Python adapters keep beside their framework about each Run and input, the same for
every one of them, so each adapter's ``driver`` holds only what is its framework's: the Runs
with their inputs and each input's deliveries (§5: where it was delivered, to which Run, what
it replaced; claimed when a request holds it, delivered at the first output, carried to the
next question when its Run ends without it), the client's events (§11: a Run's start, an
input received, its end), the deterministic identities they carry, and the §8 refusal of a
request over B, raised before anything is sent so the framework ends the Run."""

import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar
from uuid import NAMESPACE_URL, uuid5

from ctxspec.reference.budget import ResolvedBudget

Message = dict[str, Any]


class BudgetRefused(Exception):
    """A §8 refusal (CTX-7.17: a fixed input over B; no room for a summary; a request still
    over B after its summary), raised from where the framework hands the request over (the
    Agents SDK's input filter, ADK's scripted model, pydantic-ai's ``FunctionModel``), so the
    framework ends the Run."""

    def __init__(self, code: str, figures: dict[str, int]) -> None:
        super().__init__(f"{code}: the request needs {figures['input_tokens']} tokens; "
                         f"the input budget is {figures['input_budget']}")
        self.code, self.figures = code, figures


def refusal_figures(budget: ResolvedBudget, fixed: int, tokens: int) -> dict[str, int]:
    """The figures a §8 refusal reports: F, I and the budget they were held against (§7)."""
    return {"fixed_input_tokens": fixed, "input_tokens": tokens,
            "input_budget": budget.input_budget, "window": budget.window,
            "output_reserve": budget.output_reserve, "safety_margin": budget.safety_margin}


def root_cause(failure: BaseException, known: tuple[type[BaseException], ...]
               ) -> BaseException:
    """The first exception in the chain of one of the ``known`` kinds (a framework wraps a
    hook's, a tool's or a filter's error), else the failure itself."""
    seen: BaseException | None = failure
    while seen is not None:
        if isinstance(seen, known):
            return seen
        seen = seen.__cause__ or seen.__context__
    return failure


@dataclass
class Delivery:
    """One input's delivery record (§5)."""

    input_id: str
    delivery_id: str
    text: str
    run_no: int | None
    state: str = "pending"
    previous: str | None = None


@dataclass
class Run:
    """One Run as the adapter sees it: its number and id, its inputs, its client events'
    sequence and where it stands."""

    no: int
    run_id: str
    inputs: list[Delivery] = field(default_factory=list)
    question_id: str = ""
    started: bool = False
    status: str = "running"
    stop_requested: bool = False
    seq: int = 0


R = TypeVar("R", bound=Run)


@dataclass
class RunBook(Generic[R]):
    """The Runs of one driver, their inputs and deliveries, traced into ``events`` (the
    driver's trace) as they change."""

    framework: str
    """The framework's name in the identities (``google-adk``, ``openai-agents``, …)."""
    events: list[Message]
    runs: list[R] = field(default_factory=list)
    waiting: list[Delivery] = field(default_factory=list)
    """Supplements no Run took: they join the next question (§5)."""
    input_runs: dict[str, str] = field(default_factory=dict)
    """The Run each input was last bound to."""
    sent: list[tuple[str, str]] = field(default_factory=list)
    """Every input handed to the framework, (input_id, text), in hand-over order."""
    ids: Iterator[int] = field(default_factory=lambda: itertools.count(1))

    def new_id(self) -> str:
        """A fresh identity, the same in every run of a scenario (a report never drifts)."""
        return str(uuid5(NAMESPACE_URL, f"ctxspec:{self.framework}:{next(self.ids)}"))

    def next_no(self) -> int:
        return len(self.runs) + 1

    def open(self, run: R, question: str) -> None:
        """A question starts ``run``: the waiting supplements join it, before the question."""
        self.runs.append(run)
        self.client(run, "run_started", f"run {run.no}")
        for carried in self.waiting:
            carried.run_no = run.no
            run.inputs.append(carried)
            self.record(carried)
        self.waiting = []
        asked = self.receive(question, run)
        run.question_id = asked.input_id
        run.inputs.append(asked)

    def supplement(self, text: str) -> Delivery | None:
        """A supplement: the running Run's input, received (None: no Run to join, it waits
        for the next question, §5)."""
        run = self.active()
        if run is None:
            self.waiting.append(self.receive(text, None))
            return None
        delivery = self.receive(text, run)
        self.client(run, "input_received", "supplement")
        run.inputs.append(delivery)
        return delivery

    def receive(self, text: str, run: R | None) -> Delivery:
        delivery = Delivery(self.new_id(), self.new_id(), text, None if run is None else run.no)
        self.record(delivery)
        return delivery

    def record(self, delivery: Delivery) -> None:
        """Trace a delivery as it stands now."""
        run = None if delivery.run_no is None else self.runs[delivery.run_no - 1]
        if run is not None:
            self.input_runs[delivery.input_id] = run.run_id
        self.events.append({
            "kind": "delivery", "input_id": delivery.input_id,
            "delivery_id": delivery.delivery_id, "state": delivery.state,
            "target_run_id": None if run is None else run.run_id,
            "previous_delivery_id": delivery.previous})

    def active(self) -> R | None:
        return self.runs[-1] if self.runs and self.runs[-1].status == "running" else None

    def active_inputs(self) -> list[Delivery]:
        run = self.active()
        return [] if run is None else run.inputs

    def claim(self, view: Sequence[Message]) -> None:
        """The running Run's pending inputs a business request holds are claimed (§5)."""
        for delivery in self.active_inputs():
            if delivery.state == "pending" and any(
                    m.get("input_id") == delivery.input_id for m in view):
                delivery.state = "claimed"
                self.record(delivery)

    def first_output(self) -> None:
        """A first output arrived: the claimed inputs are delivered (§5)."""
        for delivery in self.active_inputs():
            if delivery.state == "claimed":
                delivery.state = "delivered"
                self.record(delivery)

    def annotate(self, view: Sequence[Message], facts: dict[str, dict[str, Any]]) -> None:
        """Each input of a request's view with the Run it was bound to, each tool result with
        what its structured error or denial stands for (Q210)."""
        for each in view:
            if each.get("input_id") is not None:
                each["source_run_id"] = self.input_runs.get(each["input_id"])
            if each["kind"] == "tool_result" and each.get("call_id") in facts:
                each["result_facts"] = facts[each["call_id"]]

    def end(self, run: R, status: str, code: str | None = None, message: str | None = None,
            final: str | None = None, figures: dict[str, int] | None = None) -> None:
        """The Run's one ending; an undelivered supplement waits for the next question (§5)."""
        run.status = status
        for delivery in run.inputs:
            if delivery.state in ("pending", "claimed") and delivery.input_id != run.question_id:
                successor = Delivery(delivery.input_id, self.new_id(), delivery.text, None,
                                     previous=delivery.delivery_id)
                delivery.state = "carried"
                self.record(delivery)
                self.record(successor)
                self.waiting.append(successor)
        ended: Message = {"kind": "run_ended", "run_id": run.run_id, "run_no": run.no,
                          "status": status, "error_code": code, "message": message,
                          "final_answer": final if status == "succeeded" else None}
        if figures is not None:
            ended["figures"] = figures
        self.events.append(ended)
        self.client(run, "run_ended", status, code)

    def client(self, run: R, event: str, detail: str, code: str | None = None) -> None:
        """A client event of the Run; its end names the error code it ended with."""
        run.seq += 1
        told = {"error_code": code} if event == "run_ended" else {}
        self.events.append({"kind": "client_event", "run_id": run.run_id, "run_seq": run.seq,
                            "event": event, "detail": detail, **told})
