"""Runs the compaction-episode state machine (models/episode_machine.py): episodes advanced
from stored facts across crashes, material appended and edited meanwhile, chunks failing."""

import pytest
from hypothesis import settings

from ctxspec.models.episode_machine import STEPS, EpisodeMachine

pytestmark = [pytest.mark.covers(
    "CTX-8.62", "CTX-8.70", "CTX-8.73", "CTX-8.74", "CTX-8.76", "CTX-8.78", "CTX-9.11",
    "CTX-9.18", "CTX-9.30", "CTX-9.32", "CTX-9.38", "CTX-9.43")]

TestEpisodes = EpisodeMachine.TestCase
TestEpisodes.settings = settings(stateful_step_count=STEPS)
