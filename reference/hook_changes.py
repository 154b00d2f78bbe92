"""What a hook item proposes and the change set it normalises to (§3
"所有合法修改进入同一有效上下文"): its payload and context operations, the trusted identity
of the call it runs for, and the normalised ChangeSet that reference/hooks.py validates and
commits. Values only: no rule of the chain is decided here.
"""

import hashlib
import json
from dataclasses import dataclass
from typing import Literal
from uuid import UUID

from ctxspec.reference.contracts import PatchOperationKind
from ctxspec.reference.effective import FieldChange, FieldValue
from ctxspec.reference.registry import JSON, _Absent

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
    read_revision: int | None = None
    """The revision of the actor's context the item read (default: the head when evaluated):
    the base of its payload-mapped writes (CTX-3.45)."""


@dataclass(frozen=True)
class Annotation:
    """An append_annotation operation as normalised: where, on what, its text."""

    context_id: UUID | None
    target_record_id: UUID
    field_key: str
    text: JSON


@dataclass(frozen=True)
class ChangeSet:
    """The normalised change set of one hook item."""

    context_changes: tuple[tuple[UUID | None, FieldChange], ...]
    """(context_id, change), sorted by context, record and field. A context operation that
    names no context keeps None here, for validation to refuse."""
    payload_only: tuple[tuple[str, FieldValue, tuple[str, ...]], ...]
    """Payload fields with no context field (e.g. a request parameter): path, value, sources."""
    annotations: tuple[Annotation, ...]
    """In the order the item gave them."""

    def digest(self) -> str:
        def show(value: FieldValue) -> JSON:
            return {"$absent": True} if isinstance(value, _Absent) else value

        document = {
            "context": [[str(cid), str(c.record_id), c.field_key, show(c.value),
                         list(c.source_paths)] for cid, c in self.context_changes],
            "payload": [[path, show(value), list(sources)]
                        for path, value, sources in self.payload_only],
            "annotations": [[str(a.context_id), str(a.target_record_id), a.field_key, a.text]
                            for a in self.annotations],
        }
        canonical = json.dumps(document, sort_keys=True, ensure_ascii=False)
        return "sha256:" + hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()

    @property
    def empty(self) -> bool:
        return not (self.context_changes or self.payload_only or self.annotations)


EMPTY_CHANGES = ChangeSet((), (), ())


__all__ = ["EMPTY_CHANGES", "Annotation", "ChangeSet", "ContextOp", "HookCall",
           "HookProposal", "PayloadOp", "Stage"]
