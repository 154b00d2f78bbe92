"""Runs the compaction-episode state machine (models/episode_machine.py): episodes advanced
from stored facts across crashes and takeovers, material appended and edited meanwhile, chunks
failing, switches with stale expectations and lost leases — and shows what the run reached."""

import pytest

from ctxspec.models.episode_machine import ROWS, STEPS, EpisodeMachine
from tests.model_runs import run_and_cover

pytestmark = [pytest.mark.covers(
    "CTX-8.62", "CTX-8.70", "CTX-8.73", "CTX-8.74", "CTX-8.76", "CTX-8.78", "CTX-9.11",
    "CTX-9.18", "CTX-9.30", "CTX-9.32", "CTX-9.38", "CTX-9.43", "CTX-10.24")]


def test_the_episode_model_holds_and_reaches_every_row() -> None:
    run_and_cover(EpisodeMachine, ROWS, STEPS, "episode model")
