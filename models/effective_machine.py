"""A Hypothesis state machine over effective revisions and hook items (§3).

The machine appends model decisions (runtime records), runs hook items with random payload and
context patches against the current head or a stale base, repeats mutation ids, freezes
requests, and records what every step should have done. After every step it checks:

- no partial item is ever visible: a committed item's every change is in its revision, an item
  that did not commit changed nothing;
- raw records never change;
- every revision is immutable (its materialisation never changes) and traceable to mutations
  and their sources;
- a frozen request's records keep the content they had when it froze;
- a deny is never turned into an allow, and a replayed mutation id returns its first revision;
- several contexts and registries: another role's private context (an Executor's) is never
  written by this actor's items — an item addressing it is invalid (UNAUTHORISED_SCOPE) and
  commits nothing anywhere — and a registry version that registers no context field for the
  arguments refuses an item that patches them (FIELD_NOT_REGISTERED), whole.

``EffectiveContextMachine.reached`` counts what the runs reached (``ROWS``).
"""

from collections import Counter
from dataclasses import dataclass
from typing import ClassVar
from uuid import UUID

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from ctxspec.reference.contracts import ContextRecord, MessageRole, MutationSourceKind, PayloadRef
from ctxspec.reference.contracts import PatchOperationKind as Op
from ctxspec.reference.effective import (
    ContextState,
    RawRecord,
    Scope,
    append_records,
    effective_content,
    field_value,
    freeze,
    new_context,
)
from ctxspec.reference.hooks import (
    ContextOp,
    HookCall,
    HookItemOutcome,
    HookProposal,
    PayloadOp,
    evaluate,
    mutation_id_for,
)
from ctxspec.reference.registry import ABSENT, JSON, FieldRegistry, FieldSpec

CONTEXT = UUID(int=1)
OTHER = UUID(int=3)
"""Another role's private context (an Executor's), which this actor may never write."""
RUN = UUID(int=2)
REF = PayloadRef(digest="sha256:" + "0" * 64, size_bytes=0)
REGISTRY = FieldRegistry("tool.pre_call", "1", (
    FieldSpec("tool_call:{call_id}.arguments", "arguments", "object"),
    FieldSpec("text", None, "string"),
))
NARROW = FieldRegistry("tool.pre_call", "2", (
    FieldSpec(None, "arguments", "object"),
    FieldSpec("text", None, "string"),
))
"""A later registry version of the same point: the arguments are a payload field only, no
context field (a context patch of them is not registered)."""
ROWS = ("runtime append", "another role's append", "item committed", "item denied",
        "item failed", "illegal decision", "stale base refused", "replayed mutation",
        "request frozen", "another context refused", "unregistered field refused",
        "annotation committed")
VALUES = st.sampled_from(["a.md", "b.md", "c.md", "w", "r"])
NAMES = st.sampled_from(["path", "mode"])
STEPS = 30
"""Steps per example: enough for revisions to go stale under hook items and replays. How
many examples run is the Hypothesis profile's choice (tests/conftest.py)."""


@dataclass(frozen=True)
class Decision:
    record_id: UUID
    call_id: UUID


class EffectiveContextMachine(RuleBasedStateMachine):
    reached: ClassVar[Counter[str]] = Counter()

    def __init__(self) -> None:
        super().__init__()
        self.state: ContextState = new_context(CONTEXT, Scope("private", owner_role="react"))
        self.other: ContextState = new_context(OTHER, Scope("private", owner_role="executor"))
        self.other_decisions: list[Decision] = []
        self.other_revisions: dict[int, dict[UUID, dict[str, JSON]]] = {}
        self.next_id = 1000
        self.decisions: list[Decision] = []
        self.raw: dict[UUID, dict[str, JSON]] = {}
        self.materialised: dict[int, dict[UUID, dict[str, JSON]]] = {1: {}}
        self.frozen_content: dict[UUID, dict[str, JSON]] = {}
        self.used_hooks: list[UUID] = []
        """Hook invocation ids seen: reusing one is a recovered item (a replayed mutation)."""
        self.touched: dict[int, set[tuple[UUID, str]]] = {}
        """revision → the fields the hook mutation committed there changed (shadow record)."""

    def fresh(self) -> UUID:
        self.next_id += 1
        return UUID(int=self.next_id)

    def snapshot(self) -> dict[UUID, dict[str, JSON]]:
        return {raw.record_id: effective_content(self.state, raw.record_id)
                for raw in self.state.records}

    def remember_head(self) -> None:
        self.materialised.setdefault(self.state.head.revision, self.snapshot())

    # --- rules --------------------------------------------------------------------------------

    @precondition(lambda self: len(self.decisions) < 3)  # few targets: items collide often
    @rule(path=VALUES)
    def model_decides(self, path: str) -> None:
        """The model proposes write(path=...): a runtime append."""
        record_id, call_id = self.fresh(), self.fresh()
        seq = len(self.state.records) + 1
        content: dict[str, JSON] = {"text": "", f"tool_call:{call_id}": {
            "name": "write", "action_ordinal": 1, "arguments": {"path": path, "mode": "w"}}}
        record = ContextRecord(record_id=record_id, context_id=CONTEXT, context_seq=seq,
                               run_id=RUN, role=MessageRole.ASSISTANT, message_kind="assistant",
                               payload_ref=REF, operation_id=None, call_id=None,
                               origin_input_id=None)
        self.state = append_records(self.state, [RawRecord(record, content)],
                                    mutation_id=self.fresh(),
                                    source_kind=MutationSourceKind.RUNTIME,
                                    source_ref="model").state
        self.raw[record_id] = content
        self.decisions.append(Decision(record_id, call_id))
        self.remember_head()
        self.reached["runtime append"] += 1

    @precondition(lambda self: len(self.other_decisions) < 2)
    @rule(path=VALUES)
    def other_role_decides(self, path: str) -> None:
        """Another role (an Executor) appends to its own private context."""
        record_id, call_id = self.fresh(), self.fresh()
        content: dict[str, JSON] = {"text": "", f"tool_call:{call_id}": {
            "name": "write", "action_ordinal": 1, "arguments": {"path": path}}}
        record = ContextRecord(record_id=record_id, context_id=OTHER,
                               context_seq=len(self.other.records) + 1, run_id=RUN,
                               role=MessageRole.ASSISTANT, message_kind="assistant",
                               payload_ref=REF, operation_id=None, call_id=None,
                               origin_input_id=None)
        self.other = append_records(self.other, [RawRecord(record, content)],
                                    mutation_id=self.fresh(),
                                    source_kind=MutationSourceKind.RUNTIME,
                                    source_ref="executor").state
        self.raw[record_id] = content
        self.other_decisions.append(Decision(record_id, call_id))
        self.other_revisions[self.other.head.revision] = {
            raw.record_id: effective_content(self.other, raw.record_id)
            for raw in self.other.records}
        self.reached["another role's append"] += 1

    @precondition(lambda self: bool(self.decisions) and bool(self.other_decisions))
    @rule(data=st.data())
    def item_for_another_context(self, data: st.DataObject) -> None:
        """This actor's item addresses the Executor's private context: invalid, nothing
        committed in either context, whatever its decision (§3 scopes)."""
        target = data.draw(st.sampled_from(self.decisions))
        theirs = data.draw(st.sampled_from(self.other_decisions))
        call = HookCall(operation_id=self.fresh(), hook_point="tool.pre_call", stage="pre",
                        actor_role="react", actor_context_id=CONTEXT, call_id=target.call_id,
                        call_record_id=target.record_id)
        op = ContextOp(theirs.record_id, f"tool_call:{theirs.call_id}.arguments.path",
                       Op.REPLACE_VALUE, data.draw(VALUES))
        mine, other = self.state, self.other
        outcome = evaluate(HookProposal(self.fresh(), "allow", (), OTHER, None, (op,)), call,
                           data.draw(st.sampled_from([REGISTRY, NARROW])),
                           {CONTEXT: mine, OTHER: other}, {}, chain_position=0,
                           annotation_ids=lambda _: self.fresh())
        assert not outcome.invocation.patch_valid and outcome.committed == {}
        assert outcome.states[CONTEXT] is mine and outcome.states[OTHER] is other
        assert "UNAUTHORISED_SCOPE" in {d.code for d in outcome.invocation.diagnostics}
        self.reached["another context refused"] += 1

    @precondition(lambda self: bool(self.decisions))
    @rule(data=st.data())
    def hook_item(self, data: st.DataObject) -> None:
        target = data.draw(st.sampled_from(self.decisions))
        payload_ops = tuple(
            PayloadOp(f"arguments.{name}", data.draw(VALUES | st.just(ABSENT)))
            for name in data.draw(st.lists(NAMES, max_size=2)))
        context_ops = self._draw_context_ops(data, target)
        head = self.state.head.revision
        base = data.draw(st.integers(max(1, head - 3), head))
        decision = data.draw(st.sampled_from(["allow", "allow", "deny", "maybe"]))
        replay = bool(self.used_hooks) and data.draw(st.booleans())
        hook_id = data.draw(st.sampled_from(self.used_hooks)) if replay else self.fresh()
        mutation_id = mutation_id_for(hook_id, CONTEXT)
        registry = data.draw(st.sampled_from([REGISTRY, REGISTRY, NARROW]))
        call = HookCall(operation_id=self.fresh(), hook_point="tool.pre_call", stage="pre",
                        actor_role="react", actor_context_id=CONTEXT, call_id=target.call_id,
                        call_record_id=target.record_id)
        payload = effective_content(self.state, target.record_id)[f"tool_call:{target.call_id}"]
        before = self.state
        outcome = evaluate(HookProposal(hook_id, decision, payload_ops, CONTEXT, base,
                                        tuple(context_ops),
                                        handler_failed=data.draw(st.booleans())
                                        and decision == "allow" and not payload_ops),
                           call, registry, {CONTEXT: self.state, OTHER: self.other},
                           payload if isinstance(payload, dict) else {},
                           chain_position=0, annotation_ids=lambda _: self.fresh())
        assert outcome.states[OTHER] is self.other  # never written by this actor
        self.state = outcome.states[CONTEXT]
        replaces = any(op.operation is Op.REPLACE_VALUE for op in context_ops)
        if registry is NARROW and replaces and mutation_id not in before.mutations:
            # The arguments are no context field at version 2: the whole item is refused.
            assert not outcome.invocation.patch_valid and self.state is before
            self.reached["unregistered field refused"] += 1
        self._count(outcome, decision, before, replay and mutation_id in before.mutations)
        # A deny is never an allow; a failed or illegal item and a deny commit nothing.
        if decision == "deny":
            assert outcome.control == "blocked" and self.state is before
        if decision == "maybe" or outcome.invocation.decision.value == "failed":
            assert outcome.control == "continue" and self.state is before
        if not outcome.invocation.patch_valid:
            assert self.state is before and outcome.committed == {}
        if replay and mutation_id in before.mutations:
            # A replayed mutation id returns its original revision and applies nothing.
            assert self.state.revisions == before.revisions
        self._check_committed(outcome, before, base, mutation_id in before.mutations)
        if hook_id not in self.used_hooks:
            self.used_hooks.append(hook_id)
        self.remember_head()

    def _draw_context_ops(self, data: st.DataObject, target: Decision) -> list[ContextOp]:
        """Up to two replacements of a decision's arguments (whole or one field), then maybe an
        annotation of the target call."""
        context_ops = []
        for _ in range(data.draw(st.integers(0, 2))):
            other = data.draw(st.sampled_from(self.decisions))
            whole = data.draw(st.booleans())
            key = f"tool_call:{other.call_id}.arguments"
            value: JSON = {"path": data.draw(VALUES)} if whole else data.draw(VALUES)
            context_ops.append(ContextOp(other.record_id,
                                         key if whole else f"{key}.{data.draw(NAMES)}",
                                         Op.REPLACE_VALUE, value))
        if data.draw(st.booleans()):
            context_ops.append(ContextOp(target.record_id, "note", Op.APPEND_ANNOTATION,
                                         "sourced note"))
        return context_ops

    def _check_committed(self, outcome: HookItemOutcome, before: ContextState, base: int,
                         replayed: bool) -> None:
        """CAS and what a commit wrote: a field changed since the item's base is never
        overwritten; a committed change is the value its field now has."""
        mine = {(c.record_id, c.field_key) for _, c in outcome.changes.context_changes}
        changed_since_base = set().union(*(fields for number, fields in self.touched.items()
                                           if number > base))
        stale = any(record == theirs_record and (key == theirs or key.startswith(theirs + ".")
                                                 or theirs.startswith(key + "."))
                    for record, key in mine for theirs_record, theirs in changed_since_base)
        if stale and not replayed:
            # CAS: a field changed since the item's base is never silently overwritten.
            assert self.state is before and outcome.committed == {}
        if outcome.committed and self.state is not before:
            revision = outcome.committed[CONTEXT]
            self.touched[revision] = mine
            for _, change in outcome.changes.context_changes:
                assert field_value(self.state, change.record_id, change.field_key,
                                   revision) == change.value

    def _count(self, outcome: HookItemOutcome, decision: str, before: ContextState,
               replayed: bool) -> None:
        if replayed:
            self.reached["replayed mutation"] += 1
        elif decision == "maybe":
            self.reached["illegal decision"] += 1
        elif outcome.invocation.decision.value == "failed":
            self.reached["item failed"] += 1
        elif decision == "deny":
            self.reached["item denied"] += 1
        elif self.state is not before:
            self.reached["item committed"] += 1
            if any(c.field_key == "note" for _, c in outcome.changes.context_changes) or \
                    outcome.changes.annotations:
                self.reached["annotation committed"] += 1
        if any(d.code == "CONTEXT_REVISION_CONFLICT" for d in outcome.invocation.diagnostics):
            self.reached["stale base refused"] += 1

    @precondition(lambda self: bool(self.decisions))
    @rule(data=st.data())
    def freeze_a_request(self, data: st.DataObject) -> None:
        target = data.draw(st.sampled_from(self.decisions))
        self.state = freeze(self.state, [target.record_id])
        self.frozen_content.setdefault(target.record_id,
                                       effective_content(self.state, target.record_id))
        self.reached["request frozen"] += 1

    # --- invariants -----------------------------------------------------------------------------

    @invariant()
    def raw_never_changes(self) -> None:
        for raw in self.state.records:
            if raw.record_id in self.raw:
                assert raw.content == self.raw[raw.record_id]

    @invariant()
    def revisions_are_immutable(self) -> None:
        for number, expected in self.materialised.items():
            for record_id, content in expected.items():
                assert effective_content(self.state, record_id, number) == content

    @invariant()
    def revisions_trace_to_their_mutations(self) -> None:
        for revision in self.state.revisions[1:]:
            for mutation_id in revision.mutation_ids:
                done = self.state.mutations[mutation_id]
                assert done.committed_revision == revision.revision
                assert done.base_revision <= revision.parent if revision.parent else True
                assert done.source_ref
            for (_, _), override in revision.overrides.items():
                assert self.state.mutations[override.mutation_id].committed_revision <= \
                    revision.revision

    @invariant()
    def other_revisions_are_immutable(self) -> None:
        for number, expected in self.other_revisions.items():
            for record_id, content in expected.items():
                assert effective_content(self.other, record_id, number) == content
        for raw in self.other.records:
            assert raw.content == self.raw[raw.record_id]

    @invariant()
    def frozen_requests_keep_their_content(self) -> None:
        for record_id, content in self.frozen_content.items():
            assert effective_content(self.state, record_id) == content
