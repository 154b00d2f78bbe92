"""The facts the Agents SDK driver keeps beside the SDK (ctxspec/adapters/openai_agents/
driver.py): each Run with its inputs and their deliveries (§5), the two refusals it raises from
the SDK's input filter, and how a streamed Run's end is read."""

from dataclasses import dataclass, field

from agents import RunResultStreaming
from openai import APIConnectionError, BadRequestError, InternalServerError

from ctxspec.adapters.run_facts import BudgetRefused, Delivery
from ctxspec.reference.ports import ScriptExhausted


class HookDenied(Exception):
    """A ``model.pre_request`` deny, raised from the SDK's input filter so the model is never
    called and the Run ends (Q75)."""


@dataclass
class Run:
    no: int
    run_id: str
    inputs: list[Delivery] = field(default_factory=list)
    question_id: str = ""
    started: bool = False
    status: str = "running"
    stop_requested: bool = False
    staged: list[Delivery] = field(default_factory=list)
    """Supplements that arrived while the SDK ran: admitted at the next resume."""
    seq: int = 0


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
    seen: BaseException | None = failure
    while seen is not None:
        if isinstance(seen, BudgetRefused | HookDenied | BadRequestError | APIConnectionError
                      | InternalServerError | ScriptExhausted):
            return seen
        seen = seen.__cause__ or seen.__context__
    return failure
