"""Every crash point of the worked examples, through the Driver (§10, §12 rows 21-23).

For each example Session, each named commit it makes, each occurrence, before and after: the
scenario's ``crash`` kills the runtime there, the driver restarts it on the same store, and the
Session must end as the uncrashed one does — same Run statuses, same stored records, no tool run
more often, no saved model answer asked for again. The expected values come from the uncrashed
run of the same scenario (crash-free and crashed runs are two computations that must agree), and
from the design for the points where they may not: a tool that started but never saved its
result is reported UNKNOWN_OUTCOME (Q44), and only an answer that was never saved is asked
again.
"""

import json
from collections import Counter
from typing import Any

import pytest

from ctxspec.conformance.case import example
from ctxspec.conformance.crash_matrix import (
    CRASH_POINTS,
    EXAMPLES,
    INSIDE_A_TOOL,
    LOST_ANSWER,
    UNKNOWN_TOOL,
)
from ctxspec.conformance.driver import ReferenceDriver, run_scenario
from ctxspec.conformance.scenario import ScenarioError, ScriptedModel, parse_scenario
from ctxspec.reference.ports import ScriptExhausted
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
    assert made == {short: dict(points) for short, points in CRASH_POINTS.items()}


@pytest.mark.covers("CTX-10.2", "CTX-10.6", "CTX-10.9", "CTX-10.17", "CTX-10.19")
@pytest.mark.parametrize(("name", "commit", "occurrence", "when"), POINTS,
                         ids=[f"{p[0]}-{p[3]}-{p[1]}-{p[2]}" for p in POINTS])
def test_a_crash_at_any_commit_ends_the_session_as_without_it(
        name: str, commit: str, occurrence: int, when: str) -> None:
    statuses, tools, kinds = outcome(run(example(name)))

    crashed = ReferenceDriver()
    doc = {**example(name), "crash": {"commit": commit, "occurrence": occurrence,
                                       "when": when}}
    unknown_tool = (commit, when) in UNKNOWN_TOOL or \
        (SHORT[name], commit, occurrence) in INSIDE_A_TOOL
    try:
        run_scenario(parse_scenario(doc), lambda: crashed)
    except ScriptExhausted:
        # With an unknown tool outcome the model sees an error instead of the result, so the
        # rest of the script may no longer fit; everything up to there is still checked.
        assert unknown_tool
    restarts = crashed.raw_trace().of(Restarted)
    assert [(r.commit, r.occurrence, r.when) for r in restarts] == [(commit, occurrence, when)]
    model = crashed.ports.model
    assert isinstance(model, ScriptedModel)
    # Only an answer that never reached the store is asked for again, and only once.
    assert model.replays == (1 if (commit, when) in LOST_ANSWER else 0)
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
