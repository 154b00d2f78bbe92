"""``tool.pre_call`` mapped a second way onto the Agents SDK (§3, Q540): a function tool's
``needs_approval``, the SDK's human-in-the-loop pause, in place of its ``ToolInputGuardrail``
(guardrails.py). A call that needs approval pauses the Run with a ``ToolApprovalItem`` among
``RunResultStreaming.interruptions``; the caller answers each with ``RunState.approve`` or
``RunState.reject`` and resumes the Run from that state (``Runner.run_streamed(agent, state)``),
as the SDK's documentation shows (agents/run_state.py: RunState.approve, RunState.reject).

Its grain is the guardrail's: allow or deny, no modify (an approval carries no arguments), so
the chain's deny is a rejection, its allow an approval, a failed item dropped, and a write has
no place. A rejected call never runs; the model reads the SDK's rejection, worded by
``RunConfig.tool_error_formatter`` (kind ``approval_rejected``). Every other point is the
adapter's first mapping. ``make_approvals_driver`` is this mapping in the best configuration;
tests/test_agents_second_mapping.py checks it reaches the guardrail mapping's verdict on every
case with a pre-call hook.
"""

from typing import Any

from agents import RunResultStreaming
from agents.run_state import RunState

from ctxspec.adapters.openai_agents.restart import RestartingDriver
from ctxspec.conformance.driver import Ports
from ctxspec.conformance.scenario import AgentDoc


class ApprovalsDriver(RestartingDriver):
    """The SDK with ``tool.pre_call`` as a tool's approval instead of its input guardrail."""

    answered = 0
    """The approvals answered so far (how a test sees that this mapping was the one used)."""

    def _build_agent(self, doc: AgentDoc, ports: Ports) -> None:
        super()._build_agent(doc, ports)
        if not ports.hooks.registered("tool.pre_call"):
            return
        for tool in [*self.tools, *self.executor_tools]:
            tool.tool_input_guardrails = None
            tool.needs_approval = True

    def _answer_approvals(self, result: RunResultStreaming) -> RunState[Any]:
        """Each call the Run paused on, in the SDK's order: the chain's deny rejects it, an
        allow approves it; the Run resumes from the answered state."""
        state = result.to_state()
        self.answered += len(result.interruptions)
        for item in result.interruptions:
            call_id = item.call_id or ""
            if self.guardrails.call_denied(item.tool_name or "", item.arguments, call_id):
                state.reject(item)
            else:
                state.approve(item)
        return state


def make_approvals_driver() -> ApprovalsDriver:
    """The best configuration, its pre-call hook the SDK's tool approval (Q540)."""
    return ApprovalsDriver(compaction=True)


__all__ = ["ApprovalsDriver", "make_approvals_driver"]
