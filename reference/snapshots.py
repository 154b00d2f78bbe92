"""Summary coverage and incremental recovery (§9): the snapshot's coverage and source
manifest, applying a snapshot to a view, invalidation, the CAS of the pointer switch, and the
binding of a frozen request.

Coverage is recorded per piece of material (its stable key: a record id, or for a synthesised
history message its input and Run), with the content hash it had and the source revision of its
context (CTX-9.7, CTX-9.11, CTX-9.14). The ranges of a ContextSnapshot are the maximal runs of
covered context_seq per context, so a protected input between covered records splits a range
and is never skipped (CTX-9.8 to CTX-9.10); ``tail_after_seq`` is the current context's own
watermark (CTX-9.2, CTX-9.9).

A snapshot applies to a view only if every covered piece still has the content it had
(CTX-9.22 to CTX-9.27): then the covered messages give way to one summary message, in place of
the first of them, and everything else — increments, corrections, protected inputs — stays
(CTX-9.19, CTX-9.20, CTX-9.25). Otherwise the whole snapshot is set aside for new views and the
view keeps the material as re-materialised now (CTX-9.26, CTX-9.27); the snapshot is kept
(CTX-9.32). The pointer switch is a CAS on the expected active snapshot, the covered material
and the lease epoch (CTX-9.17, CTX-9.30, CTX-9.31, CTX-9.33).
"""

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal
from uuid import UUID

from ctxspec.reference.compaction import material_key, summary_message, transcript
from ctxspec.reference.contracts import ContextSnapshot, ContextSourceRange, PayloadRef
from ctxspec.reference.registry import JSON
from ctxspec.reference.segments import marked
from ctxspec.reference.view import ModelView, ViewKind, ViewMessage

_UNICODE = json.JSONEncoder(ensure_ascii=False)
"""``json.dumps(..., ensure_ascii=False)`` without building an encoder per call (every
message of every view is hashed; issue #20). Its options are all it holds."""


def content_hash(message: ViewMessage) -> str:
    """The effective content of a piece of material as a hash (text and calls)."""
    data = _UNICODE.encode([message.role.value, message.kind.value, transcript(message)]
                           ).encode("utf-8", "surrogatepass")
    return "sha256:" + hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class CoveredPiece:
    """One covered piece of material: its key, where it lives, and what it was."""

    key: str
    context_id: UUID | None
    """The context of a record; None for a synthesised history message (an older Run's input
    or terminal status)."""
    context_seq: int | None
    source_revision: int | None
    content_hash: str
    mutation_ids: tuple[str, ...]
    input_id: UUID | None


@dataclass(frozen=True)
class SourceManifest:
    """What a snapshot covers (§9): every piece with its content hash and source revision, the
    history input_ids it replaces, the chunk parameters and the chain of earlier snapshots."""

    pieces: tuple[CoveredPiece, ...]
    chunk_capacity: int
    chunk_count: int
    previous_snapshots: tuple[UUID, ...] = ()

    @property
    def keys(self) -> frozenset[str]:
        return frozenset(piece.key for piece in self.pieces)

    @property
    def replaced_input_ids(self) -> tuple[UUID, ...]:
        return tuple(p.input_id for p in self.pieces if p.input_id is not None)

    def digest(self) -> str:
        document = {"pieces": [[p.key, str(p.context_id), p.context_seq, p.source_revision,
                                p.content_hash, list(p.mutation_ids), str(p.input_id)]
                               for p in self.pieces],
                    "chunk_capacity": self.chunk_capacity, "chunk_count": self.chunk_count,
                    "previous": [str(s) for s in self.previous_snapshots]}
        data = json.dumps(document, sort_keys=True).encode("utf-8")
        return "sha256:" + hashlib.sha256(data).hexdigest()


def manifest_document(manifest: SourceManifest) -> JSON:
    """A manifest as JSON, for the source_manifest blob or a checkpoint."""
    return {"pieces": [{"key": p.key, "context_id": str(p.context_id) if p.context_id else None,
                        "context_seq": p.context_seq, "source_revision": p.source_revision,
                        "content_hash": p.content_hash, "mutation_ids": list(p.mutation_ids),
                        "input_id": str(p.input_id) if p.input_id else None}
                       for p in manifest.pieces],
            "chunk_capacity": manifest.chunk_capacity, "chunk_count": manifest.chunk_count,
            "previous_snapshots": [str(s) for s in manifest.previous_snapshots]}


def manifest_from_document(document: Mapping[str, Any]) -> SourceManifest:
    pieces = document.get("pieces")
    previous = document.get("previous_snapshots")
    capacity, count = document.get("chunk_capacity"), document.get("chunk_count")
    if not isinstance(pieces, list) or not isinstance(previous, list) or \
            not isinstance(capacity, int) or not isinstance(count, int):
        raise ValueError("not a source manifest document")
    return SourceManifest(tuple(CoveredPiece(
        str(p["key"]), UUID(p["context_id"]) if p["context_id"] else None, p["context_seq"],
        p["source_revision"], str(p["content_hash"]), tuple(p["mutation_ids"]),
        UUID(p["input_id"]) if p["input_id"] else None) for p in pieces),
        capacity, count, tuple(UUID(str(s)) for s in previous))


def build_manifest(material: Sequence[ViewMessage], record_seq: Mapping[UUID, tuple[UUID, int]],
                   source_revisions: Mapping[UUID, int], chunk_capacity: int, chunk_count: int,
                   previous: "Sequence[tuple[UUID, SourceManifest]]" = ()) -> SourceManifest:
    """The manifest of the material an episode summarises. ``record_seq`` gives each record's
    (context_id, context_seq); ``previous`` the applicable earlier snapshots the material folds
    in (their coverage is merged, their ids kept as the chain).  CTX-9.11, CTX-9.14, CTX-9.21"""
    pieces: list[CoveredPiece] = []
    chain: list[UUID] = []
    folded = {f"snapshot:{snapshot_id}": manifest for snapshot_id, manifest in previous}
    for message in material:
        key = material_key(message)
        if key in folded:
            pieces.extend(folded[key].pieces)
            chain.extend([*folded[key].previous_snapshots, UUID(key.split(":", 1)[1])])
            continue
        where = record_seq.get(message.record_id) if message.record_id is not None else None
        pieces.append(CoveredPiece(
            key, where[0] if where else None, where[1] if where else None,
            source_revisions.get(where[0]) if where else None, content_hash(message),
            message.modified_by,
            message.input_id if message.kind is ViewKind.USER_REF else None))
    return SourceManifest(tuple(pieces), chunk_capacity, chunk_count, tuple(chain))


def source_ranges(manifest: SourceManifest,
                  seqs_by_context: Mapping[UUID, Sequence[int]]) -> tuple[ContextSourceRange, ...]:
    """Maximal runs of covered context_seq per context; an uncovered record in between (a
    protected input) ends a range.  ``seqs_by_context`` lists each context's record seqs in
    view.  CTX-9.7 to CTX-9.10"""
    covered: dict[UUID, set[int]] = {}
    for piece in manifest.pieces:
        if piece.context_id is not None and piece.context_seq is not None:
            covered.setdefault(piece.context_id, set()).add(piece.context_seq)
    ranges: list[ContextSourceRange] = []
    for context_id in sorted(covered, key=str):
        run_start: int | None = None
        previous: int | None = None
        for seq in sorted(seqs_by_context.get(context_id, sorted(covered[context_id]))):
            if seq in covered[context_id]:
                if run_start is None:
                    run_start = seq
                previous = seq
            elif run_start is not None and previous is not None:
                ranges.append(ContextSourceRange(context_id=context_id, from_seq=run_start,
                                                 through_seq=previous))
                run_start = None
        if run_start is not None and previous is not None:
            ranges.append(ContextSourceRange(context_id=context_id, from_seq=run_start,
                                             through_seq=previous))
    return tuple(ranges)


def make_snapshot(*, snapshot_id: UUID, context_id: UUID, generation: int,
                  manifest: SourceManifest, seqs_by_context: Mapping[UUID, Sequence[int]],
                  source_revisions: Mapping[UUID, int], protected_input_ids: Sequence[UUID],
                  summary_ref: PayloadRef, summary_tokens: int) -> ContextSnapshot:
    """The ContextSnapshot of a finished episode. ``tail_after_seq`` is the last covered seq of
    the snapshot's own context, never another context's.  CTX-9.1, CTX-9.2, CTX-9.9"""
    ranges = source_ranges(manifest, seqs_by_context)
    own = [r.through_seq for r in ranges if r.context_id == context_id]
    covered_contexts = {r.context_id for r in ranges}
    return ContextSnapshot(
        snapshot_id=snapshot_id, context_id=context_id, generation=generation,
        source_ranges=ranges,
        source_effective_revisions={cid: source_revisions[cid] for cid in covered_contexts},
        protected_input_ids=tuple(protected_input_ids), summary_ref=summary_ref,
        tail_after_seq=max(own) if own else 0, token_estimate=summary_tokens)


# --- applying, invalidating ---------------------------------------------------------------------


@dataclass(frozen=True)
class Applicability:
    applies: bool
    changed: tuple[str, ...]
    """Covered pieces whose content is no longer what the summary saw (or that are gone)."""


def applicability(manifest: SourceManifest, view: ModelView) -> Applicability:
    """Whether every covered piece still has the content it had: compared by content hash
    against the view built from the current effective revisions, never by sequence number
    alone.  CTX-9.8, CTX-9.22, CTX-9.24, CTX-9.26"""
    now = {material_key(m): content_hash(m) for m in view.messages}
    changed = tuple(p.key for p in manifest.pieces
                    if not p.key.startswith("snapshot:") and now.get(p.key) != p.content_hash)
    return Applicability(not changed, changed)


def apply_snapshot(view: ModelView, manifest: SourceManifest, summary_text: str,
                   snapshot_id: UUID) -> ModelView:
    """The view with the covered material replaced, once, by the summary (placed where the
    first covered message was); increments, corrections and protected inputs stay as they
    are.  CTX-9.19, CTX-9.20, CTX-9.25"""
    covered = manifest.keys
    messages: list[ViewMessage] = []
    placed = False
    for message in view.messages:
        if material_key(message) in covered:
            if not placed:
                messages.append(summary_message(summary_text, snapshot_id))
                placed = True
            continue
        messages.append(message)
    return ModelView(tuple(messages))


def view_with_snapshot(view: ModelView, snapshot: tuple[UUID, SourceManifest, str] | None
                       ) -> tuple[ModelView, UUID | None, Applicability | None]:
    """The view a request uses: the applicable active snapshot applied, or — when its covered
    material changed — the full re-materialised view, the snapshot set aside (kept, not
    authoritative for new views).  CTX-9.26, CTX-9.27"""
    if snapshot is None:
        return view, None, None
    snapshot_id, manifest, text = snapshot
    verdict = applicability(manifest, view)
    if not verdict.applies:
        return view, None, verdict
    return apply_snapshot(view, manifest, text, snapshot_id), snapshot_id, verdict


def usable_for(snapshot: ContextSnapshot, context_id: UUID) -> bool:
    """Only the role context that owns a snapshot applies it: a new Run's first view is
    rebuilt from the records by the §4 projection, never from another Run's (or role's)
    summary.  CTX-4.21, CTX-4.22"""
    return snapshot.context_id == context_id


@dataclass(frozen=True)
class ActivePointer:
    """RoleContext.active_snapshot_id with the lease epoch of the Run's owner."""

    snapshot_id: UUID | None
    lease_epoch: int


@dataclass(frozen=True)
class SwitchRefused:
    reason: Literal["ACTIVE_SNAPSHOT_CHANGED", "COVERED_MATERIAL_CHANGED", "LEASE_LOST"]
    detail: str


def switch_active(pointer: ActivePointer, *, expected_active: UUID | None, lease_epoch: int,
                  new_snapshot_id: UUID, manifest: SourceManifest,
                  current_view: ModelView) -> ActivePointer | SwitchRefused:
    """The pointer switch, in the same commit as the snapshot: a CAS on the expected active
    snapshot, the covered material (appends or changes to uncovered material are fine) and the
    lease epoch. A refused switch keeps the snapshot inactive; nothing is re-run.
    CTX-9.17, CTX-9.18, CTX-9.30 to CTX-9.33, CTX-10.24"""
    if pointer.lease_epoch != lease_epoch:
        return SwitchRefused("LEASE_LOST", f"lease epoch {lease_epoch} is not the owner's "
                             f"{pointer.lease_epoch}")
    if pointer.snapshot_id != expected_active:
        return SwitchRefused("ACTIVE_SNAPSHOT_CHANGED", f"active is {pointer.snapshot_id}, "
                             f"expected {expected_active}")
    verdict = applicability(manifest, current_view)
    if not verdict.applies:
        return SwitchRefused("COVERED_MATERIAL_CHANGED", ", ".join(verdict.changed))
    return ActivePointer(new_snapshot_id, pointer.lease_epoch)


@dataclass(frozen=True)
class FrozenRequestBinding:
    """What a frozen request binds (§9): the view hash, each source revision, the applicable
    snapshot and the protected inputs. Retries and recovery rebuild from it; only a new
    business Operation reads a newer head.  CTX-9.34, CTX-9.35"""

    view_hash: str
    source_revisions: Mapping[UUID, int]
    snapshot_id: UUID | None
    protected_input_ids: tuple[UUID, ...]


def view_hash(view: ModelView) -> str:
    """The hash of a view: SHA-256 of the JSON list of each message's ``[material key,
    content hash]``. Each message keeps its item once made, so a request hashes only the
    messages it made itself (those of ended Runs it shares with the previous request are kept
    with their revisions, Q321); the bytes hashed are the JSON list's, whatever was kept."""
    found = marked(view)
    if found is None:
        digest = hashlib.sha256(b"[")
        digest.update(_joined(view.messages, False))
    else:  # the hash state after a kept segment is kept with it, by what came before
        at, segment = found
        before = b"[" + _joined(view.messages[:at], False) + (b", " if at else b"")
        digest = segment.memo(("view_hash", before), lambda: hashlib.sha256(
            before + _joined(segment.items, False)), _hashed_on).copy()
        digest.update(_joined(view.messages[at + len(segment):], True))
    digest.update(b"]")
    return "sha256:" + digest.hexdigest()


def _hashed_on(digest: "hashlib._Hash", items: tuple[ViewMessage, ...]) -> "hashlib._Hash":
    longer = digest.copy()
    longer.update(_joined(items, True))
    return longer


def _joined(messages: Iterable[ViewMessage], after_one: bool) -> bytes:
    """The messages' items of a view hash joined by ", " (led by one when ``after_one``),
    each made once per message (Q321)."""
    items = []
    for message in messages:
        item: str | None = getattr(message, "_digest", None)
        if item is None:
            item = _UNICODE.encode([material_key(message), content_hash(message)])
            object.__setattr__(message, "_digest", item)
        items.append(item)
    if not items:
        return b""
    return ((", " if after_one else "") + ", ".join(items)).encode("utf-8", "surrogatepass")


def bind_frozen_request(view: ModelView, source_revisions: Mapping[UUID, int],
                        snapshot_id: UUID | None,
                        protected_input_ids: Sequence[UUID]) -> FrozenRequestBinding:
    return FrozenRequestBinding(view_hash(view), dict(source_revisions), snapshot_id,
                                tuple(protected_input_ids))
