"""§2 / §5 delivery lifecycle, the way out: APP-FINALIZE carries what was claimed or pending but
never delivered, once, with the §11 / §12 rows about supplements and a stop.

Every expected delivery and write set is written out by hand from the design's text (the comment
beside it says which rule), never taken from the implementation's output.
"""

import pytest

from ctxspec.reference import delivery as dl
from ctxspec.reference.delivery import InputManifest, WriteSet
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
    freeze,
    frozen,
    inp,
    ok,
    op,
    output,
    question,
    run,
)

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
