"""Mutants of compaction (§8, §9): the chunk plan, the fixed input, the episode, snapshots."""

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from ctxspec.conformance.mutants import Mutant, Patch
from ctxspec.reference import compaction, snapshots
from ctxspec.reference.budget import fits_hard_window
from ctxspec.reference.contracts import NodeCheckpoint, NodeStage
from ctxspec.reference.runtime import compaction_service, context_manager, request_fit
from ctxspec.reference.runtime import trace as tr
from ctxspec.reference.runtime.compaction_service import CompactionService
from ctxspec.reference.runtime.node_driver import NodeDriver
from ctxspec.reference.snapshots import Applicability
from ctxspec.reference.view import ModelView, estimation_request


def _window_blind_plan(original: Callable[..., Any]) -> Callable[..., Any]:
    def plan(material: Any, **settings: Any) -> Any:
        # Planned (and send-checked) as if the window had no end: one chunk of everything.
        return original(material, **{**settings, "window": 10 ** 9})
    return plan


def _any_chunk_will_do(original: Callable[..., Any]) -> Callable[..., Any]:
    def plan(material: Any, **settings: Any) -> Any:
        # No floor on a useful chunk: one labelled character a chunk is a plan (Q120).
        return original(material, **{**settings, "floor": 1})
    return plan


def _nothing_protected(original: Callable[..., Any]) -> Callable[..., Any]:
    def split(parts: Any, estimator: Any) -> Any:
        return original(replace(parts, protected_input_ids=frozenset()), estimator)
    return split


def _no_protection_check(original: Callable[..., Any]) -> Callable[..., Any]:
    def check(view: Any, protected: Any) -> list[Any]:
        return []
    return check


def _held(driver: NodeDriver, run: Any, position: NodeCheckpoint) -> Any:
    """The request's fit as the step finds it — held, or measured again after a takeover —
    kept for the step itself to take."""
    operation_id = driver.operation_of(position)
    fit = driver.fits.pop(operation_id, None) or driver.fitting.taken_up(run, position)
    if fit is not None:
        driver.fits[operation_id] = fit
    return fit


def _compact_again(original: Callable[..., Any]) -> Callable[..., Any]:
    def freeze_compacted(self: NodeDriver, run: Any, position: NodeCheckpoint) -> Any:
        fit = _held(self, run, position)
        again: set[Any] = self.__dict__.setdefault("mutant_compacted_again", set())
        if fit is None or fit.decision != "compact" or run.loops in again:
            return original(self, run, position)
        budget = self.s.budget
        tokens = self.s.estimator.estimate(estimation_request(
            self.context.with_system(run, fit.view), self.context.schemas(run))).tokens
        if tokens >= budget.trigger_threshold and fits_hard_window(
                tokens, budget.output_reserve, budget.safety_margin, budget.window):
            # Sendable but still above the trigger: the request is fitted again under a new
            # Operation, which its policy compacts in a second episode.
            again.add(run.loops)
            self.fits.pop(self.operation_of(position))
            return self.moved(run, position, NodeStage.PREPARED,
                              operation_id=str(self.s.new_id()), compaction=None)
        return original(self, run, position)
    return freeze_compacted


def _keys_only(original: Callable[..., Applicability]) -> Callable[..., Applicability]:
    def applicability(manifest: Any, view: ModelView) -> Applicability:
        now = {compaction.material_key(m) for m in view.messages}
        gone = tuple(p.key for p in manifest.pieces
                     if not p.key.startswith("snapshot:") and p.key not in now)
        return Applicability(not gone, gone)
    return applicability


def _pointer_only_switch(original: Callable[..., Any]) -> Callable[..., Any]:
    def switch(pointer: Any, *, current_view: ModelView, manifest: Any, **checks: Any) -> Any:
        # The CAS compares the pointer and the lease, never the covered material.
        return original(pointer, current_view=ModelView(()), manifest=replace(manifest,
                        pieces=()), **checks)
    return switch


def _resummarise_on_conflict(original: Callable[..., Any]) -> Callable[..., Any]:
    def publish_summary(self: NodeDriver, run: Any, position: NodeCheckpoint) -> Any:
        fit = _held(self, run, position)
        planned = None if fit is None else fit.planned
        reached = original(self, run, position)
        steps = self.s.trace.of(tr.CompactionStep)
        if fit is None or reached is None or planned is None or not steps \
                or steps[-1].step != "snapshot_refused":
            return reached
        # Resolve the conflict by summarising again: a fresh episode (under a fresh operation
        # id, as the store allows one per operation) on the same source, its chunks re-asked
        # and published before the request goes on.
        fit.summary = None
        again = self.fitting.planned(run, self.s.new_id(), fit, planned.source)
        while again is not None and again.planned is not None and again.chunks_left():
            advanced = self.compaction.advance(run, again.planned, again.summary)
            if advanced is None:
                return None
            again.planned, again.summary, _ = advanced
        if again is None:
            return None
        if again.planned is not None:
            self.fitting.published(run, again)
        return reached
    return publish_summary


def _unaware(original: Callable[..., Any]) -> Callable[..., Any]:
    def step(self: NodeDriver, *args: Any, **kwargs: Any) -> Any:
        self.__dict__["mutant_compacting"] = True
        try:
            return original(self, *args, **kwargs)
        finally:
            self.__dict__["mutant_compacting"] = False
    return step


def _stop_unseen_while_fitting(original: Callable[..., Any]) -> Callable[..., Any]:
    def stopped(self: Any, run: Any) -> bool:
        if self.__dict__.get("mutant_compacting"):
            return False  # the episode runs apart from the Run's cancellation and deadline
        result: bool = original(self, run)
        return result
    return stopped


def _unseen_at_freeze(original: Callable[..., Any]) -> Callable[..., Any]:
    def stopped(self: Any, run: Any) -> bool:
        return False
    return stopped


def _episode_after_stop(original: Callable[..., Any]) -> Callable[..., Any]:
    def stopped(self: Any, run: Any) -> bool:
        return False  # the stop is seen only inside the episode, after it has started
    return stopped


def _remember_material(original: Callable[..., Any]) -> Callable[..., Any]:
    def plan(self: CompactionService, run: Any, operation_id: Any, view: Any, source: Any,
             existing: Any) -> Any:
        self.__dict__["mutant_material"] = (tuple(source.material), source.target)
        return original(self, run, operation_id, view, source, existing)
    return plan


def _material_as_it_is_now(original: Callable[..., Any]) -> Callable[..., Any]:
    def source(self: Any, episode: Any) -> Any:
        return self.__dict__["mutant_material"]  # the records now, not what the episode froze
    return source


MUTANTS = (
    Mutant("COMPACTION-REQUEST-OVERFLOWS",
           "the chunk plan ignores the window, so a compaction request itself overflows it "
           "(§8: each chunk's budget reserves prompts, the previous summary and T)",
           (Patch(compaction_service, "plan_compaction", _window_blind_plan),)),
    Mutant("USELESS-CHUNKS",
           "the chunk plan takes any capacity that holds one labelled character, so a tight "
           "window folds the material in thousands of tiny chunks (§8: the chunk count follows "
           "from the source length and the budget; Q120: a chunk carries at least max(T, C))",
           (Patch(compaction_service, "plan_compaction", _any_chunk_will_do),)),
    Mutant("PROTECTED-INPUT-COMPACTED",
           "the current question and supplements are compaction material, and the request "
           "is sent without them (§5, §8: protected inputs are fixed input, never summarised)",
           (Patch(request_fit, "split_request", _nothing_protected),
            Patch(context_manager, "split_request", _nothing_protected),
            Patch(request_fit, "check_protected_inputs", _no_protection_check))),
    Mutant("SECOND-COMPACTION",
           "a request still above the trigger after its summary is compacted again (§8: one "
           "episode per request; above 80% but within B it is sent)",
           (Patch(NodeDriver, "freeze_compacted", _compact_again),)),
    Mutant("SNAPSHOT-NOT-INVALIDATED",
           "a snapshot stays applicable while its covered records exist, even when their "
           "effective content changed (§9: compare content, not identity)",
           (Patch(snapshots, "applicability", _keys_only),)),
    Mutant("SWITCH-IGNORES-COVERAGE",
           "the snapshot pointer switch checks the active snapshot and the lease but not the "
           "covered material, so a correction made while the episode ran is summarised away "
           "(§9: the commit re-checks the source versions)",
           (Patch(compaction_service, "switch_active", _pointer_only_switch),)),
    Mutant("CAS-RESUMMARISED",
           "a switch refused because covered material changed is resolved by a new episode "
           "that asks the summary model again (§9: never re-call completed chunks)",
           (Patch(NodeDriver, "publish_summary", _resummarise_on_conflict),)),
    Mutant("EPISODE-IGNORES-STOP",
           "the compaction episode runs apart from the Run: a stop or the deadline reached "
           "while it runs is seen only after the business request (§8, §11: the episode "
           "shares the Run's cancellation and deadline)",
           (*(Patch(NodeDriver, step, _unaware) for step in (
               "fit_request", "fold_chunk", "publish_summary", "freeze_compacted")),
            Patch(NodeDriver, "stopped_or_out_of_time", _stop_unseen_while_fitting),
            # Nor is it seen between the episode and the freeze: only after the request.
            Patch(NodeDriver, "stopped_before_freeze", _unseen_at_freeze))),
    Mutant("EPISODE-AFTER-STOP",
           "a stop that arrives while a business request is prepared is not checked before its "
           "compaction: an episode is planned and started, then the Run ends stopped (§11: a "
           "stop during preparation starts no new compaction)",
           (Patch(NodeDriver, "stopped_before_compaction", _episode_after_stop),)),
    Mutant("EPISODE-MATERIAL-REREAD",
           "a takeover resumes a running episode on the records as they are now instead of "
           "the material it started with, so a correction made meanwhile makes the summary of "
           "the old text look applicable (§8, §9: the coverage and chunk plan are persisted)",
           (Patch(CompactionService, "plan", _remember_material),
            Patch(CompactionService, "episode_source", _material_as_it_is_now)),
           recovery=True),
)
