"""The reference runtime's store on disk (§10) and its blobs (§2, §9): a file store is WAL with
full sync and keeps what was committed, opens while another connection writes the file, a new
store gets the schema sqlite-utils builds, and blobs are content addressed (sha256 of known
bytes) and idempotent.

Expected values are derived by hand.
"""

import contextlib
import hashlib
import sqlite3
import threading
import time
from pathlib import Path

import pytest
import sqlite_utils

from ctxspec.reference.runtime.store import (
    TABLES,
    CommitCoordinator,
    Store,
    blob_write,
    build_schema,
    enter_wal,
    insert_doc,
)
from tests.builders import ref
from tests.store_rows import SESSION, user_input

# --- files and blobs ----------------------------------------------------------------------


@pytest.mark.covers("CTX-10.29")
def test_a_file_store_is_wal_with_full_sync_and_keeps_committed_data(tmp_path: Path) -> None:
    path = tmp_path / "ctx.db"
    with Store(path) as store:
        assert store.query("PRAGMA journal_mode")[0]["journal_mode"] == "wal"
        assert store.query("PRAGMA synchronous")[0]["synchronous"] == 2
        CommitCoordinator(store).commit("APP-INPUT", [insert_doc(user_input(11, 1))])
        body = store.put_blob(b"kept")
    with Store(path) as reopened:
        assert reopened.query("PRAGMA synchronous")[0]["synchronous"] == 2
        assert reopened.inputs_of_session(SESSION) == [user_input(11, 1)]
        assert reopened.blob(body) == b"kept"
        reopened.create_schema()  # idempotent
        assert reopened.count("user_inputs") == 1


def holding_the_write_lock(path: Path) -> sqlite3.Connection:
    """A database file in rollback mode with a table, and a connection that holds its write
    lock (BEGIN IMMEDIATE): another connection may read it but not switch it to WAL."""
    with contextlib.closing(sqlite3.connect(path)) as setup, setup:
        setup.execute("CREATE TABLE kept (x)")
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")
    return holder


def test_a_store_opens_while_another_connection_holds_the_write_lock(tmp_path: Path) -> None:
    # SQLite's busy timeout does not cover the switch to WAL (it upgrades a read lock); this
    # failed at once, "database is locked", before the store retried it (a CI run, issue #34).
    path = tmp_path / "held.db"
    holder = holding_the_write_lock(path)
    release = threading.Timer(0.3, lambda: holder.execute("COMMIT"))
    release.start()
    with Store(path) as store:
        assert store.query("PRAGMA journal_mode")[0]["journal_mode"] == "wal"
    release.join()
    holder.close()


def test_the_switch_to_wal_gives_up_once_its_patience_is_spent(tmp_path: Path) -> None:
    path = tmp_path / "held.db"
    holder = holding_the_write_lock(path)
    with contextlib.closing(sqlite3.connect(path)) as conn:
        began = time.monotonic()
        with pytest.raises(sqlite3.OperationalError, match="database is locked"):
            enter_wal(conn, 0.2)
        assert time.monotonic() - began >= 0.2
    holder.close()


def test_a_new_store_gets_the_schema_sqlite_utils_builds(tmp_path: Path) -> None:
    # A new store runs a copy of the schema script instead of building it table by table
    # (issue #20); what it creates must be exactly what the table-by-table build creates.
    built = sqlite_utils.Database(memory=True)
    build_schema(built)

    def schema(conn: sqlite3.Connection) -> list[tuple[str, str, str, str | None]]:
        return sorted(conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master"))

    expected = schema(built.conn)
    assert len(expected) > len(TABLES)  # tables, their unique keys and indexes
    assert schema(Store().db.conn) == expected
    with Store(tmp_path / "new.db") as store:
        assert schema(store.db.conn) == expected


@pytest.mark.covers("CTX-2.24", "CTX-9.41")
def test_blobs_are_content_addressed_and_idempotent() -> None:
    store = Store()
    text = "部署方案 ✓"
    data = text.encode("utf-8")
    first = store.put_blob(data)
    again = store.put_blob(data)
    assert first == again
    assert first.digest == "sha256:" + hashlib.sha256(data).hexdigest()
    assert first.size_bytes == len(data) == 4 * 3 + 1 + 3  # four CJK, a space, a check mark
    # The well-known sha256 of b"abc" (FIPS 180-2, appendix B.1).
    assert store.put_blob(b"abc").digest == \
        "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    assert store.count("blobs") == 2
    assert store.blob(first) == data and store.text(first) == text
    other = store.put_text("another")
    assert other.digest != first.digest and store.count("blobs") == 3
    # Written in the commit that points at it, a blob may already exist: nothing conflicts.
    ref_in_commit, write = blob_write(data)
    assert ref_in_commit == first
    CommitCoordinator(store).commit("effective-result", [write, write])
    assert store.count("blobs") == 3
    with pytest.raises(KeyError):
        store.blob(ref("never stored"))
