"""The hook matrix (conformance/matrix.py) and the table of the design's hook rules it is
generated from (conformance/hook_rules.py): every kind of call × write × scope × hook point ×
decision is either a point of the matrix or set aside with its reason; every point's
expectation comes from its rule row; each case carries its coordinate."""

from itertools import product

from ctxspec.conformance.cases import CASES, by_id
from ctxspec.conformance.hook_rules import (
    CALLS,
    DECISIONS,
    NOT_APPLICABLE,
    POINTS,
    RULE,
    RULES,
    SCOPES,
    SHARED_WRITES,
    WRITES,
)
from ctxspec.conformance.matrix import DIMENSIONS, HOOK_MATRIX, ROLES, TABLE, subject_write


def test_the_rule_table_has_one_row_per_point_and_decision_each_citing_the_design() -> None:
    assert sorted((r.point, r.decision) for r in RULES) == sorted(product(POINTS, DECISIONS))
    for rule in RULES:
        assert rule.cites.startswith("§") and "\"" in rule.cites, rule
        assert rule.write in WRITES


def test_every_call_write_scope_point_and_decision_is_a_point_or_set_aside() -> None:
    # Each (call, scope, point, decision) is a root-role point of the matrix or a combination
    # the rules set aside with a reason, never both; the point's write is the one its rule
    # row gives (a shared item writes the shared field, so the subject is appended), so each
    # (call, write, scope, point, decision) either is that point's write or is not what that
    # decision writes.
    root = {(p.call, p.scope, p.point, p.decision): p for p in TABLE
            if p.role == "root" and p.ending in ("succeeded", "failed")}
    for call, write, scope, point, decision in product(CALLS, WRITES, SCOPES, POINTS,
                                                       DECISIONS):
        key = (call, scope, point, decision)
        aside = (point, decision, scope) in NOT_APPLICABLE
        assert (key in root) != aside, key
        if key in root and write == subject_write(root[key]):
            expected = RULE[(point, decision)].write if scope == "private" or \
                decision == "deny" else "append"
            assert write == expected, key
    for call in CALLS:  # every way a record is written is reached for every kind of call
        assert {subject_write(p) for p in TABLE if p.call == call} == set(WRITES)


def test_a_shared_field_is_pinned_wherever_the_design_says_what_its_patch_does() -> None:
    shared = {(p.point, p.decision) for p in TABLE if p.scope == "shared"}
    assert shared == {(point, decision) for point, decision in
                      product(POINTS, ("modify", "deny")) if SHARED_WRITES[point] is not None}
    for reason in NOT_APPLICABLE.values():
        assert reason


def test_the_endings_follow_the_rules() -> None:
    # §3, Q75, Q77: a denied model call fails the root's Run but only its delegation for an
    # Executor; a denied compaction call fails the whole invocation; a denied tool call is
    # feedback; an allow, a modify and a failed handler never end anything.
    ending = {(p.point, p.decision, p.role): p.ending for p in TABLE
              if p.ending in ("succeeded", "failed") and p.call == "tool"
              and p.scope == "private"}
    assert ending[("model.post_response", "deny", "root")] == "failed"
    assert ending[("model.post_response", "deny", "executor")] == "succeeded"
    assert ending[("compaction.pre_request", "deny", "executor")] == "failed"
    assert ending[("tool.post_call", "deny", "root")] == "succeeded"
    assert {e for (_, d, _), e in ending.items() if d != "deny"} == {"succeeded"}
    assert sorted(ending) == sorted(product(POINTS, DECISIONS, ROLES))


def test_a_delegation_and_a_read_take_the_same_post_call_chain_as_a_tool() -> None:
    # §3, §10: the post-call deny of a delegate call withholds the Executor's answer; the
    # expectation reads the rule row (a runtime mark) whatever the kind of call.
    for call in CALLS:
        [point] = [p for p in TABLE if (p.call, p.point, p.decision, p.scope, p.role) ==
                   (call, "tool.post_call", "deny", "private", "root")]
        assert subject_write(point) == "runtime_mark" and point.ending == "succeeded"
    assert by_id(["HM-TPOST-DENY-ROOT-SUCCEEDED-DELEGATE"])


def test_every_ending_is_reached_in_both_roles() -> None:
    for role in ROLES:
        assert {p.ending for p in TABLE if p.role == role} == set(DIMENSIONS["ending"])
    stopping = [(p.point, p.role) for p in TABLE if p.ending in ("stopped", "timed_out")]
    assert sorted(set(stopping)) == sorted(product(POINTS, ROLES))


def test_each_case_carries_its_coordinate_and_is_in_the_suite() -> None:
    ids = {case.id for case in CASES}
    assert len({case.id for case in HOOK_MATRIX}) == len(TABLE)
    for case, point in zip(HOOK_MATRIX, TABLE, strict=True):
        assert case.matrix == point.coordinate()
        assert set(case.matrix) == set(DIMENSIONS)
        assert case.id in ids and case.requirements
