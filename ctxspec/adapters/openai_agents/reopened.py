"""The Agents SDK driver with its session opened for each Run: the bug corpus's path to
openai/openai-agents-python#4628 (tests/real_bugs/).

A server that answers each question in a request of its own opens the conversation's session
there, by its id, over the same store: a new ``SQLiteSession`` with the Agent's session settings
and a new ``OpenAIResponsesCompactionSession`` around it. The compaction session keeps the
items it may compact in memory, loaded by its first read from the wrapped session's
``get_items()`` — which ``SessionSettings(limit=...)`` cuts to the last items — and extended by
each ``add_items`` after (agents/memory/openai_responses_compaction_session.py:
``_ensure_compaction_candidates``, ``add_items``). One session object for the whole Session
(driver.py) loads them while the history is short; one opened per Run loads them from a
history longer than the limit, and ``run_compaction`` then replaces the whole stored history
with the compaction of those last items.
"""

from ctxspec.adapters.openai_agents.driver import OpenAIAgentsDriver
from ctxspec.adapters.openai_agents.runs import Run


class ReopenedSessionDriver(OpenAIAgentsDriver):
    """The best configuration, the session opened anew for each Run."""

    async def _drive(self, run: Run) -> None:
        self.session = self._session(f"session-{self.sessions}")
        await super()._drive(run)


def make_reopened_driver() -> ReopenedSessionDriver:
    """A session item limit of 4 (``SessionSettings(limit=4)``) and the SDK's compaction
    session, both opened for each Run."""
    return ReopenedSessionDriver(session_limit=4, compaction=True)


__all__ = ["ReopenedSessionDriver", "make_reopened_driver"]
