"""Runs the effective-context state machine (models/effective_machine.py) with the Hypothesis
profile: random appends, hook items on fresh and stale bases, replayed mutation ids, freezes."""

import pytest
from hypothesis import settings

from ctxspec.models.effective_machine import STEPS, EffectiveContextMachine

pytestmark = [pytest.mark.covers(
    "CTX-1.9", "CTX-3.27", "CTX-3.29", "CTX-3.30", "CTX-3.31", "CTX-3.50", "CTX-3.55",
    "CTX-3.60", "CTX-3.64", "CTX-3.79", "CTX-3.82", "CTX-3.83", "CTX-3.87")]

TestEffectiveContext = EffectiveContextMachine.TestCase
TestEffectiveContext.settings = settings(stateful_step_count=STEPS)
