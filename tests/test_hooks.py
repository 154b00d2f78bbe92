"""§3 hook patches on the effective context: the write(path) example, normalisation, validation,
decisions, the chain, scopes and CAS. Expected values are written by hand from the design."""

import json
from collections.abc import Mapping
from dataclasses import dataclass
from uuid import UUID

import pytest

from ctxspec.reference.contracts import ContextRecord, MessageRole, MutationSourceKind
from ctxspec.reference.contracts import PatchOperationKind as Op
from ctxspec.reference.effective import (
    ABSENT,
    ContextState,
    FieldChange,
    RawRecord,
    RevisionConflict,
    Scope,
    append_records,
    change_authorisation,
    commit_changes,
    effective_content,
    effective_records,
    field_value,
    freeze,
    manifest,
    new_context,
)
from ctxspec.reference.history import EndedRun, InputOccurrence, InputPlacement
from ctxspec.reference.hooks import (
    BudgetRoom,
    ChainOutcome,
    ContextOp,
    GateChecks,
    HookCall,
    HookItemOutcome,
    HookProposal,
    PayloadOp,
    denial_feedback,
    evaluate,
    execution_gate,
    mutation_id_for,
    run_chain,
)
from ctxspec.reference.registry import JSON, FieldRegistry, FieldSpec
from ctxspec.reference.view import EffectiveRecord
from tests.builders import ref, uuid

CTX, RUN, OP, CALL = uuid(1), uuid(2), uuid(3), uuid(4)
QUESTION, DECISION, RESULT = uuid(10), uuid(11), uuid(12)
PATH = f"tool_call:{CALL}.arguments.path"

PRE_CALL = FieldRegistry("tool.pre_call", "1", (
    FieldSpec("tool_call:{call_id}.arguments", "arguments", "object"),))
POST_CALL = FieldRegistry("tool.post_call", "1", (FieldSpec("text", "result", "string"),))


def record(record_id: UUID, seq: int, role: MessageRole, kind: str, context: UUID = CTX,
           call: UUID | None = None, input_id: UUID | None = None) -> ContextRecord:
    return ContextRecord(record_id=record_id, context_id=context, context_seq=seq, run_id=RUN,
                         role=role, message_kind=kind, payload_ref=ref(str(record_id)),
                         operation_id=None, call_id=call, origin_input_id=input_id)


def root_context() -> ContextState:
    """The question, then the model's decision write(path="a.md")."""
    state = new_context(CTX, Scope("private", owner_role="react"))
    committed = append_records(state, [
        RawRecord(record(QUESTION, 1, MessageRole.USER, "user_ref", input_id=uuid(20)),
                  {"text": "写一份报告"}),
        RawRecord(record(DECISION, 2, MessageRole.ASSISTANT, "assistant"),
                  {"text": "", f"tool_call:{CALL}": {"name": "write", "action_ordinal": 1,
                                                     "arguments": {"path": "a.md"}}}),
    ], mutation_id=uuid(30), source_kind=MutationSourceKind.RUNTIME, source_ref="model-output")
    return committed.state


PAYLOAD: Mapping[str, JSON] = {"name": "write", "arguments": {"path": "a.md"}}
PRE = HookCall(operation_id=OP, hook_point="tool.pre_call", stage="pre", actor_role="react",
               actor_context_id=CTX, call_id=CALL, call_record_id=DECISION)


@dataclass
class Ids:
    next: int = 500

    def __call__(self, *_: int) -> UUID:
        self.next += 1
        return uuid(self.next)


def decide(proposal: HookProposal, states: Mapping[UUID, ContextState] | None = None,
           call: HookCall = PRE, registry: FieldRegistry = PRE_CALL,
           payload: Mapping[str, JSON] = PAYLOAD,
           budget: BudgetRoom | None = None) -> HookItemOutcome:
    return evaluate(proposal, call, registry, states or {CTX: root_context()}, payload,
                    chain_position=0, annotation_ids=Ids(), budget=budget)


def mutation_of(hook: int, context: UUID = CTX) -> UUID:
    return mutation_id_for(uuid(hook), context)


def codes(outcome: HookItemOutcome) -> list[str]:
    return [d.code for d in outcome.invocation.diagnostics]


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


# --- decisions, the chain, the gate -------------------------------------------------------------


def chain(*proposals: HookProposal, states: Mapping[UUID, ContextState] | None = None
          ) -> ChainOutcome:
    return run_chain(proposals, PRE, PRE_CALL, states or {CTX: root_context()}, PAYLOAD,
                     annotation_ids=Ids())


@pytest.mark.covers("CTX-3.62", "CTX-3.63", "CTX-3.64")
def test_each_item_reads_the_previous_items_effective_version() -> None:
    outcome = chain(HookProposal(uuid(90), "allow", (PayloadOp("arguments.path", "b.md"),)),
                    HookProposal(uuid(91), "allow", (), CTX, 3,
                                 (ContextOp(DECISION, PATH, Op.REPLACE_VALUE, "c.md"),)))
    assert [i.committed for i in outcome.items] == [{CTX: 3}, {CTX: 4}]
    assert outcome.payload == {"name": "write", "arguments": {"path": "c.md"}}
    state = outcome.states[CTX]
    assert [field_value(state, DECISION, PATH, r) for r in (2, 3, 4)] == ["a.md", "b.md", "c.md"]
    # Every revision traces to its mutation and source.
    sources = [state.mutations[m].source_ref for m in state.revision(4).mutation_ids]
    assert sources == [str(uuid(91))]


@pytest.mark.covers("CTX-3.61", "CTX-3.91")
def test_a_failed_or_illegal_item_drops_only_itself() -> None:
    outcome = chain(HookProposal(uuid(90), "allow", handler_failed=True),
                    HookProposal(uuid(91), "maybe", (PayloadOp("arguments.path", "z.md"),)),
                    HookProposal(uuid(92), "allow", (PayloadOp("arguments.path", "b.md"),)))
    assert [i.invocation.decision.value for i in outcome.items] == ["failed", "failed", "allow"]
    assert [codes(i) for i in outcome.items] == [["HOOK_FAILED"], ["ILLEGAL_DECISION"], []]
    assert outcome.payload["arguments"] == {"path": "b.md"} and not outcome.blocked


@pytest.mark.covers("CTX-3.70", "CTX-3.71", "CTX-3.18", "CTX-6.11", "CTX-6.12")
def test_pre_deny_keeps_the_candidate_not_executed_and_post_deny_is_not_delivered() -> None:
    outcome = chain(HookProposal(uuid(90), "deny", (PayloadOp("arguments.path", "b.md"),)),
                    HookProposal(uuid(91), "allow"))
    assert outcome.blocked and len(outcome.items) == 1  # the chain stops at a deny
    denied = outcome.items[0]
    assert denied.candidate_payload == {"name": "write", "arguments": {"path": "b.md"}}
    assert denied.states[CTX].head.revision == 2  # nothing committed for a denied call
    assert json.loads(denial_feedback("pre", uuid(90), denied.candidate_payload)) == {
        "status": "denied", "stage": "pre", "executed": False,
        "hook_invocation_id": str(uuid(90)),
        "candidate": {"name": "write", "arguments": {"path": "b.md"}}}
    assert json.loads(denial_feedback("post", uuid(91), {})) == {
        "status": "denied", "stage": "post", "executed": True, "result_delivered": False,
        "hook_invocation_id": str(uuid(91))}


@pytest.mark.covers("CTX-3.93")
def test_an_allow_never_lifts_permission_quota_deadline_or_stop() -> None:
    allowed = chain(HookProposal(uuid(90), "allow"))
    fine = GateChecks(tool_allowed=True, quota_left=1, deadline_passed=False, stopped=False)
    assert execution_gate(allowed, fine) == "execute"
    assert execution_gate(allowed, GateChecks(False, 1, False, False)) == "not_permitted"
    assert execution_gate(allowed, GateChecks(True, 0, False, False)) == "quota_exhausted"
    assert execution_gate(allowed, GateChecks(True, 1, True, False)) == "deadline_passed"
    assert execution_gate(allowed, GateChecks(True, 1, False, True)) == "stopped"
    assert execution_gate(chain(HookProposal(uuid(90), "deny")), fine) == "denied"


# --- revisions, idempotency, CAS ----------------------------------------------------------------


@pytest.mark.covers("CTX-3.29", "CTX-3.30", "CTX-3.27")
def test_a_mutation_committed_twice_returns_the_original_revision() -> None:
    state = root_context()
    change = [FieldChange(DECISION, PATH, "b.md", ("context:" + PATH,))]
    first = commit_changes(state, change, (), base_revision=2, mutation_id=uuid(40),
                           source_kind=MutationSourceKind.HOOK, source_ref="h")
    assert not isinstance(first, RevisionConflict)
    again = commit_changes(first.state, [FieldChange(DECISION, PATH, "zzz", ())], (),
                           base_revision=2, mutation_id=uuid(40),
                           source_kind=MutationSourceKind.HOOK, source_ref="h")
    assert not isinstance(again, RevisionConflict)
    assert (again.revision, again.replayed, again.state) == (3, True, first.state)
    assert field_value(again.state, DECISION, PATH) == "b.md"


@pytest.mark.covers("CTX-3.82", "CTX-3.86", "CTX-3.24")
def test_appends_never_conflict_and_an_untouched_field_rebases() -> None:
    state = append_records(root_context(), [RawRecord(
        record(RESULT, 3, MessageRole.TOOL, "tool_result", call=CALL), {"text": "out"})],
        mutation_id=uuid(31), source_kind=MutationSourceKind.RUNTIME, source_ref="r").state
    assert state.head.revision == 3 and state.head.mutation_ids == (uuid(31),)
    # A hook that read revision 2 commits on head 3: rebased, the base kept as provenance.
    outcome = decide(HookProposal(uuid(90), "allow", (), CTX, 2, (
        ContextOp(DECISION, PATH, Op.REPLACE_VALUE, "b.md"),)), states={CTX: state})
    assert outcome.committed == {CTX: 4}
    done = outcome.states[CTX].mutations[mutation_of(90)]
    assert (done.base_revision, done.committed_revision, done.rebased) == (2, 4, True)


@pytest.mark.covers("CTX-3.83", "CTX-3.84", "CTX-3.85", "CTX-3.67")
def test_a_stale_patch_on_a_changed_field_is_a_revision_conflict() -> None:
    first = decide(HookProposal(uuid(90), "allow", (), CTX, 2, (
        ContextOp(DECISION, PATH, Op.REPLACE_VALUE, "b.md"),)))
    second = decide(HookProposal(uuid(91), "allow", (), CTX, 2, (
        ContextOp(DECISION, f"tool_call:{CALL}.arguments", Op.REPLACE_VALUE,
                  {"path": "c.md"}),)), states=first.states,
        payload=first.payload)
    assert codes(second) == ["CONTEXT_REVISION_CONFLICT"]
    # No winner chosen anew: the committed b.md stands, nothing rolled back, allow continues.
    assert second.control == "continue" and second.payload == first.payload
    assert field_value(second.states[CTX], DECISION, PATH) == "b.md"
    # The same stale patch as a deny still denies, and the candidate it records is the call as
    # it stood (b.md): the invalid c.md is only a diagnostic.
    denied = decide(HookProposal(uuid(92), "deny", (), CTX, 2, (
        ContextOp(DECISION, PATH, Op.REPLACE_VALUE, "c.md"),)), states=first.states,
        payload=first.payload)
    assert denied.control == "blocked"
    assert codes(denied) == ["CONTEXT_REVISION_CONFLICT"]
    assert denied.candidate_payload == first.payload
    assert first.payload["arguments"] == {"path": "b.md"}


@pytest.mark.covers("CTX-3.83")
def test_changed_authorisation_blocks_a_rebase() -> None:
    state = change_authorisation(append_records(root_context(), [], mutation_id=uuid(31),
                                                source_kind=MutationSourceKind.RUNTIME,
                                                source_ref="r").state,
                                 Scope("private", owner_role="react"))
    outcome = decide(HookProposal(uuid(90), "allow", (), CTX, 2, (
        ContextOp(DECISION, PATH, Op.REPLACE_VALUE, "b.md"),)), states={CTX: state})
    assert codes(outcome) == ["CONTEXT_REVISION_CONFLICT"]


# --- scopes -------------------------------------------------------------------------------------

SHARED = uuid(7)
FACT = uuid(70)
PLANNER_CTX = uuid(8)


def shared_scope(registered: bool = True) -> ContextState:
    fields = frozenset({(FACT, "text")}) if registered else frozenset()
    state = new_context(SHARED, Scope("shared", registered_fields=fields,
                                      consumers=frozenset({"react", "planner"})))
    return append_records(state, [RawRecord(
        record(FACT, 1, MessageRole.SYSTEM, "feedback", context=SHARED), {"text": "budget: 5"})],
        mutation_id=uuid(32), source_kind=MutationSourceKind.RUNTIME, source_ref="r").state


TEXT = FieldRegistry("model.pre_request", "1", (FieldSpec("text", None, "string"),
                                                FieldSpec(None, "params.temperature", "number")))


@pytest.mark.covers("CTX-3.73", "CTX-3.74", "CTX-3.32")
def test_a_patch_to_another_roles_context_is_refused() -> None:
    planner = new_context(PLANNER_CTX, Scope("private", owner_role="planner"))
    planner = append_records(planner, [RawRecord(
        record(uuid(80), 1, MessageRole.ASSISTANT, "assistant", context=PLANNER_CTX),
        {"text": "plan"})], mutation_id=uuid(33), source_kind=MutationSourceKind.RUNTIME,
        source_ref="r").state
    outcome = decide(HookProposal(uuid(90), "allow", (), PLANNER_CTX, 2, (
        ContextOp(uuid(80), "text", Op.REPLACE_VALUE, "hijacked"),)),
        states={CTX: root_context(), PLANNER_CTX: planner}, registry=TEXT)
    assert codes(outcome) == ["UNAUTHORISED_SCOPE"]
    assert outcome.states[PLANNER_CTX] is planner


@pytest.mark.covers("CTX-3.39", "CTX-3.40", "CTX-3.75", "CTX-3.87", "CTX-1.18")
def test_shared_fields_are_registered_authorised_and_versioned() -> None:
    outer = HookCall(operation_id=OP, hook_point="model.pre_request", stage="pre",
                     actor_role=None, actor_context_id=None, call_id=None, call_record_id=None,
                     authorised_scopes=frozenset({SHARED}))
    update = HookProposal(uuid(90), "allow", (), SHARED, 2,
                          (ContextOp(FACT, "text", Op.REPLACE_VALUE, "budget: 3"),))
    scope = shared_scope()
    frozen_revision = scope.head.revision  # a request froze this revision earlier
    done = decide(update, states={SHARED: scope}, call=outer, registry=TEXT)
    assert done.invocation.patch_valid and done.committed == {SHARED: 3}
    shared = done.states[SHARED]
    assert shared.scope.may_read("planner") and not shared.scope.may_read("executor")
    assert field_value(shared, FACT, "text") == "budget: 3"
    assert field_value(shared, FACT, "text", frozen_revision) == "budget: 5"
    # Unregistered field, or an outer node without the scope: refused, no context obtained.
    assert codes(decide(update, states={SHARED: shared_scope(registered=False)}, call=outer,
                        registry=TEXT)) == ["FIELD_NOT_REGISTERED"]
    stranger = HookCall(operation_id=OP, hook_point="model.pre_request", stage="pre",
                        actor_role=None, actor_context_id=None, call_id=None,
                        call_record_id=None)
    assert codes(decide(update, states={SHARED: scope}, call=stranger, registry=TEXT)) == \
        ["UNAUTHORISED_SCOPE"]


@pytest.mark.covers("CTX-3.81", "CTX-3.79")
def test_a_change_across_scopes_commits_whole_or_not_at_all() -> None:
    both = HookCall(operation_id=OP, hook_point="model.pre_request", stage="pre",
                    actor_role="react", actor_context_id=CTX, call_id=None,
                    call_record_id=None, authorised_scopes=frozenset({SHARED}))
    # The shared scope moved on (its field changed) since revision 2 this item read.
    moved = decide(HookProposal(uuid(89), "allow", (), SHARED, 2, (
        ContextOp(FACT, "text", Op.REPLACE_VALUE, "budget: 4"),)),
        states={SHARED: shared_scope()}, call=both, registry=TEXT).states[SHARED]
    states = {CTX: root_context(), SHARED: moved}
    item = HookProposal(uuid(90), "allow", (), SHARED, 2, (
        ContextOp(FACT, "text", Op.REPLACE_VALUE, "budget: 1"),
        ContextOp(FACT, "text", Op.APPEND_ANNOTATION, "lowered"),))
    outcome = decide(item, states=states, call=both, registry=TEXT)
    assert codes(outcome) == ["CONTEXT_REVISION_CONFLICT"]
    assert outcome.states == states  # neither scope changed


# --- the effective version everywhere -----------------------------------------------------------


@pytest.mark.covers("CTX-3.15", "CTX-3.69", "CTX-4.10", "CTX-6.16")
def test_argument_change_a_to_b_is_what_the_next_model_request_sees() -> None:
    # §12 "参数修改反馈": the model proposed path A, the handler ran with B; the next request is
    # rebuilt from the effective revision: it shows B and which mutation made it.
    outcome = decide(HookProposal(uuid(90), "allow", (PayloadOp("arguments.path", "B.md"),)))
    records = effective_records(outcome.states[CTX])
    decision = records[1]
    assert json.loads(decision.tool_calls[0].arguments) == {"path": "B.md"}
    assert decision.modified_by == (str(mutation_of(90)),)
    raw_view = effective_records(outcome.states[CTX], revision=2)[1]
    assert json.loads(raw_view.tool_calls[0].arguments) == {"path": "a.md"}


@pytest.mark.covers("CTX-3.35")
def test_prompt_projection_items_keep_their_resource_version() -> None:
    release = {"system_prompt": {"resource": "prompt:system", "version": 3,
                                 "text": "You are helpful."}}
    system_id = uuid(60)
    state = new_context(CTX, Scope("private", owner_role="react"))
    state = append_records(state, [RawRecord(
        record(system_id, 1, MessageRole.SYSTEM, "system_prompt"),
        {"text": "You are helpful."}, source="prompt:system@3")], mutation_id=uuid(34),
        source_kind=MutationSourceKind.RUNTIME, source_ref="release").state
    call = HookCall(operation_id=OP, hook_point="model.pre_request", stage="pre",
                    actor_role="react", actor_context_id=CTX, call_id=None, call_record_id=None)
    outcome = decide(HookProposal(uuid(90), "allow", (), CTX, 2, (
        ContextOp(system_id, "text", Op.REPLACE_VALUE, "You are terse."),)),
        states={CTX: state}, call=call, registry=TEXT)
    entry = manifest(outcome.states[CTX])[0]
    assert entry.source == "prompt:system@3" and entry.modified_fields == {"text": mutation_of(90)}
    assert effective_content(outcome.states[CTX], system_id) == {"text": "You are terse."}
    assert release["system_prompt"]["text"] == "You are helpful."  # the release is untouched


@pytest.mark.covers("CTX-7.29")
def test_request_parameters_live_in_the_effective_payload() -> None:
    call = HookCall(operation_id=OP, hook_point="model.pre_request", stage="pre",
                    actor_role="react", actor_context_id=CTX, call_id=None, call_record_id=None)
    outcome = decide(HookProposal(uuid(90), "allow", (PayloadOp("params.temperature", 0.2),)),
                     call=call, registry=TEXT, payload={"params": {"temperature": 1.0}})
    assert outcome.payload == {"params": {"temperature": 0.2}}
    assert outcome.committed == {}  # a payload-only field: no context mutation
    # A later append (e.g. a summary replacing covered messages) leaves the parameter alone.
    later = append_records(outcome.states[CTX], [], mutation_id=uuid(35),
                           source_kind=MutationSourceKind.RUNTIME, source_ref="summary")
    assert later.state.head.revision == 3 and outcome.payload["params"] == {"temperature": 0.2}


# --- what the shell stores, and the request re-measured -----------------------------------------


@pytest.mark.covers("CTX-3.19", "CTX-3.24", "CTX-3.25", "CTX-3.26", "CTX-3.28")
def test_committed_mutation_and_revision_as_contracts() -> None:
    from datetime import UTC, datetime

    from ctxspec.reference.context_contracts import mutation_contract, revision_contract
    from ctxspec.reference.contracts import RoleContext
    from ctxspec.reference.effective import project_head

    outcome = decide(HookProposal(uuid(90), "allow", (PayloadOp("arguments.path", "b.md"),)))
    state, now = outcome.states[CTX], datetime(2026, 11, 29, tzinfo=UTC)
    mutation = mutation_contract(state, mutation_of(90), cause_operation_id=OP, created_at=now)
    assert (mutation.base_revision, mutation.committed_revision, mutation.source_kind.value,
            mutation.source_ref) == (2, 3, "hook", str(uuid(90)))
    revision = revision_contract(state, 3, commit_ref="commit-1", created_at=now)
    assert (revision.revision, revision.parent_revision, revision.record_watermark,
            revision.mutation_ids) == (3, 2, 2, (mutation_of(90),))
    # The manifest is content references and sources, not text: the raw words never appear.
    assert revision.effective_manifest_ref != revision_contract(
        state, 2, commit_ref="commit-0", created_at=now).effective_manifest_ref
    head = project_head(RoleContext(context_id=CTX, invocation_id=uuid(5),
                                    owner_node_task_id=uuid(6), role_key="react",
                                    record_head=0, effective_revision=1,
                                    active_snapshot_id=None, last_model_operation_id=None),
                        state)
    assert (head.record_head, head.effective_revision) == (2, 3)


@pytest.mark.covers("CTX-7.25", "CTX-5.6", "CTX-3.14")
def test_the_request_after_hooks_is_rebuilt_and_re_measured() -> None:
    from ctxspec.reference.history import project_history
    from ctxspec.reference.protection import ProtectedInput, check_protected_inputs
    from ctxspec.reference.tokens import ByteEstimator
    from ctxspec.reference.view import ModelView, estimation_request, render_request

    def request_of(state: ContextState) -> ModelView:
        # The write(...) call is still open (no result yet): this request shows the rest.
        view = project_history(ended_runs=[], recent_runs=2, source=_NoHistory(),
                               current_run_id=RUN, current_records=[
                                   r for r in effective_records(state)
                                   if r.record.message_kind != "assistant"
                                   or not r.tool_calls],
                               protected_input_ids={uuid(20)})
        assert isinstance(view, ModelView)
        return view

    registry = FieldRegistry("model.pre_request", "1", (FieldSpec("text", None, "string"),))
    call = HookCall(operation_id=OP, hook_point="model.pre_request", stage="pre",
                    actor_role="react", actor_context_id=CTX, call_id=None, call_record_id=None)
    state = append_records(root_context(), [RawRecord(
        record(uuid(13), 3, MessageRole.ASSISTANT, "assistant"), {"text": "short note"})],
        mutation_id=uuid(31), source_kind=MutationSourceKind.RUNTIME, source_ref="r").state
    before = request_of(state)
    outcome = decide(HookProposal(uuid(90), "allow", (), CTX, 3, (
        ContextOp(uuid(13), "text", Op.REPLACE_VALUE, "a much longer note " * 20),)),
        states={CTX: state}, call=call, registry=registry)
    after = request_of(outcome.states[CTX])
    estimator = ByteEstimator()
    grew = estimator.estimate(estimation_request(after)).tokens - \
        estimator.estimate(estimation_request(before)).tokens
    # Byte estimate: the text grew from 10 to 380 bytes, and the changed text now carries the
    # mark the provider receives with it (§2, §6: never passed off as the provider's); the rest
    # is the same.
    [marked] = [m for m in render_request(after).messages if m.marks]
    [mark] = marked.marks
    assert mark.kind == "text_modified"
    assert grew == len("a much longer note " * 20) - len("short note") + len(
        ("\n" + mark.text).encode())
    assert check_protected_inputs(after, [ProtectedInput(uuid(20), 1, "写一份报告")]) == ()


class _NoHistory:
    """A Session with no ended Run; every input was received and delivered in this one."""

    def user_inputs(self, run: EndedRun) -> list[InputOccurrence]:
        return []

    def root_records(self, run: EndedRun) -> list[EffectiveRecord]:
        return []

    def placement(self, input_id: UUID) -> InputPlacement:
        return InputPlacement(RUN, RUN)


# --- edge cases found in review -----------------------------------------------------------------


@pytest.mark.covers("CTX-3.60", "CTX-3.83")
def test_a_base_revision_that_does_not_exist_is_a_conflict_and_a_deny_stands() -> None:
    for base in (0, 9):
        for decision, control in (("deny", "blocked"), ("allow", "continue")):
            outcome = decide(HookProposal(uuid(90), decision, (), CTX, base, (
                ContextOp(DECISION, PATH, Op.REPLACE_VALUE, "b.md"),)))
            assert (outcome.control, codes(outcome)) == \
                (control, ["CONTEXT_REVISION_CONFLICT"])


@pytest.mark.covers("CTX-3.45", "CTX-3.83")
def test_payload_writes_are_checked_against_the_revision_the_item_read() -> None:
    moved = decide(HookProposal(uuid(89), "allow", (), CTX, 2, (
        ContextOp(DECISION, PATH, Op.REPLACE_VALUE, "x.md"),)))
    stale_reader = HookCall(operation_id=OP, hook_point="tool.pre_call", stage="pre",
                            actor_role="react", actor_context_id=CTX, call_id=CALL,
                            call_record_id=DECISION, read_revision=2)
    outcome = decide(HookProposal(uuid(90), "allow", (PayloadOp("arguments.path", "y.md"),)),
                     states=moved.states, call=stale_reader, payload=moved.payload)
    assert codes(outcome) == ["CONTEXT_REVISION_CONFLICT"]
    assert field_value(outcome.states[CTX], DECISION, PATH) == "x.md"


@pytest.mark.covers("CTX-3.65", "CTX-3.30")
def test_a_recovered_item_reuses_its_committed_change_and_is_not_validated_again() -> None:
    proposal = HookProposal(uuid(90), "allow", (PayloadOp("arguments.path", "b.md"),))
    first = decide(proposal)
    frozen = freeze(first.states[CTX], [DECISION])  # executed since; a new patch would be refused
    again = decide(proposal, states={CTX: frozen})
    assert again.invocation.patch_valid and codes(again) == []
    assert again.committed == first.committed and again.states[CTX] is frozen
    assert again.payload == {"name": "write", "arguments": {"path": "b.md"}}


def test_malformed_and_contextless_operations_are_refused() -> None:
    nameless = decide(HookProposal(uuid(90), "allow", (), None, None, (
        ContextOp(DECISION, PATH, Op.REPLACE_VALUE, "b.md"),)))
    assert codes(nameless) == ["INVALID_PATCH"]
    empty_segment = decide(HookProposal(uuid(90), "allow", (), CTX, 2, (
        ContextOp(DECISION, f"tool_call:{CALL}.arguments..path", Op.REPLACE_VALUE, "b.md"),)))
    assert codes(empty_segment) == ["FORBIDDEN_FIELD"]


@pytest.mark.covers("CTX-3.83")
def test_an_authorisation_change_at_the_same_head_is_a_conflict() -> None:
    state = change_authorisation(root_context(), Scope("private", owner_role="react"))
    outcome = decide(HookProposal(uuid(90), "allow", (), CTX, 2, (
        ContextOp(DECISION, PATH, Op.REPLACE_VALUE, "b.md"),)), states={CTX: state})
    assert codes(outcome) == ["CONTEXT_REVISION_CONFLICT"]


@pytest.mark.covers("CTX-3.47", "CTX-3.48")
def test_values_compare_as_json_so_true_is_not_one() -> None:
    clash = decide(HookProposal(uuid(90), "allow", (), CTX, 2, (
        ContextOp(DECISION, PATH, Op.REPLACE_VALUE, 1),
        ContextOp(DECISION, PATH, Op.REPLACE_VALUE, True))))
    assert codes(clash) == ["HOOK_PATCH_CONFLICT"]


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


@pytest.mark.covers("CTX-7.30")
def test_fixed_material_added_along_the_chain_adds_up() -> None:
    def measure(changes: object) -> int:
        return 3000

    budget = BudgetRoom(96_000, 100_000, measure)
    outcome = run_chain((HookProposal(uuid(90), "allow", (PayloadOp("arguments.path", "b.md"),)),
                         HookProposal(uuid(91), "allow", (PayloadOp("arguments.path", "c.md"),))),
                        PRE, PRE_CALL, {CTX: root_context()}, PAYLOAD, annotation_ids=Ids(),
                        budget=budget)
    # 96000 + 3000 fits; the second item would bring it to 102000 > B.
    assert [codes(i) for i in outcome.items] == [[], ["ITEM_DOES_NOT_FIT"]]
    assert outcome.payload["arguments"] == {"path": "b.md"}
