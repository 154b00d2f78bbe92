"""A Hypothesis state machine over compaction episodes across crashes (§8, §9, §10).

The machine keeps only what storage would keep — the episodes, each chunk's progress (raw
result saved, committed), the snapshots and the active pointer — and drives every episode from
those facts with :func:`next_step`, so a crash (which the machine may do between any two steps)
loses nothing but in-flight work. Business operations come and go, material is appended or
changed meanwhile (a hook editing covered material), chunks fail. After every step it checks:

- no chunk's model is called twice (a saved raw result is post-processed, never re-requested);
- an episode's cursor never goes back;
- at most one episode per business operation;
- the old snapshot stays active until a new one is switched in, and a snapshot whose covered
  material changed is never activated.
"""

from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from uuid import UUID

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from ctxspec.reference.compaction import (
    ChunkPlan,
    ChunkProgress,
    commit_chunk,
    complete_episode,
    fail_episode,
    next_step,
    plan_chunks,
    start_episode,
)
from ctxspec.reference.contracts import CompactionEpisode, EpisodeStatus, MessageRole, PayloadRef
from ctxspec.reference.snapshots import (
    ActivePointer,
    SourceManifest,
    applicability,
    build_manifest,
    switch_active,
)
from ctxspec.reference.view import ModelView, ViewKind, ViewMessage

NOW = datetime(2026, 11, 29, tzinfo=UTC)
REF = PayloadRef(digest="sha256:" + "1" * 64, size_bytes=1)
CAPACITY = 400
STEPS = 40
"""Steps per example: enough for an episode to start, lose chunks, crash and finish. How
many examples run is the Hypothesis profile's choice (tests/conftest.py)."""


@dataclass
class Stored:
    """One episode's stored facts: the episode, its frozen plan and manifest, chunk progress."""

    episode: CompactionEpisode
    plan: ChunkPlan
    manifest: SourceManifest
    progress: dict[int, ChunkProgress] = field(default_factory=dict)


class EpisodeMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.next_id = 10_000
        self.material: list[ViewMessage] = []
        self.episodes: dict[UUID, Stored] = {}
        self.operations: list[UUID] = []
        self.pointer = ActivePointer(None, 1)
        self.snapshots: dict[UUID, SourceManifest] = {}
        self.model_calls: dict[tuple[UUID, int], int] = {}
        self.cursors: dict[UUID, int] = {}

    def fresh(self) -> UUID:
        self.next_id += 1
        return UUID(int=self.next_id)

    def view(self) -> ModelView:
        return ModelView(tuple(self.material))

    @rule(size=st.integers(1, 600))
    def append_material(self, size: int) -> None:
        self.material.append(ViewMessage(role=MessageRole.ASSISTANT, kind=ViewKind.ASSISTANT,
                                         text="x" * size, record_id=self.fresh()))

    @precondition(lambda self: bool(self.material))
    @rule(data=st.data())
    def edit_material(self, data: st.DataObject) -> None:
        """A committed modification of some material (it may be covered by a snapshot)."""
        index = data.draw(st.integers(0, len(self.material) - 1))
        self.material[index] = replace(self.material[index],
                                       text=self.material[index].text + " (edited)")

    @rule()
    def business_operation(self) -> None:
        """A business model request that crossed the trigger: at most one episode for it."""
        operation = self.fresh()
        self.operations.append(operation)
        existing = [s.episode for s in self.episodes.values()]
        material = list(self.material)
        started = start_episode(
            episode_id=self.fresh(), run_id=UUID(int=2), owner_node_task_id=UUID(int=3),
            triggering_model_operation_id=operation, existing=existing,
            material_tokens=sum(len(m.text) for m in material), source_view_hash="v",
            source_manifest_ref=REF, source_effective_revisions={}, release_id=UUID(int=4),
            input_tokens=1, created_at=NOW)
        if not isinstance(started, CompactionEpisode):
            assert not material
            return
        plan = plan_chunks(material, CAPACITY, len)
        manifest = build_manifest(material, {}, {}, CAPACITY, len(plan.chunks))
        self.episodes[started.episode_id] = Stored(started, plan, manifest)
        self.cursors[started.episode_id] = 0
        again = start_episode(
            episode_id=self.fresh(), run_id=UUID(int=2), owner_node_task_id=UUID(int=3),
            triggering_model_operation_id=operation,
            existing=[s.episode for s in self.episodes.values()], material_tokens=1,
            source_view_hash="v", source_manifest_ref=REF, source_effective_revisions={},
            release_id=UUID(int=4), input_tokens=1, created_at=NOW)
        assert not isinstance(again, CompactionEpisode)

    def running(self) -> list[Stored]:
        return [s for s in self.episodes.values() if s.episode.status is EpisodeStatus.RUNNING]

    @precondition(lambda self: bool(self.running()))
    @rule(data=st.data())
    def advance(self, data: st.DataObject) -> None:
        """One step of a running episode, decided from stored facts only (after a crash too)."""
        stored = data.draw(st.sampled_from(self.running()))
        episode = stored.episode
        step, ordinal = next_step(episode, len(stored.plan.chunks), stored.progress)
        if step == "call_model":
            key = (episode.episode_id, ordinal)
            self.model_calls[key] = self.model_calls.get(key, 0) + 1
            if data.draw(st.integers(0, 9)) == 0:  # the chunk finally fails
                stored.episode, _ = fail_episode(episode)
                return
            stored.progress[ordinal] = ChunkProgress(ordinal, self.fresh(), REF, False)
        elif step == "post_process":
            committed = commit_chunk(episode, ordinal, REF, self.fresh())
            assert isinstance(committed, CompactionEpisode)
            stored.episode = committed
            stored.progress[ordinal] = replace(stored.progress[ordinal], committed=True)
        elif step == "finish":
            snapshot_id = self.fresh()
            self.snapshots[snapshot_id] = stored.manifest
            before = self.pointer
            switched = switch_active(self.pointer, expected_active=self.pointer.snapshot_id,
                                     lease_epoch=self.pointer.lease_epoch,
                                     new_snapshot_id=snapshot_id, manifest=stored.manifest,
                                     current_view=self.view())
            if isinstance(switched, ActivePointer):
                assert applicability(stored.manifest, self.view()).applies
                self.pointer = switched
            else:
                assert self.pointer == before  # a stale snapshot is kept, never activated
            done = complete_episode(episode, len(stored.plan.chunks), snapshot_id)
            assert isinstance(done, CompactionEpisode)
            stored.episode = done

    @rule()
    def crash_and_restart(self) -> None:
        """A crash: in-flight work is lost; only stored facts remain (they are all the machine
        keeps), and the next advance continues from them."""

    # --- invariants -----------------------------------------------------------------------------

    @invariant()
    def no_chunk_is_summarised_twice(self) -> None:
        assert all(count == 1 for count in self.model_calls.values())

    @invariant()
    def cursors_never_go_back(self) -> None:
        for episode_id, stored in self.episodes.items():
            assert stored.episode.chunk_cursor >= self.cursors[episode_id]
            self.cursors[episode_id] = stored.episode.chunk_cursor

    @invariant()
    def one_episode_per_operation(self) -> None:
        operations = [s.episode.triggering_model_operation_id for s in self.episodes.values()]
        assert len(operations) == len(set(operations))

    @invariant()
    def the_active_snapshot_was_applicable_when_switched_in(self) -> None:
        if self.pointer.snapshot_id is not None:
            assert self.pointer.snapshot_id in self.snapshots
