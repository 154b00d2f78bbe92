"""Running a model under the Hypothesis profile (tests/conftest.py) and reading what it
reached: every model counts coverage rows in its ``reached`` Counter. Under the ``ci`` and
``thorough`` profiles a run must reach each row of its ``ROWS`` at least once; the ``dev``
profile's few examples print the table without that demand."""

import os
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, cast

from hypothesis import settings
from hypothesis.stateful import RuleBasedStateMachine, run_state_machine_as_test

PROFILE = os.environ.get("CTXSPEC_PROFILE", "dev")
COVERAGE_ASSERTED = PROFILE in ("ci", "thorough")
"""The profiles whose runs must reach every row (docs/models.md)."""

run_machine = cast(Callable[..., None], run_state_machine_as_test)
"""Typed here: Hypothesis annotates it only in newer releases, and CI may install either."""


def model_settings(steps: int, examples: int | None = None, **more: Any) -> settings:
    """The loaded profile with ``steps`` per example (and ``examples`` when a model sizes its
    own). Derandomized except under ``thorough``, so the rows a CI run reaches are the same on
    every run and its coverage assertion cannot flake; the thorough run draws new examples."""
    extra: dict[str, Any] = {"stateful_step_count": steps, **more}
    if examples is not None:
        extra["max_examples"] = examples
    if PROFILE != "thorough":
        extra.update(derandomize=True, database=None)
    return settings(**extra)


def table(reached: Counter[str], rows: Sequence[str], title: str) -> str:
    lines = [f"| {title} | count |", "|---|---|"]
    lines += [f"| {row} | {reached[row]} |" for row in rows]
    lines += [f"| {row} | {reached[row]} |" for row in sorted(reached) if row not in rows]
    return "\n".join(lines)


def expect_every_row(reached: Counter[str], rows: Sequence[str], title: str) -> None:
    """Print the table (``-s``); under ci and thorough, fail naming every row never reached."""
    print(f"\n{table(reached, rows, title)}")
    missing = [row for row in rows if reached[row] == 0]
    assert not (COVERAGE_ASSERTED and missing), (
        f"the {title} never reached {missing} under the {PROFILE} profile: a part of the "
        f"design the model did not exercise\n{table(reached, rows, title)}")


def run_and_cover(machine: type[RuleBasedStateMachine], rows: Sequence[str], steps: int,
                  title: str) -> Counter[str]:
    """Run the machine under the profile and demand its rows (:func:`expect_every_row`)."""
    reached: Counter[str] = cast(Any, machine).reached
    reached.clear()
    run_machine(machine, settings=model_settings(steps))
    expect_every_row(reached, rows, title)
    return reached
