"""The ContextManager of §3: it prepares a request's context and the context write sets of the
other components' commits, and writes nothing itself (§3 "ContextManager 返回 ContextDraft /
ModelView 或待提交写集", §4, §5, §6, §9).

- :meth:`ContextManager.prepare` — the protected inputs of a request at its input cutoff, their
  ``user_ref`` records appended once (§5);
- :meth:`ContextManager.materialize` — the ModelView: ended Runs through the HistoryProjector
  (``history.project_history``, §4), the role's effective records, the shared fields it may
  read (§3);
- :meth:`ContextManager.stage_patch` — an explicit change of a record's field as a mutation and
  revision with CAS on the head (§3 "显式上下文修改");
- :meth:`ContextManager.prepare_model_freeze` — the claim of the inputs up to the cutoff and the
  frozen position (§5 T_FREEZE);
- :meth:`ContextManager.prepare_accept_model` — the assistant record of a saved answer (§2, §6);
- :meth:`ContextManager.prepare_batch_delivery` — a settled batch's results in action order (§6,
  §10).

It reads the :class:`SessionState` and returns what it prepared (:mod:`context_writes`): it
never changes the Session's state nor the pending write set. The component that owns the step
(NodeDriver, InvocationPipeline, CompactionService) puts it into its own RuntimeCommit through
``SessionState.put_delta`` / ``put_context_writes`` / ``put_model_freeze``.
"""

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from uuid import UUID

from ctxspec.reference import delivery as dl
from ctxspec.reference.compaction import (
    RequestParts,
    split_request,
)
from ctxspec.reference.contracts import (
    ContextRecord,
    MessageRole,
    MutationSourceKind,
    Operation,
    OperationPurpose,
    OperationState,
    UserInput,
)
from ctxspec.reference.effective import (
    Committed,
    FieldChange,
    RawRecord,
    RevisionConflict,
    Scope,
    append_records,
    commit_changes,
    effective_records,
    new_context,
)
from ctxspec.reference.history import EndedRun, InputOccurrence, InputPlacement
from ctxspec.reference.history_projector import HistoryProjector
from ctxspec.reference.hooks import (
    BudgetRoom,
    ChangeSet,
    HookCall,
    HookProposal,
    run_chain,
)
from ctxspec.reference.ports import (
    Complete,
    HookPoint,
    HookReply,
    ProposedCall,
    ToolSpec,
)
from ctxspec.reference.protection import ProtectedInput
from ctxspec.reference.protocol import (
    UnsettledBatch,
    bounded_preview,
)
from ctxspec.reference.registry import ABSENT, JSON
from ctxspec.reference.repository import ContextRepository
from ctxspec.reference.runtime.context_writes import (
    NO_DELTA,
    ContextDelta,
    ContextDraft,
    ContextWriteSet,
    ModelFreezeWriteSet,
)
from ctxspec.reference.runtime.coordinator import body_ref
from ctxspec.reference.runtime.history_source import StoredHistory
from ctxspec.reference.runtime.session import (
    NO_SCOPE,
    REGISTRIES,
    RunState,
    SessionState,
)
from ctxspec.reference.segments import carried
from ctxspec.reference.view import (
    EffectiveRecord,
    ModelView,
    ViewKind,
    ViewMessage,
    estimation_request,
)


class ContextManager:
    """Prepares contexts, views and context write sets (§3) and returns them; writes nothing."""

    def __init__(self, session: SessionState, *, repository: ContextRepository | None = None,
                 projector: HistoryProjector | None = None) -> None:
        self.s = session
        self.repository: ContextRepository = repository or StoredHistory(
            session.store, session.session_id)
        """The committed history this Session's requests read (§3 "读固定版本")."""
        self.projector = projector or HistoryProjector(session.agent.recent_runs)
        """The pure §4 projection (§3 "纯投影")."""

    def prepare(self, run: RunState, cutoff: int) -> ContextDraft:
        """The protected inputs of this request (the Run's inputs up to the cutoff), and the
        delta that appends their user_ref records to the Run's context once (§5)."""
        state = self.s.contexts[run.context_id]
        shown = {raw.record.origin_input_id for raw in state.records
                 if raw.record.message_kind == "user_ref"}
        bound = [u for u in dl.inputs_of_run(self.s.book, run.run_id) if u.input_seq <= cutoff]
        delta = self.append_inputs(run, [u for u in bound if u.input_id not in shown])
        return ContextDraft(tuple(ProtectedInput(u.input_id, u.input_seq,
                                                 self.s.texts[u.input_id]) for u in bound), delta)

    def append_inputs(self, run: RunState, inputs: Sequence[UserInput]) -> ContextDelta:
        """The inputs as the role's ``user_ref`` records (their bodies are the inputs' own)."""
        if not inputs:
            return NO_DELTA
        state = self.s.contexts[run.context_id]
        seq = len(state.records)
        records = [RawRecord(ContextRecord(
            record_id=self.s.new_id(), context_id=run.context_id, context_seq=seq + i,
            run_id=run.run_id, role=MessageRole.USER, message_kind="user_ref",
            payload_ref=u.body_ref, operation_id=None, call_id=None,
            origin_input_id=u.input_id), {"text": self.s.texts[u.input_id]})
            for i, u in enumerate(inputs, start=1)]
        appended = append_records(state, records, mutation_id=self.s.new_id(),
                                  source_kind=MutationSourceKind.USER, source_ref="inputs")
        return ContextDelta(((run.context_id, appended.state),),
                            tuple(raw.record_id for raw in records))

    def materialize(self, run: RunState, protected: Sequence[ProtectedInput]
              ) -> ModelView | UnsettledBatch:
        """The §4 projection: ended Runs read from the store page by page (the facts), the
        current role's context from its effective state."""
        view = self.project(run, protected)
        shared = self.shared_messages(run)
        if isinstance(view, UnsettledBatch) or not shared:
            return view
        whole = ModelView((*shared, *view.messages))
        return carried(whole, whole.messages, view, len(shared))

    def project(self, run: RunState, protected: Sequence[ProtectedInput]
                    ) -> ModelView | UnsettledBatch:
        if run.parent is not None:  # an Executor sees no history: only its own context
            return HistoryProjector(recent_runs=0).project(
                ended_runs=[], source=_HandoverOnly(),
                current_run_id=run.run_id,
                current_records=effective_records(self.s.contexts[run.context_id]),
                protected_input_ids={p.input_id for p in protected})
        # A placeholder states its call's real Operation state; a call with none never
        # started (§6: the projection never changes a state, Q69).
        states = self.s.operations.tool_states
        ended = self.repository.ended_runs(run.run_no)
        protected_ids = {p.input_id for p in protected}
        older_part = self.repository.older_part(
            ended, self.projector.recent_runs, protected_ids, run.run_id, states) \
            if isinstance(self.repository, StoredHistory) else None
        return self.projector.project(
            ended_runs=ended, source=self.repository, current_run_id=run.run_id,
            current_records=effective_records(self.s.contexts[run.context_id]),
            protected_input_ids=protected_ids, call_states=states, older_part=older_part)

    def system(self, run: RunState) -> ViewMessage:
        executor = self.s.agent.executor
        text = executor.system_prompt if run.parent is not None and executor else \
            self.s.agent.system_prompt
        return ViewMessage(role=MessageRole.SYSTEM, kind=ViewKind.SYSTEM_PROMPT, text=text)

    def with_system(self, run: RunState, view: ModelView) -> ModelView:
        """The request as sent: the role's system prompt, then the view (its kept segment
        still marked)."""
        final = ModelView((self.system(run), *view.messages))
        return carried(final, final.messages, view, 1)

    def tools_of(self, run: RunState) -> tuple[ToolSpec, ...]:
        """The role's own tools: an Executor never gets the Planner's, nor ``delegate``."""
        executor = self.s.agent.executor
        return executor.tools if run.parent is not None and executor else self.s.agent.tools

    def schemas(self, run: RunState) -> tuple[str, ...]:
        return tuple(tool.schema for tool in self.tools_of(run))

    def parts(self, run: RunState, view: ModelView, protected: Sequence[ProtectedInput]
               ) -> RequestParts:
        """The request's parts for §8's F and M. A hook's annotation of a current protected
        input is a hook increment kept verbatim: it rides with its input and is never
        summarised (Q56)."""
        pinned = self.protected_annotations(run, protected)
        if not pinned:  # the view's messages as they are, a kept segment marked in them
            parts = RequestParts((self.system(run),), self.schemas(run), view.messages, (),
                                 (), frozenset(p.input_id for p in protected))
            return carried(parts, parts.history, view, 0)
        return RequestParts((self.system(run),), self.schemas(run),
                            tuple(m for m in view.messages if m.record_id not in pinned),
                            tuple(m for m in view.messages if m.record_id in pinned), (),
                            frozenset(p.input_id for p in protected))

    def protected_records(self, run: RunState, protected: Sequence[ProtectedInput]
                           ) -> frozenset[UUID]:
        inputs = {p.input_id for p in protected}
        return frozenset(raw.record_id for raw in self.s.contexts[run.context_id].records
                         if raw.record.message_kind == "user_ref"
                         and raw.record.origin_input_id in inputs)

    def protected_annotations(self, run: RunState, protected: Sequence[ProtectedInput]
                               ) -> frozenset[UUID]:
        questions = {str(r) for r in self.protected_records(run, protected)}
        return frozenset(raw.record_id for raw in self.s.contexts[run.context_id].records
                         if raw.record.message_kind == "annotation"
                         and raw.content.get("annotates") in questions)

    def fixed_room(self, run: RunState, view: ModelView | UnsettledBatch,
                    protected: Sequence[ProtectedInput]) -> BudgetRoom | None:
        """§7: what a pre-request item adds to the fixed input (its annotations of current
        protected inputs) must fit the input budget B by itself, with the fixed input and what
        earlier items added; otherwise the item is discarded (ITEM_DOES_NOT_FIT, CTX-7.30).
        Everything else it changes is compressible and left to the compaction policy."""
        if isinstance(view, UnsettledBatch):
            return None
        split = split_request(self.parts(run, view, protected), self.s.estimator)
        questions = self.protected_records(run, protected)

        def tokens(messages: tuple[ViewMessage, ...]) -> int:
            return self.s.estimator.estimate(estimation_request(ModelView(messages),
                                                              self.schemas(run))).tokens

        def measure(changes: ChangeSet) -> int:
            added = tuple(ViewMessage(role=MessageRole.SYSTEM, kind=ViewKind.ANNOTATION,
                                      text=str(note.text)) for note in changes.annotations
                          if note.target_record_id in questions)
            return tokens((*split.fixed, *added)) - tokens(split.fixed) if added else 0
        return BudgetRoom(split.fixed_tokens, self.s.budget.input_budget, measure)

    def append(self, run: RunState, role: MessageRole, kind: str, content: dict[str, JSON],
                call_id: UUID | None = None, operation_id: UUID | None = None,
                incomplete: bool = False, after: ContextDelta = NO_DELTA) -> ContextDelta:
        """A runtime record appended to the role's context (after ``after``, a delta of the
        same step not taken yet): ``after`` followed by the new record."""
        state = after.state(run.context_id, self.s.contexts[run.context_id])
        record_id = self.s.new_id()
        if incomplete:
            content = {**content, "incomplete": True}
        body = json.dumps(content, sort_keys=True, ensure_ascii=False)
        record = ContextRecord(record_id=record_id, context_id=run.context_id,
                               context_seq=len(state.records) + 1, run_id=run.run_id, role=role,
                               message_kind=kind, payload_ref=body_ref(body),
                               operation_id=operation_id, call_id=call_id,
                               origin_input_id=None)
        appended = append_records(state, [RawRecord(record, content)],
                                  mutation_id=self.s.new_id(),
                                  source_kind=MutationSourceKind.RUNTIME, source_ref=kind)
        return after.then(ContextDelta(((run.context_id, appended.state),), (record_id,),
                                       (body,)))

    def prepare_batch_delivery(self, run: RunState, results: Sequence[tuple[UUID, dict[str, JSON]]]
                   ) -> ContextDelta:
        """A settled batch's feedback: its results appended in action order, whatever order
        the calls completed in, so context_seq follows the action order too (§2, §10:
        "按固定动作顺序提交父角色反馈"). Each result is appended as it was produced (its raw
        content) and what its post-call chain decided follows as changes of that record, each
        its own mutation and revision (:func:`settled_member`), so the raw stays for audit and
        the view marks the edit (§1 "Hook 可以修改有效上下文，通过追加变更和版本关联体现", §6
        "按变更和来源标记重建"). CTX-2.28, CTX-1.9"""
        delta = NO_DELTA
        for call_id, member in results:
            raw, changes = member.get("raw"), member.get("changes")
            if not isinstance(raw, dict) or not isinstance(changes, list):
                raise AssertionError("a settled member has its raw content and its changes")
            delta = self.append(run, MessageRole.TOOL, "tool_result", raw, call_id=call_id,
                                after=delta)
            for change in changes:
                delta = delta.then(self.result_change(run, delta.record_id, change, delta))
        return delta

    def result_change(self, run: RunState, record_id: UUID, change: JSON,
                      after: ContextDelta) -> ContextDelta:
        """One decided change of an appended tool result: a hook's edit (its text, and its
        preview's range when either is bounded) or the runtime's deny mark, on the head."""
        state = after.state(run.context_id, self.s.contexts[run.context_id])
        if not isinstance(change, dict) or not isinstance(ref := change.get("ref"), str):
            raise AssertionError("a result change names its source")
        raw = state.record(record_id)
        old: Mapping[str, JSON] = raw.content if raw is not None else {}
        if isinstance(denied := change.get("denied"), dict):
            fields = [FieldChange(record_id, "denied", denied, ())]
        elif isinstance(content := change.get("content"), dict):
            fields = [FieldChange(record_id, key, content.get(key, ABSENT), ("result",))
                      for key in ("text", "truncation") if content.get(key) != old.get(key)]
        else:
            raise AssertionError("a result change carries an edit or a deny mark")
        committed = commit_changes(
            state, fields, [], base_revision=state.head.revision, mutation_id=self.s.new_id(),
            source_kind=MutationSourceKind(str(change.get("source", "runtime"))), source_ref=ref)
        if not isinstance(committed, Committed):
            raise AssertionError("a change of a record appended in the same step cannot conflict")
        return ContextDelta(((run.context_id, committed.state),))

    def result_content(self, text: str) -> dict[str, JSON]:
        """A large result becomes a bounded preview with its range and result_ref; the whole
        body stays in its blob (§6), which the caller keeps (``SessionState.keep_body``)."""
        preview, truncation = bounded_preview(text, self.s.agent.preview_chars, body_ref(text))
        if truncation is None:
            return {"text": text}
        return {"text": preview, "truncation": truncation.model_dump(mode="json")}

    def open_shared_scope(self, run: RunState) -> ContextDelta:
        """The Run's shared scope (the delta's one context): one record per shared field,
        registered for its consumers."""
        context_id = self.s.new_id()
        records = [RawRecord(ContextRecord(
            record_id=self.s.new_id(), context_id=context_id, context_seq=i, run_id=run.run_id,
            role=MessageRole.SYSTEM, message_kind="shared", payload_ref=body_ref(f.text),
            operation_id=None, call_id=None, origin_input_id=None),
            {"text": f.text, "name": f.name, "consumers": list(f.consumers)})
            for i, f in enumerate(self.s.agent.shared, start=1)]
        consumers = frozenset(c for f in self.s.agent.shared for c in f.consumers)
        state = new_context(context_id, Scope(
            "shared", registered_fields=frozenset((r.record_id, "text") for r in records),
            consumers=consumers))
        appended = append_records(state, records, mutation_id=self.s.new_id(),
                                  source_kind=MutationSourceKind.RUNTIME,
                                  source_ref="shared-fields")
        return ContextDelta(((context_id, appended.state),),
                            tuple(raw.record_id for raw in records),
                            tuple(f.text for f in self.s.agent.shared))

    def shared_revision(self, run: RunState) -> int | None:
        """The head revision of the Run's shared scope, for a role that is one of its
        authorised consumers: the base a hook's shared-scope patch is checked against, which
        is the shared scope's own, not the role's private revision (§3 "共享字段与私有 context
        使用各自 revision"). None when the Run has no shared scope or the role may not read
        it.  CTX-3.80"""
        shared_id = (run.parent or run).shared_context_id
        if shared_id is None or not self.s.contexts[shared_id].scope.may_read(run.role):
            return None
        return self.s.contexts[shared_id].head.revision

    def shared_messages(self, run: RunState) -> tuple[ViewMessage, ...]:
        """The shared fields this role may read, at the shared scope's current revision; a
        request already frozen keeps what it had (CTX-3.75, CTX-3.87)."""
        owner = run.parent or run
        if owner.shared_context_id is None:
            return ()
        state = self.s.contexts[owner.shared_context_id]
        messages = []
        for record in effective_records(state):
            raw = state.record(record.record_id)
            consumers = raw.content.get("consumers") if raw is not None else None
            if isinstance(consumers, list) and run.role in consumers:
                name = raw.content.get("name") if raw is not None else ""
                messages.append(ViewMessage(role=MessageRole.SYSTEM, kind=ViewKind.SHARED,
                                            text=f"[shared {name}] {record.text}",
                                            record_id=record.record_id, body=record.text,
                                            source_run_id=run.run_id))
        return tuple(messages)


    def stage_patch(self, run: RunState, point: HookPoint, call: HookCall,
                    replies: Sequence[HookReply],
                    payload: Mapping[str, JSON], budget: BudgetRoom | None) -> ContextWriteSet:
        """A hook chain's items as one validated change set per item, applied on the head
        revisions of the role's context and of the Run's shared scope with CAS (§3
        "InvocationPipeline --> ContextManager : 校验Hook修改"): the contexts' new states and
        the chain's Operation (purpose hook), for the caller's commit."""
        shared_id = (run.parent or run).shared_context_id
        states = {run.context_id: self.s.contexts[run.context_id]}
        if shared_id is not None:
            states[shared_id] = self.s.contexts[shared_id]
        # A patch for the shared scope of a Run that has none addresses no context: it is
        # invalid (UNAUTHORISED_SCOPE), never redirected to the role's own (CTX-1.18).
        proposals = [HookProposal(self.s.new_id(), r.decision, r.payload_ops,
                                  run.context_id if r.scope != "shared" else
                                  shared_id or NO_SCOPE, r.base_revision, r.context_ops,
                                  r.failed)
                     for r in replies]
        authorised = frozenset({shared_id}) if shared_id is not None and \
            self.s.contexts[shared_id].scope.may_read(run.role) else frozenset()
        chain_operation = self.s.new_id()
        # The chain is an Operation of its own (purpose hook) so its invocations belong to the
        # Run in the store; the trace shows its decisions (HookDecided), not its state.
        operation = Operation(
            operation_id=chain_operation, run_id=run.run_id, node_task_id=run.context_id,
            purpose=OperationPurpose.HOOK, purpose_key=f"hook:{point}:{chain_operation}",
            state=OperationState.SUCCEEDED)
        call = replace(call, operation_id=chain_operation, authorised_scopes=authorised)
        chain = run_chain(proposals, call, REGISTRIES[point], states, payload,
                          annotation_ids=lambda _p, _i: self.s.new_id(), budget=budget)
        return ContextWriteSet(chain, operation, ContextDelta(tuple(
            (context_id, chain.states[context_id]) for context_id in states)))


    def prepare_model_freeze(self, run: RunState, operation_id: UUID, cutoff: int,
                             budget_decision: str) -> ModelFreezeWriteSet:
        """T_FREEZE's write set (§5 "T_FREEZE：请求、输入claimed…同提交"): the inputs up to
        the cutoff claimed into the request's manifest (an Executor claims none: it has its
        hand-over), the business Operation running, the role's last model Operation, and the
        frozen position the caller commits (with the CompactionPolicy's decision the request
        was fitted with, which every attempt's request shows)."""
        key = f"model:{operation_id}"
        if run.parent is not None:
            return ModelFreezeWriteSet(operation_id, key, None, None, self.s.position(
                run, "frozen", operation_id=str(operation_id), budget_decision=budget_decision))
        frozen = dl.freeze(self.s.book, run_id=run.run_id, operation_id=operation_id,
                           input_cutoff=cutoff)
        if isinstance(frozen, dl.DeliveryRejected):
            raise RuntimeError(f"{frozen.code}: {frozen.reason}")
        book, writes, manifest = frozen
        return ModelFreezeWriteSet(operation_id, key, book, writes, self.s.position(
            run, "frozen", operation_id=str(operation_id), cutoff=cutoff,
            manifest=json.loads(manifest.model_dump_json()), budget_decision=budget_decision))

    def prepare_accept_model(self, run: RunState, operation_id: UUID, outcome: Complete
                             ) -> ContextDelta:
        """A saved answer as the role's assistant record (§2, §6): its text, reasoning and
        calls, each call keyed by the platform's own call_id in action order (the delta's
        ``record_id``)."""
        calls = [(self.s.new_id(), call) for call in outcome.tool_calls]
        content: dict[str, JSON] = {"text": outcome.text}
        if outcome.reasoning is not None:
            content["reasoning"] = outcome.reasoning
        for ordinal, (call_id, call) in enumerate(calls, start=1):
            # The platform's own call_id keys the call; the provider's id is metadata only
            # (§2 "外部提供的 tool_call_id 不能直接作为平台主键").
            content[f"tool_call:{call_id}"] = {**raw_call(call), "action_ordinal": ordinal}
        return self.append(run, MessageRole.ASSISTANT, "assistant", content,
                           operation_id=operation_id)


    def stage_write(self, run: RunState, target: str, field_key: str, value: JSON
                    ) -> ContextDelta:
        """An explicit change of a field of a record of the role's context, with its scope,
        source (``user:writer``) and expected revision, as its own mutation and revision with
        CAS on the head (§3 "显式上下文修改 … 经 ContextManager 校验、CommitCoordinator 提交"). A
        user input is never rewritten (§3)."""
        state = self.s.contexts[run.context_id]
        named = self.s.named_records(run, state)
        record_id = named[target] if target in named else UUID(target)
        raw = state.record(record_id)
        if raw is None or raw.record.message_kind == "user_ref":
            raise ValueError(f"{target}: no record of the Run a writer may correct (a user "
                             "input is never rewritten, §3)")
        committed = commit_changes(
            state, [FieldChange(record_id, field_key, value, (f"writer:{field_key}",))], [],
            base_revision=state.head.revision, mutation_id=self.s.new_id(),
            source_kind=MutationSourceKind.USER, source_ref="writer")
        if isinstance(committed, RevisionConflict):
            raise RuntimeError(f"CONTEXT_REVISION_CONFLICT: {committed.reason}")
        return ContextDelta(((run.context_id, committed.state),))


def settled_member(raw: Mapping[str, JSON], changes: Sequence[JSON] = ()) -> dict[str, JSON]:
    """A batch member's settled result as the batch's position keeps it (§3, §10): the raw
    content its tool_result record is appended with, and the changes its post-call chain
    decided, in order — a hook's edit ``{"source": "hook", "ref": <hook invocation>,
    "content": {...}}`` or the runtime's deny mark ``{"source": "runtime", "ref":
    "denied:<hook invocation>", "denied": {...}}``. A result the runtime wrote itself (a
    refusal, an error, an unknown outcome) has no changes."""
    return {"raw": dict(raw), "changes": list(changes)}


class _HandoverOnly:
    """The history an Executor's view reads: none. Its hand-over items are its own inputs,
    not the Session's UserInputs."""

    def user_inputs(self, run: EndedRun) -> list[InputOccurrence]:
        return []

    def root_records(self, run: EndedRun) -> list[EffectiveRecord]:
        return []

    def placement(self, input_id: UUID) -> InputPlacement:
        return InputPlacement(None, None)


def raw_call(call: ProposedCall) -> dict[str, JSON]:
    """A proposed call as the raw answer keeps it: what the provider sent, its id included."""
    raw: dict[str, JSON] = {"name": call.name, "arguments": dict(call.arguments)}
    if call.provider_call_id is not None:
        raw["provider_call_id"] = call.provider_call_id
    if call.malformed_arguments is not None:
        raw["malformed_arguments"] = call.malformed_arguments
    return raw
