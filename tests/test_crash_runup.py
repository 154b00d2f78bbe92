"""Crashed runs sharing their run-up (conformance/crash_runup.py, issue #20) give, for every
crash case, exactly the trace of the same crashed document run from scratch.

Two computations that must agree: the shared path keeps what the dead process would leave at
each crash point of one uncrashed run and restarts from there; the plain path runs the crashed
document whole. The default tier checks one case per (phase, when) of the crash matrices, the
slow tier every case; a shared path that gives no trace for a case the reference can share
fails too, so the check cannot pass by falling back.
"""

import json
from collections.abc import Iterable, Sequence
from typing import Any

import pytest

from ctxspec.conformance.case import Case
from ctxspec.conformance.crash_matrix import CRASH_MATRIX
from ctxspec.conformance.driver import LaterTrace, ReferenceDriver
from ctxspec.conformance.estimator import scenario_texts
from ctxspec.conformance.harness import SharedRuns, run_case, scenario_trace
from ctxspec.conformance.hook_crashes import HOOK_CRASHES

CRASHES = (*CRASH_MATRIX, *HOOK_CRASHES)


def _one_per_point() -> list[Case]:
    """The first case of each (phase, when) of the crash matrices."""
    chosen: dict[tuple[str, str], Case] = {}
    for case in CRASHES:
        crash = case.scenario["crash"]
        chosen.setdefault((crash["phase"], crash["when"]), case)
    return list(chosen.values())


def _uncrashed(case: Case) -> dict[str, Any]:
    return {k: v for k, v in case.scenario.items() if k != "crash"}


def _shared(cases: Iterable[Case]) -> dict[str, list[dict[str, Any]] | None]:
    """Each case's trace through the shared path, one run-up per uncrashed document (its keys
    in their own order: a trace may echo a script's order), and by the group's first case's
    id plus ``:uncrashed`` the run-up's own trace."""
    groups: dict[str, list[Case]] = {}
    for case in cases:
        groups.setdefault(json.dumps(_uncrashed(case)), []).append(case)
    traces: dict[str, list[dict[str, Any]] | None] = {}
    for group in groups.values():
        found = ReferenceDriver().crashed_runs(_uncrashed(group[0]),
                                               [*(c.scenario["crash"] for c in group), None],
                                               ReferenceDriver)
        traces.update(zip([*(c.id for c in group), f"{group[0].id}:uncrashed"],
                          [later() for later in found], strict=True))
    return traces


def _first_difference(shared: Sequence[Any], scratch: Sequence[Any]) -> str:
    for index, (one, other) in enumerate(zip(shared, scratch, strict=False)):
        if one != other:
            return f"event #{index}: shared {one}\n  from scratch {other}"
    return f"{len(shared)} events shared, {len(scratch)} from scratch"


def _check(cases: Sequence[Case]) -> None:
    shared = _shared(cases)
    documents = {c.id: c.scenario for c in cases}
    documents.update({f"{c.id}:uncrashed": _uncrashed(c) for c in cases
                      if f"{c.id}:uncrashed" in shared})
    for name, document in documents.items():
        trace = shared[name]
        assert trace is not None, f"{name}: the reference did not share this run"
        scratch = json.loads(json.dumps(scenario_trace(ReferenceDriver(), document)))
        assert json.dumps(trace) == json.dumps(scratch), (
            f"{name}: the shared run-up's trace is not the document's run from scratch\n"
            f"  {_first_difference(trace, scratch)}")


def test_one_case_per_phase_and_when_matches_its_run_from_scratch() -> None:
    cases = _one_per_point()
    assert len(cases) >= 30  # every phase of conformance/phases.py the matrices cross, twice
    _check(cases)


@pytest.mark.slow
def test_every_crash_case_matches_its_run_from_scratch() -> None:
    _check(CRASHES)


def _group(size: int) -> list[Case]:
    first = CRASH_MATRIX[0]
    return [c for c in CRASH_MATRIX if _uncrashed(c) == _uncrashed(first)][:size]


class Counting(ReferenceDriver):
    calls = 0
    restarts = 0

    def crashed_runs(self, document: Any, crashes: Any, fresh: Any) -> list[LaterTrace]:
        Counting.calls += 1
        return super().crashed_runs(document, crashes, fresh)

    def _restart(self) -> None:
        Counting.restarts += 1
        super()._restart()


class Declining(ReferenceDriver):
    def crashed_runs(self, document: Any, crashes: Any, fresh: Any) -> list[LaterTrace]:
        return [lambda: None] * len(crashes)


def test_the_harness_asks_the_ability_once_per_group_and_falls_back_without_a_trace() -> None:
    cases = _group(4)
    assert len(cases) == 4
    Counting.calls = 0
    runs = SharedRuns(Counting, cases)
    assert [run_case(c, Counting, runs=runs).status for c in cases] == ["passed"] * 4
    assert Counting.calls == 1
    assert Counting.restarts == 4  # one crashed run each, none from scratch


def test_a_crashed_run_is_computed_only_when_a_case_needs_it() -> None:
    # A --jobs worker runs some of a group's cases: only theirs go on from the run-up.
    cases = _group(4)
    Counting.calls = Counting.restarts = 0
    runs = SharedRuns(Counting, cases)
    assert run_case(cases[2], Counting, runs=runs).status == "passed"
    assert (Counting.calls, Counting.restarts) == (1, 1)
    declined = SharedRuns(Declining, cases)  # each case runs its crashed document itself
    assert [run_case(c, Declining, runs=declined).status for c in cases] == ["passed"] * 4


def test_a_refused_commit_and_an_unreached_point_are_not_shared() -> None:
    case = CRASH_MATRIX[0]
    document = _uncrashed(case)
    fails = {"phase": "request_frozen", "occurrence": 1, "when": "fails"}
    never = {"phase": "request_frozen", "occurrence": 99, "when": "after"}
    found = ReferenceDriver().crashed_runs(document, [fails, never], ReferenceDriver)
    assert [later() for later in found] == [None, None]


def test_a_crash_adds_no_scenario_text() -> None:
    """A crash's phase, like its commit and when, configures the run: the content estimator
    counts the same texts with and without it (Q243)."""
    case = next(c for c in HOOK_CRASHES if c.scenario["agent"].get("estimator") == "content")
    assert scenario_texts(case.scenario) == scenario_texts(_uncrashed(case))
