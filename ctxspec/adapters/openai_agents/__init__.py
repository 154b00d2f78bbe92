"""The OpenAI Agents SDK under the conformance suite (extra ``openai-agents``):
``ctxspec conformance --driver ctxspec.adapters.openai_agents:make_driver``."""

from ctxspec.adapters.openai_agents.driver import OpenAIAgentsDriver, make_driver

__all__ = ["OpenAIAgentsDriver", "make_driver"]
