"""The guides' commands work when pasted: every ```sh block of docs/design-review.md and
docs/implementing-a-driver.md runs from the checkout's root and exits 0, and what the guides
say of their output is what the output says."""

import functools
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from ctxspec.conformance.cases import CASES

ROOT = Path(__file__).resolve().parent.parent
GUIDES = ["design-review.md", "implementing-a-driver.md"]


def blocks(guide: str) -> list[str]:
    text = (ROOT / "docs" / guide).read_text("utf-8")
    return re.findall(r"^```sh\n(.*?)^```$", text, flags=re.DOTALL | re.MULTILINE)


def paste(block: str, scratch: Path) -> str:
    """Run a block as a user would paste it into bash at the root, with ctxspec on PATH; the
    files it writes under /tmp go to ``scratch``, so that two test runs at once do not read
    each other's files."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    done = subprocess.run(["bash", "-euo", "pipefail", "-c",
                           block.replace("/tmp/ctxspec-", f"{scratch}/ctxspec-")],
                          cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@functools.cache
def outputs(guide: str) -> tuple[str, ...]:
    """What each block of the guide prints, every block pasted once and in order (a block may
    read what an earlier one wrote) and each exiting 0; the tests that check what a guide says
    read these, so each guide of GUIDES is run by its test below."""
    found = blocks(guide)
    assert found, f"{guide} has no runnable block"
    with tempfile.TemporaryDirectory(prefix="ctxspec-guide-") as scratch:
        return tuple(paste(block, Path(scratch)) for block in found)


def test_every_guide_has_a_test_that_runs_its_blocks() -> None:
    source = Path(__file__).read_text("utf-8")
    assert [g for g in GUIDES if f'outputs("{g}")' not in source] == []


@pytest.mark.slow  # nine commands started as a reviewer pastes them, one loading LangChain
def test_the_review_guide_states_what_its_commands_print() -> None:
    example, review, arithmetic, *_ = outputs("design-review.md")
    assert "I=2915 ≥ trigger 2800" in example
    assert "failed CONTEXT_WINDOW_EXCEEDED" in example
    assert "I=167 " in review
    assert review.index("Keep it under five lines.") < review.index("And what should we change?")
    assert "[run 1 ended: succeeded]" in review
    for figure in ("100000 tokens", "80000 tokens", "35000 tokens", "-5000 tokens",
                   "73192 tokens"):
        assert figure in arithmetic
    assert "decision                                 compact" in arithmetic


def test_the_driver_guide_runs_the_toy_and_says_what_it_prints() -> None:
    [toy] = outputs("implementing-a-driver.md")
    summary = toy.splitlines()[-1]
    assert summary.endswith(f"34 passed, 4 failed, {len(CASES) - 38} unsupported, 0 error")
    guide = (ROOT / "docs" / "implementing-a-driver.md").read_text("utf-8")
    assert "It passes 34 cases: the twenty-one that need nothing" in guide
    assert "34 passed, 4 failed, … unsupported, 0 error" in guide
