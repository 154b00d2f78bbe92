"""openai/openai-agents-python#4628 in the pinned SDK, shown on the SDK itself (the corpus
catches it with S1-QUESTIONS-KEPT on make_reopened_driver): a manual ``run_compaction`` of a
session with an item limit compacts only the items the limit shows and replaces the whole
stored history with the result, so the older items are deleted, never summarised. If a
release fixes it, this test fails: take the report out of the corpus's CORPUS. Slow: it
imports the SDK."""

import asyncio
from pathlib import Path
from typing import Any

import pytest

from ctxspec.reference.ports import Complete, ModelOutcome


class _Endpoint:
    """The scripted compact endpoint's observer: what each compaction was given."""

    def __init__(self) -> None:
        self.given: list[list[Any]] = []

    def compaction_request(self, items: list[Any]) -> ModelOutcome:
        self.given.append(items)
        return Complete("SUMMARY", ())


async def _compact_a_limited_session(database: Path, endpoint: _Endpoint) -> list[Any]:
    from agents.memory import SessionSettings, SQLiteSession

    from ctxspec.adapters.openai_agents.compaction import compacting
    limited = SQLiteSession("s", str(database), session_settings=SessionSettings(limit=4))
    session = compacting("s", limited, endpoint, 1)
    await session.add_items([{"role": "user", "content": "q0"},
                             {"role": "assistant", "content": "a1"},
                             {"role": "user", "content": "q2"},
                             {"role": "assistant", "content": "a3"},
                             {"role": "user", "content": "q4"},
                             {"role": "assistant", "content": "a5"}])
    await session.run_compaction({"force": True, "compaction_mode": "input"})
    return await SQLiteSession("s", str(database)).get_items()  # every stored item


@pytest.mark.slow
def test_compacting_a_limited_session_deletes_history_never_summarised(tmp_path: Path) -> None:
    endpoint = _Endpoint()
    stored = asyncio.run(_compact_a_limited_session(tmp_path / "s.sqlite", endpoint))
    [given] = endpoint.given
    # Derived by hand: the limit shows the last four of six items; the endpoint keeps their
    # user messages (q2, q4) and adds one compaction item; q0 and a1 were never sent.
    assert [item["content"] for item in given] == ["q2", "a3", "q4", "a5"]
    kept = [item.get("content") or item.get("encrypted_content") for item in stored]
    assert kept == ["q2", "q4", "SUMMARY"], (
        f"openai/openai-agents-python#4628 seems fixed (stored after compaction: {kept}): "
        "take it out of tests/real_bugs/corpus.py's CORPUS")
