"""The facts the pydantic-ai driver keeps beside the framework (ctxspec/adapters/pydantic_ai/
driver.py): each Run with its inputs and their deliveries (§5), and the refusal it raises
where the framework hands a request to the model."""

from dataclasses import dataclass, field

from ctxspec.adapters.run_facts import Delivery


class BudgetRefused(Exception):
    """A §8 refusal (a fixed input over B; no room for a summary; a request still over B
    after its summary), raised where the
    ``FunctionModel`` receives it, before it is traced as sent, so pydantic-ai ends the Run."""

    def __init__(self, figures: dict[str, int],
                 code: str = "CONTEXT_PROTECTED_INPUT_TOO_LARGE") -> None:
        super().__init__(f"{code}: the request needs {figures['input_tokens']} tokens; "
                         f"the input budget is {figures['input_budget']}")
        self.figures, self.code = figures, code


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


def root_cause(failure: BaseException, known: tuple[type[BaseException], ...]
               ) -> BaseException:
    """The first exception in the chain of one of the ``known`` kinds (pydantic-ai wraps a
    hook's or a tool's error), else the failure itself."""
    seen: BaseException | None = failure
    while seen is not None:
        if isinstance(seen, known):
            return seen
        seen = seen.__cause__ or seen.__context__
    return failure
