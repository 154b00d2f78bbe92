"""The kill matrix: every deliberately wrong runtime is caught by a conformance case — the one
written for its bug among them — and judging a mutant leaves the reference as it was.

The default tier judges each mutant against its catcher alone; the slow tier (``-m slow``)
judges each against every case, as ``ctxspec mutants`` does, running again only the cases that
call what the mutant replaces (the others take the reference's result)."""

import json

import pytest
from click.testing import CliRunner

from ctxspec.cli import main
from ctxspec.conformance.cases import CASES, by_id
from ctxspec.conformance.driver import ReferenceDriver
from ctxspec.conformance.harness import UNIVERSAL_FAILURE, CaseResult, run_case
from ctxspec.conformance.mutants import Mutant, Reach, all_mutants, judge, reach_of
from tests.worker_share import once_per_run, split_cases

MUTANTS = all_mutants()
CATCHER = {
    "HISTORY-ORPHAN-RESULT": "ROW-07",
    "OLDER-QUESTION-ONLY": "EX4-OLDER-RUN",
    "RECENT-BY-SUCCESS": "ROW-01",
    "FAKE-FINAL-ANSWER": "ROW-01",
    "FLOAT-THRESHOLD": "ROW-04-FLOOR",
    "STRICT-TRIGGER": "ROW-04-AT",
    "MARGIN-LEFT-OUT": "EX8-ROW6",
    "CJK-UNDERCOUNT": "S7-BYTES-CJK",
    "CONTEXT-LENGTH-RETRIED": "S7-PROVIDER-REFUSES",
    "COMPACTION-REQUEST-OVERFLOWS": "ROW-11",
    "USELESS-CHUNKS": "S8-CHUNK-FLOOR",
    "PROTECTED-INPUT-COMPACTED": "ROW-05",
    "SECOND-COMPACTION": "EX8-ROW2",
    "SNAPSHOT-NOT-INVALIDATED": "ROW-20",
    "SWITCH-IGNORES-COVERAGE": "S9-CAS-REBUILT",
    "CAS-RESUMMARISED": "S9-CAS-OVER",
    "EPISODE-MATERIAL-REREAD": "S9-CAS-TAKEOVER",
    "EXECUTOR-LOOPS-FORGOTTEN": "S11-LOOPS-SHARED-TAKEOVER",
    "LOOPS-PER-ROLE": "S11-LOOPS-SHARED",
    "COMMIT-FAILURE-FAIL-OPEN": "S10-COMMIT-REFUSED",
    "COMMIT-FAILURE-HIDDEN": "S10-COMMIT-REFUSED",
    "FIXED-ADDITION-UNCHECKED": "S7-HOOK-FIXED-TOO-BIG",
    "QUESTION-ANNOTATION-SUMMARISED": "S7-HOOK-FIXED-KEPT",
    "POST-DENY-DELIVERS-RAW": "S3-POST-CALL",
    "CONTEXT-SIDE-DROPPED": "S3-VIEW-INDEX",
    "EPISODE-IGNORES-STOP": "S11-DEADLINE-DURING-COMPACTION",
    "PAYLOAD-WINS": "EX3-WRITE-CONFLICT",
    "INVALID-DENY-ALLOWS": "EX3-DENY-CONFLICT",
    "MODEL-REASKED-AFTER-SAVE": "ROW-21",
    "FEEDBACK-TWICE": "ROW-23",
    "HOOK-RERUN-AFTER-CRASH": "CRASH-TOOLS-HOOK_DECIDED-2-AFTER",
    "POST-CALL-BYPASSED-AFTER-RAW": "CRASH-HOOK-POST-CALL-MODIFY-TOOL_SETTLED",
    "POST-RESPONSE-BYPASSED-AFTER-RAW":
        "CRASH-HOOK-POST-RESPONSE-MODIFY-EFFECTIVE_RESULT_COMMITTED",
    "CHUNK-POST-BYPASSED-AFTER-RAW": "CRASH-HOOK-COMPACTION-POST-MODIFY-CHUNK_ANSWER_SAVED",
    "PREVIEW-SENT-BARE": "S6-PREVIEW-MARKED-SENT",
    "NEVER-STARTED-UNKNOWN": "S11-STOP-BETWEEN-CALLS",
    "RESULT-READ-NOT-STORED": "S6-RESULT-READ",
    "DELEGATE-SKIPS-POST-CALL": "S3-DELEGATE-POST-MODIFY",
    "TOOL-EDIT-OVERWRITES": "S1-TOOL-EDIT-RAW-KEPT",
    "CHUNK-SENT-AS-PLANNED": "S8-CHUNK-REDACTION-SENT",
    "TAKEOVER-RECUTS-PREPARED": "S10-CUTOFF-KEPT-AFTER-TAKEOVER",
    "STOP-UNSEEN-AT-FREEZE": "S11-STOP-AT-FREEZE",
    "NO-ROOM-AS-COMPACTION-FAILED": "S8-PROMPTS-LEAVE-NO-ROOM",
    "ADJUSTMENT-UNTOLD": "S6-ARGS-ADJUSTED-SENT",
    "TEXT-EDIT-UNTOLD": "S6-TEXT-MODIFIED-SENT",
    "EPISODE-NOT-RESUMED": "ROW-09",
    "EXECUTOR-SEES-PLANNER": "ROW-03",
    "CROSS-SESSION-READ": "ROW-25",
    "AUDIT-WITHOUT-GRANT": "S11-AUDIT-NEEDS-GRANT",
    "CLAIMED-SUPPLEMENT-LOST": "ROW-13",
    "RETRY-TAKES-LATE-SUPPLEMENT": "S5-RETRY-FROZEN",
    "USAGE-REWRITES-ESTIMATE": "S7-USAGE-AUDITED",
    "USAGE-RESENDS": "S7-USAGE-HUGE",
    "USAGE-CALIBRATES": "S7-USAGE-HUGE",
    "FEEDBACK-BY-COMPLETION": "S2-COMPLETION-ORDER",
    "SESSION-INHERITS-HISTORY": "S10-NEW-SESSION",
    "WORKSPACE-AS-MEMORY": "S10-NO-IMPLICIT-MEMORY",
    "GUESSED-PREFERENCES": "S10-NO-IMPLICIT-MEMORY",
    "AUDIT-SEES-PREVIEW": "S6-AUDIT-FULL-BODY",
    "OUTER-CONTEXT-PATCH-DROPPED": "S1-OUTER-NODE-NO-CONTEXT",
    "HOOK-INPUT-WRITTEN-BACK": "S1-OUTER-EFFECTIVE-INPUT",
    "INNER-HOOKS-SKIPPED": "S1-INNER-REACT-RULES",
    "WORKFLOW-INPUTS-DELIVERED": "S2-WORKFLOW-INPUT-MAPPING",
    "FAILURE-CANCELS-TREE": "S11-NODE-FAILURE-ROUTED",
    "STOP-ROUTED-AS-FAILURE": "S11-ROOT-STOP-WHOLE-TREE",
    "ROOT-LIMITS-PER-NODE": "S11-ROOT-DEADLINE-WHOLE-TREE",
    "RESPONSE-DENY-IGNORED": "S2-RESPONSE-DENIED-CALLS",
    "EXECUTOR-ANSWER-RAW": "S3-EXECUTOR-ANSWER-EFFECTIVE",
    "EXECUTOR-ERROR-SWALLOWED": "S11-EXECUTOR-CONTEXT-ERROR",
    "RETRY-PAST-DEADLINE": "S8-DEADLINE-BETWEEN-ATTEMPTS",
    "FRAGMENT-KEPT-AFTER-RETRY": "ROW-12-RETRY",
    "STOP-LOSES-TO-OUTCOME": "S11-STOP-IN-FLIGHT-FINAL",
    "REQUEST-DENY-IGNORED": "S3-REQUEST-DENIED",
    "EXECUTOR-DEADLINE-RENEWED": "HM-TPRE-ALLOW-EXECUTOR-TIMED_OUT",
    "HISTORY-SERVES-RAW": "S1-HISTORY-EFFECTIVE",
    "ARGUMENTS-UNCHECKED": "S11-ARGUMENTS-SCHEMA",
    "PRE-CALL-ASKED-AFTER-STOP": "S11-STOP-IN-FLIGHT-CALLS",
    "CHUNK-SENT-AFTER-STOP": "S11-STOP-DURING-COMPACTION-HOOK",
    "TAKEOVER-REFREEZES": "S10-FROZEN-INPUTS-AFTER-TAKEOVER",
    "TAKEOVER-PROPOSES-EFFECTIVE": "CRASH-HOOK-PRE-CALL-MODIFY-HOOK_DECIDED",
    "SHARED-BASE-IS-PRIVATE": "S3-SHARED-OWN-REVISION",
    "EPISODE-AFTER-STOP": "S11-STOP-DURING-PREPARATION",
    "ORPHAN-AFTER-CUT": "ROW-20",
    "CALLS-AFTER-LOOP-END": "S10-TAKEOVER-BUDGET",
    "RETRY-AFTER-STOP": "S11-STOP-BEFORE-RETRY",
    "FAILED-ENDING-TWICE": "ROW-12",
    "PARTIAL-SUMMARY-KEPT": "S8-SUMMARY-RETRIED",
}
"""The case each mutant's bug was written against (the §12 row or example that states it)."""


UNIVERSAL = {"ORPHAN-AFTER-CUT": "U-PAIRED", "CALLS-AFTER-LOOP-END": "U-AFTER-END",
             "RETRY-AFTER-STOP": "U-AFTER-STOP", "FAILED-ENDING-TWICE": "U-ONE-ENDING",
             "PARTIAL-SUMMARY-KEPT": "U-FAILED-SUMMARY"}
"""Mutants whose catcher is a case about something else: there only a universal check
(conformance/universal.py) catches the bug, the case's own check holding."""


@pytest.mark.parametrize("mutant_id", sorted(UNIVERSAL))
def test_a_universal_mutant_is_caught_by_its_invariant_alone(mutant_id: str) -> None:
    mutant = next(m for m in MUTANTS if m.id == mutant_id)
    (result,) = judge(mutant, by_id([CATCHER[mutant_id]])).results
    assert result.status == "failed"
    assert result.detail.startswith(UNIVERSAL_FAILURE), result.detail  # its own check held
    assert set(result.universal.counts()) == {UNIVERSAL[mutant_id]}, result.detail


def test_there_are_at_least_twenty_mutants_each_with_its_catcher() -> None:
    assert len(MUTANTS) >= 20
    assert len({m.id for m in MUTANTS}) == len(MUTANTS)
    assert {m.id for m in MUTANTS} == set(CATCHER)


def test_no_mutant_patches_a_private_name() -> None:
    # Issue #34: a wrong runtime is a replaced or altered step or public method, so a refactor
    # of a step's inside does not break the mutant (nor a mutant keep a helper alive).
    private = [f"{m.id}: {getattr(p.owner, '__name__', p.owner)}.{p.attribute}"
               for m in MUTANTS for p in m.patches if p.attribute.startswith("_")]
    assert private == []


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: m.id)
def test_every_mutant_is_killed_by_the_case_written_for_its_bug(mutant: Mutant) -> None:
    # The inner loop: each mutant against its catcher alone (the whole kill matrix is slow).
    verdict = judge(mutant, by_id([CATCHER[mutant.id]]))
    assert verdict.killed_by == [CATCHER[mutant.id]], (verdict.killed_by, verdict.errored)


REACH_PARTS = 4
"""The reach pass in parts, so that under xdist both workers compute it (it is a few tens of
seconds of every case on the reference)."""


def _reach_part(part: int) -> str:
    reach = reach_of(split_cases(CASES, REACH_PARTS)[part], MUTANTS)
    return json.dumps({case_id: [result.status, result.detail, result.seconds,
                                 sorted(reach.touched[case_id])]
                       for case_id, result in reach.results.items()})


@pytest.fixture(scope="session")
def whole_reach(tmp_path_factory: pytest.TempPathFactory) -> Reach:
    """Every case once on the reference, noting the mutants that could change it: once per
    test run, its parts shared by the workers (tests/worker_share.py)."""
    saved = {case_id: entry
             for text in once_per_run(tmp_path_factory, "whole-reach", REACH_PARTS, _reach_part)
             for case_id, entry in json.loads(text).items()}
    cases = {case.id: case for case in CASES}
    return Reach({i: CaseResult(cases[i], status, detail, seconds)
                  for i, (status, detail, seconds, _) in saved.items()},
                 {i: frozenset(touched) for i, (*_, touched) in saved.items()})


@pytest.mark.slow
@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: m.id)
def test_the_whole_kill_matrix_catches_every_mutant_with_its_catcher(
        mutant: Mutant, whole_reach: Reach) -> None:
    # Cases the mutant cannot change take the reference's result (issue #20).
    verdict = judge(mutant, CASES, whole_reach)
    assert CATCHER[mutant.id] in verdict.killed_by, (verdict.killed_by, verdict.errored)
    # What only the whole matrix shows: under no mutant does any case error. An error is no
    # kill but a fault of the suite (a case's check that raises on a trace it did not expect)
    # or of the mutant (a replacement that no longer fits what it replaces).
    errors = [(r.case.id, r.detail) for r in verdict.results if r.status == "error"]
    assert errors == [], f"{mutant.id}: {len(errors)} cases errored, first {errors[:1]}"


@pytest.mark.slow
def test_the_reach_pass_leaves_the_reference_run_as_it_is(whole_reach: Reach) -> None:
    # The pass asks wrong versions beside the originals (a reads_only one on the runtime's own
    # objects): had one of them changed anything, some case would no longer pass there.
    failing = {case_id: result.detail for case_id, result in whole_reach.results.items()
               if result.status != "passed"}
    assert failing == {}, failing


def test_a_case_that_never_calls_the_replaced_code_is_judged_as_on_the_reference() -> None:
    # The kill matrix's shortcut gives the verdicts a full run gives: here on a few mutants
    # (each replacing code that some of the cases never call) and the cases that catch them,
    # plus cases of other areas and two crash points.
    ids = {"CJK-UNDERCOUNT", "OLDER-QUESTION-ONLY", "FAKE-FINAL-ANSWER", "CROSS-SESSION-READ",
           "MODEL-REASKED-AFTER-SAVE", "CONTEXT-LENGTH-RETRIED", "STRICT-TRIGGER",
           "FLOAT-THRESHOLD", "PREVIEW-SENT-BARE", "LOOPS-PER-ROLE", "STOP-LOSES-TO-OUTCOME",
           "EXECUTOR-ANSWER-RAW"}
    mutants = [m for m in MUTANTS if m.id in ids]
    cases = by_id(sorted({CATCHER[i] for i in ids} | {
        "ROW-02", "ROW-05", "S7-BYTES-CJK", "ROW-25", "EX4-OLDER-RUN", "ROW-04-BELOW",
        "CRASH-TOOLS-RAW_ANSWER_SAVED-1-AFTER", "CRASH-TOOLS-REQUEST_FROZEN-1-BEFORE"}))
    reach = reach_of(cases, mutants)
    assert all(r.status == "passed" for r in reach.results.values())
    skipped = 0
    for mutant in mutants:
        full, short = judge(mutant, cases), judge(mutant, cases, reach)
        assert (short.killed_by, short.errored) == (full.killed_by, full.errored), mutant.id
        skipped += sum(mutant.id not in reach.touched[c.id] for c in cases)
    assert skipped > 0  # the shortcut was taken somewhere, so the comparison means something
    # A pure-core function whose wrong version answers as the original did leaves the case to
    # the reference: I > T and I ≥ T differ only at I = T, which ROW-04-AT alone reaches.
    assert "STRICT-TRIGGER" in reach.touched["ROW-04-AT"]
    assert "STRICT-TRIGGER" not in reach.touched["ROW-02"] | reach.touched["ROW-04-BELOW"]
    # So does a shell method that only reads: every Run counts its Loops, but a role's own
    # count and the shared one differ only once an Executor has run.
    assert "LOOPS-PER-ROLE" in reach.touched["S11-LOOPS-SHARED"]
    assert "LOOPS-PER-ROLE" not in reach.touched["ROW-02"] | reach.touched["ROW-05"]


def test_the_reach_pass_sharing_runs_marks_no_case_with_fewer_mutants_than_its_own_run() -> None:
    # The reach pass shares runs as a suite run does (a crash group's run-up once, a kept
    # baseline once), so a case reads traces other cases' runs computed. Each case must still be
    # marked with every mutant its own run, from scratch, reaches; more is allowed (only time).
    ids = {"MODEL-REASKED-AFTER-SAVE", "HOOK-RERUN-AFTER-CRASH", "POST-CALL-BYPASSED-AFTER-RAW",
           "TAKEOVER-PROPOSES-EFFECTIVE", "STRICT-TRIGGER", "FAKE-FINAL-ANSWER"}
    mutants = [m for m in MUTANTS if m.id in ids]
    cases = by_id(["CRASH-TOOLS-SESSION_OPENED-1-BEFORE", "CRASH-TOOLS-REQUEST_FROZEN-1-BEFORE",
                   "CRASH-TOOLS-RAW_ANSWER_SAVED-1-AFTER", "CRASH-TOOLS-HOOK_STARTED-2-AFTER",
                   "CRASH-TOOLS-TOOL_SETTLED-2-BEFORE", "CRASH-TOOLS-RUN_FINALISED-1-AFTER",
                   "ROW-02", "ROW-04-AT", "ROW-01"])
    shared = reach_of(cases, mutants)
    for case in cases:
        alone = reach_of([case], mutants)  # one case: nothing shared, every run from scratch
        assert shared.touched[case.id] >= alone.touched[case.id], (
            case.id, sorted(alone.touched[case.id] - shared.touched[case.id]))
        assert (shared.results[case.id].status, shared.results[case.id].detail) == (
            alone.results[case.id].status, alone.results[case.id].detail), case.id


def test_judging_a_mutant_leaves_the_reference_unchanged() -> None:
    [row1] = by_id(["ROW-01"])
    [fake] = [m for m in MUTANTS if m.id == "FAKE-FINAL-ANSWER"]
    assert judge(fake, [row1]).killed_by == ["ROW-01"]
    assert run_case(row1, ReferenceDriver).status == "passed"


def test_the_cli_judges_mutants_against_the_chosen_cases() -> None:
    outcome = CliRunner().invoke(main, ["mutants", "--json", "--mutant", "STRICT-TRIGGER",
                                        "--mutant", "CROSS-SESSION-READ", "--case", "ROW-04-AT",
                                        "--case", "ROW-25", "--case", "ROW-02"])
    assert outcome.exit_code == 0, outcome.output
    report = json.loads(outcome.output)
    assert report["summary"] == {"total": 2, "killed": 2}
    rows = {row["id"]: row for row in report["mutants"]}
    assert set(rows["STRICT-TRIGGER"]) == {"id", "description", "killed_by", "errored"}
    assert rows["STRICT-TRIGGER"]["killed_by"] == ["ROW-04-AT"]
    assert rows["CROSS-SESSION-READ"]["killed_by"] == ["ROW-25"]
    survived = CliRunner().invoke(main, ["mutants", "--mutant", "STRICT-TRIGGER",
                                         "--case", "ROW-02"])
    assert survived.exit_code == 1
    assert "STRICT-TRIGGER" in survived.output and "SURVIVED" in survived.output
    assert "0 of 1 mutants killed" in survived.output


@pytest.mark.slow
def test_the_cli_prints_the_kill_matrix() -> None:
    outcome = CliRunner().invoke(main, ["mutants", "--json", "--mutant", "STRICT-TRIGGER",
                                        "--mutant", "CROSS-SESSION-READ"])
    assert outcome.exit_code == 0, outcome.output
    report = json.loads(outcome.output)
    assert report["summary"] == {"total": 2, "killed": 2}
    rows = {row["id"]: row for row in report["mutants"]}
    assert set(rows["STRICT-TRIGGER"]) == {"id", "description", "killed_by", "errored"}
    assert "ROW-04-AT" in rows["STRICT-TRIGGER"]["killed_by"]
    assert rows["CROSS-SESSION-READ"]["killed_by"] == ["ROW-25"]


def test_the_cli_refuses_an_unknown_mutant() -> None:
    outcome = CliRunner().invoke(main, ["mutants", "--mutant", "NOPE"])
    assert outcome.exit_code == 2
    assert "no mutant NOPE" in outcome.output
    outcome = CliRunner().invoke(main, ["mutants", "--case", "ROW-99"])
    assert outcome.exit_code == 2
    assert "no conformance case ROW-99" in outcome.output
