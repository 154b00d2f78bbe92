"""Mutants of role boundaries, access and input delivery (§1, §5, §10, §11)."""

from collections.abc import Callable
from typing import Any

from ctxspec.conformance.mutants import Mutant, Patch
from ctxspec.reference import delivery
from ctxspec.reference.contracts import DeliveryState, MessageRole
from ctxspec.reference.runtime.runtime import ReferenceRuntime
from ctxspec.reference.tokens import PromptMessage
from ctxspec.reference.view import ModelView, ViewKind, ViewMessage


def _inherits_planner_inputs(original: Callable[..., Any]) -> Callable[..., Any]:
    def projection(self: Any, run: Any, protected: Any) -> Any:
        view = original(self, run, protected)
        if run.parent is None or not isinstance(view, ModelView):
            return view
        # The Executor "inherits" the user's inputs from the Planner's context.
        inherited = tuple(
            ViewMessage(role=MessageRole.USER, kind=ViewKind.USER_REF,
                        text=str(raw.content["text"]), input_id=raw.record.origin_input_id)
            for raw in self.contexts[run.parent.context_id].records
            if raw.record.message_kind == "user_ref")
        return ModelView((*inherited, *view.messages))
    return projection


def _any_session(original: Callable[..., Any]) -> Callable[..., Any]:
    def read_history(self: Any, caller: Any) -> Any:
        # The Session check is missing: a root-role caller of any Session is served.
        if caller.kind == "role" and caller.session_id != self.session_id:
            caller = type(caller)(self.session_id, caller.kind, caller.role)
        return original(self, caller)
    return read_history


def _retry_rebuilt(original: Callable[..., Any]) -> Callable[..., Any]:
    def model(self: Any, run: Any, purpose: Any, operation_id: Any, purpose_key: str,
              attempt: int, messages: tuple[PromptMessage, ...], schemas: Any, max_output: int,
              view: ModelView, **rest: Any) -> Any:
        if purpose == "business" and attempt > 1:
            # The retry prepares its request afresh and takes in supplements received since.
            late = [self.texts[i] for i in delivery.pending_inputs(self.book, run.run_id)]
            view = ModelView((*view.messages, *(ViewMessage(
                role=MessageRole.USER, kind=ViewKind.USER_REF, text=t) for t in late)))
            messages = (*messages, *(PromptMessage(role="user", text=t) for t in late))
        return original(self, run, purpose, operation_id, purpose_key, attempt, messages,
                        schemas, max_output, view, **rest)
    return model


def _claimed_dropped(original: Callable[..., Any]) -> Callable[..., Any]:
    def to_carry(book: Any, run_id: Any) -> Any:
        # Only untouched (pending) supplements move on; a claimed one stays with its dead Run.
        return tuple(d for d in original(book, run_id) if d.state is DeliveryState.PENDING)
    return to_carry


MUTANTS = (
    Mutant("RETRY-TAKES-LATE-SUPPLEMENT",
           "a retry rebuilds its request and takes in a supplement received after the freeze "
           "(§5: every attempt sends the frozen input list)",
           (Patch(ReferenceRuntime, "_model", _retry_rebuilt),)),
    Mutant("EXECUTOR-SEES-PLANNER",
           "an Executor's request carries the user inputs of the Planner's context (§5, §10: "
           "only the hand-over, never the main Agent's raw inputs)",
           (Patch(ReferenceRuntime, "_projection", _inherits_planner_inputs),)),
    Mutant("CROSS-SESSION-READ",
           "the history API serves a root-role caller of another Session (§11)",
           (Patch(ReferenceRuntime, "read_history", _any_session),)),
    Mutant("CLAIMED-SUPPLEMENT-LOST",
           "a supplement claimed by a request that failed before any output is not carried "
           "to the next question (§5, §11: it becomes pending again, same UserInput)",
           (Patch(delivery, "to_carry", _claimed_dropped),)),
)
