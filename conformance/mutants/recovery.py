"""Mutants of recovery (§10): what a takeover reuses, and what it must not do again."""

import contextlib
from collections.abc import Callable, Mapping
from typing import Any

from ctxspec.conformance import driver
from ctxspec.conformance.mutants import Mutant, Patch
from ctxspec.reference import delivery
from ctxspec.reference.contracts import EpisodeStatus, MessageRole, NodeCheckpoint, NodeStage
from ctxspec.reference.runtime.batch import ToolBatch
from ctxspec.reference.runtime.compaction_service import CompactionService
from ctxspec.reference.runtime.context_manager import settled_member
from ctxspec.reference.runtime.node_driver import NodeDriver
from ctxspec.reference.runtime.session import SessionState
from ctxspec.reference.runtime.store import CommitFailed


def _forget_saved_answer(original: Callable[..., Any]) -> Callable[..., Any]:
    def effective_result(self: Any, run: Any, position: NodeCheckpoint) -> Any:
        if position.operation_id not in self.answers:  # a takeover's: the answer is stored
            # Asks the model again for the frozen request instead of reading the saved answer
            # (its first output's receipt was saved before the answer was).
            return self.ask_model(run, position.model_copy(
                update={"stage": NodeStage.FROZEN, "first_output": True}))
        return original(self, run, position)
    return effective_result


def _feed_again(original: Callable[..., Any]) -> Callable[..., Any]:
    def next_loop(self: Any, run: Any, position: NodeCheckpoint) -> Any:
        # A position after a feedback this incarnation did not commit: a takeover's.
        if position.loops > 0 and self.s.commits_made("BATCH_FEEDBACK") == 0:
            # Replays the batch's feedback step after a takeover: its results appended again.
            records = self.s.contexts[run.context_id].records
            last = max(i for i, raw in enumerate(records)
                       if raw.record.message_kind == "assistant"
                       and any(key.startswith("tool_call:") for key in raw.content))
            for raw in records[last + 1:]:
                if raw.record.message_kind == "tool_result":
                    self.s.put_delta(self.context.append(
                        run, MessageRole.TOOL, "tool_result", dict(raw.content),
                        call_id=raw.record.call_id))
        return original(self, run, position)
    return next_loop


def _hooks_forgotten(original: Callable[..., Any]) -> Callable[..., Any]:
    def settle_batch(self: Any, run: Any, position: NodeCheckpoint) -> Any:
        # Committed pre-call hook decisions are not reused: the hooks are asked again.
        return original(self, run, position.model_copy(update={"hooked": {}}))
    return settle_batch


def _post_call_bypassed(original: Callable[..., Any]) -> Callable[..., Any]:
    def settle_batch(self: Any, run: Any, position: NodeCheckpoint) -> Any:
        # A call whose raw result was saved counts as settled: its raw result is reused as
        # the effective one and the post-call chain is never asked.
        reused = {**position.settled, **{key: settled_member({"text": raw["text"]})
                                         for key, raw in position.raw.items()}}
        return original(self, run, position.model_copy(update={"settled": reused, "raw": {}}))
    return settle_batch


def _post_response_bypassed(original: Callable[..., Any]) -> Callable[..., Any]:
    def post_response(self: Any, run: Any, position: NodeCheckpoint) -> Any:
        if self.s.commits_made("EFFECTIVE_RESULT") == 0:  # a takeover's position
            # The answer taken as decided, its post-response chain unasked.
            return self.s.position(run, NodeStage.BATCH, decision=str(position.decision),
                                   settled={})
        return original(self, run, position)
    return post_response


def _chunk_post_bypassed(original: Callable[..., Any]) -> Callable[..., Any]:
    def chunk(self: Any, run: Any, episode: Any, plan: Any, request: Any, ordinal: int,
              target: int) -> Any:
        # A chunk whose raw answer was saved before the takeover is committed as it is: its
        # post-response chain is never asked.
        stored = next((op for op in self.s.operations.values()
                       if op.purpose_key == request.purpose_key
                       and op.raw_result_ref is not None and op.effective_result_ref is None),
                      None)
        if stored is not None and self.s.commits_made("CHUNK_RAW_SAVED") == 0:  # a dead one's
            raw = self.s.store.text(stored.raw_result_ref)
            return stored.operation_id, raw, raw
        return original(self, run, episode, plan, request, ordinal, target)
    return chunk


def _stop_unseen_at_freeze(original: Callable[..., Any]) -> Callable[..., Any]:
    def stopped(self: Any, run: Any) -> bool:
        return False  # the stop is seen only at the next Loop: the prepared request is sent
    return stopped


def _episode_abandoned(original: Callable[..., Any]) -> Callable[..., Any]:
    def restore(*args: Any, **kwargs: Any) -> Any:
        runtime = original(*args, **kwargs)
        for run in runtime.runs.values():
            # The interrupted episode is written off; the request goes on without its summary.
            run.episodes = [e.model_copy(update={"status": EpisodeStatus.FAILED})
                            if e.status is EpisodeStatus.RUNNING else e for e in run.episodes]
        return runtime
    return restore


def _executor_loops_forgotten(original: Callable[..., Any]) -> Callable[..., Any]:
    def restore(*args: Any, **kwargs: Any) -> Any:
        runtime = original(*args, **kwargs)
        for run in runtime.runs.values():
            run.finished_executor_loops = 0  # only the executions still running are counted
        return runtime
    return restore


def _fail_open(original: Callable[..., Any]) -> Callable[..., Any]:
    def commit(self: Any, name: str, writes: Any, **how: Any) -> None:
        # Logged and ignored: the runtime goes on as if the write had happened.
        with contextlib.suppress(CommitFailed):
            original(self, name, writes, **how)
    return commit


def _failure_hidden(original: Callable[..., Any]) -> Callable[..., Any]:
    def commit(self: Any, name: str, writes: Any, **how: Any) -> None:
        try:
            original(self, name, writes, **how)
        except CommitFailed:
            self.trace.events.pop()  # stops on it, but says nothing of why
            raise
    return commit


def _cutoff_renewed(original: Callable[..., Any]) -> Callable[..., Any]:
    def cutoff(self: Any, position: NodeCheckpoint) -> None:
        return None  # the request asked again takes the inputs received by now
    return cutoff


def _prepared_cutoff_renewed(original: Callable[..., Any]) -> Callable[..., Any]:
    def cutoff(self: Any, position: NodeCheckpoint) -> Any:
        # Only a frozen request keeps its cutoff; a prepared or compacting one takes the
        # inputs received by now.
        return original(self, position) if position.stage is NodeStage.FROZEN else None
    return cutoff


def _freeze_as_before(original: Callable[..., Any]) -> Callable[..., Any]:
    def freeze(book: Any, *, run_id: Any, operation_id: Any, input_cutoff: int) -> Any:
        # The delivery book still claims what the first freeze claimed; only the request the
        # takeover builds is enlarged.
        existing = delivery.frozen_inputs(book, operation_id)
        return original(book, run_id=run_id, operation_id=operation_id,
                        input_cutoff=input_cutoff if existing is None
                        else existing.input_cutoff)
    return freeze


def _proposes_effective(original: Callable[..., Any]) -> Callable[..., Any]:
    def proposed(self: Any, state: Any, decision_id: Any, call_id: Any,
                 arguments: Mapping[str, Any], decided: bool) -> dict[str, Any]:
        return dict(arguments)  # after a takeover, the hook's arguments pass for the model's
    return proposed


MUTANTS = (
    Mutant("TAKEOVER-PROPOSES-EFFECTIVE",
           "a call whose pre-call chain was decided before a takeover reports the hook's "
           "arguments as the ones the model proposed (§3: the proposed input stays as "
           "proposed, the effective one is the hook's; Q163)",
           (Patch(ToolBatch, "proposed_arguments", _proposes_effective, reads_only=True),),
           recovery=True),
    Mutant("TAKEOVER-REFREEZES",
           "a frozen request asked again after a takeover is rebuilt with the inputs received "
           "by now, so it shows a supplement that arrived after its freeze (§5: every attempt "
           "sends the frozen input list; §10; Q160)",
           (Patch(NodeDriver, "kept_cutoff", _cutoff_renewed, reads_only=True),
            Patch(delivery, "freeze", _freeze_as_before))),
    Mutant("TAKEOVER-RECUTS-PREPARED",
           "a request a takeover finds prepared or compacting takes the inputs received by now "
           "instead of the cutoff it was prepared with, so a supplement that arrived during its "
           "compaction joins it (§5: compaction, re-materialisation and freeze keep one cutoff)",
           (Patch(NodeDriver, "kept_cutoff", _prepared_cutoff_renewed, reads_only=True),)),
    Mutant("MODEL-REASKED-AFTER-SAVE",
           "a takeover ignores the saved raw result and asks the model again (§10: continue "
           "from post-processing, no new call)",
           (Patch(NodeDriver, "effective_result", _forget_saved_answer),), recovery=True),
    Mutant("FEEDBACK-TWICE",
           "a takeover after the feedback commit appends the batch's tool results again "
           "(§10, §12 row 23)",
           (Patch(NodeDriver, "next_loop", _feed_again),), recovery=True),
    Mutant("HOOK-RERUN-AFTER-CRASH",
           "a takeover asks the pre-call hooks again instead of reusing their committed "
           "decisions (§3, §10: reuse by hook_invocation_id, never re-run)",
           (Patch(NodeDriver, "settle_batch", _hooks_forgotten),), recovery=True),
    Mutant("POST-CALL-BYPASSED-AFTER-RAW",
           "a takeover after a tool's raw result was saved reuses it as the effective result: "
           "the post-call chain's change or deny is bypassed (§3, §10 只有原始结果时继续后处理, "
           "§12 原始结果保存后宕机)",
           (Patch(NodeDriver, "settle_batch", _post_call_bypassed),), recovery=True),
    Mutant("POST-RESPONSE-BYPASSED-AFTER-RAW",
           "a takeover after the model's answer was saved takes it as the effective answer "
           "without its post-response chain (§3, §10, §12 原始结果保存后宕机)",
           (Patch(NodeDriver, "post_response", _post_response_bypassed),), recovery=True),
    Mutant("CHUNK-POST-BYPASSED-AFTER-RAW",
           "a takeover commits a chunk whose raw summary was saved as it is, without its "
           "post-response chain (§8 每步先保存原始响应，完成后置 Hook; §10)",
           (Patch(CompactionService, "chunk", _chunk_post_bypassed),), recovery=True),
    Mutant("STOP-UNSEEN-AT-FREEZE",
           "a stop that arrives while a request is prepared is seen only at the next Loop: the "
           "request is frozen and sent (§11 停止不启动新的业务 Attempt)",
           (Patch(NodeDriver, "stopped_before_freeze", _stop_unseen_at_freeze),)),
    Mutant("EPISODE-NOT-RESUMED",
           "a takeover writes the interrupted compaction episode off instead of resuming it "
           "(§8, §10: the same episode resumes at its committed cursor)",
           (Patch(driver, "restore", _episode_abandoned),), recovery=True),
    Mutant("EXECUTOR-LOOPS-FORGOTTEN",
           "a takeover counts only the Loops of the Executor executions it resumes, so a "
           "finished one's Loops are spent again (§11: one shared Loop budget per Run)",
           (Patch(driver, "restore", _executor_loops_forgotten),), recovery=True),
    Mutant("COMMIT-FAILURE-FAIL-OPEN",
           "a required commit the store refuses is logged and ignored, so the run goes on with "
           "values the store does not have (§3, §10: never continue on an unsaved write)",
           (Patch(SessionState, "commit", _fail_open),)),
    Mutant("COMMIT-FAILURE-HIDDEN",
           "a refused required commit stops the runtime without surfacing it (§10: a "
           "required-persistence failure is surfaced explicitly)",
           (Patch(SessionState, "commit", _failure_hidden),)),
)
