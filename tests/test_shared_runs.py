"""A suite run shares the runs its cases need more than once (conformance/harness.py
``SharedRuns``, issue #20, Q240): each scenario document several cases need — above all the
crash matrices' baselines — runs once per suite run, yet every case is judged exactly as when
it runs alone, against its own copy of the trace, and a run that broke is never kept."""

from collections import Counter
from dataclasses import replace
from typing import Any

from ctxspec.conformance.case import Trace
from ctxspec.conformance.cases import by_id
from ctxspec.conformance.crash_matrix import CRASH_MATRIX
from ctxspec.conformance.driver import ReferenceDriver
from ctxspec.conformance.harness import SharedRuns, run_case, run_suite, scenario_trace

CHOSEN = ("CRASH-TOOLS-REQUEST_FROZEN-1-AFTER", "CRASH-TOOLS-TOOL_STARTED-2-BEFORE",
          "CRASH-RUNS-INPUT_ACCEPTED-3-AFTER", "CRASH-RUNS-FIRST_OUTPUT-1-BEFORE",
          "ROW-02", "CRASH-TOOLS-RUN_FINALISED-1-BEFORE")
"""Crash cases of two worked examples (three and two of them) around a case without a
baseline."""


class Counting:
    """A factory of reference drivers that counts the scenarios they run without a crash."""

    def __init__(self) -> None:
        self.uncrashed: Counter[str] = Counter()

    def __call__(self) -> ReferenceDriver:
        uncrashed = self.uncrashed

        class Driver(ReferenceDriver):
            def configure(self, scenario: Any, ports: Any) -> None:
                if scenario.crash is None:
                    uncrashed[scenario.name] += 1
                super().configure(scenario, ports)

        return Driver()


def test_a_suite_run_runs_each_baseline_once_and_judges_each_case_as_alone() -> None:
    cases = by_id(CHOSEN)
    alone = [run_case(case, ReferenceDriver) for case in cases]
    counting = Counting()
    together = list(run_suite(cases, counting))
    assert [(r.case.id, r.status, r.detail) for r in together] == [
        (r.case.id, r.status, r.detail) for r in alone]
    assert all(r.status == "passed" for r in together)
    # Two baselines (tool-batch-hook, supplements-across-runs) run once each; ROW-02 runs its
    # own scenario, which has no crash, once.
    assert counting.uncrashed == Counter({"tool-batch-hook": 1, "supplements-across-runs": 1,
                                          **{by_id(["ROW-02"])[0].scenario["name"]: 1}})


def test_each_case_reads_its_own_copy_of_the_baseline() -> None:
    [first, second] = [c for c in CRASH_MATRIX if c.id.startswith("CRASH-TOOLS-SESSION_OPENED")]

    def spoils(crashed: Trace, uncrashed: Trace) -> None:
        uncrashed.clear()  # a case's own reading cannot reach the next case's baseline

    spoiler = replace(first, compare=spoils)
    runs = SharedRuns(ReferenceDriver, [spoiler, second])
    assert run_case(spoiler, ReferenceDriver, runs=runs).status == "passed"
    assert run_case(second, ReferenceDriver, runs=runs).detail == ""


def test_a_baseline_that_broke_is_not_kept() -> None:
    # The first baseline run raises: that case reports the error, the next runs it again.
    broken = {"left": 1}

    class BreaksOnce(ReferenceDriver):
        def configure(self, scenario: Any, ports: Any) -> None:
            if scenario.crash is None and broken["left"]:
                broken["left"] -= 1
                raise RuntimeError("the runtime fell over")
            super().configure(scenario, ports)

    cases = [c for c in CRASH_MATRIX if c.id.startswith("CRASH-TOOLS-SESSION_OPENED")]
    results = list(run_suite(cases, BreaksOnce))
    assert [r.status for r in results] == ["error", "passed"]
    assert "the runtime fell over" in results[0].detail


def test_another_factory_gets_its_own_baselines() -> None:
    # A case run with a factory other than the one the baselines were taken from runs its own.
    [case] = by_id(["CRASH-TOOLS-REQUEST_FROZEN-1-AFTER"])
    counting = Counting()
    runs = SharedRuns(ReferenceDriver, [case, case])
    assert run_case(case, ReferenceDriver, runs=runs).status == "passed"
    assert run_case(case, counting, runs=runs).status == "passed"
    assert counting.uncrashed == Counter({"tool-batch-hook": 1})


def test_every_case_is_judged_against_the_baseline_a_fresh_driver_gives() -> None:
    cases = [c for c in CRASH_MATRIX if c.id.startswith("CRASH-TOOLS-SESSION_OPENED")]
    seen: list[Trace] = []

    def records(crashed: Trace, uncrashed: Trace) -> None:
        seen.append(uncrashed)

    results = list(run_suite([replace(c, compare=records) for c in cases], ReferenceDriver))
    assert [r.status for r in results] == ["passed", "passed"]
    fresh = scenario_trace(ReferenceDriver(), cases[0].baseline or {})
    assert seen == [fresh, fresh]


def test_a_kept_baseline_that_breaks_the_trace_contract_fails_every_case_sharing_it() -> None:
    class MissingWhenUncrashed(ReferenceDriver):
        def trace(self) -> list[dict[str, Any]]:
            events = super().trace()
            if any(e["kind"] == "restarted" for e in events):
                return events
            return [{k: v for k, v in e.items() if k != "attempt"} for e in events]

    cases = [c for c in CRASH_MATRIX if c.id.startswith("CRASH-TOOLS-SESSION_OPENED")]
    results = list(run_suite(cases, MissingWhenUncrashed))
    assert [r.status for r in results] == ["failed", "failed"]
    assert all(r.detail.startswith("the baseline's trace breaks the trace contract v2")
               for r in results)


def test_cases_with_the_same_scenario_run_it_once_and_a_lone_case_runs_its_own() -> None:
    [row] = by_id(["ROW-02"])
    twice = [row, replace(row, id="ROW-02-AGAIN")]
    counting = Counting()
    assert [r.status for r in run_suite(twice, counting)] == ["passed", "passed"]
    assert counting.uncrashed == Counter({row.scenario["name"]: 1})
    alone = Counting()
    assert run_case(row, alone, runs=SharedRuns(alone, [row])).status == "passed"
    assert alone.uncrashed == Counter({row.scenario["name"]: 1})


def test_a_shared_scenario_whose_trace_breaks_the_contract_fails_every_case_needing_it() -> None:
    class Missing(ReferenceDriver):
        def trace(self) -> list[dict[str, Any]]:
            return [{k: v for k, v in e.items() if k != "attempt"} for e in super().trace()]

    [row] = by_id(["ROW-02"])
    results = list(run_suite([row, replace(row, id="ROW-02-AGAIN")], Missing))
    assert [r.status for r in results] == ["failed", "failed"]
    assert all(r.detail.startswith("the trace breaks the trace contract v2") for r in results)
