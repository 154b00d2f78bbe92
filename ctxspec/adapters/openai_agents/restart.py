"""The Agents SDK driver that dies at the scenario's crash and restarts (crash.py maps the
phases): ``make_driver`` and ``make_default_driver``, the two configurations of the report.

A death at a session write ends the streamed Run; the restarted process keeps only what the
SDK stored, the session's items, and what the driver observes beside the SDK (its trace and
the inputs it was given). It opens the session anew, forgets having handed over the inputs
the session does not hold, and drives the Run again: ``OpenAIAgentsDriver._drive`` sends those
inputs, or none, to a new ``Runner.run_streamed`` on the session.
"""

from collections import Counter
from typing import Any

from agents import SQLiteSession
from agents.memory import SessionSettings
from agents.testing import ModelCall as SdkCall
from agents.tool_context import ToolContext

from ctxspec.adapters.openai_agents.crash import (
    CAPABILITIES,
    Crash,
    Died,
    Refused,
    WatchedSession,
    died,
)
from ctxspec.adapters.openai_agents.driver import OpenAIAgentsDriver
from ctxspec.adapters.openai_agents.runs import Run
from ctxspec.adapters.openai_agents.view import read_view
from ctxspec.conformance.driver import Ports
from ctxspec.conformance.scenario import Scenario
from ctxspec.reference.ports import ModelOutcome, ToolOutcome


class RestartingDriver(OpenAIAgentsDriver):
    """The driver whose session writes may be the scenario's crash point."""

    capabilities = OpenAIAgentsDriver.capabilities | CAPABILITIES

    def configure(self, scenario: Scenario, ports: Ports) -> None:
        self.crash = Crash(scenario.crash)
        super().configure(scenario, ports)

    def _store(self, name: str, settings: SessionSettings | None) -> SQLiteSession:
        return WatchedSession(self.crash, name, self.database, settings)

    def request(self, call: SdkCall, role: str = "root") -> ModelOutcome:
        self.crash.alive()
        return super().request(call, role)

    def compaction_request(self, items: list[Any]) -> ModelOutcome:
        self.crash.alive()
        return super().compaction_request(items)

    def _run_tool(self, ctx: ToolContext[Any], name: str, arguments: dict[str, Any]
                  ) -> ToolOutcome:
        self.crash.alive()
        return super()._run_tool(ctx, name, arguments)

    def _failed(self, run: Run, failure: BaseException) -> None:
        death = died(failure)
        if death is not None:
            raise death from failure
        super()._failed(run, failure)

    async def _drive(self, run: Run) -> None:
        while True:
            try:
                await super()._drive(run)
                return
            except Refused as refused:  # surfaced, then the process stops and restarts (Q64)
                self.events.append({"kind": "persistence_failed", "phase": self.crash.plan.phase,
                                    "occurrence": self.crash.plan.occurrence,
                                    "error": str(refused)})
                await self._restart(run)
            except Died:
                await self._restart(run)

    async def _restart(self, run: Run) -> None:
        """A new process over the same store: what the session holds is what was saved."""
        self.events.append(self.crash.restarted())
        self.crash.dead = False
        self.streaming, self.in_model = None, False
        name = f"session-{self.sessions}"
        items = await SQLiteSession(name, self.database).get_items()
        held = Counter(m["text"] for m in read_view(None, items, self.book.sent)
                       if m["kind"] == "user_ref")
        kept = []
        for input_id, text in self.book.sent:
            if held[text]:
                held[text] -= 1
                kept.append((input_id, text))
        self.book.sent = kept
        run.staged = []  # a staged input not held is sent again with the Run's others
        self.session = self._session(name)


def make_driver() -> RestartingDriver:
    """The factory ``ctxspec conformance --driver`` and ``ctxspec compat`` load: the SDK as a
    careful user following the design configures it (the best configuration), its session
    the SDK's ``OpenAIResponsesCompactionSession``."""
    return RestartingDriver(compaction=True)


def make_default_driver() -> RestartingDriver:
    """The SDK with its defaults wherever the design names no figure."""
    return RestartingDriver(sdk_defaults=True)


__all__ = ["RestartingDriver", "make_default_driver", "make_driver"]
