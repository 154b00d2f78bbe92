"""A small takeover hunt (tests/takeover_hunt.py) in the slow tier: processes take Sessions
from each other while their owners still run and are killed at random; the checker finds no
Run ended twice, no tool call run twice, no quota regained, no commit accepted from a stale
owner and no logged commit lost. The long hunt's figures are in docs/robustness.md."""

from pathlib import Path

import pytest

from tests.takeover_hunt import hunt


@pytest.mark.slow
@pytest.mark.first
def test_takeovers_while_the_owner_runs_break_no_rule(tmp_path: Path) -> None:
    figures = hunt(tmp_path / "hunt", sessions=10, workers=4, takeovers=15, limit=120.0)
    violations = {k: figures[k] for k in (
        "runs ended twice", "tool calls run twice", "quota regained (read ran)",
        "commits accepted from a stale owner", "sessions whose store lost a logged commit")}
    assert violations == dict.fromkeys(violations, 0), figures
    # The hunt reached what it is for: owners fenced after a takeover, Runs ended, kills.
    assert figures["takeovers of a running owner (its next commit fenced)"] >= 15, figures
    assert figures["runs ended"] > 0 and figures["killed"] > 0, figures
