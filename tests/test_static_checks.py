"""`mypy --strict` and `ruff` over the project, in the slow tier (README "Run it").

They run as tests so that CI's one pytest run checks them on one core while the other core
runs tests, instead of one after the other on one core at the end (issue #20: the cold mypy
run alone takes about half a minute). Both are started first (``first``, tests/conftest.py).
Run alone while editing: ``.venv/bin/mypy ctxspec tests`` and ``.venv/bin/ruff check .``."""

import subprocess
import sys

import pytest

from tests.purity import ROOT

SHOWN = 60
"""Lines of a checker's findings shown in a failure (the rest are one run of it away)."""


def findings(*command: str) -> str:
    done = subprocess.run([sys.executable, "-m", *command], cwd=ROOT, capture_output=True,
                          text=True, check=False, timeout=600)
    if done.returncode == 0:
        return ""
    lines = (done.stdout + done.stderr).splitlines()
    return "\n".join(lines[:SHOWN] + ([f"... {len(lines) - SHOWN} more lines"]
                                      if len(lines) > SHOWN else []))


@pytest.mark.slow
@pytest.mark.first
def test_mypy_strict_finds_nothing() -> None:
    found = findings("mypy", "ctxspec", "tests")
    assert not found, f"mypy --strict (pyproject.toml [tool.mypy]) found:\n{found}"


@pytest.mark.slow
@pytest.mark.first
def test_ruff_finds_nothing() -> None:
    found = findings("ruff", "check", ".")
    assert not found, f"ruff (pyproject.toml [tool.ruff]) found:\n{found}"
