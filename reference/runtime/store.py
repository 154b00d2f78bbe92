"""The reference runtime's store: SQLite through sqlite-utils, written only by the
:class:`CommitCoordinator` (§2 "身份、顺序和对象结构", §9 blobs and orphans, §10 "一致提交").

What the design asks of storage, and where it is here:

- §2: the unique keys that make appends idempotent are real UNIQUE indexes — (context_id,
  context_seq) and (operation_id, message_kind, logical_result_key) of ContextRecord,
  (session_id, input_seq) of UserInput, (session_id, run_no) of Run, Operation.purpose_key,
  (operation_id, attempt_no), (operation_id, hook_point, chain_position), one Batch per model
  Operation, one CompactionEpisode per triggering model Operation, one root RoleContext per Run
  (CTX-2.23). Ids are our own UUIDs; a provider's tool_call_id is never a key or a column, it
  may only appear inside a stored document (CTX-2.25).
- §2, §6, §9: large bodies are immutable blobs addressed by the sha256 of their bytes
  (CTX-2.24, CTX-6.13). A blob may be written before the commit that points at it; until then
  it is an orphan that nothing reads as a fact (CTX-9.41).
- §3, §10: every RuntimeCommit (T_FREEZE, T_FIRST_OUTPUT, APP-INPUT, APP-FINALIZE, raw result
  saved, effective result, batch feedback, chunk committed, snapshot, checkpoint, ...) is ONE
  SQLite transaction opened by the :class:`CommitCoordinator`, the only writer of every table
  but ``blobs`` (CTX-3.6, CTX-3.77, CTX-10.4, CTX-10.19, CTX-10.26, CTX-10.29). A commit that
  fails leaves nothing behind and raises :class:`CommitFailed`, which the runtime surfaces and
  never treats as a hook failure (CTX-10.28).
- §4: records are read page by page, never a whole context or Session at once (CTX-4.23).
- §10: checkpoints hold positions and stable ids, never copies of messages (CTX-10.2).

Each table keeps its contract as ``doc`` (``model_dump_json()`` text) plus the columns its keys
and queries need; those columns are projections of the doc and every write of a row writes
both (:func:`insert_doc` and :func:`update_doc` derive them from the contract). Ids are TEXT
UUIDs, JSON columns TEXT, tables STRICT. A file store runs in WAL mode with
``synchronous=FULL``: a commit that returned is on disk.
"""

import functools
import hashlib
import json
import sqlite3
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, Self
from uuid import UUID

import sqlite_utils
from pydantic import BaseModel

from ctxspec.reference.contracts import (
    Attempt,
    Batch,
    CompactionEpisode,
    ContextMutation,
    ContextRecord,
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

ROOT_ROLE_KEY = "root"
"""RoleContext.role_key of a Run's root role (the ReAct entry)."""

SqlValue = None | int | float | str | bytes


# --- schema -------------------------------------------------------------------------------


@dataclass(frozen=True)
class TableSpec:
    """One table: its columns in order (type: str, int or bytes), primary key, NOT NULL columns,
    unique keys, partial unique keys (columns, WHERE clause) and plain indexes."""

    columns: Mapping[str, type]
    pk: tuple[str, ...]
    not_null: frozenset[str] = frozenset()
    unique: tuple[tuple[str, ...], ...] = ()
    partial_unique: tuple[tuple[tuple[str, ...], str], ...] = ()
    indexes: tuple[tuple[str, ...], ...] = ()


def _cols(*names: str, ints: tuple[str, ...] = (), blobs: tuple[str, ...] = ()
          ) -> dict[str, type]:
    return {name: int if name in ints else bytes if name in blobs else str for name in names}


TABLES: Mapping[str, TableSpec] = {
    "blobs": TableSpec(_cols("digest", "media_type", "size_bytes", "body",
                             ints=("size_bytes",), blobs=("body",)),
                       ("digest",), frozenset({"media_type", "size_bytes", "body"})),
    "agents": TableSpec(_cols("agent_id", "config"), ("agent_id",)),
    "sessions": TableSpec(_cols("session_id", "agent_id"), ("session_id",),
                          frozenset({"agent_id"})),
    "runs": TableSpec(_cols("run_id", "session_id", "run_no", "status", "owner_epoch", "doc",
                            ints=("run_no", "owner_epoch")),
                      ("run_id",), frozenset({"session_id", "run_no", "status", "doc"}),
                      unique=(("session_id", "run_no"),)),
    "user_inputs": TableSpec(_cols("input_id", "session_id", "input_seq", "origin_run_id", "kind",
                                   "doc", ints=("input_seq",)),
                             ("input_id",), frozenset({"session_id", "input_seq", "kind", "doc"}),
                             unique=(("session_id", "input_seq"),),
                             indexes=(("origin_run_id",),)),
    "deliveries": TableSpec(_cols("delivery_id", "input_id", "target_run_id", "operation_id",
                                  "state", "previous_delivery_id", "doc"),
                            ("delivery_id",), frozenset({"input_id", "state", "doc"}),
                            indexes=(("input_id",), ("target_run_id",), ("operation_id",))),
    "role_contexts": TableSpec(_cols("context_id", "run_id", "role_key", "doc"),
                               ("context_id",), frozenset({"run_id", "role_key", "doc"}),
                               partial_unique=((("run_id",), f"role_key = '{ROOT_ROLE_KEY}'"),),
                               indexes=(("run_id", "role_key"),)),
    "records": TableSpec(_cols("record_id", "context_id", "context_seq", "run_id", "role",
                               "message_kind", "operation_id", "call_id", "origin_input_id",
                               "logical_result_key", "source", "doc", "content",
                               ints=("context_seq",)),
                         ("record_id",),
                         frozenset({"context_id", "context_seq", "run_id", "role", "message_kind",
                                    "doc", "content"}),
                         unique=(("context_id", "context_seq"),),
                         partial_unique=((("operation_id", "message_kind", "logical_result_key"),
                                          "logical_result_key IS NOT NULL"),)),
    "mutations": TableSpec(_cols("mutation_id", "context_id", "committed_revision", "doc",
                                 ints=("committed_revision",)),
                           ("mutation_id",), frozenset({"context_id", "committed_revision", "doc"}),
                           indexes=(("context_id", "committed_revision"),)),
    "revisions": TableSpec(_cols("context_id", "revision", "parent", "record_watermark",
                                 "overrides", "doc",
                                 ints=("revision", "parent", "record_watermark")),
                           ("context_id", "revision"),
                           frozenset({"record_watermark", "overrides", "doc"})),
    "operations": TableSpec(_cols("operation_id", "run_id", "purpose", "purpose_key", "state",
                                  "raw_result_ref", "effective_result_ref", "hook_cursor", "doc",
                                  ints=("hook_cursor",)),
                            ("operation_id",),
                            frozenset({"run_id", "purpose", "purpose_key", "state",
                                       "hook_cursor", "doc"}),
                            unique=(("purpose_key",),), indexes=(("run_id",),)),
    "attempts": TableSpec(_cols("attempt_id", "operation_id", "attempt_no", "owner_epoch", "doc",
                                ints=("attempt_no", "owner_epoch")),
                          ("attempt_id",), frozenset({"operation_id", "attempt_no", "doc"}),
                          unique=(("operation_id", "attempt_no"),)),
    "hook_invocations": TableSpec(_cols("hook_invocation_id", "operation_id", "hook_point",
                                        "chain_position", "doc", ints=("chain_position",)),
                                  ("hook_invocation_id",),
                                  frozenset({"operation_id", "hook_point", "chain_position",
                                             "doc"}),
                                  unique=(("operation_id", "hook_point", "chain_position"),)),
    "batches": TableSpec(_cols("batch_id", "run_id", "model_operation_id", "doc"),
                         ("batch_id",), frozenset({"run_id", "model_operation_id", "doc"}),
                         unique=(("model_operation_id",),)),
    "episodes": TableSpec(_cols("episode_id", "triggering_model_operation_id", "doc"),
                          ("episode_id",), frozenset({"triggering_model_operation_id", "doc"}),
                          unique=(("triggering_model_operation_id",),)),
    "snapshots": TableSpec(_cols("snapshot_id", "context_id", "doc"), ("snapshot_id",),
                           frozenset({"context_id", "doc"}), indexes=(("context_id",),)),
    "checkpoints": TableSpec(_cols("run_id", "name", "doc"), ("run_id", "name"),
                             frozenset({"doc"})),
    "events": TableSpec(_cols("run_id", "run_seq", "doc", ints=("run_seq",)), ("run_id", "run_seq"),
                        frozenset({"doc"})),
}
"""The whole schema. Every write is checked against it (tables and columns are never taken
from data)."""


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


def dumps(value: object) -> str:
    """JSON text of a document (UUIDs, contracts, enums and times as their JSON forms)."""
    return json.dumps(value, default=_json_default, ensure_ascii=False, separators=(",", ":"))


def sql_value(value: object) -> SqlValue:
    """A Python value as the column value it is stored as: a UUID as its text, a contract as its
    JSON (``model_dump_json()``), a mapping or sequence as JSON text, an enum as its value."""
    if isinstance(value, Enum):
        return sql_value(value.value)
    if isinstance(value, bool):
        return int(value)
    if value is None or isinstance(value, str | bytes | float | int):
        return value
    if isinstance(value, UUID):
        return str(value)
    if isinstance(value, BaseModel):
        return value.model_dump_json()
    if isinstance(value, Mapping | list | tuple):
        return dumps(value)
    raise TypeError(f"{type(value).__name__} is not a storable column value")


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

WriteKind = Literal["insert", "update", "upsert", "ensure", "delete", "sweep"]


@dataclass(frozen=True)
class Write:
    """One row write of a commit.

    - ``insert``: a new row; a duplicate primary or unique key fails the whole commit;
    - ``update``: sets the given columns of exactly one existing row, found by the ``key``
      columns (which are part of ``row``); no such row fails the whole commit;
    - ``upsert``: insert, or update the row whose ``key`` (a primary or unique key) exists;
    - ``ensure``: insert unless a row with the same ``key`` (default: the primary key) exists,
      for content-addressed rows (blobs) written in the commit that points at them.

    Values are converted by :func:`sql_value`.
    """

    table: str
    kind: WriteKind
    row: Mapping[str, object]
    key: tuple[str, ...] = ()


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


def _apply(conn: sqlite3.Connection, write: Write) -> None:
    spec = TABLES.get(write.table)
    if spec is None:
        raise ValueError(f"unknown table {write.table!r}")
    if write.kind == "sweep":
        conn.execute("DELETE FROM blobs WHERE " + _unreferenced_blob())
        return
    columns = list(write.row)
    unknown = [c for c in columns if c not in spec.columns]
    if unknown or not columns:
        raise ValueError(f"table {write.table!r} has no columns {unknown}" if unknown
                         else f"a write to {write.table!r} names no column")
    values = [sql_value(write.row[c]) for c in columns]
    names = ", ".join(f"[{c}]" for c in columns)
    marks = ", ".join("?" for _ in columns)
    if write.kind == "insert":
        conn.execute(f"INSERT INTO [{write.table}] ({names}) VALUES ({marks})", values)
        return
    if write.kind == "delete":  # every row matching all the given columns
        where = " AND ".join(f"[{c}] = ?" for c in columns)
        conn.execute(f"DELETE FROM [{write.table}] WHERE {where}", values)
        return
    key = write.key or (spec.pk if write.kind == "ensure" else ())
    if not key or any(k not in write.row for k in key):
        raise ValueError(f"a {write.kind} of {write.table!r} needs its key columns {key} in the "
                         "row")
    target = ", ".join(f"[{k}]" for k in key)
    rest = [c for c in columns if c not in key]
    if write.kind == "ensure":
        conn.execute(f"INSERT INTO [{write.table}] ({names}) VALUES ({marks}) "
                     f"ON CONFLICT ({target}) DO NOTHING", values)
    elif write.kind == "upsert":
        sets = ", ".join(f"[{c}] = excluded.[{c}]" for c in rest)
        conn.execute(f"INSERT INTO [{write.table}] ({names}) VALUES ({marks}) "
                     f"ON CONFLICT ({target}) DO "
                     + (f"UPDATE SET {sets}" if sets else "NOTHING"), values)
    elif write.kind == "update":
        if not rest:
            raise ValueError(f"an update of {write.table!r} sets no column")
        sets = ", ".join(f"[{c}] = ?" for c in rest)
        where = " AND ".join(f"[{k}] = ?" for k in key)
        cursor = conn.execute(f"UPDATE [{write.table}] SET {sets} WHERE {where}",
                              [sql_value(write.row[c]) for c in rest]
                              + [sql_value(write.row[k]) for k in key])
        if cursor.rowcount != 1:
            raise LookupError(f"update of {write.table!r} matched {cursor.rowcount} rows for "
                              f"{ {k: write.row[k] for k in key} }, not exactly one")
    else:
        raise ValueError(f"unknown write kind {write.kind!r}")


@dataclass(frozen=True)
class StoredRevision:
    """A stored revision as the runtime reads it back."""

    revision: int
    parent: int | None
    record_watermark: int
    overrides: dict[UUID, dict[str, Override]]

    def flat_overrides(self) -> dict[tuple[UUID, str], Override]:
        """The overrides keyed as the pure core's ``Revision.overrides``."""
        return {(record_id, key): o for record_id, by_key in self.overrides.items()
                for key, o in by_key.items()}


def build_schema(db: sqlite_utils.Database) -> None:
    """Create every table and index of :data:`TABLES` that ``db`` lacks, through sqlite-utils."""
    for name, spec in TABLES.items():
        table = db.table(name)
        table.create(dict(spec.columns), pk=spec.pk[0] if len(spec.pk) == 1 else spec.pk,
                     not_null=set(spec.not_null) | set(spec.pk), if_not_exists=True,
                     strict=True)
        for columns in spec.unique:
            table.create_index(list(columns), index_name=f"ux_{name}_{'_'.join(columns)}",
                               unique=True, if_not_exists=True)
        for columns in spec.indexes:
            table.create_index(list(columns), index_name=f"ix_{name}_{'_'.join(columns)}",
                               if_not_exists=True)
        for columns, where in spec.partial_unique:
            db.execute(
                f"CREATE UNIQUE INDEX IF NOT EXISTS [ux_{name}_{'_'.join(columns)}] "
                f"ON [{name}] ({', '.join(f'[{c}]' for c in columns)}) WHERE {where}")


@functools.cache
def schema_script() -> tuple[str, ...]:
    """The statements that create the whole schema, in order: built once per process with
    :func:`build_schema` in a scratch database and read back from its ``sqlite_master``.
    Building it through sqlite-utils costs about ten times more than running it, and every
    conformance case opens a new store (issue #20)."""
    scratch = sqlite_utils.Database(memory=True)
    try:
        build_schema(scratch)
        rows = scratch.execute(
            "SELECT sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY rowid").fetchall()
    finally:
        scratch.close()
    return tuple(str(sql) for (sql,) in rows)


# --- the store --------------------------------------------------------------------------------


class Store:
    """One SQLite database (a file, or ``":memory:"``) and its readers.

    Reads are plain queries; writes go through :class:`CommitCoordinator` only, except blobs,
    which are immutable and content-addressed and may be written ahead of the commit that points
    at them (:meth:`put_blob`, CTX-9.41)."""

    def __init__(self, path: str | Path = ":memory:") -> None:
        self.path = str(path)
        if self.path == ":memory:":
            self.db = sqlite_utils.Database(memory=True)
        else:
            self.db = sqlite_utils.Database(self.path)
            self.db.conn.execute("PRAGMA journal_mode=WAL")
            self.db.conn.execute("PRAGMA synchronous=FULL")
            self.db.conn.execute("PRAGMA busy_timeout=10000")
        self.create_schema()

    def create_schema(self) -> None:
        """Create every table and index if missing (idempotent). A new, empty database gets
        the schema as one script in one transaction (one fsync for a file store), copied from
        :func:`schema_script`; an existing one is brought up to it table by table."""
        if self.db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0:
            self.db.conn.executescript("BEGIN;\n" + ";\n".join(schema_script()) + ";\nCOMMIT;")
        else:
            build_schema(self.db)

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()

    # --- low-level reading ------------------------------------------------------------------

    def query(self, sql: str, params: Sequence[SqlValue] = ()) -> list[dict[str, Any]]:
        """Rows of a read query as dicts (column name → value)."""
        cursor = self.db.conn.execute(sql, params)
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]

    def _one(self, sql: str, params: Sequence[SqlValue]) -> dict[str, Any] | None:
        rows = self.query(sql, params)
        return rows[0] if rows else None

    def count(self, table: str) -> int:
        if table not in TABLES:
            raise ValueError(f"unknown table {table!r}")
        row = self._one(f"SELECT COUNT(*) AS n FROM [{table}]", ())
        return int(row["n"]) if row else 0

    # --- blobs ------------------------------------------------------------------------------

    def put_blob(self, data: bytes, media_type: str = "text/plain") -> PayloadRef:
        """Store ``data`` under the sha256 of its bytes; storing the same bytes again writes
        nothing. The blob stays an orphan until a commit points at it.  CTX-2.24, CTX-9.41"""
        ref, write = blob_write(data, media_type)
        with self.db.atomic():
            _apply(self.db.conn, write)
        return ref

    def put_text(self, text: str, media_type: str = "text/plain") -> PayloadRef:
        return self.put_blob(text.encode("utf-8", "surrogatepass"), media_type)

    def blob(self, ref: PayloadRef) -> bytes:
        row = self._one("SELECT body FROM blobs WHERE digest = ?", (ref.digest,))
        if row is None:
            raise KeyError(f"no blob {ref.digest}")
        body = bytes(row["body"])
        if len(body) != ref.size_bytes:
            raise ValueError(f"blob {ref.digest} has {len(body)} bytes, the ref says "
                             f"{ref.size_bytes}")
        return body

    def text(self, ref: PayloadRef) -> str:
        return self.blob(ref).decode("utf-8", "surrogatepass")

    # --- agents, sessions, runs, inputs, deliveries -------------------------------------------

    def agent_config(self, agent_id: UUID) -> JSON:
        row = self._one("SELECT config FROM agents WHERE agent_id = ?", (str(agent_id),))
        if row is None:
            raise KeyError(f"no agent {agent_id}")
        config: JSON = None if row["config"] is None else json.loads(row["config"])
        return config

    def session_agent(self, session_id: UUID) -> UUID | None:
        row = self._one("SELECT agent_id FROM sessions WHERE session_id = ?", (str(session_id),))
        return None if row is None else UUID(row["agent_id"])

    def run(self, run_id: UUID) -> Run | None:
        row = self._one("SELECT doc FROM runs WHERE run_id = ?", (str(run_id),))
        return None if row is None else Run.model_validate_json(row["doc"])

    def runs_of_session(self, session_id: UUID) -> list[Run]:
        """The Session's Runs by run_no."""
        return [Run.model_validate_json(r["doc"]) for r in self.query(
            "SELECT doc FROM runs WHERE session_id = ? ORDER BY run_no", (str(session_id),))]

    def user_input(self, input_id: UUID) -> UserInput | None:
        row = self._one("SELECT doc FROM user_inputs WHERE input_id = ?", (str(input_id),))
        return None if row is None else UserInput.model_validate_json(row["doc"])

    def inputs_of_session(self, session_id: UUID) -> list[UserInput]:
        """The Session's UserInputs by input_seq (receive order)."""
        return [UserInput.model_validate_json(r["doc"]) for r in self.query(
            "SELECT doc FROM user_inputs WHERE session_id = ? ORDER BY input_seq",
            (str(session_id),))]

    def last_input_seq(self, session_id: UUID) -> int:
        row = self._one("SELECT MAX(input_seq) AS n FROM user_inputs WHERE session_id = ?",
                        (str(session_id),))
        return int(row["n"]) if row and row["n"] is not None else 0

    def deliveries_of_input(self, input_id: UUID) -> list[UserInputDelivery]:
        """Every delivery of an input, in creation order (a hand-over is a new delivery)."""
        return [UserInputDelivery.model_validate_json(r["doc"]) for r in self.query(
            "SELECT doc FROM deliveries WHERE input_id = ? ORDER BY rowid", (str(input_id),))]

    def deliveries_of_run(self, run_id: UUID) -> list[UserInputDelivery]:
        """The deliveries bound to a Run, in creation order."""
        return [UserInputDelivery.model_validate_json(r["doc"]) for r in self.query(
            "SELECT doc FROM deliveries WHERE target_run_id = ? ORDER BY rowid", (str(run_id),))]

    # --- contexts, records, revisions ------------------------------------------------------

    def role_context(self, context_id: UUID) -> RoleContext | None:
        row = self._one("SELECT doc FROM role_contexts WHERE context_id = ?", (str(context_id),))
        return None if row is None else RoleContext.model_validate_json(row["doc"])

    def contexts_of_run(self, run_id: UUID) -> list[tuple[str, UUID]]:
        """(role_key, context_id) of every RoleContext of a Run, in creation order."""
        return [(r["role_key"], UUID(r["context_id"])) for r in self.query(
            "SELECT role_key, context_id FROM role_contexts WHERE run_id = ? ORDER BY rowid",
            (str(run_id),))]

    def root_context_of_run(self, run_id: UUID) -> UUID | None:
        row = self._one("SELECT context_id FROM role_contexts WHERE run_id = ? AND role_key = ?",
                        (str(run_id), ROOT_ROLE_KEY))
        return None if row is None else UUID(row["context_id"])

    @staticmethod
    def _raw(row: Mapping[str, Any]) -> RawRecord:
        return RawRecord(ContextRecord.model_validate_json(row["doc"]), json.loads(row["content"]),
                         row["source"])

    def records_page(self, context_id: UUID, after_seq: int, limit: int) -> list[RawRecord]:
        """At most ``limit`` records of a context with context_seq > ``after_seq``, by
        context_seq (keyset paging).  CTX-4.23"""
        return [self._raw(r) for r in self.query(
            "SELECT doc, content, source FROM records WHERE context_id = ? AND context_seq > ? "
            "ORDER BY context_seq LIMIT ?", (str(context_id), after_seq, limit))]

    def iter_records(self, context_id: UUID, page_size: int = 500) -> Iterator[RawRecord]:
        """Every record of a context by context_seq, one page in memory at a time.  CTX-4.23"""
        if page_size < 1:
            raise ValueError("page_size must be >= 1")
        after = 0
        while True:
            page = self.records_page(context_id, after, page_size)
            yield from page
            if len(page) < page_size:
                return
            after = page[-1].record.context_seq

    def last_record_of(self, context_id: UUID, *, role: str, message_kind: str
                       ) -> RawRecord | None:
        """The context's last record of a role and kind (by context_seq)."""
        row = self._one("SELECT doc, content, source FROM records WHERE context_id = ? AND "
                        "role = ? AND message_kind = ? ORDER BY context_seq DESC LIMIT 1",
                        (str(context_id), role, message_kind))
        return None if row is None else self._raw(row)

    def last_context_seq(self, context_id: UUID) -> int:
        row = self._one("SELECT MAX(context_seq) AS n FROM records WHERE context_id = ?",
                        (str(context_id),))
        return int(row["n"]) if row and row["n"] is not None else 0

    def record_by_result_key(self, operation_id: UUID, message_kind: str,
                             logical_result_key: str) -> RawRecord | None:
        """The record already appended for a logical result, if any (the idempotency check of
        CTX-2.23 before an append)."""
        row = self._one("SELECT doc, content, source FROM records WHERE operation_id = ? AND "
                        "message_kind = ? AND logical_result_key = ?",
                        (str(operation_id), message_kind, logical_result_key))
        return None if row is None else self._raw(row)

    def head(self, context_id: UUID) -> StoredRevision | None:
        """The context's stored head revision (highest number), or None if none is stored."""
        row = self._one("SELECT revision, parent, record_watermark, overrides FROM revisions "
                        "WHERE context_id = ? ORDER BY revision DESC LIMIT 1", (str(context_id),))
        if row is None:
            return None
        return StoredRevision(row["revision"], row["parent"], row["record_watermark"],
                              decode_overrides(row["overrides"]))

    def head_revision(self, context_id: UUID) -> tuple[int, dict[UUID, dict[str, Override]]]:
        """(head revision number, record_id → field_key → Override in force). A context with no
        stored revision is at its initial, empty revision 1 (docs/open-questions.md Q9)."""
        head = self.head(context_id)
        return (1, {}) if head is None else (head.revision, head.overrides)

    def revision_doc(self, context_id: UUID, revision: int) -> EffectiveContextRevision | None:
        row = self._one("SELECT doc FROM revisions WHERE context_id = ? AND revision = ?",
                        (str(context_id), revision))
        if row is None or row["doc"] is None:
            return None
        return EffectiveContextRevision.model_validate_json(row["doc"])

    def mutations_of(self, context_id: UUID) -> list[ContextMutation]:
        return [ContextMutation.model_validate_json(r["doc"]) for r in self.query(
            "SELECT doc FROM mutations WHERE context_id = ? ORDER BY committed_revision",
            (str(context_id),))]

    def mutation(self, mutation_id: UUID) -> ContextMutation | None:
        row = self._one("SELECT doc FROM mutations WHERE mutation_id = ?", (str(mutation_id),))
        return None if row is None else ContextMutation.model_validate_json(row["doc"])

    # --- operations, attempts, hooks, batches, episodes, snapshots --------------------------

    def operation(self, operation_id: UUID) -> Operation | None:
        row = self._one("SELECT doc FROM operations WHERE operation_id = ?", (str(operation_id),))
        return None if row is None else Operation.model_validate_json(row["doc"])

    def operation_by_key(self, purpose_key: str) -> Operation | None:
        """The Operation of a stable purpose key, if it was ever committed (a recovery reads it
        before creating a call identity, CTX-9.40)."""
        row = self._one("SELECT doc FROM operations WHERE purpose_key = ?", (purpose_key,))
        return None if row is None else Operation.model_validate_json(row["doc"])

    def operations_of_run(self, run_id: UUID) -> list[Operation]:
        return [Operation.model_validate_json(r["doc"]) for r in self.query(
            "SELECT doc FROM operations WHERE run_id = ? ORDER BY rowid", (str(run_id),))]

    def hook_cursor(self, operation_id: UUID) -> int:
        """How many hook items of the Operation's chains are committed (0 if none)."""
        row = self._one("SELECT hook_cursor FROM operations WHERE operation_id = ?",
                        (str(operation_id),))
        if row is None:
            raise KeyError(f"no operation {operation_id}")
        return int(row["hook_cursor"])

    def attempts_of(self, operation_id: UUID) -> list[Attempt]:
        return [Attempt.model_validate_json(r["doc"]) for r in self.query(
            "SELECT doc FROM attempts WHERE operation_id = ? ORDER BY attempt_no",
            (str(operation_id),))]

    def hook_invocations_of(self, operation_id: UUID) -> list[HookInvocation]:
        """The Operation's committed hook items, in commit order."""
        return [HookInvocation.model_validate_json(r["doc"]) for r in self.query(
            "SELECT doc FROM hook_invocations WHERE operation_id = ? "
            "ORDER BY rowid", (str(operation_id),))]

    def batch_of(self, model_operation_id: UUID) -> Batch | None:
        row = self._one("SELECT doc FROM batches WHERE model_operation_id = ?",
                        (str(model_operation_id),))
        return None if row is None else Batch.model_validate_json(row["doc"])

    def batches_of_run(self, run_id: UUID) -> list[Batch]:
        return [Batch.model_validate_json(r["doc"]) for r in self.query(
            "SELECT doc FROM batches WHERE run_id = ? ORDER BY rowid", (str(run_id),))]

    def episode_of(self, triggering_model_operation_id: UUID) -> CompactionEpisode | None:
        row = self._one("SELECT doc FROM episodes WHERE triggering_model_operation_id = ?",
                        (str(triggering_model_operation_id),))
        return None if row is None else CompactionEpisode.model_validate_json(row["doc"])

    def snapshot(self, snapshot_id: UUID) -> ContextSnapshot | None:
        row = self._one("SELECT doc FROM snapshots WHERE snapshot_id = ?", (str(snapshot_id),))
        return None if row is None else ContextSnapshot.model_validate_json(row["doc"])

    def snapshots_of(self, context_id: UUID) -> list[ContextSnapshot]:
        return [ContextSnapshot.model_validate_json(r["doc"]) for r in self.query(
            "SELECT doc FROM snapshots WHERE context_id = ? ORDER BY rowid", (str(context_id),))]

    # --- checkpoints and events -------------------------------------------------------------

    def checkpoint(self, run_id: UUID, name: str) -> JSON:
        """A named checkpoint's document (None if never saved)."""
        row = self._one("SELECT doc FROM checkpoints WHERE run_id = ? AND name = ?",
                        (str(run_id), name))
        doc: JSON = None if row is None else json.loads(row["doc"])
        return doc

    def checkpoints_of(self, run_id: UUID) -> dict[str, JSON]:
        return {r["name"]: json.loads(r["doc"]) for r in self.query(
            "SELECT name, doc FROM checkpoints WHERE run_id = ? ORDER BY name", (str(run_id),))}

    def events_of(self, run_id: UUID, after_seq: int = 0) -> list[tuple[int, JSON]]:
        """(run_seq, event document) of a Run's client events after ``after_seq``."""
        return [(int(r["run_seq"]), json.loads(r["doc"])) for r in self.query(
            "SELECT run_seq, doc FROM events WHERE run_id = ? AND run_seq > ? ORDER BY run_seq",
            (str(run_id), after_seq))]

    def last_run_seq(self, run_id: UUID) -> int:
        row = self._one("SELECT MAX(run_seq) AS n FROM events WHERE run_id = ?", (str(run_id),))
        return int(row["n"]) if row and row["n"] is not None else 0



# --- committing -------------------------------------------------------------------------------


class CommitFailed(RuntimeError):
    """A required commit failed and was rolled back whole. The runtime surfaces it as a
    persistence failure; it is never a hook failure and never continues fail-open (CTX-10.28).
    """

    def __init__(self, name: str, cause: BaseException) -> None:
        super().__init__(f"required commit {name!r} failed and was rolled back: "
                         f"{type(cause).__name__}: {cause}")
        self.name = name
        self.cause = cause


@dataclass
class CommitCoordinator:
    """The only writer of the store's facts: each named RuntimeCommit (T_FREEZE, T_FIRST_OUTPUT,
    APP-INPUT, APP-FINALIZE, raw result saved, effective result, chunk committed, snapshot,
    batch feedback, checkpoint, ...) is one SQLite transaction, all of its writes or none.

    ``fault(name, i)``, when given, is called before write ``i`` of commit ``name``; tests raise
    there to fail a commit half-way, or wait there to make the disk slow. An ``Exception`` (a
    fault, a duplicate unique key, an update that finds no row) rolls back everything and raises
    :class:`CommitFailed`. A
    ``BaseException`` that is not an ``Exception`` (a simulated crash, KeyboardInterrupt) rolls
    back too and propagates as it is: a crash is not a failed commit, the process is gone.

    CTX-2.23, CTX-3.6, CTX-3.77, CTX-10.4, CTX-10.19, CTX-10.26, CTX-10.28, CTX-10.29
    """

    store: Store
    fault: Callable[[str, int], None] | None = None
    commits: int = 0
    by_name: Counter[str] = field(default_factory=Counter)
    """Successful commits per commit name."""

    def commit(self, name: str, writes: Sequence[Write]) -> None:
        db = self.store.db
        try:
            if db.conn.in_transaction:
                raise RuntimeError("a commit is one transaction of its own; another is open")
            with db.atomic():
                for index, write in enumerate(writes):
                    if self.fault is not None:
                        self.fault(name, index)
                    _apply(db.conn, write)
        except Exception as cause:
            raise CommitFailed(name, cause) from cause
        self.commits += 1
        self.by_name[name] += 1


__all__ = [
    "ROOT_ROLE_KEY",
    "TABLES",
    "CommitCoordinator",
    "CommitFailed",
    "Store",
    "StoredRevision",
    "TableSpec",
    "Write",
    "WriteKind",
    "blob_write",
    "checkpoint_write",
    "decode_overrides",
    "delete",
    "doc_key",
    "dumps",
    "encode_overrides",
    "event_write",
    "insert",
    "insert_doc",
    "payload_ref",
    "record_write",
    "revision_write",
    "sql_value",
    "sweep_blobs",
    "update",
    "update_doc",
    "upsert",
]
