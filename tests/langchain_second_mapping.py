"""A second, independent mapping of LangChain onto the Driver (issue #32: a verdict holds for
the framework, not for one adapter's choices). It changes how the adapter
(ctxspec/adapters/langchain.py) writes the design's hook points: instead of one
``AgentMiddleware`` subclass (``DesignHooks``, ctxspec/adapters/langchain_hooks.py) it uses
LangChain's decorator middleware, one per point a scenario hooks — ``@before_model`` and
``@wrap_model_call`` for ``model.pre_request``, ``@after_model(can_jump_to=["end"])`` for
``model.post_response``, ``@wrap_tool_call`` for ``tool.post_call`` — the form LangChain's
middleware guide shows first, and the one a user writing a hook or two reaches for.

Each decorated function asks the same chain as the class would, so a verdict that differs
between the two shows a case that judges the adapter's way of writing middleware, not
LangChain. Everything else (the summary, the retries, the limits, the review, the
checkpointer) is the adapter's.
"""

from typing import Any

from langchain.agents.middleware import (
    AgentMiddleware,
    after_model,
    before_model,
    wrap_model_call,
    wrap_tool_call,
)

from ctxspec.adapters.langchain import LangChainDriver
from ctxspec.adapters.langchain_hooks import DesignHooks
from ctxspec.adapters.langchain_model import ScriptedChatModel
from ctxspec.conformance.driver import Ports

Middleware = AgentMiddleware[Any, Any, Any]


def decorated(hooks: DesignHooks) -> list[Middleware]:
    """The points ``hooks`` serves, each as a decorated function of its own, in the place
    the class had (first: its before_model before the summary's, its wrap_model_call outside
    the retries)."""
    made: list[Middleware] = []
    if "model.pre_request" in hooks.registered:
        made.append(before_model(name="design_pre_request")(hooks.before_model))
        made.append(wrap_model_call(name="design_request_settings")(hooks.wrap_model_call))
    if "model.post_response" in hooks.registered:
        made.append(after_model(can_jump_to=["end"], name="design_post_response")(
            hooks.after_model))
    if "tool.post_call" in hooks.registered:
        made.append(wrap_tool_call(name="design_post_call")(hooks.wrap_tool_call))
    return made


def _unfold(middleware: list[Middleware]) -> list[Middleware]:
    return [made for each in middleware
            for made in (decorated(each) if isinstance(each, DesignHooks) else [each])]


class DecoratedHooksDriver(LangChainDriver):
    """LangChain with the design's hook points written as decorator middleware."""

    def _middleware(self, ports: Ports) -> list[Middleware]:
        return _unfold(super()._middleware(ports))

    def _executor_middleware(self, model: ScriptedChatModel, prompt: str) -> list[Middleware]:
        return _unfold(super()._executor_middleware(model, prompt))


def make_driver() -> DecoratedHooksDriver:
    return DecoratedHooksDriver()
