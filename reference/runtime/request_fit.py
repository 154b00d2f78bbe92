"""The business request's fit, from its prepared view to T_FREEZE (§5, §7, §8, §10): measured
once and decided by the CompactionPolicy, its compaction episode planned and then advanced by
the role's loop one step at a time (a chunk a step, then the publication), and the request
checked against the hard window and frozen.

:class:`Fit` is what these steps hand each other in memory for one request; a takeover, which
holds none of it, measures the request again from its position and the stored facts
(:meth:`RequestFit.taken_up`) and goes on with the episode where its position left it.
"""

from dataclasses import dataclass
from typing import TYPE_CHECKING
from uuid import UUID

from ctxspec.reference.budget import fits_hard_window
from ctxspec.reference.compaction import split_request, useful_chunk_floor
from ctxspec.reference.contracts import EpisodeStatus, NodeCheckpoint, NodeStage, RunStatus
from ctxspec.reference.errors import ErrorCode
from ctxspec.reference.protection import ProtectedInput, check_protected_inputs
from ctxspec.reference.runtime import trace as tr
from ctxspec.reference.runtime import window_report as wr
from ctxspec.reference.runtime.compaction_service import (
    CompactionEpisodeRef,
    CompactionResult,
    Source,
)
from ctxspec.reference.runtime.sent_request import sent_request
from ctxspec.reference.runtime.session import RunState
from ctxspec.reference.snapshots import view_with_snapshot
from ctxspec.reference.view import ModelView, estimation_request

if TYPE_CHECKING:
    from ctxspec.reference.runtime.node_driver import NodeDriver


@dataclass
class Fit:
    """One request on its way to T_FREEZE: its cutoff and protected inputs, its view as fitted
    so far (the active snapshot applied, then the episode's result), the CompactionPolicy's
    decision, the snapshot the view uses, and — while its episode runs — that episode with its
    plan and frozen source, and the summary its committed chunks accumulated."""

    cutoff: int
    protected: tuple[ProtectedInput, ...]
    view: ModelView
    decision: str
    snapshot_id: UUID | None
    planned: CompactionEpisodeRef | None = None
    summary: str | None = None

    def chunks_left(self) -> bool:
        if self.planned is None:
            return False
        return self.planned.episode.chunk_cursor < len(self.planned.plan.chunks.chunks)


class RequestFit:
    """The NodeDriver's steps from a prepared request to its freeze (§7, §8, §10)."""

    def __init__(self, driver: "NodeDriver") -> None:
        self.driver = driver
        self.s = driver.s

    def taken_up(self, run: RunState, position: NodeCheckpoint) -> Fit | None:
        """A request whose fit a takeover finds under way: measured again at its kept cutoff
        (the same Loop and Operation, its pre-request chain not asked again, §10), its episode
        going on from the chunk its position holds. None when the Run ended."""
        driver = self.driver
        if driver.stopped_or_out_of_time(run):
            return None
        cutoff = driver.cutoff_of(position)
        run.chunk = position.compaction  # the episode goes on from the chunk it holds
        protected, view = driver.request_view(run, cutoff)
        run.cutoff = cutoff
        return self.measure(run, driver.operation_of(position), cutoff, protected, view)

    def measure(self, run: RunState, operation_id: UUID, cutoff: int,
                protected: tuple[ProtectedInput, ...], view: ModelView) -> Fit | None:
        """§7/§8: the active snapshot applied if it still applies, the request measured and
        decided (traced once per measure); a compact decision plans the request's one
        episode — started (EPISODE_STARTED), found running, or found finished. None when the
        Run ended on the way."""
        view, snapshot_id, _ = view_with_snapshot(view, run.snapshot)
        split = split_request(self.driver.context.parts(run, view, protected), self.s.estimator)
        verdict = self.s.policy.evaluate(self.s.budget, split.fixed_tokens, split.material_tokens)
        decision = verdict.decision
        self.s.trace.add(tr.BudgetDecision(
            operation_id, decision, split.input_tokens, split.fixed_tokens,
            split.material_tokens, self.s.budget.input_budget, self.s.budget.trigger_threshold,
            verdict.summary_target, verdict.error_code.value if verdict.error_code else None,
            run.role))
        fit = Fit(cutoff, protected, view, decision, snapshot_id)
        if decision == "error":  # the fixed input itself does not fit (§8; Q83)
            self.driver.end(run, RunStatus.FAILED, verdict.error_code,
                            wr.fixed_message(self.s.budget, split.fixed_tokens,
                                             split.input_tokens),
                            wr.figures(self.s.budget, split.input_tokens,
                                       fixed=split.fixed_tokens))
            return None
        if decision != "compact":
            return fit
        if self.driver.stopped_before_compaction(run):
            return None
        if verdict.summary_target is None or verdict.summary_default_cap is None:
            raise AssertionError("a compact decision has a summary target and its cap")
        floor = useful_chunk_floor(verdict.summary_target, verdict.summary_default_cap)
        source = Source(split.material, verdict.summary_target, floor, split.input_tokens,
                        split.material_tokens)
        return self.planned(run, operation_id, fit, source)

    def planned(self, run: RunState, operation_id: UUID, fit: Fit, source: Source
                ) -> Fit | None:
        """The request's one episode (§8, §9): a finished one is never run again — the view
        goes on with what it published; a running one goes on at its cursor; else one starts.
        None when the Run ended."""
        existing = next((e for e in run.episodes
                         if e.triggering_model_operation_id == operation_id), None)
        if existing is not None and existing.status is not EpisodeStatus.RUNNING:
            fit.view, fit.snapshot_id, _ = view_with_snapshot(fit.view, run.snapshot)
            return fit
        planned = self.driver.compaction.plan(run, operation_id, fit.view, source, existing)
        if isinstance(planned, CompactionResult):  # no episode may start: the view as it is
            fit.view, fit.snapshot_id = planned
            return fit
        if planned is None:
            return None
        fit.planned = planned
        episode = planned.episode
        if episode.chunk_cursor > 0 and episode.accumulated_summary_ref is not None:
            fit.summary = self.s.store.text(episode.accumulated_summary_ref)
        return fit

    def published(self, run: RunState, fit: Fit) -> NodeCheckpoint:
        """The finished episode published (SNAPSHOT_COMMITTED): the request's view goes on
        with the new summary, or rebuilt from the records when the switch was refused."""
        planned = fit.planned
        if planned is None or fit.summary is None:
            raise AssertionError("a publication follows an episode's committed chunks")
        result = self.driver.compaction.publish(run, planned.episode, planned.source.material,
                                                planned.plan, fit.summary, fit.protected)
        fit.view, fit.snapshot_id = result
        fit.planned = None
        return self.driver.compaction.position(run, NodeStage.COMPACTED)

    def freeze(self, run: RunState, operation_id: UUID, fit: Fit) -> NodeCheckpoint | None:
        """The fitted request checked against the hard window, then frozen (T_FREEZE, the
        FROZEN position). A stop or the Run's deadline that came while its episode ran starts
        no business attempt: the episode and the business task share the Run's cancellation
        and deadline (§8, §11; CTX-8.7, CTX-11.5). None when the Run ended."""
        driver = self.driver
        if fit.decision == "compact" and driver.stopped_or_out_of_time(run):
            return None
        final = driver.context.with_system(run, fit.view)
        tokens = self.s.estimator.estimate(
            estimation_request(final, driver.context.schemas(run))).tokens
        if check_protected_inputs(final, fit.protected):
            raise AssertionError("a protected input is missing from the request")
        if not fits_hard_window(tokens, self.s.budget.output_reserve, self.s.budget.safety_margin,
                                self.s.budget.window):
            stage = "after compaction" if fit.decision == "compact" else "preparing the request"
            driver.end(run, RunStatus.FAILED, ErrorCode.CONTEXT_WINDOW_EXCEEDED,
                       wr.window_message(self.s.budget, tokens, stage),
                       wr.figures(self.s.budget, tokens))
            return None
        self.s.moments.at("freeze")
        if driver.stopped_before_freeze(run):
            return None
        frozen = driver.context.prepare_model_freeze(run, operation_id, fit.cutoff, fit.decision)
        self.s.commit("T_FREEZE", self.s.put_model_freeze(run, frozen))
        run.chunk = None
        driver.frozen[operation_id] = sent_request(final, driver.context.schemas(run),
                                                   self.s.estimator, fit.protected, fit.cutoff,
                                                   fit.decision, fit.snapshot_id)
        return frozen.position

