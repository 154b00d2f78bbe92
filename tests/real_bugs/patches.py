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


@contextmanager
def orphaned_call_blocks_compaction() -> Iterator[None]:
    """google/adk-python#7236, as its report describes it: the range a compaction may cover
    ends before the first function_call that has no function_response yet, whether or not one
    can still come, so a call that will never be answered (its invocation stopped or died)
    stays the first event of every later window and nothing after it is ever compacted (the
    fix skips calls that provably never get a response)."""
    from google.adk.apps import compaction

    def buggy(events: list[Any], *, all_events: list[Any] | None = None) -> list[Any]:
        open_ids: set[str] = set()
        balanced = 0
        for index, event in enumerate(events):
            open_ids -= {r.id for r in event.get_function_responses() if r.id}
            open_ids |= {c.id for c in event.get_function_calls() if c.id}
            if not open_ids:
                balanced = index + 1
        return list(events[:balanced])

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(compaction, "_longest_self_contained_prefix", buggy)
        yield


PATCHES: dict[str, Patch] = {
    "langchain-ai/langchain#38867": error_text_as_summary,
    "langchain-ai/langchain#34282": cut_between_call_and_result,
    "pydantic/pydantic-ai#2050": orphaned_results_sent,
    "google/adk-python#7236": orphaned_call_blocks_compaction,
}


def _adk_compaction() -> Any:
    from google.adk.apps import compaction
    return compaction


def _pydantic_messages() -> Any:
    from pydantic_ai import messages
    return messages


CHANGES: dict[str, Callable[[], Any]] = {
    "langchain-ai/langchain#38867": _summary_class,
    "langchain-ai/langchain#34282": _summary_class,
    "google/adk-python#7236": _adk_compaction,
    "pydantic/pydantic-ai#2050": _pydantic_messages,
}
"""What each patch changes while it is in force (a class or a module of the framework)."""
