"""Every crash point of the worked examples, through the Driver (§10, §12 rows 21-23).

For each example Session, each named commit it makes, each occurrence, before and after: the
scenario's ``crash`` kills the runtime there, the driver restarts it on the same store, and the
Session must end as the uncrashed one does — same Run statuses, same stored records, no tool run
more often, no saved model answer asked for again. The expected values come from the uncrashed
run of the same scenario (crash-free and crashed runs are two computations that must agree), and
from the design for the points where they may not: a tool that started but never saved its
result is reported UNKNOWN_OUTCOME (Q44), and only an answer that was never saved is asked
again.

The points are the conformance crash matrix's cases (conformance/crash_matrix.py), run here
and nowhere else in the test suite: each must pass, and the reference's store must show the
same. The default tier crashes once at each point; the slow tier at every other occurrence.
"""

import json
from collections import Counter
from typing import Any

import pytest

from ctxspec.conformance.case import Case, CaseFailure, example
from ctxspec.conformance.crash_matrix import (
    CRASH_MATRIX,
    CRASH_POINTS,
    EXAMPLES,
    INSIDE_A_TOOL,
    LOST_ANSWER,
    REFUSED_COMMITS,
    UNKNOWN_TOOL,
    same_requests,
)
from ctxspec.conformance.driver import ReferenceDriver, run_scenario
from ctxspec.conformance.harness import run_case, scenario_trace
from ctxspec.conformance.phases import REFERENCE_COMMITS
from ctxspec.conformance.scenario import ScenarioError, ScriptedModel, parse_scenario
from ctxspec.reference.runtime.trace import Restarted, ToolExecuted

SHORT = {name: short for short, (name, _) in EXAMPLES.items()}
SESSIONS = list(SHORT)


def run(doc: dict[str, Any]) -> ReferenceDriver:
    driver = ReferenceDriver()
    run_scenario(parse_scenario(doc), lambda: driver)
    return driver


def outcome(driver: ReferenceDriver) -> tuple[list[str], Counter[str], Counter[str]]:
    runtime = driver.runtime
    assert runtime is not None
    statuses = [row["status"] for row in runtime.store.query(
        "SELECT status FROM runs ORDER BY run_no")]
    tools = Counter(str(e.name) for e in driver.raw_trace().of(ToolExecuted))
    kinds = Counter(row["message_kind"] for row in runtime.store.query(
        "SELECT message_kind FROM records"))
    return statuses, tools, kinds


def crash_points() -> list[tuple[str, str, int, str]]:
    points = []
    for name in SESSIONS:
        runtime = run(example(name)).runtime
        assert runtime is not None
        for commit, count in sorted(runtime.coordinator.by_name.items()):
            if commit == "STOP_REQUESTED":  # written outside the step, not a crash point
                continue
            points += [(name, commit, n, when) for n in range(1, count + 1)
                       for when in ("before", "after")]
    return points


POINTS = crash_points()


def test_the_conformance_crash_matrix_lists_every_commit_the_examples_make() -> None:
    # The conformance cases enumerate crash points from a written table; the reference's own
    # commits must match it, or the matrix would miss (or invent) a point.
    made: dict[str, dict[str, int]] = {}
    for name, commit, occurrence, _ in POINTS:
        counts = made.setdefault(SHORT[name], {})
        counts[commit] = max(counts.get(commit, 0), occurrence)
    # The matrix is keyed by the design's phases: each the reference maps onto one commit.
    assert made == {short: {REFERENCE_COMMITS[phase]: n for phase, n in points.items()}
                    for short, points in CRASH_POINTS.items()}


def one_per_point(cases: tuple[Case, ...]) -> set[str]:
    """One case per crash point (a phase, before or after it) — the first the matrix lists —
    and every point with a rule of its own (a commit made while a tool runs)."""
    chosen: dict[tuple[str, str], str] = {}
    for case in cases:
        crash = case.scenario["crash"]
        chosen.setdefault((crash["phase"], crash["when"]), case.id)
    inside = {f"CRASH-{short}-{phase.upper()}-{n}-{when}"
              for short, phase, n in INSIDE_A_TOOL for when in ("BEFORE", "AFTER")}
    return set(chosen.values()) | inside


INNER = one_per_point(CRASH_MATRIX)
TIERED = [pytest.param(case, id=case.id, marks=() if case.id in INNER else pytest.mark.slow)
          for case in CRASH_MATRIX]
"""Every case of the conformance crash matrix, run here once (tests/test_conformance.py leaves
them out): one per crash point in the default tier, all the others in the slow tier."""


@pytest.mark.covers("CTX-10.2", "CTX-10.6", "CTX-10.9", "CTX-10.17", "CTX-10.19")
@pytest.mark.parametrize("case", TIERED)
def test_a_crash_at_any_commit_ends_the_session_as_without_it(case: Case) -> None:
    # The conformance case compares the crashed Session's trace with the uncrashed one's; the
    # reference's store must agree too: the same Run statuses and records, no tool run more
    # often, no saved answer asked for again, an intact database.
    drivers: list[ReferenceDriver] = []

    def recording() -> ReferenceDriver:
        drivers.append(ReferenceDriver())
        return drivers[-1]

    result = run_case(case, recording)
    assert (result.status, result.detail) == ("passed", "")
    [crashed] = [d for d in drivers if d.raw_trace().of(Restarted)]
    [uncrashed] = [d for d in drivers if d is not crashed]
    crash = case.scenario["crash"]
    phase, occurrence, when = crash["phase"], crash["occurrence"], crash["when"]
    short = case.id.split("-")[1]
    statuses, tools, kinds = outcome(uncrashed)
    unknown_tool = (phase, when) in UNKNOWN_TOOL or (short, phase, occurrence) in INSIDE_A_TOOL
    restarts = crashed.raw_trace().of(Restarted)
    commit = REFERENCE_COMMITS[phase]  # the reference's commit for the phase
    assert [(r.commit, r.occurrence, r.when) for r in restarts] == [(commit, occurrence, when)]
    model = crashed.ports.model
    assert isinstance(model, ScriptedModel)
    # Only an answer that never reached the store is asked for again, and only once.
    assert model.replays == (1 if (phase, when) in LOST_ANSWER else 0)
    runtime = crashed.runtime
    assert runtime is not None
    assert runtime.store.query("PRAGMA integrity_check")[0]["integrity_check"] == "ok"
    got_statuses, got_tools, got_kinds = outcome(crashed)
    assert got_tools <= tools  # no tool ran more often than without the crash
    if unknown_tool:
        results = [json.loads(row["content"])["text"] for row in runtime.store.query(
            "SELECT content FROM records WHERE message_kind = 'tool_result'")]
        assert any('"UNKNOWN_OUTCOME"' in text for text in results)
        return
    assert got_statuses == statuses
    assert got_tools == tools
    assert got_kinds == kinds


def test_the_default_tier_crashes_at_every_point_of_the_matrix() -> None:
    points = {(c.scenario["crash"]["phase"], c.scenario["crash"]["when"]) for c in CRASH_MATRIX}
    inner = {(c.scenario["crash"]["phase"], c.scenario["crash"]["when"]) for c in CRASH_MATRIX
             if c.id in INNER}
    assert inner == points
    assert len(INNER) < len(CRASH_MATRIX) // 3


@pytest.mark.parametrize(("crash", "expected"), [
    ({"commit": "T_FROZE"},
     "scenario.crash: Value error, commit 'T_FROZE' is not one of SESSION_OPENED, APP-INPUT"),
    ({"commit": "T_FREEZE", "occurrence": 0},
     "scenario.crash.occurrence: Input should be greater than or equal to 1"),
    ({"commit": "T_FREEZE", "when": "during"},
     "scenario.crash.when: Input should be 'before', 'after' or 'fails'")])
def test_a_bad_crash_is_refused_naming_the_field_and_the_rule(crash: dict[str, Any],
                                                              expected: str) -> None:
    with pytest.raises(ScenarioError) as refused:
        parse_scenario({**example("tool-batch-hook"), "crash": crash})
    assert str(refused.value).startswith(f"SCENARIO_INVALID: {expected}")


def _request(key: str, *texts: str) -> dict[str, Any]:
    return {"kind": "model_request", "purpose_key": key, "attempt": 1, "view": {"messages": [
        {"role": "user", "kind": "user_ref", "text": text} for text in texts]}}


def test_a_request_asked_again_under_a_new_key_is_named_so() -> None:
    # A runtime that mints new keys after a restart and sends its first request again: the
    # key counts see no repeat, so the failure must say what the messages show (#32, Q542).
    crashed = [_request("k1", "q"), {"kind": "restarted"}, _request("k2", "q"),
               _request("k3", "q", "answer")]
    uncrashed = [_request("k1", "q"), _request("k2", "q", "tool result"),
                 _request("k3", "q", "answer")]
    with pytest.raises(CaseFailure) as failed:
        same_requests(crashed, uncrashed, "the requests sent")
    assert str(failed.value) == ("requests sent before the restart and asked again after it: "
                                 "expected none, saw 1 (k1 again as k2)")
    # Requests that differ otherwise keep the comparison's own message.
    with pytest.raises(CaseFailure) as differ:
        same_requests([_request("k1", "q"), {"kind": "restarted"}, _request("k2", "q", "x")],
                      uncrashed[:2], "the requests sent")
    assert str(differ.value).startswith("the requests sent: expected")
    same_requests(uncrashed, uncrashed, "the requests sent")  # the same: nothing to say


@pytest.mark.parametrize("case", REFUSED_COMMITS, ids=[c.id for c in REFUSED_COMMITS])
def test_a_refused_commit_is_surfaced_and_recovered_from(case: Case) -> None:
    # Q64, Q542: the reference surfaces the refusal, then ends the Session as without it.
    assert run_case(case, ReferenceDriver).status == "passed"
    # A runtime that died there without saying the store refused it does not pass.
    assert case.compare is not None and case.baseline is not None
    silent = scenario_trace(ReferenceDriver(), {**case.scenario, "crash": {
        **case.scenario["crash"], "when": "before"}})
    baseline = scenario_trace(ReferenceDriver(), case.baseline)
    for event in silent:
        if event["kind"] == "restarted":
            event["when"] = "fails"
    with pytest.raises(CaseFailure, match=r"^refused commits surfaced \(persistence_failed"):
        case.compare(silent, baseline)
