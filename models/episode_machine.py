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
  material changed is never activated;
- the switch is a CAS: an episode whose expectation of the active snapshot is stale (another
  episode switched in meanwhile) or whose lease was lost to a takeover never moves the pointer,
  whatever its material; the refusal names the first check that failed (lease, then expected
  snapshot, then covered material).

``EpisodeMachine.reached`` counts what the runs reached (``ROWS``: every CI run reaches each).
"""

from collections import Counter
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import ClassVar
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
    SwitchRefused,
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
    expected: UUID | None
    """The active snapshot its owner read when it started (the switch's expectation)."""
    lease: int
    """The lease epoch its owner holds; a takeover that re-acquires the episode renews it."""
    progress: dict[int, ChunkProgress] = field(default_factory=dict)
    crashed: bool = False
    """A crash happened since its last step: the next one resumes it from stored facts."""


ROWS = ("episode started", "chunk summarised", "chunk committed", "episode resumed after a crash",
        "raw result post-processed after a crash", "chunk failed the episode",
        "material edited", "snapshot switched in", "switch refused: LEASE_LOST",
        "switch refused: ACTIVE_SNAPSHOT_CHANGED", "switch refused: COVERED_MATERIAL_CHANGED",
        "lease lost to a takeover", "episode re-acquired")


class EpisodeMachine(RuleBasedStateMachine):
    reached: ClassVar[Counter[str]] = Counter()

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
        self.reached["material edited"] += 1

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
        self.episodes[started.episode_id] = Stored(started, plan, manifest,
                                                   self.pointer.snapshot_id,
                                                   self.pointer.lease_epoch)
        self.reached["episode started"] += 1
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
    @rule(data=st.data(), steps=st.integers(1, 8), stop_at_raw=st.booleans())
    def advance(self, data: st.DataObject, steps: int, stop_at_raw: bool) -> None:
        """A few steps of a running episode (so episodes finish within an example), each
        decided from stored facts only (after a crash too); ``stop_at_raw`` ends the advance
        once a chunk's raw result is saved, so a crash can fall before its post-processing."""
        stored = data.draw(st.sampled_from(self.running()))
        for _ in range(steps):
            if stored.episode.status is not EpisodeStatus.RUNNING:
                return
            self.step(stored, data)
            self.invariants_now()
            if stop_at_raw and any(not p.committed for p in stored.progress.values()):
                return

    def step(self, stored: Stored, data: st.DataObject) -> None:
        episode = stored.episode
        step, ordinal = next_step(episode, len(stored.plan.chunks), stored.progress)
        if stored.crashed:
            self.reached["episode resumed after a crash"] += 1
            if step == "post_process":
                self.reached["raw result post-processed after a crash"] += 1
            stored.crashed = False
        if step == "call_model":
            key = (episode.episode_id, ordinal)
            self.model_calls[key] = self.model_calls.get(key, 0) + 1
            if data.draw(st.integers(0, 9)) == 0:  # the chunk finally fails
                stored.episode, _ = fail_episode(episode)
                self.reached["chunk failed the episode"] += 1
                return
            stored.progress[ordinal] = ChunkProgress(ordinal, self.fresh(), REF, False)
            self.reached["chunk summarised"] += 1
        elif step == "post_process":
            committed = commit_chunk(episode, ordinal, REF, self.fresh())
            assert isinstance(committed, CompactionEpisode)
            stored.episode = committed
            stored.progress[ordinal] = replace(stored.progress[ordinal], committed=True)
            self.reached["chunk committed"] += 1
        elif step == "finish":
            self.finish(stored, fresh_expectation=data.draw(st.booleans()))

    def finish(self, stored: Stored, fresh_expectation: bool) -> None:
        """The snapshot commit with its CAS: the expectation is the active snapshot the owner
        read when the episode started, or — re-read just now — the current one; the lease is
        the one the owner holds. Derived here independently: which check must refuse."""
        snapshot_id = self.fresh()
        self.snapshots[snapshot_id] = stored.manifest
        before = self.pointer
        expected = before.snapshot_id if fresh_expectation else stored.expected
        switched = switch_active(before, expected_active=expected, lease_epoch=stored.lease,
                                 new_snapshot_id=snapshot_id, manifest=stored.manifest,
                                 current_view=self.view())
        if stored.lease != before.lease_epoch:
            wanted = "LEASE_LOST"
        elif expected != before.snapshot_id:
            wanted = "ACTIVE_SNAPSHOT_CHANGED"
        elif not applicability(stored.manifest, self.view()).applies:
            wanted = "COVERED_MATERIAL_CHANGED"
        else:
            wanted = "switched"
        if isinstance(switched, ActivePointer):
            assert wanted == "switched", f"switched in although {wanted}"
            assert switched == ActivePointer(snapshot_id, before.lease_epoch)
            self.pointer = switched
            self.reached["snapshot switched in"] += 1
        else:
            assert isinstance(switched, SwitchRefused) and switched.reason == wanted, \
                (switched, wanted)
            assert self.pointer == before  # a refused snapshot is kept, never activated
            self.reached[f"switch refused: {wanted}"] += 1
        done = complete_episode(stored.episode, len(stored.plan.chunks), snapshot_id)
        assert isinstance(done, CompactionEpisode)
        stored.episode = done

    @precondition(lambda self: bool(self.running()))
    @rule()
    def crash_and_restart(self) -> None:
        """A crash: in-flight work is lost; only stored facts remain (they are all the machine
        keeps), and the next advance continues from them."""
        for stored in self.running():
            stored.crashed = True

    @precondition(lambda self: bool(self.running()))
    @rule()
    def takeover(self) -> None:
        """A crash after which another owner takes the Run over: the lease epoch moves on, so
        every episode still holding the old lease has lost it until it is re-acquired (§10)."""
        self.crash_and_restart()
        self.pointer = ActivePointer(self.pointer.snapshot_id, self.pointer.lease_epoch + 1)
        self.reached["lease lost to a takeover"] += 1

    @precondition(lambda self: bool(self.material) and (
        self.pointer.snapshot_id is not None or self.pointer.lease_epoch > 1))
    @rule(data=st.data())
    def switch_on_a_stale_read(self, data: st.DataObject) -> None:
        """An owner that read the active snapshot before another episode switched its own in
        (an older snapshot, or none), or that holds the lease of before a takeover, tries its
        switch with material that still applies: refused ACTIVE_SNAPSHOT_CHANGED or
        LEASE_LOST (the lease is checked first), the pointer unchanged (§9, §10)."""
        before = self.pointer
        stale_lease = before.lease_epoch > 1 and (before.snapshot_id is None
                                                  or data.draw(st.booleans()))
        older = [None, *(i for i in self.snapshots if i != before.snapshot_id)]
        expected = before.snapshot_id if stale_lease else data.draw(st.sampled_from(older))
        lease = before.lease_epoch - 1 if stale_lease else before.lease_epoch
        manifest = build_manifest(self.material, {}, {}, CAPACITY, 1)
        switched = switch_active(before, expected_active=expected, lease_epoch=lease,
                                 new_snapshot_id=self.fresh(), manifest=manifest,
                                 current_view=self.view())
        wanted = "LEASE_LOST" if stale_lease else "ACTIVE_SNAPSHOT_CHANGED"
        assert isinstance(switched, SwitchRefused), switched
        assert switched.reason == wanted and self.pointer == before, (switched, wanted)
        self.reached[f"switch refused: {wanted}"] += 1

    @precondition(lambda self: any(s.lease != self.pointer.lease_epoch for s in self.running()))
    @rule(data=st.data())
    def reacquire(self, data: st.DataObject) -> None:
        """The new owner resumes an episode under its own lease (its expectation stays what
        the episode read when it started)."""
        stale = [s for s in self.running() if s.lease != self.pointer.lease_epoch]
        data.draw(st.sampled_from(stale)).lease = self.pointer.lease_epoch
        self.reached["episode re-acquired"] += 1

    def invariants_now(self) -> None:
        """The invariants between the steps of one advance (Hypothesis checks after rules)."""
        self.no_chunk_is_summarised_twice()
        self.cursors_never_go_back()

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
