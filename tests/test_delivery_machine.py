"""Runs the §5 delivery model (ctxspec.models.delivery_machine): random questions,
supplements, freezes, retries, replayed inputs, first outputs and Run ends, the invariants
checked after every step — and shows what the run reached."""

import pytest

from ctxspec.models.delivery_machine import ROWS, STEPS, DeliveryMachine
from tests.model_runs import run_and_cover

pytestmark = [pytest.mark.covers(
    "CTX-2.2", "CTX-2.3", "CTX-2.7", "CTX-2.19", "CTX-2.22", "CTX-2.27", "CTX-5.14",
    "CTX-5.16", "CTX-5.17", "CTX-5.18", "CTX-5.23", "CTX-5.27", "CTX-5.29", "CTX-5.31",
    "CTX-5.32", "CTX-11.6")]


def test_the_delivery_model_holds_and_reaches_every_row() -> None:
    run_and_cover(DeliveryMachine, ROWS, STEPS, "delivery model")
