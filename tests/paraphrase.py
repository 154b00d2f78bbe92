"""A paraphrasing driver (issue #15's done-when): the reference runtime with every text it words
for itself worded differently — outcome and input markers, placeholders, fragments, orphaned
results, denied and failed calls' results, the summary envelope, shared fields, the
summariser's prompt and data framing, the window error's message, an Executor's hand-over,
the diagnostics the design does not name — its tool calls and tool schemas serialised
differently in what its estimator measures, and its commits named its own way, the design's
phases mapped onto them. It follows the design exactly as the reference does, so it must pass
every case it declares: a case that fails it compares wording, not the design.

``deviation`` adds one real fault on top (a supplement a failed request claimed is not carried
to the next question), which the suite must still catch.
"""

import json
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import replace
from typing import Any
from unittest import mock

from ctxspec.conformance.driver import ReferenceDriver
from ctxspec.conformance.mutants.access import _claimed_dropped
from ctxspec.conformance.phases import PHASES, REFERENCE_COMMITS
from ctxspec.reference import compaction, delivery, history, hooks, protocol, view
from ctxspec.reference.contracts import MessageRole
from ctxspec.reference.protection import ProtectedInput
from ctxspec.reference.runtime import (
    batch,
    context_manager,
    request_fit,
    session,
    window_report,
)
from ctxspec.reference.tokens import EstimationRequest, PromptMessage
from ctxspec.reference.view import ModelView, ViewKind, ViewMessage


def _outcome(original: Callable[..., ViewMessage]) -> Callable[..., ViewMessage]:
    def marker(run: Any) -> ViewMessage:
        message = original(run)
        more = "" if message.final_result else " It gave no final result."
        return replace(message, text=f"## Run #{message.run_no} is over; its status is "
                                     f"{str(message.status).upper()}.{more}")
    return marker


def _dedup(original: Callable[..., ViewMessage]) -> Callable[..., ViewMessage]:
    def place(self: Any, message: ViewMessage, placement: Any) -> ViewMessage:
        placed = original(self, message, placement)
        if placed.kind is ViewKind.MARKER:
            return replace(placed, role=MessageRole.USER,
                           text="(this user input appears in another part of the request)")
        return placed
    return place


def _shared(original: Callable[..., tuple[ViewMessage, ...]]
            ) -> Callable[..., tuple[ViewMessage, ...]]:
    def messages(self: Any, run: Any) -> tuple[ViewMessage, ...]:
        return tuple(replace(m, text=f"Shared field follows ->\n{m.body}")
                     for m in original(self, run))
    return messages


def _estimation(original: Callable[..., EstimationRequest]) -> Callable[..., EstimationRequest]:
    """Tool calls as JSON objects on lines of their own, schemas pretty-printed."""
    def request(view_: ModelView, tool_schemas: tuple[str, ...] = ()) -> EstimationRequest:
        messages = []
        for message in view_.messages:
            calls = [json.dumps({"function": call.name, "args": json.loads(call.arguments)},
                                indent=1) for call in message.tool_calls]
            messages.append(PromptMessage(role=message.role.value,
                                          text="\n\n".join([message.text, *calls])))
        schemas = tuple(json.dumps(json.loads(s), indent=3) for s in tool_schemas)
        return EstimationRequest(messages=tuple(messages), tool_schemas=schemas)
    return request


def _render(_original: Callable[..., str]) -> Callable[..., str]:
    def render(self: Any) -> str:
        span = "" if (self.from_char, self.through_char) == (0, self.total_chars) else \
            f" (characters {self.from_char} to {self.through_char} of {self.total_chars})"
        return f"=== BEGIN {self.kind} by {self.role}{span} [{self.material_key}] ===\n" \
               f"{self.text}\n=== END [{self.material_key}] ==="
    return render


def _result(original: Callable[..., ViewMessage]) -> Callable[..., ViewMessage]:
    """A denied or failed call's result in sentences of its own, its facts unchanged; a
    failure keeps the tool's own detail (the scenario's text), as any wording would."""
    def message(record: Any, *args: Any, **kwargs: Any) -> ViewMessage:
        made = original(record, *args, **kwargs)
        facts = made.result_facts
        if facts is None:
            return made
        if facts["status"] == "denied":
            return replace(made, text="Blocked by policy before the tool ran."
                           if facts["stage"] == "pre" else
                           "The tool ran, but policy withheld its output.")
        detail = json.loads(made.text)["error"].get("detail", "")
        return replace(made, text=f"That call failed. {detail}".rstrip())
    return message


def _refusal(_original: Callable[..., str]) -> Callable[..., str]:
    """Every window error worded its own way — the provider's refusal and the runtime's own —
    with none of the reference's figures in its words: the cases read the figures the ending
    carries as numbers (Q294, Q295)."""
    def message(budget: Any, tokens: int, stage: str) -> str:
        if "provider refused" in stage:
            return "The provider would not take it: the request is too long."
        return "This conversation no longer fits the model; start a new one."
    return message


def _fixed(_original: Callable[..., str]) -> Callable[..., str]:
    def message(budget: Any, fixed: int, tokens: int) -> str:
        return "The instructions and your message alone are too long for the model."
    return message


HANDOVER = {"task": "Your job: ", "constraint": "Keep to this - ", "material_ref": "Look at "}


def _handover(original: type[ProtectedInput]) -> Callable[..., ProtectedInput]:
    """An Executor's hand-over rendered its own way: the same contents, other words."""
    def item(input_id: Any, position: int, text: str) -> ProtectedInput:
        kind, _, rest = text.partition(": ")
        return original(input_id, position, f"{HANDOVER[kind]}{rest}" if kind in HANDOVER
                        else text)
    return item


OWN_DIAGNOSTICS = {"FORBIDDEN_FIELD": "NOT_WRITABLE_HERE", "UNKNOWN_TARGET": "NO_SUCH_RECORD"}
"""Diagnostics the design does not name, named the runtime's own way."""


def _diagnostic(original: Callable[..., Any]) -> Callable[..., Any]:
    def diag(code: str, field_key: str | None, detail: str) -> Any:
        return original(OWN_DIAGNOSTICS.get(code, code), field_key, detail)
    return diag


OWN_COMMITS = {phase: f"save-{n:02d}" for n, phase in enumerate(PHASES, 1)}
"""The paraphrasing runtime's own commit names: it maps the design's phases onto them."""
RENAMED = {REFERENCE_COMMITS[phase]: own for phase, own in OWN_COMMITS.items()}


def _renamed(original: Callable[..., None]) -> Callable[..., None]:
    """The runtime commits under its own names."""
    def commit(self: Any, name: str, writes: Any, **how: Any) -> None:
        original(self, RENAMED.get(name, name), writes, **how)
    return commit


PATCHES: tuple[tuple[object, str, Callable[[Any], Any]], ...] = (
    (history, "terminal_marker", _outcome),
    (history._Deduplicator, "place", _dedup),
    (protocol, "fragment_text", lambda _: lambda text: f"!! stream broke, partial: {text}"),
    (protocol, "orphan_text", lambda _: lambda record: f"Result with no call:\n{record.text}"),
    (protocol, "message_from_record", _result),
    (view, "message_from_record", _result),  # a revision's own, kept message
    (protocol, "placeholder_text", lambda _: lambda call, state: "This call never ran."),
    (compaction, "SUMMARY_ENVELOPE_TEXT", lambda _: "Here is a recap of the conversation so "
                                                    "far, written by a summariser:\n\n"),
    (compaction, "DEFAULT_SYSTEM_PROMPT", lambda _: "Condense the records below. Keep facts, "
                                                    "decisions, open items. Answer in prose."),
    (compaction.TranscriptBlock, "render", _render),
    (context_manager.ContextManager, "shared_messages", _shared),
    (view, "estimation_request", _estimation),
    (compaction, "estimation_request", _estimation),
    (context_manager, "estimation_request", _estimation),
    (request_fit, "estimation_request", _estimation),
    (session.SessionState, "commit", _renamed),
    (window_report, "window_message", _refusal),
    (window_report, "fixed_message", _fixed),
    (batch, "ProtectedInput", _handover),
    (hooks, "_diag", _diagnostic),
)


class ParaphrasingDriver(ReferenceDriver):
    """The driver of the paraphrasing runtime: its phases map onto its own commit names."""

    phase_commits = OWN_COMMITS


@contextmanager
def paraphrasing(deviation: bool = False) -> Iterator[None]:
    """Run the reference as the paraphrasing runtime while the context is open."""
    with ExitStack() as stack:
        patches = list(PATCHES)
        if deviation:
            # a supplement claimed by a failed request is not carried to the next question
            patches.append((delivery, "to_carry", _claimed_dropped))
        for owner, attribute, make in patches:
            stack.enter_context(mock.patch.object(owner, attribute,
                                                  make(getattr(owner, attribute))))
        yield
