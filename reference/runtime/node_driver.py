"""The NodeDriver of §3: the ReAct root role's common loop, and an Executor's (§2, §5, §7, §8,
§10, §11).

A business loop: prepare the context at a fixed input cutoff (ContextManager) → the
pre-request hooks (InvocationPipeline) → measure, and a compaction episode when the
CompactionPolicy triggers (CompactionService) → the hard window → T_FREEZE → model attempts on
the same frozen request → T_FIRST_OUTPUT → the raw result → the post-response hooks → the
effective result → the tool batch (:mod:`batch`) → one feedback commit in action order → the
next loop. The Run ends with a final answer, a stop, the Loop limit, the deadline (a logical
clock) or an error with the design's code; APP-FINALIZE then carries undelivered supplements.
A compaction never counts as a business loop. :meth:`NodeDriver.resume` continues a restored
Run from its last committed step (§10).
"""

import json
from collections.abc import Mapping, Sequence
from uuid import UUID

from ctxspec.reference import delivery as dl
from ctxspec.reference.budget import (
    fits_hard_window,
)
from ctxspec.reference.compaction import (
    split_request,
    useful_chunk_floor,
)
from ctxspec.reference.contracts import (
    MessageRole,
    MutationSourceKind,
    OperationPurpose,
    OperationState,
    RunStatus,
)
from ctxspec.reference.effective import (
    Committed,
    FieldChange,
    commit_changes,
    effective_records,
)
from ctxspec.reference.errors import ErrorCode
from ctxspec.reference.hooks import (
    ChainOutcome,
    denial_feedback,
)
from ctxspec.reference.ports import (
    Complete,
    ContextLengthExceeded,
    PartialThenFailed,
    ProposedCall,
)
from ctxspec.reference.protection import ProtectedInput, check_protected_inputs
from ctxspec.reference.protocol import (
    UnsettledBatch,
)
from ctxspec.reference.registry import JSON
from ctxspec.reference.runtime import trace as tr
from ctxspec.reference.runtime.batch import ToolBatch
from ctxspec.reference.runtime.compaction_service import CompactionService
from ctxspec.reference.runtime.context_manager import ContextManager, raw_call
from ctxspec.reference.runtime.pipeline import InvocationPipeline
from ctxspec.reference.runtime.session import (
    INVOCATION_ERRORS,
    REQUEST_DENIED,
    RESPONSE_DENIED,
    RunState,
    SessionState,
    loop_key,
)
from ctxspec.reference.runtime.store import (
    Write,
    checkpoint_write,
)
from ctxspec.reference.snapshots import (
    view_with_snapshot,
)
from ctxspec.reference.view import (
    EffectiveRecord,
    ModelView,
    estimation_request,
    render_request,
    rendered_estimation,
)


class NodeDriver:
    """A role's loop: from a prepared request to its ending (§3, §10, §11)."""

    def __init__(self, session: SessionState, context: ContextManager,
                 pipeline: InvocationPipeline) -> None:
        self.s = session
        self.context = context
        self.pipeline = pipeline
        self.compaction = CompactionService(session, context, pipeline, self)
        self.batch = ToolBatch(self)

    def advance(self) -> None:
        """Run the active Run until it ends (continuing a restored Run where it stopped)."""
        self.s.require_agent()
        run = self.s.active_run
        if run is not None and run.run_id in self.s.resume:
            self.resume(run, self.s.resume.pop(run.run_id))
        while run is not None and run.status is RunStatus.RUNNING:
            self.loop(run)

    def resume(self, run: RunState, checkpoint: Mapping[str, JSON]) -> None:
        """§10: continue from the last committed step, from stored facts alone. A saved raw
        result goes on to post-processing (no new model call); settled batch members are
        reused and only the rest run; a committed feedback is not appended again; a frozen
        request whose result was never saved is asked again as a new attempt of the same
        Operation with the same frozen inputs."""
        stage = checkpoint.get("stage")
        operation = checkpoint.get("operation_id")
        if stage == "raw_saved" and isinstance(operation, str):
            op = self.s.operations[UUID(operation)]
            if op.raw_result_ref is None:
                raise AssertionError("a raw_saved checkpoint has its raw result")
            raw = json.loads(self.s.store.text(op.raw_result_ref))
            self.accept(run, op.operation_id, Complete(raw["text"], tuple(
                ProposedCall(c["name"], c["arguments"], c.get("provider_call_id"),
                             c.get("malformed_arguments")) for c in raw["tool_calls"])))
        elif stage == "post" and isinstance(checkpoint.get("decision"), str):
            record_id = UUID(str(checkpoint["decision"]))
            raw_record = self.s.contexts[run.context_id].record(record_id)
            text = raw_record.content.get("text") if raw_record is not None else None
            self.after_response(run, record_id, text if isinstance(text, str) else "")
        elif stage == "batch":
            self.resume_batch(run, checkpoint)
        elif stage == "denied":
            self.end(run, RunStatus.FAILED, ErrorCode.HOOK_DENIED, REQUEST_DENIED)
        elif stage in ("prepared", "frozen", "compacting") and isinstance(operation, str):
            self.resume_request(run, operation, self.kept_cutoff(checkpoint))

    def resume_batch(self, run: RunState, checkpoint: Mapping[str, JSON]) -> None:
        """A decided answer: denied, a final answer, or its batch with the members a crashed
        incarnation settled, decided, started, delegated or saved raw (§10)."""
        decision = checkpoint.get("decision")
        if not isinstance(decision, str):
            raise AssertionError("a batch checkpoint names its decision")
        record = next(r for r in effective_records(self.s.contexts[run.context_id])
                      if r.record_id == UUID(decision))
        if record.denied:  # a post-response deny committed before the crash (Q75)
            self.end(run, RunStatus.FAILED, ErrorCode.HOOK_DENIED, RESPONSE_DENIED)
            return
        if not record.tool_calls:
            run.final_text = record.text  # an Executor's answer is its member's result
            self.end(run, RunStatus.SUCCEEDED)
            return
        settled, started, hooked = (checkpoint.get(k) for k in ("settled", "started", "hooked"))
        delegated, raws = checkpoint.get("delegated"), checkpoint.get("raw")
        self.batch.run(run, record.record_id, [c.call_id for c in record.tool_calls],
                       settled if isinstance(settled, dict) else {},
                       started if isinstance(started, str) else None,
                       hooked if isinstance(hooked, dict) else {},
                       delegated if isinstance(delegated, dict) else {},
                       raws if isinstance(raws, dict) else {})

    def resume_request(self, run: RunState, operation: str, cutoff: int | None) -> None:
        """A prepared or frozen request whose answer was never saved: the same loop and
        Operation, asked again as its next attempt — unless the provider refused it, which is
        never sent again (§7, §10)."""
        run.loops -= 1  # the prepared request is the same loop, taken up again
        attempts = self.s.store.checkpoint(run.run_id, loop_key(run, "attempts"))
        refused = attempts.get("refused") if isinstance(attempts, dict) \
            and attempts.get("operation_id") == operation else None
        if isinstance(refused, int):  # the provider refused it: never sent again
            self.end(run, RunStatus.FAILED, ErrorCode.CONTEXT_LENGTH_EXCEEDED,
                     self.window_message(refused, "sent; the provider refused it"),
                     self.figures(refused))
            return
        if isinstance(attempts, dict) and attempts.get("operation_id") == operation:
            failed = attempts.get("failed")
            run.resume_attempt = failed + 1 if isinstance(failed, int) else 1
            run.resume_partial = attempts.get("partial") is True
        self.loop(run, resume_operation=UUID(operation),
                  resume_cutoff=cutoff)

    def kept_cutoff(self, checkpoint: Mapping[str, JSON]) -> int | None:
        """The input cutoff a request was prepared with, as its position committed it
        (prepared, compacting or frozen): taken up again after a takeover, it is the same
        request with the same inputs, whatever arrived since (§5 "本次 prepare_context 固定
        input_cutoff，压缩、重物化及最终冻结沿用同一水位"; §10: a retry reuses the frozen inputs;
        Q160). None for a position that fixed none (the inputs received by now)."""
        cutoff = checkpoint.get("cutoff")
        return cutoff if checkpoint.get("stage") in ("prepared", "compacting", "frozen") \
            and isinstance(cutoff, int) else None

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

    def loop(self, run: RunState, resume_operation: UUID | None = None,
             resume_cutoff: int | None = None) -> None:
        if self.stopped_or_out_of_time(run):
            return
        if self.loops_taken(run) >= self.s.agent.loop_limit:
            self.end(run, RunStatus.LOOP_EXHAUSTED)
            return
        run.loops += 1
        operation_id = resume_operation or self.s.new_id()
        cutoff = self.s.book.inputs[-1].input_seq if resume_cutoff is None else resume_cutoff
        run.cutoff = cutoff
        protected = run.handover if run.parent is not None else self.prepared(run, cutoff)
        view = self.context.materialize(run, protected)
        if isinstance(view, UnsettledBatch):
            raise AssertionError("the shell settles every batch before the next loop")
        # A resumed request passed its pre-request chain before it was compacted or frozen;
        # the chain's changes are in the effective context, so it is not run again (§10).
        chain = None if resume_operation is not None else self.pipeline.run_hooks(
            "model.pre_request", run, {"params": {}}, None, None, extra=lambda outcome:
            self.request_decided(run, operation_id, outcome),
            budget=self.context.fixed_room(run, view, protected)
            if self.s.hooks.registered("model.pre_request") else None)
        if chain is not None and chain.blocked:  # never sent; the role ends (Q75)
            self.end(run, RunStatus.FAILED, ErrorCode.HOOK_DENIED, REQUEST_DENIED)
            return
        if chain is not None and chain.items:
            view = self.context.materialize(run, protected)
            if isinstance(view, UnsettledBatch):
                raise AssertionError("hooks never unsettle a batch")
        prepared = self.fit(run, operation_id, view, protected)
        if prepared is None:
            return
        view, decision, snapshot_id = prepared
        self.s.moments.at("freeze")
        if self.stopped_before_freeze(run):
            return
        self.s.commit("T_FREEZE", self.s.put_model_freeze(
            run, self.context.prepare_model_freeze(run, operation_id, cutoff)))
        self.call_business_model(run, operation_id, view, protected, cutoff, decision,
                                  snapshot_id)

    def prepared(self, run: RunState, cutoff: int) -> tuple[ProtectedInput, ...]:
        """The root role's protected inputs at the cutoff, shown once in its context (§5)."""
        draft = self.context.prepare(run, cutoff)
        self.s.put_delta(draft.delta)
        return draft.protected

    def request_decided(self, run: RunState, operation_id: UUID,
                         chain: ChainOutcome | None) -> list[Write]:
        """The loop's position after the pre-request chain, committed with its decision: a
        deny is a fact a takeover ends the role on, never a request it sends (§3, Q75)."""
        stage = "denied" if chain is not None and chain.blocked else "prepared"
        return [self.s.checkpoint(run, stage, operation_id=str(operation_id),
                                  cutoff=run.cutoff)]

    def fit(self, run: RunState, operation_id: UUID, view: ModelView,
             protected: Sequence[ProtectedInput]
             ) -> tuple[ModelView, str, UUID | None] | None:
        """§7/§8: apply the active snapshot if it still applies, measure, compact once when
        triggered, then the hard window. None when the Run ended on the way."""
        view, snapshot_id, _ = view_with_snapshot(view, run.snapshot)
        split = split_request(self.context.parts(run, view, protected), self.s.estimator)
        verdict = self.s.policy.evaluate(self.s.budget, split.fixed_tokens, split.material_tokens)
        decision = verdict.decision
        self.s.trace.add(tr.BudgetDecision(
            operation_id, decision, split.input_tokens, split.fixed_tokens,
            split.material_tokens, self.s.budget.input_budget, self.s.budget.trigger_threshold,
            verdict.summary_target, verdict.error_code.value if verdict.error_code else None,
            run.role))
        if decision == "error":  # the fixed input itself does not fit (§8; Q83)
            self.end(run, RunStatus.FAILED, verdict.error_code,
                      self.fixed_message(split.fixed_tokens, split.input_tokens),
                      self.figures(split.input_tokens, fixed=split.fixed_tokens))
            return None
        if decision == "compact":
            if self.stopped_before_compaction(run):
                return None
            if verdict.summary_target is None or verdict.summary_default_cap is None:
                raise AssertionError("a compact decision has a summary target and its cap")
            floor = useful_chunk_floor(verdict.summary_target, verdict.summary_default_cap)
            compacted = self.compaction.compact(run, operation_id, view, split.material,
                                      verdict.summary_target, split.input_tokens,
                                      split.material_tokens, protected, floor)
            # A stop or the Run's deadline that came while the episode ran starts no business
            # attempt: the episode and the business task share the Run's cancellation and
            # deadline (§8, §11; CTX-8.7, CTX-11.5).
            if compacted is None or self.stopped_or_out_of_time(run):
                return None
            view, snapshot_id = compacted
        final = self.context.with_system(run, view)
        tokens = self.s.estimator.estimate(
            estimation_request(final, self.context.schemas(run))).tokens
        if check_protected_inputs(final, protected):
            raise AssertionError("a protected input is missing from the request")
        if not fits_hard_window(tokens, self.s.budget.output_reserve, self.s.budget.safety_margin,
                                self.s.budget.window):
            self.end(run, RunStatus.FAILED, ErrorCode.CONTEXT_WINDOW_EXCEEDED,
                      self.window_message(tokens, "after compaction" if decision == "compact"
                                           else "preparing the request"),
                      self.figures(tokens))
            return None
        return final, decision, snapshot_id

    def fixed_message(self, fixed: int, tokens: int) -> str:
        """§8 "明确提示固定输入超窗": the fixed input — system prompt, tool schemas, current
        protected inputs — is what does not fit, with its figure; §11: numbers only."""
        b = self.s.budget
        return (f"the fixed input (system prompt, tool schemas, current protected inputs) needs "
                f"{fixed} tokens, over the input budget {b.input_budget}; the whole request "
                f"needs {tokens}; the window is {b.window} (output reserve {b.output_reserve} "
                f"[{b.output_reserve_source}], safety margin {b.safety_margin} "
                f"[{b.safety_margin_source}])")

    def figures(self, tokens: int, *, fixed: int | None = None) -> dict[str, int]:
        b = self.s.budget
        figures = {"input_tokens": tokens, "input_budget": b.input_budget,
                   "window": b.window, "output_reserve": b.output_reserve,
                   "safety_margin": b.safety_margin}
        return figures if fixed is None else {**figures, "fixed_input_tokens": fixed}

    def window_message(self, tokens: int, stage: str) -> str:
        """§11: numbers, configuration sources and the stage; never the prompt or secrets."""
        b = self.s.budget
        return (f"the request needs {tokens} input tokens {stage}; the window is {b.window} "
                f"(output reserve {b.output_reserve} [{b.output_reserve_source}], safety margin "
                f"{b.safety_margin} [{b.safety_margin_source}], input budget {b.input_budget})")

    def call_business_model(self, run: RunState, operation_id: UUID, view: ModelView,
                             protected: Sequence[ProtectedInput], cutoff: int, decision: str,
                             snapshot_id: UUID | None) -> None:
        # What the adapter sends, marks included, is what is counted and what is traced (§6,
        # §7: I counts everything sent).
        rendered = render_request(view, self.context.schemas(run))
        counted = rendered_estimation(rendered)
        messages = counted.messages
        estimation = self.s.estimator.estimate(counted).tokens
        delivered = False
        first_attempt, run.resume_attempt = run.resume_attempt, 1
        last_fragment, run.resume_partial = run.resume_partial, False
        fragments = self.stored_fragments(run, operation_id) if first_attempt > 1 else []
        for attempt in range(first_attempt, self.s.agent.model_attempts + 1):
            if attempt > 1 and self.halted_before_retry(run):
                return  # no new attempt after a stop or past the Run's deadline
            outcome = self.pipeline.call_model(
                run, "business", operation_id, f"model:{operation_id}", attempt, messages,
                self.context.schemas(run), self.s.budget.output_reserve, view,
                compaction=decision, snapshot_id=snapshot_id, protected=protected,
                cutoff=cutoff, estimation=estimation, rendered=rendered)
            if isinstance(outcome, ContextLengthExceeded):
                # The refusal is a fact saved before the Run ends, so a takeover ends the Run
                # the same way instead of sending the over-window request again (CTX-7.24).
                self.s.commit("ATTEMPT_FAILED", [checkpoint_write(
                    run.run_id, loop_key(run, "attempts"), {
                        "operation_id": str(operation_id), "failed": attempt,
                        "partial": False, "refused": estimation})])
                self.end(run, RunStatus.FAILED, ErrorCode.CONTEXT_LENGTH_EXCEEDED,
                          self.window_message(estimation, "sent; the provider refused it"),
                          self.figures(estimation))
                return
            if isinstance(outcome, (Complete, PartialThenFailed)) and not delivered \
                    and run.parent is None:
                self.first_output(operation_id)
                delivered = True
            if isinstance(outcome, Complete):
                self.save_raw(run, operation_id, outcome, fragments)
                return
            if isinstance(outcome, PartialThenFailed):
                fragments.append(outcome.fragment)
            # A failed attempt is a fact: a takeover goes on with the next one, never renews
            # the attempts (§10). Its fragment is kept with it, out of the role's context.
            last_fragment = isinstance(outcome, PartialThenFailed)
            self.s.commit("ATTEMPT_FAILED", [checkpoint_write(
                run.run_id, loop_key(run, "attempts"), {
                    "operation_id": str(operation_id), "failed": attempt,
                    "partial": last_fragment, "fragments": list(fragments)})])
        self.settle_fragments(run, fragments, succeeded=False)
        self.end(run, RunStatus.FAILED, ErrorCode.MODEL_FAILED,
                  "the model failed " + ("after a partial output" if last_fragment
                                         else "before any output"))

    def first_output(self, operation_id: UUID) -> None:
        """The first output of the request's attempts: its deliveries become delivered with the
        receipt (T_FIRST_OUTPUT, §5); an Executor's request delivers no user input."""
        first = dl.first_output(self.s.book, operation_id=operation_id,
                                receipt_ref=self.s.ref(f"first-output:{operation_id}"),
                                delivered_at=self.s.time())
        if isinstance(first, dl.DeliveryRejected):
            raise RuntimeError(f"{first.code}: {first.reason}")
        self.s.book, writes = first
        self.s.deliveries_changed(writes)
        self.s.commit("T_FIRST_OUTPUT", [])
        self.s.moments.at("first_output")

    def save_raw(self, run: RunState, operation_id: UUID, outcome: Complete,
                 fragments: Sequence[str]) -> None:
        """The raw answer saved before anything happens to it (RAW_RESULT_SAVED, §10), then
        accepted."""
        raw = self.s.ref(json.dumps({"text": outcome.text, "tool_calls": [
            raw_call(c) for c in outcome.tool_calls]}, sort_keys=True, ensure_ascii=False))
        self.s.put_operation(operation_id, run, OperationPurpose.MODEL,
                             f"model:{operation_id}", OperationState.RUNNING, raw)
        self.s.commit("RAW_RESULT_SAVED", [
            self.s.checkpoint(run, "raw_saved", operation_id=str(operation_id))])
        self.settle_fragments(run, fragments, succeeded=True)
        self.s.moments.at("raw_saved")
        self.accept(run, operation_id, outcome)

    def asks_pre_call(self, run: RunState) -> bool:
        """A pre-call hook decides about a call that will run: none is asked once a stop is
        accepted (Q80)."""
        return not self.stop_pending(run)

    def halted_before_retry(self, run: RunState) -> bool:
        """A retry is a new model call: under the Run's stop and its deadline like every call
        (§8 "所有调用受同一 Run deadline", §3, §11). Ends the role when either came."""
        return self.stopped_or_out_of_time(run)

    def stored_fragments(self, run: RunState, operation_id: UUID) -> list[str]:
        """The fragments of an Operation's failed attempts a crashed incarnation saved."""
        saved = self.s.store.checkpoint(run.run_id, loop_key(run, "attempts"))
        if not isinstance(saved, dict) or saved.get("operation_id") != str(operation_id):
            return []
        kept = saved.get("fragments")
        return [f for f in kept if isinstance(f, str)] if isinstance(kept, list) else []

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

    def accept(self, run: RunState, operation_id: UUID, outcome: Complete) -> None:
        """The raw result is kept; response hooks make the effective one; then the batch."""
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
        self.s.commit("EFFECTIVE_RESULT", [
            self.s.checkpoint(run, "post", decision=str(record_id))])
        self.after_response(run, record_id, outcome.text)

    def after_response(self, run: RunState, record_id: UUID, raw_text: str) -> None:
        """The post-response chain makes the effective answer; only then does the Loop get it:
        its batch, its final answer, or — denied — nothing (§2, §3)."""
        self.pipeline.run_hooks("model.post_response", run, {"text": raw_text}, None, record_id,
                    stage="post", extra=lambda chain: self.response_decided(run, record_id,
                                                                             chain))
        answer = next(r for r in effective_records(self.s.contexts[run.context_id])
                      if r.record_id == record_id)
        if answer.denied:  # neither its calls run nor is it delivered (§2, §3; Q75)
            self.end(run, RunStatus.FAILED, ErrorCode.HOOK_DENIED, RESPONSE_DENIED)
            return
        if not answer.tool_calls:
            run.final_text = self.answer_text(answer, raw_text)
            self.end(run, RunStatus.SUCCEEDED)
            return
        self.batch.run(run, record_id, [call.call_id for call in answer.tool_calls])

    def response_decided(self, run: RunState, record_id: UUID,
                          chain: ChainOutcome | None) -> list[Write]:
        """A legitimate post-response deny marks the response denied in the effective context,
        committed with the decision (HOOK_DECISION): its raw stays for audit; the Loop, history
        and a takeover see only the explicit denied state (§2 "后置拒绝则交明确拒绝状态", §3
        "合法 deny … 必须阻止执行或交付"; Q75)."""
        decided = [self.s.checkpoint(run, "batch", decision=str(record_id), settled={})]
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



