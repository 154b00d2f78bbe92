"""Mutants of the provider adapter (§6): what the model is sent differs from the view's facts —
a preview sent bare, an adjusted call sent as if the model had made it."""

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from ctxspec.conformance.mutants import Mutant, Patch
from ctxspec.reference import view
from ctxspec.reference.runtime import runtime
from ctxspec.reference.view import RenderedRequest


def _without(kind: str) -> Callable[[Callable[..., RenderedRequest]],
                                    Callable[..., RenderedRequest]]:
    def wrong(original: Callable[..., RenderedRequest]) -> Callable[..., RenderedRequest]:
        def render(*args: Any, **kwargs: Any) -> RenderedRequest:
            request = original(*args, **kwargs)
            messages = []
            for message in request.messages:
                content = message.content
                for mark in message.marks:
                    if mark.kind == kind:  # neither sent nor counted
                        content = content.replace("\n" + mark.text, "")
                messages.append(replace(message, content=content, marks=tuple(
                    mark for mark in message.marks if mark.kind != kind)))
            return replace(request, messages=tuple(messages))
        return render
    return wrong


def _patches(kind: str) -> tuple[Patch, ...]:
    # The view module's own estimation and the runtime's request both go through the adapter.
    return (Patch(view, "render_request", _without(kind)),
            Patch(runtime, "render_request", _without(kind)))


MUTANTS = (
    Mutant("PREVIEW-SENT-BARE",
           "the adapter drops a preview's truncated flag, range and result_ref: the model gets "
           "the bare characters and I does not count the mark (§6 明确标注 truncated 的有界预览; "
           "§7)",
           _patches("truncated")),
    Mutant("ADJUSTMENT-UNTOLD",
           "a hook's change to a call's arguments reaches the model only as rewritten call "
           "arguments, unmarked (§2 不得把变更后的内容伪装成供应商原文, §12 参数修改反馈)",
           _patches("arguments_adjusted")),
)
