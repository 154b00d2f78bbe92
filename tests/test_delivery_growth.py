"""A delivery book grown input by input stays a value (Q500, issue #35): its inputs and
deliveries share one list with the books they grew from, so a transition on an older book —
two branches of one lineage — never shows either branch the other's inputs."""

from ctxspec.reference import delivery as dl
from ctxspec.reference.contracts import DeliveryState
from tests.delivery_books import EMPTY, P, add, ask, did, dv, end, inp, run, supplement


def test_two_books_grown_from_one_keep_their_own_inputs() -> None:
    asked = ask(EMPTY, 1, run(1), did(1))
    once = add(asked, 2, did(2))
    # Two branches from ``once``: a third input, then another third input with other ids.
    left = add(once, 3, did(3))
    right = dl.app_input(once, supplement(3, run(1)).model_copy(update={"input_id": inp(9)}),
                         delivery_id=did(9))
    assert not isinstance(right, dl.DeliveryRejected), right
    right_book = right[0]
    # Written out by hand: each branch holds q1, s2 and its own third input, nothing else.
    assert [i.input_id for i in once.inputs] == [inp(1), inp(2)]
    assert [i.input_id for i in left.inputs] == [inp(1), inp(2), inp(3)]
    assert [i.input_id for i in right_book.inputs] == [inp(1), inp(2), inp(9)]
    assert left.deliveries[-1] == dv(did(3), inp(3), P, target=run(1))
    assert right_book.deliveries[-1] == dv(did(9), inp(9), P, target=run(1))
    assert len(once.deliveries) == 2
    # Their lookups answer from their own items: the other branch's input is unknown to each.
    assert dl.user_input(left, inp(3)).input_seq == 3
    assert inp(9) not in {i.input_id for i in left.inputs}
    assert [d.delivery_id for d in dl.deliveries_of(right_book, inp(9))] == [did(9)]
    assert dl.pending_inputs(left, run(1)) == (inp(1), inp(2), inp(3))
    assert dl.pending_inputs(right_book, run(1)) == (inp(1), inp(2), inp(9))


def test_a_grown_book_equals_the_book_built_from_tuples() -> None:
    book = ask(EMPTY, 1, run(1), did(1))
    for seq in range(2, 6):
        book = add(book, seq, did(seq))
    ended = end(book, run(1), *(did(10 + n) for n in range(4)))
    # The same facts given as plain tuples (as a restore builds a book) make an equal book.
    rebuilt = dl.DeliveryBook(session_id=ended.session_id, inputs=tuple(ended.inputs),
                              deliveries=tuple(ended.deliveries), run_ids=tuple(ended.run_ids),
                              active_run_id=None, manifests=tuple(ended.manifests))
    assert ended == rebuilt and hash(ended) == hash(rebuilt)
    carried = [d for d in ended.deliveries if d.state is DeliveryState.CARRIED]
    assert [d.input_id for d in carried] == [inp(2), inp(3), inp(4), inp(5)]
