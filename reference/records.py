"""Identities and ordering of raw records (§1, §2).

Raw records are appended, never overwritten (CTX-1.4, CTX-1.9). A context's records are ordered by
context_seq, strictly increasing from 1 and unique per context (CTX-2.11, CTX-2.23); a logical
result is appended once per (operation_id, message_kind, logical_result_key) (CTX-2.23). The three
orders input_seq, context_seq and run_seq are separate counters that never stand in for one
another (CTX-2.26 to CTX-2.29); the protocol order of a batch's results is the action ordinal of its
calls, never the order in which the calls completed (CTX-2.28, CTX-6.1).

:class:`ContextLog` is the append-only log of one context as a value; :func:`append` returns the
new log and the records to write, or a rejection. Re-appending exactly the same record is an
idempotent no-op (what a replayed commit does); a different record under a taken key is refused.
"""

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, TypeVar
from uuid import UUID

from ctxspec.reference.contracts import ContextRecord

LogicalKey = tuple[UUID, str, str]
"""(operation_id, message_kind, logical_result_key)."""


@dataclass(frozen=True)
class AppendRejected:
    """Why an append was refused: the key that is taken or the order that is broken."""

    code: Literal["RECORD_OVERWRITE", "CONTEXT_SEQ_GAP", "WRONG_CONTEXT", "RECORD_ID_REUSED"]
    reason: str


@dataclass(frozen=True)
class ContextLog:
    """The raw records of one context as an immutable value: head, and the keys already used."""

    context_id: UUID
    head: int = 0
    by_seq: Mapping[int, ContextRecord] = field(default_factory=dict)
    logical_keys: Mapping[LogicalKey, UUID] = field(default_factory=dict)


@dataclass(frozen=True)
class Appended:
    log: ContextLog
    written: tuple[ContextRecord, ...]
    """Only the records that are new; a replayed identical record is not written again."""


def append(log: ContextLog, records: Sequence[ContextRecord],
           logical_keys: Sequence[str | None] | None = None) -> Appended | AppendRejected:
    """Append records in one commit: all of them or none.  CTX-1.4, CTX-1.9, CTX-2.11, CTX-2.23

    Each new record takes the next context_seq; an identical record already at its seq is a
    no-op; anything else at a taken seq, a gap, another context's record, or a second record for
    the same logical result key is refused without writing anything.
    """
    keys = list(logical_keys) if logical_keys is not None else [None] * len(records)
    if len(keys) != len(records):
        raise ValueError("one logical key (or None) per record")
    by_seq = dict(log.by_seq)
    taken_keys = dict(log.logical_keys)
    record_ids = {record.record_id for record in by_seq.values()}
    head = log.head
    written: list[ContextRecord] = []
    for record, key in zip(records, keys, strict=True):
        if record.context_id != log.context_id:
            return AppendRejected("WRONG_CONTEXT", f"record {record.record_id} belongs to "
                                  f"context {record.context_id}, not {log.context_id}")
        existing = by_seq.get(record.context_seq)
        if existing is not None:
            if existing == record:
                continue
            return AppendRejected("RECORD_OVERWRITE", f"context_seq {record.context_seq} already "
                                  "holds another record; raw records are never overwritten")
        if record.context_seq != head + 1:
            return AppendRejected("CONTEXT_SEQ_GAP", f"next context_seq is {head + 1}, got "
                                  f"{record.context_seq}")
        if record.record_id in record_ids:
            return AppendRejected("RECORD_ID_REUSED", f"record_id {record.record_id} is taken")
        if key is not None:
            if record.operation_id is None:
                raise ValueError("a logical result key needs the record's operation_id")
            logical = (record.operation_id, record.message_kind, key)
            if logical in taken_keys:
                return AppendRejected("RECORD_OVERWRITE", f"result {logical} was appended "
                                      f"already as record {taken_keys[logical]}")
            taken_keys[logical] = record.record_id
        by_seq[record.context_seq] = record
        record_ids.add(record.record_id)
        head = record.context_seq
        written.append(record)
    return Appended(ContextLog(log.context_id, head, by_seq, taken_keys), tuple(written))


Item = TypeVar("Item")


def in_protocol_order(results: Iterable[tuple[int, Item]]) -> list[Item]:
    """A batch's results in the action order of their calls, whatever order they completed in.

    ``results`` pairs each result with its call's action ordinal.  CTX-2.28, CTX-6.1
    """
    ordered = sorted(results, key=lambda pair: pair[0])
    ordinals = [ordinal for ordinal, _ in ordered]
    if len(set(ordinals)) != len(ordinals):
        raise ValueError(f"two results for one action ordinal: {ordinals}")
    return [record for _, record in ordered]


@dataclass(frozen=True)
class Orders:
    """The three separate counters of §2: the next input_seq of the Session, the next
    context_seq of each context and the next run_seq of each Run's client event stream."""

    next_input_seq: int = 1
    next_context_seq: Mapping[UUID, int] = field(default_factory=dict)
    next_run_seq: Mapping[UUID, int] = field(default_factory=dict)

    def take_input_seq(self) -> tuple[int, "Orders"]:
        """Receive a user input (a question or a supplement).  CTX-2.7, CTX-2.27"""
        return self.next_input_seq, Orders(self.next_input_seq + 1, self.next_context_seq,
                                           self.next_run_seq)

    def take_context_seq(self, context_id: UUID) -> tuple[int, "Orders"]:
        """Commit a message to one role's context.  CTX-2.11, CTX-2.28"""
        seq = self.next_context_seq.get(context_id, 1)
        return seq, Orders(self.next_input_seq, {**self.next_context_seq, context_id: seq + 1},
                           self.next_run_seq)

    def take_run_seq(self, run_id: UUID) -> tuple[int, "Orders"]:
        """Publish one low-frequency client event of a Run (lifecycle, progress, terminal
        state; never a token fragment).  CTX-2.29"""
        seq = self.next_run_seq.get(run_id, 1)
        return seq, Orders(self.next_input_seq, self.next_context_seq,
                           {**self.next_run_seq, run_id: seq + 1})
