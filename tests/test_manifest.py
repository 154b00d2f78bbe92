"""A revision's manifest and effective records (reference/effective.py) against the plain
reading of §3: every visible record's content is its raw content with the overrides in force
for it applied from the outermost field inwards, its digest the sha256 of that content's
canonical JSON, its modified fields the overrides' keys and mutations. The core groups the
overrides once per revision and names a record without overrides by its raw content's digest,
computed once per record, and the stored revision's manifest ref from each such record's entry
text, also computed once (issue #20); the plain reading here scans every override for every
record and digests every record and the whole document again, on every revision of random
histories."""

import hashlib
import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from hypothesis import given
from hypothesis import strategies as st

from ctxspec.reference.context_contracts import revision_contract
from ctxspec.reference.contracts import ContextRecord, MessageRole, MutationSourceKind
from ctxspec.reference.effective import (
    ABSENT,
    ContextState,
    FieldChange,
    ManifestEntry,
    RawRecord,
    RevisionConflict,
    Scope,
    append_records,
    commit_changes,
    effective_record,
    effective_records,
    manifest,
    new_context,
)
from ctxspec.reference.registry import JSON, split
from ctxspec.reference.view import EffectiveRecord
from tests.builders import ref, uuid

CTX, RUN = uuid(1), uuid(2)
CALLS = (uuid(3), uuid(4))


def _call(ordinal: int) -> st.SearchStrategy[dict[str, JSON]]:
    return st.fixed_dictionaries({"name": st.sampled_from(["read", "write"]),
                                  "action_ordinal": st.just(ordinal),
                                  "arguments": st.fixed_dictionaries(
                                      {"path": st.text(max_size=4)})})


TEXT = st.one_of(st.text(max_size=8), st.just(ABSENT))
FIELDS = {"text": TEXT, "reasoning": TEXT,
          f"tool_call:{CALLS[0]}": _call(1), f"tool_call:{CALLS[1]}": _call(2),
          f"tool_call:{CALLS[0]}.arguments": st.fixed_dictionaries({"path": st.text(max_size=4)}),
          f"tool_call:{CALLS[0]}.arguments.path": TEXT}
"""Field keys a change may write, each with values it may take: whole roots, nested objects
and leaves of the same root (a parent written after a child supersedes it), so overrides nest
and replace each other; a deleted leaf or text is ABSENT."""

changes = st.sampled_from(sorted(FIELDS)).flatmap(
    lambda key: st.tuples(st.integers(0, 20), st.just(key), FIELDS[key]))


def _record(seq: int) -> ContextRecord:
    return ContextRecord(record_id=uuid(100 + seq), context_id=CTX, context_seq=seq, run_id=RUN,
                         role=MessageRole.ASSISTANT, message_kind="assistant",
                         payload_ref=ref(str(seq)), operation_id=None, call_id=None,
                         origin_input_id=None)


def _content(seq: int, text: str) -> dict[str, JSON]:
    return {"text": text, f"tool_call:{CALLS[0]}": {
        "name": "write", "action_ordinal": 1, "arguments": {"path": f"{seq}.md"}}}


steps = st.lists(st.one_of(
    st.tuples(st.just("append"), st.lists(st.text(max_size=6), min_size=1, max_size=3)),
    st.tuples(st.just("change"), st.lists(changes, min_size=1, max_size=3))),
    min_size=1, max_size=12)


def _history(plan: list[tuple[str, Any]]) -> ContextState:
    state = new_context(CTX, Scope("private", owner_role="react"))
    for number, (kind, what) in enumerate(plan):
        mutation_id = uuid(1000 + number)
        if kind == "append":
            first = len(state.records) + 1
            state = append_records(state, [
                RawRecord(_record(seq), _content(seq, text), "prompt:p@1" if seq % 3 else None)
                for seq, text in enumerate(what, start=first)],
                mutation_id=mutation_id, source_kind=MutationSourceKind.RUNTIME,
                source_ref="model-output").state
            continue
        if not state.records:
            continue
        changes = [FieldChange(state.records[index % len(state.records)].record_id, key, value,
                               (key,)) for index, key, value in what]
        done = commit_changes(state, changes, (), base_revision=state.head.revision,
                              mutation_id=mutation_id, source_kind=MutationSourceKind.HOOK,
                              source_ref=f"hook-{number}")
        assert not isinstance(done, RevisionConflict)
        state = done.state
    return state


def _plain_content(raw: RawRecord, overrides: Mapping[str, Any]) -> dict[str, JSON]:
    """The raw content with each override set, shallowest field first (a parent's value is in
    place before its children are written into it)."""
    content: Any = json.loads(json.dumps(raw.content))
    for key in sorted(overrides, key=lambda k: (k.count("."), k)):
        root, names = split(key)
        path = (root, *names)
        node = content
        for name in path[:-1]:
            child = node.get(name)
            node[name] = dict(child) if isinstance(child, dict) else {}
            node = node[name]
        if overrides[key].value is ABSENT:
            node.pop(path[-1], None)
        else:
            node[path[-1]] = overrides[key].value
    return dict(content)


def _plain_manifest(state: ContextState, revision: int) -> tuple[ManifestEntry, ...]:
    rev = state.revision(revision)
    entries = []
    for raw in state.records:
        if raw.record.context_seq > rev.record_watermark:
            continue
        mine = {key: o for (rid, key), o in rev.overrides.items() if rid == raw.record_id}
        text = json.dumps(_plain_content(raw, mine), sort_keys=True, ensure_ascii=False,
                          separators=(",", ":"))
        digest = "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
        entries.append(ManifestEntry(raw.record_id, raw.record.context_seq, digest,
                                     {key: o.mutation_id for key, o in mine.items()}, raw.source))
    return tuple(entries)


def _plain_records(state: ContextState, revision: int) -> list[EffectiveRecord]:
    rev = state.revision(revision)
    sources: dict[UUID, str] = {m: f"{done.source_kind.value}:{done.source_ref}"
                                for m, done in state.mutations.items()}
    return [effective_record(raw, {key: o for (rid, key), o in rev.overrides.items()
                                   if rid == raw.record_id}, sources)
            for raw in state.records if raw.record.context_seq <= rev.record_watermark]


@given(steps)
def test_every_revisions_manifest_is_the_plain_recomputation(plan: list[tuple[str, Any]]
                                                              ) -> None:
    state = _history(plan)
    for revision in range(1, state.head.revision + 1):
        assert manifest(state, revision) == _plain_manifest(state, revision)
        assert effective_records(state, revision) == _plain_records(state, revision)
        # The stored revision addresses the canonical JSON of its manifest document.
        stored = revision_contract(state, revision, commit_ref="c",
                                   created_at=datetime(2026, 1, 1, tzinfo=UTC))
        assert stored.effective_manifest_ref.digest == _plain_ref(state, revision)


def _plain_ref(state: ContextState, revision: int) -> str:
    document = [{"record_id": str(e.record_id), "context_seq": e.context_seq,
                 "content": e.content_digest, "source": e.source,
                 "modified": {key: str(m) for key, m in e.modified_fields.items()}}
                for e in _plain_manifest(state, revision)]
    text = json.dumps(document, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def test_a_record_without_overrides_is_named_by_its_raw_digest_and_a_changed_one_is_not() -> None:
    state = _history([("append", ["a", "b"]), ("change", [(1, "text", "B")])])
    first, second = manifest(state)
    assert first.content_digest == state.records[0].content_digest
    assert first.modified_fields == {}
    assert second.content_digest != state.records[1].content_digest
    assert second.modified_fields == {"text": uuid(1001)}
    # The earlier revision, before the change, names the raw digest of both.
    assert [e.content_digest for e in manifest(state, 2)] == [
        r.content_digest for r in state.records]
