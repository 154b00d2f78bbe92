"""The facts the Google ADK driver keeps beside ADK (driver.py): each Run with its inputs and
their deliveries (§5), and the refusal it raises from its model before a request over B."""

from dataclasses import dataclass, field


class BudgetRefused(Exception):
    """The §8 refusal of a request whose fixed input exceeds B, raised from the scripted model
    before anything is sent, so ADK ends the invocation."""

    def __init__(self, code: str, figures: dict[str, int]) -> None:
        super().__init__(f"{code}: the fixed input needs {figures['input_tokens']} tokens; "
                         f"the input budget is {figures['input_budget']}")
        self.code, self.figures = code, figures


@dataclass
class Delivery:
    input_id: str
    delivery_id: str
    text: str
    run_no: int | None
    state: str = "pending"
    previous: str | None = None


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
