"""The linear trace form (issue #35): each message written once, expanded back exactly; a
whole-view list still accepted; a broken reference refused with the field."""

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ctxspec.cli import main
from ctxspec.conformance.driver import ReferenceDriver, run_scenario
from ctxspec.conformance.linear_trace import TraceFormatError, events_of, expanded, linear
from ctxspec.conformance.scenario import Scenario
from tests.benchmarks.long_session import n_run_session

EXAMPLES = Path(__file__).resolve().parent.parent / "spec" / "examples"


def _trace(document: dict[str, Any]) -> list[dict[str, Any]]:
    driver = ReferenceDriver()
    run_scenario(Scenario.model_validate(document), lambda: driver)
    return driver.trace()


def test_linear_form_expands_to_the_same_events() -> None:
    events = _trace(n_run_session(6))
    document = linear(events)
    assert json.loads(json.dumps(expanded(document))) == json.loads(json.dumps(events))
    sent = sum(len(e["view"]["messages"]) for e in events if e["kind"] == "model_request")
    # 6 Runs of 5 requests: every request resends the older Runs, the table holds each once
    assert len(document["messages"]) < sent / 3


def test_linear_trace_grows_linearly() -> None:
    """Doubling the Session about doubles the linear document, where the expanded trace
    (every view in full) grows about fourfold."""
    small, large = (_trace(n_run_session(n)) for n in (8, 16))
    expanded_ratio = len(json.dumps(large)) / len(json.dumps(small))
    linear_ratio = len(json.dumps(linear(large))) / len(json.dumps(linear(small)))
    assert linear_ratio < 2.6 < expanded_ratio
    later = [e for e in linear(large)["events"] if e["kind"] == "model_request"][-1]
    assert later["view"]["shared_prefix"] > len(later["view"]["message_refs"])


def test_whole_views_are_still_accepted_and_bad_refs_refused() -> None:
    events = _trace(n_run_session(1))
    assert events_of(events) is events
    document = linear(events)
    at = next(i for i, e in enumerate(document["events"]) if e["kind"] == "model_request")
    document["events"][at]["view"]["message_refs"] = [10**6]
    with pytest.raises(TraceFormatError, match=rf"events\[{at}\]\.view\.message_refs"):
        expanded(document)
    document = linear(events)
    document["events"][at]["view"]["shared_prefix"] = 5  # the first request has no previous
    with pytest.raises(TraceFormatError, match=rf"events\[{at}\]\.view\.shared_prefix"):
        expanded(document)
    with pytest.raises(TraceFormatError, match="trace_format"):
        expanded({"trace_format": 1, "events": []})


def test_replay_json_prints_the_linear_form() -> None:
    outcome = CliRunner().invoke(main, ["replay", "--json", str(EXAMPLES / "tool-batch-hook.json")])
    assert outcome.exit_code == 0, outcome.output
    document = json.loads(outcome.output)
    assert document["trace_format"] == 2
    requests = [e for e in expanded(document) if e["kind"] == "model_request"]
    assert requests and all(r["view"]["messages"] for r in requests)
