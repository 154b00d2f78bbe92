"""§2 / §5 delivery lifecycle, the way in: APP-INPUT (a question creates its Run, supplements wait,
bind and are received in order), T_FREEZE (a request claims what it sends; a retry reuses its
frozen list) and T_FIRST_OUTPUT (the first output delivers what the operation claimed).

Every expected delivery and write set is written out by hand from the design's text (the comment
beside it says which rule), never taken from the implementation's output.
"""

import pytest

from ctxspec.reference import delivery as dl
from ctxspec.reference.contracts import InputKind, PayloadRef
from ctxspec.reference.delivery import DeliveryRejectCode, InputManifest, WriteSet
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
    frozen,
    inp,
    ok,
    op,
    output,
    question,
    refused,
    run,
    supplement,
)

RECEIPT_2 = PayloadRef(digest="sha256:" + "ef" * 32, size_bytes=41,
                       media_type="application/json")


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
