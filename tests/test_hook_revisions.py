"""§3 revisions, idempotency and CAS: a mutation committed twice returns the original revision,
appends never conflict and an untouched field rebases, a stale patch on a changed field or a
changed authorisation is a revision conflict, a recovered item reuses its committed change.

Expected values are written by hand from the design.
"""

import pytest

from ctxspec.reference.contracts import MessageRole, MutationSourceKind
from ctxspec.reference.contracts import PatchOperationKind as Op
from ctxspec.reference.effective import (
    FieldChange,
    RawRecord,
    RevisionConflict,
    Scope,
    append_records,
    change_authorisation,
    commit_changes,
    field_value,
    freeze,
)
from ctxspec.reference.hooks import ContextOp, HookCall, HookProposal, PayloadOp
from tests.builders import uuid
from tests.hook_calls import (
    CALL,
    CTX,
    DECISION,
    OP,
    PATH,
    RESULT,
    codes,
    decide,
    mutation_of,
    record,
    root_context,
)

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


@pytest.mark.covers("CTX-3.83")
def test_an_authorisation_change_at_the_same_head_is_a_conflict() -> None:
    state = change_authorisation(root_context(), Scope("private", owner_role="react"))
    outcome = decide(HookProposal(uuid(90), "allow", (), CTX, 2, (
        ContextOp(DECISION, PATH, Op.REPLACE_VALUE, "b.md"),)), states={CTX: state})
    assert codes(outcome) == ["CONTEXT_REVISION_CONFLICT"]
