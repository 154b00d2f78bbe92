"""Builders for sessions of effective records, and an in-memory HistorySource.

Ids are deterministic (``uuid(n)``) so hand-written expectations can name them. A
:class:`SessionBuilder` writes Runs the way a runtime would: a question and supplements are user
inputs bound to a Run, each root context gets user_ref, assistant (with tool calls) and tool
result records in context_seq order.
"""

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from uuid import UUID

from ctxspec.reference.contracts import ContextRecord, InputKind, MessageRole, PayloadRef, RunStatus
from ctxspec.reference.history import EndedRun, InputOccurrence, InputPlacement
from ctxspec.reference.view import EffectiveRecord, ToolCall, Truncation


def uuid(n: int) -> UUID:
    return UUID(int=n)


def ref(text: str) -> PayloadRef:
    data = text.encode("utf-8", "surrogatepass")
    return PayloadRef(digest="sha256:" + hashlib.sha256(data).hexdigest(), size_bytes=len(data))


@dataclass
class RunFacts:
    run_id: UUID
    run_no: int
    context_id: UUID
    records: list[EffectiveRecord] = field(default_factory=list)
    inputs: list[UUID] = field(default_factory=list)
    status: RunStatus = RunStatus.RUNNING
    final: EffectiveRecord | None = None


@dataclass
class InputFacts:
    input_id: UUID
    input_seq: int
    kind: InputKind
    text: str
    received_run_id: UUID | None
    last_delivered_run_id: UUID | None = None


class SessionBuilder:
    """A session under construction; also the HistorySource the projection reads."""

    def __init__(self) -> None:
        self._next = 1000
        self.runs: list[RunFacts] = []
        self.inputs: dict[UUID, InputFacts] = {}
        self._seq: dict[UUID, int] = {}

    def fresh(self) -> UUID:
        self._next += 1
        return uuid(self._next)

    # --- writing a session -------------------------------------------------------------

    def run(self) -> RunFacts:
        facts = RunFacts(self.fresh(), len(self.runs) + 1, self.fresh())
        self.runs.append(facts)
        return facts

    def receive(self, run: RunFacts | None, kind: InputKind, text: str) -> InputFacts:
        facts = InputFacts(self.fresh(), len(self.inputs) + 1, kind, text,
                           run.run_id if run else None)
        self.inputs[facts.input_id] = facts
        if run is not None:
            run.inputs.append(facts.input_id)
        return facts

    def _record(self, run: RunFacts, role: MessageRole, kind: str, text: str, *,
                input_id: UUID | None = None, call_id: UUID | None = None,
                context_id: UUID | None = None, **extra: object) -> EffectiveRecord:
        context = context_id or run.context_id
        seq = self._seq.get(context, 0) + 1
        self._seq[context] = seq
        record = ContextRecord(record_id=self.fresh(), context_id=context, context_seq=seq,
                               run_id=run.run_id, role=role, message_kind=kind,
                               payload_ref=ref(text), operation_id=None, call_id=call_id,
                               origin_input_id=input_id)
        effective = EffectiveRecord.model_validate({"record": record, "text": text, **extra})
        if context == run.context_id:
            run.records.append(effective)
        return effective

    def deliver(self, run: RunFacts, facts: InputFacts) -> EffectiveRecord:
        """The input's user_ref record in the run's root context, delivered there."""
        facts.last_delivered_run_id = run.run_id
        if facts.input_id not in run.inputs:
            run.inputs.append(facts.input_id)
        return self._record(run, MessageRole.USER, "user_ref", facts.text,
                            input_id=facts.input_id)

    def claim(self, run: RunFacts, facts: InputFacts) -> EffectiveRecord:
        """The input's user_ref record in a frozen request of ``run`` that never produced a first
        output: claimed there, not delivered."""
        if facts.input_id not in run.inputs:
            run.inputs.append(facts.input_id)
        return self._record(run, MessageRole.USER, "user_ref", facts.text,
                            input_id=facts.input_id)

    def ask(self, run: RunFacts, text: str) -> InputFacts:
        facts = self.receive(run, InputKind.QUESTION, text)
        self.deliver(run, facts)
        return facts

    def say(self, run: RunFacts, text: str, *, incomplete: bool = False,
            reasoning: str | None = None) -> EffectiveRecord:
        return self._record(run, MessageRole.ASSISTANT, "assistant", text, incomplete=incomplete,
                            reasoning=reasoning)

    def call(self, run: RunFacts, *names: str, text: str = "") -> list[ToolCall]:
        calls = [ToolCall(call_id=self.fresh(), action_ordinal=i, name=name, arguments="{}")
                 for i, name in enumerate(names, start=1)]
        self._record(run, MessageRole.ASSISTANT, "assistant", text, tool_calls=tuple(calls))
        return calls

    def result(self, run: RunFacts, call: ToolCall, text: str,
               truncation: Truncation | None = None) -> EffectiveRecord:
        return self._record(run, MessageRole.TOOL, "tool_result", text, call_id=call.call_id,
                            truncation=truncation)

    def private(self, run: RunFacts, context_id: UUID, text: str) -> EffectiveRecord:
        """A record of another context of the same Run (an Executor's private log)."""
        return self._record(run, MessageRole.ASSISTANT, "assistant", text, context_id=context_id)

    def end(self, run: RunFacts, status: RunStatus, final: str | None = None) -> None:
        if final is not None:
            run.final = self.say(run, final)
        run.status = status

    # --- reading it back --------------------------------------------------------------

    def ended(self, before: RunFacts) -> list[EndedRun]:
        return [EndedRun(r.run_id, r.run_no, r.status, r.final) for r in self.runs
                if r.run_no < before.run_no]

    def placement(self, input_id: UUID) -> InputPlacement:
        facts = self.inputs[input_id]
        return InputPlacement(facts.received_run_id, facts.last_delivered_run_id)

    def user_inputs(self, run: EndedRun) -> Iterable[InputOccurrence]:
        facts = next(r for r in self.runs if r.run_id == run.run_id)
        for input_id in sorted(facts.inputs, key=lambda i: self.inputs[i].input_seq):
            item = self.inputs[input_id]
            yield InputOccurrence(item.input_id, item.input_seq, item.kind, item.text,
                                  self.placement(input_id))

    def root_records(self, run: EndedRun) -> Iterable[EffectiveRecord]:
        facts = next(r for r in self.runs if r.run_id == run.run_id)
        return iter(facts.records)
