"""Mutants of role boundaries, access and input delivery (§1, §5, §10, §11)."""

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from ctxspec.conformance.mutants import Mutant, Patch
from ctxspec.reference import delivery
from ctxspec.reference.contracts import DeliveryState, MessageRole, UserInput
from ctxspec.reference.runtime.context_manager import ContextManager
from ctxspec.reference.runtime.node_driver import NodeDriver
from ctxspec.reference.runtime.pipeline import InvocationPipeline
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
            for raw in self.s.contexts[run.parent.context_id].records
            if raw.record.message_kind == "user_ref")
        return ModelView((*inherited, *view.messages))
    return projection


def _any_session(original: Callable[..., Any]) -> Callable[..., Any]:
    def read_history(self: Any, caller: Any, *args: Any) -> Any:
        # The Session check is missing: a root-role caller of any Session is served.
        if caller.kind == "role" and caller.session_id != self.session_id:
            caller = type(caller)(self.session_id, caller.kind, caller.role)
        return original(self, caller, *args)
    return read_history


def _audit_ungranted(original: Callable[..., Any]) -> Callable[..., Any]:
    def authorise(self: Any, caller: Any) -> Any:
        # The grant is not looked up: whoever says it is audit reads the Session.
        if caller.kind == "audit" and caller.session_id == self.session_id:
            return None
        return original(self, caller)
    return authorise


def _retry_rebuilt(original: Callable[..., Any]) -> Callable[..., Any]:
    def model(self: Any, run: Any, purpose: Any, operation_id: Any, purpose_key: str,
              attempt: int, messages: tuple[PromptMessage, ...], schemas: Any, max_output: int,
              view: ModelView, **rest: Any) -> Any:
        if purpose == "business" and attempt > 1:
            # The retry prepares its request afresh and takes in supplements received since.
            late = [self.s.texts[i] for i in delivery.pending_inputs(self.s.book, run.run_id)]
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


def _session_notes(original: Callable[..., Any]) -> Callable[..., Any]:
    def ask(self: Any, text: str) -> Any:
        if not self.runs:  # the Session's first question: what the workspace holds is "known"
            self.session.notes = dict(self.workspace)
        return original(self, text)
    return ask


def _with_notes(original: Callable[..., Any]) -> Callable[..., Any]:
    def system(self: Any, run: Any) -> ViewMessage:
        message: ViewMessage = original(self, run)
        notes = getattr(self.s, "notes", None)
        if not notes:
            return message
        # The files found in the Agent's workspace when the Session opened are read into
        # every request as the Session's notes.
        listed = "\n".join(f"{path}: {text}" for path, text in sorted(notes.items()))
        return replace(message, text=f"{message.text}\n\nNotes:\n{listed}")
    return system


def _guessed_preferences(original: Callable[..., Any]) -> Callable[..., Any]:
    def system(self: Any, run: Any) -> ViewMessage:
        message: ViewMessage = original(self, run)
        # Preferences the user stated in the Agent's other Sessions, guessed from their inputs
        # and added to every request as a memory of the user.
        said = [self.s.store.text(UserInput.model_validate_json(row["doc"]).body_ref)
                for row in self.s.store.query(
                    "SELECT doc FROM user_inputs WHERE session_id != ?",
                    (str(self.s.session_id),))]
        liked = [text for text in said if "prefer" in text]
        if not liked:
            return message
        return replace(message,
                       text=f"{message.text}\n\nThe user's preferences: {' '.join(liked)}")
    return system


def _preview_served(original: Callable[..., Any]) -> Callable[..., Any]:
    def read_result_body(self: Any, caller: Any, result_ref: Any) -> str:
        original(self, caller, result_ref)  # the same authorisation
        # The record as the model saw it is served: the bounded preview, not the full body.
        for raw in self.read_history(caller):
            cut = raw.content.get("truncation")
            if isinstance(cut, dict) and cut.get("result_ref", {}).get("digest") == \
                    result_ref.digest:
                return str(raw.content["text"])
        raise LookupError("no record carries this result_ref")
    return read_result_body


def _loops_per_role(original: Callable[..., Any]) -> Callable[..., Any]:
    def taken(self: Any, run: Any) -> int:
        loops: int = run.loops  # each role against its own budget
        return loops
    return taken


MUTANTS = (
    Mutant("RETRY-TAKES-LATE-SUPPLEMENT",
           "a retry rebuilds its request and takes in a supplement received after the freeze "
           "(§5: every attempt sends the frozen input list)",
           (Patch(InvocationPipeline, "call_model", _retry_rebuilt),)),
    Mutant("EXECUTOR-SEES-PLANNER",
           "an Executor's request carries the user inputs of the Planner's context (§5, §10: "
           "only the hand-over, never the main Agent's raw inputs)",
           (Patch(ContextManager, "project", _inherits_planner_inputs, reads_only=True),)),
    Mutant("CROSS-SESSION-READ",
           "the history API serves a root-role caller of another Session (§11)",
           (Patch(ReferenceRuntime, "read_history", _any_session),)),
    Mutant("AUDIT-WITHOUT-GRANT",
           "any caller that says it is audit reads the Session's history; the Agent's grant is "
           "not looked up (§4, §11: authorised audit)",
           (Patch(ReferenceRuntime, "authorise", _audit_ungranted),)),
    Mutant("CLAIMED-SUPPLEMENT-LOST",
           "a supplement claimed by a request that failed before any output is not carried "
           "to the next question (§5, §11: it becomes pending again, same UserInput)",
           (Patch(delivery, "to_carry", _claimed_dropped),)),
    Mutant("WORKSPACE-AS-MEMORY",
           "a new Session reads the files it finds in the Agent's persistent workspace into "
           "its requests as notes, carrying one Session's facts into the next (§10: the "
           "workspace is no implicit memory around Session isolation)",
           (Patch(ReferenceRuntime, "ask", _session_notes),
            Patch(ContextManager, "system", _with_notes, reads_only=True))),
    Mutant("GUESSED-PREFERENCES",
           "preferences the user stated in the Agent's other Sessions are guessed from their "
           "inputs and added to every request (§10: no background memory of the user)",
           (Patch(ContextManager, "system", _guessed_preferences, reads_only=True),)),
    Mutant("AUDIT-SEES-PREVIEW",
           "an audit or on-demand read behind a result_ref serves the bounded preview the "
           "model saw, not the full body (§6: the unread body stays readable)",
           (Patch(ReferenceRuntime, "read_result_body", _preview_served),)),
    Mutant("LOOPS-PER-ROLE",
           "the Planner and each Executor count Loops against loop_limit on their own, so a "
           "Run with Executors takes many times its budget (§11: one shared Loop budget)",
           (Patch(NodeDriver, "loops_taken", _loops_per_role, reads_only=True),)),
)
