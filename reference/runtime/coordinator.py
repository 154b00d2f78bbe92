"""The write set of one RuntimeCommit (§3 "一致提交": the components prepare write sets, the one
CommitCoordinator commits them; §10 "上下文与执行现场的边界").

A component that changes a fact says so at once — a new record, a revision, an Operation's
state, a delivery, a Run's end — by putting that fact's rows into the :class:`PendingCommit` of
the runtime; the next named commit takes them with its own writes in one transaction. Nothing
compares the whole in-memory state with the store: a fact nobody put is not written.

Rows are keyed by what they are (a table and an id, or a context), so a fact changed twice
before its commit is written once, in its latest version, and a row first inserted stays an
insert. Rows whose content depends on the commit's moment (a revision's ``created_at``, a
Run's end) are rendered when the commit is taken, not when they are put.
"""

from collections.abc import Callable, Container, Iterable
from dataclasses import dataclass, field

from pydantic import BaseModel

from ctxspec.reference.contracts import PayloadRef
from ctxspec.reference.runtime.store import (
    Write,
    doc_key,
    insert_doc,
    payload_ref,
    update_doc,
)

Render = Callable[[bool], list[Write]]
"""The rows of one staged fact; the argument says whether the row is new (an insert)."""


@dataclass
class _Entry:
    new: bool
    render: Render


@dataclass
class PendingCommit:
    """What the next RuntimeCommit writes besides the commit's own writes: every fact a
    component changed since the previous commit, in the order it was first put, and the blobs
    those facts point at (written in the same transaction, so a failed commit leaves no
    orphan)."""

    entries: dict[tuple[object, ...], _Entry] = field(default_factory=dict)
    blobs: dict[str, bytes] = field(default_factory=dict)

    def put(self, key: tuple[object, ...], render: Render, *, new: bool = False) -> None:
        """Stage a fact under ``key``; a later put of the same key replaces the rendering but
        keeps its place and its insert."""
        earlier = self.entries.get(key)
        self.entries[key] = _Entry(new or (earlier is not None and earlier.new), render)

    def put_doc(self, doc: BaseModel, *, new: bool, **extra: object) -> None:
        """Stage a contract's row: inserted when ``new``, else its new version."""
        self.put(doc_key(doc), lambda inserted: [
            insert_doc(doc, **extra) if inserted else update_doc(doc, **extra)], new=new)

    def put_rows(self, key: tuple[object, ...], rows: Iterable[Write]) -> None:
        """Stage rows that are facts of their own (an event, an appended record)."""
        fixed = list(rows)
        self.put(key, lambda _inserted: fixed)

    def blob(self, text: str) -> PayloadRef:
        """A content-addressed blob of ``text``, written with the next commit."""
        ref = body_ref(text)
        self.blobs[ref.digest] = text.encode("utf-8", "surrogatepass")
        return ref

    def take(self) -> "Taken":
        """Empty the pending write set; :meth:`Taken.rows` renders its rows."""
        taken = Taken(self.entries, self.blobs)
        self.entries, self.blobs = {}, {}
        return taken

    def give_back(self, taken: "Taken") -> None:
        """A commit that failed wrote nothing: its facts are still to be written (the blobs
        are dropped, as nothing points at them yet)."""
        self.entries = {**taken.entries, **self.entries}


@dataclass(frozen=True)
class Taken:
    entries: dict[tuple[object, ...], _Entry]
    blobs: dict[str, bytes]

    def blob_writes(self, stored: Container[str] = ()) -> list[Write]:
        """The blobs' rows, but those of digests in ``stored`` (already in the store: a
        content-addressed blob is written once, issue #20)."""
        return [Write("blobs", "ensure", {"digest": digest, "media_type": "text/plain",
                                          "size_bytes": len(data), "body": data})
                for digest, data in self.blobs.items() if digest not in stored]

    def rows(self) -> list[Write]:
        """The staged facts' rows, rendered now, in the order they were first put."""
        rows: list[Write] = []
        for entry in self.entries.values():
            rows.extend(entry.render(entry.new))
        return rows


def body_ref(text: str) -> PayloadRef:
    """The content address of ``text`` (what :meth:`PendingCommit.blob` will store it under),
    computed without staging anything."""
    return payload_ref(text.encode("utf-8", "surrogatepass"))


__all__ = ["PendingCommit", "Render", "Taken", "body_ref"]
