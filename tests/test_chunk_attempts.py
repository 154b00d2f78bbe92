"""A compaction chunk as a model Operation of its own (§8, §9, §10): it inherits the role's model
attempts, saves each failed attempt and its raw answer before post-processing, and a takeover
at any of its commits neither asks the summary model again for a saved answer nor asks a hook
again for a committed decision."""

import functools
from collections import Counter
from typing import Any

import pytest

from ctxspec.conformance.case import example
from ctxspec.conformance.crash_matrix import HOOK_DROPPED, LOST_ANSWER
from ctxspec.conformance.driver import ReferenceDriver, run_scenario
from ctxspec.conformance.phases import REFERENCE_COMMITS
from ctxspec.conformance.scenario import ScriptedModel, parse_scenario
from ctxspec.reference.runtime.trace import HookCalled, ModelRequestSent, Restarted, RunEnded

CHUNKS = "compaction-three-chunks-window-exceeded"


def hooked(failures: int = 0) -> dict[str, Any]:
    """The worked example with both compaction hook points registered, and chunk 2's first
    ``failures`` attempts failing (model_attempts = 2)."""
    document = example(CHUNKS)
    document["hooks"] = [{"point": "compaction.pre_request", "items": [{}]},
                         {"point": "compaction.post_response", "items": [{}]}]
    summaries = document["model"]["compaction"]
    document["model"]["compaction"] = [summaries[0], *[{"fail": "reset"}] * failures,
                                       *summaries[1:]]
    return document


def run(document: dict[str, Any]) -> ReferenceDriver:
    driver = ReferenceDriver()
    run_scenario(parse_scenario(document), lambda: driver)
    return driver


def chunk_requests(driver: ReferenceDriver) -> list[tuple[str, int]]:
    return [(e.purpose_key.rsplit(":", 1)[1], e.attempt)
            for e in driver.raw_trace().of(ModelRequestSent) if e.purpose == "compaction"]


def hook_calls(driver: ReferenceDriver) -> Counter[tuple[str, str]]:
    return Counter((e.point, e.stage) for e in driver.raw_trace().of(HookCalled))


def endings(driver: ReferenceDriver) -> list[tuple[str, str | None]]:
    """Each Run's ending (a Run that ended just before a crash ends again after it)."""
    return list({e.run_no: (e.status, e.error_code)
                 for e in driver.raw_trace().of(RunEnded)}.values())


@functools.cache
def uncrashed(failures: int) -> tuple[list[tuple[str, int]], Counter[tuple[str, str]],
                                      list[tuple[str, str | None]]]:
    """The hooked example without a crash (the same for every crash point): its chunk requests,
    hook calls and Run endings, run once per test process."""
    clean = run(hooked(failures))
    return sorted(chunk_requests(clean)), hook_calls(clean), endings(clean)


def points(document: dict[str, Any]) -> list[tuple[str, int, str]]:
    """Every (phase, occurrence, before or after) the uncrashed scenario passes: the
    reference's commits counted, named by the phase each stands for."""
    runtime = run(document).runtime
    assert runtime is not None
    return [(phase, n, when) for phase, commit in sorted(REFERENCE_COMMITS.items())
            for n in range(1, runtime.coordinator.by_name.get(commit, 0) + 1)
            for when in ("before", "after")]


@pytest.mark.covers("CTX-8.2", "CTX-8.75")
def test_a_chunk_is_retried_with_the_roles_attempts_and_fails_only_on_the_last() -> None:
    retried = run(hooked(failures=1))
    assert chunk_requests(retried) == [("1", 1), ("2", 1), ("2", 2), ("3", 1)]
    # A retry is the same request again: its pre-request chain was decided for the chunk, not
    # for the attempt, so it is asked once per chunk.
    assert hook_calls(retried) == Counter({("compaction.pre_request", "pre"): 3,
                                           ("compaction.post_response", "post"): 3})
    assert endings(retried)[-1] == ("failed", "CONTEXT_WINDOW_EXCEEDED")
    failed = run(hooked(failures=2))
    assert chunk_requests(failed) == [("1", 1), ("2", 1), ("2", 2)]
    assert endings(failed)[-1] == ("failed", "COMPACTION_FAILED")


HOOKED_POINTS = [(failures, *point) for failures in (0, 1)
                 for point in points(hooked(failures))
                 if point[0] not in ("tool_started", "tool_settled")]
"""Tool outcomes lost at a crash are the crash matrix's concern (UNKNOWN_OUTCOME, Q44)."""


def tiered(points: list[tuple[int, str, int, str]]) -> list[Any]:
    """Every point: the first crash at each phase, before or after it, in the default
    tier; the other occurrences and the other Session (with or without a failing attempt) in
    the slow tier."""
    first: dict[tuple[str, str], tuple[int, str, int, str]] = {}
    for point in points:
        first.setdefault((point[1], point[3]), point)
    inner = set(first.values())
    return [pytest.param(*point, id=f"{point[0]}-{point[3]}-{point[1]}-{point[2]}",
                         marks=() if point in inner else pytest.mark.slow)
            for point in points]


@pytest.mark.covers("CTX-8.70", "CTX-9.43", "CTX-9.39", "CTX-10.6")
@pytest.mark.parametrize(("failures", "phase", "occurrence", "when"), tiered(HOOKED_POINTS))
def test_a_crash_at_any_commit_of_a_hooked_episode_asks_nothing_saved_again(
        failures: int, phase: str, occurrence: int, when: str) -> None:
    # The hooked example (with a failing attempt of chunk 2, or without) crashed at each of its
    # phases: only an answer in flight is asked again, once; a saved raw answer (or failure)
    # is never asked again; each hook chain is asked as often as without the crash, except the
    # one running at the crash, which is dropped (Q50); the Runs end the same.
    requests, hooks, ended = uncrashed(failures)
    crashed = run({**hooked(failures), "crash": {"phase": phase, "occurrence": occurrence,
                                                 "when": when}})
    assert [(r.commit, r.occurrence, r.when) for r in crashed.raw_trace().of(Restarted)] == [
        (REFERENCE_COMMITS[phase], occurrence, when)]
    model = crashed.ports.model
    assert isinstance(model, ScriptedModel)
    assert model.replays == (1 if (phase, when) in LOST_ANSWER else 0)
    assert sorted(set(chunk_requests(crashed))) == requests
    if (phase, when) in HOOK_DROPPED:
        assert hook_calls(crashed) <= hooks
    else:
        assert hook_calls(crashed) == hooks
    assert endings(crashed) == ended
