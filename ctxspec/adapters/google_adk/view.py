"""What Google ADK sends a model, read back as the trace's view (docs/implementing-a-driver.md
§3): the system instruction and the ``types.Content`` list of an ``LlmRequest`` become
messages with their kinds and the identities the design names.

ADK keeps no input identity in a request: a user part is plain text. The k occurrences of a
text in a request stand for the last k inputs of that text handed to ADK, in order. A summary
is a model content whose text is one the scripted summarizer wrote (ADK materialises a
compaction event as a model turn, google/adk/flows/llm_flows/context/_compaction.py).
"""

import json
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from google.genai import types

from ctxspec.adapters.sent_view import input_ids

Message = dict[str, Any]


def message(role: str, kind: str, text: str, **identities: Any) -> Message:
    return {"role": role, "kind": kind, "text": text, "tool_calls": [], **identities}


def result_text(response: Mapping[str, Any] | None) -> str:
    """A function response as the model reads it: the tool's text where ADK wrapped a string
    as ``{"result": text}``, else the response as JSON."""
    if response is None:
        return ""
    if set(response) == {"result"} and isinstance(response["result"], str):
        return response["result"]
    return json.dumps(response, sort_keys=True, default=str)


def read_view(instruction: str | None, contents: Sequence[types.Content],
              sent: Sequence[tuple[str, str]], summaries: Collection[str],
              annotations: Collection[str] = ()) -> list[Message]:
    """The request as messages; ``sent`` is every input handed to ADK, (input_id, text) in
    hand-over order; ``summaries`` the texts the summarizer wrote, ``annotations`` those a
    before-model callback added."""
    view = [] if not instruction else [message("system", "system_prompt", instruction,
                                               record_id=None)]
    users = [part.text for c in contents if c.role == "user" for part in c.parts or []
             if part.text and part.text not in annotations]
    ids = input_ids(users, sent)
    for content in contents:
        parts = content.parts or []
        text = _text(content)
        if content.role == "user":
            for part in parts:
                answer = part.function_response
                if answer is not None:
                    view.append(message("tool", "tool_result", result_text(answer.response),
                                        call_id=str(answer.id), record_id=None))
                if part.text and part.text in annotations:
                    view.append(message("user", "annotation", part.text, record_id=None,
                                        body=part.text))
                elif part.text:
                    view.append(message("user", "user_ref", part.text, input_id=ids.pop(0),
                                        record_id=None))
            continue
        if text in summaries:
            view.append(message("system", "summary", text, record_id=None, body=text))
            continue
        calls = [part.function_call for part in parts if part.function_call is not None]
        if not text and not calls:
            continue
        said = message("assistant", "assistant", text, record_id=None)
        said["tool_calls"] = [{"call_id": str(call.id), "action_ordinal": n,
                               "name": str(call.name),
                               "arguments": json.dumps(call.args or {}, sort_keys=True)}
                              for n, call in enumerate(calls, 1)]
        view.append(said)
    return view


def _text(content: types.Content) -> str:
    return "".join(part.text for part in content.parts or []
                   if part.text is not None and not part.thought)


def tool_schemas(request: Any) -> list[str]:
    """The function declarations a request offers, each as canonical JSON text."""
    schemas = []
    for tool in request.config.tools or []:
        for declaration in getattr(tool, "function_declarations", None) or []:
            schemas.append(json.dumps({
                "name": declaration.name, "description": declaration.description or "",
                "parameters": declaration.parameters_json_schema or {}}, sort_keys=True))
    return schemas
