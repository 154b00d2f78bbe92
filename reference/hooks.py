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

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from typing import Literal
from uuid import UUID

from ctxspec.reference.contracts import (
    ContextRecord,
    HookDecision,
    HookDiagnostic,
    HookInvocation,
    MessageRole,
    MutationSourceKind,
    PatchOperationKind,
    PayloadRef,
)
from ctxspec.reference.effective import (
    ContextState,
    FieldChange,
    FieldValue,
    RawRecord,
    RevisionConflict,
    ScopedChange,
    commit_across,
)
from ctxspec.reference.errors import ErrorCode
from ctxspec.reference.registry import (
    ABSENT,
    JSON,
    FieldRegistry,
    _Absent,
    forbidden,
    is_within,
    kind_accepts,
    value_at,
    with_value,
)

Stage = Literal["pre", "post"]


@dataclass(frozen=True)
class PayloadOp:
    """A payload_patch write: a payload path and its new value (ABSENT deletes it)."""

    path: str
    value: FieldValue


@dataclass(frozen=True)
class ContextOp:
    """A context_patch operation with its value resolved from value_ref."""

    target_record_id: UUID
    field_key: str
    operation: PatchOperationKind
    value: JSON


@dataclass(frozen=True)
class HookProposal:
    """What one hook item returned."""

    hook_invocation_id: UUID
    decision: str
    """"allow" and "deny" are the legal decisions; anything else is an illegal decision."""
    payload_ops: tuple[PayloadOp, ...] = ()
    context_id: UUID | None = None
    """ContextPatch.context_id: the scope the context operations address."""
    base_revision: int | None = None
    """ContextPatch.base_revision; default: the revision the item read."""
    context_ops: tuple[ContextOp, ...] = ()
    handler_failed: bool = False
    """The handler raised or timed out: the hook failure rule applies."""


@dataclass(frozen=True)
class HookCall:
    """The trusted runtime identity of the call a hook item runs for."""

    operation_id: UUID
    hook_point: str
    stage: Stage
    actor_role: str | None
    """The role whose call this is; None for an outer node without a RoleContext."""
    actor_context_id: UUID | None
    call_id: UUID | None
    call_record_id: UUID | None
    """The record that holds this call's fields: the decision (pre) or the result (post)."""
    authorised_scopes: frozenset[UUID] = frozenset()
    """Shared scopes this actor may write."""


@dataclass(frozen=True)
class ChangeSet:
    """The normalised change set of one hook item."""

    context_changes: tuple[tuple[UUID, FieldChange], ...]
    """(context_id, change), sorted by context, record and field."""
    payload_only: tuple[tuple[str, FieldValue, tuple[str, ...]], ...]
    """Payload fields with no context field (e.g. a request parameter): path, value, sources."""
    annotations: tuple[tuple[UUID, UUID, str], ...]
    """(context_id, target_record_id, text) in the order the item gave them."""

    def digest(self) -> str:
        def show(value: FieldValue) -> JSON:
            return {"$absent": True} if isinstance(value, _Absent) else value

        document = {
            "context": [[str(cid), str(c.record_id), c.field_key, show(c.value),
                         list(c.source_paths)] for cid, c in self.context_changes],
            "payload": [[path, show(value), list(sources)]
                        for path, value, sources in self.payload_only],
            "annotations": [[str(cid), str(rid), text] for cid, rid, text in self.annotations],
        }
        canonical = json.dumps(document, sort_keys=True, ensure_ascii=False)
        return "sha256:" + hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()

    @property
    def empty(self) -> bool:
        return not (self.context_changes or self.payload_only or self.annotations)


EMPTY_CHANGES = ChangeSet((), (), ())


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


def _consistent(a: _Write, b: _Write, expandable: Callable[[_Write], bool]) -> bool | None:
    """Whether two overlapping writes agree on every final value; None if unprovable."""
    if a.key == b.key:
        return a.value == b.value
    parent, child = (a, b) if is_within(b.key, a.key) else (b, a)
    if not expandable(parent):
        return None
    rest = child.key[len(parent.key) + 1:].split(".")
    under = value_at(parent.value, rest) if isinstance(parent.value, dict) else ABSENT
    return under == child.value


def normalise(proposal: HookProposal, call: HookCall,
              registry: FieldRegistry) -> ChangeSet | tuple[HookDiagnostic, ...]:
    """One semantic change set from both patches, or the diagnostics that invalidate the item
    (HOOK_PATCH_CONFLICT, or a payload path the registry does not know).  CTX-3.41 to CTX-3.50
    """
    writes: list[_Write] = []
    problems: list[HookDiagnostic] = []
    for op in proposal.payload_ops:
        key = registry.context_key_of_payload(op.path, call.call_id)
        if key is not None:
            writes.append(_Write(call.actor_context_id, call.call_record_id, key, op.value,
                                 f"payload:{op.path}"))
        elif registry.payload_spec(op.path) is not None:
            writes.append(_Write(None, None, op.path, op.value, f"payload:{op.path}"))
        else:
            problems.append(_diag("FIELD_NOT_REGISTERED", op.path,
                                  f"payload path {op.path!r} is not registered at "
                                  f"{registry.hook_point}@{registry.version}"))
    annotations: list[tuple[UUID, UUID, str]] = []
    for cop in proposal.context_ops:
        if cop.operation is PatchOperationKind.APPEND_ANNOTATION:
            if proposal.context_id is None or not isinstance(cop.value, str):
                problems.append(_diag("INVALID_ANNOTATION", cop.field_key,
                                      "an annotation is text in a named context"))
                continue
            annotations.append((proposal.context_id, cop.target_record_id, cop.value))
        else:
            writes.append(_Write(proposal.context_id, cop.target_record_id, cop.field_key,
                                 cop.value, f"context:{cop.field_key}"))
    if problems:
        return tuple(problems)

    def expandable(parent: _Write) -> bool:
        """A parent can be expanded only through a registered object schema (CTX-3.49)."""
        if parent.target is None:
            payload_spec = registry.payload_spec(parent.key)
            return payload_spec is not None and (payload_spec.kind == "object"
                                                 or payload_spec.payload_path != parent.key)
        spec = registry.spec_for_context(parent.key, call.call_id)
        return spec is not None and (spec[0].kind == "object" or spec[1] != parent.key)

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
    if conflicts:
        return tuple(conflicts)

    survivors = []
    for write in writes:
        if any(other.target == write.target and other.key != write.key
               and is_within(write.key, other.key) for other in writes):
            continue  # within a parent replacement that agrees with it
        sources = tuple(sorted({w.source for w in writes if w.target == write.target
                                and is_within(w.key, write.key)}))
        survivors.append((write, sources))
    unique: dict[tuple[UUID | None, UUID | None, str], tuple[_Write, tuple[str, ...]]] = {}
    for write, sources in survivors:
        unique.setdefault((write.scope, write.target, write.key), (write, sources))
    context_changes = sorted(
        ((w.scope, FieldChange(w.target, w.key, w.value, sources))
         for w, sources in unique.values() if w.target is not None and w.scope is not None),
        key=lambda item: (str(item[0]), str(item[1].record_id), item[1].field_key))
    payload_only = sorted((w.key, w.value, sources) for w, sources in unique.values()
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
    """Validate the whole candidate; empty means every change may be committed.
    CTX-3.32, CTX-3.39, CTX-3.40, CTX-3.46, CTX-3.51, CTX-3.55, CTX-3.56, CTX-3.78, CTX-3.92,
    CTX-3.93, CTX-7.30"""
    found: list[HookDiagnostic] = []
    for context_id, change in changes.context_changes:
        key = change.field_key
        state = states.get(context_id)
        if forbidden(key):
            found.append(_diag("FORBIDDEN_FIELD", key, "identities, raw text, permissions, "
                               "quotas, deadlines and stopped state are never writable"))
            continue
        if state is None or not _may_write(state, call):
            found.append(_diag("UNAUTHORISED_SCOPE", key,
                               f"context {context_id} is not this actor's to write"))
            continue
        raw = state.record(change.record_id)
        revision = state.revision(read_revisions.get(context_id, state.head.revision))
        if raw is None or raw.record.context_seq > revision.record_watermark:
            found.append(_diag("UNKNOWN_TARGET", key, f"record {change.record_id} is not in "
                               f"revision {revision.revision} of context {context_id}"))
            continue
        if state.scope.kind == "shared" and not state.scope.registers(change.record_id, key):
            found.append(_diag("FIELD_NOT_REGISTERED", key, "not a registered shared field"))
            continue
        spec = registry.spec_for_context(key, call.call_id)
        if spec is None:
            found.append(_diag("FIELD_NOT_REGISTERED", key, f"not writable at "
                               f"{registry.hook_point}@{registry.version}"))
            continue
        if spec[1] == key and not kind_accepts(spec[0].kind, change.value):
            found.append(_diag("SCHEMA_MISMATCH", key, f"expected {spec[0].kind}"))
        if raw.record.message_kind == "user_ref":
            found.append(_diag("PROTECTED_INPUT", key, "a user input is never overwritten"))
        if change.record_id in state.frozen:
            found.append(_diag("FROZEN_FACT", key, "a frozen or executed request takes "
                               "annotations only"))
        if call.stage == "post" and change.record_id != call.call_record_id:
            found.append(_diag("POST_STAGE_TARGET", key, "a post-response hook changes only "
                               "this call's undelivered response"))
    for path, value, _ in changes.payload_only:
        payload_spec = registry.payload_spec(path)
        if forbidden(path) or payload_spec is None:
            found.append(_diag("FORBIDDEN_FIELD", path, "not a writable payload field"))
        elif payload_spec.payload_path == path and not kind_accepts(payload_spec.kind, value):
            found.append(_diag("SCHEMA_MISMATCH", path, f"expected {payload_spec.kind}"))
    for context_id, target, _ in changes.annotations:
        state = states.get(context_id)
        if state is None or not _may_write(state, call) or state.record(target) is None:
            found.append(_diag("UNAUTHORISED_SCOPE", None,
                               f"cannot annotate record {target} in context {context_id}"))
    if budget is not None and not found:
        added = budget.measure(changes)
        if budget.fixed_before + added > budget.input_budget:
            found.append(_diag("ITEM_DOES_NOT_FIT", None,
                               f"its own fixed material ({added} tokens) cannot fit: "
                               f"{budget.fixed_before} + {added} > B = {budget.input_budget}"))
    return tuple(found)


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


def apply_to_payload(payload: Mapping[str, JSON], changes: ChangeSet, call: HookCall,
                     registry: FieldRegistry) -> dict[str, JSON]:
    """The effective payload after a change set: payload fields and the current call's context
    fields that the payload expresses (CTX-3.44, CTX-3.54)."""
    result: dict[str, JSON] = dict(payload)
    updates: list[tuple[str, FieldValue]] = [(p, v) for p, v, _ in changes.payload_only]
    for _, change in changes.context_changes:
        if change.record_id != call.call_record_id:
            continue
        path = registry.payload_path_of_context(change.field_key, call.call_id)
        if path is not None:
            updates.append((path, change.value))
    for path, value in sorted(updates, key=lambda u: len(u[0].split("."))):
        result = with_value(result, path.split("."), value)
    return result


def _annotation_records(changes: ChangeSet, states: Mapping[UUID, ContextState],
                        proposal: HookProposal, call: HookCall,
                        new_id: Callable[[int], UUID]) -> dict[UUID, list[RawRecord]]:
    """System-assigned records for the item's annotations, sourced to its HookInvocation; never
    a user input (CTX-3.37, CTX-3.38)."""
    by_context: dict[UUID, list[RawRecord]] = {}
    for index, (context_id, target, text) in enumerate(changes.annotations):
        state = states[context_id]
        pending = by_context.setdefault(context_id, [])
        seq = (state.records[-1].record.context_seq if state.records else 0) + len(pending) + 1
        annotated = state.record(target)
        if annotated is None:
            raise AssertionError("validate() checked that the annotated record exists")
        record = ContextRecord(
            record_id=new_id(index), context_id=context_id, context_seq=seq,
            run_id=annotated.record.run_id, role=MessageRole.SYSTEM, message_kind="annotation",
            payload_ref=_text_ref(text), operation_id=call.operation_id, call_id=None,
            origin_input_id=None)
        pending.append(RawRecord(record, {"text": text, "annotates": str(target)},
                                 source=f"hook:{proposal.hook_invocation_id}"))
    return by_context


def _text_ref(text: str) -> PayloadRef:
    data = text.encode("utf-8", "surrogatepass")
    return PayloadRef(digest="sha256:" + hashlib.sha256(data).hexdigest(), size_bytes=len(data))


def evaluate(proposal: HookProposal, call: HookCall, registry: FieldRegistry,
             states: Mapping[UUID, ContextState], payload: Mapping[str, JSON], *,
             chain_position: int, mutation_id: UUID, annotation_ids: Callable[[int], UUID],
             budget: BudgetRoom | None = None) -> HookItemOutcome:
    """Decide one hook item: control decision and patch are validated separately.
    CTX-3.52, CTX-3.59, CTX-3.60, CTX-3.61, CTX-3.70, CTX-3.71, CTX-3.84, CTX-3.85"""
    read = {cid: s.head.revision for cid, s in states.items()}
    if proposal.base_revision is not None and proposal.context_id is not None:
        read[proposal.context_id] = proposal.base_revision

    def outcome(decision: HookDecision, control: Control, changes: ChangeSet,
                diagnostics: Sequence[HookDiagnostic], valid: bool,
                new_states: Mapping[UUID, ContextState] = states,
                new_payload: Mapping[str, JSON] = payload,
                candidate: Mapping[str, JSON] = payload,
                committed: Mapping[UUID, int] | None = None) -> HookItemOutcome:
        invocation = HookInvocation(
            hook_invocation_id=proposal.hook_invocation_id, operation_id=call.operation_id,
            hook_point=call.hook_point, chain_position=chain_position, decision=decision,
            patch_valid=valid, change_set_hash=None if changes.empty else changes.digest(),
            registry_version=f"{registry.hook_point}@{registry.version}",
            diagnostics=tuple(diagnostics))
        return HookItemOutcome(invocation, control, changes, new_states, new_payload, candidate,
                               committed or {})

    if proposal.handler_failed:
        return outcome(HookDecision.FAILED, "continue", EMPTY_CHANGES,
                       [_diag("HOOK_FAILED", None, "the handler failed or timed out; only this "
                              "item is dropped")], valid=False)
    if proposal.decision not in ("allow", "deny"):
        return outcome(HookDecision.FAILED, "continue", EMPTY_CHANGES,
                       [_diag("ILLEGAL_DECISION", None,
                              f"{proposal.decision!r} is not allow or deny")], valid=False)
    decision = HookDecision(proposal.decision)
    control: Control = "blocked" if decision is HookDecision.DENY else "continue"
    normalised = normalise(proposal, call, registry)
    if not isinstance(normalised, ChangeSet):
        return outcome(decision, control, EMPTY_CHANGES, normalised, valid=False)
    problems = validate(normalised, call, registry, states, read, budget)
    if problems:
        return outcome(decision, control, normalised, problems, valid=False)
    candidate = apply_to_payload(payload, normalised, call, registry)
    if decision is HookDecision.DENY:
        return outcome(decision, control, normalised, (), valid=True, candidate=candidate)
    annotations = _annotation_records(normalised, states, proposal, call, annotation_ids)
    scopes = sorted({cid for cid, _ in normalised.context_changes} | set(annotations), key=str)
    parts = [ScopedChange(cid, read.get(cid, states[cid].head.revision),
                          tuple(c for scope, c in normalised.context_changes if scope == cid),
                          tuple(annotations.get(cid, ())))
             for cid in scopes]
    committed = commit_across(states, parts, mutation_id=mutation_id,
                              source_kind=MutationSourceKind.HOOK,
                              source_ref=str(proposal.hook_invocation_id))
    if isinstance(committed, RevisionConflict):
        return outcome(decision, control, normalised,
                       [_diag(ErrorCode.CONTEXT_REVISION_CONFLICT.value, None,
                              committed.reason)], valid=False)
    new_states = {**states, **{cid: c.state for cid, c in committed.items()}}
    return outcome(decision, control, normalised, (), valid=True, new_states=new_states,
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
              mutation_ids: Sequence[UUID], annotation_ids: Callable[[int, int], UUID],
              budget: BudgetRoom | None = None, start: int = 0) -> ChainOutcome:
    """Run hook items in order from ``start`` (the cursor); each reads the previous item's
    effective payload and revisions; a deny stops the chain.  CTX-3.62, CTX-3.63"""
    items: list[HookItemOutcome] = []
    for position, proposal in enumerate(proposals[start:], start=start):
        def ids_of_item(index: int, position: int = position) -> UUID:
            return annotation_ids(position, index)

        item = evaluate(proposal, call, registry, states, payload, chain_position=position,
                        mutation_id=mutation_ids[position], annotation_ids=ids_of_item,
                        budget=budget)
        items.append(item)
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

