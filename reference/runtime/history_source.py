"""The ContextRepository over the store (§3 "读固定版本", §4 "历史投影", §5 de-duplication
inputs): :class:`StoredHistory` answers the pure core's
:class:`~ctxspec.reference.repository.ContextRepository` (a
:class:`~ctxspec.reference.history.HistorySource` with the ended Runs) for one Session with paged
queries.

Memory does not grow with the Session (CTX-4.23): a Run's root records are streamed one page at
a time (:meth:`Store.iter_records`) and turned into effective records on the way, with the head
revision's overrides applied by the core's ``effective_record`` (§3: history is rebuilt from the
effective revision, never from raw; CTX-3.69, CTX-4.10). What is held besides the page is per Run
and small: the Run's inputs, its head overrides, its final answer.

Decisions (where the design leaves the stored form open):

- **Final answer of an ended Run** (``EndedRun.final_answer``, §4 ``append_final_or_incomplete``):
  only a Run that ended ``succeeded`` has one, and it is the *last* ``assistant`` record of the
  Run's root context, as the head revision shows it, provided that record makes no tool call and
  is not an incomplete stream. An earlier text between tool calls is process, not a result, so
  when the last assistant record is a tool decision there is no final answer. A failed, stopped,
  timed-out or loop-exhausted Run has none either: older Runs then show their inputs and the
  terminal marker "no final result" (CTX-4.14; §11: a partial output "不当作最终答案").
- **Which inputs belong to a Run** (``user_inputs``): those received while it was active
  (``origin_run_id``) and those bound, claimed, delivered or carried to it (a delivery with
  ``target_run_id`` = the Run), in input_seq order, each with its original text from its
  ``body_ref`` blob (a hook never edits a user input's body).
- **Placement**: an input's body belongs to the Run of its (last) ``delivered`` delivery, else to
  its receive position ``origin_run_id`` (CTX-5.25, CTX-5.26).
- **Which records a root context shows**: every stored record of the context, each with the
  overrides of the stored head revision. A record is committed together with the revision that
  includes it, so the head's watermark covers every stored record.
"""

import bisect
import itertools
from collections.abc import Collection, Iterator, Mapping, Sequence
from typing import Any
from uuid import UUID

from ctxspec.reference import history
from ctxspec.reference.contracts import (
    TERMINAL_RUN_STATUSES,
    InputKind,
    MessageRole,
    OperationState,
    Run,
    RunStatus,
    UserInput,
)
from ctxspec.reference.effective import Override, effective_record
from ctxspec.reference.grown import Grown
from ctxspec.reference.history import (
    EndedRun,
    EndedRuns,
    InputOccurrence,
    InputPlacement,
    OlderPart,
)
from ctxspec.reference.repository import ContextRepository
from ctxspec.reference.runtime.store import Store
from ctxspec.reference.view import EffectiveRecord

_NO_OVERRIDES: Mapping[str, Override] = {}


class StoredHistory(ContextRepository):
    """The :class:`~ctxspec.reference.repository.ContextRepository` of one Session of a
    :class:`Store`.

    CTX-4.2, CTX-4.10, CTX-4.23, CTX-5.24, CTX-5.25, CTX-5.26
    """

    def __init__(self, store: Store, session_id: UUID, page_size: int = 500) -> None:
        self.store = store
        self.session_id = session_id
        self.page_size = page_size
        self._ended = EndedRuns()
        """Each ended Run read, by run_no, as it is projected (its final answer): fixed once
        the Run ended. A request is given a prefix of it (O(1), Q530)."""
        self._ended_nos: list[int] = []
        """Their run_nos, in the same order."""
        self._seen = -1
        """The highest run_no read."""
        self._not_ended: set[int] = set()
        """The run_nos read while their Run had not ended."""
        self._inputs: dict[UUID, tuple[_Received, ...]] = {}
        """Each ended Run's inputs (id, seq, kind, original text): fixed once it ended."""
        self._placed: dict[UUID, InputPlacement] = {}
        """Placements that can no longer change: an input delivered (at most once, CTX-5.17)."""
        self._records: dict[UUID, list[EffectiveRecord]] = {}
        """The root records of the last KEPT_RUNS ended Runs read whole (the recent Runs)."""
        self._older = OlderPart()
        """The older Runs' part last kept (:meth:`older_part`)."""
        self._occurrences: dict[UUID, InputOccurrence] = {}
        """An ended Run's input with a placement that can no longer change, kept as one value
        (the projection keeps its view message with it)."""

    # --- what the projection is given ------------------------------------------------------

    def ended_runs(self, before_run_no: int) -> EndedRuns:
        """The Session's Runs ended before ``before_run_no``, by run_no, each with its final
        answer (see the module docstring).  CTX-4.3, CTX-4.12, CTX-4.13

        A Run once ended never changes, and a new Run takes the next run_no: so one query
        reads only the Runs after the highest run_no seen and those seen not ended yet, and
        what was read of an ended Run is kept (its final answer, inputs and records never
        change). A request reads O(1) rows here however many Runs ended (Q321, Q400)."""
        for row in self._runs_to_read(before_run_no):
            run_no = row["run_no"]
            self._seen = max(self._seen, run_no)
            if row["status"] not in _ENDED:
                self._not_ended.add(run_no)
                continue
            self._not_ended.discard(run_no)
            run = Run.model_validate_json(row["doc"])
            ended = EndedRun(run.run_id, run.run_no, run.status, self.final_answer(run))
            at = bisect.bisect(self._ended_nos, run_no)
            self._ended_nos.insert(at, run_no)
            if at == len(self._ended):  # the usual case: it ended after those before it
                self._ended = self._ended.plus(ended)
            else:  # a Run that ended after a later one began: the Runs again, in order
                self._ended = EndedRuns((*self._ended[:at], ended, *self._ended[at:]))
        return self._ended.prefix(bisect.bisect_left(self._ended_nos, before_run_no))

    def _runs_to_read(self, before_run_no: int) -> list[dict[str, Any]]:
        """The rows of the Runs before ``before_run_no`` not known ended: those after the
        highest run_no seen, and those seen while they ran."""
        waiting = sorted(n for n in self._not_ended if n < before_run_no)
        # Searches of the (session_id, run_no) index: an OR of them would scan every Run.
        after = ("SELECT run_no, status, doc FROM runs WHERE session_id = ? AND run_no > ? AND "
                 "run_no < ?")
        params: list[str | int] = [str(self.session_id), self._seen, before_run_no]
        if waiting:
            after += (" UNION ALL SELECT run_no, status, doc FROM runs WHERE session_id = ? AND "
                      f"run_no IN ({', '.join('?' for _ in waiting)})")
            params += [str(self.session_id), *waiting]
        return self.store.query(after + " ORDER BY run_no", params)

    def final_answer(self, run: Run) -> EffectiveRecord | None:
        """The effective final answer of a succeeded Run, else None."""
        if run.status is not RunStatus.SUCCEEDED:
            return None
        context_id = self.store.root_context_of_run(run.run_id)
        if context_id is None:
            return None
        raw = self.store.last_record_of(context_id, role=MessageRole.ASSISTANT.value,
                                        message_kind="assistant")
        if raw is None:
            return None
        _, overrides = self.store.head_revision(context_id)
        answer = effective_record(raw, overrides.get(raw.record_id, _NO_OVERRIDES),
                                  self.sources(context_id, overrides))
        if answer.tool_calls or answer.incomplete or answer.denied:
            return None
        return answer

    def sources(self, context_id: UUID, overrides: Mapping[UUID, Mapping[str, Override]]
                ) -> dict[UUID, str]:
        """Each mutation of the context named by its source, as a live context names it, so a
        changed text is marked alike wherever it is read from (§2, §6)."""
        return {m.mutation_id: f"{m.source_kind.value}:{m.source_ref}"
                for m in self.store.mutations_of(context_id)} if overrides else {}

    def effective_records(self, context_id: UUID) -> Iterator[EffectiveRecord]:
        """A context's records as its head revision shows them, by context_seq, paged."""
        _, overrides = self.store.head_revision(context_id)
        sources = self.sources(context_id, overrides)
        for raw in self.store.iter_records(context_id, self.page_size):
            yield effective_record(raw, overrides.get(raw.record_id, _NO_OVERRIDES), sources)

    def current_records(self, run_id: UUID) -> Iterator[EffectiveRecord]:
        """The current Run's root-role effective records (the projection's
        ``current_records``)."""
        context_id = self.store.root_context_of_run(run_id)
        if context_id is not None:
            yield from self.effective_records(context_id)

    def older_part(self, ended: Sequence[EndedRun], recent_runs: int,
                   protected_input_ids: Collection[UUID], current_run_id: UUID,
                   call_states: Mapping[UUID, OperationState]) -> OlderPart:
        """The older Runs' part of a request's projection (§4), from the one kept: kept while
        it shows a prefix of the same older Runs with the same of its inputs protected, and
        extended Run by Run. A part is kept only as far as every input it lists has a
        placement that can no longer change (a delivered input, CTX-5.17) and no final result
        in it was repaired (the repair reads calls' states): it is then a function of facts
        that never change (issue #35, Q400)."""
        older, _ = history.select_history(ended, recent_runs)
        kept = self._older
        if not isinstance(kept.runs, Grown) or not kept.shows(
                history.first_runs(older, len(kept.runs)), protected_input_ids):
            # from none of them, in the lineage of these Runs (then compared in O(1), Q530)
            kept = self._older = OlderPart(runs=history.run_ids(history.first_runs(older, 0)))
        part, keep = kept, True
        for run in older[len(kept.runs):]:
            part = history.extend_older(part, (run,), source=self,
                                        current_run_id=current_run_id,
                                        protected_input_ids=protected_input_ids,
                                        call_states=call_states)
            keep = keep and not part.repaired and all(
                input_id in self._placed for input_id in part.listed.added_since(kept.listed))
            if keep:
                self._older = kept = part
        return part

    # --- HistorySource -----------------------------------------------------------------------

    def user_inputs(self, run: EndedRun) -> Iterator[InputOccurrence]:
        """Every input received during, bound to or carried to ``run``, by input_seq."""
        received = self._inputs.get(run.run_id)
        if received is None:
            received = self._read_inputs(run.run_id)
            if run.status in TERMINAL_RUN_STATUSES:
                self._inputs[run.run_id] = received
        for input_id, input_seq, kind, text in received:
            known = self._occurrences.get(input_id)
            if known is None:
                known = InputOccurrence(input_id, input_seq, kind, text, self.placement(input_id))
                if input_id in self._placed:  # it never moves again: the same value
                    self._occurrences[input_id] = known
            yield known

    def _read_inputs(self, run_id: UUID) -> "tuple[_Received, ...]":
        # A UNION of two index searches (an OR of them, or the session_id index the ORDER BY
        # draws the planner to, scans the Session's every input: "+" keeps it off).
        rows = self.store.query(
            "SELECT doc, input_seq FROM user_inputs WHERE origin_run_id = ? AND +session_id = ? "
            "UNION SELECT doc, input_seq FROM user_inputs WHERE input_id IN (SELECT input_id "
            "FROM deliveries WHERE target_run_id = ?) AND +session_id = ? ORDER BY input_seq",
            (str(run_id), str(self.session_id), str(run_id), str(self.session_id)))
        found = [UserInput.model_validate_json(row["doc"]) for row in rows]
        return tuple((u.input_id, u.input_seq, u.kind, self.store.text(u.body_ref))
                     for u in found)

    def root_records(self, run: EndedRun) -> Iterator[EffectiveRecord]:
        """The root role's effective records of ``run`` by context_seq, one page at a time.
        An ended Run's records never change, so the last few read (the recent Runs every
        request shows) are kept while they are small, and reused (with the view messages they
        keep) instead of being read and made again (Q321); a large Run is streamed."""
        kept = self._records.get(run.run_id)
        if kept is not None:
            return iter(kept)
        records: list[EffectiveRecord] = []
        for record in self.current_records(run.run_id):
            records.append(record)
            if len(records) > KEPT_RUN_RECORDS:
                return itertools.chain(records, self.current_records_after(run.run_id,
                                                                           len(records)))
        self._records[run.run_id] = records
        while len(self._records) > KEPT_RUNS:
            del self._records[next(iter(self._records))]
        return iter(records)

    def current_records_after(self, run_id: UUID, skip: int) -> Iterator[EffectiveRecord]:
        """The Run's records after its first ``skip`` (a large Run, streamed on)."""
        return itertools.islice(self.current_records(run_id), skip, None)

    def placement(self, input_id: UUID) -> InputPlacement:
        """Where the input's body belongs; kept once it was delivered (it never moves
        again), so a request asks the store only about inputs not delivered yet."""
        known = self._placed.get(input_id)
        if known is not None:
            return known
        row = self.store.query(
            "SELECT origin_run_id, (SELECT target_run_id FROM deliveries AS d WHERE "
            "d.input_id = i.input_id AND d.state = 'delivered' ORDER BY d.rowid DESC LIMIT 1) "
            "AS delivered_run_id FROM user_inputs AS i WHERE i.input_id = ?", (str(input_id),))
        if not row:
            raise KeyError(f"no user input {input_id}")
        origin, delivered = row[0]["origin_run_id"], row[0]["delivered_run_id"]
        placed = InputPlacement(None if origin is None else UUID(origin),
                                None if delivered is None else UUID(delivered))
        if delivered is not None:
            self._placed[input_id] = placed
        return placed


_ENDED = frozenset(status.value for status in TERMINAL_RUN_STATUSES)

KEPT_RUNS = 4
"""How many ended Runs' records are kept (recent_runs = 2 reads two per request)."""
KEPT_RUN_RECORDS = 2000
"""A Run with more root records than this is streamed page by page each time (CTX-4.23)."""

_Received = tuple[UUID, int, InputKind, str]
"""An input as an ended Run lists it: id, input_seq, kind and original text."""


__all__ = ["StoredHistory"]
