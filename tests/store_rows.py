"""Rows for the reference runtime's store tests (§2's records, operations and inputs): a raw record
of a context, an operation and a user input, of one session at one time."""

from datetime import UTC, datetime

from ctxspec.reference.contracts import (
    ContextRecord,
    InputKind,
    MessageRole,
    Operation,
    OperationPurpose,
    OperationState,
    UserInput,
)
from ctxspec.reference.effective import RawRecord
from tests.builders import ref, uuid

T0 = datetime(2026, 10, 15, 9, 0, tzinfo=UTC)
SESSION, AGENT = uuid(1), uuid(2)


def raw(context: int, seq: int, *, kind: str = "assistant", operation: int | None = None,
        text: str = "x", record: int | None = None) -> RawRecord:
    role = MessageRole.USER if kind == "user_ref" else MessageRole.ASSISTANT
    contract = ContextRecord(
        record_id=uuid(record if record is not None else context * 100_000 + seq),
        context_id=uuid(context), context_seq=seq, run_id=uuid(7), role=role,
        message_kind=kind, payload_ref=ref(text),
        operation_id=None if operation is None else uuid(operation), call_id=None,
        origin_input_id=uuid(8) if kind == "user_ref" else None)
    return RawRecord(contract, {"text": text})


def operation(n: int, purpose_key: str) -> Operation:
    return Operation(operation_id=uuid(n), run_id=uuid(7), node_task_id=uuid(9),
                     purpose=OperationPurpose.MODEL, purpose_key=purpose_key,
                     state=OperationState.PREPARED)


def user_input(n: int, seq: int) -> UserInput:
    return UserInput(input_id=uuid(n), session_id=SESSION, input_seq=seq, origin_run_id=None,
                     kind=InputKind.SUPPLEMENT, body_ref=ref(f"s{seq}"), received_at=T0)
