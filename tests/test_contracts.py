"""Data contracts (§2, §3, §9): validation rules, JSON round trips, the published schemas."""

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

import jsonschema
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from ctxspec import schemas
from ctxspec.reference import contracts as c
from tests.strategies import STRATEGIES

SCHEMA_DIR = Path(__file__).resolve().parent.parent / "spec" / "schemas"
NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
REF = c.PayloadRef(digest="sha256:" + "ab" * 32, size_bytes=12)


def error_of(model: type[BaseModel], **fields: Any) -> str:
    with pytest.raises(ValidationError) as caught:
        model(**fields)
    return str(caught.value)


def test_every_contract_has_a_strategy() -> None:
    assert set(STRATEGIES) == set(c.CONTRACTS)


@pytest.mark.covers("CTX-2.6")
@pytest.mark.parametrize("contract", c.CONTRACTS, ids=lambda m: m.__name__)
def test_json_round_trip(contract: type[c.Contract]) -> None:
    @given(STRATEGIES[contract])
    def round_trip(instance: c.Contract) -> None:
        assert type(instance).model_validate_json(instance.model_dump_json()) == instance
        assert type(instance).model_validate(instance.model_dump(mode="json")) == instance

    round_trip()


@pytest.mark.covers("CTX-9.15")
@pytest.mark.parametrize("contract", c.CONTRACTS, ids=lambda m: m.__name__)
def test_dumps_satisfy_the_published_schema(contract: type[c.Contract]) -> None:
    schema = json.loads((SCHEMA_DIR / f"{contract.__name__}.json").read_text("utf-8"))
    validator = jsonschema.Draft202012Validator(
        schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)

    @given(STRATEGIES[contract])
    def conforms(instance: c.Contract) -> None:
        document = instance.model_dump(mode="json")
        validator.validate(document)
        # §9: the schema is a projection of the core fields; extra fields are not errors.
        validator.validate({**document, "x_vendor_extension": {"anything": [1, 2]}})

    conforms()


def test_published_schemas_match_the_models() -> None:
    assert schemas.drifted(SCHEMA_DIR) == [], "run `ctxspec schemas` and commit the result"


@pytest.mark.covers("CTX-9.15")
def test_published_schemas_never_forbid_additional_properties() -> None:
    # The data contracts are open (§9); Scenario.json is our own input format and strict.
    for contract in c.CONTRACTS:
        text = (SCHEMA_DIR / f"{contract.__name__}.json").read_text("utf-8")
        assert '"additionalProperties": false' not in text, contract.__name__


def test_drift_is_detected(tmp_path: Path) -> None:
    schemas.write(tmp_path)
    assert schemas.drifted(tmp_path) == []
    (tmp_path / "UserInput.json").write_text("{}", "utf-8")
    (tmp_path / "Obsolete.json").write_text("{}", "utf-8")
    (tmp_path / "Run.json").unlink()
    assert schemas.drifted(tmp_path) == ["Obsolete.json", "Run.json", "UserInput.json"]


def test_reference_models_are_frozen_and_closed() -> None:
    user_input = c.UserInput(input_id=uuid4(), session_id=uuid4(), input_seq=1,
                             origin_run_id=None, kind=c.InputKind.QUESTION, body_ref=REF,
                             received_at=NOW)
    with pytest.raises(ValidationError, match="frozen"):
        user_input.input_seq = 2  # type: ignore[misc]
    assert "Extra inputs are not permitted" in error_of(
        c.UserInput, **user_input.model_dump(), surprise=1)


# --- validation rules the design implies, with errors naming the field and the rule ----------


@pytest.mark.covers("CTX-2.7", "CTX-2.11")
def test_sequence_numbers_start_at_one() -> None:
    message = error_of(c.UserInput, input_id=uuid4(), session_id=uuid4(), input_seq=0,
                       origin_run_id=None, kind="question", body_ref=REF, received_at=NOW)
    assert "input_seq" in message and "greater than or equal to 1" in message


@pytest.mark.covers("CTX-2.8", "CTX-2.9", "CTX-2.12")
def test_states_come_from_closed_sets() -> None:
    message = error_of(c.UserInput, input_id=uuid4(), session_id=uuid4(), input_seq=1,
                       origin_run_id=None, kind="follow_up", body_ref=REF, received_at=NOW)
    assert "kind" in message and "'question' or 'supplement'" in message
    assert {s.value for s in c.DeliveryState} == {"pending", "claimed", "delivered", "carried"}
    assert {r.value for r in c.MessageRole} == {"user", "assistant", "tool", "system"}
    assert "state" in error_of(c.UserInputDelivery, **delivery(state="consumed"))


def test_times_must_be_timezone_aware() -> None:
    message = error_of(c.UserInput, input_id=uuid4(), session_id=uuid4(), input_seq=1,
                       origin_run_id=None, kind="question", body_ref=REF,
                       received_at=datetime(2026, 1, 1))
    assert "received_at" in message and "timezone" in message


@pytest.mark.covers("CTX-2.24")
def test_payload_ref_is_a_content_address() -> None:
    assert "digest" in error_of(c.PayloadRef, digest="blob-1", size_bytes=1)


@pytest.mark.covers("CTX-9.7")
def test_source_range_from_not_after_through() -> None:
    message = error_of(c.ContextSourceRange, context_id=uuid4(), from_seq=5, through_seq=4)
    assert "from_seq (5) must be <= through_seq (4)" in message
    assert c.ContextSourceRange(context_id=uuid4(), from_seq=4, through_seq=4)


def delivery(**changes: Any) -> dict[str, Any]:
    fields: dict[str, Any] = dict(
        delivery_id=uuid4(), input_id=uuid4(), target_run_id=uuid4(), operation_id=uuid4(),
        previous_delivery_id=None, state="delivered", context_seq=3,
        first_output_receipt_ref=REF, delivered_at=NOW)
    fields.update(changes)
    return fields


@pytest.mark.covers("CTX-2.10", "CTX-2.19", "CTX-2.20")
def test_delivery_fields_follow_the_state() -> None:
    assert c.UserInputDelivery(**delivery())
    assert "first_output_receipt_ref is set exactly when" in error_of(
        c.UserInputDelivery, **delivery(first_output_receipt_ref=None))
    assert "delivered_at is set exactly when" in error_of(
        c.UserInputDelivery, **delivery(state="claimed", first_output_receipt_ref=None))
    assert "names its target_run_id" in error_of(
        c.UserInputDelivery, **delivery(state="claimed", first_output_receipt_ref=None,
                                        delivered_at=None, operation_id=None))
    # §2: a pending delivery may leave target Run, Operation, context_seq and time empty.
    assert c.UserInputDelivery(**delivery(state="pending", target_run_id=None, operation_id=None,
                                          context_seq=None, first_output_receipt_ref=None,
                                          delivered_at=None))
    same = uuid4()
    assert "not itself" in error_of(c.UserInputDelivery,
                                    **delivery(delivery_id=same, previous_delivery_id=same))


@pytest.mark.covers("CTX-2.13")
def test_record_message_kinds_of_the_design_are_accepted() -> None:
    # An open string (§2 types it str, its comment lists examples): the design's kinds and
    # others a runtime stores (an annotation) alike.
    for kind in ("user_ref", "assistant", "tool_result", "feedback", "outcome", "annotation"):
        record = c.ContextRecord(record_id=uuid4(), context_id=uuid4(), context_seq=1,
                                 run_id=uuid4(), role=c.MessageRole.USER, message_kind=kind,
                                 payload_ref=REF, operation_id=None, call_id=None,
                                 origin_input_id=uuid4())
        assert record.message_kind == kind
    assert "message_kind" in error_of(
        c.ContextRecord, record_id=uuid4(), context_id=uuid4(), context_seq=1, run_id=uuid4(),
        role="user", message_kind="", payload_ref=REF, operation_id=None, call_id=None,
        origin_input_id=None)


def test_tool_record_names_its_call() -> None:
    message = error_of(c.ContextRecord, record_id=uuid4(), context_id=uuid4(), context_seq=1,
                       run_id=uuid4(), role="tool", message_kind="tool_result", payload_ref=REF,
                       operation_id=None, call_id=None, origin_input_id=None)
    assert "must name its call_id" in message


@pytest.mark.covers("CTX-3.20", "CTX-3.21", "CTX-3.22")
def test_patch_addresses_semantic_fields_not_view_indexes() -> None:
    message = error_of(c.ContextPatchOperation, target_record_id=uuid4(),
                       field_key="/messages/3/tool_calls/0", operation="replace_value",
                       value_ref=REF)
    assert "field_key" in message
    assert "operations" in error_of(c.ContextPatch, context_id=uuid4(), base_revision=1,
                                    operations=())
    assert "operation" in error_of(c.ContextPatchOperation, target_record_id=uuid4(),
                                   field_key="x", operation="json_patch", value_ref=REF)


def test_mutation_and_revision_lineage() -> None:
    assert "committed_revision must be greater" in error_of(
        c.ContextMutation, mutation_id=uuid4(), context_id=uuid4(), base_revision=3,
        committed_revision=3, source_kind="hook", source_ref="h1", cause_operation_id=None,
        patch_ref=REF, created_at=NOW)
    common: dict[str, Any] = dict(context_id=uuid4(), record_watermark=0, mutation_ids=(),
                                  effective_manifest_ref=REF, commit_ref="c1", created_at=NOW)
    assert "revision 1" in error_of(c.EffectiveContextRevision, revision=1, parent_revision=1,
                                    **common)
    assert "earlier revision" in error_of(c.EffectiveContextRevision, revision=2,
                                          parent_revision=2, **common)
    twice = uuid4()
    assert "must not repeat" in error_of(c.EffectiveContextRevision, revision=2,
                                         parent_revision=1,
                                         **{**common, "mutation_ids": (twice, twice)})


@pytest.mark.covers("CTX-9.1", "CTX-9.7", "CTX-9.10")
def test_snapshot_ranges_name_their_context_revision_and_do_not_overlap() -> None:
    ctx, other = uuid4(), uuid4()
    common: dict[str, Any] = dict(snapshot_id=uuid4(), context_id=ctx, generation=1,
                                  protected_input_ids=(), summary_ref=REF, tail_after_seq=9,
                                  token_estimate=100)
    ranges = (c.ContextSourceRange(context_id=ctx, from_seq=1, through_seq=5),
              c.ContextSourceRange(context_id=other, from_seq=1, through_seq=5))
    assert "no entry in source_effective_revisions" in error_of(
        c.ContextSnapshot, source_ranges=ranges, source_effective_revisions={ctx: 2}, **common)
    overlapping = (c.ContextSourceRange(context_id=ctx, from_seq=1, through_seq=5),
                   c.ContextSourceRange(context_id=ctx, from_seq=5, through_seq=8))
    assert "overlap" in error_of(c.ContextSnapshot, source_ranges=overlapping,
                                 source_effective_revisions={ctx: 2}, **common)
    # Gaps between ranges are legal: a protected input may lie between them (§9).
    gapped = (c.ContextSourceRange(context_id=ctx, from_seq=1, through_seq=4),
              c.ContextSourceRange(context_id=ctx, from_seq=6, through_seq=8))
    assert c.ContextSnapshot(source_ranges=gapped, source_effective_revisions={ctx: 2}, **common)


def episode(**changes: Any) -> dict[str, Any]:
    fields: dict[str, Any] = dict(
        episode_id=uuid4(), run_id=uuid4(), owner_node_task_id=uuid4(),
        triggering_model_operation_id=uuid4(), current_operation_id=None,
        result_snapshot_id=None, source_view_hash="h", source_manifest_ref=REF,
        source_effective_revisions={uuid4(): 1}, release_id=uuid4(), prompt_version="v1",
        chunk_cursor=0, accumulated_summary_ref=None, input_tokens_estimated=10,
        created_at=NOW, status="running", revision=1)
    fields.update(changes)
    return fields


@pytest.mark.covers("CTX-9.4", "CTX-9.5", "CTX-9.6")
def test_episode_result_snapshot_exactly_when_succeeded() -> None:
    assert c.CompactionEpisode(**episode())
    assert "exactly when status is 'succeeded'" in error_of(
        c.CompactionEpisode, **episode(status="succeeded", accumulated_summary_ref=REF))
    assert "exactly when status is 'succeeded'" in error_of(
        c.CompactionEpisode, **episode(status="failed", result_snapshot_id=uuid4()))
    assert "chunk_cursor" in error_of(c.CompactionEpisode, **episode(chunk_cursor=-1))
    assert "'running', 'succeeded', 'failed' or 'cancelled'" in error_of(
        c.CompactionEpisode, **episode(status="paused"))


def test_run_terminal_states() -> None:
    assert {s.value for s in c.TERMINAL_RUN_STATUSES} == {
        "succeeded", "failed", "stopped", "timed_out", "loop_exhausted"}
    common: dict[str, Any] = dict(run_id=uuid4(), session_id=uuid4(), run_no=1,
                                  question_input_id=uuid4(), started_at=NOW)
    assert "ended_at is set exactly when" in error_of(c.Run, status="stopped", **common)
    assert "ended_at is set exactly when" in error_of(c.Run, status="running", ended_at=NOW,
                                                      **common)
    assert "error_code" in error_of(c.Run, status="succeeded", ended_at=NOW,
                                    error_code="COMPACTION_FAILED", **common)


@pytest.mark.covers("CTX-2.30")
def test_operation_effective_result_needs_raw() -> None:
    assert "effective_result_ref exists only after" in error_of(
        c.Operation, operation_id=uuid4(), run_id=uuid4(), node_task_id=uuid4(),
        purpose="model", purpose_key="model:1", state="succeeded", raw_result_ref=None,
        effective_result_ref=REF)
    assert {s.value for s in c.OperationState} >= {"unknown", "cancelled"}
    # Raw result, effective result and a failed Attempt's partial material are kept apart.
    assert {"raw_result_ref", "effective_result_ref"} <= set(c.Operation.model_fields)
    assert {"raw_result_ref", "partial_material_ref"} <= set(c.Attempt.model_fields)


@pytest.mark.covers("CTX-6.1")
def test_batch_members_in_action_order() -> None:
    def member(ordinal: int, state: str = "settled") -> c.BatchMember:
        return c.BatchMember(action_ordinal=ordinal, call_id=uuid4(), operation_id=uuid4(),
                             state=c.BatchMemberState(state))

    common: dict[str, Any] = dict(batch_id=uuid4(), run_id=uuid4(), context_id=uuid4(),
                                  model_operation_id=uuid4())
    assert "action_ordinal must be 1..2 in order" in error_of(
        c.Batch, members=(member(2), member(1)), **common)
    assert "feedback exists only once every member is settled" in error_of(
        c.Batch, members=(member(1), member(2, "pending")), feedback_record_id=uuid4(), **common)
    assert c.Batch(members=(member(1), member(2)), feedback_record_id=uuid4(), **common)



def test_a_node_checkpoint_names_what_its_stage_works_on() -> None:
    # §10 角色可恢复状态: a request in flight is its Operation's, an answer being decided is
    # its decision's, and only an open batch has members to take up.
    spent: dict[str, Any] = dict(loops=1, tool_calls_made=0, tick=0)
    for stage in (c.NodeStage.PREPARED, c.NodeStage.DENIED, c.NodeStage.COMPACTING,
                  c.NodeStage.FROZEN, c.NodeStage.RAW_SAVED):
        assert f"a {stage} position names its request's operation_id" in error_of(
            c.NodeCheckpoint, stage=stage, **spent)
    for stage in (c.NodeStage.POST, c.NodeStage.BATCH):
        assert f"a {stage} position names its decision" in error_of(
            c.NodeCheckpoint, stage=stage, **spent)
    assert "only a batch position holds batch members" in error_of(
        c.NodeCheckpoint, stage="post", decision=uuid4(), settled={"a": {"text": "x"}}, **spent)
    kept = c.NodeCheckpoint(stage=c.NodeStage.FROZEN, operation_id=uuid4(), cutoff=3, **spent)
    # Stored as the step set it: no field the step did not name.
    assert set(kept.document()) == {"stage", "operation_id", "cutoff", *spent}
    assert c.NodeCheckpoint(stage=c.NodeStage.LOOP_DONE, **spent).document() == {
        "stage": "loop_done", **spent}

@given(st.uuids())
def test_uuid_fields_accept_canonical_text(identifier: UUID) -> None:
    ref = c.ContextSourceRange.model_validate(
        {"context_id": str(identifier), "from_seq": 1, "through_seq": 1})
    assert ref.context_id == identifier
