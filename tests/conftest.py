"""Test-suite wiring: the Hypothesis profiles, and every ``covers`` marker must name a
requirement of the catalogue.

The profiles are registered here and nowhere else; ``CTXSPEC_PROFILE`` picks one (default
``dev``, the inner loop). Tests set no ``max_examples`` of their own, so the profile decides how
hard every property and state machine is searched:

- ``dev``: a few examples each, for ``pytest`` while editing;
- ``ci``: what CI runs (the README's check command sets it);
- ``thorough``: on demand, many more examples, e.g. before a release or after touching a model.
"""

import os
import sys

import pytest
from hypothesis import HealthCheck, settings

from ctxspec.catalogue import load_catalogue
from tests.reference_traces import reference_trace

__all__ = ["reference_trace"]  # a fixture of every test module

pytest_plugins = ["pytester"]

# pytest keeps each test module with its asserts rewritten as bytecode beside it, read back
# while the source is unchanged, but writes none where the environment asks for no bytecode
# (PYTHONDONTWRITEBYTECODE): every test process then rewrote every test module on every run,
# about 2.6 s of CPU each. The cache is checked against the source, so it cannot be stale;
# modules imported from here on also keep their bytecode (in git-ignored __pycache__ folders).
sys.dont_write_bytecode = False

# No deadline: the machine is shared, and a slow example is not a wrong one.
_COMMON = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", _COMMON, max_examples=15)
# CI is the gate, so its verdict on a commit must be the one a rerun gives: under ci every
# Hypothesis test is derandomized (its examples fixed by its own code and Hypothesis's version)
# and reads no saved examples. dev and thorough draw new examples each run (they explore).
settings.register_profile("ci", _COMMON, max_examples=200, derandomize=True, database=None)
settings.register_profile("thorough", _COMMON, max_examples=2000)
PROFILE = os.environ.get("CTXSPEC_PROFILE", "dev")
settings.load_profile(PROFILE)


def pytest_report_header(config: pytest.Config) -> str:
    return f"hypothesis profile: {PROFILE} (CTXSPEC_PROFILE)"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # The longest tests start first (marker ``first``): work stealing then gives the short ones
    # to whichever worker is free, instead of a long one starting last with the other core idle.
    items.sort(key=lambda item: item.get_closest_marker("first") is None)
    known = {requirement.id for requirement in load_catalogue()}
    unknown = sorted({(rid, item.nodeid) for item in items
                      for marker in item.iter_markers("covers") for rid in marker.args
                      if rid not in known})
    if unknown:
        listed = "\n".join(f"  {rid} in {nodeid}" for rid, nodeid in unknown)
        raise pytest.UsageError(f"covers() names requirements the catalogue does not have:\n"
                                f"{listed}")

