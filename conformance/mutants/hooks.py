"""Mutants of hook patches and decisions (§3): conflicts, and deny with an invalid patch."""

from collections.abc import Callable
from dataclasses import replace
from typing import Any
from uuid import UUID

from ctxspec.conformance.mutants import Mutant, Patch
from ctxspec.reference import hooks, registry
from ctxspec.reference.contracts import HookDecision
from ctxspec.reference.runtime import context_manager
from ctxspec.reference.runtime.batch import ToolBatch
from ctxspec.reference.runtime.context_manager import ContextManager, settled_member


def _payload_wins(original: Callable[..., Any]) -> Callable[..., Any]:
    def normalise(proposal: hooks.HookProposal, call: Any, registry: Any) -> Any:
        merged = original(proposal, call, registry)
        if isinstance(merged, tuple):  # a conflict: keep the payload side, drop the context's
            return original(replace(proposal, context_ops=()), call, registry)
        return merged
    return normalise


def _invalid_deny_allows(original: Callable[..., Any]) -> Callable[..., Any]:
    def evaluate(*args: Any, **kwargs: Any) -> Any:
        outcome = original(*args, **kwargs)
        invocation = outcome.invocation
        if invocation.decision is HookDecision.DENY and not invocation.patch_valid:
            return replace(outcome, control="continue")
        return outcome
    return evaluate


def _no_fixed_room(original: Callable[..., Any]) -> Callable[..., Any]:
    def room(self: Any, run: Any, view: Any, protected: Any) -> None:
        return None  # the chain never weighs what an item adds to the fixed input
    return room


def _annotations_compressible(original: Callable[..., Any]) -> Callable[..., Any]:
    def pinned(self: Any, run: Any, protected: Any) -> frozenset[Any]:
        return frozenset()  # an annotation of the current question counts as history
    return pinned


def _post_deny_ignored(original: Callable[..., Any]) -> Callable[..., Any]:
    def chain(proposals: Any, call: Any, *args: Any, **kwargs: Any) -> Any:
        outcome = original(proposals, call, *args, **kwargs)
        # A post-call deny is recorded but the raw result is delivered anyway.
        return replace(outcome, blocked=False) if call.stage == "post" else outcome
    return chain


def _context_side_dropped(original: Callable[..., Any]) -> Callable[..., Any]:
    def payload_path(self: Any, field_key: str, call_id: Any) -> None:
        return None  # a context-side write of a call's arguments never reaches the payload
    return payload_path


def _delegate_shortcut(original: Callable[..., Any]) -> Callable[..., Any]:
    def delegated(self: Any, run: Any, position: Any, call_id: UUID, arguments: Any) -> Any:
        key = str(call_id)

        def settle(text: str) -> Any:  # the Executor's answer settles the member as it is
            position.done[key] = settled_member({"text": text})
            return position.writes()

        def begin(context_id: UUID) -> Any:
            position.delegated[key] = str(context_id)
            return position.writes()
        running = position.delegated.get(key)
        handed = self.delegate(run, call_id, arguments, begin, settle,
                               UUID(running) if isinstance(running, str) else None)
        return "ended" if handed is None else position.done[key]
    return delegated


def _edit_overwrites(original: Callable[..., Any]) -> Callable[..., Any]:
    def deliver(self: Any, run: Any, results: Any) -> Any:
        folded = []
        for call_id, member in results:
            content, changes = member["raw"], []
            for change in member["changes"]:
                if "content" in change:  # the hook's edit is written as the record itself
                    content = change["content"]
                else:
                    changes.append(change)
            folded.append((call_id, settled_member(content, changes)))
        return original(self, run, folded)
    return deliver


MUTANTS = (
    Mutant("PAYLOAD-WINS",
           "when payload_patch and context_patch disagree on a field, the payload's value wins "
           "(§3: the whole item is invalid, HOOK_PATCH_CONFLICT, no side preferred)",
           (Patch(hooks, "normalise", _payload_wins),)),
    Mutant("INVALID-DENY-ALLOWS",
           "a deny whose patch is invalid is treated as no decision and the call runs (§3: a "
           "legitimate deny still blocks)",
           (Patch(hooks, "evaluate", _invalid_deny_allows),)),
    Mutant("FIXED-ADDITION-UNCHECKED",
           "a pre-request item's new fixed material is never measured, so an item that cannot "
           "fit by itself is kept (§7: that item is discarded, the earlier values stay)",
           (Patch(ContextManager, "fixed_room", _no_fixed_room),)),
    Mutant("QUESTION-ANNOTATION-SUMMARISED",
           "a hook's annotation of the current question is compaction material and is "
           "summarised away (§8: legitimate hook additions kept verbatim are part of F)",
           (Patch(ContextManager, "protected_annotations", _annotations_compressible,
                  reads_only=True),)),
    Mutant("POST-DENY-DELIVERS-RAW",
           "a post-call deny is recorded but the raw result is fed back (§3: the deny replaces "
           "the undelivered result with its feedback)",
           (Patch(context_manager, "run_chain", _post_deny_ignored),)),
    Mutant("CONTEXT-SIDE-DROPPED",
           "a context-side patch of a call's arguments, addressed by its stable call_id, "
           "never reaches the handler (§3: the registry maps the field to the payload)",
           (Patch(registry.FieldRegistry, "payload_path_of_context",
                  _context_side_dropped),)),
    Mutant("DELEGATE-SKIPS-POST-CALL",
           "an Executor's answer settles the delegate call as it is, its post-call chain never "
           "asked (§3: a response's raw result is saved, then the post-hook effective one)",
           (Patch(ToolBatch, "delegated", _delegate_shortcut),)),
    Mutant("TOOL-EDIT-OVERWRITES",
           "a tool post-call edit is written into the result's record instead of as a change "
           "of it (§1: raw records are never overwritten; the edit is a mutation, marked)",
           (Patch(ContextManager, "prepare_batch_delivery", _edit_overwrites),)),
)
