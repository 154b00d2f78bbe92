"""The fixed bugs of the corpus put back: each a monkeypatch written by us from the public
report's description (never the code of the buggy release), undone when the block ends.

A bug still present in the pinned framework needs no patch: its entry reaches it through the
adapter configuration the report names (``tests/real_bugs/corpus.py``)."""

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import pytest

Patch = Callable[[], AbstractContextManager[None]]


def _summary_class() -> Any:
    from langchain.agents.middleware.summarization import SummarizationMiddleware
    return SummarizationMiddleware


@contextmanager
def error_text_as_summary() -> Iterator[None]:
    """langchain-ai/langchain#38867, as its report describes it: when the summary model call
    raises, ``_create_summary`` returns the text "Error generating summary: <error>" instead of
    raising, and ``before_model`` goes on to remove the whole history and put that text in as
    the summary."""
    middleware = _summary_class()
    fixed = middleware._create_summary

    def buggy(self: Any, messages: list[Any]) -> str:
        try:
            return str(fixed(self, messages))
        except Exception as failure:  # the report: the exception became the summary's text
            return f"Error generating summary: {failure!s}"

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(middleware, "_create_summary", buggy)
        yield


@contextmanager
def cut_between_call_and_result() -> Iterator[None]:
    """langchain-ai/langchain#34282, as its report describes it: the summarisation cut is
    taken where the kept-message count puts it, even between an AIMessage's tool calls and
    their ToolMessages, so the kept tail can start with a ToolMessage whose call was
    summarised away (the fix moves the cut so the pair stays together)."""
    middleware = _summary_class()

    def buggy(messages: list[Any], cutoff_index: int) -> int:
        return cutoff_index

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(middleware, "_find_safe_cutoff_point", staticmethod(buggy))
        yield


@contextmanager
def orphaned_results_sent() -> Iterator[None]:
    """pydantic/pydantic-ai#2050, as its report describes it: a history processor is handed
    the current run's messages too, and one that keeps only the latest message cuts a tool
    call's ModelResponse away from the ModelRequest with its return, which is then sent to the
    model on its own (the provider refuses it). pydantic-ai 2.68 drops such an orphaned return
    before every request (``_drop_orphaned_tool_results`` in pydantic_ai/messages.py); put
    back, the history goes to the model as the processor left it."""
    from pydantic_ai import messages

    def buggy(history: list[Any]) -> list[Any]:
        return history

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(messages, "_drop_orphaned_tool_results", buggy)
        yield


PATCHES: dict[str, Patch] = {
    "langchain-ai/langchain#38867": error_text_as_summary,
    "langchain-ai/langchain#34282": cut_between_call_and_result,
    "pydantic/pydantic-ai#2050": orphaned_results_sent,
}
