"""The NodeDriver of §3: the ReAct root role's common loop, and an Executor's (§2, §5, §7, §8,
§10, §11).

A business loop: prepare the context at a fixed input cutoff (ContextManager) → the
pre-request hooks (InvocationPipeline) → measure, and a compaction episode when the
CompactionPolicy triggers (CompactionService) → the hard window → T_FREEZE → model attempts on
the same frozen request → T_FIRST_OUTPUT → the raw result → the post-response hooks → the
effective result → the tool batch (:mod:`batch`) → one feedback commit in action order → the
next loop. The Run ends with a final answer, a stop, the Loop limit, the deadline (a logical
clock) or an error with the design's code; APP-FINALIZE then carries undelivered supplements.
A compaction never counts as a business loop. The role's position is data (a NodeCheckpoint
of §10): :meth:`NodeDriver.run_role` runs the step of its stage (:attr:`NodeDriver.STEPS`)
until the role ends, for a new Run and a restored one alike; each step moves the position by
one fenced commit (prepared, the compaction episode planned, each of its chunks, its
publication, frozen, an attempt answered or failed, the raw answer saved, the effective record,
the decision, a batch member settled, the feedback).
"""

import json
from collections.abc import Mapping, Sequence
from uuid import UUID

from ctxspec.reference import delivery as dl
from ctxspec.reference.contracts import (
    AttemptsMade,
    MessageRole,
    MutationSourceKind,
    NodeCheckpoint,
    NodeStage,
    OperationPurpose,
    OperationState,
    RunStatus,
)
from ctxspec.reference.effective import Committed, FieldChange, commit_changes, effective_records
from ctxspec.reference.errors import ErrorCode
from ctxspec.reference.hooks import ChainOutcome, denial_feedback
from ctxspec.reference.ports import Complete, ContextLengthExceeded, ModelOutcome, PartialThenFailed
from ctxspec.reference.protection import ProtectedInput
from ctxspec.reference.protocol import UnsettledBatch
from ctxspec.reference.registry import JSON
from ctxspec.reference.runtime import trace as tr
from ctxspec.reference.runtime import window_report as wr
from ctxspec.reference.runtime.batch import ToolBatch
from ctxspec.reference.runtime.compaction_service import CompactionService
from ctxspec.reference.runtime.context_manager import ContextManager
from ctxspec.reference.runtime.pipeline import InvocationPipeline
from ctxspec.reference.runtime.request_fit import Fit, RequestFit
from ctxspec.reference.runtime.sent_request import (
    SentRequest,
    raw_answer,
    saved_answer,
    sent_request,
)
from ctxspec.reference.runtime.session import (
    INVOCATION_ERRORS,
    REQUEST_DENIED,
    RESPONSE_DENIED,
    RunState,
    SessionState,
)
from ctxspec.reference.runtime.store import Write
from ctxspec.reference.snapshots import view_with_snapshot
from ctxspec.reference.view import EffectiveRecord, ModelView


class NodeDriver:
    """A role's loop: from a prepared request to its ending (§3, §10, §11)."""

    def __init__(self, session: SessionState, context: ContextManager,
                 pipeline: InvocationPipeline) -> None:
        self.s = session
        self.context = context
        self.pipeline = pipeline
        self.compaction = CompactionService(session, context, pipeline, self)
        self.batch = ToolBatch(self)
        self.fitting = RequestFit(self)
        self.held: dict[UUID, tuple[int, tuple[ProtectedInput, ...], ModelView]] = {}
        """What this incarnation prepared, by Operation, from its pre-request chain to its
        fit; the next steps hold the frozen request (``frozen``), an attempt's outcome
        until it is saved (``outcomes``) and the saved answer until its effective record
        (``answers``). A takeover holds none of them: each step then rebuilds what it needs
        from the persisted position and the stored facts alone (§10)."""
        self.fits: dict[UUID, Fit] = {}
        """A request's fit between the steps of its compaction episode (``request_fit``)."""
        self.frozen: dict[UUID, SentRequest] = {}
        self.outcomes: dict[UUID, ModelOutcome] = {}
        self.answers: dict[UUID, Complete] = {}

    STEPS: Mapping[NodeStage, str] = {
        NodeStage.LOOP_DONE: "next_loop",
        NodeStage.PREPARED: "fit_request",
        NodeStage.COMPACTING: "fold_chunk",
        NodeStage.SUMMARISED: "publish_summary",
        NodeStage.COMPACTED: "freeze_compacted",
        NodeStage.FROZEN: "ask_model",
        NodeStage.ANSWERED: "save_answer",
        NodeStage.DENIED: "request_denied",
        NodeStage.RAW_SAVED: "effective_result",
        NodeStage.POST: "post_response",
        NodeStage.BATCH: "settle_batch",
    }
    """The step each stage of a role's position runs (§10): a step goes from the position to the
    next one, which it commits (or, where nothing of its own changed, hands on uncommitted), or
    to None when the role ended. The name of a method, so a replaced step is what runs."""

    def advance(self) -> None:
        """Run the active Run until it ends: from its stored position after a takeover, from
        the start of a Loop otherwise — the same loop either way."""
        self.s.require_agent()
        run = self.s.active_run
        if run is not None:
            self.run_role(run, self.s.positions.pop(run.run_id, None))

    def run_role(self, run: RunState, position: NodeCheckpoint | None) -> None:
        """The one loop of a role, the root role's or an Executor's: step after step from its
        position until it ends (§10 "回到模型前、工具等待或反馈消费等明确边界": a takeover
        enters here with the position it loaded, never a separate path)."""
        at = position or self.s.position(run, NodeStage.LOOP_DONE)
        while at is not None and run.status is RunStatus.RUNNING:
            run.at = at
            at = getattr(self, self.STEPS[at.stage])(run, at)

    def next_loop(self, run: RunState, position: NodeCheckpoint) -> NodeCheckpoint | None:
        """LOOP_DONE: a new business request of a new Operation at the inputs received by
        now — unless a stop, the deadline or the Loop limit ends the role first (§5, §11) —
        prepared at that cutoff and passed through its pre-request chain: PREPARED or DENIED,
        committed with the chain's decision (HOOK_DECISION); with no pre-request hook
        registered nothing of its own is committed and PREPARED goes on uncommitted (the
        context's new ``user_ref`` records ride with the next commit)."""
        if self.stopped_or_out_of_time(run):
            return None
        if self.loops_taken(run) >= self.s.agent.loop_limit:
            self.end(run, RunStatus.LOOP_EXHAUSTED)
            return None
        run.loops += 1
        operation_id = self.s.new_id()
        run.cutoff = cutoff = self.s.book.inputs[-1].input_seq
        protected, view = self.request_view(run, cutoff)
        chain = self.pipeline.run_hooks(
            "model.pre_request", run, {"params": {}}, None, None, extra=lambda outcome:
            [self.s.record_position(run, self.request_decided(run, operation_id, outcome))],
            budget=self.context.fixed_room(run, view, protected)
            if self.s.hooks.registered("model.pre_request") else None)
        decided = self.request_decided(run, operation_id, chain)
        if decided.stage is NodeStage.PREPARED:
            if chain is not None and chain.items:
                view = self.materialize(run, protected)
            self.held[operation_id] = (cutoff, protected, view)
        return decided

    def fit_request(self, run: RunState, position: NodeCheckpoint) -> NodeCheckpoint | None:
        """PREPARED: the prepared request measured and decided by the CompactionPolicy; when
        it triggers, the request's one episode planned (EPISODE_STARTED, the COMPACTING
        position at its first chunk), else the request checked against the hard window and
        frozen (T_FREEZE, the FROZEN position). After a takeover it is the same Loop and
        Operation at its kept cutoff, its pre-request chain not asked again (its changes are
        in the effective context, §10)."""
        operation_id = self.operation_of(position)
        held = self.held.pop(operation_id, None)
        if held is None:  # taken up after a takeover: rebuilt from the facts it was prepared on
            fit = self.fitting.taken_up(run, position)
        else:
            run.cutoff = held[0]
            fit = self.fitting.measure(run, operation_id, *held)
        return self.fitted(run, operation_id, fit)

    def fold_chunk(self, run: RunState, position: NodeCheckpoint) -> NodeCheckpoint | None:
        """COMPACTING: the episode's next chunk folded into its summary — the chunk's
        pre-request chain, its attempts, its raw answer and post-response chain, committed with
        the cursor (CHUNK_COMMITTED): COMPACTING at the next chunk, SUMMARISED after the last
        (§8). A takeover measures the request again and goes on from the chunk its position
        holds (its Operation, decisions and failed attempts, ``ChunkStep``)."""
        operation_id = self.operation_of(position)
        fit = self.fits.pop(operation_id, None) or self.fitting.taken_up(run, position)
        if fit is None or not fit.chunks_left() or fit.planned is None:
            return self.fitted(run, operation_id, fit)
        advanced = self.compaction.advance(run, fit.planned, fit.summary)
        if advanced is None:
            return None
        fit.planned, fit.summary, reached = advanced
        self.fits[operation_id] = fit
        return reached

    def publish_summary(self, run: RunState, position: NodeCheckpoint) -> NodeCheckpoint | None:
        """SUMMARISED: the finished episode's snapshot and the CAS of the active pointer in one
        commit (SNAPSHOT_COMMITTED, the COMPACTED position): the request's view goes on with
        the new summary, or rebuilt from the records when the switch was refused (§9)."""
        operation_id = self.operation_of(position)
        fit = self.fits.pop(operation_id, None) or self.fitting.taken_up(run, position)
        if fit is None or fit.chunks_left() or fit.planned is None:
            return self.fitted(run, operation_id, fit)
        reached = self.fitting.published(run, fit)
        self.fits[operation_id] = fit
        return reached

    def freeze_compacted(self, run: RunState, position: NodeCheckpoint) -> NodeCheckpoint | None:
        """COMPACTED: the compacted request — unless a stop or the Run's deadline came while
        its episode ran — checked against the hard window and frozen (T_FREEZE, the FROZEN
        position). A takeover measures it again with the snapshot it published."""
        operation_id = self.operation_of(position)
        return self.fitted(run, operation_id, self.fits.pop(operation_id, None)
                           or self.fitting.taken_up(run, position))

    def fitted(self, run: RunState, operation_id: UUID, fit: Fit | None
               ) -> NodeCheckpoint | None:
        """Where a request's fit stands goes on: its episode's next step — its next chunk
        (COMPACTING), its publication (SUMMARISED) — or its freeze; None: the Run ended."""
        if fit is None:
            return None
        if fit.planned is None:
            return self.fitting.freeze(run, operation_id, fit)
        self.fits[operation_id] = fit
        stage = NodeStage.COMPACTING if fit.chunks_left() else NodeStage.SUMMARISED
        return self.compaction.position(run, stage)

    def ask_model(self, run: RunState, position: NodeCheckpoint) -> NodeCheckpoint | None:
        """FROZEN: the frozen request's next attempt after the failed ones its position holds
        (§10: never renewed), the same request every time (§5); its outcome held for the next
        step (ANSWERED). The first output of the request's attempts is T_FIRST_OUTPUT, which
        commits the ANSWERED position; otherwise it goes on uncommitted. A request the provider
        refused is never sent again; after the last failed attempt the role ends."""
        operation_id, made = self.operation_of(position), position.attempts
        if made.refused is not None:  # the provider refused it: never sent again (CTX-7.24)
            self.refused(run, made.refused)
            return None
        request = self.frozen.get(operation_id)
        if request is None:  # taken up after a takeover: rebuilt as it was frozen
            if self.stopped_or_out_of_time(run):
                return None
            request = self.frozen[operation_id] = self.rebuilt(run, position)
        attempt = made.failed + 1
        if attempt > self.s.agent.model_attempts:
            self.settle_fragments(run, [self.s.store.text(f) for f in made.fragments],
                                  succeeded=False)
            self.end(run, RunStatus.FAILED, ErrorCode.MODEL_FAILED, "the model failed " + (
                "after a partial output" if made.partial else "before any output"))
            return None
        if attempt > 1 and self.halted_before_retry(run):
            return None  # no new attempt after a stop or past the Run's deadline
        outcome = self.pipeline.call_model(
            run, "business", operation_id, f"model:{operation_id}", attempt, request.messages,
            self.context.schemas(run), self.s.budget.output_reserve, request.view,
            compaction=request.decision, snapshot_id=request.snapshot_id,
            protected=request.protected, cutoff=request.cutoff,
            estimation=request.estimation, rendered=request.rendered)
        self.outcomes[operation_id] = outcome
        first = isinstance(outcome, (Complete, PartialThenFailed)) and run.parent is None \
            and not position.first_output
        answered = self.moved(run, position, NodeStage.ANSWERED,
                              first_output=position.first_output or first)
        if first:
            self.first_output(run, operation_id, answered)
        return answered

    def save_answer(self, run: RunState, position: NodeCheckpoint) -> NodeCheckpoint:
        """ANSWERED: the attempt's outcome saved — a complete answer's raw result before
        anything happens to it (RAW_RESULT_SAVED, the RAW_SAVED position), or the failed
        attempt with its fragment and the provider's refusal (ATTEMPT_FAILED, FROZEN with one
        more failed attempt, §10). A takeover finds no outcome (it died with the process): the
        attempt is asked again, as FROZEN."""
        operation_id, made = self.operation_of(position), position.attempts
        outcome = self.outcomes.pop(operation_id, None)
        if outcome is None:
            return self.moved(run, position, NodeStage.FROZEN)
        if isinstance(outcome, Complete):  # the frozen request is done with: not held on
            del self.frozen[operation_id]
            return self.save_raw(run, operation_id, outcome,
                                 [self.s.store.text(f) for f in made.fragments])
        refused = self.frozen[operation_id].estimation \
            if isinstance(outcome, ContextLengthExceeded) else None
        fragments = [*made.fragments, *([self.s.ref(outcome.fragment)]
                                        if isinstance(outcome, PartialThenFailed) else [])]
        # A failed attempt is a fact: a takeover goes on with the next one, never renews the
        # attempts (§10). Its fragment is kept with it, out of the role's context; a refusal
        # is saved before the Run ends, so a takeover never sends the request again.
        failed = self.moved(run, position, NodeStage.FROZEN, attempts=AttemptsMade(
            failed=made.failed + 1, partial=isinstance(outcome, PartialThenFailed),
            refused=refused, fragments=fragments if refused is None else []
        ).model_dump(mode="json"))
        self.s.commit("ATTEMPT_FAILED", [self.s.record_position(run, failed)])
        return failed

    def operation_of(self, position: NodeCheckpoint) -> UUID:
        if position.operation_id is None:
            raise AssertionError(f"a {position.stage} position names its Operation")
        return position.operation_id

    def moved(self, run: RunState, position: NodeCheckpoint, stage: NodeStage,
              **facts: JSON) -> NodeCheckpoint:
        """The role's position at ``stage`` now, keeping the request's facts ``position``
        holds (its Operation, cutoff, manifest, decision, attempts) unless ``facts`` change
        them."""
        kept: dict[str, JSON] = position.model_dump(
            mode="json", exclude_unset=True,
            exclude={"stage", "loops", "tool_calls_made", "tick", "hook"})
        return self.s.position(run, stage, **{**kept, **facts})

    def cutoff_of(self, position: NodeCheckpoint) -> int:
        kept = self.kept_cutoff(position)
        return self.s.book.inputs[-1].input_seq if kept is None else kept

    def protected_inputs(self, run: RunState, cutoff: int) -> tuple[ProtectedInput, ...]:
        """An Executor's hand-over, or the root role's inputs up to the cutoff (§5)."""
        return run.handover if run.parent is not None else self.prepared(run, cutoff)

    def materialize(self, run: RunState, protected: Sequence[ProtectedInput]) -> ModelView:
        view = self.context.materialize(run, protected)
        if isinstance(view, UnsettledBatch):
            raise AssertionError("the shell settles every batch before the next loop")
        return view

    def request_view(self, run: RunState, cutoff: int
                     ) -> tuple[tuple[ProtectedInput, ...], ModelView]:
        protected = self.protected_inputs(run, cutoff)
        return protected, self.materialize(run, protected)

    def rebuilt(self, run: RunState, position: NodeCheckpoint) -> "SentRequest":
        """A frozen request taken up after a takeover: the view at its kept cutoff with the
        snapshot it was fitted with, under the decision it was frozen with — the same request
        with the same inputs, whatever arrived since (§5, §10; Q160)."""
        run.cutoff = cutoff = self.cutoff_of(position)
        protected, view = self.request_view(run, cutoff)
        view, snapshot_id, _ = view_with_snapshot(view, run.snapshot)
        return sent_request(self.context.with_system(run, view), self.context.schemas(run),
                            self.s.estimator, protected, cutoff, position.budget_decision or "",
                            snapshot_id)

    def first_output(self, run: RunState, operation_id: UUID, answered: NodeCheckpoint) -> None:
        """The first output of the request's attempts: its deliveries become delivered with the
        receipt (T_FIRST_OUTPUT, §5), saved once with the position that says so; an Executor's
        request delivers no user input."""
        first = dl.first_output(self.s.book, operation_id=operation_id,
                                receipt_ref=self.s.ref(f"first-output:{operation_id}"),
                                delivered_at=self.s.time())
        if isinstance(first, dl.DeliveryRejected):
            raise RuntimeError(f"{first.code}: {first.reason}")
        self.s.book, writes = first
        self.s.deliveries_changed(writes)
        self.s.commit("T_FIRST_OUTPUT", [self.s.record_position(run, answered)])
        self.s.moments.at("first_output")

    def save_raw(self, run: RunState, operation_id: UUID, outcome: Complete,
                 fragments: Sequence[str]) -> NodeCheckpoint:
        """The raw answer saved before anything happens to it (RAW_RESULT_SAVED, §10); the
        answer as received is held for the next step (the raw keeps only what recovery
        needs). After a good retry the failed attempts' fragments stay out of the context."""
        raw = self.s.ref(raw_answer(outcome))
        self.s.put_operation(operation_id, run, OperationPurpose.MODEL,
                             f"model:{operation_id}", OperationState.RUNNING, raw)
        saved = self.s.position(run, NodeStage.RAW_SAVED, operation_id=str(operation_id))
        self.s.commit("RAW_RESULT_SAVED", [self.s.record_position(run, saved)])
        self.settle_fragments(run, fragments, succeeded=True)
        self.s.moments.at("raw_saved")
        self.answers[operation_id] = outcome
        return saved

    def request_denied(self, run: RunState, position: NodeCheckpoint) -> None:
        """DENIED: the pre-request chain's committed deny ends the role (Q75)."""
        self.end(run, RunStatus.FAILED, ErrorCode.HOOK_DENIED, REQUEST_DENIED)

    def effective_result(self, run: RunState, position: NodeCheckpoint) -> NodeCheckpoint:
        """RAW_SAVED: the saved answer — as received, or read back from its raw result after a
        takeover (no new model call, §10) — becomes the role's assistant record."""
        if position.operation_id is None:
            raise AssertionError("a raw_saved position names its Operation")
        outcome = self.answers.pop(position.operation_id, None)
        if outcome is None:
            op = self.s.operations[position.operation_id]
            if op.raw_result_ref is None:
                raise AssertionError("a raw_saved position has its raw result")
            outcome = saved_answer(self.s.store.text(op.raw_result_ref))
        return self.accept(run, position.operation_id, outcome)

    def post_response(self, run: RunState, position: NodeCheckpoint) -> NodeCheckpoint:
        """POST: the answer's post-response chain, whose decision commits the BATCH position
        (HOOK_DECISION; with no hook registered nothing changes and the position goes on
        uncommitted): the effective answer is the Loop's only from here (§2, §3)."""
        if position.decision is None:
            raise AssertionError("a post position names its decision")
        record_id = position.decision
        self.pipeline.run_hooks("model.post_response", run, {"text": self.raw_text(run, record_id)},
                                None, record_id, stage="post",
                                extra=lambda chain: self.response_decided(run, record_id, chain))
        return self.s.position(run, NodeStage.BATCH, decision=str(record_id), settled={})

    def settle_batch(self, run: RunState, position: NodeCheckpoint) -> NodeCheckpoint | None:
        """BATCH: the decided answer — denied (neither its calls run nor is it delivered; Q75),
        a final answer, or its calls, settled from the members the position holds on and fed
        back once (§2, §3, §6, §10)."""
        if position.decision is None:
            raise AssertionError("a batch position names its decision")
        answer = next(r for r in effective_records(self.s.contexts[run.context_id])
                      if r.record_id == position.decision)
        if answer.denied:
            self.end(run, RunStatus.FAILED, ErrorCode.HOOK_DENIED, RESPONSE_DENIED)
            return None
        if not answer.tool_calls:
            run.final_text = self.answer_text(answer, self.raw_text(run, answer.record_id))
            self.end(run, RunStatus.SUCCEEDED)
            return None
        return self.batch.run(run, answer, position)

    def raw_text(self, run: RunState, record_id: UUID) -> str:
        """The text of an answer as the model gave it: its raw record's (§2)."""
        raw_record = self.s.contexts[run.context_id].record(record_id)
        text = raw_record.content.get("text") if raw_record is not None else None
        return text if isinstance(text, str) else ""

    def kept_cutoff(self, position: NodeCheckpoint) -> int | None:
        """The input cutoff a request was prepared with, as its position committed it
        (prepared, compacting or frozen): taken up again after a takeover, it is the same
        request with the same inputs, whatever arrived since (§5 "本次 prepare_context 固定
        input_cutoff，压缩、重物化及最终冻结沿用同一水位"; §10: a retry reuses the frozen inputs;
        Q160). None for a position that fixed none (the inputs received by now)."""
        kept = position.stage in (NodeStage.PREPARED, NodeStage.COMPACTING,
                                  NodeStage.SUMMARISED, NodeStage.COMPACTED, NodeStage.FROZEN)
        return position.cutoff if kept else None

    def end(self, run: RunState, status: RunStatus, error: ErrorCode | None = None,
             message: str | None = None, figures: dict[str, int] | None = None) -> None:
        status, error, message = self.ending(run, status, error, message)
        figures = figures if error is not None else None
        if run.parent is not None:
            # An Executor execution ends; its outcome becomes the Planner's batch member result
            # (committed by the delegation, EXECUTION_ENDED).
            run.status, run.message = status, message
            run.error_code = error.value if error is not None else None
            return
        run.status = status
        run.error_code = error.value if error is not None else None
        run.message = message
        self.s.put_run(run)
        carry = dl.to_carry(self.s.book, run.run_id)
        applied = dl.finalize(self.s.book, run_id=run.run_id,
                              carry_ids=[self.s.new_id() for _ in carry])
        if isinstance(applied, dl.DeliveryRejected):
            raise RuntimeError(f"{applied.code}: {applied.reason}")
        self.s.book, writes = applied
        self.s.deliveries_changed(writes)
        delivered = run.final_text if status is RunStatus.SUCCEEDED else None
        self.s.trace.add(tr.RunEnded(run.run_id, run.run_no, status.value, run.error_code,
                                   message, figures, delivered))
        run.ended_at_tick = self.s.clock.now()
        self.s.event(run, "run_ended", status.value, run.error_code)
        if not self.s.agent.persistent_sandbox:
            self.s.workspace.clear()  # working files only: no session fact lives there (CTX-1.15)
        self.s.commit("APP-FINALIZE", [])

    def stop_pending(self, run: RunState) -> bool:
        return run.stop_requested or (run.parent is not None and run.parent.stop_requested)

    def ending(self, run: RunState, status: RunStatus, error: ErrorCode | None,
                message: str | None) -> tuple[RunStatus, ErrorCode | None, str | None]:
        """A stop accepted before the role ends wins over whatever the operation in flight
        then did — a final answer, a failed or denied answer, a failed compaction chunk, a
        context error: the operation is wound up and kept as a fact, the Run ends ``stopped``
        (§11: no new attempt after a stop, "已有操作收束"; a root Run's stop "不能被局部错误处理
        吞掉"; Q76)."""
        if status is not RunStatus.STOPPED and self.stop_pending(run):
            return RunStatus.STOPPED, None, None
        return status, error, message

    def stopped_or_out_of_time(self, run: RunState) -> bool:
        if run.stop_requested or (run.parent is not None and run.parent.stop_requested):
            self.end(run, RunStatus.STOPPED)
            return True
        deadline = self.s.agent.run_deadline
        # One deadline per Run: an Executor's calls count from the Run's start (§8, §11).
        started = (run.parent or run).started_at_tick
        if deadline is not None and self.s.clock.now() - started >= deadline:
            self.end(run, RunStatus.TIMED_OUT)
            return True
        return False

    def stopped_before_freeze(self, run: RunState) -> bool:
        """A stop (or the deadline) that came while the request was prepared: no business
        attempt starts (§11 "不启动新的压缩或业务 Attempt").  CTX-11.5"""
        return self.stopped_or_out_of_time(run)

    def stopped_before_compaction(self, run: RunState) -> bool:
        """A stop (or the deadline) that came while the request was prepared — its pre-request
        hooks ran — starts no compaction episode: nothing is planned or asked, the Run ends
        (§11 "不启动新的压缩或业务 Attempt"; §8: the episode is under
        the Run's cancellation and deadline). The same for an Executor, whose Run's stop it
        reads.  CTX-11.5, CTX-8.7"""
        return self.stopped_or_out_of_time(run)

    def loops_taken(self, run: RunState) -> int:
        """The Run's shared Loop budget spent: the business Loops of its root role and of every
        Executor execution it delegated (§11: a Loop "占 Run 共享 Loop"; root Loop exhaustion
        ends the whole tree).  CTX-11.9, CTX-11.13"""
        owner = run.parent or run
        return owner.loops + owner.finished_executor_loops + sum(
            task.loops for task in self.s.tasks if task.parent is owner)

    def prepared(self, run: RunState, cutoff: int) -> tuple[ProtectedInput, ...]:
        """The root role's protected inputs at the cutoff, shown once in its context (§5)."""
        draft = self.context.prepare(run, cutoff)
        self.s.put_delta(draft.delta)
        return draft.protected

    def request_decided(self, run: RunState, operation_id: UUID,
                         chain: ChainOutcome | None) -> NodeCheckpoint:
        """The loop's position after the pre-request chain, committed with its decision: a
        deny is a fact a takeover ends the role on, never a request it sends (§3, Q75)."""
        stage = NodeStage.DENIED if chain is not None and chain.blocked else NodeStage.PREPARED
        return self.s.position(run, stage, operation_id=str(operation_id), cutoff=run.cutoff)

    def refused(self, run: RunState, tokens: int) -> None:
        """The provider refused the request as over its window: the role ends with the
        figures; the refusal is a stored fact, so the request is never sent again (CTX-7.24)."""
        self.end(run, RunStatus.FAILED, ErrorCode.CONTEXT_LENGTH_EXCEEDED,
                 wr.window_message(self.s.budget, tokens, "sent; the provider refused it"),
                 wr.figures(self.s.budget, tokens))

    def asks_pre_call(self, run: RunState) -> bool:
        """A pre-call hook decides about a call that will run: none is asked once a stop is
        accepted (Q80)."""
        return not self.stop_pending(run)

    def halted_before_retry(self, run: RunState) -> bool:
        """A retry is a new model call: under the Run's stop and its deadline like every call
        (§8 "所有调用受同一 Run deadline", §3, §11). Ends the role when either came."""
        return self.stopped_or_out_of_time(run)

    def settle_fragments(self, run: RunState, fragments: Sequence[str], *,
                          succeeded: bool) -> None:
        """Failed attempts' fragments are references kept with their attempts; they enter the
        role's context, as marked incomplete fragments, only when the Operation finally fails.
        After a good retry the complete response alone enters the business view (§12 row 12
        "不拼接 Attempt", "完整响应才进入业务视图", §2, §6; CTX-2.30)."""
        if succeeded:
            return
        for fragment in fragments:
            self.s.put_delta(self.context.append(run, MessageRole.ASSISTANT, "assistant",
                                                 {"text": fragment}, incomplete=True))

    def accept(self, run: RunState, operation_id: UUID, outcome: Complete) -> NodeCheckpoint:
        """The raw result is kept; the answer becomes the role's assistant record and its
        Operation succeeds (EFFECTIVE_RESULT, at the POST position)."""
        accepted = self.context.prepare_accept_model(run, operation_id, outcome)
        self.s.put_delta(accepted)
        record_id = accepted.record_id
        operation = self.s.operations[operation_id]
        self.s.put_operation(operation_id, run, OperationPurpose.MODEL, operation.purpose_key,
                        OperationState.SUCCEEDED, operation.raw_result_ref,
                        self.s.ref(outcome.text))
        # Until its post-response chain is decided the answer is not the Loop's: a takeover
        # at "post" asks that chain (unless a hook was running: Q50), never skips it (§10
        # "只有原始结果时继续后处理").
        post = self.s.position(run, NodeStage.POST, decision=str(record_id))
        self.s.commit("EFFECTIVE_RESULT", [self.s.record_position(run, post)])
        return post

    def response_decided(self, run: RunState, record_id: UUID,
                          chain: ChainOutcome | None) -> list[Write]:
        """A legitimate post-response deny marks the response denied in the effective context,
        committed with the decision (HOOK_DECISION): its raw stays for audit; the Loop, history
        and a takeover see only the explicit denied state (§2 "后置拒绝则交明确拒绝状态", §3
        "合法 deny … 必须阻止执行或交付"; Q75)."""
        decided = [self.s.checkpoint(run, NodeStage.BATCH, decision=str(record_id), settled={})]
        if chain is None or not chain.blocked:
            return decided
        hook_id = chain.items[-1].invocation.hook_invocation_id
        state = self.s.contexts[run.context_id]
        denial: JSON = json.loads(denial_feedback("post", hook_id, {}))
        committed = commit_changes(state, [FieldChange(record_id, "denied", denial, ())], [],
                                   base_revision=state.head.revision, mutation_id=self.s.new_id(),
                                   source_kind=MutationSourceKind.RUNTIME,
                                   source_ref=f"denied:{hook_id}")
        if not isinstance(committed, Committed):
            raise AssertionError("a runtime mark on the head revision cannot conflict")
        self.s.put_context(run.context_id, committed.state)
        return decided

    def answer_text(self, answer: EffectiveRecord, raw_text: str) -> str:
        """The answer the waiter receives is the effective one, after the post-response hooks
        (§3 response row: "保存 raw_result，再提交 Hook 后有效结果 → 当前等待者"): the user's
        final result, or the Planner's delegate result — with or without a crash between."""
        return answer.text

    def ends_invocation(self, task: RunState) -> bool:
        return task.status is RunStatus.FAILED and task.error_code in INVOCATION_ERRORS
