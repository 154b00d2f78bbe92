"""What the Agents SDK driver keeps about its Runs (ctxspec/adapters/openai_agents/
driver.py) beside the shared ones (run_facts.py): the supplements staged on a running Run
(§5) and how a streamed Run's end is read."""

from dataclasses import dataclass, field

from agents import RunResultStreaming
from openai import APIConnectionError, BadRequestError, InternalServerError

from ctxspec.adapters import run_facts
from ctxspec.adapters.hook_chain import HookDenied
from ctxspec.adapters.run_facts import BudgetRefused, Delivery
from ctxspec.reference.ports import ScriptExhausted


@dataclass
class Run(run_facts.Run):
    staged: list[Delivery] = field(default_factory=list)
    """Supplements that arrived while the SDK ran: admitted at the next resume."""


async def consume(result: RunResultStreaming) -> BaseException | None:
    """Let the streamed Run work to its end; the exception that ended it, if any."""
    try:
        async for _ in result.stream_events():
            pass
    except Exception as failure:
        return failure
    return result.run_loop_exception


def root_cause(failure: BaseException) -> BaseException:
    """The first cause in the chain the adapter knows (the SDK wraps a filter's error)."""
    return run_facts.root_cause(failure, (BudgetRefused, HookDenied, BadRequestError,
                                          APIConnectionError, InternalServerError,
                                          ScriptExhausted))
