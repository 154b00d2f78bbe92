"""What a role's window error tells the person who must act (§7, §8, §11): the figures of the
request against the Agent's resolved budget, and where each reserve came from — numbers,
configuration sources and the stage, never the prompt or secrets."""

from ctxspec.reference.budget import ResolvedBudget


def fixed_message(b: ResolvedBudget, fixed: int, tokens: int) -> str:
    """§8 "明确提示固定输入超窗": the fixed input — system prompt, tool schemas, current
    protected inputs — is what does not fit, with its figure; §11: numbers only."""
    return (f"the fixed input (system prompt, tool schemas, current protected inputs) needs "
            f"{fixed} tokens, over the input budget {b.input_budget}; the whole request "
            f"needs {tokens}; the window is {b.window} (output reserve {b.output_reserve} "
            f"[{b.output_reserve_source}], safety margin {b.safety_margin} "
            f"[{b.safety_margin_source}])")


def figures(b: ResolvedBudget, tokens: int, *, fixed: int | None = None) -> dict[str, int]:
    """The error's figures as numbers (the trace's ``figures``)."""
    given = {"input_tokens": tokens, "input_budget": b.input_budget, "window": b.window,
             "output_reserve": b.output_reserve, "safety_margin": b.safety_margin}
    return given if fixed is None else {**given, "fixed_input_tokens": fixed}


def window_message(b: ResolvedBudget, tokens: int, stage: str) -> str:
    """§11: the request's figure at ``stage`` against the window and its reserves."""
    return (f"the request needs {tokens} input tokens {stage}; the window is {b.window} "
            f"(output reserve {b.output_reserve} [{b.output_reserve_source}], safety margin "
            f"{b.safety_margin} [{b.safety_margin_source}], input budget {b.input_budget})")
