"""SummarizationMiddleware as the LangChain driver configures it (ctxspec/adapters/
langchain.py), with the design's compaction hook points (§3, §8) where LangChain hands the
summary call over: its ``summarizer`` argument.

``summarizer`` is LangChain's documented replacement of the summary model call: a Runnable over
the messages to summarise returning the summary text (langchain/agents/middleware/
summarization.py: ``SummarizationMiddleware.__init__``, ``_create_summary``). A user who needs
hooks around that call composes them with LCEL, as written here:

- ``compaction.pre_request`` — a ``RunnableLambda`` before the model, once per summary request
  (outside the model's retries): it is handed the material; a context patch of a record's
  ``text`` changes that message before it is summarised (an annotation is a message appended to
  the material); a deny raises, so no summary request is sent;
- ``compaction.post_response`` — a ``RunnableLambda`` after the model's text: a write of
  ``summary`` is the summary SummarizationMiddleware puts in the thread; a deny raises, so no
  summary is published.

Either raise propagates out of ``SummarizationMiddleware.before_model`` unchanged, and the
driver ends the Run COMPACTION_FAILED (the design's deny rule, hook_rules.py). Without hooks at
those points the summariser is the configuration's, unchanged.
"""

from collections.abc import Callable, Iterable
from typing import Any

from langchain.agents.middleware import SummarizationMiddleware
from langchain.agents.middleware._retry import default_retry_on
from langchain_core.exceptions import ModelAPIError
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.runnables import RunnableLambda

from ctxspec.adapters.hook_chain import Chain, HookDenied
from ctxspec.adapters.langchain_hooks import COMPACTION_POINTS as POINTS
from ctxspec.adapters.langchain_hooks import names, uid
from ctxspec.adapters.langchain_profile import Configuration
from ctxspec.reference.contracts import PatchOperationKind
from ctxspec.reference.hook_changes import ContextOp


class CompactionDenied(HookDenied):
    """A compaction hook denied the summary request or the summary (COMPACTION_FAILED)."""

    code = "COMPACTION_FAILED"


def summarization(model: BaseChatModel, summariser: BaseChatModel, attempts: int,
                  configuration: Configuration, count: Callable[[Iterable[Any]], int],
                  trigger: int, chain: Chain | None,
                  on_summary: Callable[[str], None]) -> SummarizationMiddleware[Any, Any]:
    """SummarizationMiddleware as ``configuration`` sets it: the trigger, the shortest tail,
    ``count`` as its token_counter, the summariser retried ``attempts`` times (best) or as
    LangChain retries a chat model (defaults), wrapped in the compaction hooks when ``chain``
    has any."""
    registered = [] if chain is None else [p for p in POINTS if chain.hooks.registered(p)]
    runnable: Any = summariser
    if configuration.summary_attempts:
        runnable = summariser.with_retry(stop_after_attempt=attempts,
                                         retry_if_exception_type=(ModelAPIError,))
    elif registered:  # the Runnable form of LangChain's own retries of a chat model summariser
        runnable = summariser.with_retry(retry_if_exception_type=default_retry_on)
    if configuration.summary_attempts or registered:
        runnable = runnable | StrOutputParser()
    if chain is not None and registered:
        runnable = _hooked(runnable, chain, set(registered), on_summary)
    return SummarizationMiddleware(
        model, trigger=("tokens", trigger), keep=("messages", 1), summarizer=runnable,
        token_counter=count, trim_tokens_to_summarize=configuration.trim_tokens_to_summarize)


def _hooked(runnable: Any, chain: Chain, registered: set[str],
            on_summary: Callable[[str], None]) -> Any:
    """``runnable`` between the pre-request and the post-response chains."""

    def pre(material: list[BaseMessage]) -> list[BaseMessage]:
        if "compaction.pre_request" not in registered:
            return material
        messages = list(material)

        def patch(op: ContextOp) -> bool:
            at = next((i for i, m in enumerate(messages) if uid(m) == op.target_record_id), None)
            if at is None or op.field_key != "text" or not isinstance(op.value, str):
                return False
            if op.operation == PatchOperationKind.APPEND_ANNOTATION:
                messages.append(HumanMessage(content=op.value))
            else:
                messages[at] = messages[at].model_copy(update={"content": op.value})
            return True

        if chain.ask("compaction.pre_request", {"purpose": "compaction"}, "pre",
                     lambda path, value: False, names(material), patch):
            raise CompactionDenied("a compaction hook denied the summary request; it was not "
                                   "sent")
        return messages

    def post(summary: str) -> str:
        if "compaction.post_response" not in registered:
            return summary
        edited = {"summary": summary}

        def write(path: str, value: Any) -> bool:
            if path != "summary" or not isinstance(value, str):
                return False
            edited["summary"] = value
            return True

        if chain.ask("compaction.post_response", {"summary": summary}, "post", write):
            raise CompactionDenied("a compaction hook denied the summary; none is published")
        if edited["summary"] != summary:
            on_summary(edited["summary"].strip())
        return edited["summary"]

    return RunnableLambda(pre) | runnable | RunnableLambda(post)


__all__ = ["POINTS", "CompactionDenied", "summarization"]
