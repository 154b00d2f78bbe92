"""What a decided hook item writes (§3 "作用域、并发与版本"): the effective payload after its
change set, the system records of its annotations, its mutation id per scope, its change split
by scope on the revisions it read, and an item committed before a takeover found again.
reference/hooks.py decides; these build the write set it commits.
"""

import hashlib
from collections.abc import Callable, Mapping
from uuid import UUID, uuid5

from ctxspec.reference.contracts import ContextRecord, MessageRole, PayloadRef
from ctxspec.reference.effective import ContextState, FieldValue, RawRecord, ScopedChange
from ctxspec.reference.hook_changes import ChangeSet, HookCall, HookProposal
from ctxspec.reference.registry import JSON, FieldRegistry, with_value


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
    """System-assigned records for the item's (validated) annotations, sourced to its
    HookInvocation; never a user input (CTX-3.37, CTX-3.38)."""
    by_context: dict[UUID, list[RawRecord]] = {}
    for index, note in enumerate(changes.annotations):
        annotated = states[note.context_id].record(note.target_record_id) \
            if note.context_id is not None else None
        if note.context_id is None or annotated is None or not isinstance(note.text, str):
            raise AssertionError("validate() checked every annotation")
        state = states[note.context_id]
        pending = by_context.setdefault(note.context_id, [])
        seq = (state.records[-1].record.context_seq if state.records else 0) + len(pending) + 1
        record = ContextRecord(
            record_id=new_id(index), context_id=note.context_id, context_seq=seq,
            run_id=annotated.record.run_id, role=MessageRole.SYSTEM, message_kind="annotation",
            payload_ref=_text_ref(note.text), operation_id=call.operation_id, call_id=None,
            origin_input_id=None)
        pending.append(RawRecord(record, {"text": note.text,
                                          "annotates": str(note.target_record_id),
                                          "field_key": note.field_key},
                                 source=f"hook:{proposal.hook_invocation_id}"))
    return by_context


def _text_ref(text: str) -> PayloadRef:
    data = text.encode("utf-8", "surrogatepass")
    return PayloadRef(digest="sha256:" + hashlib.sha256(data).hexdigest(), size_bytes=len(data))


MUTATION_NAMESPACE = UUID("5b0c8f1e-3c2a-4d6e-9f10-c7a5e2d4b831")


def mutation_id_for(hook_invocation_id: UUID, context_id: UUID) -> UUID:
    """The mutation id of a hook item's change to one scope, derived from the item's identity:
    a recovered item commits under the same id and is not applied twice (CTX-3.30, CTX-3.65).
    """
    return uuid5(MUTATION_NAMESPACE, f"{hook_invocation_id}/{context_id}")


def replayed(proposal: HookProposal, call: HookCall, registry: FieldRegistry,
              states: Mapping[UUID, ContextState],
              payload: Mapping[str, JSON]) -> tuple[ChangeSet, dict[UUID, int]] | None:
    """The change set and revisions of an item whose mutations were committed already."""
    done = {cid: state.mutations[mutation_id_for(proposal.hook_invocation_id, cid)]
            for cid, state in states.items()
            if mutation_id_for(proposal.hook_invocation_id, cid) in state.mutations}
    if not done:
        return None
    changes = tuple(sorted(((cid, c) for cid, m in done.items() for c in m.changes),
                           key=lambda item: (str(item[0]), str(item[1].record_id),
                                             item[1].field_key)))
    return (ChangeSet(changes, (), ()),
            {cid: m.committed_revision for cid, m in done.items()})


def scoped_parts(changes: ChangeSet, states: Mapping[UUID, ContextState], read: Mapping[UUID, int],
           proposal: HookProposal, call: HookCall,
           annotation_ids: Callable[[int], UUID]) -> list[ScopedChange]:
    """The validated change split by scope, each part based on the revision the item read."""
    annotations = _annotation_records(changes, states, proposal, call, annotation_ids)
    scopes = {cid for cid, _ in changes.context_changes if cid is not None} | set(annotations)
    return [ScopedChange(cid, read[cid],
                         tuple(c for scope, c in changes.context_changes if scope == cid),
                         tuple(annotations.get(cid, ())))
            for cid in sorted(scopes, key=str)]


__all__ = ["MUTATION_NAMESPACE", "apply_to_payload", "mutation_id_for", "replayed", "scoped_parts"]
