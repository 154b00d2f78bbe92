"""Runs the effective-context state machine (models/effective_machine.py): random appends in
two roles' contexts, hook items on fresh and stale bases under two registry versions, items
addressing another role's context, replayed mutation ids, freezes — and shows what the run
reached."""

import pytest

from ctxspec.models.effective_machine import ROWS, STEPS, EffectiveContextMachine
from tests.model_runs import run_and_cover

pytestmark = [pytest.mark.covers(
    "CTX-1.9", "CTX-3.27", "CTX-3.29", "CTX-3.30", "CTX-3.31", "CTX-3.32", "CTX-3.50",
    "CTX-3.55", "CTX-3.60", "CTX-3.64", "CTX-3.79", "CTX-3.82", "CTX-3.83", "CTX-3.87")]


def test_the_effective_model_holds_and_reaches_every_row() -> None:
    run_and_cover(EffectiveContextMachine, ROWS, STEPS, "effective model")
