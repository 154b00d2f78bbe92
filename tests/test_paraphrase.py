"""The suite judges the design, not the reference's wording (issue #15): the reference runtime
with every text it words for itself worded differently, and its tool calls and schemas
serialised differently in what it measures (tests/paraphrase.py), passes every case; the same
runtime with one real deviation fails the cases about it."""

import pytest

from ctxspec.conformance.case import Case, requests
from ctxspec.conformance.cases import CASES
from ctxspec.conformance.driver import ReferenceDriver
from ctxspec.conformance.harness import run_case, run_suite, scenario_trace
from tests.paraphrase import ParaphrasingDriver, paraphrasing

BY_ID = {case.id: case for case in CASES}


def test_the_paraphrase_really_rewords() -> None:
    """Not vacuous: the paraphrasing runtime's requests carry none of the reference's markers."""
    scenario = BY_ID["ROW-01"].scenario
    with paraphrasing():
        trace = scenario_trace(ReferenceDriver(), scenario)
    texts = "\n".join(m["text"] for r in requests(trace) for m in r["view"]["messages"])
    assert "Run #1 is over" in texts
    assert "[run 1 ended" not in texts and "[user input" not in texts
    with paraphrasing():  # a denial in its own words, its facts as the reference's (Q210)
        trace = scenario_trace(ReferenceDriver(), BY_ID["ROW-18"].scenario)
    denials = [m for r in requests(trace) for m in r["view"]["messages"]
               if m["kind"] == "tool_result" and m["result_facts"]]
    assert denials and all(m["text"] == "Blocked by policy before the tool ran." for m in denials)
    with paraphrasing():  # the hand-over, the refusal and a diagnostic in its own words (#32)
        handed = scenario_trace(ReferenceDriver(), BY_ID["ROW-03"].scenario)
        refused = scenario_trace(ReferenceDriver(), BY_ID["S7-PROVIDER-REFUSES"].scenario)
        named = scenario_trace(ReferenceDriver(), BY_ID["BAD-UNKNOWN-TARGET"].scenario)
    executor = next(r for r in requests(handed) if r["role"] == "executor")
    assert "Your job: list TODO lines" in [m["text"] for m in executor["view"]["messages"]]
    assert "window is" not in str([e["message"] for e in refused if e["kind"] == "run_ended"])
    with paraphrasing():  # the runtime's own window errors too, with no figure in words (Q295)
        worded = [e["message"] for case in ("ROW-11", "EX8-ROW4", "EX8-ROW6",
                                            "S8-PROTECTED-TOO-LARGE", "S11-PROTECTED-TOO-LARGE")
                  for e in scenario_trace(ReferenceDriver(), BY_ID[case].scenario)
                  if e["kind"] == "run_ended" and e["status"] == "failed"]
    assert len(worded) == 5 and not any(
        figure in message for message in worded
        for figure in ("4000", "3500", "3513", "3603", "100000", "100001", "106000")), worded
    assert [d["diagnostics"] for d in named if d["kind"] == "hook_decided"] == [
        ["NO_SUCH_RECORD"]]


def _passes(cases: list[Case]) -> None:
    with paraphrasing():  # as a suite run: shared baselines and run-ups (Q240, Q241)
        results = list(run_suite(cases, ParaphrasingDriver))
    assert [(r.case.id, r.detail) for r in results if r.status != "passed"] == []


OUTSIDE_THE_MATRIX = [case for case in CASES if case.source != "§10 crash matrix"]
"""Every case but the crash matrix's: a quarter of them (every fourth, so each source is
sampled) in the default tier, the rest in the slow tier."""


@pytest.mark.parametrize("cases", [
    pytest.param(OUTSIDE_THE_MATRIX[::4], id="every-fourth"),
    pytest.param([c for i, c in enumerate(OUTSIDE_THE_MATRIX) if i % 4], id="the-rest",
                 marks=pytest.mark.slow)])
def test_a_paraphrasing_runtime_passes_every_case_but_the_crash_matrix(cases: list[Case]) -> None:
    _passes(cases)


def test_a_paraphrasing_runtime_crashes_at_the_first_point_of_every_phase() -> None:
    """Its commits renamed, the phases mapped onto them: one crash case per phase and side."""
    first: dict[tuple[str, str], Case] = {}
    for case in CASES:
        if case.source == "§10 crash matrix":
            crash = case.scenario["crash"]
            if "phase" in crash:
                first.setdefault((crash["phase"], crash["when"]), case)
    _passes(list(first.values()))


@pytest.mark.slow
def test_a_paraphrasing_runtime_passes_the_whole_crash_matrix() -> None:
    _passes([case for case in CASES if case.source == "§10 crash matrix"])


def test_one_real_deviation_still_fails() -> None:
    """A supplement claimed by a failed request and not carried: §12 row 13 fails, worded
    differently or not."""
    with paraphrasing(deviation=True):
        result = run_case(BY_ID["ROW-13"], ParaphrasingDriver)
    assert result.status == "failed"
    assert "carried" in result.detail
    # The detail a driver author acts on: the rule first, then what differs, short.
    assert result.detail.startswith("CTX-") and len(result.detail.splitlines()) <= 25
    with paraphrasing(deviation=True):
        row1 = run_case(BY_ID["ROW-01"], ParaphrasingDriver)
    assert row1.status == "failed"
    assert "the trace has no delivery event with state carried" in row1.detail  # in words
