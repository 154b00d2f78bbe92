"""The CompactionService of §3: one CompactionEpisode per triggering business Operation,
planned, advanced chunk by chunk and published as a snapshot with the CAS of the active
pointer (§8, §9; "CompactionService --> CommitCoordinator : Episode及快照命令"). Each is the
body of one step of the role's loop (§10), which commits the role's position with it:

- :meth:`CompactionService.plan` — the chunk plan over the frozen material, and the episode
  started (EPISODE_STARTED, the COMPACTING position at cursor 0) or found again after a
  takeover (§8, §9);
- :meth:`CompactionService.advance` — the next chunk's model call through the
  InvocationPipeline, its raw answer saved (CHUNK_RAW_SAVED), its post-response chain, the
  cursor committed (CHUNK_COMMITTED: COMPACTING at the next chunk, SUMMARISED after the last)
  (§8 "每步先保存原始响应", §10);
- :meth:`CompactionService.publish` — the snapshot and the switch of the active pointer in one
  commit (SNAPSHOT_COMMITTED, the COMPACTED position), or a refusal kept with its reason (§9).
"""

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, NamedTuple
from uuid import UUID

from ctxspec.reference.chunk_material import with_current_material
from ctxspec.reference.compaction import (
    ChunkProgress,
    CompactionPlan,
    CompactionRequest,
    commit_chunk,
    complete_episode,
    fail_episode,
    fits_window,
    material_key,
    next_step,
    plan_compaction,
    start_episode,
    transcript,
)
from ctxspec.reference.contracts import (
    AttemptsMade,
    ChunkStep,
    CompactionEpisode,
    MessageRole,
    NodeCheckpoint,
    NodeStage,
    OperationPurpose,
    OperationState,
    RunStatus,
)
from ctxspec.reference.errors import ErrorCode
from ctxspec.reference.hooks import (
    ChainOutcome,
)
from ctxspec.reference.ports import (
    Complete,
    ContextLengthExceeded,
)
from ctxspec.reference.protection import ProtectedInput
from ctxspec.reference.protocol import (
    UnsettledBatch,
)
from ctxspec.reference.runtime import trace as tr
from ctxspec.reference.runtime.context_manager import ContextManager
from ctxspec.reference.runtime.pipeline import InvocationPipeline
from ctxspec.reference.runtime.session import (
    RunState,
    SessionState,
    loop_key,
)
from ctxspec.reference.runtime.store import (
    Write,
    checkpoint_write,
    insert_doc,
)
from ctxspec.reference.snapshots import (
    ActivePointer,
    SourceManifest,
    build_manifest,
    make_snapshot,
    manifest_document,
    switch_active,
    view_hash,
    view_with_snapshot,
)
from ctxspec.reference.tokens import EstimationRequest, PromptMessage
from ctxspec.reference.view import (
    VIEW_ADAPTER,
    ModelView,
    ViewKind,
    ViewMessage,
    render_request,
)

if TYPE_CHECKING:
    from ctxspec.reference.runtime.node_driver import NodeDriver


@dataclass(frozen=True)
class Source:
    """What an episode summarises, frozen when it starts: the material, the summary target T,
    a useful chunk's floor (Q120), and the figures that triggered it (§8)."""

    material: Sequence[ViewMessage]
    target: int
    floor: int
    input_tokens: int
    material_tokens: int


@dataclass(frozen=True)
class CompactionEpisodeRef:
    """What :meth:`CompactionService.plan` returns (§3 ``plan() CompactionEpisodeRef``): the
    episode started or found running, its chunk plan and its frozen source, ready to advance."""

    episode: CompactionEpisode
    plan: CompactionPlan
    source: Source


class CompactionProgress(NamedTuple):
    """What :meth:`CompactionService.advance` returns (§3 ``advance() CompactionProgress``):
    the episode with one more chunk committed, the accumulated summary, and the role's
    position that chunk's commit made."""

    planned: CompactionEpisodeRef
    summary: str
    position: NodeCheckpoint


class CompactionResult(NamedTuple):
    """What :meth:`CompactionService.publish` returns (§3 ``publish() CompactionResult``): the
    business request's view going on (with the new summary, or rebuilt from the records when
    the switch was refused) and the snapshot it uses, if any."""

    view: ModelView
    snapshot_id: UUID | None


class CompactionService:
    """Plans, advances and publishes compaction episodes (§8, §9)."""

    def __init__(self, session: SessionState, context: ContextManager,
                 pipeline: InvocationPipeline, driver: "NodeDriver") -> None:
        self.s = session
        self.context = context
        self.pipeline = pipeline
        self.driver = driver

    def plan(self, run: RunState, operation_id: UUID, view: ModelView, source: "Source",
             existing: CompactionEpisode | None
             ) -> "CompactionEpisodeRef | CompactionResult | None":
        """The chunk plan over the episode's frozen material, and the episode started
        (EPISODE_STARTED) — or, after a takeover, the running one on the material and target
        it started with: the records may have changed since, which the switch's CAS is there
        to see (§8, §9). None when the Run ended; the view unchanged when no episode may
        start."""
        if existing is not None:
            material, target = self.episode_source(existing)
            floor = int(json.loads(self.s.store.text(existing.source_manifest_ref))["chunk_floor"])
            source = replace(source, material=material, target=target, floor=floor)
        episode_id = existing.episode_id if existing is not None else self.s.new_id()
        plan = plan_compaction(source.material, episode_id=episode_id,
                               window=self.s.budget.window, summary_target=source.target,
                               safety_margin=self.s.budget.safety_margin,
                               estimator=self.s.estimator, floor=source.floor,
                               custom_prompt=self.s.agent.custom_compaction_prompt)
        if not isinstance(plan, CompactionPlan):
            # Decided before any episode or call. Prompts that leave no room for material at
            # all: a budget configuration that cannot compact (§8 "其余配置导致 T 无法为正时属于
            # 预算配置错误", Q67); room below a useful chunk's floor: COMPACTION_FAILED (Q120).
            code = ErrorCode.BUDGET_CONFIGURATION_INVALID \
                if plan.code == "NO_ROOM_FOR_MATERIAL" else ErrorCode.COMPACTION_FAILED
            self.driver.end(run, RunStatus.FAILED, code,
                            f"{plan.reason} (the §8 decision was to compact)")
            return None
        episode = existing or self.start(run, operation_id, view, source, episode_id)
        if episode is None:
            return CompactionResult(view, None)
        self.s.trace.add(tr.CompactionStep(
            episode.episode_id, "planned",
            f"I={source.input_tokens} ≥ trigger {self.s.budget.trigger_threshold}; "
            f"M={source.material_tokens} compressible; T={source.target}; "
            f"{len(plan.chunks.chunks)} chunk(s) of at most {plan.chunks.capacity} tokens"))
        return CompactionEpisodeRef(episode, plan, source)

    def start(self, run: RunState, operation_id: UUID, view: ModelView, source: "Source",
              episode_id: UUID) -> CompactionEpisode | None:
        """A new episode with its source frozen (the material, T and the chunk floor),
        committed before any chunk is asked (EPISODE_STARTED); None when the core refuses a
        second one for the operation."""
        source_doc = json.dumps({"summary_target": source.target, "chunk_floor": source.floor,
                                 "material": VIEW_ADAPTER.dump_python(
                                     ModelView(tuple(source.material)), mode="json")},
                                sort_keys=True)
        started = start_episode(
            episode_id=episode_id, run_id=run.run_id, owner_node_task_id=run.context_id,
            triggering_model_operation_id=operation_id, existing=run.episodes,
            material_tokens=source.material_tokens, source_view_hash=view_hash(view),
            source_manifest_ref=self.s.ref(source_doc), source_effective_revisions={},
            release_id=self.s.agent.release_id, input_tokens=source.input_tokens,
            created_at=self.s.time())
        if not isinstance(started, CompactionEpisode):
            return None
        self.s.put_episode(run, started, new=True)
        run.chunk = ChunkStep(episode_id=episode_id, cursor=0)
        self.s.commit("EPISODE_STARTED", self.progressed(run))
        return started

    def advance(self, run: RunState, planned: CompactionEpisodeRef, summary: str | None
                ) -> CompactionProgress | None:
        """The episode's next chunk after its cursor (one step of the role's loop): asked,
        post-processed and committed with the cursor (CHUNK_COMMITTED), the accumulated
        ``summary`` folding it in (§8). Returns the episode with the chunk, the new summary and
        the position the commit made: COMPACTING at the next chunk, SUMMARISED after the last.
        None when the Run ended (a stop, the deadline, a failed chunk)."""
        episode, plan = planned.episode, planned.plan
        # The cursor the role's position committed with the episode's (a takeover's position
        # is the one record it reads); the core refuses a chunk out of its order.
        at = run.chunk.cursor if run.chunk is not None \
            and run.chunk.episode_id == episode.episode_id else episode.chunk_cursor
        ordinal = at + 1
        if self.driver.stopped_or_out_of_time(run):  # every chunk is under the deadline
            return None
        request = plan.request(ordinal, summary)
        chunk = self.chunk(run, episode, plan, request, ordinal, planned.source.target)
        if chunk is None:
            return None
        chunk_operation, raw, folded = chunk
        committed = commit_chunk(episode, ordinal, self.s.ref(folded), chunk_operation)
        if not isinstance(committed, CompactionEpisode):
            raise AssertionError(committed.reason)
        self.s.put_episode(run, committed)
        self.s.put_operation(chunk_operation, run, OperationPurpose.COMPACTION,
                             request.purpose_key, OperationState.SUCCEEDED,
                             self.s.ref(raw), self.s.ref(folded))
        run.chunk = ChunkStep(episode_id=committed.episode_id, cursor=ordinal)
        total = len(plan.chunks.chunks)
        stage = NodeStage.SUMMARISED if ordinal == total else NodeStage.COMPACTING
        self.s.commit("CHUNK_COMMITTED", self.progressed(run, stage=stage))
        self.s.trace.add(tr.CompactionStep(committed.episode_id, "chunk_committed",
                                           f"chunk {ordinal} of {total}"))
        return CompactionProgress(replace(planned, episode=committed), folded,
                                  self.position(run, stage))

    def publish(self, run: RunState, episode: CompactionEpisode,
                material: Sequence[ViewMessage], plan: CompactionPlan, summary: str,
                protected: Sequence[ProtectedInput]) -> CompactionResult:
        """§9: the finished episode's snapshot and, in the same commit, the CAS of the active
        pointer against the records as they are now. The view goes on with the new summary, or
        — refused — is rebuilt from the current records.  CTX-9.17, CTX-9.18, CTX-9.30, CTX-9.33"""
        manifest = build_manifest(material, self.s.record_seqs(), self.s.heads(),
                                  plan.chunks.capacity,
                                  len(plan.chunks.chunks),
                                  previous=[(run.snapshot[0], run.snapshot[1])]
                                  if run.snapshot else [])
        snapshot_id = self.s.new_id()
        # The CAS reads the records as they are now, not as the episode found them: a hook of
        # the episode's own chunk requests may have corrected covered material meanwhile (§9).
        current = self.context.materialize(run, protected)
        if isinstance(current, UnsettledBatch):
            raise AssertionError("an episode runs between batches")
        switched = switch_active(run.pointer, expected_active=run.pointer.snapshot_id,
                                 lease_epoch=run.pointer.lease_epoch,
                                 new_snapshot_id=snapshot_id, manifest=manifest,
                                 current_view=current)
        done = complete_episode(episode, len(plan.chunks.chunks), snapshot_id)
        if not isinstance(done, CompactionEpisode):
            raise AssertionError(done.reason)
        self.s.put_episode(run, done)
        snapshot_rows = self.snapshot_rows(run, snapshot_id, manifest, summary)
        if isinstance(switched, ActivePointer):
            run.pointer = switched
            self.s.put_role(run)
            run.snapshot = (snapshot_id, manifest, summary)
            if run.parent is None:
                snapshot_rows.append(checkpoint_write(run.run_id, "snapshot", {
                    "snapshot_id": str(snapshot_id), "summary": summary,
                    "manifest": manifest_document(manifest)}))
            step = tr.CompactionStep(done.episode_id, "snapshot_active", str(snapshot_id))
        else:
            # Not made the head: the episode's model facts and summary stay (the snapshot row)
            # with why it was refused; the view is rebuilt from the records as they are now.
            # Neither the hooks nor the finished chunks are asked again, and this Operation
            # gets no second episode (§9 rebuild steps 3 and 4; CTX-9.33).
            snapshot_rows.append(checkpoint_write(run.run_id, loop_key(run, "snapshot_refused"), {
                "snapshot_id": str(snapshot_id), "reason": switched.reason,
                "detail": switched.detail}))
            step = tr.CompactionStep(done.episode_id, "snapshot_refused",
                                     f"{switched.reason}: {switched.detail}")
        self.s.commit("SNAPSHOT_COMMITTED", [*snapshot_rows,
                                             *self.progressed(run, stage=NodeStage.COMPACTED)])
        self.s.trace.add(step)  # traced once it is a fact
        # A summary folded into this one is part of its coverage: the new snapshot is checked
        # against, and applied to, the records themselves, never the view with the old summary
        # (CTX-9.21).
        new_view, used, _ = view_with_snapshot(current, run.snapshot)
        return CompactionResult(new_view, used)

    def snapshot_rows(self, run: RunState, snapshot_id: UUID, manifest: SourceManifest,
                      summary: str) -> list[Write]:
        """The snapshot's row — its summary, exact coverage and source versions — when it
        covers any record (§9)."""
        if not any(piece.context_seq is not None for piece in manifest.pieces):
            return []
        return [insert_doc(make_snapshot(
            snapshot_id=snapshot_id, context_id=run.context_id, generation=len(run.episodes),
            manifest=manifest, seqs_by_context=self.s.seqs(),
            source_revisions=self.s.heads(), protected_input_ids=[],
            summary_ref=self.s.ref(summary), summary_tokens=self.s.estimator.estimate(
                EstimationRequest(messages=(PromptMessage(role="system", text=summary),))
            ).tokens))]

    def episode_source(self, episode: CompactionEpisode
                        ) -> tuple[tuple[ViewMessage, ...], int]:
        """The material and summary target an episode froze when it started (its source
        manifest blob)."""
        document = json.loads(self.s.store.text(episode.source_manifest_ref))
        material = VIEW_ADAPTER.validate_python(document["material"])
        return material.messages, int(document["summary_target"])

    def fail(self, run: RunState, episode: CompactionEpisode, message: str) -> None:
        """§8: the whole episode fails and ends the Run; the old snapshot stays active, the
        committed chunks are audit only (CTX-8.75, CTX-8.76)."""
        failed, code = fail_episode(episode)
        self.s.put_episode(run, failed)
        self.driver.end(run, RunStatus.FAILED, code, message)

    def chunk(self, run: RunState, episode: CompactionEpisode, plan: CompactionPlan,
               request: CompactionRequest, ordinal: int, target: int
               ) -> tuple[UUID, str, str] | None:
        """One fold step (§8, CTX-8.70): the raw answer is saved first (CHUNK_RAW_SAVED), then
        the post-response chain makes the effective summary; the caller commits it with the
        cursor. A takeover reads the chunk's Operation by its purpose_key (§9: never a new
        identity) and how far it got from the role's position (``ChunkStep``): a saved raw
        answer is post-processed without asking the model again (CTX-9.43), a committed
        post-chain decision is reused, failed attempts are not renewed.
        Returns (operation, raw answer, effective summary), or None when the Run ended."""
        key = request.purpose_key
        stored = next((op for op in self.s.operations.values()
                       if op.purpose is OperationPurpose.COMPACTION and op.purpose_key == key),
                      None)
        progress = {} if stored is None else {ordinal: ChunkProgress(
            ordinal, stored.operation_id, stored.raw_result_ref)}
        step, _ = next_step(episode, len(plan.chunks.chunks), progress)
        at = run.chunk if run.chunk is not None and run.chunk.purpose_key == key else None
        operation_id = stored.operation_id if stored is not None else \
            at.operation_id if at is not None and at.operation_id is not None \
            else self.s.new_id()
        run.chunk = (at or ChunkStep(episode_id=episode.episode_id, cursor=ordinal - 1)
                     ).model_copy(update={"purpose_key": key, "operation_id": operation_id})
        if step == "post_process" and stored is not None and stored.raw_result_ref is not None:
            raw: str | None = self.s.store.text(stored.raw_result_ref)
        else:
            raw = self.ask_chunk(run, episode, plan, request, operation_id, target)
        if raw is None:
            return None
        kept = run.chunk.effective
        effective = None if kept is None else self.s.store.text(kept)
        if effective is None and not run.chunk.denied:
            chosen: list[str] = []

            def post(chain: ChainOutcome | None, text: str = raw) -> list[Write]:
                # The post chain's outcome is committed with its decision (HOOK_DECISION), so a
                # takeover before the chunk commit reuses it instead of asking the hook again.
                if chain is not None and chain.blocked:
                    return self.progressed(run, denied=True)
                summary = chain.payload.get("summary") if chain is not None else None
                chosen.append(summary if isinstance(summary, str) else text)
                return self.progressed(run, effective=self.s.ref(chosen[-1]))
            self.pipeline.run_hooks("compaction.post_response", run, {"summary": raw}, None, None,
                        stage="post", extra=post)
            effective = chosen[-1] if chosen else None
        if run.chunk is not None and run.chunk.denied:
            self.fail(run, episode, "a hook denied a compaction response")
            return None
        return operation_id, raw, raw if effective is None else effective

    def progressed(self, run: RunState, stage: NodeStage = NodeStage.COMPACTING,
                   **changes: object) -> list[Write]:
        """The role's position in its episode with its chunk's progress changed (§8, §10): the
        write each commit of the episode carries, so a takeover reads the episode's cursor,
        its chunk's Operation, decisions and failed attempts from the one position."""
        if run.chunk is None:
            raise AssertionError("an episode's commit is made with its chunk")
        run.chunk = run.chunk.model_copy(update=changes)
        return [self.s.record_position(run, self.position(run, stage))]

    def position(self, run: RunState, stage: NodeStage) -> NodeCheckpoint:
        """The role's position at ``stage`` of its episode (COMPACTING, SUMMARISED, COMPACTED):
        the triggering request's Operation and cutoff, and the episode's chunk."""
        if run.chunk is None:
            raise AssertionError("an episode's position holds its chunk")
        chunk = run.chunk
        operation_id = next(e.triggering_model_operation_id for e in run.episodes
                            if e.episode_id == chunk.episode_id)
        return self.s.position(run, stage, operation_id=str(operation_id), cutoff=run.cutoff,
                               compaction=chunk.model_dump(mode="json"))

    def ask_chunk(self, run: RunState, episode: CompactionEpisode, plan: CompactionPlan,
                   request: CompactionRequest, operation_id: UUID, target: int) -> str | None:
        """A chunk's model call with the role's attempts (§8 inherits its model and connection
        retries, CTX-8.2): each failed attempt is saved with the position (ATTEMPT_FAILED) so
        a takeover goes on with the next one; the episode fails only when the last attempt
        fails (CTX-8.75). A request the provider refused as over its window is never sent
        again. The raw answer of a successful attempt is saved before anything else happens
        to it (CHUNK_RAW_SAVED)."""
        if run.chunk is None:
            raise AssertionError("a chunk is asked with its progress")
        made = run.chunk.attempts
        first = made.failed + 1
        if made.refused is not None:
            self.fail(run, episode, "the provider refused a compaction request")
            return None
        if first == 1 and not self.pre_request(run, episode, plan, request):
            return None
        request = self.as_sent(run, episode, plan, request)
        if not fits_window(plan, request, self.s.estimator):
            self.fail(run, episode, "a compaction request would not fit")
            return None
        sent = ModelView(tuple(ViewMessage(
            role=MessageRole(m.role), kind=ViewKind.SYSTEM_PROMPT if m.role == "system"
            else ViewKind.PROMPT, text=m.text) for m in request.messages))
        estimation = self.s.estimator.estimate(request.estimation()).tokens
        for attempt in range(first, self.s.agent.model_attempts + 1):
            if self.halted_before_chunk_attempt(run, attempt, first):
                return None
            outcome = self.pipeline.call_model(
                run, "compaction", operation_id, request.purpose_key, attempt,
                request.messages, (), target, sent, compaction=None,
                snapshot_id=None, protected=(), cutoff=None,
                estimation=estimation, rendered=render_request(sent))
            if isinstance(outcome, Complete):
                self.s.put_operation(operation_id, run, OperationPurpose.COMPACTION,
                                request.purpose_key, OperationState.RUNNING,
                                self.s.ref(outcome.text))
                self.s.commit("CHUNK_RAW_SAVED", self.progressed(run))
                self.s.moments.at("raw_saved")
                return outcome.text
            refused = estimation if isinstance(outcome, ContextLengthExceeded) else None
            self.s.put_operation(operation_id, run, OperationPurpose.COMPACTION,
                                 request.purpose_key, OperationState.RUNNING)
            self.s.commit("ATTEMPT_FAILED", self.progressed(
                run, attempts=AttemptsMade(failed=attempt, refused=refused)))
            if refused is not None:
                self.fail(run, episode, "the provider refused a compaction request")
                return None
        self.fail(run, episode, "a compaction chunk failed")
        return None

    def pre_request(self, run: RunState, episode: CompactionEpisode, plan: CompactionPlan,
                    request: CompactionRequest) -> bool:
        """Before a chunk's first attempt: the planned request fits, and its pre-request chain
        allows it (a committed decision reused, never asked again); False when the episode
        failed on the way. An attempt already sent passed both."""
        if not fits_window(plan, request, self.s.estimator):
            self.fail(run, episode, "a compaction request would not fit")
            return False
        if run.chunk is not None and run.chunk.pre is None:
            def decided(chain: ChainOutcome | None) -> list[Write]:
                return self.progressed(run, pre="denied" if chain is not None and chain.blocked
                                       else "allowed")
            self.pipeline.run_hooks("compaction.pre_request", run, {"purpose": "compaction"},
                                    None, None, extra=decided)
        if run.chunk is not None and run.chunk.pre == "denied":
            self.fail(run, episode, "a hook denied a compaction request")
            return False
        return True

    def as_sent(self, run: RunState, episode: CompactionEpisode, plan: CompactionPlan,
                request: CompactionRequest) -> CompactionRequest:
        """The chunk's request with its material as the records stand after its pre-request
        chain (``chunk_material``): a redaction that chain committed is what the compaction
        model reads, never the text it replaced (§3, §8; Q259). The same request again for
        every attempt, unless a record changed between them."""
        ordinal = episode.chunk_cursor + 1
        previous = self.s.store.text(episode.accumulated_summary_ref) \
            if episode.chunk_cursor > 0 and episode.accumulated_summary_ref is not None else None
        current = self.context.materialize(run, ())
        if isinstance(current, UnsettledBatch):
            raise AssertionError("an episode runs between batches")
        texts = {material_key(m): transcript(m) for m in current.messages}
        rebuilt = with_current_material(plan, ordinal, texts).request(ordinal, previous)
        if rebuilt.purpose_key != request.purpose_key:
            raise AssertionError("the chunk's request keeps its purpose_key")
        return rebuilt

    def halted_before_chunk_attempt(self, run: RunState, attempt: int, first: int) -> bool:
        """Every attempt of a chunk, its first too, is under the Run's stop and deadline: a
        stop that came while the chunk's pre-request chain ran starts no compaction attempt
        (§11 "不启动新的压缩或业务 Attempt", Q161); ``first`` is the attempt the chunk starts
        from (a takeover goes on after the attempts that failed)."""
        return self.driver.stopped_or_out_of_time(run)
