"""What the Agents SDK sends a model, read back as the trace's view (docs/implementing-a-driver.md
§3): the instructions and the Responses input items a ``Model`` receives become messages with
their kinds and the identities the design names.

The SDK keeps no input identities: a user item is plain text. The k occurrences of a text in a
request stand for the last k inputs of that text handed to the SDK, in order (older ones are the
first a trimming hook drops).
"""

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ctxspec.adapters.sent_view import input_ids

Message = dict[str, Any]


def message(role: str, kind: str, text: str, **identities: Any) -> Message:
    return {"role": role, "kind": kind, "text": text, "tool_calls": [], **identities}


def _text(content: Any) -> str:
    """A Responses message's content: a string, or parts with ``text``."""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        return "".join(str(part.get("text", "")) for part in content
                       if isinstance(part, Mapping))
    return ""


def _output(output: Any) -> str:
    return output if isinstance(output, str) else _text(output)


def read_view(instructions: str | None, items: Sequence[Any],
              sent: Sequence[tuple[str, str]]) -> list[Message]:
    """The request as messages. ``sent`` is every input handed to the SDK so far, as
    (input_id, text) in hand-over order."""
    view = [] if instructions is None else [message("system", "system_prompt", instructions,
                                                     record_id=None)]
    users = [_text(item.get("content")) for item in items
             if isinstance(item, Mapping) and item.get("role") == "user"]
    ids = input_ids(users, sent)
    calls_open = False
    for raw in items:
        item: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
        kind, role = item.get("type", "message"), item.get("role")
        # The SDK's own item identity where it keeps one (a model output's id), else none.
        record = item.get("id") if isinstance(item.get("id"), str) else None
        if kind == "message" and role == "user":
            view.append(message("user", "user_ref", _text(item.get("content")),
                                input_id=ids.pop(0), record_id=record))
        elif kind == "message" and role in ("system", "developer"):
            view.append(message("system", "prompt", _text(item.get("content")),
                                record_id=record))
        elif kind == "message":
            view.append(message("assistant", "assistant", _text(item.get("content")),
                                record_id=record))
            calls_open = True
            continue
        elif kind == "function_call":
            if not calls_open:  # a response of calls only
                view.append(message("assistant", "assistant", "", record_id=record))
            calls = view[-1]["tool_calls"]
            calls.append({"call_id": str(item.get("call_id")),
                          "action_ordinal": len(calls) + 1, "name": str(item.get("name")),
                          "arguments": str(item.get("arguments", ""))})
            calls_open = True
            continue
        elif kind == "compaction":  # the compact endpoint's summary (compaction.py)
            summary = str(item.get("encrypted_content", ""))
            view.append(message("system", "summary", summary, record_id=record, body=summary))
        elif kind == "function_call_output":
            view.append(message("tool", "tool_result", _output(item.get("output")),
                                call_id=str(item.get("call_id")), record_id=record))
        calls_open = False
    return view


def tool_schema(name: str, description: str, parameters: Mapping[str, Any]) -> str:
    """A function tool as the request carries it, as canonical JSON text."""
    return json.dumps({"name": name, "description": description, "parameters": parameters},
                      sort_keys=True)
