"""The history API (§1, §11) of the Agents SDK driver (ctxspec/adapters/openai_agents/driver.py):
what the SDK offers a user who reads a conversation back is its session's ``get_items()``, the
items the session stores, oldest first.

A read opens the Session's ``SQLiteSession`` by its id on the same database without session
settings, so it serves every stored item: ``SessionSettings(limit=...)`` is how many of them
the Runner is handed, not what the store keeps (agents/memory/sqlite_session.py:
``SQLiteSession.get_items``, the limit resolved from the settings). Each item becomes a record
of the kind the model view gives it (view.py ``read_view``): a user message ``user_ref``, a
model output (its calls with it) ``assistant``, a call's output ``tool_result``, the compact
endpoint's item ``summary``.

The SDK knows no caller of a read: whoever holds a session id reads its items, another
Session's included, a workspace script's or an unauthorised auditor's alike, and there is one
version of each item, no raw and effective pair. So every read is served (Q492). With
``bodies`` each record's text is traced as its digest; an item is stored whole, so there is no
full body behind a preview.
"""

import asyncio
import hashlib
from collections.abc import Sequence
from typing import Any

from agents import SQLiteSession

from ctxspec.adapters.openai_agents.view import Message, read_view
from ctxspec.conformance.scenario import HistoryReadDoc

OTHER = "another-session"
"""The id a read of ``session: other`` names: a Session of the same store this Agent never
opened."""


def history_read(database: str, session: str, read: HistoryReadDoc,
                 sent: Sequence[tuple[str, str]]) -> Message:
    """The ``history_read`` event of one read of ``session`` (the Session's id) as ``read``
    asks it, served from the SDK's store."""
    name = session if read.session == "own" else OTHER
    items: list[Any] = asyncio.run(SQLiteSession(name, database).get_items())
    records = read_view(None, items, sent)
    event: Message = {
        "kind": "history_read", "caller": read.kind + (f":{read.role}" if read.role else ""),
        "session": read.session, "allowed": True,
        "message_kinds": [each["kind"] for each in records], "refusal": None}
    if read.bodies:  # an item is whole: no preview, so no full body behind one
        event["records"] = [{"message_kind": each["kind"], "text": _digest(each["text"]),
                             "full_body": None} for each in records]
    return event


def _digest(text: str) -> dict[str, Any]:
    """A served text as the trace shows it: its characters and the SHA-256 of its bytes."""
    return {"chars": len(text),
            "sha256": hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()}


__all__ = ["OTHER", "history_read"]
