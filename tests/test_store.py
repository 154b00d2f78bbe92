"""The reference runtime's store (§2 unique keys and blobs, §10 one commit = one transaction) and
the history source over it (§4 paged reads). Expected values are derived by hand: row counts,
sha256 of known bytes, and the §4/§5 projection of a small session written out line by line."""

import ast
import hashlib
import inspect
import json
import sqlite3
from datetime import UTC, datetime
from enum import IntEnum
from pathlib import Path
from uuid import UUID

import pytest
import sqlite_utils
from pydantic import BaseModel

from ctxspec.reference import delivery as dl
from ctxspec.reference.context_contracts import mutation_contract, revision_contract
from ctxspec.reference.contracts import (
    ContextRecord,
    DeliveryState,
    InputKind,
    MessageRole,
    MutationSourceKind,
    Operation,
    OperationPurpose,
    OperationState,
    RoleContext,
    Run,
    RunStatus,
    UserInput,
    UserInputDelivery,
)
from ctxspec.reference.effective import (
    ABSENT,
    Committed,
    ContextState,
    FieldChange,
    Override,
    RawRecord,
    Scope,
    append_records,
    commit_changes,
    new_context,
)
from ctxspec.reference.history import project_history
from ctxspec.reference.registry import JSON
from ctxspec.reference.runtime.history_source import StoredHistory
from ctxspec.reference.runtime.store import (
    TABLES,
    CommitCoordinator,
    CommitFailed,
    Store,
    StoredRevision,
    Write,
    blob_write,
    build_schema,
    checkpoint_write,
    decode_overrides,
    encode_overrides,
    event_write,
    insert,
    insert_doc,
    record_write,
    revision_write,
    sql_value,
    update,
    update_doc,
)
from ctxspec.reference.view import EffectiveRecord, ModelView, ToolCall
from tests.builders import InputFacts, RunFacts, SessionBuilder, ref, uuid

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


# --- paging -------------------------------------------------------------------------------


@pytest.mark.covers("CTX-4.23")
def test_iter_records_reads_page_by_page_in_order() -> None:
    store = Store()
    coordinator = CommitCoordinator(store)
    for start in range(1, 2001, 500):
        coordinator.commit("append", [record_write(raw(1, seq, text=f"m{seq}"))
                                      for seq in range(start, start + 500)])
    coordinator.commit("other context", [record_write(raw(2, 1))])
    queries: list[str] = []
    store.db.conn.set_trace_callback(queries.append)
    seqs = [r.record.context_seq for r in store.iter_records(uuid(1), page_size=100)]
    store.db.conn.set_trace_callback(None)
    assert seqs == list(range(1, 2001))
    page_queries = [q for q in queries if "FROM records" in q]
    assert len(page_queries) >= 20
    assert all("LIMIT 100" in q for q in page_queries)
    assert [r.content["text"] for r in store.records_page(uuid(1), 1995, 100)] == \
        [f"m{seq}" for seq in range(1996, 2001)]
    assert store.last_context_seq(uuid(1)) == 2000


# --- the history source over a stored session -------------------------------------------------


class Twin:
    """Writes one session twice: into :class:`SessionBuilder` (the in-memory HistorySource of the
    core's tests) and, through the CommitCoordinator, into a Store, the way a runtime commits it:
    APP-INPUT, T_FREEZE (claim + user_ref record), T_FIRST_OUTPUT (delivered), record appends
    with their revisions, hook patches as mutations, APP-FINALIZE (run end + carry)."""

    def __init__(self) -> None:
        self.mem = SessionBuilder()
        self.store = Store()
        self.coordinator = CommitCoordinator(self.store)
        self.states: dict[UUID, ContextState] = {}
        self.deliveries: dict[UUID, UserInputDelivery] = {}
        self.runs: dict[UUID, Run] = {}
        self._ids = 1_000_000
        self.coordinator.commit("AGENT", [insert("agents", agent_id=AGENT, config="{}"),
                                          insert("sessions", session_id=SESSION,
                                                 agent_id=AGENT)])

    def fresh(self) -> UUID:
        self._ids += 1
        return uuid(self._ids)

    def _input_row(self, facts: InputFacts) -> UserInput:
        return UserInput(input_id=facts.input_id, session_id=SESSION, input_seq=facts.input_seq,
                         origin_run_id=facts.received_run_id, kind=facts.kind,
                         body_ref=ref(facts.text), received_at=T0)

    def _append(self, name: str, effective: EffectiveRecord, *extra: Write) -> None:
        """Append the raw form of a builder record with its revision and mutation."""
        content: dict[str, JSON] = {"text": effective.text}
        for call in effective.tool_calls:
            content[f"tool_call:{call.call_id}"] = {
                "action_ordinal": call.action_ordinal, "name": call.name,
                "arguments": json.loads(call.arguments), "provider_id": f"call_{call.name}"}
        record = RawRecord(effective.record, content)
        state = self.states[effective.record.context_id]
        mutation_id = self.fresh()
        done = append_records(state, [record], mutation_id=mutation_id,
                              source_kind=MutationSourceKind.RUNTIME, source_ref=name)
        self._commit_revision(name, done.state, done.revision, mutation_id,
                              blob_write(effective.text.encode())[1], record_write(record),
                              *extra)

    def _commit_revision(self, name: str, state: ContextState, revision: int, mutation_id: UUID,
                         *writes: Write) -> None:
        self.states[state.context_id] = state
        doc = revision_contract(state, revision, commit_ref=name, created_at=T0)
        mutation = mutation_contract(state, mutation_id, cause_operation_id=None, created_at=T0)
        self.coordinator.commit(name, [*writes, insert_doc(mutation),
                                       revision_write(doc, state.revision(revision).overrides)])

    def _receive(self, facts: InputFacts, target: UUID | None, *first: Write) -> None:
        pending = UserInputDelivery(
            delivery_id=self.fresh(), input_id=facts.input_id, target_run_id=target,
            operation_id=None, previous_delivery_id=None, state=DeliveryState.PENDING,
            context_seq=None, first_output_receipt_ref=None, delivered_at=None)
        self.deliveries[facts.input_id] = pending
        self.coordinator.commit("APP-INPUT", [
            *first, blob_write(facts.text.encode())[1], insert_doc(self._input_row(facts)),
            insert_doc(pending)])

    def ask(self, text: str) -> tuple[RunFacts, InputFacts]:
        """A question: its Run, root context and UserInput (APP-INPUT), not yet delivered."""
        facts = self.mem.run()
        question = self.mem.receive(facts, InputKind.QUESTION, text)
        run = Run(run_id=facts.run_id, session_id=SESSION, run_no=facts.run_no,
                  question_input_id=question.input_id, status=RunStatus.RUNNING, started_at=T0)
        self.runs[run.run_id] = run
        state = new_context(facts.context_id, Scope("private", owner_role="root"))
        self.states[state.context_id] = state
        context = RoleContext(context_id=facts.context_id, invocation_id=self.fresh(),
                              owner_node_task_id=self.fresh(), role_key="root", record_head=0,
                              effective_revision=1, active_snapshot_id=None,
                              last_model_operation_id=None)
        initial = revision_contract(state, 1, commit_ref="APP-INPUT", created_at=T0)
        self._receive(question, run.run_id, insert_doc(run),
                      insert_doc(context, run_id=run.run_id), revision_write(initial, {}))
        return facts, question

    def supplement(self, run: RunFacts, text: str) -> InputFacts:
        facts = self.mem.receive(run, InputKind.SUPPLEMENT, text)
        self._receive(facts, run.run_id)
        return facts

    def _freeze(self, run: RunFacts, facts: InputFacts, effective: EffectiveRecord) -> UUID:
        """T_FREEZE: a model Operation claims the input; its user_ref record is appended."""
        op = Operation(operation_id=self.fresh(), run_id=run.run_id, node_task_id=self.fresh(),
                       purpose=OperationPurpose.MODEL,
                       purpose_key=f"model:{run.run_id}:{effective.record.context_seq}",
                       state=OperationState.RUNNING)
        claimed = dl._ok(dl.claim(self.deliveries[facts.input_id], run_id=run.run_id,
                                  operation_id=op.operation_id))
        self.deliveries[facts.input_id] = claimed
        self._append("T_FREEZE", effective, insert_doc(op), update_doc(claimed))
        return op.operation_id

    def deliver(self, run: RunFacts, facts: InputFacts) -> None:
        operation_id = self._freeze(run, facts, self.mem.deliver(run, facts))
        receipt = self.store.put_text(f"first output of {operation_id}")
        delivered = dl._ok(dl.deliver(self.deliveries[facts.input_id], operation_id=operation_id,
                                      receipt_ref=receipt, delivered_at=T0))
        self.deliveries[facts.input_id] = delivered
        self.coordinator.commit("T_FIRST_OUTPUT", [update_doc(delivered)])

    def claim(self, run: RunFacts, facts: InputFacts) -> None:
        self._freeze(run, facts, self.mem.claim(run, facts))

    def carry_to(self, run: RunFacts, facts: InputFacts) -> None:
        """APP-FINALIZE hand-over of a claimed input, then its binding to ``run``'s question."""
        carried, successor = dl._ok(dl.carry(self.deliveries[facts.input_id],
                                             successor_id=self.fresh()))
        bound = dl._ok(dl.bind(successor, run_id=run.run_id))
        self.deliveries[facts.input_id] = bound
        self.coordinator.commit("APP-FINALIZE", [update_doc(carried), insert_doc(successor)])
        self.coordinator.commit("APP-INPUT", [update_doc(bound)])

    def say(self, run: RunFacts, text: str) -> EffectiveRecord:
        record = self.mem.say(run, text)
        self._append("effective-result", record)
        return record

    def call(self, run: RunFacts, *names: str) -> list[ToolCall]:
        calls = self.mem.call(run, *names)
        self._append("effective-result", run.records[-1])
        return calls

    def result(self, run: RunFacts, call: ToolCall, text: str) -> None:
        self._append("batch-feedback", self.mem.result(run, call, text))

    def edit(self, run: RunFacts, record: EffectiveRecord, text: str) -> None:
        """A hook's committed change of a record's text: an override in a new revision."""
        mutation_id = self.fresh()
        state = self.states[run.context_id]
        done = commit_changes(state, [FieldChange(record.record_id, "text", text, ("text",))], (),
                              base_revision=state.head.revision, mutation_id=mutation_id,
                              source_kind=MutationSourceKind.HOOK, source_ref="hook:redact")
        assert isinstance(done, Committed)
        self._commit_revision("hook-patch", done.state, done.revision, mutation_id)
        # A text made to differ from the record's own is marked with the change's source (§2,
        # §6): its kind and reference.
        edited = record.model_copy(update={
            "text": text, "modified_by": (str(mutation_id),),
            "text_changed_by": ("hook:hook:redact",) if text != record.text else ()})
        run.records[run.records.index(record)] = edited
        if run.final == record:
            run.final = edited

    def end(self, run: RunFacts, status: RunStatus, final: str | None = None) -> None:
        if final is not None:
            run.final = self.say(run, final)
        run.status = status
        ended = self.runs[run.run_id].model_copy(update={"status": status, "ended_at": T0})
        self.coordinator.commit("APP-FINALIZE", [update_doc(ended)])


def view_lines(view: ModelView) -> list[tuple[str, str, str]]:
    return [(m.role.value, m.kind.value, m.text) for m in view.messages]


@pytest.mark.covers("CTX-4.23", "CTX-4.4", "CTX-4.10", "CTX-4.14", "CTX-5.25", "CTX-2.31",
                    "CTX-10.6", "CTX-10.7")
def test_the_projection_from_the_store_equals_the_one_from_memory() -> None:
    twin = Twin()
    # Run 1 (older than the two recent runs): question, a tool round, a supplement, a final
    # answer that a hook edited.
    r1, q1 = twin.ask("写部署方案")
    twin.deliver(r1, q1)
    (shell,) = twin.call(r1, "shell")
    twin.result(r1, shell, "docker ps")
    twin.deliver(r1, twin.supplement(r1, "只用 Docker"))
    twin.end(r1, RunStatus.SUCCEEDED, final="方案见……")
    assert r1.final is not None
    twin.edit(r1, r1.final, "方案见附件")
    # Run 2 fails; its supplement was claimed by a request that never produced output.
    r2, q2 = twin.ask("q2")
    twin.deliver(r2, q2)
    twin.say(r2, "thinking 2")
    s2 = twin.supplement(r2, "不开放公网端口")
    twin.claim(r2, s2)
    twin.end(r2, RunStatus.FAILED)
    # Run 3 picks up run 2's supplement, succeeds after two tool calls (a hook redacted one of
    # its texts), and receives a last supplement too late for any request.
    r3, q3 = twin.ask("q3")
    twin.carry_to(r3, s2)
    twin.deliver(r3, s2)
    twin.deliver(r3, q3)
    read, grep = twin.call(r3, "read", "grep")
    twin.result(r3, read, "r-read")
    twin.result(r3, grep, "r-grep")
    checking = twin.say(r3, "checking /etc/secret")
    twin.edit(r3, checking, "checking [redacted]")
    twin.end(r3, RunStatus.SUCCEEDED, final="a3")
    s3 = twin.supplement(r3, "顺便写回滚步骤")
    # Run 4 is current: run 3's late supplement is carried to it and delivered with its question.
    r4, q4 = twin.ask("q4")
    twin.carry_to(r4, s3)
    twin.deliver(r4, s3)
    twin.deliver(r4, q4)

    history = StoredHistory(twin.store, SESSION, page_size=2)
    protected = {s3.input_id, q4.input_id}
    ended = history.ended_runs(before_run_no=4)
    assert list(ended) == twin.mem.ended(r4)
    stored = project_history(ended_runs=ended, recent_runs=2, source=history,
                             current_run_id=r4.run_id,
                             current_records=history.current_records(r4.run_id),
                             protected_input_ids=protected)
    in_memory = project_history(ended_runs=twin.mem.ended(r4), recent_runs=2, source=twin.mem,
                                current_run_id=r4.run_id, current_records=r4.records,
                                protected_input_ids=protected)
    assert isinstance(stored, ModelView)
    assert stored == in_memory
    assert view_lines(stored) == [
        ("user", "user_ref", "写部署方案"),
        ("user", "user_ref", "只用 Docker"),
        ("assistant", "assistant", "方案见附件"),
        ("system", "outcome", "[run 1 ended: succeeded]"),
        ("user", "user_ref", "q2"),
        ("assistant", "assistant", "thinking 2"),
        ("system", "marker", f"[user input {s2.input_id}: text shown in run {r3.run_id}]"),
        ("system", "outcome", "[run 2 ended: failed; no final result]"),
        ("user", "user_ref", "不开放公网端口"),
        ("user", "user_ref", "q3"),
        ("assistant", "assistant", ""),
        ("tool", "tool_result", "r-read"),
        ("tool", "tool_result", "r-grep"),
        ("assistant", "assistant", "checking [redacted]"),
        ("assistant", "assistant", "a3"),
        ("system", "outcome", "[run 3 ended: succeeded]"),
        ("user", "user_ref", "顺便写回滚步骤"),
        ("user", "user_ref", "q4"),
    ]
    shown = {m.input_id: (m.source_run_id, m.carried_from_run_id) for m in stored.messages
             if m.kind.value == "user_ref"}
    assert shown[s2.input_id] == (r3.run_id, r2.run_id)
    assert shown[s3.input_id] == (r4.run_id, r3.run_id)
    edited = stored.messages[2]
    assert edited.modified_by and twin.store.mutation(UUID(edited.modified_by[0])) is not None
    # The raw facts are unchanged: the edit lives in the revision, not in the record.
    final_raw = twin.store.last_record_of(r1.context_id, role="assistant",
                                          message_kind="assistant")
    assert final_raw is not None and final_raw.content["text"] == "方案见……"
    # The stored delivery chain of the carried supplement: claimed in run 2, carried, delivered.
    chain = twin.store.deliveries_of_input(s2.input_id)
    assert [(d.state, d.target_run_id) for d in chain] == [
        (DeliveryState.CARRIED, r2.run_id), (DeliveryState.DELIVERED, r3.run_id)]
    assert chain[1].previous_delivery_id == chain[0].delivery_id
    # Every choice of recent runs agrees too (0: every earlier run shows its inputs and result).
    for recent in (0, 1, 3):
        assert project_history(
            ended_runs=history.ended_runs(4), recent_runs=recent, source=history,
            current_run_id=r4.run_id, current_records=history.current_records(r4.run_id),
            protected_input_ids=protected) == project_history(
            ended_runs=twin.mem.ended(r4), recent_runs=recent, source=twin.mem,
            current_run_id=r4.run_id, current_records=r4.records,
            protected_input_ids=protected), recent


@pytest.mark.covers("CTX-4.14")
def test_a_succeeded_run_whose_last_assistant_record_calls_tools_has_no_final_answer() -> None:
    twin = Twin()
    r1, q1 = twin.ask("q1")
    twin.deliver(r1, q1)
    twin.say(r1, "interim text")
    (tool,) = twin.call(r1, "shell")
    twin.result(r1, tool, "ok")
    twin.end(r1, RunStatus.SUCCEEDED)
    (ended,) = StoredHistory(twin.store, SESSION).ended_runs(before_run_no=2)
    assert ended.final_answer is None
    assert list(StoredHistory(twin.store, SESSION).ended_runs(before_run_no=1)) == []


def test_placement_of_an_unknown_input_is_an_error() -> None:
    with pytest.raises(KeyError):
        StoredHistory(Store(), SESSION).placement(uuid(404))


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
