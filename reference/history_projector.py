"""The HistoryProjector of §3 (``ContextManager --> HistoryProjector : 纯投影``): the pure
history projection of §4 with the de-duplication of §5 and the protocol repair of §6, as a
component the ContextManager holds.

The projection itself is :func:`~ctxspec.reference.history.project_history` (its algorithm is
the design's, in the design's order); the projector carries the Agent's ``recent_runs`` and
reads the ended Runs through a :class:`~ctxspec.reference.history.HistorySource` (the
ContextRepository).
"""

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from uuid import UUID

from ctxspec.reference import history
from ctxspec.reference.contracts import OperationState
from ctxspec.reference.protocol import NO_STATES, UnsettledBatch
from ctxspec.reference.view import EffectiveRecord, ModelView


@dataclass(frozen=True)
class HistoryProjector:
    """Projects the view of one request: the ended Runs (the last ``recent_runs`` of them with
    their root role's effective records, older ones as inputs and final result), then the
    current role's effective records (§4).  CTX-4.1, CTX-4.4"""

    recent_runs: int = history.DEFAULT_RECENT_RUNS

    def project(self, *, ended_runs: Sequence[history.EndedRun],
                source: history.HistorySource, current_run_id: UUID,
                current_records: Iterable[EffectiveRecord],
                protected_input_ids: Collection[UUID],
                call_states: Mapping[UUID, OperationState] = NO_STATES,
                older_part: history.OlderPart | None = None) -> ModelView | UnsettledBatch:
        """The ModelView of the current role's next request, or :class:`UnsettledBatch` when
        its batch is not settled (CTX-6.7). ``older_part``: the older Runs' part as a
        runtime kept it (:class:`~ctxspec.reference.history.OlderPart`), used when it is
        this request's."""
        # Through the module, so a fault planted in the projection reaches the runtime.
        return history.project_history(
            ended_runs=ended_runs, recent_runs=self.recent_runs, source=source,
            current_run_id=current_run_id, current_records=current_records,
            protected_input_ids=protected_input_ids, call_states=call_states,
            older_part=older_part)


__all__ = ["HistoryProjector"]
