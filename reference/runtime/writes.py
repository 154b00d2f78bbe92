"""The rows a RuntimeCommit writes (§3 "一致提交", §10): a :class:`Write` per row, built from
the design's contracts (:func:`insert_doc`, :func:`update_doc`, :func:`record_write`,
:func:`revision_write`, :func:`checkpoint_write`, ...), the column values they are stored as,
and :func:`apply`, which runs one inside the CommitCoordinator's transaction.
"""

import functools
import hashlib
import json
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from typing import Literal, cast
from uuid import UUID

from pydantic import BaseModel

from ctxspec.reference.contracts import (
    Attempt,
    Batch,
    CompactionEpisode,
    ContextMutation,
    ContextSnapshot,
    EffectiveContextRevision,
    HookInvocation,
    Operation,
    PayloadRef,
    RoleContext,
    Run,
    UserInput,
    UserInputDelivery,
)
from ctxspec.reference.effective import Override, RawRecord
from ctxspec.reference.registry import ABSENT, JSON, _Absent
from ctxspec.reference.runtime.schema import TABLES, SqlValue

# --- values ---------------------------------------------------------------------------------


def _json_default(value: object) -> object:
    if isinstance(value, UUID):
        return str(value)
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, _Absent):
        return {"$absent": True}
    raise TypeError(f"{type(value).__name__} is not storable as JSON")


_ENCODER = json.JSONEncoder(default=_json_default, ensure_ascii=False, separators=(",", ":"))
"""One encoder for every document: ``json.dumps`` with options builds a new one per call
(every commit's checkpoint and appended records, issue #20)."""


def dumps(value: object) -> str:
    """JSON text of a document (UUIDs, contracts, enums and times as their JSON forms)."""
    return _ENCODER.encode(value)


def _as_is(value: object) -> SqlValue:
    return cast(SqlValue, value)


def _flag(value: object) -> SqlValue:
    return 1 if value else 0


def _contract_json(value: object) -> SqlValue:
    return cast(BaseModel, value).model_dump_json()


_COLUMN: dict[type, Callable[[object], SqlValue]] = {
    str: _as_is, int: _as_is, type(None): _as_is, bytes: _as_is, float: _as_is, UUID: str,
    bool: _flag, dict: dumps, list: dumps, tuple: dumps}
"""How a value of exactly this type is stored (the common types; a subclass, an enum or a
contract is resolved once per type by :func:`sql_value` and added here)."""


def sql_value(value: object) -> SqlValue:
    """A Python value as the column value it is stored as: a UUID as its text, a contract as its
    JSON (``model_dump_json()``), a mapping or sequence as JSON text, an enum as its value."""
    convert = _COLUMN.get(type(value))
    if convert is None:
        convert = _COLUMN[type(value)] = _converter(type(value))
    return convert(value)


def _converter(kind: type) -> Callable[[object], SqlValue]:
    if issubclass(kind, Enum):
        return lambda value: sql_value(cast(Enum, value).value)
    if issubclass(kind, bool):
        return _flag
    if issubclass(kind, str | bytes | float | int):
        return _as_is
    if issubclass(kind, UUID):
        return str
    if issubclass(kind, BaseModel):
        return _contract_json
    if issubclass(kind, Mapping | list | tuple):
        return dumps
    raise TypeError(f"{kind.__name__} is not a storable column value")


def _uuid(value: object) -> UUID | None:
    return None if value is None else UUID(str(value))


def encode_overrides(overrides: Mapping[tuple[UUID, str], Override]) -> str:
    """The overrides in force at a revision as the ``revisions.overrides`` JSON: a list of
    ``[record_id, field_key, value, mutation_id]``, a deleted field's value as
    ``{"$absent": true}``, sorted by record and field."""
    items = sorted(([str(record_id), key, {"$absent": True} if isinstance(o.value, _Absent)
                     else o.value, str(o.mutation_id)]
                    for (record_id, key), o in overrides.items()),
                   key=lambda item: (item[0], item[1]))
    return dumps(items)


def decode_overrides(text: str) -> dict[UUID, dict[str, Override]]:
    """``revisions.overrides`` back as record_id → field_key → Override."""
    by_record: dict[UUID, dict[str, Override]] = {}
    for record_id, key, value, mutation_id in json.loads(text):
        decoded = ABSENT if value == {"$absent": True} else value
        by_record.setdefault(UUID(record_id), {})[key] = Override(decoded, UUID(mutation_id))
    return by_record


# --- writes ---------------------------------------------------------------------------------

WriteKind = Literal["insert", "update", "upsert", "ensure", "delete", "sweep", "fence"]


@dataclass(frozen=True)
class Write:
    """One row write of a commit.

    - ``insert``: a new row; a duplicate primary or unique key fails the whole commit;
    - ``update``: sets the given columns of exactly one existing row, found by the ``key``
      columns (which are part of ``row``); no such row fails the whole commit;
    - ``upsert``: insert, or update the row whose ``key`` (a primary or unique key) exists;
    - ``ensure``: insert unless a row with the same ``key`` (default: the primary key) exists,
      for content-addressed rows (blobs) written in the commit that points at them;
    - ``fence``: sets the given columns of the one row whose ``key`` columns have the values
      ``expect`` gives (which may differ from the new ones); no such row fails the whole
      commit with :class:`StaleOwner` (an owner's epoch fence, ``ownership.py``).

    Values are converted by :func:`sql_value`.
    """

    table: str
    kind: WriteKind
    row: Mapping[str, object]
    key: tuple[str, ...] = ()
    expect: Mapping[str, object] | None = None


class StaleOwner(LookupError):
    """A commit's owner fence matched no row: another owner has taken the Session over since
    this one last committed, so nothing of this commit is written (§10)."""


def fence(table: str, expect: Mapping[str, object], **row: object) -> Write:
    """Set ``row``'s columns of the one row that still has the values of ``expect``."""
    return Write(table, "fence", row, tuple(expect), dict(expect))


def insert(table: str, **row: object) -> Write:
    return Write(table, "insert", row)


def update(table: str, key: str | Sequence[str], **row: object) -> Write:
    """Update the row identified by the ``key`` column(s), whose values are in ``row``."""
    return Write(table, "update", row, (key,) if isinstance(key, str) else tuple(key))


def delete(table: str, **match: object) -> Write:
    """Delete every row whose columns equal ``match`` (an Agent's records when it is deleted)."""
    return Write(table, "delete", match)


def sweep_blobs() -> Write:
    """Delete every blob no remaining row mentions: the payloads that belonged only to deleted
    records (blobs are content-addressed, so another Agent's row may still share one)."""
    return Write("blobs", "sweep", {})


def upsert(table: str, key: str | Sequence[str], **row: object) -> Write:
    return Write(table, "upsert", row, (key,) if isinstance(key, str) else tuple(key))


def blob_write(data: bytes, media_type: str = "text/plain") -> tuple[PayloadRef, Write]:
    """A blob as a write of the commit that points at it (no orphan if the commit fails)."""
    ref = payload_ref(data, media_type)
    return ref, Write("blobs", "ensure", {"digest": ref.digest, "media_type": media_type,
                                          "size_bytes": len(data), "body": data})


def payload_ref(data: bytes, media_type: str = "text/plain") -> PayloadRef:
    """The content address of ``data``: ``sha256:<hex>`` of exactly these bytes."""
    return PayloadRef(digest="sha256:" + hashlib.sha256(data).hexdigest(), size_bytes=len(data),
                      media_type=media_type)


def _doc_row(doc: BaseModel, extra: Mapping[str, object]) -> tuple[str, dict[str, object], str]:
    """(table, row, primary key column) of a contract: its key and query columns and its doc."""
    row: dict[str, object]
    match doc:
        case Run():
            table, pk = "runs", "run_id"
            row = {"run_id": doc.run_id, "session_id": doc.session_id, "run_no": doc.run_no,
                   "status": doc.status, "owner_epoch": doc.owner_epoch}
        case UserInput():
            table, pk = "user_inputs", "input_id"
            row = {"input_id": doc.input_id, "session_id": doc.session_id,
                   "input_seq": doc.input_seq, "origin_run_id": doc.origin_run_id,
                   "kind": doc.kind}
        case UserInputDelivery():
            table, pk = "deliveries", "delivery_id"
            row = {"delivery_id": doc.delivery_id, "input_id": doc.input_id,
                   "target_run_id": doc.target_run_id, "operation_id": doc.operation_id,
                   "state": doc.state, "previous_delivery_id": doc.previous_delivery_id}
        case RoleContext():
            table, pk = "role_contexts", "context_id"
            row = {"context_id": doc.context_id, "role_key": doc.role_key}
        case Operation():
            table, pk = "operations", "operation_id"
            row = {"operation_id": doc.operation_id, "run_id": doc.run_id,
                   "purpose": doc.purpose, "purpose_key": doc.purpose_key, "state": doc.state,
                   "raw_result_ref": doc.raw_result_ref,
                   "effective_result_ref": doc.effective_result_ref}
        case Attempt():
            table, pk = "attempts", "attempt_id"
            row = {"attempt_id": doc.attempt_id, "operation_id": doc.operation_id,
                   "attempt_no": doc.attempt_no, "owner_epoch": doc.owner_epoch}
        case HookInvocation():
            table, pk = "hook_invocations", "hook_invocation_id"
            row = {"hook_invocation_id": doc.hook_invocation_id,
                   "operation_id": doc.operation_id, "hook_point": doc.hook_point,
                   "chain_position": doc.chain_position}
        case Batch():
            table, pk = "batches", "batch_id"
            row = {"batch_id": doc.batch_id, "run_id": doc.run_id,
                   "model_operation_id": doc.model_operation_id}
        case CompactionEpisode():
            table, pk = "episodes", "episode_id"
            row = {"episode_id": doc.episode_id,
                   "triggering_model_operation_id": doc.triggering_model_operation_id}
        case ContextSnapshot():
            table, pk = "snapshots", "snapshot_id"
            row = {"snapshot_id": doc.snapshot_id, "context_id": doc.context_id}
        case ContextMutation():
            table, pk = "mutations", "mutation_id"
            row = {"mutation_id": doc.mutation_id, "context_id": doc.context_id,
                   "committed_revision": doc.committed_revision}
        case _:
            raise TypeError(f"no table stores {type(doc).__name__}; use record_write, "
                            "revision_write or insert()")
    row.update(extra)
    row["doc"] = doc
    return table, row, pk


def doc_key(doc: BaseModel) -> tuple[object, ...]:
    """(table, primary key value) of a contract's row: what identifies it across versions."""
    table, row, pk = _doc_row(doc, {})
    return table, row[pk]


def insert_doc(doc: BaseModel, **extra: object) -> Write:
    """Insert a contract into its table with its key columns derived from it. ``extra`` adds the
    columns the contract does not carry: ``run_id`` of a RoleContext (required), ``hook_cursor``
    of an Operation (default 0)."""
    if isinstance(doc, RoleContext) and "run_id" not in extra:
        raise ValueError("a RoleContext row needs the run_id it belongs to")
    if isinstance(doc, Operation):
        extra = {"hook_cursor": 0, **extra}
    table, row, _ = _doc_row(doc, extra)
    return Write(table, "insert", row)


def update_doc(doc: BaseModel, **extra: object) -> Write:
    """Replace a stored contract by its new version (same id): the doc and every column derived
    from it, plus ``extra`` columns (e.g. an Operation's ``hook_cursor``)."""
    table, row, pk = _doc_row(doc, extra)
    return Write(table, "update", row, (pk,))


def record_write(raw: RawRecord, logical_result_key: str | None = None) -> Write:
    """Append one raw record: the ContextRecord as ``doc``, its content document as ``content``
    and its ``source``. ``logical_result_key`` names the logical result it is (a tool result of
    a call, a model decision) so a second append of the same result is refused (CTX-2.23)."""
    record = raw.record
    return insert("records", record_id=record.record_id, context_id=record.context_id,
                  context_seq=record.context_seq, run_id=record.run_id, role=record.role,
                  message_kind=record.message_kind, operation_id=record.operation_id,
                  call_id=record.call_id, origin_input_id=record.origin_input_id,
                  logical_result_key=logical_result_key, source=raw.source,
                  doc=record, content=dumps(raw.content))


def revision_write(doc: EffectiveContextRevision,
                   overrides: Mapping[tuple[UUID, str], Override]) -> Write:
    """Insert an immutable revision with the overrides in force at it (the pure core's
    ``Revision.overrides``)."""
    return insert("revisions", context_id=doc.context_id, revision=doc.revision,
                  parent=doc.parent_revision, record_watermark=doc.record_watermark,
                  overrides=encode_overrides(overrides), doc=doc)


def checkpoint_write(run_id: UUID, name: str, doc: JSON | BaseModel) -> Write:
    """Save (or move) a named checkpoint of a Run: positions, ids and watermarks, never copies of
    messages (CTX-10.2)."""
    return upsert("checkpoints", ("run_id", "name"), run_id=run_id, name=name,
                  doc=doc if isinstance(doc, BaseModel) else dumps(doc))


def event_write(run_id: UUID, run_seq: int, doc: JSON | BaseModel) -> Write:
    return insert("events", run_id=run_id, run_seq=run_seq,
                  doc=doc if isinstance(doc, BaseModel) else dumps(doc))


def _unreferenced_blob() -> str:
    """SQL condition: no text column of any other table contains the blob's digest (a digest is
    ``sha256:<64 hex>``, so a substring match is a reference and nothing else)."""
    mentions = [f"SELECT 1 FROM [{table}] WHERE instr([{column}], blobs.digest) > 0"
                for table, spec in TABLES.items() if table != "blobs"
                for column, kind in spec.columns.items() if kind is str]
    return " AND ".join(f"NOT EXISTS ({query})" for query in mentions)


def apply_write(conn: sqlite3.Connection, write: Write) -> None:
    """Run one write on ``conn`` (inside the caller's transaction), checked against the
    schema: tables and columns are never taken from data."""
    if write.kind == "sweep":
        _statement(write.table, "sweep", (), ())
        conn.execute("DELETE FROM blobs WHERE " + _unreferenced_blob())
        return
    sql, order = _statement(write.table, write.kind, tuple(write.row), write.key)
    row = write.row
    if write.kind == "fence" and write.expect is not None:
        cursor = conn.execute(sql, [*(sql_value(row[c]) for c in write.row),
                                    *(sql_value(write.expect[k]) for k in write.key)])
        if cursor.rowcount != 1:
            raise StaleOwner(f"the {write.table} row is no longer at "
                             f"{ {k: str(v) for k, v in write.expect.items()} }: another owner "
                             "took the Session over, so this owner's commit is refused")
        return
    cursor = conn.execute(sql, [sql_value(row[c]) for c in order])
    if write.kind == "update" and cursor.rowcount != 1:
        raise LookupError(f"update of {write.table!r} matched {cursor.rowcount} rows for "
                          f"{ {k: row[k] for k in write.key} }, not exactly one")


@functools.lru_cache(maxsize=1024)
def _statement(table: str, kind: WriteKind, columns: tuple[str, ...], key: tuple[str, ...]
               ) -> tuple[str, tuple[str, ...]]:
    """The SQL of a write of this shape and the columns its parameters are, in order; checked
    against the schema once per shape (a commit's writes come in a few dozen shapes, issue
    #20)."""
    spec = TABLES.get(table)
    if spec is None:
        raise ValueError(f"unknown table {table!r}")
    if kind == "sweep":
        return "", ()
    unknown = [c for c in columns if c not in spec.columns]
    if unknown or not columns:
        raise ValueError(f"table {table!r} has no columns {unknown}" if unknown
                         else f"a write to {table!r} names no column")
    names = ", ".join(f"[{c}]" for c in columns)
    marks = ", ".join("?" for _ in columns)
    if kind == "insert":
        return f"INSERT INTO [{table}] ({names}) VALUES ({marks})", columns
    if kind == "fence":
        sets = ", ".join(f"[{c}] = ?" for c in columns)
        where = " AND ".join(f"[{k}] = ?" for k in key)
        if any(k not in spec.columns for k in key) or not key:
            raise ValueError(f"a fence of {table!r} names unknown key columns {key}")
        return f"UPDATE [{table}] SET {sets} WHERE {where}", columns + key
    if kind == "delete":  # every row matching all the given columns
        where = " AND ".join(f"[{c}] = ?" for c in columns)
        return f"DELETE FROM [{table}] WHERE {where}", columns
    key = key or (spec.pk if kind == "ensure" else ())
    if not key or any(k not in columns for k in key):
        raise ValueError(f"a {kind} of {table!r} needs its key columns {key} in the row")
    target = ", ".join(f"[{k}]" for k in key)
    rest = tuple(c for c in columns if c not in key)
    if kind == "ensure":
        return (f"INSERT INTO [{table}] ({names}) VALUES ({marks}) "
                f"ON CONFLICT ({target}) DO NOTHING", columns)
    if kind == "upsert":
        sets = ", ".join(f"[{c}] = excluded.[{c}]" for c in rest)
        return (f"INSERT INTO [{table}] ({names}) VALUES ({marks}) ON CONFLICT ({target}) DO "
                + (f"UPDATE SET {sets}" if sets else "NOTHING"), columns)
    if kind == "update":
        if not rest:
            raise ValueError(f"an update of {table!r} sets no column")
        sets = ", ".join(f"[{c}] = ?" for c in rest)
        where = " AND ".join(f"[{k}] = ?" for k in key)
        return f"UPDATE [{table}] SET {sets} WHERE {where}", rest + key
    raise ValueError(f"unknown write kind {kind!r}")
