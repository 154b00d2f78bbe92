"""Mutants of the provider adapter and the preview protocol (§6): what the model is sent differs
from the view's facts — a preview sent bare, an adjusted call sent as if the model had made it,
an edited answer sent as the provider's — or a read behind a result_ref is not the stored range."""

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from ctxspec.conformance.mutants import Mutant, Patch
from ctxspec.reference import compaction, protocol, view
from ctxspec.reference.contracts import OperationState
from ctxspec.reference.runtime import compaction_service, context_manager, request_fit, sent_request
from ctxspec.reference.runtime.pipeline import InvocationPipeline
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


def _read_by_port(original: Callable[..., Any]) -> Callable[..., Any]:
    def read(self: Any, run: Any, arguments: Any) -> Any:
        # result.read is passed to the tool port like any tool: its answer is whatever the
        # world says, not the stored range.
        return self.s.tools.run("result.read", arguments, 1)
    return read


def _never_started_unknown(original: Callable[..., str]) -> Callable[..., str]:
    def text(call: Any, state: Any) -> str:
        # A call with no Operation is reported with the design's "unknown" state.
        return original(call, OperationState.UNKNOWN if state is None else state)
    return text


def _counted_as_rendered(original: Callable[..., Any]) -> Callable[..., Any]:
    def estimation(model_view: Any, tool_schemas: tuple[str, ...] = ()) -> Any:
        # The estimate counts what this wrong adapter renders (the reference counts the same
        # text without building the rendering, view.estimation_request).
        return view.rendered_estimation(view.render_request(model_view, tool_schemas))
    return estimation


def _patches(kind: str) -> tuple[Patch, ...]:
    # The runtime's request goes through the adapter, and so does every estimate of one.
    return (Patch(view, "render_request", _without(kind)),
            Patch(sent_request, "render_request", _without(kind)),
            Patch(compaction_service, "render_request", _without(kind)),
            *(Patch(module, "estimation_request", _counted_as_rendered)
              for module in (view, compaction, context_manager, request_fit)))


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
    Mutant("TEXT-EDIT-UNTOLD",
           "a hook's change to a model answer's text reaches the model as the answer's text, "
           "unmarked, as if the provider had said it (§2 不得把变更后的内容伪装成供应商原文, §6 "
           "按变更和来源标记)",
           _patches("text_modified")),
    Mutant("NEVER-STARTED-UNKNOWN",
           "a placeholder for a call that never started reports its Operation as unknown, as if "
           "it might have acted (§6: the projection states the real state, never another)",
           (Patch(protocol, "placeholder_text", _never_started_unknown),)),
    Mutant("RESULT-READ-NOT-STORED",
           "result.read is answered by a tool like any other, not from the stored body behind "
           "the result_ref (§6 模型后续通过 result.read 读取的内容)",
           (Patch(InvocationPipeline, "read_result", _read_by_port),)),
)
