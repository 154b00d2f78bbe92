"""The facts the Google ADK driver keeps about a Run beside the shared ones (run_facts.py):
the final response ADK yielded, which the client reads off the invocation's events."""

from dataclasses import dataclass

from ctxspec.adapters import run_facts


@dataclass
class Run(run_facts.Run):
    final: str | None = None
    """The text of the last final response ADK yielded."""
