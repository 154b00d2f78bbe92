"""§3 scopes: a patch to another role's context is refused, shared fields are registered,
authorised and versioned (§1), and a change across scopes commits whole or not at all.

Expected values are written by hand from the design.
"""

import pytest

from ctxspec.reference.contracts import MessageRole, MutationSourceKind
from ctxspec.reference.contracts import PatchOperationKind as Op
from ctxspec.reference.effective import (
    ContextState,
    RawRecord,
    Scope,
    append_records,
    field_value,
    new_context,
)
from ctxspec.reference.hooks import ContextOp, HookCall, HookProposal
from tests.builders import uuid
from tests.hook_calls import CTX, OP, TEXT, codes, decide, record, root_context

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
