"""The contracts the shell stores for an effective context (§3 "ContextMutation" and
"EffectiveContextRevision"; §9 "作用域、并发与版本").

A committed revision is stored as an :class:`EffectiveContextRevision` whose
``effective_manifest_ref`` addresses its manifest (every record's effective content and the
mutations behind it), and a committed mutation as a :class:`ContextMutation` whose
``patch_ref`` addresses its normalised change. Both refs digest canonical JSON, so the same
revision or change always has the same ref (CTX-3.19, CTX-3.24, CTX-3.29). The states they are
read from live in :mod:`ctxspec.reference.effective`.
"""

import hashlib
from datetime import datetime
from uuid import UUID

from ctxspec.reference.contracts import ContextMutation, EffectiveContextRevision, PayloadRef
from ctxspec.reference.effective import (
    CommittedMutation,
    ContextState,
    canonical_json,
    manifest_entry_text,
    visible_records,
)
from ctxspec.reference.registry import JSON, _Absent


def _ref_of(document: JSON) -> PayloadRef:
    return _ref_of_text(canonical_json(document))


def _ref_of_text(text: str) -> PayloadRef:
    data = text.encode("utf-8", "surrogatepass")
    return PayloadRef(digest="sha256:" + hashlib.sha256(data).hexdigest(), size_bytes=len(data),
                      media_type="application/json")


def manifest_text(state: ContextState, revision: int) -> str:
    """:func:`manifest_document` as canonical JSON (what its ref digests), with the entry of
    each record no override touches taken from the record (issue #20: every revision is
    stored with its manifest's ref)."""
    rev = state.revision(revision)
    return "[" + ",".join(manifest_entry_text(raw, overrides)
                          for raw, overrides in visible_records(state, rev)) + "]"


def revision_contract(state: ContextState, revision: int, *, commit_ref: str,
                      created_at: datetime) -> EffectiveContextRevision:
    """The EffectiveContextRevision the shell stores for a revision.  CTX-3.19, CTX-3.24"""
    rev = state.revision(revision)
    return EffectiveContextRevision(
        context_id=state.context_id, revision=rev.revision, parent_revision=rev.parent,
        record_watermark=rev.record_watermark, mutation_ids=rev.mutation_ids,
        effective_manifest_ref=_ref_of_text(manifest_text(state, revision)),
        commit_ref=commit_ref, created_at=created_at)


def change_document(done: CommittedMutation) -> JSON:
    """The normalised change of a mutation as the JSON blob its patch_ref addresses."""
    return {"changes": [{"record_id": str(c.record_id), "field_key": c.field_key,
                         "value": {"$absent": True} if isinstance(c.value, _Absent) else c.value,
                         "sources": list(c.source_paths)} for c in done.changes],
            "appended": [str(r) for r in done.appended],
            "base_revision": done.base_revision, "rebased": done.rebased}


def mutation_contract(state: ContextState, mutation_id: UUID, *,
                      cause_operation_id: UUID | None, created_at: datetime) -> ContextMutation:
    """The ContextMutation the shell appends for a committed mutation.  CTX-3.19, CTX-3.29"""
    done = state.mutations[mutation_id]
    return ContextMutation(
        mutation_id=mutation_id, context_id=state.context_id, base_revision=done.base_revision,
        committed_revision=done.committed_revision, source_kind=done.source_kind,
        source_ref=done.source_ref, cause_operation_id=cause_operation_id,
        patch_ref=_ref_of(change_document(done)), created_at=created_at)


__all__ = ["change_document", "manifest_text", "mutation_contract", "revision_contract"]
