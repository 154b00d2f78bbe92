"""Runs the driver-level model (models/driver_machine.py) on the reference driver with the
Hypothesis profile (tests/conftest.py) — its examples divided among the focuses — prints what
it reached (models/driver_coverage.py) and, under the ci and thorough profiles, fails on a
row it never reached; shows it is not vacuous: realistic wrong drivers — one that loses a
waiting supplement, one whose trace reports a tool run twice, one that trims the question —
make it fail, and the scenario it saves parses, replays and fails the same way on the same
driver only."""

import json
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import Phase, settings

from ctxspec.cli import main
from ctxspec.conformance.case import endings, requests
from ctxspec.conformance.driver import ReferenceDriver
from ctxspec.conformance.scenario import parse_scenario
from ctxspec.models.driver_coverage import ROWS
from ctxspec.models.driver_machine import (
    HEALTH,
    STEPS,
    DriverViolation,
    counterexample_path,
    machine,
    replay_checked,
)
from ctxspec.models.driver_scripts import CRASH_PAIRS, FOCUSES, crash_focus
from tests.model_runs import (
    COVERAGE_ASSERTED,
    PROFILE,
    expect_every_row,
    model_settings,
    run_machine,
)

DEFECTS = Path(__file__).parent / "data" / "driver_machine"
"""Sessions that once failed on the reference, kept as regressions."""


def _target_missing_at_call(document: Mapping[str, Any], problem: str) -> bool:
    """Not a defect (issue #23 finding 2, decided in #18): a context_patch target that does
    not exist at that hook call (first_assistant before any answer, the question in an
    Executor's context) is a scenario error naming the target. The generator cannot know in
    advance what a call will find, so such an example is discarded as an invalid scenario."""
    return "does not exist at this" in problem and "ScenarioError" in problem


KNOWN_OPEN = (_target_missing_at_call,)
"""Examples that hit these are discarded (and counted in the table), never passed: a scenario
the generator could not know was invalid. A known open defect of the reference would be listed
here until its fix lands; issue #30's five are fixed and kept as regressions below."""


PER_FOCUS_CAP = 80
"""A driver example plays a whole Session of Runs on a live runtime (a hundred times a pure
model's step), so the thorough profile's examples are capped per focus to keep the run near
ten minutes (docs/models.md)."""
PAIR_STEPS = 3
"""Runs per example of a crash point × moment focus: the crash comes in the first Run or two
(its setup aims the first Run at the phase), and a Run or two after the restart show the
takeover went on; a longer Session adds nothing about that crash."""
PER_PAIR_CAP = 6


@pytest.mark.first  # the longest hunt under the ci profile
def test_the_model_holds_on_the_reference_and_reaches_every_row() -> None:
    examples = settings().max_examples
    per_focus = min(PER_FOCUS_CAP, max(1, examples // (len(FOCUSES) + 3)))
    per_pair = min(PER_PAIR_CAP, max(1, examples // 70))
    # The dev profile (the inner loop, no row demanded) crashes at a sample of the pairs.
    pairs = CRASH_PAIRS if COVERAGE_ASSERTED else CRASH_PAIRS[::7]
    reached: Counter[str] = Counter()
    # Under ci the crash point × moment focuses stand in for the random crashes focus, which
    # only the thorough run (and dev's few examples) adds: CI keeps its time.
    focuses = [f for f in FOCUSES if not (PROFILE == "ci" and f == "crashes")]
    runs = [(focus, STEPS, per_focus) for focus in focuses]
    runs += [(crash_focus(phase, when), PAIR_STEPS, per_pair) for phase, when in pairs]
    for focus, steps, count in runs:
        focused = machine(ReferenceDriver, tolerated=KNOWN_OPEN, focus=focus)
        run_machine(focused, settings=model_settings(steps, count,
                                                     suppress_health_check=HEALTH))
        reached.update(focused.reached)
    expect_every_row(reached, ROWS, "driver model")


HUNT = settings(max_examples=300, stateful_step_count=STEPS, suppress_health_check=HEALTH,
                database=None, derandomize=True, report_multiple_bugs=False,
                phases=[Phase.generate])
"""For the wrong drivers: deterministic, with room to find the bug (it takes far fewer). The
count is fixed here, not by the profile: a hunt must find its bug under every profile (the dev
profile's few examples would miss it), and it stops at the first failure. The shrink phase is
left out to keep the suite fast (shrinking a stateful example here can take
minutes); the first failing example is saved instead."""


class LosesWaitingSupplements(ReferenceDriver):
    """Drops a supplement that arrives while no Run is active, instead of keeping it for the
    next question (§5)."""

    def supplement(self, text: str) -> None:
        if self.runtime is not None and self.runtime.active_run is None:
            return
        super().supplement(text)


class ReportsToolsTwice(ReferenceDriver):
    """Its trace reports every tool execution twice (a retried event publication)."""

    def trace(self) -> list[dict[str, Any]]:
        events = []
        for event in super().trace():
            events.append(event)
            if event["kind"] == "tool_executed":
                events.append(event)
        return events


class TrimsQuestions(ReferenceDriver):
    """Normalises a question by stripping its whitespace: the raw text is no longer verbatim."""

    def ask(self, text: str) -> None:
        super().ask(text.strip())


def hunt(driver: type[ReferenceDriver]) -> str:
    """Run the machine on the driver; the violation it reports."""
    hunted = machine(driver)
    with pytest.raises(DriverViolation) as caught:
        run_machine(hunted, settings=HUNT)
    return str(caught.value)


@pytest.mark.slow  # a long hunt
def test_a_lost_waiting_supplement_fails_the_protected_inputs(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch
                                                              ) -> None:
    monkeypatch.setenv("CTXSPEC_COUNTEREXAMPLES", str(tmp_path))
    # Losing an input shows as a cutoff beyond the inputs the runtime kept, or as a protected
    # input missing from a request, whichever the Session reaches first.
    message = hunt(LosesWaitingSupplements)
    assert "input_cutoff" in message or "protected inputs" in message, message


@pytest.mark.slow  # a long hunt
def test_a_tool_reported_twice_fails_the_fetch_once_check(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTXSPEC_COUNTEREXAMPLES", str(tmp_path))
    assert "executed more than once" in hunt(ReportsToolsTwice)


def test_a_failure_saves_a_scenario_that_reproduces_it(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTXSPEC_COUNTEREXAMPLES", str(tmp_path))
    message = hunt(TrimsQuestions)
    saved = counterexample_path(TrimsQuestions())
    assert saved.parent == tmp_path and str(saved) in message
    assert "which is no input as sent" in message
    document = json.loads(saved.read_text("utf-8"))
    scenario = parse_scenario(document)
    # The shrunk Session asks a question whose text ends in whitespace, and a request shows it.
    question = next(step.ask for step in scenario.steps if step.ask is not None)
    assert question != question.strip()
    # The same file fails the same way on the same driver, and passes on the reference: the
    # violation is the driver's, not the scenario's.
    with pytest.raises(DriverViolation, match="which is no input as sent"):
        replay_checked(document, TrimsQuestions)
    trace = replay_checked(document, ReferenceDriver)
    assert any(m["text"] == question for e in trace if e["kind"] == "model_request"
               for m in e["view"]["messages"])
    shown = CliRunner().invoke(main, ["replay", str(saved)])
    assert shown.exit_code == 0, shown.output


def test_the_reference_defects_the_machine_found_stay_fixed() -> None:
    # Two Sessions the machine shrank from failures of the reference, kept as regressions.
    # A protected question that leaves compaction no room for one labelled character: the
    # episode cannot run, so the Run fails — a budget configuration that cannot compact (Q32,
    # Q67) — instead of raising.
    small = json.loads((DEFECTS / "chunk-capacity-raises.json").read_text("utf-8"))
    trace = replay_checked(small, ReferenceDriver)
    assert endings(trace) == [(1, "failed", "BUDGET_CONFIGURATION_INVALID")]
    # The provider refuses the request, and the process dies before APP-FINALIZE: the takeover
    # ends the Run with the same code and never sends the over-window request again (§7).
    refused = json.loads((DEFECTS / "refusal-asked-again.json").read_text("utf-8"))
    trace = replay_checked(refused, ReferenceDriver)
    assert endings(trace) == [(1, "failed", "CONTEXT_LENGTH_EXCEEDED")]
    assert [(r["purpose"], r["attempt"]) for r in requests(trace)] == [("business", 1)]
    # An Executor's 3900-character result in W = 1236, O = 100, S = 20: B = 1116, trigger 892,
    # T = C = min(8192, 279, P = 100) = 100, so a useful chunk carries 100 (Q120). The chunk
    # capacity is 1236 − 200 − 20 − 663 (prompt) − 138 (framing) = 215 and the result's widest
    # label 212 (its call id and range included): three characters a chunk, which the
    # reference once folded in 1162 summary calls. Now none: the episode is refused, and an
    # Executor's COMPACTION_FAILED ends the whole AgentInvocation (Q77), the message naming
    # the floor.
    useless = json.loads((DEFECTS / "executor-useless-chunks.json").read_text("utf-8"))
    trace = replay_checked(useless, ReferenceDriver)
    assert requests(trace, "compaction") == []
    assert endings(trace) == [(1, "failed", "COMPACTION_FAILED")]
    ended = next(e for e in trace if e["kind"] == "run_ended")
    assert "a useful chunk carries at least 100" in ended["message"]


def test_an_identifier_a_chunk_cut_apart_is_masked_in_the_twin_comparison() -> None:
    # A false alarm of the judge (a thorough run after issue #30's fixes): a chunk's character
    # range ended inside a call's id, which the takeover's identities made differ from the
    # twin's; the cut halves are masked like a whole identifier now.
    for name in ("twin-cut-identifier.json", "twin-cut-identifier-2.json"):
        replay_checked(json.loads((DEFECTS / name).read_text("utf-8")), ReferenceDriver)


def test_the_issue_30_defects_the_widened_model_found_stay_fixed() -> None:
    # Found by the widened model on the reference before issue #30's fixes: a Planner read a
    # delegation's result that no tool.post_call chain had seen (§3, §10); a tool.post_call
    # edit overwrote its record, listing no change (§1); a shared item on its chain's base was
    # checked against the private revision (§3); a stop during the pre-request chain still
    # planned an episode (§11); a takeover during a compaction took the business request's
    # input cutoff afresh, showing a supplement that arrived after preparation (§5). All five
    # replay clean now.
    for name in ("issue30-1-delegate-post-call.json", "issue30-2-post-call-overwrite.json",
                 "issue30-3-shared-revision.json", "issue30-4-episode-after-stop.json",
                 "issue30-5-takeover-widens-cutoff.json"):
        replay_checked(json.loads((DEFECTS / name).read_text("utf-8")), ReferenceDriver)
