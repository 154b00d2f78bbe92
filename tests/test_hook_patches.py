"""§3 hook patches on the effective context, the worked example and normalisation: the write(path)
change reaches the handler and the effective record while the raw record keeps a.md; equal writes
collapse, a parent replacement and a child write compare final values, an overlap that cannot be
proved conflicts, values compare as JSON.

Expected values are written by hand from the design.
"""

from collections.abc import Mapping

import pytest

from ctxspec.reference.contracts import MutationSourceKind
from ctxspec.reference.contracts import PatchOperationKind as Op
from ctxspec.reference.effective import ABSENT, FieldChange, field_value
from ctxspec.reference.hooks import ContextOp, HookProposal, PayloadOp
from ctxspec.reference.registry import JSON, FieldRegistry, FieldSpec
from tests.builders import uuid
from tests.hook_calls import CALL, CTX, DECISION, PATH, PAYLOAD, codes, decide, mutation_of

# --- the §3 worked example ----------------------------------------------------------------------


@pytest.mark.covers("CTX-3.44", "CTX-3.52", "CTX-3.57", "CTX-3.69", "CTX-1.10", "CTX-3.31")
def test_payload_path_change_reaches_handler_and_effective_record_raw_keeps_a_md() -> None:
    outcome = decide(HookProposal(uuid(90), "allow", (PayloadOp("arguments.path",
                                                                "reports/a.md"),)))
    assert outcome.control == "continue" and outcome.invocation.patch_valid
    # The handler gets the effective payload; the effective call record says the same.
    assert outcome.payload == {"name": "write", "arguments": {"path": "reports/a.md"}}
    state = outcome.states[CTX]
    assert field_value(state, DECISION, PATH) == "reports/a.md"
    # The raw model output still says a.md, and the revision before the hook too.
    raw = state.record(DECISION)
    assert raw is not None
    assert raw.content[f"tool_call:{CALL}"] == {
        "name": "write", "action_ordinal": 1, "arguments": {"path": "a.md"}}
    assert field_value(state, DECISION, PATH, revision=2) == "a.md"
    assert outcome.committed == {CTX: 3}
    mutation = state.mutations[mutation_of(90)]
    assert (mutation.source_kind, mutation.source_ref) == (MutationSourceKind.HOOK, str(uuid(90)))
    assert mutation.changes == (FieldChange(DECISION, PATH, "reports/a.md",
                                            ("payload:arguments.path",)),)


@pytest.mark.covers("CTX-3.50", "CTX-3.58", "CTX-3.59")
def test_same_hook_also_setting_context_path_invalidates_the_whole_item() -> None:
    outcome = decide(HookProposal(
        uuid(90), "allow", (PayloadOp("arguments.path", "reports/a.md"),), CTX, 2,
        (ContextOp(DECISION, PATH, Op.REPLACE_VALUE, "other/a.md"),)))
    assert codes(outcome) == ["HOOK_PATCH_CONFLICT"]
    assert not outcome.invocation.patch_valid
    # Fail-open: the previous effective path a.md, nothing committed, never one of the two.
    assert outcome.control == "continue"
    assert outcome.payload == PAYLOAD
    assert outcome.states[CTX].head.revision == 2 and outcome.committed == {}


@pytest.mark.covers("CTX-3.60")
def test_deny_with_a_conflicting_patch_still_denies() -> None:
    outcome = decide(HookProposal(
        uuid(90), "deny", (PayloadOp("arguments.path", "reports/a.md"),), CTX, 2,
        (ContextOp(DECISION, PATH, Op.REPLACE_VALUE, "other/a.md"),)))
    assert outcome.control == "blocked"
    assert outcome.invocation.decision.value == "deny"
    assert codes(outcome) == ["HOOK_PATCH_CONFLICT"]


# --- normalisation ------------------------------------------------------------------------------


@pytest.mark.covers("CTX-3.47", "CTX-3.48")
def test_equal_writes_collapse_into_one_change_with_both_sources() -> None:
    outcome = decide(HookProposal(
        uuid(90), "allow", (PayloadOp("arguments.path", "b.md"),), CTX, 2,
        (ContextOp(DECISION, PATH, Op.REPLACE_VALUE, "b.md"),
         ContextOp(DECISION, PATH, Op.REPLACE_VALUE, "b.md"))))
    assert outcome.changes.context_changes == (
        (CTX, FieldChange(DECISION, PATH, "b.md", ("context:" + PATH, "payload:arguments.path"))),)
    # Two contradictory writes in one patch conflict whatever their order.
    for first, second in (("x.md", "y.md"), ("y.md", "x.md")):
        clash = decide(HookProposal(uuid(91), "allow", (), CTX, 2, (
            ContextOp(DECISION, PATH, Op.REPLACE_VALUE, first),
            ContextOp(DECISION, PATH, Op.REPLACE_VALUE, second))))
        assert codes(clash) == ["HOOK_PATCH_CONFLICT"]


@pytest.mark.covers("CTX-3.49", "CTX-3.50")
def test_parent_replacement_and_child_write_compare_final_values() -> None:
    args = f"tool_call:{CALL}.arguments"
    payload: Mapping[str, JSON] = {"name": "write", "arguments": {"path": "a.md", "mode": "w"}}
    # Replacing arguments with {"path": "x.md"} deletes mode; a child write of mode = "w" differs.
    clash = decide(HookProposal(uuid(90), "allow", (PayloadOp("arguments", {"path": "x.md"}),),
                                CTX, 2, (ContextOp(DECISION, args + ".mode", Op.REPLACE_VALUE,
                                                   "w"),)), payload=payload)
    assert codes(clash) == ["HOOK_PATCH_CONFLICT"]
    # A child write equal to the parent's final value is the same fact: one change, two sources.
    agree = decide(HookProposal(uuid(90), "allow", (PayloadOp("arguments", {"path": "x.md"}),),
                                CTX, 2, (ContextOp(DECISION, args + ".path", Op.REPLACE_VALUE,
                                                   "x.md"),)), payload=payload)
    assert agree.invocation.patch_valid
    assert agree.changes.context_changes == (
        (CTX, FieldChange(DECISION, args, {"path": "x.md"},
                          ("context:" + args + ".path", "payload:arguments"))),)
    assert agree.payload == {"name": "write", "arguments": {"path": "x.md"}}
    # Deleting a child the parent keeps is a difference too.
    deleted = decide(HookProposal(uuid(90), "allow", (PayloadOp("arguments.path", ABSENT),),
                                  CTX, 2, (ContextOp(DECISION, args, Op.REPLACE_VALUE,
                                                     {"path": "a.md"}),)))
    assert codes(deleted) == ["HOOK_PATCH_CONFLICT"]


@pytest.mark.covers("CTX-3.50")
def test_overlap_through_an_opaque_field_cannot_be_proved_and_conflicts() -> None:
    opaque = FieldRegistry("tool.pre_call", "2", (
        FieldSpec("tool_call:{call_id}.arguments", "arguments", "opaque"),))
    outcome = decide(HookProposal(uuid(90), "allow", (PayloadOp("arguments", {"path": "x"}),),
                                  CTX, 2, (ContextOp(DECISION, PATH, Op.REPLACE_VALUE, "x"),)),
                     registry=opaque)
    assert codes(outcome) == ["HOOK_PATCH_CONFLICT"]
    assert "cannot be proved consistent" in outcome.invocation.diagnostics[0].detail


# --- edge cases found in review -----------------------------------------------------------------


@pytest.mark.covers("CTX-3.47", "CTX-3.48")
def test_values_compare_as_json_so_true_is_not_one() -> None:
    clash = decide(HookProposal(uuid(90), "allow", (), CTX, 2, (
        ContextOp(DECISION, PATH, Op.REPLACE_VALUE, 1),
        ContextOp(DECISION, PATH, Op.REPLACE_VALUE, True))))
    assert codes(clash) == ["HOOK_PATCH_CONFLICT"]
