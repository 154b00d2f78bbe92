"""The OpenAI Agents SDK under the conformance suite (extra ``openai-agents``):
``ctxspec conformance --driver ctxspec.adapters.openai_agents:make_driver`` (the best
configuration; ``make_default_driver``: the SDK's defaults)."""

from ctxspec.adapters.openai_agents.driver import OpenAIAgentsDriver
from ctxspec.adapters.openai_agents.restart import make_default_driver, make_driver

__all__ = ["OpenAIAgentsDriver", "make_default_driver", "make_driver"]
