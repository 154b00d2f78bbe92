"""A Hypothesis state machine over the §5 delivery lifecycle (ctxspec.reference.delivery).

Random sequences of questions, supplements, freezes (with a cutoff between the Run's earliest
admissible input and the last received one), retries of a freeze, first outputs and Run ends
(failure without output, success, stop) are applied to the pure transitions. Beside the book the
machine keeps its own small shadow of what §2/§5 say must hold (which Run each input waits for,
which Operation holds it, where it was delivered) and checks the book against it after every
step, together with the design's invariants:

- each input is delivered at most once over the whole Session;
- input_seq is 1, 2, 3, … in receive order;
- no input is lost: every supplement not yet delivered has exactly one live (pending or claimed)
  delivery, targeting the active Run or waiting for the next question; a carried delivery has
  exactly one successor, of the same input, created after it;
- previous_delivery_id chains never cycle and only point to carried deliveries;
- frozen input lists keep receive order;
- a delivered or carried delivery never changes again, whatever the transition;
- only questions start Runs, one active at a time;
- an input sent again (a client that never saw its receipt, a restarted runtime re-sending
  what it received) is refused as a duplicate and changes nothing: never a second delivery,
  never a second input_seq.

``DeliveryMachine.reached`` counts what the runs reached (``ROWS``: every CI run reaches each).

The machine holds no pytest markers (files under models/ count as conformance coverage in the
trace); the test that runs it declares what it pins. A driver-level model can subclass it and
override the ``_do_*`` methods to send the same stimuli to a Driver.
"""

from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import ClassVar
from uuid import UUID

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from ctxspec.reference import delivery as dl
from ctxspec.reference.contracts import (
    DeliveryState,
    InputKind,
    PayloadRef,
    UserInput,
    UserInputDelivery,
)
from ctxspec.reference.delivery import DeliveryBook, DeliveryRejected, InputManifest, WriteSet

SESSION = UUID(int=0x5E55)
T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
BODY = PayloadRef(digest="sha256:" + "ab" * 32, size_bytes=12)
RECEIPT = PayloadRef(digest="sha256:" + "cd" * 32, size_bytes=40, media_type="application/json")

STEPS = 30
"""Steps per example: enough for inputs to wait, be claimed, retried and carried over. How
many examples run is the Hypothesis profile's choice (tests/conftest.py)."""

FINAL_STATES = (DeliveryState.DELIVERED, DeliveryState.CARRIED)
ROWS = ("question", "supplement to the active Run", "supplement waiting for a question",
        "waiting supplement bound to a question", "inputs claimed by a freeze", "freeze retried",
        "input delivered", "supplement carried", "carried supplement delivered later",
        "input replayed (refused)", "Run stopped with late supplements", "illegal step refused")


class DeliveryMachine(RuleBasedStateMachine):
    reached: ClassVar[Counter[str]] = Counter()

    def __init__(self) -> None:
        super().__init__()
        self.book: DeliveryBook = dl.empty_book(SESSION)
        self._ids = 0
        self._minutes = 0
        # The shadow, in the design's terms and independent of the implementation.
        self.active: UUID | None = None
        self.runs: list[UUID] = []
        self.question_seq: dict[UUID, int] = {}
        self.seq: dict[UUID, int] = {}
        self.kind: dict[UUID, InputKind] = {}
        self.owner: dict[UUID, UUID | None] = {}
        """The Run an input's live delivery targets (None: waits for the next question)."""
        self.holder: dict[UUID, UUID | None] = {}
        """The Operation whose claim the input's live delivery is in (None: pending)."""
        self.delivered_to: dict[UUID, UUID] = {}
        self.operations: dict[UUID, InputManifest] = {}
        self.output_seen: set[UUID] = set()
        self.cutoff: dict[UUID, int] = {}
        self.final: dict[UUID, UserInputDelivery] = {}
        """Every delivery ever seen delivered or carried, as it was then."""

    # --- helpers -------------------------------------------------------------------------

    def _new_id(self) -> UUID:
        self._ids += 1
        return UUID(int=self._ids)

    def _now(self) -> datetime:
        self._minutes += 1
        return T0 + timedelta(minutes=self._minutes)

    def _last_seq(self) -> int:
        return len(self.seq)

    def _undelivered(self, run_id: UUID | None) -> list[UUID]:
        """Undelivered inputs whose live delivery targets run_id, in receive order."""
        return sorted((i for i, owner in self.owner.items()
                       if owner == run_id and i not in self.delivered_to),
                      key=self.seq.__getitem__)

    def _ops_of(self, run_id: UUID | None) -> list[UUID]:
        return [o for o, m in self.operations.items() if m.run_id == run_id]

    @staticmethod
    def _applied(result: tuple[DeliveryBook, WriteSet] | DeliveryRejected
                 ) -> tuple[DeliveryBook, WriteSet]:
        assert not isinstance(result, DeliveryRejected), result
        return result

    # --- stimuli (overridable by a driver-level model) -----------------------------------

    def _do_input(self, received: UserInput, delivery_id: UUID,
                  run_id: UUID | None) -> WriteSet:
        self.book, writes = self._applied(
            dl.app_input(self.book, received, delivery_id=delivery_id, run_id=run_id))
        return writes

    def _do_freeze(self, run_id: UUID, operation_id: UUID,
                   cutoff: int) -> tuple[WriteSet, InputManifest]:
        result = dl.freeze(self.book, run_id=run_id, operation_id=operation_id,
                           input_cutoff=cutoff)
        assert not isinstance(result, DeliveryRejected), result
        self.book, writes, manifest = result
        return writes, manifest

    def _do_first_output(self, operation_id: UUID) -> WriteSet:
        self.book, writes = self._applied(dl.first_output(
            self.book, operation_id=operation_id, receipt_ref=RECEIPT, delivered_at=self._now()))
        return writes

    def _do_finalize(self, run_id: UUID, carry_ids: list[UUID]) -> WriteSet:
        self.book, writes = self._applied(dl.finalize(self.book, run_id=run_id,
                                                      carry_ids=carry_ids))
        return writes

    def _receive(self, kind: InputKind, origin: UUID | None) -> UserInput:
        input_id = self._new_id()
        seq = self._last_seq() + 1
        self.seq[input_id] = seq
        self.kind[input_id] = kind
        return UserInput(input_id=input_id, session_id=SESSION, input_seq=seq,
                         origin_run_id=origin, kind=kind, body_ref=BODY,
                         received_at=self._now())

    # --- rules ---------------------------------------------------------------------------

    @precondition(lambda self: self.active is None)
    @rule()
    def question(self) -> None:
        run_id = self._new_id()
        waiting = self._undelivered(None)
        received = self._receive(InputKind.QUESTION, run_id)
        delivery_id = self._new_id()
        writes = self._do_input(received, delivery_id, run_id)
        assert writes.inputs == (received,)
        assert [(d.delivery_id, d.input_id, d.state, d.target_run_id) for d in writes.inserted] \
            == [(delivery_id, received.input_id, DeliveryState.PENDING, run_id)]
        # Every input waiting for the next question is bound now, in receive order.
        assert [d.input_id for d in writes.updated] == waiting
        assert all(d.state is DeliveryState.PENDING and d.target_run_id == run_id
                   for d in writes.updated)
        self.reached["question"] += 1
        self.reached["waiting supplement bound to a question"] += bool(waiting)
        self.runs.append(run_id)
        self.active = run_id
        self.question_seq[run_id] = received.input_seq
        for input_id in [*waiting, received.input_id]:
            self.owner[input_id] = run_id
            self.holder[input_id] = None

    @rule()
    def supplement(self) -> None:
        received = self._receive(InputKind.SUPPLEMENT, self.active)
        delivery_id = self._new_id()
        runs_before = self.book.run_ids
        writes = self._do_input(received, delivery_id, None)
        # Received into the active Run, or waiting with no target; never a new Run.
        assert [(d.input_id, d.state, d.target_run_id) for d in writes.inserted] \
            == [(received.input_id, DeliveryState.PENDING, self.active)]
        assert writes.updated == ()
        assert self.book.run_ids == runs_before
        self.owner[received.input_id] = self.active
        self.holder[received.input_id] = None
        self.reached["supplement to the active Run" if self.active is not None
                     else "supplement waiting for a question"] += 1

    @precondition(lambda self: bool(self.seq))
    @rule(data=st.data())
    def replay_input(self, data: st.DataObject) -> None:
        """An input sent again — as first received, or numbered as the next one — is a
        duplicate: refused with DUPLICATE_INPUT_ID, the book unchanged (§2, §10)."""
        input_id = data.draw(st.sampled_from(sorted(self.seq, key=self.seq.__getitem__)))
        original = next(i for i in self.book.inputs if i.input_id == input_id)
        renumbered = data.draw(st.booleans())
        again = original.model_copy(update={"input_seq": self._last_seq() + 1}) \
            if renumbered else original
        run_id = self._new_id() if original.kind is InputKind.QUESTION else None
        if run_id is not None:
            again = again.model_copy(update={"origin_run_id": run_id})
        before = self.book
        result = dl.app_input(self.book, again, delivery_id=self._new_id(), run_id=run_id)
        assert isinstance(result, DeliveryRejected), result
        assert result.code is dl.DeliveryRejectCode.DUPLICATE_INPUT_ID, result
        assert self.book == before
        self.reached["input replayed (refused)"] += 1

    @precondition(lambda self: self.active is not None)
    @rule(data=st.data())
    def freeze(self, data: st.DataObject) -> None:
        run_id = self.active
        assert run_id is not None
        low = max(self.question_seq[run_id], self.cutoff.get(run_id, 0))
        cutoff = data.draw(st.integers(low, self._last_seq()), label="input_cutoff")
        operation_id = self._new_id()
        expected_claim = [i for i in self._undelivered(run_id)
                          if self.holder[i] is None and self.seq[i] <= cutoff]
        writes, manifest = self._do_freeze(run_id, operation_id, cutoff)
        assert list(manifest.claimed_input_ids) == expected_claim
        assert [d.input_id for d in writes.updated] == expected_claim
        assert all(d.state is DeliveryState.CLAIMED and d.operation_id == operation_id
                   for d in writes.updated)
        assert writes.manifest == manifest
        for input_id in expected_claim:
            self.holder[input_id] = operation_id
        self.reached["inputs claimed by a freeze"] += bool(expected_claim)
        in_request = sorted((i for i, owner in self.owner.items() if owner == run_id
                             and (self.holder[i] is not None or i in self.delivered_to)
                             and self.seq[i] <= cutoff), key=self.seq.__getitem__)
        assert list(manifest.input_ids) == in_request
        self.operations[operation_id] = manifest
        self.cutoff[run_id] = cutoff

    @precondition(lambda self: bool(self._ops_of(self.active)))
    @rule(data=st.data())
    def retry_freeze(self, data: st.DataObject) -> None:
        operation_id = data.draw(st.sampled_from(self._ops_of(self.active)), label="operation")
        stored = self.operations[operation_id]
        before = self.book
        writes, manifest = self._do_freeze(stored.run_id, operation_id, stored.input_cutoff)
        # A retry re-reads the frozen list, whatever arrived since; nothing is claimed anew.
        assert manifest == stored
        assert dl.frozen_inputs(self.book, operation_id) == stored
        assert writes.is_empty
        assert self.book == before
        self.reached["freeze retried"] += 1

    @precondition(lambda self: bool(self._ops_of(self.active)))
    @rule(data=st.data())
    def first_output(self, data: st.DataObject) -> None:
        operation_id = data.draw(st.sampled_from(self._ops_of(self.active)), label="operation")
        self._first_output(operation_id)

    def _first_output(self, operation_id: UUID) -> None:
        expected = [i for i in self._undelivered(self.active) if self.holder[i] == operation_id]
        writes = self._do_first_output(operation_id)
        assert [d.input_id for d in writes.updated] == expected
        assert all(d.state is DeliveryState.DELIVERED for d in writes.updated)
        if operation_id in self.output_seen:
            assert writes.is_empty
        self.output_seen.add(operation_id)
        for input_id in expected:
            assert self.active is not None
            self.delivered_to[input_id] = self.active
            self.reached["input delivered"] += 1
            self.reached["carried supplement delivered later"] += any(
                d.input_id == input_id and d.state is DeliveryState.CARRIED
                for d in self.book.deliveries)

    def _finalize(self) -> None:
        run_id = self.active
        assert run_id is not None
        to_carry = [i for i in self._undelivered(run_id)
                    if self.kind[i] is InputKind.SUPPLEMENT]
        carry_ids = [self._new_id() for _ in to_carry]
        writes = self._do_finalize(run_id, carry_ids)
        assert [d.input_id for d in writes.updated] == to_carry
        assert all(d.state is DeliveryState.CARRIED for d in writes.updated)
        assert [(d.delivery_id, d.input_id, d.target_run_id, d.previous_delivery_id)
                for d in writes.inserted] == [
            (new, old.input_id, None, old.delivery_id)
            for new, old in zip(carry_ids, writes.updated, strict=True)]
        for input_id in to_carry:
            self.owner[input_id] = None
            self.holder[input_id] = None
        self.reached["supplement carried"] += len(to_carry)
        self.active = None

    @precondition(lambda self: self.active is not None)
    @rule()
    def fail_without_output(self) -> None:
        # The latest model call (if any) fails before its first output; the Run fails.
        self._finalize()

    @precondition(lambda self: self.active is not None)
    @rule()
    def answer_at_once(self) -> None:
        """The common Run: one request frozen at the last received input, its answer's first
        output, success — every input bound to the Run delivered, carried ones included."""
        run_id = self.active
        assert run_id is not None
        operation_id = self._new_id()
        _, manifest = self._do_freeze(run_id, operation_id, self._last_seq())
        for input_id in manifest.claimed_input_ids:
            self.holder[input_id] = operation_id
        self.operations[operation_id] = manifest
        self.cutoff[run_id] = self._last_seq()
        self._first_output(operation_id)
        self._finalize()

    @precondition(lambda self: bool(self._ops_of(self.active)))
    @rule()
    def succeed(self) -> None:
        self._first_output(self._ops_of(self.active)[-1])
        self._finalize()

    @precondition(lambda self: self.active is not None)
    @rule(data=st.data())
    def stop(self, data: st.DataObject) -> None:
        # Stop during preparation or compaction: supplements may still arrive first.
        late = data.draw(st.integers(0, 2), label="late supplements")
        for _ in range(late):
            self.supplement()
        self.reached["Run stopped with late supplements"] += bool(late)
        self._finalize()

    @rule(data=st.data())
    def illegal(self, data: st.DataObject) -> None:
        """An illegal commit or step is refused with its code and changes nothing."""
        code = dl.DeliveryRejectCode
        stranger = UUID(int=10**9)
        book = self.book
        attempts: list[tuple[dl.DeliveryRejectCode, Callable[[], object]]] = [
            (code.INPUT_SEQ_OUT_OF_ORDER, lambda: dl.app_input(book, UserInput(
                input_id=stranger, session_id=SESSION, input_seq=self._last_seq() + 2,
                origin_run_id=self.active, kind=InputKind.SUPPLEMENT, body_ref=BODY,
                received_at=T0), delivery_id=stranger)),
            (code.UNKNOWN_OPERATION, lambda: dl.first_output(
                book, operation_id=stranger, receipt_ref=RECEIPT, delivered_at=T0)),
        ]
        active = self.active
        if active is not None:
            attempts.append((code.CUTOFF_AHEAD_OF_INPUTS, lambda: dl.freeze(
                book, run_id=active, operation_id=stranger, input_cutoff=self._last_seq() + 1)))
            attempts.append((code.RUN_ALREADY_ACTIVE, lambda: dl.app_input(book, UserInput(
                input_id=stranger, session_id=SESSION, input_seq=self._last_seq() + 1,
                origin_run_id=stranger, kind=InputKind.QUESTION, body_ref=BODY,
                received_at=T0), delivery_id=stranger, run_id=stranger)))
        ended = [r for r in self.runs if r != active]
        if ended:
            last_ended = ended[-1]
            attempts.append((code.RUN_ENDED, lambda: dl.finalize(book, run_id=last_ended,
                                                                 carry_ids=[])))
            attempts.append((code.RUN_ENDED, lambda: dl.freeze(
                book, run_id=last_ended, operation_id=stranger,
                input_cutoff=self._last_seq())))
            for late in self._ops_of(last_ended):
                attempts.append((code.RUN_ENDED, partial(
                    dl.first_output, book, operation_id=late, receipt_ref=RECEIPT,
                    delivered_at=T0)))
        for known in book.deliveries:
            if known.state is DeliveryState.DELIVERED:
                attempts.append((code.DELIVERY_ALREADY_DELIVERED, partial(
                    dl.claim, known, run_id=known.target_run_id or stranger,
                    operation_id=stranger)))
                attempts.append((code.DELIVERY_ALREADY_DELIVERED, partial(
                    dl.carry, known, successor_id=stranger)))
            elif known.state is DeliveryState.CARRIED:
                attempts.append((code.DELIVERY_ALREADY_CARRIED, partial(
                    dl.carry, known, successor_id=stranger)))
            elif known.state is DeliveryState.PENDING:
                attempts.append((code.DELIVERY_NOT_CLAIMED, partial(
                    dl.deliver, known, operation_id=stranger, receipt_ref=RECEIPT,
                    delivered_at=T0)))
            else:
                attempts.append((code.DELIVERY_ALREADY_CLAIMED, partial(
                    dl.claim, known, run_id=known.target_run_id or stranger,
                    operation_id=stranger)))
        expected, attempt = data.draw(st.sampled_from(attempts), label="illegal")
        result = attempt()
        assert isinstance(result, DeliveryRejected), result
        assert result.code is expected, result
        assert self.book == book
        self.reached["illegal step refused"] += 1

    # --- invariants ----------------------------------------------------------------------

    @invariant()
    def input_seq_is_receive_order(self) -> None:
        assert [i.input_seq for i in self.book.inputs] == list(range(1, len(self.seq) + 1))
        assert {i.input_id: i.input_seq for i in self.book.inputs} == self.seq

    @invariant()
    def delivered_at_most_once(self) -> None:
        delivered = [d.input_id for d in self.book.deliveries
                     if d.state is DeliveryState.DELIVERED]
        assert len(delivered) == len(set(delivered))
        assert {d.input_id: d.target_run_id for d in self.book.deliveries
                if d.state is DeliveryState.DELIVERED} == self.delivered_to

    @invariant()
    def final_deliveries_never_change(self) -> None:
        current = {d.delivery_id: d for d in self.book.deliveries}
        for delivery_id, seen in self.final.items():
            assert current[delivery_id] == seen
        for d in self.book.deliveries:
            if d.state in FINAL_STATES:
                self.final.setdefault(d.delivery_id, d)

    @invariant()
    def no_input_is_lost(self) -> None:
        live: dict[UUID, list[UserInputDelivery]] = {}
        for d in self.book.deliveries:
            if d.state in dl.LIVE_STATES:
                live.setdefault(d.input_id, []).append(d)
        for input_id, kind in self.kind.items():
            mine = live.get(input_id, [])
            if input_id in self.delivered_to:
                assert mine == []
            elif kind is InputKind.SUPPLEMENT:
                (only,) = mine
                assert only.target_run_id == self.owner[input_id]
                assert only.target_run_id in (None, self.active)
                assert only.operation_id == self.holder[input_id]
                assert (only.state is DeliveryState.CLAIMED) == (self.holder[input_id]
                                                                 is not None)
            else:
                # A question that never reached the model stays with its own Run.
                assert len(mine) == 1 and mine[0].target_run_id == self.owner[input_id]
                assert [d.input_id for d in self.book.deliveries].count(input_id) == 1

    @invariant()
    def carried_has_one_successor_and_chains_end(self) -> None:
        by_id = {d.delivery_id: d for d in self.book.deliveries}
        position = {d.delivery_id: n for n, d in enumerate(self.book.deliveries)}
        successors: dict[UUID, list[UUID]] = {}
        for d in self.book.deliveries:
            if d.previous_delivery_id is not None:
                previous = by_id[d.previous_delivery_id]
                assert previous.state is DeliveryState.CARRIED
                assert previous.input_id == d.input_id
                assert position[previous.delivery_id] < position[d.delivery_id]
                successors.setdefault(previous.delivery_id, []).append(d.delivery_id)
        for d in self.book.deliveries:
            if d.state is DeliveryState.CARRIED:
                assert len(successors.get(d.delivery_id, [])) == 1
            seen = {d.delivery_id}
            link = d
            while link.previous_delivery_id is not None:
                link = by_id[link.previous_delivery_id]
                assert link.delivery_id not in seen
                seen.add(link.delivery_id)

    @invariant()
    def frozen_lists_keep_receive_order(self) -> None:
        for manifest in self.book.manifests:
            for ids in (manifest.input_ids, manifest.claimed_input_ids):
                seqs = [self.seq[i] for i in ids]
                assert seqs == sorted(set(seqs))
                assert all(s <= manifest.input_cutoff for s in seqs)
            assert self.operations[manifest.operation_id] == manifest

    @invariant()
    def only_questions_start_runs(self) -> None:
        questions = [i for i in self.book.inputs if i.kind is InputKind.QUESTION]
        assert list(self.book.run_ids) == self.runs == [q.origin_run_id for q in questions]
        assert self.book.active_run_id == self.active
        assert self.active is None or self.active == self.runs[-1]


__all__ = ["ROWS", "STEPS", "DeliveryMachine"]
