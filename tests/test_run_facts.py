"""The Python adapters' shared Run book (ctxspec/adapters/run_facts.py) on §5's carrying, by
hand: a supplement no Run took joins the next question before it; claimed by a request and
not delivered when its Run ends, it is carried to the next question once, by a new delivery
that names the one it replaces; the question itself is never carried."""

from uuid import NAMESPACE_URL, uuid5

from ctxspec.adapters.run_facts import Run, RunBook


def _id(n: int) -> str:
    return str(uuid5(NAMESPACE_URL, f"ctxspec:toy:{n}"))


def test_an_undelivered_supplement_is_carried_once_to_the_next_question() -> None:
    events: list[dict[str, object]] = []
    book: RunBook[Run] = RunBook("toy", events)
    assert book.supplement("early") is None  # no Run yet: ids 1 (input) and 2 (delivery)
    book.open(Run(book.next_no(), book.new_id()), "question")  # Run id 3, question 4 and 5
    run = book.runs[0]
    assert [d.input_id for d in run.inputs] == [_id(1), _id(4)], "the supplement comes first"
    book.claim([{"kind": "user_ref", "input_id": _id(1)}])
    book.end(run, "failed", "MODEL_FAILED")
    deliveries = [(e["input_id"], e["delivery_id"], e["state"], e["target_run_id"],
                   e["previous_delivery_id"]) for e in events if e["kind"] == "delivery"]
    assert deliveries == [
        (_id(1), _id(2), "pending", None, None),
        (_id(1), _id(2), "pending", _id(3), None),
        (_id(4), _id(5), "pending", _id(3), None),
        (_id(1), _id(2), "claimed", _id(3), None),
        (_id(1), _id(2), "carried", _id(3), None),
        (_id(1), _id(6), "pending", None, _id(2))], "§5: claimed, then carried by a successor"
    assert [(d.input_id, d.delivery_id) for d in book.waiting] == [(_id(1), _id(6))]
    told = [(e["event"], e["run_seq"], e.get("error_code")) for e in events
            if e["kind"] == "client_event"]
    assert told == [("run_started", 1, None), ("run_ended", 2, "MODEL_FAILED")]
    assert book.active() is None, "an ended Run is no longer the active one"
