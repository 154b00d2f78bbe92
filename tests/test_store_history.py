"""The history source over the reference runtime's store (§4 paged reads): records read page by
page in order, and the §4 / §5 projection of a small session written into the store equal to the
one from memory, written out line by line.

Expected values are derived by hand.
"""

import json
from uuid import UUID

import pytest

from ctxspec.reference import delivery as dl
from ctxspec.reference.context_contracts import mutation_contract, revision_contract
from ctxspec.reference.contracts import (
    DeliveryState,
    InputKind,
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
    Committed,
    ContextState,
    FieldChange,
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
    CommitCoordinator,
    Store,
    Write,
    blob_write,
    insert,
    insert_doc,
    record_write,
    revision_write,
    update_doc,
)
from ctxspec.reference.view import EffectiveRecord, ModelView, ToolCall
from tests.builders import InputFacts, RunFacts, SessionBuilder, ref, uuid
from tests.store_rows import AGENT, SESSION, T0, raw

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
