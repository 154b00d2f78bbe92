"""The ContextRepository port of §3 (``ContextManager --> ContextRepository : 读固定版本``): the
read side of the stored, committed facts a request's context is built from — the Session's
ended Runs, the inputs listed under each, where an input's body belongs, and each ended Run's
root-role records at its committed head revision.

"TokenEstimator、CompactionPolicy、ContextRepository … 是可替换端口": a runtime reads its
history through this protocol, however it stores it. It only reads committed revisions, so what
it answers is fixed (a record it serves never changes under the reader). The reference's
implementation is the SQLite store's (``runtime/history_source.py`` ``StoredHistory``), paged
so memory does not grow with the Session (CTX-4.23).
"""

from collections.abc import Sequence
from typing import Protocol

from ctxspec.reference.history import EndedRun, HistorySource


class ContextRepository(HistorySource, Protocol):
    """The committed history of one Session, as the HistoryProjector reads it (§3, §4, §5)."""

    def ended_runs(self, before_run_no: int) -> Sequence[EndedRun]:
        """The Session's Runs ended before ``before_run_no``, by run_no, each with its final
        answer.  CTX-4.3, CTX-4.12, CTX-4.13"""
        ...


__all__ = ["ContextRepository"]
