"""The older Runs' part kept between requests (issue #35, Q400): a Session's requests built
from the kept part equal those built afresh, over generated Sessions; and each pass over a
view with a kept segment marked gives what the plain pass gives over the same messages."""

from typing import Any
from uuid import UUID

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxspec.conformance.driver import ReferenceDriver, run_scenario
from ctxspec.conformance.scenario import Scenario
from ctxspec.reference import history
from ctxspec.reference.compaction import RequestParts, split_request
from ctxspec.reference.protection import ProtectedInput, check_protected_inputs
from ctxspec.reference.runtime import history_source, pipeline
from ctxspec.reference.segments import marked
from ctxspec.reference.snapshots import view_hash
from ctxspec.reference.tokens import ByteEstimator
from ctxspec.reference.view import (
    ModelView,
    estimation_request,
    render_request,
    rendered_estimation,
)
from tests.test_history_properties import project, scenarios

STEP = st.sampled_from(["ask", "supplement", "advance", "stop"])


def _document(steps: list[str], recent_runs: int, tools: bool) -> dict[str, Any]:
    """A scenario of the generated steps: every ask and supplement its own text, each model
    answer a text (every third one a ``read`` call when ``tools``)."""
    script: list[dict[str, Any]] = []
    for n in range(4 * len(steps) + 4):
        if tools and n % 3 == 1:
            script.append({"text": f"reading {n}", "tool_calls": [
                {"name": "read", "arguments": {"path": f"{n}.md"}}]})
        else:
            script.append({"text": f"answer {n}"})
    made: list[dict[str, Any]] = []
    active = True  # the first question's Run; an ask waits for the Run before it to end
    for i, step in enumerate(steps):
        if step == "ask":
            made += [{"advance": True}] if active else []
            made.append({"ask": f"question {i}"})
        elif step == "supplement":
            made.append({"supplement": f"note {i}"})
        elif step == "stop" and active:  # its inputs never delivered: carried on (§5)
            made += [{"stop": True}, {"advance": True}]
        elif active:
            made.append({"advance": True})
        active = step == "ask" or (active and step == "supplement")
    return {"scenario_version": 1, "name": "older-part", "description": "generated",
            "agent": {"system_prompt": "S", "window": 1_000_000, "estimator": "bytes",
                      "recent_runs": recent_runs, "loop_limit": 3,
                      "tools": [{"name": "read", "schema": {
                          "type": "object", "properties": {"path": {"type": "string"}}}}]},
            "steps": [{"ask": "question first"}, *made, {"advance": True}],
            "model": {"business": script},
            "tools": {"read": [{"text": f"file {n}"} for n in range(4 * len(steps) + 4)]}}


def _trace(document: dict[str, Any]) -> tuple[list[dict[str, Any]], list[ModelView]]:
    """The trace, and each request's view as sent (its kept segment marked: the trace keeps
    the messages only)."""
    driver, sent = ReferenceDriver(), []

    def hashed(view: ModelView) -> str:
        sent.append(view)
        return view_hash(view)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pipeline, "view_hash", hashed)
        run_scenario(Scenario.model_validate(document), lambda: driver)
    requests = driver.raw_trace().model_requests()
    assert [r.view for r in requests] == sent
    return driver.trace(), sent


def _fresh_part(self: history_source.StoredHistory, ended: Any, recent_runs: int,
                protected: Any, current_run_id: Any, call_states: Any) -> history.OlderPart:
    """The older part made afresh for every request: nothing kept."""
    older, _ = history.select_history(ended, recent_runs)
    return history.extend_older(history.OlderPart(), older, source=self,
                                current_run_id=current_run_id,
                                protected_input_ids=protected, call_states=call_states)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(STEP, max_size=24), st.integers(0, 2), st.booleans())
def test_kept_older_part_gives_the_fresh_requests(steps: list[str], recent_runs: int,
                                                   tools: bool) -> None:
    document = _document(steps, recent_runs, tools)
    kept, views = _trace(document)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(history_source.StoredHistory, "older_part", _fresh_part)
        fresh, _ = _trace(document)
    assert kept == fresh
    requests = [e for e in kept if e["kind"] == "model_request"]
    for view, request in zip(views, requests, strict=True):  # each marked pass = the plain
        _assert_passes_plain(view, request)


def _assert_passes_plain(view: ModelView, request: dict[str, Any]) -> None:
    plain = ModelView(view.messages)
    assert marked(plain) is None
    assert view_hash(view) == view_hash(plain) == request["view_hash"]
    rendered = render_request(view, ("s",))
    assert rendered == render_request(plain, ("s",))
    estimator = ByteEstimator()
    assert estimator.estimate(rendered_estimation(rendered)) == \
        estimator.estimate(rendered_estimation(render_request(plain, ("s",))))
    assert estimator.estimate(estimation_request(view)) == \
        estimator.estimate(estimation_request(plain))
    protected = _protected(view, request)
    assert check_protected_inputs(view, protected) == check_protected_inputs(plain, protected)
    ids = frozenset(p.input_id for p in protected)
    parts = RequestParts((), (), view.messages, (), (), ids)
    if (found := marked(view)) is not None:
        object.__setattr__(parts, "_segment", found)
    assert split_request(parts, estimator) == split_request(
        RequestParts((), (), view.messages, (), (), ids), estimator)


def _protected(view: ModelView, request: dict[str, Any]) -> list[ProtectedInput]:
    texts = {m.input_id: m.text for m in view.messages if m.input_id is not None}
    return [ProtectedInput(UUID(i), n, texts.get(UUID(i), "")) for n, i in
            enumerate(request["protected_input_ids"], start=1)]


def test_a_kept_part_is_reused_and_extended() -> None:
    """The kept part is what later requests start from: a Session of five Runs of one request
    each keeps a part of the older Runs (recent_runs = 1) that grows by one Run a request."""
    seen: list[int] = []
    original = history_source.StoredHistory.older_part

    def spy(self: history_source.StoredHistory, *args: Any) -> history.OlderPart:
        part = original(self, *args)
        seen.append(len(self._older.runs))
        return part
    document = _document(["advance", "ask", "advance", "ask", "advance", "ask", "advance",
                          "ask"], 1, False)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(history_source.StoredHistory, "older_part", spy)
        _, views = _trace(document)
    assert seen == [0, 0, 1, 2, 3]
    assert [None if (found := marked(v)) is None else found[0] for v in views] == \
        [None, None, 1, 1, 1]  # after the system prompt, once there is an older Run


def test_the_trace_keeps_the_older_messages_once() -> None:
    """Each request's view and rendering in the trace keep the older Runs' messages as one
    list the Session's requests share (and a length), not a tuple per request: the trace of
    5,000 short Runs holds each message once (issue #35)."""
    driver = ReferenceDriver()
    run_scenario(Scenario.model_validate(_document(
        ["advance", "ask", "advance", "ask", "advance", "ask", "advance", "ask"], 1, False)),
        lambda: driver)
    requests = driver.raw_trace().model_requests()
    for key in ("_view_parts", "_rendered_parts"):
        lists = [r.__dict__[key][1][1] for r in requests[2:]]
        assert all(kept is lists[0] for kept in lists)
        assert [r.__dict__[key][1][2] for r in requests[2:]] == [3, 6, 9]


@settings(max_examples=150, deadline=None)
@given(scenarios(), st.data())
def test_an_older_part_extended_run_by_run_projects_the_fresh_view(s: Any, data: Any) -> None:
    """A part kept from a prefix of the older Runs (made with this request's protected inputs
    or with none), extended by the rest, gives the view a fresh projection gives: a part
    made with other protected inputs is not this request's (:meth:`OlderPart.shows`)."""
    older, _ = history.select_history(s.session.ended(s.current), s.recent_n)
    split = data.draw(st.integers(0, len(older)))
    made_with = data.draw(st.sampled_from([frozenset(s.protected), frozenset()]))
    part = history.OlderPart()
    for runs in (older[:split], older[split:]):
        part = history.extend_older(part, runs, source=s.session,
                                    current_run_id=s.current.run_id,
                                    protected_input_ids=made_with)
    kept = history.project_history(
        ended_runs=s.session.ended(s.current), recent_runs=s.recent_n, source=s.session,
        current_run_id=s.current.run_id, current_records=s.current.records,
        protected_input_ids=s.protected, older_part=part)
    assert kept == project(s)
    assert isinstance(kept, ModelView)
    estimator = ByteEstimator()
    assert view_hash(kept) == view_hash(ModelView(kept.messages))
    assert render_request(kept) == render_request(ModelView(kept.messages))
    assert estimator.estimate(estimation_request(kept)) == \
        estimator.estimate(estimation_request(ModelView(kept.messages)))
