"""Hook items and their patches (§3 "所有合法修改进入同一有效上下文", its normalisation and
conflict rules, "作用域、并发与版本"; §7 on hooks and budgets).

For one hook item, in the design's order:

1. :func:`normalise` turns the item's payload_patch and context_patch into one semantic change
   set, resolved against the input the item read: payload paths map to context fields through
   the hook point's registry; equal writes to one field collapse into one change with every
   source path; a parent replacement and a child write are compared by the child's final value
   (deletion included); any difference, or an overlap that cannot be proved consistent, makes
   the whole item invalid with HOOK_PATCH_CONFLICT. No side wins, and the order of writes never
   matters (CTX-3.41 to CTX-3.50).
2. Only then :func:`validate` checks the whole candidate: forbidden fields, scope and
   authorisation, registration, schema, protected inputs, frozen facts, the post stage, and
   whether the item's own new fixed material can fit at all (CTX-3.51, CTX-3.55, CTX-3.56,
   CTX-3.78, CTX-3.92, CTX-3.93, CTX-7.30, CTX-7.31).
3. :func:`evaluate` combines the control decision with the patch: an allow with a valid patch
   commits one mutation per scope touched, all or nothing; an allow with an invalid patch, or
   whose commit meets CONTEXT_REVISION_CONFLICT, continues with the previous effective version;
   a deny blocks whatever its patch; a handler failure or an illegal decision drops only this
   item (CTX-3.52, CTX-3.59 to CTX-3.61, CTX-3.84, CTX-3.85).

:func:`run_chain` runs the items in order, each reading the previous item's effective payload
and revision (CTX-3.62, CTX-3.63). :func:`execution_gate` is applied after the chain: an allow
never lifts a missing permission, an exhausted quota, a passed deadline or a stop (CTX-3.93).
"""

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import combinations
from typing import Literal
from uuid import UUID

from ctxspec.reference.contracts import (
    HookDecision,
    HookDiagnostic,
    HookInvocation,
    MutationSourceKind,
    PatchOperationKind,
)
from ctxspec.reference.effective import (
    ContextState,
    FieldChange,
    FieldValue,
    RawRecord,
    RevisionConflict,
    check_base,
    commit_across,
)
from ctxspec.reference.errors import ErrorCode
from ctxspec.reference.hook_changes import (
    EMPTY_CHANGES,
    Annotation,
    ChangeSet,
    ContextOp,
    HookCall,
    HookProposal,
    PayloadOp,
    Stage,
)
from ctxspec.reference.hook_writes import (
    MUTATION_NAMESPACE,
    apply_to_payload,
    mutation_id_for,
    replayed,
    scoped_parts,
)
from ctxspec.reference.registry import (
    ABSENT,
    JSON,
    FieldRegistry,
    FieldSpec,
    _Absent,
    forbidden,
    is_within,
    kind_accepts,
    value_at,
    well_formed,
)


@dataclass(frozen=True)
class _Write:
    scope: UUID | None
    target: UUID | None
    """The record for a context write; None for a payload-only write."""
    key: str
    value: FieldValue
    source: str


def _diag(code: str, field_key: str | None, detail: str) -> HookDiagnostic:
    return HookDiagnostic(code=code, field_key=field_key, detail=detail)


# --- 1. normalisation -------------------------------------------------------------------------


def same_value(a: FieldValue, b: FieldValue) -> bool:
    """Equality of final values as JSON (so True is not 1, and 1 is not 1.0)."""
    if isinstance(a, _Absent) or isinstance(b, _Absent):
        return isinstance(a, _Absent) and isinstance(b, _Absent)
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def _consistent(a: _Write, b: _Write, expandable: Callable[[_Write], bool]) -> bool | None:
    """Whether two overlapping writes agree on every final value; None if unprovable."""
    if a.key == b.key:
        return same_value(a.value, b.value)
    parent, child = (a, b) if is_within(b.key, a.key) else (b, a)
    if not expandable(parent):
        return None
    rest = child.key[len(parent.key) + 1:].split(".")
    under = value_at(parent.value, rest) if isinstance(parent.value, dict) else ABSENT
    return same_value(under, child.value)


def normalise(proposal: HookProposal, call: HookCall,
              registry: FieldRegistry) -> ChangeSet | tuple[HookDiagnostic, ...]:
    """One semantic change set from both patches, or HOOK_PATCH_CONFLICT. Nothing else is
    judged here: registration, schema and authorisation come after, on a conflict-free set
    (CTX-3.51).  CTX-3.41 to CTX-3.50"""
    writes, annotations = _writes(proposal, call, registry)

    def expandable(parent: _Write) -> bool:
        """A parent can be expanded only through a registered object schema (CTX-3.49)."""
        if parent.target is None:
            payload_spec = registry.payload_spec(parent.key)
            return payload_spec is not None and (payload_spec.kind == "object"
                                                 or payload_spec.payload_path != parent.key)
        spec = registry.spec_for_context(parent.key, call.call_id)
        return spec is not None and (spec[0].kind == "object" or spec[1] != parent.key)

    conflicts = _conflicts(writes, expandable)
    if conflicts:
        return conflicts
    return _merged(writes, annotations)


def _writes(proposal: HookProposal, call: HookCall,
            registry: FieldRegistry) -> tuple[list[_Write], list[Annotation]]:
    """Both patches as writes on one footing: a payload path mapped to the call's context field
    where the registry has one (CTX-3.44); annotations apart, in the item's order."""
    writes: list[_Write] = []
    for op in proposal.payload_ops:
        key = registry.context_key_of_payload(op.path, call.call_id)
        if key is not None:
            writes.append(_Write(call.actor_context_id, call.call_record_id, key, op.value,
                                 f"payload:{op.path}"))
        else:  # a payload-only field, or one validation will refuse as unregistered
            writes.append(_Write(None, None, op.path, op.value, f"payload:{op.path}"))
    annotations: list[Annotation] = []
    for cop in proposal.context_ops:
        if cop.operation is PatchOperationKind.APPEND_ANNOTATION:
            annotations.append(Annotation(proposal.context_id, cop.target_record_id,
                                          cop.field_key, cop.value))
        else:
            writes.append(_Write(proposal.context_id, cop.target_record_id, cop.field_key,
                                 cop.value, f"context:{cop.field_key}"))
    return writes, annotations


def _conflicts(writes: Sequence[_Write],
               expandable: Callable[[_Write], bool]) -> tuple[HookDiagnostic, ...]:
    """HOOK_PATCH_CONFLICT for every overlapping pair that disagrees, or that cannot be proved
    to agree; no side wins (CTX-3.47, CTX-3.48)."""
    conflicts: list[HookDiagnostic] = []
    for a, b in combinations(writes, 2):
        if a.target != b.target or not (is_within(a.key, b.key) or is_within(b.key, a.key)):
            continue
        if a.target is not None and a.scope != b.scope:
            conflicts.append(_diag("HOOK_PATCH_CONFLICT", a.key,
                                   "the same record addressed in two scopes"))
            continue
        agreed = _consistent(a, b, expandable)
        if agreed is not True:
            why = "cannot be proved consistent" if agreed is None else "disagree"
            conflicts.append(_diag("HOOK_PATCH_CONFLICT", min(a.key, b.key),
                                   f"{a.source} and {b.source} {why}"))
    return tuple(conflicts)


def _merged(writes: Sequence[_Write], annotations: Sequence[Annotation]) -> ChangeSet:
    """The conflict-free writes as one change set: a write within an agreeing parent folds into
    it, equal writes collapse into one change with every source path."""
    merged: dict[tuple[UUID | None, UUID | None, str], tuple[_Write, tuple[str, ...]]] = {}
    for write in writes:
        if any(other.target == write.target and other.key != write.key
               and is_within(write.key, other.key) for other in writes):
            continue  # within a parent replacement that agrees with it
        sources = tuple(sorted({w.source for w in writes if w.target == write.target
                                and is_within(w.key, write.key)}))
        merged.setdefault((write.scope, write.target, write.key), (write, sources))
    context_changes = sorted(
        ((w.scope, FieldChange(w.target, w.key, w.value, sources))
         for w, sources in merged.values() if w.target is not None),
        key=lambda item: (str(item[0]), str(item[1].record_id), item[1].field_key))
    payload_only = sorted((w.key, w.value, sources) for w, sources in merged.values()
                          if w.target is None)
    return ChangeSet(tuple(context_changes), tuple(payload_only), tuple(annotations))


# --- 2. validation ----------------------------------------------------------------------------


@dataclass(frozen=True)
class BudgetRoom:
    """§7: the fixed input before this item and the input budget B; ``measure`` gives the new
    non-compressible tokens an item's change set adds."""

    fixed_before: int
    input_budget: int
    measure: Callable[[ChangeSet], int]


def _may_write(state: ContextState, call: HookCall) -> bool:
    """Scope authorisation from the trusted runtime identity (CTX-3.32, CTX-3.40, CTX-3.74)."""
    if state.scope.kind == "private":
        return call.actor_context_id == state.context_id and \
            state.scope.owner_role == call.actor_role
    return state.context_id in call.authorised_scopes


def validate(changes: ChangeSet, call: HookCall, registry: FieldRegistry,
             states: Mapping[UUID, ContextState], read_revisions: Mapping[UUID, int],
             budget: BudgetRoom | None = None) -> tuple[HookDiagnostic, ...]:
    """Validate the whole conflict-free candidate; empty means every change may be committed.
    ``read_revisions`` are the revisions the item read (each within 1..head).
    CTX-3.32, CTX-3.39, CTX-3.40, CTX-3.46, CTX-3.51, CTX-3.55, CTX-3.56, CTX-3.78, CTX-3.92,
    CTX-3.93, CTX-7.30"""
    found: list[HookDiagnostic] = []
    for context_id, change in changes.context_changes:
        found.extend(_change_problems(context_id, change, call, registry, states,
                                      read_revisions))
    found.extend(_payload_problems(changes, registry))
    for note in changes.annotations:
        if not isinstance(note.text, str):
            found.append(_diag("INVALID_ANNOTATION", note.field_key, "an annotation is text"))
        elif forbidden(note.field_key):
            found.append(_diag("FORBIDDEN_FIELD", note.field_key, "never annotatable"))
        else:
            target = _target(note.context_id, note.target_record_id, note.field_key,
                             "annotation", call, states, read_revisions)
            if isinstance(target, HookDiagnostic):
                found.append(target)
    if budget is not None and not found:
        added = budget.measure(changes)
        if budget.fixed_before + added > budget.input_budget:
            found.append(_diag("ITEM_DOES_NOT_FIT", None,
                               f"its own fixed material ({added} tokens) cannot fit: "
                               f"{budget.fixed_before} + {added} > B = {budget.input_budget}"))
    return tuple(found)


def _target(context_id: UUID | None, record_id: UUID, key: str, what: str, call: HookCall,
            states: Mapping[UUID, ContextState], read_revisions: Mapping[UUID, int]
            ) -> tuple[ContextState, RawRecord] | HookDiagnostic:
    """The context and record a context operation or an annotation addresses, or why this
    actor may not address it: no context named, a scope not its own, a record outside the
    revision it read, a shared record's unregistered field."""
    if context_id is None:
        return _diag("INVALID_PATCH", key, f"a context {what} names its context")
    state = states.get(context_id)
    if state is None or not _may_write(state, call):
        return _diag("UNAUTHORISED_SCOPE", key,
                     f"context {context_id} is not this actor's to write")
    raw = state.record(record_id)
    revision = state.revision(read_revisions.get(context_id, state.head.revision))
    if raw is None or raw.record.context_seq > revision.record_watermark:
        return _diag("UNKNOWN_TARGET", key, f"record {record_id} is not in "
                     f"revision {revision.revision} of context {context_id}")
    if state.scope.kind == "shared" and not state.scope.registers(record_id, key):
        return _diag("FIELD_NOT_REGISTERED", key, "not a registered shared field")
    return state, raw


def _change_problems(context_id: UUID | None, change: FieldChange, call: HookCall,
                     registry: FieldRegistry, states: Mapping[UUID, ContextState],
                     read_revisions: Mapping[UUID, int]) -> list[HookDiagnostic]:
    """What refuses one context field change: a forbidden or malformed key, its target, an
    unregistered field, its schema, a protected input, a frozen fact, the post stage."""
    key = change.field_key
    if not well_formed(key) or forbidden(key):
        return [_diag("FORBIDDEN_FIELD", key, "identities, raw text, permissions, quotas, "
                      "deadlines and stopped state are never writable, and a field key is "
                      "root.name.name, never a view path")]
    target = _target(context_id, change.record_id, key, "operation", call, states,
                     read_revisions)
    if isinstance(target, HookDiagnostic):
        return [target]
    state, raw = target
    spec = registry.spec_for_context(key, call.call_id)
    if spec is None:
        return [_diag("FIELD_NOT_REGISTERED", key, f"not writable at "
                      f"{registry.hook_point}@{registry.version}")]
    found = _schema(spec[0], spec[1] == key, key, change.value)
    if raw.record.message_kind == "user_ref":
        found.append(_diag("PROTECTED_INPUT", key, "a user input is never overwritten"))
    if change.record_id in state.frozen:
        found.append(_diag("FROZEN_FACT", key, "a frozen or executed request takes "
                           "annotations only"))
    if call.stage == "post" and change.record_id != call.call_record_id:
        found.append(_diag("POST_STAGE_TARGET", key, "a post-response hook changes only "
                           "this call's undelivered response"))
    return found


def _payload_problems(changes: ChangeSet, registry: FieldRegistry) -> list[HookDiagnostic]:
    """What refuses a payload-only write: a forbidden path, an unregistered one, its schema."""
    found: list[HookDiagnostic] = []
    for path, value, _ in changes.payload_only:
        payload_spec = registry.payload_spec(path)
        if not well_formed(path) or forbidden(path):
            found.append(_diag("FORBIDDEN_FIELD", path, "not a writable payload field"))
        elif payload_spec is None:
            found.append(_diag("FIELD_NOT_REGISTERED", path, f"payload path not registered "
                               f"at {registry.hook_point}@{registry.version}"))
        else:
            found.extend(_schema(payload_spec, payload_spec.payload_path == path, path, value))
    return found


def _schema(spec: FieldSpec, whole: bool, key: str,
            value: FieldValue) -> list[HookDiagnostic]:
    """The value against the registered schema: the field's kind for a whole-field write (the
    children of an object field have no schema of their own); a required field is never
    deleted."""
    if isinstance(value, _Absent) and spec.required and whole:
        return [_diag("SCHEMA_MISMATCH", key, "a required field is never deleted")]
    if whole and not kind_accepts(spec.kind, value):
        return [_diag("SCHEMA_MISMATCH", key, f"expected {spec.kind}")]
    return []


# --- 3. the decision with its patch -------------------------------------------------------------


Control = Literal["continue", "blocked"]


@dataclass(frozen=True)
class HookItemOutcome:
    """Everything one hook item commits as one write set (CTX-3.52): the decision with its
    diagnostics and cursor, the mutation's revisions per scope, the effective payload after it.
    """

    invocation: HookInvocation
    control: Control
    changes: ChangeSet
    states: Mapping[UUID, ContextState]
    payload: Mapping[str, JSON]
    """The effective payload the next item (or the handler) reads."""
    candidate_payload: Mapping[str, JSON]
    """For a deny: what the item proposed, recorded with "not executed" (CTX-3.70)."""
    committed: Mapping[UUID, int] = field(default_factory=dict)
    """context_id → the revision this item's mutation produced (empty if nothing committed)."""


@dataclass(frozen=True)
class _Item:
    """The hook item being decided, with what its outcome records of it."""

    proposal: HookProposal
    call: HookCall
    registry: FieldRegistry
    chain_position: int
    states: Mapping[UUID, ContextState]
    payload: Mapping[str, JSON]

    def outcome(self, decision: HookDecision, control: Control, changes: ChangeSet,
                diagnostics: Sequence[HookDiagnostic], valid: bool,
                new_states: Mapping[UUID, ContextState] | None = None,
                new_payload: Mapping[str, JSON] | None = None,
                candidate: Mapping[str, JSON] | None = None,
                committed: Mapping[UUID, int] | None = None) -> HookItemOutcome:
        """The item's HookInvocation and write set; what is not given stays as it was."""
        invocation = HookInvocation(
            hook_invocation_id=self.proposal.hook_invocation_id,
            operation_id=self.call.operation_id, hook_point=self.call.hook_point,
            chain_position=self.chain_position, decision=decision, patch_valid=valid,
            change_set_hash=None if changes.empty else changes.digest(),
            registry_version=f"{self.registry.hook_point}@{self.registry.version}",
            diagnostics=tuple(diagnostics))
        return HookItemOutcome(
            invocation, control, changes, self.states if new_states is None else new_states,
            self.payload if new_payload is None else new_payload,
            self.payload if candidate is None else candidate, committed or {})


def evaluate(proposal: HookProposal, call: HookCall, registry: FieldRegistry,
             states: Mapping[UUID, ContextState], payload: Mapping[str, JSON], *,
             chain_position: int, annotation_ids: Callable[[int], UUID],
             budget: BudgetRoom | None = None) -> HookItemOutcome:
    """Decide one hook item: control decision and patch are validated separately.
    CTX-3.52, CTX-3.59, CTX-3.60, CTX-3.61, CTX-3.65, CTX-3.70, CTX-3.71, CTX-3.84, CTX-3.85"""
    item = _Item(proposal, call, registry, chain_position, states, payload)
    if proposal.handler_failed:
        return item.outcome(HookDecision.FAILED, "continue", EMPTY_CHANGES,
                            [_diag("HOOK_FAILED", None, "the handler failed or timed out; "
                                   "only this item is dropped")], valid=False)
    if proposal.decision not in ("allow", "deny"):
        return item.outcome(HookDecision.FAILED, "continue", EMPTY_CHANGES,
                            [_diag("ILLEGAL_DECISION", None,
                                   f"{proposal.decision!r} is not allow or deny")], valid=False)
    decision = HookDecision(proposal.decision)
    control: Control = "blocked" if decision is HookDecision.DENY else "continue"
    replay = replayed(proposal, call, registry, states, payload)
    if replay is not None and decision is HookDecision.ALLOW:
        # Committed before (a recovery): reuse it, never validate or apply it again.
        changes, revisions = replay
        after = apply_to_payload(payload, changes, call, registry)
        return item.outcome(decision, control, changes, (), valid=True, new_payload=after,
                            candidate=after, committed=revisions)
    read = _read_revisions(proposal, call, states)
    out_of_range = [_diag(ErrorCode.CONTEXT_REVISION_CONFLICT.value, None,
                          f"revision {number} of context {cid} does not exist")
                    for cid, number in read.items()
                    if cid in states and not 1 <= number <= states[cid].head.revision]
    if out_of_range:
        return item.outcome(decision, control, EMPTY_CHANGES, out_of_range, valid=False)
    normalised = normalise(proposal, call, registry)
    if not isinstance(normalised, ChangeSet):
        return item.outcome(decision, control, EMPTY_CHANGES, normalised, valid=False)
    problems = validate(normalised, call, registry, states, read, budget)
    if problems:
        return item.outcome(decision, control, normalised, problems, valid=False)
    return _decided(item, decision, control, normalised, read, annotation_ids)


def _read_revisions(proposal: HookProposal, call: HookCall,
                    states: Mapping[UUID, ContextState]) -> dict[UUID, int]:
    """The revision the item read of each context: the head, the actor's read revision, the
    patch's own base_revision where it gives one (CTX-3.45)."""
    read = {cid: s.head.revision for cid, s in states.items()}
    if call.actor_context_id is not None and call.read_revision is not None:
        read[call.actor_context_id] = call.read_revision
    if proposal.context_id is not None and proposal.base_revision is not None:
        read[proposal.context_id] = proposal.base_revision
    return read


def _decided(item: _Item, decision: HookDecision, control: Control, normalised: ChangeSet,
             read: Mapping[UUID, int],
             annotation_ids: Callable[[int], UUID]) -> HookItemOutcome:
    """A legal decision with a valid patch: a deny records it and commits nothing; an allow
    commits one mutation per scope, all or nothing, with CAS on the revision it read."""
    proposal, call, states = item.proposal, item.call, item.states
    parts = scoped_parts(normalised, states, read, proposal, call, annotation_ids)
    candidate = apply_to_payload(item.payload, normalised, call, item.registry)
    if decision is HookDecision.DENY:
        # A deny commits nothing; a stale base is still diagnosed, the deny stands.
        stale = [_diag(ErrorCode.CONTEXT_REVISION_CONFLICT.value, None, verdict.reason)
                 for part in parts
                 if isinstance(verdict := check_base(states[part.context_id], part.changes,
                                                     part.base_revision), RevisionConflict)]
        # The recorded candidate is what would have run: with a stale patch, the previous
        # effective values (the invalid change is recorded only as a diagnostic).
        return item.outcome(decision, control, normalised, stale, valid=not stale,
                            candidate=item.payload if stale else candidate)
    committed = commit_across(
        states, parts,
        mutation_ids={p.context_id: mutation_id_for(proposal.hook_invocation_id, p.context_id)
                      for p in parts},
        source_kind=MutationSourceKind.HOOK, source_ref=str(proposal.hook_invocation_id))
    if isinstance(committed, RevisionConflict):
        return item.outcome(decision, control, normalised,
                            [_diag(ErrorCode.CONTEXT_REVISION_CONFLICT.value, None,
                                   committed.reason)], valid=False)
    new_states = {**states, **{cid: c.state for cid, c in committed.items()}}
    return item.outcome(decision, control, normalised, (), valid=True, new_states=new_states,
                        new_payload=candidate, candidate=candidate,
                        committed={cid: c.revision for cid, c in committed.items()})


# --- the ordered chain and the gate -------------------------------------------------------------


@dataclass(frozen=True)
class ChainOutcome:
    items: tuple[HookItemOutcome, ...]
    states: Mapping[UUID, ContextState]
    payload: Mapping[str, JSON]
    blocked: bool


def run_chain(proposals: Sequence[HookProposal], call: HookCall, registry: FieldRegistry,
              states: Mapping[UUID, ContextState], payload: Mapping[str, JSON], *,
              annotation_ids: Callable[[int, int], UUID], budget: BudgetRoom | None = None,
              start: int = 0) -> ChainOutcome:
    """Run hook items in order from ``start`` (the cursor); each reads the previous item's
    effective payload and revisions, and the fixed material earlier items added counts against
    later ones; a deny stops the chain.  CTX-3.62, CTX-3.63, CTX-7.30"""
    items: list[HookItemOutcome] = []
    for position, proposal in enumerate(proposals[start:], start=start):
        def ids_of_item(index: int, position: int = position) -> UUID:
            return annotation_ids(position, index)

        # The first item read what the call says; each later one reads the previous item's head.
        item_call = call if position == start else replace(call, read_revision=None)
        item = evaluate(proposal, item_call, registry, states, payload,
                        chain_position=position, annotation_ids=ids_of_item, budget=budget)
        items.append(item)
        if item.committed and budget is not None:
            budget = replace(budget, fixed_before=budget.fixed_before
                             + budget.measure(item.changes))
        states, payload = item.states, item.payload
        if item.control == "blocked":
            return ChainOutcome(tuple(items), states, payload, blocked=True)
    return ChainOutcome(tuple(items), states, payload, blocked=False)


@dataclass(frozen=True)
class GateChecks:
    """The checks an allow never lifts (CTX-3.93)."""

    tool_allowed: bool
    quota_left: int
    deadline_passed: bool
    stopped: bool


def execution_gate(chain: ChainOutcome, checks: GateChecks
                   ) -> Literal["execute", "denied", "not_permitted", "quota_exhausted",
                                "deadline_passed", "stopped"]:
    """Whether the call may run after its pre-hooks: a deny blocks; an allow still needs the
    role's permission, quota, time and a Run that is not stopped.  CTX-3.93"""
    if checks.stopped:
        return "stopped"
    if checks.deadline_passed:
        return "deadline_passed"
    if not checks.tool_allowed:
        return "not_permitted"
    if checks.quota_left <= 0:
        return "quota_exhausted"
    if chain.blocked:
        return "denied"
    return "execute"


def denial_feedback(stage: Stage, hook_invocation_id: UUID,
                    candidate: Mapping[str, JSON]) -> str:
    """The model-visible result of a denied call: a pre-hook deny says it did not run and keeps
    the candidate arguments; a post-hook deny says it ran and its result is not delivered.
    Never a made-up success (CTX-3.18, CTX-3.70, CTX-3.71, CTX-6.11)."""
    document: dict[str, JSON] = {"status": "denied", "stage": stage,
                                 "executed": stage == "post",
                                 "hook_invocation_id": str(hook_invocation_id)}
    if stage == "pre":
        document["candidate"] = dict(candidate)
    else:
        document["result_delivered"] = False
    return json.dumps(document, sort_keys=True, ensure_ascii=False)


# The item vocabulary (reference/hook_changes.py) is re-exported: callers import it from here.
__all__ = [
    "EMPTY_CHANGES",
    "MUTATION_NAMESPACE",
    "Annotation",
    "BudgetRoom",
    "ChainOutcome",
    "ChangeSet",
    "ContextOp",
    "Control",
    "GateChecks",
    "HookCall",
    "HookItemOutcome",
    "HookProposal",
    "PayloadOp",
    "Stage",
    "apply_to_payload",
    "denial_feedback",
    "evaluate",
    "execution_gate",
    "mutation_id_for",
    "normalise",
    "run_chain",
    "same_value",
    "validate",
]
