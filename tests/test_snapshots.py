"""§9 coverage, applying a snapshot, invalidation, the pointer CAS and the frozen binding."""

from dataclasses import replace
from uuid import UUID

import pytest

from ctxspec.reference.compaction import SUMMARY_ENVELOPE_TEXT, material_key
from ctxspec.reference.contracts import ContextSourceRange, MessageRole
from ctxspec.reference.protection import ProtectedInput, check_protected_inputs
from ctxspec.reference.snapshots import (
    ActivePointer,
    SourceManifest,
    SwitchRefused,
    applicability,
    apply_snapshot,
    bind_frozen_request,
    build_manifest,
    make_snapshot,
    source_ranges,
    switch_active,
    usable_for,
    view_with_snapshot,
)
from ctxspec.reference.view import ModelView, ViewKind, ViewMessage
from tests.builders import ref, uuid

CURRENT, OLDER_RUN_CONTEXT = uuid(1), uuid(5)


def rec(n: int, text: str, context: UUID = CURRENT, role: MessageRole = MessageRole.ASSISTANT,
        input_id: UUID | None = None) -> ViewMessage:
    kind = ViewKind.USER_REF if role is MessageRole.USER else ViewKind.ASSISTANT
    return ViewMessage(role=role, kind=kind, text=text, record_id=uuid(100 + n),
                       input_id=input_id, source_run_id=uuid(2))


# The current context: 1 q (protected), 2 a, 3 supplement s (protected), 4 b, 5 c; and a
# record of a recent Run's context at seq 40.
Q = rec(1, "question", role=MessageRole.USER, input_id=uuid(20))
A = rec(2, "thought a")
S = rec(3, "supplement", role=MessageRole.USER, input_id=uuid(21))
B = rec(4, "thought b")
C = rec(5, "thought c")
OLD = rec(40, "older run work", context=OLDER_RUN_CONTEXT)
SEQ = {m.record_id: (CURRENT, n) for n, m in enumerate((Q, A, S, B, C), start=1)
       if m.record_id is not None}
SEQ[uuid(140)] = (OLDER_RUN_CONTEXT, 40)
REVISIONS = {CURRENT: 7, OLDER_RUN_CONTEXT: 3}
VIEW = ModelView((OLD, Q, A, S, B, C))
PROTECTED = [ProtectedInput(uuid(20), 1, "question"), ProtectedInput(uuid(21), 3, "supplement")]


def manifest_of(material: list[ViewMessage]) -> SourceManifest:
    return build_manifest(material, SEQ, REVISIONS, chunk_capacity=5000, chunk_count=1)


@pytest.mark.covers("CTX-9.2", "CTX-9.7", "CTX-9.8", "CTX-9.9", "CTX-9.10", "CTX-9.1")
def test_ranges_are_per_context_and_a_protected_input_between_them_splits_a_range() -> None:
    manifest = manifest_of([OLD, A, B, C])  # Q and S are protected: never material
    ranges = source_ranges(manifest, {CURRENT: [1, 2, 3, 4, 5], OLDER_RUN_CONTEXT: [40]})
    assert set(ranges) == {
        ContextSourceRange(context_id=CURRENT, from_seq=2, through_seq=2),
        ContextSourceRange(context_id=CURRENT, from_seq=4, through_seq=5),
        ContextSourceRange(context_id=OLDER_RUN_CONTEXT, from_seq=40, through_seq=40)}
    snapshot = make_snapshot(snapshot_id=uuid(60), context_id=CURRENT, generation=1,
                             manifest=manifest,
                             seqs_by_context={CURRENT: [1, 2, 3, 4, 5],
                                              OLDER_RUN_CONTEXT: [40]},
                             source_revisions=REVISIONS, protected_input_ids=[uuid(20), uuid(21)],
                             summary_ref=ref("summary"), summary_tokens=120)
    # The tail is the current context's own watermark (5), never the other context's 40.
    assert snapshot.tail_after_seq == 5
    assert snapshot.source_effective_revisions == {CURRENT: 7, OLDER_RUN_CONTEXT: 3}
    assert [p.source_revision for p in manifest.pieces] == [3, 7, 7, 7]


@pytest.mark.covers("CTX-9.19", "CTX-9.20", "CTX-9.25", "CTX-5.7", "CTX-8.13")
def test_the_summary_replaces_covered_material_once_and_everything_else_stays() -> None:
    manifest = manifest_of([OLD, A, B])
    later = rec(6, "new step after the summary")
    view = ModelView((*VIEW.messages, later))
    applied = apply_snapshot(view, manifest, "SUMMARY", uuid(60))
    assert [(m.kind.value, m.text) for m in applied.messages] == [
        ("summary", SUMMARY_ENVELOPE_TEXT + "SUMMARY"), ("user_ref", "question"),
        ("user_ref", "supplement"), ("assistant", "thought c"),
        ("assistant", "new step after the summary")]
    assert check_protected_inputs(applied, PROTECTED) == ()


@pytest.mark.covers("CTX-9.22", "CTX-9.23", "CTX-9.24", "CTX-9.26", "CTX-9.27", "CTX-9.36")
def test_a_changed_covered_record_sets_the_whole_snapshot_aside() -> None:
    manifest = manifest_of([OLD, A, B])
    snapshot = (uuid(60), manifest, "SUMMARY")
    # An appended record or a correction of uncovered material: the snapshot still applies.
    changed_elsewhere = ModelView((OLD, Q, A, S, B, replace(C, text="thought c (corrected)")))
    view, used, verdict = view_with_snapshot(changed_elsewhere, snapshot)
    assert used == uuid(60) and verdict is not None and verdict.applies
    # A hook changed the effective text of covered record B: the old summary no longer stands
    # for anything; the view carries B as it is now, and A and OLD too.
    changed_covered = ModelView((OLD, Q, A, S, replace(B, text="thought b (edited)"), C))
    view, used, verdict = view_with_snapshot(changed_covered, snapshot)
    assert used is None and verdict is not None
    assert verdict.changed == (material_key(B),)
    assert view == changed_covered


@pytest.mark.covers("CTX-9.17", "CTX-9.18", "CTX-9.30", "CTX-9.31", "CTX-9.32", "CTX-9.33",
                    "CTX-10.24")
def test_the_pointer_switch_is_a_cas() -> None:
    manifest = manifest_of([OLD, A, B])
    active = uuid(59)
    pointer = ActivePointer(snapshot_id=active, lease_epoch=3)

    def switch(expected_active: UUID | None = active, lease_epoch: int = 3,
               current_view: ModelView = VIEW) -> ActivePointer | SwitchRefused:
        return switch_active(pointer, expected_active=expected_active, lease_epoch=lease_epoch,
                             new_snapshot_id=uuid(60), manifest=manifest,
                             current_view=current_view)

    assert switch() == ActivePointer(uuid(60), 3)
    assert switch(lease_epoch=2) == SwitchRefused("LEASE_LOST",
                                                  "lease epoch 2 is not the owner's 3")
    refused = switch(expected_active=None)
    assert isinstance(refused, SwitchRefused) and refused.reason == "ACTIVE_SNAPSHOT_CHANGED"
    edited = ModelView((OLD, Q, replace(A, text="a, edited meanwhile"), S, B, C))
    refused = switch(current_view=edited)
    assert isinstance(refused, SwitchRefused) and refused.reason == "COVERED_MATERIAL_CHANGED"
    # Only appends or uncovered changes meanwhile: the original coverage commits.
    grown = ModelView((*VIEW.messages, rec(6, "appended meanwhile")))
    assert switch(current_view=grown) == ActivePointer(uuid(60), 3)


@pytest.mark.covers("CTX-9.21", "CTX-9.11")
def test_a_later_episode_folds_an_applicable_summary_and_keeps_the_chain() -> None:
    first = manifest_of([OLD, A])
    summary = ViewMessage(role=MessageRole.SYSTEM, kind=ViewKind.SUMMARY, text="S-1",
                          record_id=uuid(60))
    second = build_manifest([summary, B], SEQ, REVISIONS, chunk_capacity=5000, chunk_count=1,
                            previous=[(uuid(60), first)])
    assert [p.key for p in second.pieces] == [material_key(OLD), material_key(A),
                                              material_key(B)]
    assert second.previous_snapshots == (uuid(60),)
    assert applicability(second, VIEW).applies


@pytest.mark.covers("CTX-9.34", "CTX-9.35")
def test_a_frozen_request_binds_view_revisions_snapshot_and_inputs() -> None:
    binding = bind_frozen_request(VIEW, REVISIONS, uuid(60), [uuid(20), uuid(21)])
    assert binding == bind_frozen_request(ModelView(VIEW.messages), dict(REVISIONS), uuid(60),
                                          (uuid(20), uuid(21)))
    assert binding.view_hash != bind_frozen_request(
        ModelView((*VIEW.messages, rec(6, "x"))), REVISIONS, uuid(60), []).view_hash
    assert (binding.snapshot_id, binding.protected_input_ids) == (uuid(60), (uuid(20), uuid(21)))


@pytest.mark.covers("CTX-8.72", "CTX-9.44")
def test_a_supplement_after_the_cutoff_is_outside_the_coverage_and_joins_as_it_is() -> None:
    # §12 "压缩中收到补充": the episode froze its material before the supplement arrived; the
    # snapshot never covers it and the next request carries it verbatim.
    manifest = manifest_of([OLD, A, B])
    late = rec(7, "a supplement received during compaction", role=MessageRole.USER,
               input_id=uuid(22))
    assert material_key(late) not in manifest.keys
    applied = apply_snapshot(ModelView((*VIEW.messages, late)), manifest, "S", uuid(60))
    assert applied.messages[-1] == late


@pytest.mark.covers("CTX-4.21", "CTX-4.22")
def test_a_new_runs_view_never_uses_another_runs_summary() -> None:
    manifest = manifest_of([OLD, A, B])
    snapshot = make_snapshot(snapshot_id=uuid(60), context_id=CURRENT, generation=1,
                             manifest=manifest, seqs_by_context={}, source_revisions=REVISIONS,
                             protected_input_ids=[], summary_ref=ref("s"), summary_tokens=1)
    assert usable_for(snapshot, CURRENT)
    assert not usable_for(snapshot, uuid(9))  # the next Run's root context


@pytest.mark.covers("CTX-9.18", "CTX-8.76")
def test_a_crash_before_the_snapshot_commit_leaves_the_old_snapshot_in_use() -> None:
    # §12 "摘要提交前宕机": the chunks were summarised, the commit of the new snapshot and its
    # pointer did not happen; the old snapshot is still the active one and still applies.
    old_manifest = manifest_of([OLD])
    pointer = ActivePointer(uuid(59), 1)
    view, used, _ = view_with_snapshot(VIEW, (pointer.snapshot_id or uuid(0), old_manifest,
                                              "OLD SUMMARY"))
    assert used == uuid(59)
    assert view.messages[0].text.endswith("OLD SUMMARY")
    assert [m.text for m in view.messages[1:]] == [m.text for m in (Q, A, S, B, C)]
