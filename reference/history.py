"""History projection: by default the last two ended questions (§4), with the input_id
de-duplication of §5.

The algorithm is the design's, in its order (CTX-4.4, CTX-4.8)::

    ended = runs.list_ended_before(current_run, order="run_no")
    recent = ended[-recent_n:] if recent_n else []
    older = ended[:-recent_n] if recent_n else ended
    for run in older:
        append_all_user_inputs(run)         # the question and every supplement
        append_final_or_incomplete(run)     # final result + explicit terminal status
    for run in recent:
        append_root_effective_context(run)  # root process and committed modifications
        append_terminal_marker(run)
    append_current_role_effective_context()
    deduplicate_input_ids()

Selection looks only at run_no and "ended" (CTX-4.3, CTX-4.12, CTX-4.13): failed, stopped,
timed-out and loop-exhausted Runs are ended too, and a taken-over Run is the same Run
(CTX-4.20). Recent Runs contribute the root role's effective records, repaired by §6 (CTX-4.7,
CTX-4.9, CTX-4.10); an Executor's private log lives in its own context and never enters
(CTX-4.11). A Run without a final result gets a system fact, never an assistant answer
(CTX-4.14).

The projection reads through :class:`HistorySource`, a port the store implements with paged
queries (CTX-4.23): it streams Run by Run and record by record, holding only the view it
produces, one open batch, and the set of input ids already shown.
"""

import itertools
import operator
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from operator import attrgetter
from typing import Final, Protocol, overload
from uuid import UUID

from ctxspec.reference.contracts import (
    TERMINAL_RUN_STATUSES,
    InputKind,
    MessageRole,
    OperationState,
    RunStatus,
)
from ctxspec.reference.grown import Grown, GrownSet, grown
from ctxspec.reference.protocol import NO_STATES, ProtocolRepair, UnsettledBatch
from ctxspec.reference.segments import Segment, mark
from ctxspec.reference.view import EffectiveRecord, ModelView, ViewKind, ViewMessage

_USER_REF = ViewKind.USER_REF
"""As a module name: an enum member read through its class costs about 0.14 µs on Python 3.11,
and the projection asks every message of the recent Runs."""

_RUN_NO: Final = attrgetter("run_no")
_RUN_ID: Final = attrgetter("run_id")
_BELOW: Final = operator.lt

DEFAULT_RECENT_RUNS = 2
"""context.recent_runs when the Agent's release does not set it (CTX-4.1)."""


@dataclass(frozen=True)
class EndedRun:
    """An ended Run of the Session, as the projection needs it."""

    run_id: UUID
    run_no: int
    status: RunStatus
    final_answer: EffectiveRecord | None = None
    """The Run's final result (effective), or the incomplete output it ended with, or None."""

    def __post_init__(self) -> None:
        if self.status not in TERMINAL_RUN_STATUSES:
            raise ValueError(f"run {self.run_no} is {self.status.value}, not ended")


@dataclass(frozen=True)
class InputPlacement:
    """Where an input's body belongs (§5): the Run it was last delivered to, else the Run that
    was active when it was received (its receive position)."""

    received_run_id: UUID | None
    last_delivered_run_id: UUID | None

    @property
    def body_run_id(self) -> UUID | None:
        return self.last_delivered_run_id or self.received_run_id


@dataclass(frozen=True)
class InputOccurrence:
    """A user input listed under a Run: its original text (never a hook's edit, CTX-3 and §5)."""

    input_id: UUID
    input_seq: int
    kind: InputKind
    text: str
    placement: InputPlacement


class HistorySource(Protocol):
    """What the projection reads; a store answers with paged queries."""

    def user_inputs(self, run: EndedRun) -> Iterable[InputOccurrence]:
        """Every input received during, bound to or carried to ``run``, in receive order."""
        ...

    def root_records(self, run: EndedRun) -> Iterable[EffectiveRecord]:
        """The root role's effective records of ``run`` in context_seq order."""
        ...

    def placement(self, input_id: UUID) -> InputPlacement:
        ...


def select_history(ended: Sequence[EndedRun],
                   recent_n: int) -> tuple[Sequence[EndedRun], Sequence[EndedRun]]:
    """(older, recent): exactly the design's slicing of the Runs ended before the current one.
    Runs given as :class:`EndedRuns` were checked as each joined them, and their older part
    is a prefix of them (O(1)): a request costs what it adds (issue #35, Q530).

    CTX-4.1, CTX-4.3, CTX-4.4, CTX-4.13
    """
    if recent_n < 0:
        raise ValueError(f"context.recent_runs must be >= 0, got {recent_n}")
    if isinstance(ended, EndedRuns):
        cut = max(len(ended) - recent_n, 0)
        return ended.prefix(cut), ended[cut:]
    numbers = list(map(_RUN_NO, ended))  # C loops: a request of a 5,000-Run Session asks
    if not all(map(_BELOW, numbers, itertools.islice(numbers, 1, None))):
        raise ValueError(f"ended runs must be in strictly increasing run_no order: {numbers}")
    recent = ended[-recent_n:] if recent_n else []
    older = ended[:-recent_n] if recent_n else ended
    return older, recent


class EndedRuns(Sequence[EndedRun]):
    """Ended Runs in strictly increasing run_no order, checked as each joins (so a request
    need not check every Run again), sharing their list and their run ids' with the value
    they grew from (:class:`~ctxspec.reference.grown.Grown`): the older Runs of two requests
    compare in O(1) when one is a prefix of the other's lineage (issue #35, Q530)."""

    __slots__ = ("ids", "runs")

    def __init__(self, runs: Iterable[EndedRun] = ()) -> None:
        self.runs: Grown[EndedRun] = Grown()
        self.ids: Grown[UUID] = Grown()
        """Their run ids, in the same order."""
        for run in runs:
            self._append(run)

    def _append(self, run: EndedRun) -> None:
        if self.runs and not self.runs[-1].run_no < run.run_no:
            numbers = [*map(_RUN_NO, self.runs), run.run_no]
            raise ValueError(f"ended runs must be in strictly increasing run_no order: {numbers}")
        self.runs, self.ids = self.runs.plus(run), self.ids.plus(run.run_id)

    def plus(self, run: EndedRun) -> "EndedRuns":
        """These Runs followed by ``run`` (ended after them)."""
        longer = self.prefix(len(self))
        longer._append(run)
        return longer

    def prefix(self, length: int) -> "EndedRuns":
        """The first ``length`` Runs, sharing the lineage: O(1)."""
        part = EndedRuns.__new__(EndedRuns)
        part.runs, part.ids = self.runs.prefix(length), self.ids.prefix(length)
        return part

    def __len__(self) -> int:
        return len(self.runs)

    @overload
    def __getitem__(self, at: int) -> EndedRun: ...

    @overload
    def __getitem__(self, at: slice) -> tuple[EndedRun, ...]: ...

    def __getitem__(self, at: int | slice) -> EndedRun | tuple[EndedRun, ...]:
        return self.runs[at]

    def __iter__(self) -> Iterator[EndedRun]:
        return iter(self.runs)

    def __repr__(self) -> str:
        return f"EndedRuns({tuple(self.runs)!r})"


def run_ids(runs: Sequence[EndedRun]) -> Sequence[UUID]:
    """The run ids of ``runs``, in order (those of :class:`EndedRuns` as they keep them)."""
    return runs.ids if isinstance(runs, EndedRuns) else tuple(map(_RUN_ID, runs))


def first_runs(runs: Sequence[EndedRun], length: int) -> Sequence[EndedRun]:
    """The first ``length`` of ``runs`` (of :class:`EndedRuns` in O(1))."""
    return runs.prefix(length) if isinstance(runs, EndedRuns) else runs[:length]


def terminal_marker(run: EndedRun) -> ViewMessage:
    """The explicit end state of a Run, a system fact; it never pretends to be an answer.
    Made once per EndedRun value (a function of its fields), so a Run kept ended by its
    repository is not marked again on every request (Q321)."""
    kept: ViewMessage | None = run.__dict__.get(_MARKER_MEMO)
    if kept is None:
        kept = run.__dict__[_MARKER_MEMO] = _marker(run)
    return kept


_MARKER_MEMO: Final = "_terminal_marker"
_INPUT_MEMO: Final = "_input_message"


def _marker(run: EndedRun) -> ViewMessage:
    final = not (run.final_answer is None or run.final_answer.incomplete)
    if final:
        text = f"[run {run.run_no} ended: {run.status.value}]"
    else:
        text = f"[run {run.run_no} ended: {run.status.value}; no final result]"
    return ViewMessage(role=MessageRole.SYSTEM, kind=ViewKind.OUTCOME, text=text,
                       source_run_id=run.run_id, run_no=run.run_no, status=run.status.value,
                       final_result=final)


class _Deduplicator:
    """§5 de-duplication by input_id, decided as the stream passes (CTX-5.24 to CTX-5.26).

    A current protected input is shown once, in the current context; elsewhere an input's body
    is shown at its last delivered position, else at its receive position; every other place
    keeps a marker that says where the body is.
    """

    def __init__(self, protected: Collection[UUID], current_run_id: UUID,
                 shown_before: Collection[UUID] = frozenset()) -> None:
        self._protected = protected
        self._current_run_id = current_run_id
        self._shown: dict[UUID, None] = {}  # a set in the order shown
        self._shown_before = shown_before
        """The inputs whose body an older part already shows (:class:`OlderPart`)."""

    def shown(self, input_id: UUID) -> bool:
        return input_id in self._shown or input_id in self._shown_before

    def shown_here(self) -> Iterable[UUID]:
        return self._shown

    def place(self, message: ViewMessage, placement: InputPlacement) -> ViewMessage:
        input_id = message.input_id
        if input_id is None:
            raise ValueError("only a message that carries an input is de-duplicated")
        at = message.source_run_id
        if at == self._current_run_id:
            body_here = not self.shown(input_id)
            where = "earlier in this request"
        elif input_id in self._protected:
            body_here, where = False, "in the current request"
        else:
            body_here = at == placement.body_run_id and not self.shown(input_id)
            where = f"in run {placement.body_run_id}"
        if body_here:
            self._shown[input_id] = None
            carried_from = placement.received_run_id
            if carried_from is not None and carried_from != at:
                return replace(message, carried_from_run_id=carried_from)
            return message
        return ViewMessage(role=MessageRole.SYSTEM, kind=ViewKind.MARKER,
                           text=f"[user input {input_id}: text shown {where}]",
                           input_id=input_id, record_id=message.record_id,
                           source_run_id=at)


def project_history(*, ended_runs: Sequence[EndedRun], recent_runs: int,
                    source: HistorySource, current_run_id: UUID,
                    current_records: Iterable[EffectiveRecord],
                    protected_input_ids: Collection[UUID],
                    call_states: Mapping[UUID, OperationState] = NO_STATES,
                    older_part: "OlderPart | None" = None) -> ModelView | UnsettledBatch:
    """The history projection of the current role's next model request (§4, §5, §6).

    ``ended_runs`` are the Session's Runs ended before the current one, by run_no;
    ``current_records`` the current role's effective records; ``protected_input_ids`` the
    current request's protected inputs (they win de-duplication); ``older_part``, when it is
    the older part of this request (:meth:`OlderPart.shows`), the older Runs' part as kept
    (:func:`extend_older`), else it is projected here. Answers
    :class:`UnsettledBatch` when the current batch is not settled (CTX-6.7).

    CTX-4.2, CTX-4.4 to CTX-4.16, CTX-4.20, CTX-4.23, CTX-5.24 to CTX-5.26, CTX-6.1 to
    CTX-6.17
    """
    older, recent = select_history(ended_runs, recent_runs)
    part = older_part if older_part is not None and older_part.shows(
        older, protected_input_ids) else extend_older(
            OlderPart(), older, source=source, current_run_id=current_run_id,
            protected_input_ids=protected_input_ids, call_states=call_states)
    dedup = _Deduplicator(protected_input_ids, current_run_id, part.shown)
    messages: list[ViewMessage] = list(part.segment.items if part.segment else ())

    def place_inputs(start: int) -> None:
        """De-duplicate the user inputs among the messages appended since ``start``."""
        for index in range(start, len(messages)):
            message = messages[index]
            if message.kind is _USER_REF and message.input_id is not None:
                messages[index] = dedup.place(message, source.placement(message.input_id))

    for run in recent:
        start = len(messages)
        _repair_ended(source.root_records(run), call_states, messages, run.run_id)
        place_inputs(start)
        messages.append(terminal_marker(run))
    start = len(messages)
    current = ProtocolRepair(run_ended=False, call_states=call_states, run_id=current_run_id)
    for record in current_records:
        current.feed(record, messages)
    unsettled = current.close(messages)
    if unsettled is not None:
        return unsettled
    place_inputs(start)
    view = ModelView(messages=tuple(messages))
    return mark(view, view.messages, 0, part.segment)


@dataclass(frozen=True)
class OlderPart:
    """The older Runs' part of a projection (§4 ``for run in older``: each Run's inputs, its
    final result and its terminal marker) as a kept segment, with what the de-duplication of
    the rest of the view needs of it. Every request of a Run shows the same older part, and
    the next Run's shows it followed by one Run more (:func:`extend_older`), so a runtime
    that keeps it projects only what a request adds (issue #35)."""

    runs: Sequence[UUID] = ()
    """The older Runs it shows, by run_no (as the :class:`EndedRuns` it was made from keep
    them, when it was: then two compare in O(1), Q530)."""
    segment: Segment | None = None
    """Its messages (None when there are none)."""
    shown: GrownSet[UUID] = field(default_factory=GrownSet)
    """The inputs whose body it shows."""
    listed: GrownSet[UUID] = field(default_factory=GrownSet)
    """Every input it lists, its body or a marker."""
    protected: frozenset[UUID] = frozenset()
    """The inputs it lists that were protected in the request it was made for: a marker
    stands for each (their body is in that request's current context)."""
    repaired: bool = False
    """Whether a final result of it passed through protocol repair, which reads the calls'
    states: a part that did is made again for each request, never kept."""

    def shows(self, older: Sequence[EndedRun], protected_input_ids: Collection[UUID]) -> bool:
        """Whether it is the older part of a request with these older Runs and protected
        inputs: the same Runs, and the same of its inputs protected."""
        return self.runs == run_ids(older) and \
            self.protected == frozenset(i for i in protected_input_ids if i in self.listed)


def extend_older(part: OlderPart, runs: Sequence[EndedRun], *, source: HistorySource,
                 current_run_id: UUID, protected_input_ids: Collection[UUID],
                 call_states: Mapping[UUID, OperationState] = NO_STATES) -> OlderPart:
    """``part`` followed by the older Runs ``runs`` (those after its own), as the projection
    shows them after it; the inputs' placements are the source's now.  CTX-4.4, CTX-4.14,
    CTX-5.24 to CTX-5.26"""
    dedup = _Deduplicator(protected_input_ids, current_run_id, part.shown)
    messages: list[ViewMessage] = []
    listed: dict[UUID, None] = {}  # in the order listed
    repaired = part.repaired
    for run in runs:
        for occurrence in source.user_inputs(run):
            listed[occurrence.input_id] = None
            messages.append(dedup.place(_input_message(occurrence, run), occurrence.placement))
        answer = run.final_answer
        if answer is not None and answer.record.message_kind == "assistant" and not (
                answer.incomplete or answer.denied or answer.tool_calls) \
                and answer.record.run_id == run.run_id:
            messages.append(answer.view_message(run.run_id))  # what the repair would emit
        elif answer is not None:
            _repair_ended((answer,), call_states, messages, run.run_id)
            repaired = True
        messages.append(terminal_marker(run))
    segment = part.segment.extended(tuple(messages)) if part.segment is not None else \
        Segment(tuple(messages)) if messages else None
    all_listed = part.listed.plus(listed)
    return OlderPart(_ids_after(part.runs, runs), segment,
                     part.shown.plus(dedup.shown_here()), all_listed,
                     frozenset(i for i in protected_input_ids if i in all_listed), repaired)


def _ids_after(ids: Sequence[UUID], runs: Sequence[EndedRun]) -> Sequence[UUID]:
    """``ids`` followed by the run ids of ``runs``, in the lineage of the
    :class:`EndedRuns` they come from where they do (Q530)."""
    if not ids and not isinstance(ids, Grown):
        return run_ids(runs)
    return grown(ids, *map(_RUN_ID, runs))


def _repair_ended(records: Iterable[EffectiveRecord], call_states: Mapping[UUID, OperationState],
                  out: list[ViewMessage], run_id: UUID) -> None:
    repair = ProtocolRepair(run_ended=True, call_states=call_states, run_id=run_id)
    for record in records:
        repair.feed(record, out)
    if repair.close(out) is not None:
        raise AssertionError("an ended Run's open batch closes with placeholders")


def _input_message(occurrence: InputOccurrence, run: EndedRun) -> ViewMessage:
    """An older Run's input as a view message, made once per occurrence value and Run."""
    kept: tuple[UUID, ViewMessage] | None = occurrence.__dict__.get(_INPUT_MEMO)
    if kept is not None and kept[0] == run.run_id:
        return kept[1]
    message = ViewMessage(role=MessageRole.USER, kind=ViewKind.USER_REF, text=occurrence.text,
                          input_id=occurrence.input_id, source_run_id=run.run_id)
    occurrence.__dict__[_INPUT_MEMO] = (run.run_id, message)
    return message


