"""§2 / §5 delivery lifecycle, what is refused: the illegal steps of one delivery's state graph
(and its four legal arrows), the illegal commits on a book, and queries of unknown ids.

Every expected refusal is written out by hand from the design's text, never taken from the
implementation's output.
"""

from collections.abc import Callable
from uuid import UUID

import pytest

from ctxspec.reference import delivery as dl
from ctxspec.reference.contracts import UserInputDelivery
from ctxspec.reference.delivery import DeliveryBook, DeliveryRejectCode
from tests.delivery_books import (
    CAR,
    DLV,
    EMPTY,
    RECEIPT,
    C,
    P,
    add,
    ask,
    at,
    did,
    dv,
    end,
    freeze,
    inp,
    op,
    output,
    question,
    refused,
    run,
    supplement,
)

OTHER_SESSION = UUID(int=0x5E55_2022)


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
