"""Mutants of the history projection (§4, §6): which Runs are shown, and how."""

from collections.abc import Callable, Sequence
from typing import Any
from uuid import UUID

from ctxspec.conformance.mutants import Mutant, Patch
from ctxspec.reference import history, protocol
from ctxspec.reference.contracts import MessageRole, RunStatus
from ctxspec.reference.runtime import history_source
from ctxspec.reference.view import ViewKind, ViewMessage


class _CallDroppingRepair(protocol.ProtocolRepair):
    """Trims an ended Run's tool process by dropping the assistant decisions that made calls,
    keeping their results: every result of older history is left without its call."""

    def _emit(self, batch: Any, out: list[ViewMessage], *, placeholders: bool) -> None:
        kept: list[ViewMessage] = []
        super()._emit(batch, kept, placeholders=placeholders)
        out.extend(m for m in kept if not (m.kind is ViewKind.ASSISTANT and m.tool_calls))


def _question_only(original: Callable[..., Any]) -> Callable[..., Any]:
    def user_inputs(self: Any, run: Any) -> Any:
        return list(original(self, run))[:1]
    return user_inputs


def _recent_by_success(original: Callable[..., Any]) -> Callable[..., Any]:
    def select(ended: Sequence[Any], recent_n: int) -> tuple[Sequence[Any], Sequence[Any]]:
        succeeded = [run for run in ended if run.status is RunStatus.SUCCEEDED]
        recent = succeeded[-recent_n:] if recent_n else []
        return [run for run in ended if run not in recent], recent
    return select


def _made_up_answer(original: Callable[..., Any]) -> Callable[..., Any]:
    def marker(run: Any) -> ViewMessage:
        if run.final_answer is None or run.final_answer.incomplete:
            return ViewMessage(role=MessageRole.ASSISTANT, kind=ViewKind.ASSISTANT,
                               text="I have finished this task.", source_run_id=run.run_id)
        result: ViewMessage = original(run)
        return result
    return marker


def _agent_history(original: Callable[..., Any]) -> Callable[..., Any]:
    def ended_runs(self: Any, before_run_no: int) -> Any:
        # History is read per Agent: the Runs of the Agent's earlier Sessions come first.
        rows = self.store.query(
            "SELECT s.session_id FROM sessions s JOIN sessions mine ON s.agent_id = "
            "mine.agent_id WHERE mine.session_id = ? AND s.session_id != ? ORDER BY s.rowid",
            (str(self.session_id), str(self.session_id)))
        earlier = [run for row in rows for run in original(
            type(self)(self.store, UUID(row["session_id"])), 10**9)]
        return [*earlier, *original(self, before_run_no)]
    return ended_runs


MUTANTS = (
    Mutant("HISTORY-ORPHAN-RESULT",
           "older history keeps tool results but cuts the calls that made them (§6: every "
           "result has its call)",
           (Patch(history, "ProtocolRepair", lambda _: _CallDroppingRepair),)),
    Mutant("OLDER-QUESTION-ONLY",
           "an older Run keeps only its question, not its supplements (§4: all user inputs)",
           (Patch(history_source.StoredHistory, "user_inputs", _question_only),)),
    Mutant("RECENT-BY-SUCCESS",
           "the recent Runs are the last ones that succeeded (§4: by question order, whatever "
           "their end)",
           (Patch(history, "select_history", _recent_by_success),)),
    Mutant("FAKE-FINAL-ANSWER",
           "a Run without a final result gets a made-up assistant answer (§4: a system fact "
           "marker, never a fake answer)",
           (Patch(history, "terminal_marker", _made_up_answer),)),
    Mutant("SESSION-INHERITS-HISTORY",
           "a new Session's history projection takes in the Runs of the Agent's earlier "
           "Sessions (§10: Session history is no memory across Sessions)",
           (Patch(history_source.StoredHistory, "ended_runs", _agent_history, reads_only=True),)),
)
