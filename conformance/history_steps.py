"""The reference driver's retention and history-API steps (the optional ``retention`` and
``history_api`` capabilities, §1, §4, §6, §11): what the Agent's workspace and store keep, and
the history API as the callers a scenario names read it — an audit reader with the grant the
driver, as the operator, issued for it (Q410)."""

from typing import Any, Literal
from uuid import UUID, uuid5

from ctxspec.conformance.scenario import AUDITOR, HistoryReadDoc
from ctxspec.reference.contracts import PayloadRef
from ctxspec.reference.runtime.access import AccessDenied, AuditGrants, HistoryCaller
from ctxspec.reference.runtime.runtime import ReferenceRuntime
from ctxspec.reference.runtime.store import TABLES, Store
from ctxspec.reference.runtime.trace import BodyDigest, HistoryRead, RecordBody, Retained, Trace


class HistorySteps:
    """Mixed into the reference driver, which provides its runtimes, store and grants."""

    store: Store
    audit: AuditGrants
    observed: Trace
    sessions: list[ReferenceRuntime]

    def _runtime(self) -> ReferenceRuntime:
        raise NotImplementedError

    def session_id(self) -> UUID:
        raise NotImplementedError

    def workspace(self) -> dict[str, str]:
        """The working files the Agent's tools wrote that are still there."""
        return dict(self._runtime().workspace)

    def observe_retention(self) -> None:
        self.observed.add(Retained(tuple(sorted(self._runtime().workspace)),
                                   self.store.count("records"), self.store.count("blobs")))

    def history_step(self, read: HistoryReadDoc) -> None:
        session = self.session_id() if read.session == "own" else uuid5(self.session_id(),
                                                                        "another Session")
        caller = read.kind + (f":{read.role}" if read.role else "")
        role = AUDITOR if read.kind == "audit" and read.role is None else read.role
        try:
            rows = self.read_history(session, read.kind, role, read.content,
                                     read.node_task)
        except AccessDenied as refused:
            self.observed.add(HistoryRead(caller, read.session, False, (), str(refused),
                                          () if read.bodies else None, read.content,
                                          read.node_task))
            return
        bodies = None
        if read.bodies:
            who = self._caller(session, read.kind, role)
            bodies = tuple(self._body(who, row) for row in rows)
        self.observed.add(HistoryRead(caller, read.session, True,
                                      tuple(r["message_kind"] for r in rows), None, bodies,
                                      read.content, read.node_task))

    def _body(self, caller: HistoryCaller, row: dict[str, Any]) -> RecordBody:
        """A served record as digests: its text, and the full body behind its result_ref as
        the caller reads it on demand."""
        content = row["content"]
        text = content.get("text")
        cut = content.get("truncation")
        full = None
        if isinstance(cut, dict) and isinstance(cut.get("result_ref"), dict):
            ref = PayloadRef.model_validate(cut["result_ref"])
            full = BodyDigest.of(self._runtime().read_result_body(caller, ref))
        return RecordBody(str(row["message_kind"]),
                          BodyDigest.of(text if isinstance(text, str) else ""), full)

    def stored_rows(self) -> int:
        """How many rows the store holds, all tables together."""
        return sum(self.store.count(table) for table in TABLES)

    def delete_agent(self) -> None:
        """Each Session's runtime deletes its own records and the Agent."""
        for runtime in [*self.sessions, self._runtime()]:
            runtime.delete_agent()

    def read_history(self, session_id: UUID, kind: Literal["role", "audit", "script"],
                     role: str | None = None, content: Literal["raw", "effective"] | None = None,
                     node_task: int | None = None) -> list[dict[str, Any]]:
        """The history API: the records a caller may read (effective or raw, Q81), as JSON; a
        refusal raises ``AccessDenied``."""
        return [{"message_kind": raw.record.message_kind, "content": dict(raw.content)}
                for raw in self._runtime().read_history(self._caller(session_id, kind, role),
                                                        content, node_task)]

    def _caller(self, session_id: UUID, kind: Literal["role", "audit", "script"],
                role: str | None) -> HistoryCaller:
        """The history API's caller; an audit reader brings the grant issued for it, if the
        Agent names it (a reader it does not name has none, and is refused)."""
        grant = self.audit.grant(role) if kind == "audit" and role is not None else None
        return HistoryCaller(session_id, kind, role, grant)

