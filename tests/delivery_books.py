"""Builders of the §2 / §5 delivery lifecycle's values for the delivery tests: ids, inputs,
deliveries, and a book driven through APP-INPUT, T_FREEZE, T_FIRST_OUTPUT and APP-FINALIZE by the
pure transitions, each step checked accepted."""

from datetime import UTC, datetime, timedelta
from uuid import UUID

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


T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
BODY = PayloadRef(digest="sha256:" + "ab" * 32, size_bytes=12)
RECEIPT = PayloadRef(digest="sha256:" + "cd" * 32, size_bytes=40, media_type="application/json")


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
