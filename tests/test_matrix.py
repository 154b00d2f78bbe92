"""The hook matrix's table (conformance/matrix.py): one table covers every hook point ×
decision × role, each with the ending the design's rules give it, and every point × role with
an allowing hook while the Run stops or times out; each case carries its coordinate."""

from itertools import product

from ctxspec.conformance.cases import CASES
from ctxspec.conformance.matrix import DECISIONS, DIMENSIONS, HOOK_MATRIX, POINTS, ROLES, TABLE


def test_every_point_decision_and_role_is_in_the_table_once() -> None:
    decided = [(p.point, p.decision, p.role) for p in TABLE
               if p.ending in ("succeeded", "failed")]
    assert sorted(decided) == sorted(product(POINTS, DECISIONS, ROLES))


def test_every_ending_is_reached_in_both_roles() -> None:
    for role in ROLES:
        assert {p.ending for p in TABLE if p.role == role} == set(DIMENSIONS["ending"])
    stopping = [(p.point, p.role) for p in TABLE if p.ending in ("stopped", "timed_out")]
    assert sorted(set(stopping)) == sorted(product(POINTS, ROLES))


def test_the_endings_follow_the_deny_rules() -> None:
    # §3, Q75, Q77: a denied model call fails the root's Run but only its delegation for an
    # Executor; a denied compaction call fails the whole invocation; a denied tool call is
    # feedback.
    ending = {(p.point, p.decision, p.role): p.ending for p in TABLE
              if p.ending in ("succeeded", "failed")}
    assert ending[("model.post_response", "deny", "root")] == "failed"
    assert ending[("model.post_response", "deny", "executor")] == "succeeded"
    assert ending[("compaction.pre_request", "deny", "executor")] == "failed"
    assert ending[("tool.post_call", "deny", "root")] == "succeeded"
    assert {e for (_, d, _), e in ending.items() if d != "deny"} == {"succeeded"}


def test_each_case_carries_its_coordinate_and_is_in_the_suite() -> None:
    ids = {case.id for case in CASES}
    assert len({case.id for case in HOOK_MATRIX}) == len(TABLE) == 60
    for case, point in zip(HOOK_MATRIX, TABLE, strict=True):
        assert case.matrix == point.coordinate()
        assert set(case.matrix) == set(DIMENSIONS)
        assert case.id in ids and case.requirements
