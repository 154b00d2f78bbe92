"""The LangChain side of the LangChain driver (ctxspec/adapters/langchain.py): a real LangChain
chat model answering from the scenario's script, real LangChain tools running the scripted
tools, and the conversion of the messages LangChain sends into the neutral trace's view.

Nothing here decides what the framework does: the model answers what the script says, the
tools return what the script says, and every request is recorded as LangChain sent it.
"""

import json
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.language_models.base import LangSmithParams
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import BaseTool, ToolException
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import ConfigDict

from ctxspec.conformance.scenario import ToolDoc

PROVIDER = "ctxspec-scripted"
"""The provider name the scripted model reports, as a real integration reports its own
(``response_metadata["model_provider"]`` and ``ls_provider``)."""

SUMMARY_KIND = "summarization"
"""``additional_kwargs["lc_source"]`` of the message SummarizationMiddleware puts in place of
the history (langchain/agents/middleware/summarization.py: ``_build_new_messages``)."""

Answer = Callable[[str, Sequence[BaseMessage], Sequence[Mapping[str, Any]]], AIMessage]
"""The driver's side of a model call: the purpose, the messages as sent and the tools bound;
returns the answer or raises the provider's error."""


class ScriptedChatModel(BaseChatModel):
    """A LangChain chat model whose answers come from the scenario's script, one instance per
    purpose: the business model of the agent, the summariser of SummarizationMiddleware."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    purpose: str = "business"
    answer: Answer | None = None

    @property
    def _llm_type(self) -> str:
        return PROVIDER

    def _get_ls_params(self, stop: list[str] | None = None, **kwargs: Any) -> LangSmithParams:
        params = super()._get_ls_params(stop=stop, **kwargs)
        params["ls_provider"] = PROVIDER
        return params

    def bind_tools(self, tools: Sequence[Any], *, tool_choice: str | None = None,
                   **kwargs: Any) -> Any:
        return self.bind(tools=[convert_to_openai_tool(tool) for tool in tools], **kwargs)

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: Any = None, **kwargs: Any) -> ChatResult:
        if self.answer is None:
            raise RuntimeError("the scripted model is not connected to a driver")
        message = self.answer(self.purpose, messages, kwargs.get("tools") or [])
        return ChatResult(generations=[ChatGeneration(message=message)])


class ScriptedTool(BaseTool):
    """A LangChain tool of the Agent, its result from the scenario's tool script. It keeps the
    id of the call LangChain hands it, so the driver traces which call ran."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    run_tool: Callable[[str, str | None, dict[str, Any]], str] | None = None
    call_id: str | None = None

    def invoke(self, input: Any, config: Any = None, **kwargs: Any) -> Any:
        if isinstance(input, dict) and input.get("type") == "tool_call":
            self.call_id = str(input.get("id"))
        return super().invoke(input, config, **kwargs)

    def _run(self, *args: Any, **kwargs: Any) -> str:
        kwargs.pop("run_manager", None)
        if self.run_tool is None:
            raise RuntimeError("the scripted tool is not connected to a driver")
        return self.run_tool(self.name, self.call_id, dict(kwargs))


@dataclass
class Run:
    """One Run of the LangChain driver (ctxspec/adapters/langchain.py)."""

    no: int
    run_id: str
    inputs: list[str] = field(default_factory=list)
    """Its inputs' ids in receive order: the question, then supplements."""
    sent: int = 0
    """How many of its inputs were handed to the graph."""
    status: str = "running"
    seq: int = 0


def make_tool(doc: ToolDoc, run_tool: Callable[[str, str | None, dict[str, Any]], str]
              ) -> BaseTool:
    """The scenario's tool as a LangChain tool with the Agent's JSON schema; a scripted error
    is a ``ToolException``, which the tool turns into its error result."""
    schema = dict(doc.schema_) if doc.schema_ else {"type": "object", "properties": {}}
    schema.setdefault("type", "object")
    description = schema.get("description")
    return ScriptedTool(name=doc.name,
                        description=description if isinstance(description, str) else doc.name,
                        args_schema=schema, run_tool=run_tool, handle_tool_error=True)


def tool_error(text: str) -> ToolException:
    return ToolException(text)


def view_of(messages: Sequence[BaseMessage], system_prompt: str,
            summaries: Sequence[str], rejected: Collection[str] = (),
            post_denied: Collection[str] = ()) -> list[dict[str, Any]]:
    """The request as LangChain sent it, message by message, in the trace's terms: the
    system prompt, user inputs (their message id is the input's id), the summary that
    SummarizationMiddleware put in place of the history, answers with their calls, results
    (the calls in ``rejected`` answered by the reviewer's rejection: pre-call denials; those
    in ``post_denied`` withheld by a post-call hook)."""
    view: list[dict[str, Any]] = []
    for message in messages:
        text = message.text
        if isinstance(message, SystemMessage):
            kind = "system_prompt" if text == system_prompt else "annotation"
            entry = _entry("system", kind, text)
            if kind == "annotation":
                entry["body"] = text
        elif isinstance(message, HumanMessage):
            if message.additional_kwargs.get("lc_source") == SUMMARY_KIND:
                entry = _entry("user", "summary", text)
                entry["body"] = next((s for s in summaries if s and s in text), text)
            else:
                entry = _entry("user", "user_ref", text)
                entry["input_id"] = message.id
        elif isinstance(message, AIMessage):
            entry = _entry("assistant", "assistant", text)
            entry["tool_calls"] = [
                {"call_id": str(call.get("id")), "action_ordinal": number,
                 "name": call["name"], "arguments": json.dumps(call["args"], sort_keys=True)}
                for number, call in enumerate(message.tool_calls, start=1)]
        elif isinstance(message, ToolMessage):
            # A failed call's result is the error text with status "error" on the message (the
            # provider gets the flag, e.g. as is_error): written here as one structured object.
            entry = _entry("tool", "tool_result", text if message.status != "error" else
                           json.dumps({"status": "error", "error": text}, sort_keys=True))
            entry["call_id"] = message.tool_call_id
            if message.tool_call_id in rejected:  # never ran; LangChain's words, our facts
                entry["result_facts"] = {"status": "denied", "stage": "pre", "executed": False,
                                         "result_delivered": False}
            elif message.tool_call_id in post_denied:  # ran; its result withheld
                entry["result_facts"] = {"status": "denied", "stage": "post", "executed": True,
                                         "result_delivered": False}
            elif message.status == "error":  # LangChain gives no §11 code
                entry["result_facts"] = {"status": "error"}
        else:
            entry = _entry(message.type, "annotation", text)
            entry["body"] = text
        entry["record_id"] = message.id  # the thread's message id: its record
        view.append(entry)
    return view


def prompt_view(messages: Sequence[BaseMessage]) -> list[dict[str, Any]]:
    """A summary request: SummarizationMiddleware sends one prompt holding the material."""
    return [_entry("user", "prompt", message.text) for message in messages]


def _entry(role: str, kind: str, text: str) -> dict[str, Any]:
    return {"role": role, "kind": kind, "text": text, "tool_calls": []}


def last_purpose(events: Sequence[Mapping[str, Any]]) -> str | None:
    """The purpose of the last model request traced."""
    return next((str(e["purpose"]) for e in reversed(events) if e["kind"] == "model_request"),
                None)


def after_last_business(events: Sequence[Mapping[str, Any]]) -> int:
    """The index just after the last business request traced (0: none yet)."""
    for index in range(len(events) - 1, -1, -1):
        if events[index]["kind"] == "model_request" and events[index]["purpose"] == "business":
            return index + 1
    return 0
