"""The trace read one event at a time (issue #35): the linear form made from the events as
they are read equals the one made from the whole expanded trace, and sharing equal messages
among a trace's requests changes nothing a reader sees."""

import json
from typing import Any

import pytest

from ctxspec.conformance.cases import CASES
from ctxspec.conformance.driver import ReferenceDriver, run_scenario
from ctxspec.conformance.harness import scenario_trace
from ctxspec.conformance.linear_trace import expanded, linear
from ctxspec.conformance.replays import run_document
from ctxspec.conformance.scenario import Scenario
from ctxspec.reference.runtime import trace as tr
from tests.benchmarks.long_session import n_run_session

BY_ID = {case.id: case for case in CASES}
SAMPLES = ("ROW-02", "ROW-07-PLACEHOLDERS", "EX8-ROW2", "S10-WORKFLOW-NODE-TAKEOVER",
           "CRASH-TOOLS-INPUT_ACCEPTED-1-AFTER", "S2-WORKFLOW-INPUT-MAPPING")
"""A Session with supplements carried across Runs, protocol placeholders, a compaction, a
workflow taken over, a crash and restart, a workflow's inputs."""


def _plain(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


@pytest.mark.parametrize("case_id", SAMPLES)
def test_the_replayed_linear_trace_is_the_one_made_from_the_whole_trace(case_id: str) -> None:
    scenario = BY_ID[case_id].scenario
    # How ``replay --json`` made it before: the whole trace read back as JSON, then linear.
    whole = scenario_trace(ReferenceDriver(), scenario)
    replayed = run_document(ReferenceDriver(), scenario)
    assert replayed.stopped == ""
    assert replayed.linear == linear(whole)
    assert replayed.trace == whole
    assert expanded(replayed.linear) == whole


def test_trace_events_come_one_at_a_time_and_equal_the_trace() -> None:
    driver = ReferenceDriver()
    run_scenario(Scenario.model_validate(n_run_session(4)), lambda: driver)
    events = driver.trace_events()
    assert iter(events) is events  # a generator: nothing is held beyond the event read
    assert linear(events) == linear(driver.trace())
    assert _plain(list(driver.trace_events())) == _plain(driver.trace())


class _Noted(tr.Trace):
    """A trace that notes each event's JSON when it is added, before anything is shared."""

    def __init__(self) -> None:
        super().__init__()
        self.noted: list[Any] = []

    def add(self, event: tr.TraceEvent) -> None:
        self.noted.append(_plain(tr.Trace([event]).to_json()[0]))
        super().add(event)


def test_sharing_equal_messages_among_requests_changes_no_event() -> None:
    driver = ReferenceDriver()
    scenario = Scenario.model_validate(n_run_session(4))
    noted = _Noted()
    original = ReferenceDriver._runtime

    def runtime(self: ReferenceDriver) -> Any:
        built = original(self)
        if built.session.trace is not noted and not built.session.trace.events:
            built.session.trace = noted
        return built

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ReferenceDriver, "_runtime", runtime)
        run_scenario(scenario, lambda: driver)
    assert noted.events and _plain(noted.to_json()) == noted.noted
    requests = noted.model_requests()
    # Run 4's third request sends Run 4's question, as its second did: one object, not two.
    second, third = requests[-4].view.messages, requests[-3].view.messages
    question = next(m for m in second if m.text.startswith("Question 3:"))
    assert any(m is question for m in third)
