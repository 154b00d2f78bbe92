"""Properties of the history projection and protocol repair over random sessions (§4, §5, §6).

The generator writes sessions the way the runtime would: every Run has a question; supplements
are delivered, claimed but never delivered, or never claimed; whatever a Run did not deliver is
carried to the next question (§5); batches settle, or an ended Run leaves one open.
"""

from collections.abc import Iterable
from dataclasses import dataclass, replace
from uuid import UUID

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxspec.reference.contracts import TERMINAL_RUN_STATUSES, InputKind, OperationState
from ctxspec.reference.history import EndedRun, InputOccurrence, InputPlacement, project_history
from ctxspec.reference.protocol import repair
from ctxspec.reference.view import (
    EffectiveRecord,
    ModelView,
    ViewKind,
    ViewMessage,
    estimation_request,
    render_request,
)
from tests.builders import InputFacts, RunFacts, SessionBuilder

ENDED_STATUSES = sorted(TERMINAL_RUN_STATUSES)


@dataclass
class Scenario:
    session: SessionBuilder
    current: RunFacts
    protected: set[UUID]
    recent_n: int


@st.composite
def scenarios(draw: st.DrawFn, max_runs: int = 6) -> Scenario:
    session = SessionBuilder()
    carried: list[InputFacts] = []
    runs = draw(st.integers(1, max_runs))
    for run_index in range(runs):
        run = session.run()
        is_current = run_index == runs - 1
        waiting = carried
        carried = []
        question = session.receive(run, InputKind.QUESTION, f"question {run.run_no}")
        # §5: carried inputs are bound with the new question in receive order.
        for facts in sorted([*waiting, question], key=lambda f: f.input_seq):
            if facts.input_id not in run.inputs:
                run.inputs.append(facts.input_id)
            if is_current or draw(st.booleans()) or facts is question:
                session.deliver(run, facts)
            else:
                carried.append(facts)
        for step in range(draw(st.integers(0, 4))):
            action = draw(st.sampled_from(["say", "batch", "supplement"]))
            if action == "say":
                session.say(run, f"thought {run.run_no}.{step}")
            elif action == "batch":
                calls = session.call(run, *[f"tool{k}" for k in range(draw(st.integers(1, 3)))])
                order = draw(st.permutations(calls))
                for call in order:
                    session.result(run, call, f"result of {call.call_id}")
            else:
                facts = session.receive(run, InputKind.SUPPLEMENT,
                                        f"supplement {run.run_no}.{step}")
                fate = "deliver" if is_current else draw(
                    st.sampled_from(["deliver", "claim", "unclaimed"]))
                if fate == "deliver":
                    session.deliver(run, facts)
                else:
                    if fate == "claim":  # in a frozen request, but no first output
                        session.claim(run, facts)
                    carried.append(facts)
        if is_current:
            break
        if draw(st.booleans()):  # the Run ends in the middle of a batch
            calls = session.call(run, "slow_a", "slow_b")
            if draw(st.booleans()):
                session.result(run, calls[0], "slow_a result")
        status = draw(st.sampled_from(ENDED_STATUSES))
        session.end(run, status, final=f"final {run.run_no}" if draw(st.booleans()) else None)
    protected = {i for i in current_inputs(session)}
    return Scenario(session, session.runs[-1], protected, draw(st.integers(0, 3)))


def current_inputs(session: SessionBuilder) -> list[UUID]:
    return list(session.runs[-1].inputs)


def project(s: Scenario) -> ModelView:
    view = project_history(ended_runs=s.session.ended(s.current), recent_runs=s.recent_n,
                           source=s.session, current_run_id=s.current.run_id,
                           current_records=s.current.records, protected_input_ids=s.protected)
    assert isinstance(view, ModelView)
    return view


@pytest.mark.covers("CTX-4.5", "CTX-4.15", "CTX-4.17", "CTX-5.24", "CTX-5.25", "CTX-5.26")
@given(scenarios())
def test_every_user_input_appears_exactly_once_with_its_body(s: Scenario) -> None:
    view = project(s)
    bodies: dict[UUID, list[ViewMessage]] = {}
    for message in view.messages:
        if message.kind is ViewKind.USER_REF and message.input_id is not None:
            bodies.setdefault(message.input_id, []).append(message)
    for facts in s.session.inputs.values():
        shown = bodies.get(facts.input_id, [])
        assert len(shown) == 1, (facts, shown)
        assert shown[0].text == facts.text
        if facts.input_id in s.protected:
            assert shown[0].source_run_id == s.current.run_id


@pytest.mark.covers("CTX-4.4", "CTX-4.7", "CTX-4.6")
@given(scenarios())
def test_only_the_last_n_ended_runs_contribute_process(s: Scenario) -> None:
    view = project(s)
    ended = s.session.ended(s.current)
    recent = {r.run_id for r in (ended[-s.recent_n:] if s.recent_n else [])}
    finals = {r.final_answer.record_id for r in ended if r.final_answer is not None}
    process_kinds = {ViewKind.ASSISTANT, ViewKind.TOOL_RESULT, ViewKind.PLACEHOLDER,
                     ViewKind.FRAGMENT}
    for message in view.messages:
        if message.kind in process_kinds:
            assert message.source_run_id in recent | {s.current.run_id} or \
                message.record_id in finals, message
    # And every ended Run has exactly one explicit terminal status.
    outcomes = [m.source_run_id for m in view.messages if m.kind is ViewKind.OUTCOME]
    assert outcomes == [r.run_id for r in ended]


def assert_protocol_closed(messages: list[ViewMessage]) -> None:
    """Every tool message answers a call of the assistant message that opens its group, and
    every such call is answered exactly once, in action order."""
    index = 0
    while index < len(messages):
        message = messages[index]
        if message.role.value == "tool":
            raise AssertionError(f"tool message without its call at {index}: {message}")
        if message.tool_calls:
            expected = [call.call_id for call in message.tool_calls]
            answers = messages[index + 1:index + 1 + len(expected)]
            assert [a.call_id for a in answers] == expected, (message, answers)
            assert all(a.role.value == "tool" for a in answers)
            index += 1 + len(expected)
            continue
        index += 1


@pytest.mark.covers("CTX-6.2", "CTX-6.3", "CTX-6.4", "CTX-6.6")
@given(scenarios(), st.data())
def test_protocol_is_closed_at_every_cut_of_an_ended_run(s: Scenario, data: st.DataObject) -> None:
    for run in s.session.runs[:-1]:
        records = run.records
        start = data.draw(st.integers(0, len(records)))
        stop = data.draw(st.integers(start, len(records)))
        messages = repair(records[start:stop], run_ended=True)
        assert isinstance(messages, list)
        assert_protocol_closed(messages)
    assert_protocol_closed(list(project(s).messages))


@pytest.mark.covers("CTX-6.10")
@given(scenarios(), st.sampled_from(list(OperationState)))
def test_placeholders_report_and_never_change_operation_state(s: Scenario,
                                                              state: OperationState) -> None:
    open_calls = {call.call_id for run in s.session.runs[:-1] for record in run.records
                  for call in record.tool_calls}
    states = dict.fromkeys(open_calls, state)
    before = dict(states)
    for run in s.session.runs[:-1]:
        messages = repair(run.records, run_ended=True, call_states=states)
        assert isinstance(messages, list)
        for message in messages:
            if message.kind is ViewKind.PLACEHOLDER:
                assert f'"operation_state": "{state.value}"' in message.text
                assert '"status": "not_executed"' in message.text
    assert states == before


class _Fresh:
    """The scenario's session read back as new records (nothing kept from earlier requests),
    as a runtime that re-reads the store sees it."""

    def __init__(self, session: SessionBuilder) -> None:
        self.session = session

    def ended(self, current: RunFacts) -> list[EndedRun]:
        return [replace(run, final_answer=None if run.final_answer is None
                        else run.final_answer.model_copy())
                for run in self.session.ended(current)]

    def placement(self, input_id: UUID) -> InputPlacement:
        return self.session.placement(input_id)

    def user_inputs(self, run: EndedRun) -> Iterable[InputOccurrence]:
        return self.session.user_inputs(run)

    def root_records(self, run: EndedRun) -> Iterable[EffectiveRecord]:
        return [record.model_copy() for record in self.session.root_records(run)]


@given(scenarios(), st.integers(0, 3), st.booleans())
def test_a_later_request_sees_what_a_fresh_read_sees(s: Scenario, earlier_n: int,
                                                     accepts: bool) -> None:
    """Issue #20: records and messages keep what was computed for them, so a later request of
    the same session (another recent_runs, the other reasoning setting) must project, render
    and estimate exactly what a projection of freshly read records gives."""
    earlier = project(replace(s, recent_n=earlier_n))
    render_request(earlier, accepts_reasoning=not accepts)
    estimation_request(earlier)
    later = project(s)
    fresh_source = _Fresh(s.session)
    fresh = project_history(
        ended_runs=fresh_source.ended(s.current), recent_runs=s.recent_n, source=fresh_source,
        current_run_id=s.current.run_id,
        current_records=[r.model_copy() for r in s.current.records],
        protected_input_ids=s.protected)
    assert later == fresh
    assert render_request(later, accepts_reasoning=accepts) == \
        render_request(fresh, accepts_reasoning=accepts)
    assert estimation_request(later) == estimation_request(fresh)
