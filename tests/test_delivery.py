"""§2 / §5 delivery lifecycle: APP-INPUT, T_FREEZE, T_FIRST_OUTPUT and APP-FINALIZE as pure
transitions, with the §11/§12 rows about supplements.

Every expected delivery and write set is written out by hand from the design's text (the
comment beside it says which rule), never taken from the implementation's output.
"""

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from uuid import UUID

import pytest

from ctxspec.reference import delivery as dl
from ctxspec.reference.contracts import (
    DeliveryState,
    InputKind,
    PayloadRef,
    UserInput,
    UserInputDelivery,
)
from ctxspec.reference.delivery import (
    DeliveryBook,
    DeliveryRejectCode,
    DeliveryRejected,
    InputManifest,
    WriteSet,
)

SESSION = UUID(int=0x5E55_1011)
OTHER_SESSION = UUID(int=0x5E55_2022)
T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
BODY = PayloadRef(digest="sha256:" + "ab" * 32, size_bytes=12)
RECEIPT = PayloadRef(digest="sha256:" + "cd" * 32, size_bytes=40, media_type="application/json")
RECEIPT_2 = PayloadRef(digest="sha256:" + "ef" * 32, size_bytes=41,
                       media_type="application/json")

P, C, DLV, CAR = (DeliveryState.PENDING, DeliveryState.CLAIMED, DeliveryState.DELIVERED,
                  DeliveryState.CARRIED)


def inp(n: int) -> UUID:
    """The input whose input_seq is n (ids and seqs line up to keep expectations readable)."""
    return UUID(int=0x1_0000 + n)


def run(n: int) -> UUID:
    return UUID(int=0x2_0000 + n)


def op(n: int) -> UUID:
    return UUID(int=0x3_0000 + n)


def did(n: int) -> UUID:
    return UUID(int=0x4_0000 + n)


def at(minutes: int) -> datetime:
    return T0 + timedelta(minutes=minutes)


def question(seq: int, run_id: UUID, session: UUID = SESSION) -> UserInput:
    return UserInput(input_id=inp(seq), session_id=session, input_seq=seq, origin_run_id=run_id,
                     kind=InputKind.QUESTION, body_ref=BODY, received_at=at(seq))


def supplement(seq: int, origin: UUID | None) -> UserInput:
    return UserInput(input_id=inp(seq), session_id=SESSION, input_seq=seq, origin_run_id=origin,
                     kind=InputKind.SUPPLEMENT, body_ref=BODY, received_at=at(seq))


def dv(delivery_id: UUID, input_id: UUID, state: DeliveryState, *, target: UUID | None = None,
       operation: UUID | None = None, previous: UUID | None = None,
       receipt: PayloadRef | None = None, delivered_at: datetime | None = None
       ) -> UserInputDelivery:
    return UserInputDelivery(delivery_id=delivery_id, input_id=input_id, target_run_id=target,
                             operation_id=operation, previous_delivery_id=previous, state=state,
                             context_seq=None, first_output_receipt_ref=receipt,
                             delivered_at=delivered_at)


def ok(result: tuple[DeliveryBook, WriteSet] | DeliveryRejected) -> tuple[DeliveryBook, WriteSet]:
    assert not isinstance(result, DeliveryRejected), result
    return result


def frozen(result: tuple[DeliveryBook, WriteSet, InputManifest] | DeliveryRejected
           ) -> tuple[DeliveryBook, WriteSet, InputManifest]:
    assert not isinstance(result, DeliveryRejected), result
    return result


def refused(result: object, code: DeliveryRejectCode) -> None:
    assert isinstance(result, DeliveryRejected), result
    assert result.code is code, result
    assert result.reason


def ask(book: DeliveryBook, seq: int, run_id: UUID, delivery_id: UUID) -> DeliveryBook:
    return ok(dl.app_input(book, question(seq, run_id), delivery_id=delivery_id,
                           run_id=run_id))[0]


def add(book: DeliveryBook, seq: int, delivery_id: UUID) -> DeliveryBook:
    """A supplement received now (its origin is whatever Run is active)."""
    return ok(dl.app_input(book, supplement(seq, book.active_run_id),
                           delivery_id=delivery_id))[0]


def freeze(book: DeliveryBook, run_id: UUID, operation_id: UUID, cutoff: int) -> DeliveryBook:
    return frozen(dl.freeze(book, run_id=run_id, operation_id=operation_id,
                            input_cutoff=cutoff))[0]


def output(book: DeliveryBook, operation_id: UUID, minutes: int = 30) -> DeliveryBook:
    return ok(dl.first_output(book, operation_id=operation_id, receipt_ref=RECEIPT,
                              delivered_at=at(minutes)))[0]


def end(book: DeliveryBook, run_id: UUID, *carry_ids: UUID) -> DeliveryBook:
    return ok(dl.finalize(book, run_id=run_id, carry_ids=carry_ids))[0]


EMPTY = dl.empty_book(SESSION)


# --- APP-INPUT -----------------------------------------------------------------------------


@pytest.mark.covers("CTX-2.2", "CTX-2.20", "CTX-5.9", "CTX-5.10")
def test_question_creates_its_run_and_one_pending_delivery() -> None:
    q1 = question(1, run(1))
    book, writes = ok(dl.app_input(EMPTY, q1, delivery_id=did(1), run_id=run(1)))
    # §2: a new question creates one Run; §5 APP-INPUT registers the UserInput and its delivery,
    # pending (no Operation, context_seq or delivered_at yet), and the receipt names the Run.
    expected = dv(did(1), inp(1), P, target=run(1))
    assert writes == WriteSet(inputs=(q1,), inserted=(expected,))
    assert book.run_ids == (run(1),)
    assert dl.active_run(book) == run(1)
    assert book.inputs == (q1,)
    assert book.deliveries == (expected,)
    assert dl.pending_inputs(book, run(1)) == (inp(1),)
    assert dl.receive_position(book, inp(1)) == run(1)
    assert dl.last_delivered_run(book, inp(1)) is None


@pytest.mark.covers("CTX-1.3", "CTX-2.3", "CTX-2.7", "CTX-5.10", "CTX-5.12", "CTX-5.29")
def test_five_supplements_in_one_run() -> None:
    # §12 "一轮内连续五条补充": five UserInputs, one Run; the next freeze claims all five.
    book = ask(EMPTY, 1, run(1), did(1))
    book = freeze(book, run(1), op(1), 1)
    book = output(book, op(1))
    for seq in range(2, 7):
        book, writes = ok(dl.app_input(book, supplement(seq, run(1)), delivery_id=did(seq)))
        # Each supplement is its own UserInput with a pending delivery of the running Run.
        assert writes == WriteSet(inputs=(supplement(seq, run(1)),),
                                  inserted=(dv(did(seq), inp(seq), P, target=run(1)),))
    assert book.run_ids == (run(1),)
    assert [i.input_seq for i in book.inputs] == [1, 2, 3, 4, 5, 6]
    assert [i.kind for i in book.inputs] == [InputKind.QUESTION] + [InputKind.SUPPLEMENT] * 5
    assert dl.pending_inputs(book, run(1)) == tuple(inp(s) for s in range(2, 7))

    book, writes, manifest = frozen(dl.freeze(book, run_id=run(1), operation_id=op(2),
                                              input_cutoff=6))
    claimed = tuple(dv(did(s), inp(s), C, target=run(1), operation=op(2)) for s in range(2, 7))
    # The request holds the question (delivered by op 1) and the five, in receive order.
    assert manifest == InputManifest(
        operation_id=op(2), run_id=run(1), input_cutoff=6,
        input_ids=tuple(inp(s) for s in range(1, 7)),
        claimed_input_ids=tuple(inp(s) for s in range(2, 7)),
        claimed_delivery_ids=tuple(did(s) for s in range(2, 7)))
    assert writes == WriteSet(updated=claimed, manifest=manifest)
    assert dl.pending_inputs(book, run(1)) == ()


@pytest.mark.covers("CTX-5.27", "CTX-2.3", "CTX-2.20", "CTX-5.10")
def test_pending_never_starts_a_run() -> None:
    # A supplement with no active Run (before any question, and after a Run ended) is kept and
    # waits for the next question: no Run is created, the receipt names no Run.
    book, writes = ok(dl.app_input(EMPTY, supplement(1, None), delivery_id=did(1)))
    assert writes == WriteSet(inputs=(supplement(1, None),),
                              inserted=(dv(did(1), inp(1), P),))
    assert book.run_ids == ()
    assert dl.active_run(book) is None
    assert dl.pending_inputs(book, None) == (inp(1),)

    # Only a question starts a Run; it takes the waiting supplement along.
    book = ask(book, 2, run(1), did(2))
    assert dl.pending_inputs(book, run(1)) == (inp(1), inp(2))
    book = end(book, run(1), did(11))  # stopped at once: S1 moves on again
    book, writes = ok(dl.app_input(book, supplement(3, None), delivery_id=did(3)))
    assert writes.inserted == (dv(did(3), inp(3), P),)
    assert book.run_ids == (run(1),)
    assert dl.active_run(book) is None
    assert dl.receive_position(book, inp(3)) is None
    assert dl.pending_inputs(book, None) == (inp(1), inp(3))


@pytest.mark.covers("CTX-5.23", "CTX-2.27", "CTX-5.1")
def test_waiting_inputs_bind_to_the_next_question_in_receive_order() -> None:
    # S2 was carried out of Run 1, S4 arrived while nothing ran; Q5 binds both with itself, in
    # receive order (§5 "保留原接收顺序"): the carried supplements come before the question.
    book = ask(EMPTY, 1, run(1), did(1))
    book = add(book, 2, did(2))
    book = freeze(book, run(1), op(1), 2)
    book = output(book, op(1))
    book = add(book, 3, did(3))  # after the cutoff; the Run then succeeds with no next Loop
    book = end(book, run(1), did(30))
    book = add(book, 4, did(4))  # no Run active
    assert dl.pending_inputs(book, None) == (inp(3), inp(4))

    q5 = question(5, run(2))
    book, writes = ok(dl.app_input(book, q5, delivery_id=did(5), run_id=run(2)))
    assert writes == WriteSet(
        inputs=(q5,), inserted=(dv(did(5), inp(5), P, target=run(2)),),
        updated=(dv(did(30), inp(3), P, target=run(2), previous=did(3)),
                 dv(did(4), inp(4), P, target=run(2))))
    assert dl.pending_inputs(book, None) == ()
    assert dl.pending_inputs(book, run(2)) == (inp(3), inp(4), inp(5))
    # input_seq still orders the carried supplement (3) before the question (5): one order,
    # across Runs (§2 "包括不同 Run 之间转交的补充").
    manifest = frozen(dl.freeze(book, run_id=run(2), operation_id=op(2), input_cutoff=5))[2]
    assert manifest.input_ids == (inp(3), inp(4), inp(5))


def test_app_input_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match="question needs"):
        dl.app_input(EMPTY, question(1, run(1)), delivery_id=did(1))
    with pytest.raises(ValueError, match="never creates a Run"):
        dl.app_input(EMPTY, supplement(1, None), delivery_id=did(1), run_id=run(1))


# --- T_FREEZE and retries ------------------------------------------------------------------


@pytest.mark.covers("CTX-5.28", "CTX-5.29", "CTX-5.33")
def test_supplement_received_during_compaction_joins_the_next_request() -> None:
    # §12 "压缩中收到补充": prepare_context fixed cutoff 2 for op 1; while it compacts, S3
    # arrives. The freeze keeps cutoff 2 (the set is never enlarged before the freeze); S3 is
    # taken by the next Loop's request, verbatim and in order.
    book = ask(EMPTY, 1, run(1), did(1))
    book = add(book, 2, did(2))
    book = add(book, 3, did(3))  # during compaction
    book, writes, manifest = frozen(dl.freeze(book, run_id=run(1), operation_id=op(1),
                                              input_cutoff=2))
    assert manifest.input_ids == (inp(1), inp(2))
    assert writes.updated == (dv(did(1), inp(1), C, target=run(1), operation=op(1)),
                              dv(did(2), inp(2), C, target=run(1), operation=op(1)))
    assert dl.pending_inputs(book, run(1)) == (inp(3),)
    book = output(book, op(1))

    book, writes, manifest = frozen(dl.freeze(book, run_id=run(1), operation_id=op(2),
                                              input_cutoff=3))
    assert manifest.input_ids == (inp(1), inp(2), inp(3))
    assert manifest.claimed_input_ids == (inp(3),)
    assert writes.updated == (dv(did(3), inp(3), C, target=run(1), operation=op(2)),)


@pytest.mark.covers("CTX-5.30", "CTX-5.14")
def test_supplement_after_the_last_cutoff_is_carried_when_the_run_ends() -> None:
    # No next Loop: the Run succeeds with S2 still pending, so APP-FINALIZE carries it.
    book = ask(EMPTY, 1, run(1), did(1))
    book = freeze(book, run(1), op(1), 1)
    book = add(book, 2, did(2))
    book = output(book, op(1))
    book, writes = ok(dl.finalize(book, run_id=run(1), carry_ids=[did(20)]))
    assert writes == WriteSet(inserted=(dv(did(20), inp(2), P, previous=did(2)),),
                              updated=(dv(did(2), inp(2), CAR, target=run(1)),))
    assert dl.pending_inputs(book, None) == (inp(2),)
    assert dl.delivered_inputs(book, run(1)) == (inp(1),)


@pytest.mark.covers("CTX-5.31", "CTX-5.32")
def test_retry_of_an_operation_reuses_its_frozen_list() -> None:
    book = ask(EMPTY, 1, run(1), did(1))
    book = add(book, 2, did(2))
    book, _, first = frozen(dl.freeze(book, run_id=run(1), operation_id=op(1), input_cutoff=2))
    book = add(book, 3, did(3))  # arrives between Attempt 1 and its retry
    # The retry reads the frozen list back: S3 is not in it.
    assert dl.frozen_inputs(book, op(1)) == first
    assert first.input_ids == (inp(1), inp(2))
    # Re-entering T_FREEZE for the same Operation (a replay after a crash) returns the stored
    # list and writes nothing; S3 stays pending.
    again_book, writes, again = frozen(dl.freeze(book, run_id=run(1), operation_id=op(1),
                                                 input_cutoff=2))
    assert again == first
    assert writes == WriteSet()
    assert writes.is_empty
    assert again_book == book
    assert dl.pending_inputs(book, run(1)) == (inp(3),)
    # A freeze of the same Operation with a wider cutoff would change its inputs: refused.
    refused(dl.freeze(book, run_id=run(1), operation_id=op(1), input_cutoff=3),
            DeliveryRejectCode.OPERATION_ALREADY_FROZEN)
    assert dl.frozen_inputs(book, op(9)) is None


@pytest.mark.covers("CTX-5.16")
def test_a_second_request_never_claims_what_the_first_holds() -> None:
    # op 1 claimed Q1 and S2 and has no output yet; op 2 (cutoff 3) claims only S3, and its
    # request still carries the Run's earlier inputs.
    book = ask(EMPTY, 1, run(1), did(1))
    book = add(book, 2, did(2))
    book = freeze(book, run(1), op(1), 2)
    book = add(book, 3, did(3))
    book, writes, manifest = frozen(dl.freeze(book, run_id=run(1), operation_id=op(2),
                                              input_cutoff=3))
    assert manifest.claimed_input_ids == (inp(3),)
    assert manifest.input_ids == (inp(1), inp(2), inp(3))
    assert writes.updated == (dv(did(3), inp(3), C, target=run(1), operation=op(2)),)
    assert dl.delivery(book, did(2)).operation_id == op(1)


# --- T_FIRST_OUTPUT ------------------------------------------------------------------------


@pytest.mark.covers("CTX-5.13", "CTX-5.17", "CTX-5.18", "CTX-2.10")
def test_first_output_delivers_what_the_operation_claimed_once() -> None:
    book = ask(EMPTY, 1, run(1), did(1))
    book = add(book, 2, did(2))
    book = freeze(book, run(1), op(1), 2)
    book = add(book, 3, did(3))  # pending, not claimed by op 1
    book, writes = ok(dl.first_output(book, operation_id=op(1), receipt_ref=RECEIPT,
                                      delivered_at=at(40)))
    assert writes == WriteSet(updated=(
        dv(did(1), inp(1), DLV, target=run(1), operation=op(1), receipt=RECEIPT,
           delivered_at=at(40)),
        dv(did(2), inp(2), DLV, target=run(1), operation=op(1), receipt=RECEIPT,
           delivered_at=at(40))))
    assert dl.delivered_inputs(book, run(1)) == (inp(1), inp(2))
    assert dl.delivery(book, did(3)).state is P
    # The evidence is saved once: a later receipt (say of a retry Attempt) changes nothing.
    same_book, writes = ok(dl.first_output(book, operation_id=op(1), receipt_ref=RECEIPT_2,
                                           delivered_at=at(50)))
    assert writes == WriteSet()
    assert same_book == book
    assert dl.delivery(book, did(2)).first_output_receipt_ref == RECEIPT
    assert dl.last_delivered_run(book, inp(2)) == run(1)


# --- APP-FINALIZE and the §11 / §12 rows ---------------------------------------------------


@pytest.mark.covers("CTX-5.14", "CTX-5.23", "CTX-2.19", "CTX-2.22", "CTX-2.27")
def test_claimed_supplement_without_first_output_is_carried_once() -> None:
    # §12 "claimed 补充无首输出失败": terminal state turns it pending for the next question,
    # which carries it once, with the same UserInput id.
    book = ask(EMPTY, 1, run(1), did(1))
    book = add(book, 2, did(2))
    book = freeze(book, run(1), op(1), 2)
    # The model call fails before any first output; the Run fails.
    book, writes = ok(dl.finalize(book, run_id=run(1), carry_ids=[did(3)]))
    carried = dv(did(2), inp(2), CAR, target=run(1), operation=op(1))
    successor = dv(did(3), inp(2), P, previous=did(2))
    assert writes == WriteSet(inserted=(successor,), updated=(carried,))
    assert dl.active_run(book) is None

    q3 = question(3, run(2))
    book, writes = ok(dl.app_input(book, q3, delivery_id=did(4), run_id=run(2)))
    bound = dv(did(3), inp(2), P, target=run(2), previous=did(2))
    assert writes == WriteSet(inputs=(q3,), inserted=(dv(did(4), inp(3), P, target=run(2)),),
                              updated=(bound,))
    book = freeze(book, run(2), op(2), 3)
    assert dl.frozen_inputs(book, op(2)) == InputManifest(
        operation_id=op(2), run_id=run(2), input_cutoff=3, input_ids=(inp(2), inp(3)),
        claimed_input_ids=(inp(2), inp(3)), claimed_delivery_ids=(did(3), did(4)))
    book = output(book, op(2), minutes=45)

    # One UserInput (never re-created), two delivery records, delivered once, to Run 2.
    assert [i.input_id for i in book.inputs] == [inp(1), inp(2), inp(3)]
    assert dl.deliveries_of(book, inp(2)) == (
        carried, dv(did(3), inp(2), DLV, target=run(2), operation=op(2), previous=did(2),
                    receipt=RECEIPT, delivered_at=at(45)))
    assert dl.last_delivered_run(book, inp(2)) == run(2)
    assert dl.receive_position(book, inp(2)) == run(1)
    # The carry source Run through previous_delivery_id.
    chain = dl.delivery_chain(book, did(3))
    assert [d.delivery_id for d in chain] == [did(3), did(2)]
    assert chain[1].target_run_id == run(1)
    assert dl.live_delivery(book, inp(2)) is None


@pytest.mark.covers("CTX-11.6", "CTX-5.14", "CTX-5.30")
def test_stop_during_preparation_carries_undelivered_supplements() -> None:
    # §11 "用户在准备/压缩期间 Stop": nothing was frozen; both supplements move to the next
    # question, in receive order.
    book = ask(EMPTY, 1, run(1), did(1))
    book = add(book, 2, did(2))
    book = add(book, 3, did(3))
    assert dl.to_carry(book, run(1)) == (dv(did(2), inp(2), P, target=run(1)),
                                         dv(did(3), inp(3), P, target=run(1)))
    book, writes = ok(dl.finalize(book, run_id=run(1), carry_ids=[did(12), did(13)]))
    assert writes == WriteSet(
        inserted=(dv(did(12), inp(2), P, previous=did(2)),
                  dv(did(13), inp(3), P, previous=did(3))),
        updated=(dv(did(2), inp(2), CAR, target=run(1)),
                 dv(did(3), inp(3), CAR, target=run(1))))
    assert dl.pending_inputs(book, None) == (inp(2), inp(3))


@pytest.mark.covers("CTX-11.6", "CTX-5.14")
def test_stop_during_compaction_of_a_later_loop_carries_only_the_undelivered() -> None:
    # Loop 1 delivered Q1 and S2; Loop 2 is compacting with cutoff 4 (S3, S4 within it) and S5
    # arrives; the user stops. S3, S4 and S5 move on; the delivered ones do not.
    book = ask(EMPTY, 1, run(1), did(1))
    book = add(book, 2, did(2))
    book = freeze(book, run(1), op(1), 2)
    book = output(book, op(1))
    book = add(book, 3, did(3))
    book = add(book, 4, did(4))
    book = add(book, 5, did(5))
    book, writes = ok(dl.finalize(book, run_id=run(1), carry_ids=[did(13), did(14), did(15)]))
    assert writes.updated == tuple(dv(did(s), inp(s), CAR, target=run(1)) for s in (3, 4, 5))
    assert writes.inserted == tuple(dv(did(10 + s), inp(s), P, previous=did(s))
                                    for s in (3, 4, 5))
    assert dl.delivered_inputs(book, run(1)) == (inp(1), inp(2))


@pytest.mark.covers("CTX-5.14", "CTX-5.1")
def test_delivered_supplement_is_never_carried_and_a_question_stays_with_its_run() -> None:
    # S2 was delivered by op 1, S3 claimed by op 2 which fails before output: only S3 moves.
    book = ask(EMPTY, 1, run(1), did(1))
    book = add(book, 2, did(2))
    book = freeze(book, run(1), op(1), 2)
    book = output(book, op(1))
    book = add(book, 3, did(3))
    book = freeze(book, run(1), op(2), 3)
    book, writes = ok(dl.finalize(book, run_id=run(1), carry_ids=[did(13)]))
    assert writes == WriteSet(inserted=(dv(did(13), inp(3), P, previous=did(3)),),
                              updated=(dv(did(3), inp(3), CAR, target=run(1), operation=op(2)),))

    # A question that never reached the model (stop before first output) is not carried: it
    # keeps its claimed delivery in its ended Run and is not part of the next Run's inputs.
    book = ask(book, 4, run(2), did(4))
    book = freeze(book, run(2), op(3), 4)
    book, writes = ok(dl.finalize(book, run_id=run(2), carry_ids=[did(23)]))
    assert [d.input_id for d in writes.updated] == [inp(3)]
    assert dl.delivery(book, did(4)) == dv(did(4), inp(4), C, target=run(2), operation=op(3))
    assert dl.last_delivered_run(book, inp(4)) is None
    assert dl.receive_position(book, inp(4)) == run(2)
    book = ask(book, 5, run(3), did(5))
    manifest = frozen(dl.freeze(book, run_id=run(3), operation_id=op(4), input_cutoff=5))[2]
    assert manifest.input_ids == (inp(3), inp(5))


def test_finalize_without_anything_to_carry_writes_nothing() -> None:
    book = ask(EMPTY, 1, run(1), did(1))
    book = freeze(book, run(1), op(1), 1)
    book = output(book, op(1))
    book, writes = ok(dl.finalize(book, run_id=run(1), carry_ids=[]))
    assert writes == WriteSet()
    assert dl.active_run(book) is None


# --- illegal transitions -------------------------------------------------------------------

PENDING_R1 = dv(did(1), inp(1), P, target=run(1))
UNBOUND = dv(did(1), inp(1), P)
CLAIMED_OP1 = dv(did(1), inp(1), C, target=run(1), operation=op(1))
DELIVERED_OP1 = dv(did(1), inp(1), DLV, target=run(1), operation=op(1), receipt=RECEIPT,
                   delivered_at=at(5))
CARRIED_OP1 = dv(did(1), inp(1), CAR, target=run(1), operation=op(1))


def claim_r1(d: UserInputDelivery) -> object:
    return dl.claim(d, run_id=run(1), operation_id=op(1))


def deliver_op1(d: UserInputDelivery) -> object:
    return dl.deliver(d, operation_id=op(1), receipt_ref=RECEIPT, delivered_at=at(6))


def carry_to_d9(d: UserInputDelivery) -> object:
    return dl.carry(d, successor_id=did(9))


def bind_r2(d: UserInputDelivery) -> object:
    return dl.bind(d, run_id=run(2))


@pytest.mark.covers("CTX-5.16", "CTX-5.17", "CTX-2.22")
@pytest.mark.parametrize(("step", "delivery", "code"), [
    (claim_r1, DELIVERED_OP1, DeliveryRejectCode.DELIVERY_ALREADY_DELIVERED),
    (claim_r1, CLAIMED_OP1, DeliveryRejectCode.DELIVERY_ALREADY_CLAIMED),
    (claim_r1, CARRIED_OP1, DeliveryRejectCode.DELIVERY_ALREADY_CARRIED),
    (claim_r1, UNBOUND, DeliveryRejectCode.DELIVERY_UNBOUND),
    (lambda d: dl.claim(d, run_id=run(2), operation_id=op(1)), PENDING_R1,
     DeliveryRejectCode.DELIVERY_OTHER_RUN),
    (deliver_op1, PENDING_R1, DeliveryRejectCode.DELIVERY_NOT_CLAIMED),
    (deliver_op1, DELIVERED_OP1, DeliveryRejectCode.DELIVERY_ALREADY_DELIVERED),
    (deliver_op1, CARRIED_OP1, DeliveryRejectCode.DELIVERY_ALREADY_CARRIED),
    (lambda d: dl.deliver(d, operation_id=op(2), receipt_ref=RECEIPT, delivered_at=at(6)),
     CLAIMED_OP1, DeliveryRejectCode.DELIVERY_OTHER_OPERATION),
    (carry_to_d9, DELIVERED_OP1, DeliveryRejectCode.DELIVERY_ALREADY_DELIVERED),
    (carry_to_d9, CARRIED_OP1, DeliveryRejectCode.DELIVERY_ALREADY_CARRIED),
    (bind_r2, PENDING_R1, DeliveryRejectCode.DELIVERY_ALREADY_BOUND),
    (bind_r2, CLAIMED_OP1, DeliveryRejectCode.DELIVERY_ALREADY_CLAIMED),
], ids=["claim-delivered", "claim-claimed", "claim-carried", "claim-unbound", "claim-other-run",
        "deliver-pending", "deliver-delivered", "deliver-carried", "deliver-other-operation",
        "carry-delivered", "carry-carried", "bind-bound", "bind-claimed"])
def test_illegal_delivery_steps_are_refused(step: Callable[[UserInputDelivery], object],
                                            delivery: UserInputDelivery,
                                            code: DeliveryRejectCode) -> None:
    refused(step(delivery), code)


def test_legal_delivery_steps() -> None:
    # The four arrows of the state graph, field by field.
    assert dl.bind(UNBOUND, run_id=run(1)) == PENDING_R1
    assert claim_r1(PENDING_R1) == CLAIMED_OP1
    assert dl.deliver(CLAIMED_OP1, operation_id=op(1), receipt_ref=RECEIPT,
                      delivered_at=at(5)) == DELIVERED_OP1
    assert carry_to_d9(CLAIMED_OP1) == (CARRIED_OP1, dv(did(9), inp(1), P, previous=did(1)))
    assert carry_to_d9(PENDING_R1) == (dv(did(1), inp(1), CAR, target=run(1)),
                                       dv(did(9), inp(1), P, previous=did(1)))


def _running() -> DeliveryBook:
    """Run 1 active: Q1 delivered by op 1, S2 claimed by op 2, S3 pending; inputs 1..3."""
    book = ask(EMPTY, 1, run(1), did(1))
    book = freeze(book, run(1), op(1), 1)
    book = output(book, op(1))
    book = add(book, 2, did(2))
    book = freeze(book, run(1), op(2), 2)
    return add(book, 3, did(3))


def _ended() -> DeliveryBook:
    return end(_running(), run(1), did(12), did(13))


RUNNING = _running()
ENDED = _ended()

BOOK_CASES: list[tuple[str, Callable[[], object], DeliveryRejectCode]] = [
    ("seq-gap", lambda: dl.app_input(RUNNING, supplement(5, run(1)), delivery_id=did(5)),
     DeliveryRejectCode.INPUT_SEQ_OUT_OF_ORDER),
    ("seq-repeat", lambda: dl.app_input(
        RUNNING, supplement(3, run(1)).model_copy(update={"input_id": inp(99)}),
        delivery_id=did(5)), DeliveryRejectCode.INPUT_SEQ_OUT_OF_ORDER),
    ("first-seq-not-1", lambda: dl.app_input(EMPTY, question(2, run(1)), delivery_id=did(1),
                                             run_id=run(1)),
     DeliveryRejectCode.INPUT_SEQ_OUT_OF_ORDER),
    ("duplicate-input", lambda: dl.app_input(
        RUNNING, supplement(4, run(1)).model_copy(update={"input_id": inp(2)}),
        delivery_id=did(5)), DeliveryRejectCode.DUPLICATE_INPUT_ID),
    ("duplicate-delivery", lambda: dl.app_input(RUNNING, supplement(4, run(1)),
                                                delivery_id=did(2)),
     DeliveryRejectCode.DUPLICATE_DELIVERY_ID),
    ("other-session", lambda: dl.app_input(EMPTY, question(1, run(1), OTHER_SESSION),
                                           delivery_id=did(1), run_id=run(1)),
     DeliveryRejectCode.SESSION_MISMATCH),
    ("question-while-active", lambda: dl.app_input(RUNNING, question(4, run(2)),
                                                   delivery_id=did(4), run_id=run(2)),
     DeliveryRejectCode.RUN_ALREADY_ACTIVE),
    ("run-id-reused", lambda: dl.app_input(ENDED, question(4, run(1)), delivery_id=did(4),
                                           run_id=run(1)),
     DeliveryRejectCode.DUPLICATE_RUN_ID),
    ("question-origin", lambda: dl.app_input(ENDED, question(4, run(3)), delivery_id=did(4),
                                             run_id=run(2)),
     DeliveryRejectCode.ORIGIN_RUN_MISMATCH),
    ("supplement-to-ended-run", lambda: dl.app_input(ENDED, supplement(4, run(1)),
                                                     delivery_id=did(4)),
     DeliveryRejectCode.RUN_ENDED),
    ("supplement-origin", lambda: dl.app_input(RUNNING, supplement(4, None), delivery_id=did(4)),
     DeliveryRejectCode.ORIGIN_RUN_MISMATCH),
    ("freeze-ended-run", lambda: dl.freeze(ENDED, run_id=run(1), operation_id=op(3),
                                           input_cutoff=3),
     DeliveryRejectCode.RUN_ENDED),
    ("freeze-unknown-run", lambda: dl.freeze(RUNNING, run_id=run(7), operation_id=op(3),
                                             input_cutoff=3),
     DeliveryRejectCode.UNKNOWN_RUN),
    ("cutoff-ahead", lambda: dl.freeze(RUNNING, run_id=run(1), operation_id=op(3),
                                       input_cutoff=4),
     DeliveryRejectCode.CUTOFF_AHEAD_OF_INPUTS),
    ("cutoff-regressed", lambda: dl.freeze(RUNNING, run_id=run(1), operation_id=op(3),
                                           input_cutoff=1),
     DeliveryRejectCode.CUTOFF_REGRESSED),
    ("operation-refrozen", lambda: dl.freeze(RUNNING, run_id=run(1), operation_id=op(2),
                                             input_cutoff=3),
     DeliveryRejectCode.OPERATION_ALREADY_FROZEN),
    ("first-output-unknown-operation", lambda: dl.first_output(
        RUNNING, operation_id=op(7), receipt_ref=RECEIPT, delivered_at=at(9)),
     DeliveryRejectCode.UNKNOWN_OPERATION),
    ("late-first-output", lambda: dl.first_output(ENDED, operation_id=op(2), receipt_ref=RECEIPT,
                                                  delivered_at=at(9)),
     DeliveryRejectCode.RUN_ENDED),
    ("finalize-twice", lambda: dl.finalize(ENDED, run_id=run(1), carry_ids=[]),
     DeliveryRejectCode.RUN_ENDED),
    ("finalize-unknown-run", lambda: dl.finalize(RUNNING, run_id=run(7), carry_ids=[]),
     DeliveryRejectCode.UNKNOWN_RUN),
    ("carry-ids-short", lambda: dl.finalize(RUNNING, run_id=run(1), carry_ids=[did(12)]),
     DeliveryRejectCode.CARRY_IDS_MISMATCH),
    ("carry-ids-repeat", lambda: dl.finalize(RUNNING, run_id=run(1),
                                             carry_ids=[did(12), did(12)]),
     DeliveryRejectCode.DUPLICATE_DELIVERY_ID),
    ("carry-ids-used", lambda: dl.finalize(RUNNING, run_id=run(1), carry_ids=[did(12), did(1)]),
     DeliveryRejectCode.DUPLICATE_DELIVERY_ID),
]


@pytest.mark.covers("CTX-2.7", "CTX-2.2", "CTX-5.31")
@pytest.mark.parametrize(("attempt", "code"), [(a, c) for _, a, c in BOOK_CASES],
                         ids=[name for name, _, _ in BOOK_CASES])
def test_illegal_commits_are_refused(attempt: Callable[[], object],
                                     code: DeliveryRejectCode) -> None:
    refused(attempt(), code)


def test_cutoff_before_the_question_is_refused() -> None:
    # Run 2's question is input 4; a cutoff of 3 would leave it out of its own request.
    book = ask(ENDED, 4, run(2), did(4))
    refused(dl.freeze(book, run_id=run(2), operation_id=op(3), input_cutoff=3),
            DeliveryRejectCode.CUTOFF_BEFORE_QUESTION)


def test_fixtures_are_what_their_names_say() -> None:
    # Guards the illegal-commit table: each refusal there must come from the rule it names.
    assert [d.state for d in RUNNING.deliveries] == [DLV, C, P]
    assert dl.active_run(ENDED) is None
    assert dl.pending_inputs(ENDED, None) == (inp(2), inp(3))


def test_queries_of_unknown_ids_are_programming_errors() -> None:
    with pytest.raises(KeyError):
        dl.user_input(RUNNING, inp(99))
    with pytest.raises(KeyError):
        dl.delivery(RUNNING, did(99))
    with pytest.raises(KeyError):
        dl.receive_position(RUNNING, inp(99))
    with pytest.raises(KeyError):
        dl.last_delivered_run(RUNNING, inp(99))
    with pytest.raises(KeyError):
        dl.pending_inputs(RUNNING, run(99))
    with pytest.raises(KeyError):
        dl.delivered_inputs(RUNNING, run(99))
    with pytest.raises(KeyError):
        dl.to_carry(RUNNING, run(99))
