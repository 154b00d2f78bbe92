"""The crash matrix crossed with every hook configuration, in full (§3, §10, §12
"原始结果保存后宕机"; issue #17): for each hook point that decides on a call — tool pre-call and
post-call, model post-response, compaction post-response — and each decision (allow, modify,
deny), the configuration's Session is crashed before and after every occurrence of every phase
it passes, and judged as the conformance suite's CRASH-HOOK-* cases are
(conformance/hook_crashes.py): no saved answer asked again, no call run twice, no hook decision
skipped or asked again, and — away from a running hook or a tool's unknown outcome — the same
requests, tools and endings as without the crash.

The conformance suite keeps only the phases around each chain (CRASH-HOOK-*); this cross is the
reference-only slow tier. The points are those the reference passes in each configuration's
uncrashed Session (its commits, named by phase); a point the design names but the Session never
passes cannot be crashed at.
"""

import json
from collections.abc import Mapping

import pytest

from ctxspec.conformance.case import Case
from ctxspec.conformance.driver import ReferenceDriver, run_scenario
from ctxspec.conformance.harness import SharedRuns, run_case
from ctxspec.conformance.hook_crashes import HOOK_CRASHES, configurations, crossed_case
from ctxspec.conformance.phases import REFERENCE_COMMITS
from ctxspec.conformance.scenario import parse_scenario

PHASE_OF: Mapping[str, str] = {commit: phase for phase, commit in REFERENCE_COMMITS.items()}


def phases_passed(scenario: dict[str, object]) -> dict[str, int]:
    """Each phase the uncrashed Session passes, with how often (the reference's commits)."""
    driver = ReferenceDriver()
    run_scenario(parse_scenario(scenario), lambda: driver)
    assert driver.runtime is not None
    return {PHASE_OF[commit]: count
            for commit, count in driver.runtime.coordinator.by_name.items()
            if commit in PHASE_OF}


def crossed() -> list[Case]:
    cases = []
    for point, decision, scenario in configurations():
        for phase, count in sorted(phases_passed(scenario).items()):
            cases += [crossed_case(point, decision, phase, occurrence, when)
                      for occurrence in range(1, count + 1) for when in ("before", "after")]
    return cases


CROSSED = crossed()
RUNS = SharedRuns(ReferenceDriver, CROSSED)
"""The uncrashed Sessions the crossed cases compare with, each run once per test process (as in
a suite run) and judged by each case on its own copy (Q240)."""


@pytest.mark.slow
@pytest.mark.covers("CTX-10.9", "CTX-10.12", "CTX-3.66", "CTX-9.43", "CTX-8.70")
@pytest.mark.parametrize("case", CROSSED, ids=lambda case: case.id)
def test_a_crash_at_any_point_of_a_hooked_session_repeats_and_skips_nothing(case: Case) -> None:
    result = run_case(case, ReferenceDriver, runs=RUNS)
    assert (result.status, result.detail) == ("passed", "")


def test_the_cross_contains_every_point_the_conformance_cases_crash_at() -> None:
    # The conformance suite's CRASH-HOOK-* cases crash after the first occurrence of the
    # phases around each chain: each is a point of the full cross too, judged the same way.
    crossed = {case.id for case in CROSSED}
    missing = [case.id for case in HOOK_CRASHES if f"{case.id}-1-AFTER" not in crossed]
    assert not missing, f"conformance crash points outside the full cross: {missing}"
    assert len(CROSSED) > 8 * len(HOOK_CRASHES)


@pytest.mark.parametrize("decision", ["ALLOW", "MODIFY", "DENY"])
def test_a_tool_whose_outcome_is_unknown_goes_to_the_model_without_its_post_call_chain(
        decision: str) -> None:
    # Q171: a crash after the call started, before its result was saved: there is no raw result
    # for the post-call chain to decide on. The call is not run again, the chain is not asked,
    # and the model reads the runtime's UNKNOWN_OUTCOME error — neither the hook's REDACTED nor
    # its denial, which both judge a result that does not exist.
    case = crossed_case("tool.post_call", decision, "tool_started", 1, "after")
    driver = ReferenceDriver()
    run_scenario(parse_scenario(case.scenario), lambda: driver)
    trace = driver.raw_trace().to_json()
    assert [e for e in trace if e["kind"] in ("hook_called", "tool_executed")] == []
    [request] = [e for e in trace if e["kind"] == "model_request"][1:]
    [result] = [m["text"] for m in request["view"]["messages"] if m["kind"] == "tool_result"]
    assert json.loads(result)["error"]["code"] == "UNKNOWN_OUTCOME"
