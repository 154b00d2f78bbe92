"""What the Python adapters keep beside their framework about each input, shared so each
adapter's ``runs`` module holds only its own Run: an input's delivery (§5: where it was
delivered, to which Run, what it replaced) and the §8 refusal of a request whose fixed input
exceeds B, raised before anything is sent so the framework ends the Run."""

from dataclasses import dataclass


class BudgetRefused(Exception):
    """The §8 refusal of a request whose fixed input exceeds B (CTX-7.17), raised from where
    the framework hands the request over (the Agents SDK's input filter, ADK's scripted model),
    so the framework ends the Run."""

    def __init__(self, code: str, figures: dict[str, int]) -> None:
        super().__init__(f"{code}: the fixed input needs {figures['input_tokens']} tokens; "
                         f"the input budget is {figures['input_budget']}")
        self.code, self.figures = code, figures


@dataclass
class Delivery:
    """One input's delivery record (§5)."""

    input_id: str
    delivery_id: str
    text: str
    run_no: int | None
    state: str = "pending"
    previous: str | None = None
