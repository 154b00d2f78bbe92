"""Runs the §5 delivery model (ctxspec.models.delivery_machine) with the Hypothesis profile
(tests/conftest.py): random questions, supplements, freezes, retries, first outputs and Run
ends, the invariants checked after every step."""

import pytest
from hypothesis import settings

from ctxspec.models.delivery_machine import STEPS, DeliveryMachine

pytestmark = [pytest.mark.covers(
    "CTX-2.2", "CTX-2.3", "CTX-2.7", "CTX-2.19", "CTX-2.22", "CTX-2.27", "CTX-5.14",
    "CTX-5.16", "CTX-5.17", "CTX-5.18", "CTX-5.23", "CTX-5.27", "CTX-5.29", "CTX-5.31",
    "CTX-5.32", "CTX-11.6")]

TestDeliveryLifecycle = DeliveryMachine.TestCase
TestDeliveryLifecycle.settings = settings(stateful_step_count=STEPS)
