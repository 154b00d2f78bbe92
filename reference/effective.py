"""The effective context (§3 "所有合法修改进入同一有效上下文" and "作用域、并发与版本").

One :class:`ContextState` per scope — a role's private context or an explicitly shared scope —
holds the raw records (appended, never changed), the immutable revisions, and the committed
mutations. A revision is the raw records up to its watermark plus field overrides; its manifest
maps every stable record id to its effective content and the mutations that produced it
(references and sources, not copies of the raw text: CTX-3.25, CTX-3.28). Materialising any
revision, at any later time, gives the same content (CTX-3.27, CTX-3.87).

Commits (each returns the new state and what to write, or a typed conflict):

- :func:`append_records`: runtime or user records appended as a new revision; never conflicts
  with field patches (CTX-3.86);
- :func:`commit_changes`: one validated change set as one ContextMutation and one revision,
  with CAS on the base revision and rebase when nothing it touches changed meanwhile
  (CTX-3.77, CTX-3.82, CTX-3.83); committing a mutation_id twice returns the original revision
  without applying anything again (CTX-3.30);
- :func:`commit_across`: a change spanning several scopes, validated whole and committed whole
  (CTX-3.81).

Raw records, protected inputs and protocol links are never written by a mutation (CTX-3.31):
changes touch overrides only, annotations are new records.
"""

import functools
import hashlib
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal
from uuid import UUID

from ctxspec.reference.contracts import (
    ContextRecord,
    MutationSourceKind,
    RoleContext,
)
from ctxspec.reference.registry import ABSENT, JSON, _Absent, is_within, split, value_at, with_value
from ctxspec.reference.view import EffectiveRecord, ToolCall, Truncation

FieldValue = JSON | _Absent


@dataclass(frozen=True)
class RawRecord:
    """A raw record and its content document (root field → value), never changed.

    ``source`` names where a record's content comes from when it is not the conversation
    itself: ``prompt:<resource>@<version>`` for a prompt projection item (CTX-3.35), the
    HookInvocation for an annotation (CTX-3.38).
    """

    record: ContextRecord
    content: Mapping[str, JSON]
    source: str | None = None

    @property
    def record_id(self) -> UUID:
        return self.record.record_id

    @functools.cached_property
    def content_digest(self) -> str:
        """:func:`content_digest` of the raw content, computed once per record: every revision's
        manifest names it for each record no override touches (issue #20)."""
        return content_digest(self.content)

    @functools.cached_property
    def manifest_entry_text(self) -> str:
        """This record's entry of a revision's manifest document while no override touches it,
        as canonical JSON, computed once per record (issue #20)."""
        return canonical_json(_entry_document(_entry(self, None)))


@dataclass(frozen=True)
class FieldChange:
    """One normalised write: a stable record, a semantic field, its final value (ABSENT deletes)
    and every source path that asked for it (CTX-3.47)."""

    record_id: UUID
    field_key: str
    value: FieldValue
    source_paths: tuple[str, ...]

    def overlaps(self, record_id: UUID, field_key: str) -> bool:
        return record_id == self.record_id and (
            is_within(field_key, self.field_key) or is_within(self.field_key, field_key))


@dataclass(frozen=True)
class Override:
    value: FieldValue
    mutation_id: UUID


@dataclass(frozen=True)
class Revision:
    """An immutable effective revision: the watermark of raw records it includes and the field
    overrides in force, with the mutations newly committed relative to its parent."""

    revision: int
    parent: int | None
    record_watermark: int
    overrides: Mapping[tuple[UUID, str], Override]
    mutation_ids: tuple[UUID, ...]
    authorisation_version: int


@dataclass(frozen=True)
class CommittedMutation:
    """What one mutation committed, for idempotent replay, CAS checks and provenance."""

    mutation_id: UUID
    source_kind: MutationSourceKind
    source_ref: str
    base_revision: int
    committed_revision: int
    changes: tuple[FieldChange, ...]
    appended: tuple[UUID, ...]
    rebased: bool
    """Committed on a newer head than its base (the base stays recorded as provenance)."""


@dataclass(frozen=True)
class Scope:
    """Who a context belongs to. A private scope is one role's RoleContext; a shared scope has
    registered fields and named consumers only (CTX-3.39, CTX-3.72 to CTX-3.75)."""

    kind: Literal["private", "shared"]
    owner_role: str | None = None
    registered_fields: frozenset[tuple[UUID, str]] = frozenset()
    consumers: frozenset[str] = frozenset()

    def may_read(self, role: str) -> bool:
        return role == self.owner_role if self.kind == "private" else role in self.consumers

    def registers(self, record_id: UUID, field_key: str) -> bool:
        return any(rid == record_id and is_within(field_key, key)
                   for rid, key in self.registered_fields)


@dataclass(frozen=True)
class ContextState:
    """One scope's effective context as a value."""

    context_id: UUID
    scope: Scope
    records: tuple[RawRecord, ...] = ()
    revisions: tuple[Revision, ...] = field(default_factory=lambda: (
        Revision(1, None, 0, {}, (), 0),))
    mutations: Mapping[UUID, CommittedMutation] = field(default_factory=dict)
    frozen: frozenset[UUID] = frozenset()
    """Records of frozen or executed requests: their facts take annotations only (CTX-3.55)."""
    authorisation_version: int = 0

    @property
    def head(self) -> Revision:
        return self.revisions[-1]

    def revision(self, number: int) -> Revision:
        if not 1 <= number <= len(self.revisions):
            raise KeyError(f"context {self.context_id} has no revision {number}")
        return self.revisions[number - 1]

    def record(self, record_id: UUID) -> RawRecord | None:
        for raw in self.records:
            if raw.record_id == record_id:
                return raw
        return None


def new_context(context_id: UUID, scope: Scope) -> ContextState:
    """A context with its initial, empty revision 1 (docs/open-questions.md Q9)."""
    return ContextState(context_id, scope)


# --- reading ----------------------------------------------------------------------------------


def effective_content(state: ContextState, record_id: UUID,
                      revision: int | None = None) -> dict[str, JSON]:
    """The record's content at a revision (default: head): raw content plus the overrides in
    force there, applied from the outermost field inwards."""
    rev = state.head if revision is None else state.revision(revision)
    raw = state.record(record_id)
    if raw is None or raw.record.context_seq > rev.record_watermark:
        raise KeyError(f"record {record_id} is not in revision {rev.revision}")
    return _overridden(raw.content, {key: o for (rid, key), o in rev.overrides.items()
                                     if rid == record_id})


def _overridden(content: Mapping[str, JSON], overrides: Mapping[str, Override]
                ) -> dict[str, JSON]:
    """``content`` with a record's overrides (field key → override) applied from the outermost
    field inwards."""
    result: dict[str, JSON] = dict(content)
    for key in sorted(overrides, key=lambda k: (len(split(k)[1]), k)):
        root, names = split(key)
        result = with_value(result, (root, *names), overrides[key].value)
    return result


def _by_record(overrides: Mapping[tuple[UUID, str], Override]
               ) -> dict[UUID, dict[str, Override]]:
    """A revision's overrides grouped by record (one pass, instead of one per record)."""
    grouped: dict[UUID, dict[str, Override]] = {}
    for (record_id, key), override in overrides.items():
        grouped.setdefault(record_id, {})[key] = override
    return grouped


def field_value(state: ContextState, record_id: UUID, field_key: str,
                revision: int | None = None) -> FieldValue:
    root, names = split(field_key)
    return value_at(effective_content(state, record_id, revision), (root, *names))


@dataclass(frozen=True)
class ManifestEntry:
    record_id: UUID
    context_seq: int
    content_digest: str
    """sha256 of the canonical JSON of the effective content (a content reference)."""
    modified_fields: Mapping[str, UUID]
    """field_key → the mutation that set it."""
    source: str | None


def manifest(state: ContextState, revision: int | None = None) -> tuple[ManifestEntry, ...]:
    """The revision's manifest: every visible record's effective content reference and sources
    (CTX-3.25, CTX-3.28, CTX-3.64). A record no override touches has its raw content's digest,
    computed once per record (a manifest per revision, issue #20)."""
    rev = state.head if revision is None else state.revision(revision)
    return tuple(_entry(raw, overrides) for raw, overrides in visible_records(state, rev))


def visible_records(state: ContextState, rev: Revision
                    ) -> Iterator[tuple[RawRecord, dict[str, Override] | None]]:
    """The records a revision sees (up to its record watermark, in context order), each with
    the overrides in force for it (field key → override; None: none)."""
    by_record = _by_record(rev.overrides)
    for raw in state.records:
        if raw.record.context_seq > rev.record_watermark:
            break
        yield raw, by_record.get(raw.record_id)


def _entry(raw: RawRecord, overrides: Mapping[str, Override] | None) -> ManifestEntry:
    """A record's manifest entry with the overrides in force for it (None: none)."""
    if overrides is None:
        return ManifestEntry(raw.record_id, raw.record.context_seq, raw.content_digest, {},
                             raw.source)
    return ManifestEntry(raw.record_id, raw.record.context_seq,
                         content_digest(_overridden(raw.content, overrides)),
                         {key: o.mutation_id for key, o in overrides.items()}, raw.source)


def effective_records(state: ContextState, revision: int | None = None) -> list[EffectiveRecord]:
    """The revision as the history projection consumes it (§4: rebuilt from the effective
    revision, never from raw).  CTX-3.69, CTX-4.10"""
    rev = state.head if revision is None else state.revision(revision)
    sources = {mutation_id: f"{m.source_kind.value}:{m.source_ref}"
               for mutation_id, m in state.mutations.items()}
    return [effective_record(raw, overrides or {}, sources)
            for raw, overrides in visible_records(state, rev)]


def effective_record(raw: RawRecord, overrides: Mapping[str, Override],
                     sources: Mapping[UUID, str] | None = None) -> EffectiveRecord:
    """One raw record with the overrides in force for it (field key → override): effective text,
    tool calls with their effective arguments (and, where a change made them differ, the
    model's own and the change's sources: §2, §6), the mutations behind it, an annotation's
    source. A store that pages records applies this per record."""
    content = _overridden(raw.content, overrides)
    calls = []
    for root, value in content.items():
        if root.startswith("tool_call:") and isinstance(value, dict):
            ordinal = value.get("action_ordinal")
            arguments = _arguments(value)
            original = raw.content.get(root)
            proposed = _arguments(original) if isinstance(original, dict) else arguments
            changed_by = sorted({(sources or {}).get(o.mutation_id, str(o.mutation_id))
                                 for key, o in overrides.items() if split(key)[0] == root})
            calls.append(ToolCall(
                call_id=UUID(root.split(":", 1)[1]),
                action_ordinal=ordinal if isinstance(ordinal, int) else 1,
                name=str(value.get("name", "")), arguments=arguments,
                proposed_arguments=proposed if proposed != arguments else None,
                adjusted_by=tuple(changed_by) if proposed != arguments else ()))
    calls.sort(key=lambda call: call.action_ordinal)
    text = content.get("text", "")
    # A text a committed change made differ from the record's own is marked with the change's
    # sources when rebuilt (§2: never passed off as the provider's; §6 按变更和来源标记).
    text_changed_by = tuple(sorted({(sources or {}).get(o.mutation_id, str(o.mutation_id))
                                    for key, o in overrides.items() if split(key)[0] == "text"})
                            ) if text != raw.content.get("text", "") else ()
    reasoning = content.get("reasoning")
    truncation = content.get("truncation")
    # A denied response shows its denial state instead of its text and calls (Q75).
    denied = content.get("denied")
    if isinstance(denied, dict):
        text, calls = _SORTED.encode(denied), []
    return EffectiveRecord(
        record=raw.record, text=text if isinstance(text, str) else json.dumps(text),
        tool_calls=() if content.get("incomplete") is True else tuple(calls),
        incomplete=content.get("incomplete") is True, denied=isinstance(denied, dict),
        reasoning=reasoning if isinstance(reasoning, str) else None,
        truncation=Truncation.model_validate(truncation) if isinstance(truncation, dict)
        else None,
        modified_by=tuple(sorted({str(o.mutation_id) for o in overrides.values()})),
        text_changed_by=() if isinstance(denied, dict) else text_changed_by,
        annotation_source=raw.source if raw.record.message_kind == "annotation" else None)


def _arguments(call: Mapping[str, JSON]) -> str:
    return _SORTED.encode(call.get("arguments", {}))


_SORTED = json.JSONEncoder(sort_keys=True, ensure_ascii=False)
"""``json.dumps(..., sort_keys=True, ensure_ascii=False)`` without building an encoder per call
(every record's calls, every projection; issue #20). Its options are all it holds."""

_CANONICAL = json.JSONEncoder(sort_keys=True, ensure_ascii=False, separators=(",", ":"))
"""The canonical JSON of a document (sorted keys, no spaces), one encoder for every call."""


def content_digest(content: Mapping[str, JSON]) -> str:
    canonical = _CANONICAL.encode(content)
    return "sha256:" + hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


# --- committing -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Committed:
    """A commit's result: the new state, the revision it produced (or, for a replayed
    mutation_id, the original one) and whether anything new was written."""

    state: ContextState
    revision: int
    replayed: bool
    rebased: bool


@dataclass(frozen=True)
class RevisionConflict:
    """CONTEXT_REVISION_CONFLICT: what changed since the base, so no winner is chosen."""

    context_id: UUID
    base_revision: int
    head_revision: int
    reason: str


def _replay(state: ContextState, mutation_id: UUID) -> Committed | None:
    done = state.mutations.get(mutation_id)
    if done is None:
        return None
    return Committed(state, done.committed_revision, replayed=True, rebased=done.rebased)


def append_records(state: ContextState, records: Sequence[RawRecord], *, mutation_id: UUID,
                   source_kind: MutationSourceKind, source_ref: str) -> Committed:
    """Append raw records (runtime or user source; an annotation is appended the same way) as a
    new revision. Appends never conflict with field patches.  CTX-1.4, CTX-3.29, CTX-3.86"""
    replayed = _replay(state, mutation_id)
    if replayed is not None:
        return replayed
    next_seq = (state.records[-1].record.context_seq if state.records else 0) + 1
    for offset, raw in enumerate(records):
        if raw.record.context_id != state.context_id or \
                raw.record.context_seq != next_seq + offset:
            raise ValueError(f"record {raw.record_id} is not the next record of this context")
    head = state.head
    number = head.revision + 1
    watermark = records[-1].record.context_seq if records else head.record_watermark
    revision = Revision(number, head.revision, watermark, head.overrides, (mutation_id,),
                        state.authorisation_version)
    mutation = CommittedMutation(mutation_id, source_kind, source_ref, head.revision, number, (),
                                 tuple(r.record_id for r in records), rebased=False)
    return Committed(replace(state, records=state.records + tuple(records),
                             revisions=(*state.revisions, revision),
                             mutations={**state.mutations, mutation_id: mutation}),
                     number, replayed=False, rebased=False)


def check_base(state: ContextState, changes: Sequence[FieldChange],
               base_revision: int) -> RevisionConflict | bool:
    """CAS on the base revision: False when the base is the head; True when a rebase onto the
    head is safe (nothing committed since touched these fields, authorisation unchanged);
    otherwise the conflict.  CTX-3.77, CTX-3.82, CTX-3.83"""
    head = state.head
    if not 1 <= base_revision <= head.revision:
        return RevisionConflict(state.context_id, base_revision, head.revision,
                                f"revision {base_revision} does not exist (head is "
                                f"{head.revision})")
    if state.revision(base_revision).authorisation_version != state.authorisation_version:
        return RevisionConflict(state.context_id, base_revision, head.revision,
                                "the scope's authorisation changed since the base revision")
    if base_revision == head.revision:
        return False
    for later in state.revisions[base_revision:]:
        for mutation_id in later.mutation_ids:
            done = state.mutations[mutation_id]
            for theirs in done.changes:
                for mine in changes:
                    if mine.overlaps(theirs.record_id, theirs.field_key):
                        return RevisionConflict(
                            state.context_id, base_revision, head.revision,
                            f"{theirs.field_key} of record {theirs.record_id} was changed by "
                            f"mutation {mutation_id} at revision {later.revision}")
    return True


def commit_changes(state: ContextState, changes: Sequence[FieldChange],
                   annotations: Sequence[RawRecord], *, base_revision: int, mutation_id: UUID,
                   source_kind: MutationSourceKind, source_ref: str
                   ) -> Committed | RevisionConflict:
    """Commit one validated change set (field overrides plus appended annotation records) as
    one mutation and one new revision, all or nothing.  CTX-3.19, CTX-3.24, CTX-3.29, CTX-3.30,
    CTX-3.74, CTX-3.77, CTX-3.79, CTX-3.82, CTX-3.83"""
    replayed = _replay(state, mutation_id)
    if replayed is not None:
        return replayed
    verdict = check_base(state, changes, base_revision)
    if isinstance(verdict, RevisionConflict):
        return verdict
    head = state.head
    overrides = dict(head.overrides)
    for change in changes:
        # A write to a field supersedes earlier overrides of its descendants.
        for key in [k for k in overrides
                    if k[0] == change.record_id and is_within(k[1], change.field_key)]:
            del overrides[key]
        overrides[(change.record_id, change.field_key)] = Override(change.value, mutation_id)
    next_seq = (state.records[-1].record.context_seq if state.records else 0) + 1
    for offset, raw in enumerate(annotations):
        if raw.record.context_seq != next_seq + offset or raw.record.context_id != state.context_id:
            raise ValueError(f"annotation {raw.record_id} is not the next record of the context")
    watermark = annotations[-1].record.context_seq if annotations else head.record_watermark
    number = head.revision + 1
    revision = Revision(number, head.revision, watermark, overrides, (mutation_id,),
                        state.authorisation_version)
    mutation = CommittedMutation(mutation_id, source_kind, source_ref, base_revision, number,
                                 tuple(changes), tuple(r.record_id for r in annotations),
                                 rebased=verdict is True)
    return Committed(replace(state, records=state.records + tuple(annotations),
                             revisions=(*state.revisions, revision),
                             mutations={**state.mutations, mutation_id: mutation}),
                     number, replayed=False, rebased=verdict is True)


@dataclass(frozen=True)
class ScopedChange:
    """The part of one change that lands in one scope."""

    context_id: UUID
    base_revision: int
    changes: tuple[FieldChange, ...]
    annotations: tuple[RawRecord, ...] = ()


def commit_across(states: Mapping[UUID, ContextState], parts: Sequence[ScopedChange], *,
                  mutation_ids: Mapping[UUID, UUID], source_kind: MutationSourceKind,
                  source_ref: str) -> dict[UUID, Committed] | RevisionConflict:
    """One change spanning several scopes: every part is checked first; only if all pass are
    all committed. Each scope keeps its own revisions and gets its own mutation id
    (``mutation_ids``: context_id → id); ``source_ref`` links them.  CTX-3.80, CTX-3.81"""
    for part in parts:
        state = states[part.context_id]
        if mutation_ids[part.context_id] in state.mutations:
            continue  # a replay: commit_changes returns the original revision
        verdict = check_base(state, part.changes, part.base_revision)
        if isinstance(verdict, RevisionConflict):
            return verdict
    results: dict[UUID, Committed] = {}
    for part in parts:
        result = commit_changes(states[part.context_id], part.changes, part.annotations,
                                base_revision=part.base_revision,
                                mutation_id=mutation_ids[part.context_id],
                                source_kind=source_kind, source_ref=source_ref)
        if isinstance(result, RevisionConflict):
            raise AssertionError("checked above: a part cannot conflict after the check")
        results[part.context_id] = result
    return results


# --- the contracts the shell stores -------------------------------------------------------------


def canonical_json(document: JSON) -> str:
    """A document as the canonical JSON its payload ref digests (sorted keys, no spaces)."""
    return _CANONICAL.encode(document)


def _entry_document(entry: ManifestEntry) -> JSON:
    return {"record_id": str(entry.record_id), "context_seq": entry.context_seq,
            "content": entry.content_digest, "source": entry.source,
            "modified": {key: str(m) for key, m in sorted(entry.modified_fields.items())}}


def manifest_document(state: ContextState, revision: int) -> JSON:
    """The manifest of a revision as the JSON blob its effective_manifest_ref addresses."""
    return [_entry_document(e) for e in manifest(state, revision)]


def manifest_entry_text(raw: RawRecord, overrides: Mapping[str, Override] | None) -> str:
    """The canonical JSON of a record's manifest entry under ``overrides`` (a record no
    override touches reuses the text it keeps)."""
    return (raw.manifest_entry_text if overrides is None
            else canonical_json(_entry_document(_entry(raw, overrides))))




def project_head(role_context: RoleContext, state: ContextState) -> RoleContext:
    """RoleContext.record_head and effective_revision as a projection of the head, read inside
    the commit that moved it.  CTX-3.26"""
    if role_context.context_id != state.context_id:
        raise ValueError("a RoleContext projects its own context's head")
    head = state.head
    return role_context.model_copy(update={"record_head": head.record_watermark,
                                           "effective_revision": head.revision})


def freeze(state: ContextState, record_ids: Sequence[UUID]) -> ContextState:
    """Mark the records of a frozen or executed request: from now on their facts take
    annotations only; the revision the request froze stays as it was.  CTX-3.55, CTX-3.87"""
    return replace(state, frozen=state.frozen | frozenset(record_ids))


def change_authorisation(state: ContextState, scope: Scope) -> ContextState:
    """Register or withdraw shared fields or consumers; patches based on an earlier revision can
    no longer be rebased across this (CTX-3.83)."""
    return replace(state, scope=scope, authorisation_version=state.authorisation_version + 1)


__all__ = [
    "ABSENT",
    "Committed",
    "CommittedMutation",
    "ContextState",
    "FieldChange",
    "ManifestEntry",
    "Override",
    "RawRecord",
    "Revision",
    "RevisionConflict",
    "Scope",
    "ScopedChange",
    "append_records",
    "canonical_json",
    "change_authorisation",
    "check_base",
    "commit_across",
    "commit_changes",
    "content_digest",
    "effective_content",
    "effective_records",
    "field_value",
    "freeze",
    "manifest",
    "manifest_document",
    "manifest_entry_text",
    "new_context",
    "project_head",
    "visible_records",
]
