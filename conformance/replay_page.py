"""``ctxspec replay --html``: the replay page built from a scenario and its trace, written whole
or not at all (:mod:`replay_data` derives what is drawn, :mod:`replay_html` draws it)."""

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ctxspec.conformance.html_page import write_whole
from ctxspec.conformance.linear_trace import expanded, linear
from ctxspec.conformance.replay_data import build_page
from ctxspec.conformance.replay_html import render_page
from ctxspec.conformance.scenario import Scenario


def plain_trace(trace: Sequence[dict[str, Any]] | Mapping[str, Any]) -> list[dict[str, Any]]:
    """The trace as plain JSON, as every other reader reads it — through its linear form, so a
    long Session's repeated messages are converted once and stay shared (#35). A driver's
    trace in either form is taken: a list of events, or a linear document (format 2)."""
    form = trace if isinstance(trace, Mapping) else linear(list(trace))
    document: dict[str, Any] = json.loads(json.dumps(form, default=str))
    return expanded(document)


def replay_html(scenario: Scenario, trace: Sequence[dict[str, Any]] | Mapping[str, Any], *,
                partial: str = "") -> str:
    """The page of one replay. ``partial``: why the trace stops early (the scenario's script ran
    out), said at the top of a page that shows what happened until then."""
    return render_page(build_page(scenario, plain_trace(trace), partial))


def write_replay_page(path: Path, scenario: Scenario,
                      trace: Sequence[dict[str, Any]] | Mapping[str, Any], *,
                      partial: str = "") -> None:
    write_whole(path, replay_html(scenario, trace, partial=partial))
