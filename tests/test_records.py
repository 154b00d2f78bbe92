"""§1 and §2 identities and ordering: the append-only log, the three orders, protocol order."""

import pytest

from ctxspec.reference.contracts import ContextRecord, MessageRole
from ctxspec.reference.records import (
    Appended,
    AppendRejected,
    ContextLog,
    Orders,
    append,
    in_protocol_order,
)
from tests.builders import ref, uuid

CONTEXT = uuid(1)


def record(seq: int, n: int | None = None, text: str = "x", context: int = 1,
           operation: int | None = None, kind: str = "assistant") -> ContextRecord:
    return ContextRecord(record_id=uuid(100 + (n if n is not None else seq)),
                         context_id=uuid(context), context_seq=seq, run_id=uuid(2),
                         role=MessageRole.ASSISTANT, message_kind=kind, payload_ref=ref(text),
                         operation_id=uuid(operation) if operation else None, call_id=None,
                         origin_input_id=None)


def appended(result: Appended | AppendRejected) -> Appended:
    assert isinstance(result, Appended), result
    return result


@pytest.mark.covers("CTX-1.4", "CTX-1.9", "CTX-2.11")
def test_append_in_order_and_never_overwrite() -> None:
    log = appended(append(ContextLog(CONTEXT), [record(1), record(2)])).log
    assert log.head == 2
    overwrite = append(log, [record(2, n=7, text="changed")])
    assert isinstance(overwrite, AppendRejected) and overwrite.code == "RECORD_OVERWRITE"
    gap = append(log, [record(4)])
    assert isinstance(gap, AppendRejected) and gap.code == "CONTEXT_SEQ_GAP"
    other = append(log, [record(3, context=9)])
    assert isinstance(other, AppendRejected) and other.code == "WRONG_CONTEXT"
    reused = append(log, [record(3, n=1)])
    assert isinstance(reused, AppendRejected) and reused.code == "RECORD_ID_REUSED"


@pytest.mark.covers("CTX-2.23")
def test_replayed_append_is_idempotent_and_all_or_nothing() -> None:
    log = appended(append(ContextLog(CONTEXT), [record(1)])).log
    replay = appended(append(log, [record(1), record(2)]))
    assert replay.written == (record(2),)
    assert replay.log.head == 2
    # One bad record refuses the whole commit: the log value is unchanged.
    refused = append(replay.log, [record(3), record(5)])
    assert isinstance(refused, AppendRejected)
    assert replay.log.head == 2 and 3 not in replay.log.by_seq


@pytest.mark.covers("CTX-2.23")
def test_one_record_per_logical_result_key() -> None:
    first = appended(append(ContextLog(CONTEXT), [record(1, operation=5, kind="tool_result")],
                            logical_keys=["result"])).log
    again = append(first, [record(2, operation=5, kind="tool_result")], logical_keys=["result"])
    assert isinstance(again, AppendRejected) and again.code == "RECORD_OVERWRITE"
    other_key = append(first, [record(2, operation=5, kind="tool_result")],
                       logical_keys=["result-2"])
    assert isinstance(other_key, Appended)


@pytest.mark.covers("CTX-2.26", "CTX-2.27", "CTX-2.29")
def test_three_orders_are_separate_counters() -> None:
    orders = Orders()
    seq, orders = orders.take_input_seq()
    assert seq == 1
    first_ctx, orders = orders.take_context_seq(uuid(1))
    other_ctx, orders = orders.take_context_seq(uuid(2))
    event, orders = orders.take_run_seq(uuid(3))
    seq2, orders = orders.take_input_seq()
    second_ctx, orders = orders.take_context_seq(uuid(1))
    # Each counter advanced only by its own kind of event.
    assert (seq, seq2, first_ctx, second_ctx, other_ctx, event) == (1, 2, 1, 2, 1, 1)


@pytest.mark.covers("CTX-2.28", "CTX-6.1")
def test_protocol_order_is_action_ordinal_not_completion_order() -> None:
    completed = [(3, "c"), (1, "a"), (2, "b")]  # the order results were saved in
    assert in_protocol_order(completed) == ["a", "b", "c"]
    with pytest.raises(ValueError, match="two results for one action ordinal"):
        in_protocol_order([(1, "a"), (1, "b")])
