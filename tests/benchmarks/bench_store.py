"""Benchmark of the reference runtime's store (§10 commits, §4 paged history reads).

Run: ``python3 tests/benchmarks/bench_store.py [--repeat 5] [--loops 50] [--runs 1000]
[--records 1000]``. Prints

(a) commits per second of a realistic run on a file store (WAL, ``synchronous=FULL``) in a
    temporary directory: each loop of the root role commits APP-INPUT (a supplement), T_FREEZE
    (the request's user_ref record, its revision, the claim, the model Operation, a checkpoint),
    raw result saved, effective result (the assistant decision with three tool calls, the first
    output receipt, the batch and its three tool Operations), three tool results (each settles a
    batch member) and the batch feedback (three tool_result records, revision, checkpoint): eight
    commits of a few rows each. ``end to end`` includes building the contracts; ``commit`` is the
    time inside :meth:`CommitCoordinator.commit` alone. Median of ``--repeat`` runs, each on a
    fresh file.
(b) the peak RSS (``ru_maxrss``) of a fresh process that opens a stored session of ``--runs`` x
    ``--records`` records (default 1,000,000) and projects the current request's history with
    the default recent_runs = 2 through :class:`StoredHistory` (target: under 100 MB), next to
    the same process's RSS before projecting, and the same projection for the session's first
    tenth, to show memory does not grow with the Session (CTX-4.23). The session is built with
    sqlite-utils bulk inserts, one transaction per Run; the build time is printed.

The database files live in a temporary directory that is deleted afterwards.
"""

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from uuid import UUID

from ctxspec.reference.contracts import (
    Attempt,
    Batch,
    BatchMember,
    BatchMemberState,
    ContextMutation,
    ContextRecord,
    DeliveryState,
    EffectiveContextRevision,
    InputKind,
    MessageRole,
    MutationSourceKind,
    Operation,
    OperationPurpose,
    OperationState,
    PayloadRef,
    RoleContext,
    Run,
    RunStatus,
    UserInput,
    UserInputDelivery,
)
from ctxspec.reference.effective import RawRecord
from ctxspec.reference.history import project_history
from ctxspec.reference.registry import JSON
from ctxspec.reference.runtime.history_source import StoredHistory
from ctxspec.reference.runtime.store import (
    CommitCoordinator,
    Store,
    Write,
    blob_write,
    checkpoint_write,
    dumps,
    insert_doc,
    record_write,
    revision_write,
    update_doc,
)
from ctxspec.reference.view import ModelView

T0 = datetime(2026, 10, 15, 9, 0, tzinfo=UTC)
SESSION, AGENT = UUID(int=1), UUID(int=2)


class Ids:
    def __init__(self) -> None:
        self.n = 1000

    def __call__(self) -> UUID:
        self.n += 1
        return UUID(int=self.n)


# --- (a) commits of a realistic run ---------------------------------------------------------


class LoopRun:
    """One Run of the root role, loop by loop, committed as a runtime would."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.coordinator = CommitCoordinator(store)
        self.commit_seconds = 0.0
        self.writes = 0
        self.ids = Ids()
        self.run_id, self.context_id, self.node = self.ids(), self.ids(), self.ids()
        self.seq = 0
        self.revision = 1
        self.input_seq = 0
        question = self._input(InputKind.QUESTION, "写部署方案")
        self.run = Run(run_id=self.run_id, session_id=SESSION, run_no=1,
                       question_input_id=question.input_id, status=RunStatus.RUNNING,
                       started_at=T0)
        context = RoleContext(context_id=self.context_id, invocation_id=self.ids(),
                              owner_node_task_id=self.node, role_key="root", record_head=0,
                              effective_revision=1, active_snapshot_id=None,
                              last_model_operation_id=None)
        self.pending = self._pending(question)
        self._commit("APP-INPUT", [
            *self._blob(b"{}"), insert_doc(self.run), insert_doc(context, run_id=self.run_id),
            *self._blob(b"q"), insert_doc(question), insert_doc(self.pending),
            self._revision(())])

    def _commit(self, name: str, writes: list[Write]) -> None:
        self.writes += len(writes)
        start = time.perf_counter()
        self.coordinator.commit(name, writes)
        self.commit_seconds += time.perf_counter() - start

    def _blob(self, data: bytes) -> list[Write]:
        return [blob_write(data)[1]]

    def _ref(self, data: bytes) -> PayloadRef:
        return blob_write(data)[0]

    def _input(self, kind: InputKind, text: str) -> UserInput:
        self.input_seq += 1
        return UserInput(input_id=self.ids(), session_id=SESSION, input_seq=self.input_seq,
                         origin_run_id=self.run_id, kind=kind,
                         body_ref=self._ref(text.encode()), received_at=T0)

    def _pending(self, received: UserInput) -> UserInputDelivery:
        return UserInputDelivery(delivery_id=self.ids(), input_id=received.input_id,
                                 target_run_id=self.run_id, operation_id=None,
                                 previous_delivery_id=None, state=DeliveryState.PENDING,
                                 context_seq=None, first_output_receipt_ref=None,
                                 delivered_at=None)

    def _record(self, role: MessageRole, kind: str, content: dict[str, JSON], *,
                operation_id: UUID | None = None, call_id: UUID | None = None,
                input_id: UUID | None = None) -> RawRecord:
        self.seq += 1
        record = ContextRecord(record_id=self.ids(), context_id=self.context_id,
                               context_seq=self.seq, run_id=self.run_id, role=role,
                               message_kind=kind, payload_ref=self._ref(dumps(content).encode()),
                               operation_id=operation_id, call_id=call_id,
                               origin_input_id=input_id)
        return RawRecord(record, content)

    def _revision(self, mutation_ids: tuple[UUID, ...]) -> Write:
        doc = EffectiveContextRevision(
            context_id=self.context_id, revision=self.revision,
            parent_revision=self.revision - 1 if self.revision > 1 else None,
            record_watermark=self.seq, mutation_ids=mutation_ids,
            effective_manifest_ref=self._ref(f"manifest {self.revision}".encode()),
            commit_ref=f"rev-{self.revision}", created_at=T0)
        self.revision += 1
        return revision_write(doc, {})

    def _append(self, records: list[RawRecord]) -> list[Write]:
        mutation = ContextMutation(
            mutation_id=self.ids(), context_id=self.context_id, base_revision=self.revision - 1,
            committed_revision=self.revision, source_kind=MutationSourceKind.RUNTIME,
            source_ref="runtime", cause_operation_id=None, patch_ref=self._ref(b"append"),
            created_at=T0)
        return [*(record_write(r, f"{r.record.message_kind}:{r.record.context_seq}")
                  for r in records), insert_doc(mutation), self._revision((mutation.mutation_id,))]

    def loop(self, n: int) -> None:
        # APP-INPUT: a supplement arrives while the Run is active.
        supplement = self._input(InputKind.SUPPLEMENT, f"补充 {n}")
        pending = self._pending(supplement)
        self._commit("APP-INPUT", [*self._blob(f"补充 {n}".encode()), insert_doc(supplement),
                                   insert_doc(pending)])
        # T_FREEZE: the model Operation claims it; the request's user_ref record is appended.
        model = Operation(operation_id=self.ids(), run_id=self.run_id, node_task_id=self.node,
                          purpose=OperationPurpose.MODEL, purpose_key=f"model:{self.run_id}:{n}",
                          state=OperationState.RUNNING)
        claimed = pending.model_copy(update={"state": DeliveryState.CLAIMED,
                                             "operation_id": model.operation_id})
        user_ref = self._record(MessageRole.USER, "user_ref", {"text": f"补充 {n}"},
                                input_id=supplement.input_id)
        self._commit("T_FREEZE", [insert_doc(model), update_doc(claimed), *self._append([user_ref]),
                                  checkpoint_write(self.run_id, "root", {
                                      "stage": "model", "operation_id": str(model.operation_id),
                                      "record_head": self.seq})])
        # Raw result saved: the provider's whole response as a blob, the Attempt.
        raw_body = json.dumps({"choices": [{"message": {"tool_calls": [
            {"id": f"call_{n}_{k}", "function": {"name": "read", "arguments": "{}"}}
            for k in range(3)]}}]}).encode()
        raw_ref = self._ref(raw_body)
        model = model.model_copy(update={"raw_result_ref": raw_ref})
        attempt = Attempt(attempt_id=self.ids(), operation_id=model.operation_id, attempt_no=1,
                          state=OperationState.SUCCEEDED, owner_epoch=1, raw_result_ref=raw_ref)
        self._commit("raw-result-saved", [blob_write(raw_body)[1], insert_doc(attempt),
                                          update_doc(model)])
        # Effective result: the decision with three calls, the first output, the batch.
        calls = [self.ids() for _ in range(3)]
        tools = [Operation(operation_id=self.ids(), run_id=self.run_id, node_task_id=self.node,
                           purpose=OperationPurpose.TOOL, purpose_key=f"tool:{call}",
                           state=OperationState.PREPARED) for call in calls]
        content: dict[str, JSON] = {"text": ""}
        for ordinal, call in enumerate(calls, start=1):
            content[f"tool_call:{call}"] = {"action_ordinal": ordinal, "name": "read",
                                            "arguments": {"path": f"file{ordinal}.md"},
                                            "provider_id": f"call_{n}_{ordinal}"}
        decision = self._record(MessageRole.ASSISTANT, "assistant", content,
                                operation_id=model.operation_id)
        model = model.model_copy(update={"state": OperationState.SUCCEEDED,
                                         "effective_result_ref": raw_ref})
        receipt = self._ref(f"first output {n}".encode())
        delivered = claimed.model_copy(update={"state": DeliveryState.DELIVERED,
                                               "first_output_receipt_ref": receipt,
                                               "delivered_at": T0})
        batch = Batch(batch_id=self.ids(), run_id=self.run_id, context_id=self.context_id,
                      model_operation_id=model.operation_id,
                      members=tuple(BatchMember(action_ordinal=i, call_id=call,
                                                operation_id=tool.operation_id,
                                                state=BatchMemberState.PENDING)
                                    for i, (call, tool) in enumerate(zip(calls, tools,
                                                                         strict=True), 1)))
        self._commit("effective-result", [
            update_doc(model), update_doc(delivered), *self._append([decision]),
            insert_doc(batch), *(insert_doc(tool) for tool in tools)])
        # Three tool results, each settling its batch member.
        results = []
        for i, (call, tool) in enumerate(zip(calls, tools, strict=True)):
            body = f"contents of file{i + 1}.md, loop {n}\n".encode() * 4
            ref = self._ref(body)
            done = tool.model_copy(update={"state": OperationState.SUCCEEDED,
                                           "raw_result_ref": ref, "effective_result_ref": ref})
            members = list(batch.members)
            members[i] = members[i].model_copy(update={"state": BatchMemberState.SETTLED})
            batch = batch.model_copy(update={"members": tuple(members)})
            self._commit("tool-result", [blob_write(body)[1], update_doc(done),
                                         update_doc(batch)])
            results.append((call, tool, ref))
        # Batch feedback: the results in action order, one revision, the checkpoint moves.
        records = [self._record(MessageRole.TOOL, "tool_result", {"text": f"file {k}"},
                                operation_id=tool.operation_id, call_id=call)
                   for k, (call, tool, _) in enumerate(results, 1)]
        batch = batch.model_copy(update={"feedback_record_id": records[0].record_id})
        self._commit("batch-feedback", [*self._append(records), update_doc(batch),
                                        checkpoint_write(self.run_id, "root", {
                                            "stage": "before_model", "record_head": self.seq})])


def bench_commits(loops: int, repeat: int, directory: Path) -> None:
    rates, commit_rates, per_commit_rows = [], [], []
    for attempt in range(repeat):
        path = directory / f"commits-{attempt}.db"
        with Store(path) as store:
            start = time.perf_counter()
            run = LoopRun(store)
            for n in range(1, loops + 1):
                run.loop(n)
            elapsed = time.perf_counter() - start
            commits = run.coordinator.commits
            rates.append(commits / elapsed)
            commit_rates.append(commits / run.commit_seconds)
            per_commit_rows.append(run.writes / commits)
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
    print(f"(a) commits: {loops} loops x {run.coordinator.commits // loops} commits "
          f"(+1), by name {dict(run.coordinator.by_name)}")
    print(f"    end to end: {statistics.median(rates):,.0f} commits/s; inside commit(): "
          f"{statistics.median(commit_rates):,.0f} commits/s "
          f"(medians of {repeat}; {statistics.median(per_commit_rows):.1f} row writes "
          "per commit, blobs included; WAL, synchronous=FULL)")


# --- (b) projecting a large stored session ------------------------------------------------------


def ident(run: int, n: int) -> UUID:
    return UUID(int=(run << 32) | n)


def _doc(record: ContextRecord) -> str:
    return record.model_dump_json()


def session_rows(run: int, records: int, refs: dict[str, PayloadRef]
                 ) -> Iterator[dict[str, Any]]:
    """One Run's root records: a question, rounds of a decision with two calls and their two
    results, thinking, a final answer (like bench_history's synthetic session)."""
    run_id, context_id = ident(run, 0), ident(run, 1)

    def row(seq: int, role: MessageRole, kind: str, content: dict[str, JSON], ref: str,
            call: UUID | None = None, input_id: UUID | None = None) -> dict[str, Any]:
        record = ContextRecord.model_construct(
            schema_version=1, record_id=ident(run, 1_000_000 + seq), context_id=context_id,
            context_seq=seq, run_id=run_id, role=role, message_kind=kind,
            payload_ref=refs[ref], operation_id=None, call_id=call, origin_input_id=input_id)
        return {"record_id": str(record.record_id), "context_id": str(context_id),
                "context_seq": seq, "run_id": str(run_id), "role": role.value,
                "message_kind": kind, "operation_id": None,
                "call_id": None if call is None else str(call),
                "origin_input_id": None if input_id is None else str(input_id),
                "logical_result_key": None, "source": None, "doc": _doc(record),
                "content": dumps(content)}

    yield row(1, MessageRole.USER, "user_ref", {"text": f"question {run}"}, "question",
              input_id=ident(run, 2))
    seq = 2
    while seq + 3 <= records - 1:
        calls = [ident(run, 10 * seq + k) for k in (1, 2)]
        content: dict[str, JSON] = {"text": "reading"}
        for k, call in enumerate(calls, 1):
            content[f"tool_call:{call}"] = {"action_ordinal": k, "name": "read",
                                            "arguments": {"path": "a.md"}}
        yield row(seq, MessageRole.ASSISTANT, "assistant", content, "reading")
        for offset, call in enumerate(reversed(calls), start=1):
            yield row(seq + offset, MessageRole.TOOL, "tool_result", {"text": f"content {seq}"},
                      "content", call=call)
        seq += 3
    while seq < records:
        yield row(seq, MessageRole.ASSISTANT, "assistant", {"text": "thinking"}, "thinking")
        seq += 1
    yield row(records, MessageRole.ASSISTANT, "assistant",
              {"text": f"final answer of run {run}"}, "final")


def build_session(path: Path, runs: int, records: int) -> float:
    start = time.perf_counter()
    with Store(path) as store:
        db = store.db
        refs = {name: store.put_text(name) for name in
                ("question", "reading", "content", "thinking", "final", "manifest")}
        with db.atomic():
            db.table("agents").insert({"agent_id": str(AGENT), "config": "{}"})
            db.table("sessions").insert({"session_id": str(SESSION), "agent_id": str(AGENT)})
        for run in range(1, runs + 1):
            run_id, context_id, input_id = ident(run, 0), ident(run, 1), ident(run, 2)
            current = run == runs
            doc = Run(run_id=run_id, session_id=SESSION, run_no=run, question_input_id=input_id,
                      status=RunStatus.RUNNING if current else RunStatus.SUCCEEDED,
                      started_at=T0, ended_at=None if current else T0)
            question = UserInput(input_id=input_id, session_id=SESSION, input_seq=run,
                                 origin_run_id=run_id, kind=InputKind.QUESTION,
                                 body_ref=refs["question"], received_at=T0)
            delivery = UserInputDelivery(
                delivery_id=ident(run, 3), input_id=input_id, target_run_id=run_id,
                operation_id=ident(run, 4), previous_delivery_id=None,
                state=DeliveryState.DELIVERED, context_seq=1,
                first_output_receipt_ref=refs["question"], delivered_at=T0)
            context = RoleContext(context_id=context_id, invocation_id=ident(run, 5),
                                  owner_node_task_id=ident(run, 6), role_key="root",
                                  record_head=records, effective_revision=2,
                                  active_snapshot_id=None, last_model_operation_id=None)
            # One hook override per Run: the final answer's text, applied from the revision.
            final_id = str(ident(run, 1_000_000 + records))
            overrides = json.dumps([[final_id, "text", f"final answer of run {run} (edited)",
                                     str(ident(run, 7))]])
            revisions = [
                {"context_id": str(context_id), "revision": number,
                 "parent": None if number == 1 else 1,
                 "record_watermark": 0 if number == 1 else records,
                 "overrides": "[]" if number == 1 else overrides,
                 "doc": EffectiveContextRevision(
                     context_id=context_id, revision=number,
                     parent_revision=None if number == 1 else 1,
                     record_watermark=0 if number == 1 else records,
                     mutation_ids=() if number == 1 else (ident(run, 7),),
                     effective_manifest_ref=refs["manifest"], commit_ref="bulk",
                     created_at=T0).model_dump_json()}
                for number in (1, 2)]
            tables: dict[str, list[dict[str, Any]]] = {
                "runs": [{"run_id": str(run_id), "session_id": str(SESSION), "run_no": run,
                          "status": doc.status.value, "owner_epoch": 1,
                          "doc": doc.model_dump_json()}],
                "user_inputs": [{"input_id": str(input_id), "session_id": str(SESSION),
                                 "input_seq": run, "origin_run_id": str(run_id),
                                 "kind": "question", "doc": question.model_dump_json()}],
                "deliveries": [{"delivery_id": str(delivery.delivery_id),
                                "input_id": str(input_id), "target_run_id": str(run_id),
                                "operation_id": str(delivery.operation_id),
                                "state": "delivered", "previous_delivery_id": None,
                                "doc": delivery.model_dump_json()}],
                "role_contexts": [{"context_id": str(context_id), "run_id": str(run_id),
                                   "role_key": "root", "doc": context.model_dump_json()}],
                "revisions": revisions,
            }
            with db.atomic():
                for name, rows in tables.items():
                    db.table(name).insert_all(rows)
                db.table("records").insert_all(session_rows(run, records, refs), batch_size=500)
            if run % 100 == 0:
                print(f"    built {run} runs ({run * records:,} records) in "
                      f"{time.perf_counter() - start:.1f} s", flush=True)
    return time.perf_counter() - start


def project_child(path: str, current_run_no: int) -> None:
    """In a fresh process: open the store, project the current request, print figures."""
    with Store(path) as store:
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        start = time.perf_counter()
        history = StoredHistory(store, SESSION)
        ended = history.ended_runs(current_run_no)
        current = ident(current_run_no, 0)
        view = project_history(ended_runs=ended, recent_runs=2, source=history,
                               current_run_id=current,
                               current_records=history.current_records(current),
                               protected_input_ids={ident(current_run_no, 2)})
        elapsed = time.perf_counter() - start
        assert isinstance(view, ModelView)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        edited = sum(1 for m in view.messages if m.text.endswith("(edited)"))
        print(json.dumps({"before_mb": before / 1024, "peak_mb": peak / 1024,
                          "seconds": elapsed, "messages": len(view.messages),
                          "ended_runs": len(ended), "edited_finals": edited}))


def measure_projection(path: Path, current_run_no: int, records: int) -> dict[str, Any]:
    out = subprocess.run([sys.executable, __file__, "--project", str(path),
                          "--current", str(current_run_no)],
                         check=True, capture_output=True, text=True)
    figures: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    print(f"    session of {current_run_no} runs ({current_run_no * records:,} records): "
          f"peak RSS {figures['peak_mb']:.1f} MB (before projecting {figures['before_mb']:.1f} "
          f"MB), {figures['seconds']:.2f} s, {figures['messages']} messages from "
          f"{figures['ended_runs']} ended runs ({figures['edited_finals']} hook-edited final "
          "answers shown)")
    return figures


def bench_projection(runs: int, records: int, directory: Path) -> None:
    path = directory / "session.db"
    print(f"(b) building a stored session of {runs} runs x {records} records ...", flush=True)
    seconds = build_session(path, runs, records)
    size = sum(Path(f"{path}{s}").stat().st_size for s in ("", "-wal")
               if Path(f"{path}{s}").exists())
    print(f"    built in {seconds:.1f} s ({runs * records / seconds:,.0f} records/s), "
          f"{size / 2**20:,.0f} MiB on disk")
    small = measure_projection(path, max(2, runs // 10), records)
    large = measure_projection(path, runs, records)
    verdict = "under" if large["peak_mb"] < 100 else "OVER"
    print(f"    peak RSS {large['peak_mb']:.1f} MB is {verdict} the 100 MB target; growth from "
          f"a tenth of the session: {large['peak_mb'] - small['peak_mb']:+.1f} MB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--loops", type=int, default=50)
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--records", type=int, default=1000)
    parser.add_argument("--project", help=argparse.SUPPRESS)
    parser.add_argument("--current", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.project:
        project_child(args.project, args.current)
        return
    with tempfile.TemporaryDirectory(prefix="ctxspec-bench-store-") as directory:
        bench_commits(args.loops, args.repeat, Path(directory))
        bench_projection(args.runs, args.records, Path(directory))


if __name__ == "__main__":
    main()
