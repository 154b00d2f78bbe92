"""The store's schema (§2 "身份、顺序和对象结构", §10): every table with its key and query
columns, its primary key, the unique keys of §2 as real UNIQUE indexes (CTX-2.23), and how a
new database gets it. What each table holds is said in :mod:`store`.
"""

import functools
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass

import sqlite_utils

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
    "sessions": TableSpec(_cols("session_id", "agent_id", "owner_id", "owner_epoch",
                                "commit_seq", "lease_until",
                                ints=("owner_epoch", "commit_seq", "lease_until")),
                          ("session_id",), frozenset({"agent_id"})),
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
                                          "logical_result_key IS NOT NULL"),),
                         # A takeover finds a Run's shared scope by its records (restore.py):
                         # without it each Run scanned every record of the store (issue #34).
                         indexes=(("run_id", "message_kind"),)),
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


@functools.cache
def schema_image() -> bytes:
    """An empty in-memory database holding the whole schema, as bytes
    (``sqlite3.Connection.serialize``): a new in-memory store deserialises it, about forty
    times cheaper than running :func:`schema_script` (every conformance case opens one or more
    in-memory stores, issue #20)."""
    template = sqlite3.connect(":memory:")
    try:
        template.executescript("BEGIN;\n" + ";\n".join(schema_script()) + ";\nCOMMIT;")
        return template.serialize()
    finally:
        template.close()
