"""§3 hook patches, validation: identities and limits never writable, a user input never
overwritten (§5), a frozen fact takes only a sourced annotation, a post-response hook changes only
the undelivered response, an item dropped only when its own fixed material cannot fit (§7),
conflicts judged before registration and schema.

Expected values are written by hand from the design.
"""

import pytest

from ctxspec.reference.contracts import MessageRole, MutationSourceKind
from ctxspec.reference.contracts import PatchOperationKind as Op
from ctxspec.reference.effective import ABSENT, RawRecord, append_records, field_value, freeze
from ctxspec.reference.hooks import BudgetRoom, ContextOp, HookCall, HookProposal, PayloadOp
from ctxspec.reference.registry import FieldRegistry, FieldSpec
from tests.builders import uuid
from tests.hook_calls import (
    CALL,
    CTX,
    DECISION,
    OP,
    PATH,
    PAYLOAD,
    QUESTION,
    RESULT,
    codes,
    decide,
    record,
    root_context,
)

POST_CALL = FieldRegistry("tool.post_call", "1", (FieldSpec("text", "result", "string"),))


# --- validation ---------------------------------------------------------------------------------


@pytest.mark.covers("CTX-3.46", "CTX-3.93")
def test_identities_and_limits_are_never_writable() -> None:
    with pytest.raises(ValueError, match="never writable"):
        FieldSpec("tool_call:{call_id}.call_id", None, "string")
    with pytest.raises(ValueError, match="never writable"):
        FieldSpec(None, "quota.tokens", "number")
    outcome = decide(HookProposal(uuid(90), "allow", (), CTX, 2, (
        ContextOp(DECISION, f"tool_call:{CALL}.arguments.call_id", Op.REPLACE_VALUE, "x"),)))
    assert codes(outcome) == ["FORBIDDEN_FIELD"]


@pytest.mark.covers("CTX-3.92", "CTX-5.6")
def test_a_user_input_is_never_overwritten() -> None:
    registry = FieldRegistry("model.pre_request", "1", (FieldSpec("text", None, "string"),))
    outcome = decide(HookProposal(uuid(90), "allow", (), CTX, 2, (
        ContextOp(QUESTION, "text", Op.REPLACE_VALUE, "something else"),)), registry=registry)
    assert codes(outcome) == ["PROTECTED_INPUT"]


@pytest.mark.covers("CTX-3.55", "CTX-3.88", "CTX-3.37", "CTX-3.38", "CTX-3.36")
def test_a_frozen_fact_takes_only_a_sourced_annotation() -> None:
    frozen = freeze(root_context(), [DECISION])
    changed = decide(HookProposal(uuid(90), "allow", (PayloadOp("arguments.path", "b.md"),)),
                     states={CTX: frozen})
    assert codes(changed) == ["FROZEN_FACT"]
    annotated = decide(HookProposal(uuid(91), "allow", (), CTX, 2, (
        ContextOp(DECISION, "note", Op.APPEND_ANNOTATION, "the path was wrong"),)),
        states={CTX: frozen})
    assert annotated.invocation.patch_valid
    state = annotated.states[CTX]
    note = state.records[-1]
    assert (note.record.role, note.record.message_kind, note.source) == \
        (MessageRole.SYSTEM, "annotation", f"hook:{uuid(91)}")
    assert note.record.record_id == uuid(501)  # system-assigned, not the hook's choice
    assert note.record.origin_input_id is None  # never passes for a user input
    assert field_value(state, DECISION, PATH) == "a.md"  # the fact itself is unchanged


@pytest.mark.covers("CTX-3.56", "CTX-3.16")
def test_post_response_hook_changes_only_the_undelivered_response() -> None:
    state = append_records(root_context(), [RawRecord(
        record(RESULT, 3, MessageRole.TOOL, "tool_result", call=CALL), {"text": "raw output"})],
        mutation_id=uuid(31), source_kind=MutationSourceKind.RUNTIME,
        source_ref="tool-result").state
    state = freeze(state, [DECISION])  # the call was executed
    post = HookCall(operation_id=OP, hook_point="tool.post_call", stage="post",
                    actor_role="react", actor_context_id=CTX, call_id=CALL,
                    call_record_id=RESULT)
    ok = decide(HookProposal(uuid(90), "allow", (PayloadOp("result", "redacted output"),)),
                states={CTX: state}, call=post, registry=POST_CALL,
                payload={"result": "raw output"})
    assert ok.payload == {"result": "redacted output"}
    assert field_value(ok.states[CTX], RESULT, "text") == "redacted output"
    raw = ok.states[CTX].record(RESULT)
    assert raw is not None and raw.content == {"text": "raw output"}
    back = decide(HookProposal(uuid(91), "allow", (), CTX, 3, (
        ContextOp(DECISION, "text", Op.REPLACE_VALUE, "rewrite the request"),)),
        states={CTX: state}, call=post, registry=POST_CALL, payload={"result": "raw output"})
    assert set(codes(back)) == {"FROZEN_FACT", "POST_STAGE_TARGET"}


@pytest.mark.covers("CTX-7.30", "CTX-7.31")
def test_an_item_is_dropped_only_when_its_own_fixed_material_cannot_fit() -> None:
    def measure(changes: object) -> int:
        return 3000  # the tokens this item's new fixed material adds

    proposal = HookProposal(uuid(90), "allow", (PayloadOp("arguments.path", "b.md"),))
    # Fixed input 96000 + 3000 ≤ B = 100000: valid, even if the request as a whole (with its
    # compressible history) is over budget; compaction deals with that.
    fits = decide(proposal, budget=BudgetRoom(96_000, 100_000, measure))
    assert fits.invocation.patch_valid
    too_big = decide(proposal, budget=BudgetRoom(97_001, 100_000, measure))
    assert codes(too_big) == ["ITEM_DOES_NOT_FIT"] and too_big.control == "continue"
    assert too_big.payload == PAYLOAD


# --- edge cases found in review -----------------------------------------------------------------


def test_malformed_and_contextless_operations_are_refused() -> None:
    nameless = decide(HookProposal(uuid(90), "allow", (), None, None, (
        ContextOp(DECISION, PATH, Op.REPLACE_VALUE, "b.md"),)))
    assert codes(nameless) == ["INVALID_PATCH"]
    empty_segment = decide(HookProposal(uuid(90), "allow", (), CTX, 2, (
        ContextOp(DECISION, f"tool_call:{CALL}.arguments..path", Op.REPLACE_VALUE, "b.md"),)))
    assert codes(empty_segment) == ["FORBIDDEN_FIELD"]


@pytest.mark.covers("CTX-3.51")
def test_conflicts_are_judged_before_registration_and_schema() -> None:
    outcome = decide(HookProposal(uuid(90), "allow", (
        PayloadOp("unknown.field", 1), PayloadOp("arguments.path", "b.md")), CTX, 2, (
        ContextOp(DECISION, PATH, Op.REPLACE_VALUE, "c.md"),)))
    assert codes(outcome) == ["HOOK_PATCH_CONFLICT"]
    unregistered = decide(HookProposal(uuid(90), "allow", (PayloadOp("unknown.field", 1),)))
    assert codes(unregistered) == ["FIELD_NOT_REGISTERED"]


@pytest.mark.covers("CTX-3.93", "CTX-3.46")
def test_limits_are_never_writable_at_any_depth() -> None:
    for key in ("limits.quota", "run.deadline", "state.stopped", "settings.permissions.x"):
        with pytest.raises(ValueError, match="never writable"):
            FieldSpec(None, key, "number")


def test_the_most_specific_spec_decides_the_schema_and_required_fields_stay() -> None:
    registry = FieldRegistry("tool.pre_call", "3", (
        FieldSpec("tool_call:{call_id}.arguments", "arguments", "object", required=True),
        FieldSpec("tool_call:{call_id}.arguments.path", "arguments.path", "string")))
    for proposal in (HookProposal(uuid(90), "allow", (PayloadOp("arguments.path", 7),)),
                     HookProposal(uuid(90), "allow", (PayloadOp("arguments", ABSENT),))):
        assert codes(decide(proposal, registry=registry)) == ["SCHEMA_MISMATCH"]
