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

The schema is in :mod:`schema`, the rows a commit writes in :mod:`writes`; this module holds
the :class:`Store` (its readers) and the :class:`CommitCoordinator`, and re-exports both.

Each table keeps its contract as ``doc`` (``model_dump_json()`` text) plus the columns its keys
and queries need; those columns are projections of the doc and every write of a row writes
both (:func:`insert_doc` and :func:`update_doc` derive them from the contract). Ids are TEXT
UUIDs, JSON columns TEXT, tables STRICT. A file store runs in WAL mode with
``synchronous=FULL``: a commit that returned is on disk.
"""

import contextlib
import json
import sqlite3
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Self
from uuid import UUID

import sqlite_utils

from ctxspec.reference.contracts import (
    ContextMutation,
    ContextRecord,
    ContextSnapshot,
    Operation,
    PayloadRef,
    RoleContext,
    Run,
    UserInput,
    UserInputDelivery,
)
from ctxspec.reference.effective import Override, RawRecord
from ctxspec.reference.registry import JSON
from ctxspec.reference.runtime.schema import (
    ROOT_ROLE_KEY,
    TABLES,
    SqlValue,
    TableSpec,
    build_schema,
    schema_image,
    schema_script,
)
from ctxspec.reference.runtime.writes import (
    Write,
    WriteKind,
    apply_write,
    blob_write,
    checkpoint_write,
    decode_overrides,
    delete,
    doc_key,
    dumps,
    encode_overrides,
    event_write,
    insert,
    insert_doc,
    payload_ref,
    record_write,
    revision_write,
    sql_value,
    sweep_blobs,
    update,
    update_doc,
    upsert,
)


@dataclass(frozen=True)
class StoredRevision:
    """A stored revision as the runtime reads it back."""

    revision: int
    parent: int | None
    record_watermark: int
    overrides: dict[UUID, dict[str, Override]]


# --- the store --------------------------------------------------------------------------------


BUSY_TIMEOUT_MS = 10_000
"""How long a file store waits for another connection's lock before it fails."""


def enter_wal(conn: sqlite3.Connection, patience: float) -> None:
    """Switch a file database to WAL, waiting up to ``patience`` seconds for other writers.

    The busy timeout does not cover this switch: SQLite takes a read lock, then upgrades it to
    write the new file format, and a connection that already holds a read lock fails at once
    rather than wait (waiting could deadlock). So of several processes opening one new store
    file at once, one could fail while another writes the file; it retries instead (issue #34)."""
    deadline = time.monotonic() + patience
    pause = 0.001
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as error:
            if error.sqlite_errorcode != sqlite3.SQLITE_BUSY or time.monotonic() >= deadline:
                raise
        time.sleep(pause)
        pause = min(2 * pause, 0.05)


class Store:
    """One SQLite database (a file, or ``":memory:"``) and its readers.

    Reads are plain queries; writes go through :class:`CommitCoordinator` only, except blobs,
    which are immutable and content-addressed and may be written ahead of the commit that points
    at them (:meth:`put_blob`, CTX-9.41)."""

    def __init__(self, path: str | Path = ":memory:") -> None:
        self.path = str(path)
        self.stored_blobs: set[str] | None = None
        """Digests of the blobs in an in-memory store, which only this object writes: a
        commit leaves out a blob already there (issue #20). None for a file store, which
        another connection may sweep."""
        if self.path == ":memory:":
            # A copy of the empty schema, not built (issue #20). Nothing in memory outlives
            # the process, so there is no durability to set; rollback keeps its journal.
            self.db = sqlite_utils.Database(memory=True)
            self.db.conn.deserialize(schema_image())
            self.stored_blobs = set()
            return
        self.db = sqlite_utils.Database(self.path)
        # The busy timeout first: several processes may open one new file at once, and each
        # waits for the others' locks instead of failing on them (issue #34).
        self.db.conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        enter_wal(self.db.conn, BUSY_TIMEOUT_MS / 1000)
        self.db.conn.execute("PRAGMA synchronous=FULL")
        self.create_schema()

    def create_schema(self) -> None:
        """Create every table and index if missing (idempotent). A new, empty database gets
        the schema in one transaction (one fsync for a file store), copied from
        :func:`schema_script`; an existing one is brought up to it table by table. The
        emptiness is read inside the write transaction (BEGIN IMMEDIATE), so of several
        processes opening one new file exactly one creates the schema and the others find it."""
        conn = self.db.conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            empty = conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0
            for statement in schema_script() if empty else ():
                conn.execute(statement)
            conn.execute("COMMIT")
        except BaseException:
            conn.rollback()
            raise
        if not empty:
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
            apply_write(self.db.conn, write)
        self.blobs_written([write])
        return ref

    def blobs_written(self, writes: Sequence[Write]) -> None:
        """Keep :attr:`stored_blobs` true after ``writes`` were committed."""
        if self.stored_blobs is None:
            return
        for write in writes:
            if write.table == "blobs" and write.kind == "ensure":
                self.stored_blobs.add(str(write.row["digest"]))
            elif write.table == "blobs":  # a sweep or delete: which went is not known here
                self.stored_blobs.clear()

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

    def session_owner(self, session_id: UUID) -> dict[str, Any] | None:
        """The Session's owner row: owner_id, owner_epoch, commit_seq, lease_until."""
        return self._one("SELECT owner_id, owner_epoch, commit_seq, lease_until FROM sessions "
                         "WHERE session_id = ?", (str(session_id),))

    @contextlib.contextmanager
    def reading(self) -> Iterator[None]:
        """One read transaction: every query inside it sees the same committed state, however
        many commits other connections make meanwhile (a takeover's facts, §10)."""
        conn = self.db.conn
        if conn.in_transaction:
            raise RuntimeError("a read transaction of its own; another is open")
        conn.execute("BEGIN")
        try:
            yield
        finally:
            conn.execute("COMMIT")

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

    def deliveries_of_input(self, input_id: UUID) -> list[UserInputDelivery]:
        """Every delivery of an input, in creation order (a hand-over is a new delivery)."""
        return [UserInputDelivery.model_validate_json(r["doc"]) for r in self.query(
            "SELECT doc FROM deliveries WHERE input_id = ? ORDER BY rowid", (str(input_id),))]

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

    def hook_cursor(self, operation_id: UUID) -> int:
        """How many hook items of the Operation's chains are committed (0 if none)."""
        row = self._one("SELECT hook_cursor FROM operations WHERE operation_id = ?",
                        (str(operation_id),))
        if row is None:
            raise KeyError(f"no operation {operation_id}")
        return int(row["hook_cursor"])

    def snapshot(self, snapshot_id: UUID) -> ContextSnapshot | None:
        row = self._one("SELECT doc FROM snapshots WHERE snapshot_id = ?", (str(snapshot_id),))
        return None if row is None else ContextSnapshot.model_validate_json(row["doc"])

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


class RuntimeStopped(RuntimeError):
    """A stimulus given to a runtime that stopped at a failed commit (docs/architecture.md: a
    refused commit stops the runtime): nothing goes on with values the store does not have; a
    runtime restored from the store continues the Session (docs/recovery.md)."""

    def __init__(self, name: str) -> None:
        super().__init__(f"the runtime stopped at the failed commit {name!r}; restore the "
                         "Session from the store to go on")
        self.name = name


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
        conn = self.store.db.conn
        try:
            if conn.in_transaction:
                raise RuntimeError("a commit is one transaction of its own; another is open")
            # BEGIN ... COMMIT as sqlite-utils' atomic() runs it outside a transaction, without
            # its generator (a commit is the reference's most frequent step, issue #20).
            conn.execute("BEGIN")
            try:
                for index, write in enumerate(writes):
                    if self.fault is not None:
                        self.fault(name, index)
                    apply_write(conn, write)
                conn.execute("COMMIT")
            except BaseException:
                conn.rollback()  # a no-op if the failure already ended the transaction
                raise
        except Exception as cause:
            raise CommitFailed(name, cause) from cause
        self.store.blobs_written(writes)
        self.commits += 1
        self.by_name[name] += 1


__all__ = [
    "ROOT_ROLE_KEY",
    "TABLES",
    "CommitCoordinator",
    "CommitFailed",
    "RuntimeStopped",
    "SqlValue",
    "Store",
    "StoredRevision",
    "TableSpec",
    "Write",
    "WriteKind",
    "blob_write",
    "build_schema",
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
