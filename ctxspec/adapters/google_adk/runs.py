"""The facts the Google ADK driver keeps beside ADK (driver.py): each Run with its inputs and
their deliveries (§5), and the refusal it raises from its model before a request over B."""

from dataclasses import dataclass, field

from ctxspec.adapters.run_facts import Delivery


@dataclass
class Run:
    no: int
    run_id: str
    inputs: list[Delivery] = field(default_factory=list)
    question_id: str = ""
    started: bool = False
    status: str = "running"
    stop_requested: bool = False
    seq: int = 0
    final: str | None = None
    """The text of the last final response ADK yielded."""
