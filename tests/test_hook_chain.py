"""§3 hook decisions, the chain and the gate: each item reads the previous item's effective
version, a failed or illegal item drops only itself, a deny keeps the candidate unexecuted (§6), an
allow never lifts permission, quota, deadline or stop, fixed material adds up along the chain (§7).

Expected values are written by hand from the design.
"""

import json
from collections.abc import Mapping
from uuid import UUID

import pytest

from ctxspec.reference.contracts import PatchOperationKind as Op
from ctxspec.reference.effective import ContextState, field_value
from ctxspec.reference.hooks import (
    BudgetRoom,
    ChainOutcome,
    ContextOp,
    GateChecks,
    HookProposal,
    PayloadOp,
    denial_feedback,
    execution_gate,
    run_chain,
)
from tests.builders import uuid
from tests.hook_calls import CTX, DECISION, PATH, PAYLOAD, PRE, PRE_CALL, Ids, codes, root_context

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


# --- edge cases found in review -----------------------------------------------------------------


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
