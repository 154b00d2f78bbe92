"""The reference runtime's store, its keys and commits: §2's unique keys are unique indexes and a
duplicate fails the whole commit, a provider's tool call id is never a key, and §10's one commit =
one transaction (a commit failing half way or crashing leaves nothing, never nests); documents,
overrides and column values round trip, and every method of the store is called.

Expected values are derived by hand: the rows each commit leaves, table by table.
"""

import ast
import inspect
import json
import sqlite3
from enum import IntEnum
from pathlib import Path
from uuid import UUID

import pytest
from pydantic import BaseModel

from ctxspec.reference.contracts import ContextRecord, MessageRole, OperationState, Run, RunStatus
from ctxspec.reference.effective import ABSENT, Override, RawRecord
from ctxspec.reference.registry import JSON
from ctxspec.reference.runtime.store import (
    TABLES,
    CommitCoordinator,
    CommitFailed,
    Store,
    StoredRevision,
    Write,
    blob_write,
    checkpoint_write,
    decode_overrides,
    encode_overrides,
    event_write,
    insert,
    insert_doc,
    record_write,
    sql_value,
    update,
    update_doc,
)
from tests.builders import ref, uuid
from tests.store_rows import AGENT, SESSION, T0, operation, raw, user_input


def counts(store: Store) -> dict[str, int]:
    return {table: store.count(table) for table in TABLES}


# --- unique keys ----------------------------------------------------------------------------

DUPLICATES: dict[str, tuple[Write, Write]] = {
    "(context_id, context_seq)": (record_write(raw(1, 1)), record_write(raw(1, 1, record=99))),
    "(operation_id, message_kind, logical_result_key)": (
        record_write(raw(1, 1, operation=5), "call:1"),
        record_write(raw(1, 2, operation=5), "call:1")),
    "purpose_key": (insert_doc(operation(5, "model:run-7:1")),
                    insert_doc(operation(6, "model:run-7:1"))),
    "(session_id, input_seq)": (insert_doc(user_input(11, 1)), insert_doc(user_input(12, 1))),
}


@pytest.mark.covers("CTX-2.23", "CTX-2.7", "CTX-2.11", "CTX-10.29")
@pytest.mark.parametrize("key", sorted(DUPLICATES))
def test_a_duplicate_unique_key_fails_the_whole_commit(key: str) -> None:
    store = Store()
    coordinator = CommitCoordinator(store)
    first, duplicate = DUPLICATES[key]
    coordinator.commit("first", [first])
    before = counts(store)
    # The duplicate comes after two writes that are fine on their own: none of them survives.
    _, blob = blob_write(b"written in the failing commit")
    with pytest.raises(CommitFailed) as failed:
        coordinator.commit("second", [blob, insert("agents", agent_id=uuid(3), config="{}"),
                                      duplicate])
    assert failed.value.name == "second"
    assert isinstance(failed.value.cause, sqlite3.IntegrityError)
    assert "UNIQUE" in str(failed.value.cause)
    assert counts(store) == before
    assert coordinator.commits == 1 and coordinator.by_name == {"first": 1}


@pytest.mark.covers("CTX-2.23")
def test_unique_keys_are_unique_indexes_in_the_schema() -> None:
    store = Store()
    unique: set[tuple[str, tuple[str, ...]]] = set()
    for table in TABLES:
        for index in store.query(f"PRAGMA index_list([{table}])"):
            if index["unique"]:
                columns = tuple(c["name"] for c in store.query(
                    f"PRAGMA index_info([{index['name']}])"))
                unique.add((table, columns))
    assert {("records", ("context_id", "context_seq")),
            ("records", ("operation_id", "message_kind", "logical_result_key")),
            ("operations", ("purpose_key",)),
            ("user_inputs", ("session_id", "input_seq")),
            ("runs", ("session_id", "run_no")),
            ("attempts", ("operation_id", "attempt_no")),
            ("hook_invocations", ("operation_id", "hook_point", "chain_position")),
            ("batches", ("model_operation_id",)),
            ("episodes", ("triggering_model_operation_id",))} <= unique
    # Records without a logical result key are not constrained by that key.
    coordinator = CommitCoordinator(store)
    coordinator.commit("two", [record_write(raw(1, 1, operation=5)),
                               record_write(raw(1, 2, operation=5))])
    assert store.count("records") == 2


@pytest.mark.covers("CTX-2.25")
def test_a_provider_tool_call_id_is_never_a_column_or_key() -> None:
    store = Store()
    for table, spec in TABLES.items():
        assert not any("tool_call" in column or "provider" in column
                       for column in spec.columns), table
    # It lives only inside the stored content, next to our own call id.
    call_id = uuid(41)
    record = ContextRecord(record_id=uuid(40), context_id=uuid(1), context_seq=1, run_id=uuid(7),
                           role=MessageRole.ASSISTANT, message_kind="assistant",
                           payload_ref=ref(""), operation_id=None, call_id=None,
                           origin_input_id=None)
    content: dict[str, JSON] = {"text": "", f"tool_call:{call_id}": {
        "action_ordinal": 1, "name": "shell", "arguments": {}, "provider_id": "call_abc123"}}
    CommitCoordinator(store).commit("append", [record_write(RawRecord(record, content))])
    (stored,) = store.records_page(uuid(1), 0, 10)
    assert stored.content == content
    assert store.query("SELECT COUNT(*) AS n FROM records WHERE record_id = 'call_abc123' "
                       "OR call_id = 'call_abc123'")[0]["n"] == 0


# --- commits ----------------------------------------------------------------------------------


@pytest.mark.covers("CTX-10.19", "CTX-10.26", "CTX-10.28", "CTX-3.6")
def test_a_commit_failing_half_way_leaves_nothing_behind() -> None:
    store = Store()
    seen: list[tuple[str, int]] = []

    def fault(name: str, index: int) -> None:
        seen.append((name, index))
        if name == "T_FREEZE" and index == 2:
            raise OSError("disk went away")

    coordinator = CommitCoordinator(store, fault)
    writes = [insert_doc(operation(5, "model:run-7:1")), record_write(raw(1, 1, operation=5)),
              checkpoint_write(uuid(7), "loop", {"stage": "before_model", "record_head": 1})]
    before = counts(store)
    with pytest.raises(CommitFailed, match="T_FREEZE") as failed:
        coordinator.commit("T_FREEZE", writes)
    assert isinstance(failed.value.cause, OSError)
    assert not isinstance(failed.value, OSError)  # a persistence failure, not a hook error
    assert seen == [("T_FREEZE", 0), ("T_FREEZE", 1), ("T_FREEZE", 2)]
    assert counts(store) == before == {table: 0 for table in TABLES}
    assert not store.db.conn.in_transaction
    assert coordinator.commits == 0
    # The same writes commit under another name, where the fault does not fire.
    coordinator.commit("T_FREEZE-again", writes)
    assert (store.count("operations"), store.count("records"), store.count("checkpoints")) == \
        (1, 1, 1)
    assert coordinator.commits == 1 and coordinator.by_name["T_FREEZE-again"] == 1


class Crash(BaseException):
    """A simulated process death at a commit boundary."""


def test_a_crash_inside_a_commit_rolls_back_and_propagates_unwrapped() -> None:
    store = Store()

    def crash(name: str, index: int) -> None:
        if index == 1:
            raise Crash(name)

    with pytest.raises(Crash):
        CommitCoordinator(store, crash).commit("raw-result-saved", [
            insert("agents", agent_id=uuid(3), config="{}"),
            insert("sessions", session_id=SESSION, agent_id=uuid(3))])
    assert store.count("agents") == store.count("sessions") == 0


@pytest.mark.covers("CTX-10.28")
@pytest.mark.parametrize("write", [
    update("runs", "run_id", run_id=uuid(404), status="failed"),
    insert("no_such_table", x=1),
    insert("agents", agent_id=uuid(3), colour="blue"),
    Write("runs", "update", {"run_id": uuid(404)}, ("run_id",)),
], ids=["update-of-a-missing-row", "unknown-table", "unknown-column", "update-sets-nothing"])
def test_a_write_that_cannot_apply_fails_its_commit(write: Write) -> None:
    store = Store()
    with pytest.raises(CommitFailed):
        CommitCoordinator(store).commit("bad", [insert("agents", agent_id=uuid(5)), write])
    assert store.count("agents") == 0


def test_a_commit_never_nests_in_another_transaction() -> None:
    store = Store()
    coordinator = CommitCoordinator(store)
    with store.db.atomic(), pytest.raises(CommitFailed, match="another is open"):
        coordinator.commit("inner", [insert("agents", agent_id=uuid(3))])


def test_documents_round_trip_and_updates_replace_doc_and_columns() -> None:
    store = Store()
    coordinator = CommitCoordinator(store)
    run = Run(run_id=uuid(7), session_id=SESSION, run_no=1, question_input_id=uuid(8),
              status=RunStatus.RUNNING, started_at=T0)
    second = run.model_copy(update={"run_id": uuid(17), "run_no": 2})
    op = operation(5, "model:run-7:1")
    coordinator.commit("start", [insert("agents", agent_id=AGENT, config=json.dumps({"w": 1})),
                                 insert("sessions", session_id=SESSION, agent_id=AGENT),
                                 insert_doc(second), insert_doc(run), insert_doc(op)])
    ended = run.model_copy(update={"status": RunStatus.STOPPED, "ended_at": T0})
    done = op.model_copy(update={"state": OperationState.SUCCEEDED, "raw_result_ref": ref("r")})
    coordinator.commit("end", [update_doc(ended), update_doc(done, hook_cursor=3),
                               checkpoint_write(uuid(7), "loop", {"stage": "model"}),
                               event_write(uuid(7), 1, {"type": "run.started"})])
    coordinator.commit("move", [checkpoint_write(uuid(7), "loop", {"stage": "feedback"}),
                                event_write(uuid(7), 2, {"type": "run.stopped"})])
    assert store.run(uuid(7)) == ended
    assert store.query("SELECT status FROM runs WHERE run_id = ?", (str(uuid(7)),)) == \
        [{"status": "stopped"}]
    assert [r.run_no for r in store.runs_of_session(SESSION)] == [1, 2]
    assert store.operation_by_key("model:run-7:1") == done
    assert store.operation_by_key("model:run-7:2") is None
    assert store.hook_cursor(uuid(5)) == 3
    assert store.checkpoint(uuid(7), "loop") == {"stage": "feedback"}
    assert store.events_of(uuid(7)) == [(1, {"type": "run.started"}),
                                        (2, {"type": "run.stopped"})]
    assert store.agent_config(AGENT) == {"w": 1}
    assert store.session_agent(SESSION) == AGENT
    assert store.head_revision(uuid(1)) == (1, {})


def test_overrides_round_trip_with_deletions() -> None:
    overrides = {(uuid(1), "text"): Override("edited", uuid(9)),
                 (uuid(1), f"tool_call:{uuid(4)}.arguments.path"): Override(ABSENT, uuid(9)),
                 (uuid(2), "text"): Override({"a": [1, None]}, uuid(10))}
    decoded = decode_overrides(encode_overrides(overrides))
    assert decoded == {uuid(1): {"text": Override("edited", uuid(9)),
                                 f"tool_call:{uuid(4)}.arguments.path": Override(ABSENT,
                                                                                  uuid(9))},
                       uuid(2): {"text": Override({"a": [1, None]}, uuid(10))}}
    assert json.loads(encode_overrides(overrides))[1][2] == {"$absent": True}


# --- the history source over a stored session -------------------------------------------------


class _Level(IntEnum):
    HIGH = 3


class _Plain(BaseModel):
    n: int


@pytest.mark.parametrize(("value", "stored"), [
    ("text", "text"), (7, 7), (None, None), (b"\x00", b"\x00"), (1.5, 1.5),
    (True, 1), (False, 0),
    (UUID(int=1), "00000000-0000-0000-0000-000000000001"),
    (RunStatus.RUNNING, "running"), (_Level.HIGH, 3),
    ({"a": [1, UUID(int=2)]}, '{"a":[1,"00000000-0000-0000-0000-000000000002"]}'),
    ([RunStatus.RUNNING, "é"], '["running","é"]'), ((1, 2), "[1,2]"),
    (_Plain(n=4), '{"n":4}'),
])
def test_a_column_value_is_stored_as_its_kind_says(value: object, stored: object) -> None:
    # Checked twice: the second conversion takes the type's converter found by the first.
    assert sql_value(value) == stored
    assert sql_value(value) == stored
    assert type(sql_value(value)) is type(stored)


def test_a_value_no_column_can_store_is_refused() -> None:
    with pytest.raises(TypeError, match="set is not a storable column value"):
        sql_value({1})


def test_every_method_of_the_store_is_called_somewhere() -> None:
    # Issue #34: a reader nobody calls is code to keep in step with the schema for nothing.
    # A method counts as called when some other module of the project — or the store itself —
    # names it as an attribute (``store.text(...)``, ``self.query(...)``).
    root = Path(__file__).resolve().parent.parent
    used: set[str] = set()
    for folder in ("reference", "conformance", "models", "ctxspec/commands", "tests"):
        for path in (root / folder).rglob("*.py"):
            used |= {node.attr for node in ast.walk(ast.parse(path.read_text("utf-8")))
                     if isinstance(node, ast.Attribute)}
    defined = {f"{cls.__name__}.{name}" for cls in (Store, CommitCoordinator, StoredRevision)
               for name, _ in inspect.getmembers(cls, inspect.isfunction)
               if not name.startswith("__") and name in vars(cls)}
    assert sorted(d for d in defined if d.split(".")[1] not in used) == []
