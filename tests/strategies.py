"""Hypothesis strategies that build valid instances of every data contract.

Each strategy states the contract's validity rules on its own terms (a second description of
them), so a round trip through JSON exercises every field, and a rule the model forgets to
enforce or enforces wrongly shows up as a failure to build.
"""

from datetime import UTC, datetime, timedelta, timezone
from typing import Any
from uuid import UUID

from hypothesis import strategies as st

from ctxspec.reference import contracts as c

uuids = st.uuids()
seqs = st.integers(1, 2**40)
counts = st.integers(0, 2**40)
times = st.builds(
    lambda base, minutes, offset: (base + timedelta(minutes=minutes)).astimezone(
        timezone(timedelta(minutes=offset))),
    st.just(datetime(2026, 10, 15, tzinfo=UTC)), st.integers(-10**6, 10**6),
    st.integers(-12 * 60, 14 * 60))
words = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), min_size=1,
                max_size=20)

payload_refs = st.builds(
    c.PayloadRef,
    digest=st.binary(min_size=32, max_size=32).map(lambda b: "sha256:" + b.hex()),
    size_bytes=counts,
    media_type=st.sampled_from(["text/plain", "application/json", "text/markdown"]))


def user_inputs() -> st.SearchStrategy[c.UserInput]:
    return st.builds(c.UserInput, input_id=uuids, session_id=uuids, input_seq=seqs,
                     origin_run_id=st.none() | uuids, kind=st.sampled_from(c.InputKind),
                     body_ref=payload_refs, received_at=times)


@st.composite
def deliveries(draw: st.DrawFn) -> c.UserInputDelivery:
    state = draw(st.sampled_from(c.DeliveryState))
    delivered = state is c.DeliveryState.DELIVERED
    bound = state in (c.DeliveryState.CLAIMED, c.DeliveryState.DELIVERED)
    delivery_id = draw(uuids)
    return c.UserInputDelivery(
        delivery_id=delivery_id,
        input_id=draw(uuids),
        target_run_id=draw(uuids) if bound else draw(st.none() | uuids),
        operation_id=draw(uuids) if bound else draw(st.none() | uuids),
        previous_delivery_id=draw(st.none() | uuids.filter(lambda u: u != delivery_id)),
        state=state,
        context_seq=draw(st.none() | seqs),
        first_output_receipt_ref=draw(payload_refs) if delivered else None,
        delivered_at=draw(times) if delivered else None)


@st.composite
def context_records(draw: st.DrawFn) -> c.ContextRecord:
    role = draw(st.sampled_from(c.MessageRole))
    kind = draw(st.sampled_from(["user_ref", "assistant", "tool_result", "feedback", "outcome"]))
    return c.ContextRecord(
        record_id=draw(uuids), context_id=draw(uuids), context_seq=draw(seqs), run_id=draw(uuids),
        role=role, message_kind=kind, payload_ref=draw(payload_refs),
        operation_id=draw(st.none() | uuids),
        call_id=draw(uuids) if role is c.MessageRole.TOOL else draw(st.none() | uuids),
        origin_input_id=draw(uuids) if kind == "user_ref" else draw(st.none() | uuids))


def role_contexts() -> st.SearchStrategy[c.RoleContext]:
    return st.builds(c.RoleContext, context_id=uuids, invocation_id=uuids,
                     owner_node_task_id=uuids, role_key=words, record_head=counts,
                     effective_revision=seqs, active_snapshot_id=st.none() | uuids,
                     last_model_operation_id=st.none() | uuids)


patch_operations = st.builds(
    c.ContextPatchOperation, target_record_id=uuids,
    field_key=st.builds(lambda u, f: f"tool_call:{u}.arguments.{f}", uuids,
                        st.sampled_from(["path", "query", "mode"])),
    operation=st.sampled_from(c.PatchOperationKind), value_ref=payload_refs)

context_patches = st.builds(c.ContextPatch, context_id=uuids, base_revision=seqs,
                            operations=st.lists(patch_operations, min_size=1, max_size=4)
                            .map(tuple))


@st.composite
def mutations(draw: st.DrawFn) -> c.ContextMutation:
    base = draw(seqs)
    return c.ContextMutation(
        mutation_id=draw(uuids), context_id=draw(uuids), base_revision=base,
        committed_revision=base + draw(st.integers(1, 100)),
        source_kind=draw(st.sampled_from(c.MutationSourceKind)), source_ref=draw(words),
        cause_operation_id=draw(st.none() | uuids), patch_ref=draw(payload_refs),
        created_at=draw(times))


@st.composite
def revisions(draw: st.DrawFn) -> c.EffectiveContextRevision:
    revision = draw(seqs)
    parent = None if revision == 1 else draw(st.integers(1, revision - 1))
    return c.EffectiveContextRevision(
        context_id=draw(uuids), revision=revision, parent_revision=parent,
        record_watermark=draw(counts),
        mutation_ids=tuple(draw(st.lists(uuids, max_size=4, unique=True))),
        effective_manifest_ref=draw(payload_refs), commit_ref=draw(words),
        created_at=draw(times))


@st.composite
def source_ranges(draw: st.DrawFn, context_id: UUID | None = None) -> c.ContextSourceRange:
    start = draw(seqs)
    return c.ContextSourceRange(context_id=context_id or draw(uuids), from_seq=start,
                                through_seq=start + draw(st.integers(0, 1000)))


@st.composite
def snapshots(draw: st.DrawFn) -> c.ContextSnapshot:
    contexts = draw(st.lists(uuids, min_size=1, max_size=3, unique=True))
    ranges = []
    for context_id in contexts:
        # Disjoint ranges per context: consecutive segments separated by gaps.
        cursor = draw(st.integers(1, 100))
        for _ in range(draw(st.integers(1, 3))):
            length = draw(st.integers(0, 50))
            ranges.append(c.ContextSourceRange(context_id=context_id, from_seq=cursor,
                                               through_seq=cursor + length))
            cursor += length + 1 + draw(st.integers(0, 10))
    return c.ContextSnapshot(
        snapshot_id=draw(uuids), context_id=contexts[0], generation=draw(seqs),
        source_ranges=tuple(draw(st.permutations(ranges))),
        source_effective_revisions={cid: draw(seqs) for cid in contexts},
        protected_input_ids=tuple(draw(st.lists(uuids, max_size=3))),
        summary_ref=draw(payload_refs), tail_after_seq=draw(counts),
        token_estimate=draw(counts))


@st.composite
def episodes(draw: st.DrawFn) -> c.CompactionEpisode:
    status = draw(st.sampled_from(c.EpisodeStatus))
    succeeded = status is c.EpisodeStatus.SUCCEEDED
    return c.CompactionEpisode(
        episode_id=draw(uuids), run_id=draw(uuids), owner_node_task_id=draw(uuids),
        triggering_model_operation_id=draw(uuids), current_operation_id=draw(st.none() | uuids),
        result_snapshot_id=draw(uuids) if succeeded else None,
        source_view_hash=draw(st.binary(min_size=32, max_size=32)).hex(),
        source_manifest_ref=draw(payload_refs),
        source_effective_revisions=draw(st.dictionaries(uuids, seqs, max_size=3)),
        release_id=draw(uuids), prompt_version=draw(words), chunk_cursor=draw(counts),
        accumulated_summary_ref=draw(payload_refs) if succeeded
        else draw(st.none() | payload_refs),
        input_tokens_estimated=draw(counts), created_at=draw(times), status=status,
        revision=draw(seqs))


@st.composite
def runs(draw: st.DrawFn) -> c.Run:
    status = draw(st.sampled_from(c.RunStatus))
    ended = status in c.TERMINAL_RUN_STATUSES
    failing = status not in (c.RunStatus.RUNNING, c.RunStatus.SUCCEEDED)
    return c.Run(
        run_id=draw(uuids), session_id=draw(uuids), run_no=draw(seqs),
        question_input_id=draw(uuids), status=status,
        error_code=draw(st.none() | st.sampled_from(["COMPACTION_FAILED"])) if failing else None,
        owner_epoch=draw(seqs), started_at=draw(times),
        ended_at=draw(times) if ended else None)


@st.composite
def operations(draw: st.DrawFn) -> c.Operation:
    raw = draw(st.none() | payload_refs)
    return c.Operation(
        operation_id=draw(uuids), run_id=draw(uuids), node_task_id=draw(uuids),
        purpose=draw(st.sampled_from(c.OperationPurpose)), purpose_key=draw(words),
        state=draw(st.sampled_from(c.OperationState)), raw_result_ref=raw,
        effective_result_ref=None if raw is None else draw(st.none() | payload_refs))


def attempts() -> st.SearchStrategy[c.Attempt]:
    return st.builds(c.Attempt, attempt_id=uuids, operation_id=uuids, attempt_no=seqs,
                     state=st.sampled_from(c.OperationState), owner_epoch=seqs,
                     raw_result_ref=st.none() | payload_refs,
                     partial_material_ref=st.none() | payload_refs,
                     first_output_receipt_ref=st.none() | payload_refs)


diagnostics = st.builds(c.HookDiagnostic, code=words, field_key=st.none() | words, detail=words)


def hook_invocations() -> st.SearchStrategy[c.HookInvocation]:
    return st.builds(c.HookInvocation, hook_invocation_id=uuids, operation_id=uuids,
                     hook_point=words, chain_position=counts,
                     decision=st.sampled_from(c.HookDecision),
                     payload_patch_ref=st.none() | payload_refs,
                     context_patch=st.none() | context_patches, patch_valid=st.booleans(),
                     change_set_hash=st.none() | words, registry_version=words,
                     diagnostics=st.lists(diagnostics, max_size=3).map(tuple))


@st.composite
def batches(draw: st.DrawFn) -> c.Batch:
    calls = draw(st.lists(uuids, min_size=1, max_size=5, unique=True))
    members = tuple(
        c.BatchMember(action_ordinal=i, call_id=call, operation_id=draw(uuids),
                      state=draw(st.sampled_from(c.BatchMemberState)))
        for i, call in enumerate(calls, start=1))
    settled = all(m.state is c.BatchMemberState.SETTLED for m in members)
    return c.Batch(batch_id=draw(uuids), run_id=draw(uuids), context_id=draw(uuids),
                   model_operation_id=draw(uuids), members=members,
                   feedback_record_id=draw(st.none() | uuids) if settled else None)


json_members = st.dictionaries(words, st.dictionaries(words, words | counts | st.booleans()),
                               max_size=3)


attempts_made = st.builds(c.AttemptsMade, failed=counts, partial=st.booleans(),
                          refused=st.none() | counts,
                          fragments=st.lists(payload_refs, max_size=2))
chunk_steps = st.builds(c.ChunkStep, episode_id=uuids, cursor=counts,
                        purpose_key=st.none() | words, operation_id=st.none() | uuids,
                        pre=st.none() | st.sampled_from(["allowed", "denied"]),
                        attempts=attempts_made, effective=st.none() | payload_refs,
                        denied=st.booleans())


@st.composite
def node_checkpoints(draw: st.DrawFn) -> c.NodeCheckpoint:
    """A request in flight names its Operation, an answer being decided its decision, and only
    an open batch holds members."""
    stage = draw(st.sampled_from(c.NodeStage))
    episode = stage in {c.NodeStage.COMPACTING, c.NodeStage.SUMMARISED, c.NodeStage.COMPACTED}
    in_flight = episode or stage in {c.NodeStage.PREPARED, c.NodeStage.DENIED,
                                     c.NodeStage.FROZEN, c.NodeStage.ANSWERED,
                                     c.NodeStage.RAW_SAVED}
    sent = stage in {c.NodeStage.FROZEN, c.NodeStage.ANSWERED}
    deciding = stage in {c.NodeStage.POST, c.NodeStage.BATCH}
    batch = stage is c.NodeStage.BATCH
    return c.NodeCheckpoint(
        stage=stage, loops=draw(counts), tool_calls_made=draw(counts), tick=draw(counts),
        operation_id=draw(uuids if in_flight else st.none() | uuids),
        cutoff=draw(st.none() | counts),
        manifest=draw(st.none() | st.dictionaries(words, words | counts, max_size=3)),
        budget_decision=draw(st.none() | words) if sent else None,
        attempts=draw(attempts_made) if sent else c.AttemptsMade(),
        first_output=draw(st.booleans()) if sent else False,
        compaction=draw(st.none() | chunk_steps) if episode else None,
        decision=draw(uuids if deciding else st.none()),
        settled=draw(json_members) if batch else {}, hooked=draw(json_members) if batch else {},
        delegated=draw(st.dictionaries(words, words, max_size=3)) if batch else {},
        raw=draw(json_members) if batch else {},
        started=draw(st.none() | words) if batch else None)


STRATEGIES: dict[type[c.Contract], st.SearchStrategy[Any]] = {
    c.PayloadRef: payload_refs,
    c.UserInput: user_inputs(),
    c.UserInputDelivery: deliveries(),
    c.ContextRecord: context_records(),
    c.RoleContext: role_contexts(),
    c.ContextPatchOperation: patch_operations,
    c.ContextPatch: context_patches,
    c.ContextMutation: mutations(),
    c.EffectiveContextRevision: revisions(),
    c.ContextSourceRange: source_ranges(),
    c.ContextSnapshot: snapshots(),
    c.CompactionEpisode: episodes(),
    c.Run: runs(),
    c.Operation: operations(),
    c.Attempt: attempts(),
    c.HookDiagnostic: diagnostics,
    c.HookInvocation: hook_invocations(),
    c.BatchMember: st.builds(c.BatchMember, action_ordinal=seqs, call_id=uuids,
                             operation_id=uuids, state=st.sampled_from(c.BatchMemberState)),
    c.Batch: batches(),
    c.NodeCheckpoint: node_checkpoints(),
}
