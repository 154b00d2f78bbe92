"""``ctxspec replay --html``: the replay page built from a scenario and its trace, written whole
or not at all (:mod:`replay_data` derives what is drawn, :mod:`replay_html` draws it)."""

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ctxspec.conformance.html_page import write_whole
from ctxspec.conformance.replay_data import build_page
from ctxspec.conformance.replay_html import render_page
from ctxspec.conformance.scenario import Scenario


def replay_html(scenario: Scenario, trace: Sequence[dict[str, Any]]) -> str:
    """The page of one replay; the trace is read as plain JSON, as every other reader does."""
    plain: list[dict[str, Any]] = json.loads(json.dumps(list(trace), default=str))
    return render_page(build_page(scenario, plain))


def write_replay_page(path: Path, scenario: Scenario, trace: Sequence[dict[str, Any]]) -> None:
    write_whole(path, replay_html(scenario, trace))
