"""What pydantic-ai sends a model, read back as the trace's view (docs/implementing-a-driver.md
§3): the ``ModelMessage`` list a ``FunctionModel`` receives becomes messages with their kinds
and the identities the design names (§2, §4, §6).

pydantic-ai keeps no input identities: a ``UserPromptPart`` is plain text. The k occurrences
of a text in a request stand for the last k inputs of that text handed to pydantic-ai, in
order (a history processor drops the older ones first). A summary the adapter's history
processor wrote (compaction.py) is known by its text.
"""

import json
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryFeedbackPart,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from ctxspec.adapters.sent_view import input_ids

Message = dict[str, Any]


def message(role: str, kind: str, text: str, **identities: Any) -> Message:
    return {"role": role, "kind": kind, "text": text, "tool_calls": [], "record_id": None,
            **identities}


def user_texts(part: UserPromptPart) -> list[str]:
    """A user prompt's texts: one, or each text of a prompt given as a list (the inputs handed
    over together at a Run's start)."""
    content = part.content
    return [content] if isinstance(content, str) else [
        each for each in content if isinstance(each, str)]


def _return_text(part: ToolReturnPart) -> str:
    return part.model_response_str()


def read_view(instructions: str | None, messages: Sequence[ModelMessage],
              sent: Sequence[tuple[str, str]], worded: Mapping[str, str]) -> list[Message]:
    """The request as messages. ``sent``: every input handed over so far, (input_id, text);
    ``worded``: the kind (``summary``, ``annotation``) of each text the adapter wrote into
    pydantic-ai's messages (a summary, a hook's annotation), by the text."""
    users = [text for each in messages if isinstance(each, ModelRequest)
             for part in each.parts if isinstance(part, UserPromptPart)
             for text in user_texts(part) if text not in worded]
    ids = input_ids(users, sent)
    view = [] if instructions is None else [message("system", "system_prompt", instructions)]
    for each in messages:
        if isinstance(each, ModelResponse):
            view.append(_response(each))
            continue
        for part in each.parts:
            view.extend(_request_part(part, ids, worded, first=not view))
    return view


def _request_part(part: Any, ids: list[str | None], worded: Mapping[str, str],
                  first: bool) -> list[Message]:
    if isinstance(part, SystemPromptPart):
        if part.content in worded:
            return [message("system", worded[part.content], part.content, body=part.content)]
        return [message("system", "system_prompt" if first else "prompt", part.content)]
    if isinstance(part, UserPromptPart):
        return [message("user", worded[text], text, body=text) if text in worded
                else message("user", "user_ref", text, input_id=ids.pop(0))
                for text in user_texts(part)]
    if isinstance(part, ToolReturnPart):
        return [_returned(part)]
    if isinstance(part, RetryFeedbackPart):  # feedback on the answer as a whole
        return [message("user", "feedback", str(part.content))]
    return []


_OUTCOME_FACTS: Mapping[str, dict[str, Any]] = {
    "failed": {"status": "error", "code": "TOOL_ERROR"},
    "retried": {"status": "error", "code": "INVALID_ARGUMENTS"},
    "denied": {"status": "denied", "stage": "pre", "executed": False,
               "result_delivered": False},
}
"""What a ``ToolReturnPart.outcome`` other than success stands for (§6, §11; Q210)."""


def _returned(part: ToolReturnPart) -> Message:
    """A call's return: an ``interrupted`` one (pydantic-ai's own placeholder of a call that
    produced no result) is a placeholder, any other a result with its facts."""
    text = _return_text(part)
    if part.outcome == "interrupted":
        return message("tool", "placeholder", text, call_id=part.tool_call_id)
    returned = message("tool", "tool_result", text, call_id=part.tool_call_id)
    facts = _OUTCOME_FACTS.get(part.outcome)
    if facts is not None:
        unknown = part.outcome == "retried" and "unknown tool" in text.lower()
        returned["result_facts"] = {"status": "error", "code": "TOOL_NOT_AVAILABLE"} \
            if unknown else dict(facts)
    return returned


def _response(response: ModelResponse) -> Message:
    text = "".join(part.content for part in response.parts if isinstance(part, TextPart))
    answer = message("assistant", "assistant", text)
    for part in response.parts:
        if isinstance(part, ToolCallPart):
            answer["tool_calls"].append({
                "call_id": part.tool_call_id, "action_ordinal": len(answer["tool_calls"]) + 1,
                "name": part.tool_name, "arguments": part.args_as_json_str()})
    return answer


def tool_schema(name: str, description: str, parameters: Mapping[str, Any]) -> str:
    """A function tool as the request carries it, as canonical JSON text."""
    return json.dumps({"name": name, "description": description, "parameters": parameters},
                      sort_keys=True)
