"""Mutants only the universal checks catch (conformance/universal.py, issue #31): realistic bugs
that break a rule holding on every request — a tool result without its call, calls run after
the Run's end, a retry sent after the user's stop, a Run ended twice, a failed summary's part
shown as a summary — in cases that are about something else."""

from collections.abc import Callable
from typing import Any
from uuid import UUID

from ctxspec.conformance.mutants import Mutant, Patch
from ctxspec.reference import snapshots
from ctxspec.reference.compaction import material_key, summary_message
from ctxspec.reference.contracts import NodeCheckpoint, RunStatus
from ctxspec.reference.ports import PartialThenFailed
from ctxspec.reference.runtime import trace as tr
from ctxspec.reference.runtime.batch import ToolBatch
from ctxspec.reference.runtime.node_driver import NodeDriver
from ctxspec.reference.runtime.pipeline import InvocationPipeline
from ctxspec.reference.runtime.runtime import RunState
from ctxspec.reference.view import EffectiveRecord, ModelView, ViewKind

Method = Callable[..., Any]


def _cut_keeps_last_result(original: Callable[..., Any]) -> Callable[..., Any]:
    def apply_snapshot(view: ModelView, manifest: snapshots.SourceManifest, summary_text: str,
                       snapshot_id: UUID) -> ModelView:
        # The summary cut lands on a message boundary, not a protocol group's: the tail tool
        # result of the covered material stays in the view, its call summarised away
        # (langchain-ai/langchain#34282, put back).
        applied: ModelView = original(view, manifest, summary_text, snapshot_id)
        covered = [m for m in view.messages if material_key(m) in manifest.keys]
        if not covered or covered[-1].kind is not ViewKind.TOOL_RESULT:
            return applied
        messages = list(applied.messages)
        at = next(i for i, m in enumerate(messages) if m.kind is ViewKind.SUMMARY)
        messages.insert(at + 1, covered[-1])
        return ModelView(tuple(messages))
    return apply_snapshot


# --- mutants only the universal checks about Runs and summaries catch ---------------------------


def _loop_ends_before_batch(original: Method) -> Method:
    def batch(self: ToolBatch, run: RunState, answer: EffectiveRecord,
              at: NodeCheckpoint) -> NodeCheckpoint | None:
        # The Loop budget is counted at the answer: the answer that took the last Loop ends
        # the Run at once, and its calls, already scheduled, run after the Run's end.
        fresh = not at.settled and not at.started
        if run.parent is None and answer.tool_calls and fresh \
                and not self.driver.stop_pending(run) \
                and self.driver.loops_taken(run) >= self.s.agent.loop_limit:
            self.driver.end(run, RunStatus.LOOP_EXHAUSTED)
        result: NodeCheckpoint | None = original(self, run, answer, at)
        return result
    return batch


def _retry_ignores_stop(original: Method) -> Method:
    def halted_before_retry(self: NodeDriver, run: RunState) -> bool:
        # The retry policy is given the Run's deadline but not its cancellation: a failed
        # attempt with a retry left is asked again after the user's stop, which the Run's
        # ending still honours once the Loop winds up (§11: no new attempt after a stop).
        deadline = self.s.agent.run_deadline
        started = (run.parent or run).started_at_tick
        if deadline is not None and self.s.clock.now() - started >= deadline:
            self.end(run, RunStatus.TIMED_OUT)
            return True
        return False
    return halted_before_retry


def _failed_ending_twice(original: Method) -> Method:
    def end(self: NodeDriver, run: RunState, status: RunStatus, *rest: Any, **kept: Any) -> None:
        # A failed Run's end is reported by the error's handler and again by the Loop's own
        # wind-up: its waiter hears the same ending twice.
        original(self, run, status, *rest, **kept)
        if run.parent is None and run.status is RunStatus.FAILED:
            last = self.s.trace.of(tr.RunEnded)[-1]
            self.s.trace.add(last)
    return end


_PARTIALS = "_mutant_summary_partials"
"""Where the mutant keeps, on the Session's state, the partial outputs of failed summary
attempts."""


def _stream_kept(original: Method) -> Method:
    def call_model(self: InvocationPipeline, run: RunState, purpose: str, *rest: Any,
                   **kept: Any) -> Any:
        outcome = original(self, run, purpose, *rest, **kept)
        if purpose == "compaction" and isinstance(outcome, PartialThenFailed):
            setattr(self.s, _PARTIALS, [*getattr(self.s, _PARTIALS, ()), outcome.fragment])
        return outcome
    return call_model


def _partial_shown_as_summary(original: Method) -> Method:
    def freeze_compacted(self: NodeDriver, run: RunState, position: NodeCheckpoint) -> Any:
        fit = self.fits.get(self.operation_of(position))
        partials: list[str] = getattr(self.s, _PARTIALS, None) or []
        messages = [] if fit is None else list(fit.view.messages)
        at = next((i for i, m in enumerate(messages) if m.kind is ViewKind.SUMMARY), None)
        if fit is not None and partials and at is not None:
            # The summary stream was written to the context as it came: the broken attempt's
            # part stays a summary record beside the retry's.
            shown = [summary_message(p, messages[at].record_id) for p in partials]
            fit.view = ModelView(tuple(messages[:at] + shown + messages[at:]))
        return original(self, run, position)
    return freeze_compacted


MUTANTS = (
    Mutant("ORPHAN-AFTER-CUT",
           "the compaction cut keeps the covered material's last tool result after the summary, "
           "its call summarised away (§6: every tool result in a request has its call)",
           (Patch(snapshots, "apply_snapshot", _cut_keeps_last_result),)),
    Mutant("CALLS-AFTER-LOOP-END",
           "the answer that takes the last Loop ends the Run loop_exhausted at once, and its "
           "tool calls run after the Run's end (§10, §11: nothing advances an ended Run)",
           (Patch(ToolBatch, "run", _loop_ends_before_batch),)),
    Mutant("RETRY-AFTER-STOP",
           "a failed attempt with a retry left is retried after the user's stop — the retry "
           "policy reads the Run's deadline, not its stop — and the Run then ends stopped "
           "(§11: a stop starts no new business attempt)",
           (Patch(NodeDriver, "halted_before_retry", _retry_ignores_stop),)),
    Mutant("FAILED-ENDING-TWICE",
           "a failed Run's ending is reported twice, by the error's handler and by the Loop's "
           "wind-up (§10, §11: an ended Run has one terminal state)",
           (Patch(NodeDriver, "end", _failed_ending_twice),)),
    Mutant("PARTIAL-SUMMARY-KEPT",
           "a summary attempt that broke after a partial output leaves that part in the context "
           "as a summary beside the retry's (§8: a failed summary is never passed off as one; "
           "only a complete answer enters the view)",
           (Patch(InvocationPipeline, "call_model", _stream_kept),
            Patch(NodeDriver, "freeze_compacted", _partial_shown_as_summary))),
)
