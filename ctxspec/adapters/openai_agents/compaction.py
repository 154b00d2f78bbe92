"""The Agents SDK's own compaction (§8) offline: ``OpenAIResponsesCompactionSession`` over the
driver's ``SQLiteSession``, with a real ``AsyncOpenAI`` client whose transport answers the
Responses API's ``POST /responses/compact`` from the scenario's compaction script — the
scripted provider, as ``ScenarioModel`` is for ``POST /responses``. Nothing leaves the process.

What the endpoint returns is what the SDK's own types say it returns
(openai/types/responses/compacted_response.py: ``CompactedResponse.output``, "a list of all
user messages, followed by a single compaction item"): every user message of the compacted
input, verbatim and in order, then one ``compaction`` item whose ``encrypted_content`` holds
the summary the script answered (a real provider encrypts it; the scripted one need not).
The SDK then replaces the session's history with that output
(agents/memory/openai_responses_compaction_session.py: ``_run_compaction_locked``).

When to compact is the SDK's ``should_trigger_compaction`` hook, which the SDK asks only after
a turn's items are saved (and defers while the turn has tool outputs); the adapter answers it
no (``never_after_a_turn``, Q382) and, because the SDK asks nothing before a request, calls
``run_compaction(force)`` itself before a Run whose first request would reach the trigger.
That decision is the adapter's (the capability is counted ``adapter``); the summary and the
replacement are the SDK's.
"""

import json
from collections.abc import Callable
from typing import Any, Protocol

import httpx2
from agents.memory import OpenAIResponsesCompactionSession, SQLiteSession
from openai import AsyncOpenAI

from ctxspec.reference.ports import Complete, ModelOutcome

BASE_URL = "https://scripted.invalid/v1"
"""Where the scripted provider pretends to live (nothing is sent)."""
MODEL = "gpt-4.1"
"""The compaction model's name: the SDK accepts only OpenAI model names for it."""


class CompactionObserver(Protocol):
    def compaction_request(self, items: list[Any]) -> ModelOutcome:
        """Trace the compaction request the SDK sends and ask the scripted port."""
        ...


def _is_user(item: Any) -> bool:
    return isinstance(item, dict) and item.get("role") == "user" and \
        item.get("type", "message") == "message"


def _answer(observer: CompactionObserver, request: httpx2.Request) -> httpx2.Response:
    body = json.loads(request.content or b"{}")
    items = list(body.get("input") or [])
    outcome = observer.compaction_request(items)
    if not isinstance(outcome, Complete):  # a provider failure: the client retries a 5xx
        return httpx2.Response(500, json={"error": {"message": "scripted compaction failure",
                                                    "type": "server_error"}})
    users = [{**item, "type": "message"} for item in items if _is_user(item)]
    compaction = {"type": "compaction", "id": f"cmp_{len(items)}",
                  "encrypted_content": outcome.text}
    given = (outcome.input_tokens or 0, outcome.output_tokens or 0)
    return httpx2.Response(200, json={
        "id": f"resp_compact_{len(items)}", "object": "response.compaction", "created_at": 0,
        "output": [*users, compaction],
        "usage": {"input_tokens": given[0], "output_tokens": given[1],
                  "total_tokens": sum(given), "input_tokens_details": {"cached_tokens": 0},
                  "output_tokens_details": {"reasoning_tokens": 0}}})


def client(observer: CompactionObserver, attempts: int) -> AsyncOpenAI:
    """An OpenAI client whose transport is the scripted provider; its own retry policy
    (``max_retries``) retries a failed compaction up to ``attempts`` in all."""

    def handle(request: httpx2.Request) -> httpx2.Response:
        return _answer(observer, request)

    return AsyncOpenAI(api_key="scripted", base_url=BASE_URL, max_retries=attempts - 1,
                       http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handle)))


def never_after_a_turn(context: dict[str, Any]) -> bool:
    """The ``should_trigger_compaction`` hook: no compaction after a turn (Q382). The SDK
    asks it after each saved turn but defers a compaction while the turn has local tool
    outputs, so one it approves runs after the Run's last turn, when the next request is the
    next Run's and need not reach the trigger at all; the adapter decides before each Run."""
    return False


def compacting(name: str, underlying: SQLiteSession, observer: CompactionObserver,
               attempts: int, decide: Callable[[dict[str, Any]], bool] = never_after_a_turn
               ) -> OpenAIResponsesCompactionSession:
    """The SDK's compaction session over ``underlying``, in input mode (the scripted provider
    stores no response to compact by id)."""
    return OpenAIResponsesCompactionSession(
        name, underlying, client=client(observer, attempts), model=MODEL,
        compaction_mode="input", should_trigger_compaction=decide)


__all__ = ["MODEL", "CompactionObserver", "client", "compacting"]
