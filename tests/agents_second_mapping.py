"""A second, independent mapping of the OpenAI Agents SDK onto the Driver (issue #32: a verdict
holds for the framework, not for one adapter's choices). It changes the two choices of the
adapter (ctxspec/adapters/openai_agents/) that another careful user could make otherwise with
the same public API:

- **the history**: no ``SQLiteSession``; the caller carries the conversation itself, as the
  SDK's documentation shows for running without a session: each Run's input is the previous
  Run's ``RunResultStreaming.to_input_list()`` followed by the new inputs;
- **the hand-over**: ``Agent.as_tool(input_builder=...)`` words the Executor's input as plain
  lines of our own (``task: …``, ``constraint: …``, ``material: …``) instead of the SDK's
  structured-input builder (a preamble and the arguments as JSON).

Everything else (the scripted Model, the tools, the guardrails, the filter) is the adapter's,
so a verdict that differs between the two shows a case that judges a mapping choice. With no
session there is no compaction session either: the cases that need ``compaction_summary``
are unsupported here and compared only where both reach a verdict.
"""

from typing import Any

from agents import Runner, RunResultStreaming
from agents.agent_tool_input import StructuredToolInputBuilderOptions

from ctxspec.adapters.openai_agents.driver import OpenAIAgentsDriver
from ctxspec.conformance.driver import Ports
from ctxspec.conformance.scenario import Scenario


def _lines(options: StructuredToolInputBuilderOptions) -> str:
    """The hand-over as lines in our own words: the task, each constraint, each material."""
    params: Any = options.get("params") or {}
    lines = [f"task: {params.get('task', '')}"]
    lines += [f"constraint: {each}" for each in params.get("constraints") or ()]
    lines += [f"material: {each}" for each in params.get("materials") or ()]
    return "\n".join(lines)


class CarriedHistoryDriver(OpenAIAgentsDriver):
    """The SDK with the history carried by the caller and the hand-over worded by us."""

    handover_builder = staticmethod(_lines)
    capabilities = OpenAIAgentsDriver.capabilities - {"history_api", "history_bodies"}
    """No session: the caller's own list is the only history, so no history API is read."""

    def __init__(self) -> None:
        # The SDK compacts only a session's history (OpenAIResponsesCompactionSession wraps a
        # Session), so a caller carrying the history has no compaction: it declares none.
        super().__init__(compaction=False)

    def configure(self, scenario: Scenario, ports: Ports) -> None:
        super().configure(scenario, ports)
        self.history: list[Any] = []
        """Every item of the Session's Runs so far, as ``to_input_list()`` gave them."""

    def new_session(self) -> None:
        super().new_session()
        self.history = []  # another Session carries nothing of this one

    def _streamed(self, start: Any) -> RunResultStreaming:
        given = start if not isinstance(start, list) else [*self.history, *start]
        return Runner.run_streamed(self.agent, given, run_config=self.config,
                                   hooks=self.hooks, max_turns=self.doc.loop_limit)

    def _settled(self, result: RunResultStreaming) -> None:
        self.history = result.to_input_list()


def make_driver() -> CarriedHistoryDriver:
    return CarriedHistoryDriver()
