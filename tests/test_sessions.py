"""Scenarios of several Sessions (the ``new_session`` step): the reference driver opens each
Session of the Agent on the same store and workspace, with identities of its own, and a crash
anywhere in them — in the first Session, while the second opens, inside the second — is taken
over in the Session the steps talk to, changing nothing of what either Session sends."""

import json
from collections import Counter
from typing import Any

import pytest

from ctxspec.conformance.case import lines, of, requests, sessions
from ctxspec.conformance.cases import by_id
from ctxspec.conformance.crash_matrix import SPARE, UNKNOWN_TOOL, _compare
from ctxspec.conformance.driver import ReferenceDriver, run_scenario
from ctxspec.conformance.harness import scenario_trace
from ctxspec.conformance.phases import REFERENCE_COMMITS
from ctxspec.conformance.scenario import ScenarioError, parse_scenario

pytestmark = [pytest.mark.covers("CTX-10.30", "CTX-10.31")]

[NO_MEMORY] = by_id(["S10-NO-IMPLICIT-MEMORY"])


def two_sessions() -> dict[str, Any]:
    """S10-NO-IMPLICIT-MEMORY's Sessions: a tool and a workspace file in Session 1, a plain
    question in Session 2."""
    document: dict[str, Any] = json.loads(json.dumps(NO_MEMORY.scenario))
    return document


def phases(document: dict[str, Any]) -> Counter[str]:
    """The phases the uncrashed scenario passes, over both Sessions: the reference's commits
    counted and named by the phase each stands for."""
    driver = run_scenario(parse_scenario(document))
    assert isinstance(driver, ReferenceDriver) and driver.runtime is not None
    runtimes = [*driver.sessions, driver.runtime]
    made = {phase: sum(r.commits_made(commit) for r in runtimes)
            for phase, commit in REFERENCE_COMMITS.items()}
    return Counter({phase: n for phase, n in made.items() if n})


POINTS = [(phase, n, when) for phase, count in sorted(phases(two_sessions()).items())
          for n in range(1, count + 1) for when in ("before", "after")]


def test_the_scenario_passes_through_both_sessions_phases() -> None:
    # Session 1 opens, asks, runs save, answers; Session 2 opens, asks and answers: two
    # Sessions opened, two inputs accepted, three raw answers saved (by hand from the scenario).
    made = phases(two_sessions())
    assert (made["session_opened"], made["input_accepted"], made["raw_answer_saved"]) == (2, 2, 3)


@pytest.mark.parametrize(("phase", "occurrence", "when"), POINTS,
                         ids=[f"{p}-{n}-{w}" for p, n, w in POINTS])
def test_a_crash_anywhere_in_two_sessions_is_taken_over_in_its_session(
        phase: str, occurrence: int, when: str) -> None:
    uncrashed = scenario_trace(ReferenceDriver(), two_sessions())
    document = {**two_sessions(), "crash": {"phase": phase, "occurrence": occurrence,
                                            "when": when}}
    if (phase, when) in UNKNOWN_TOOL:
        document["model"] = {"business": [*document["model"]["business"], SPARE]}
    crashed = scenario_trace(ReferenceDriver(), document)
    # The crash-matrix comparison over the whole scenario: one restart, nothing asked again
    # but an answer in flight, the same endings, tools and requests.
    _compare("SESSIONS", phase, occurrence, when)(crashed, uncrashed)
    assert [e["session"] for e in of(crashed, "session_opened")] == [2]
    if (phase, when) in UNKNOWN_TOOL:
        return
    # And Session by Session: each sends what it sends uncrashed (an answer in flight asked
    # once more counts once); Session 2 nothing of Session 1.
    assert [sent(part) for part in sessions(crashed)] == \
        [sent(part) for part in sessions(uncrashed)]
    assert sent(sessions(crashed)[1]) == [[("system", "system_prompt", "sys"),
                                           ("user", "user_ref", "Format this snippet.")]]


def sent(trace: list[dict[str, Any]]) -> list[list[tuple[str, str, str]]]:
    """The messages of each request (purpose key, attempt) a Session sent, once each."""
    seen: dict[tuple[str, int], list[tuple[str, str, str]]] = {}
    for request in requests(trace):
        seen.setdefault((request["purpose_key"], request["attempt"]), lines(request))
    return list(seen.values())


def test_the_crash_occurrence_counts_over_the_whole_scenario() -> None:
    # session_opened #2 is Session 2's opening: just before it, Session 2 does not exist yet
    # and the restart opens it afresh; just after, the restart takes it over from the store.
    for when in ("before", "after"):
        document = {**two_sessions(), "crash": {"phase": "session_opened", "occurrence": 2,
                                                "when": when}}
        trace = scenario_trace(ReferenceDriver(), document)
        kinds = [e["kind"] for e in trace if e["kind"] in ("session_opened", "restarted")]
        assert kinds == ["session_opened", "restarted"]
        assert len(requests(sessions(trace)[1])) == 1


def test_a_new_session_is_a_step_of_its_own_never_a_trigger() -> None:
    document = two_sessions()
    document["triggers"] = [{"on": {"tool": "save", "ordinal": 1}, "do": {"new_session": True}}]
    with pytest.raises(ScenarioError, match=r"SCENARIO_INVALID: scenario\.triggers\[0\]"):
        parse_scenario(document)
    document = two_sessions()
    document["steps"][0] = {"ask": "x", "new_session": True}
    with pytest.raises(ScenarioError, match="exactly one of"):
        parse_scenario(document)


def test_deleting_the_agent_removes_every_session() -> None:
    # Both Sessions' records, inputs and blobs go with the Agent (§12 row 24 across Sessions).
    document = two_sessions()
    document["steps"] = [*document["steps"], {"delete_agent": True}, {"observe_retention": True}]
    driver = run_scenario(parse_scenario(document))
    assert isinstance(driver, ReferenceDriver)
    assert driver.stored_rows() == 0
    [after] = [e for e in driver.trace() if e["kind"] == "retained"][-1:]
    assert (after["workspace_files"], after["records"], after["blobs"]) == ([], 0, 0)
