"""The hook matrix (issues #22, #30): the rules of §1, §2, §3, §8, §10 and §11 that apply at
several points, pinned at every point from one table of the design's rules
(``conformance/hook_rules.py``) rather than case by case, and never from the reference's
branches.

Its dimensions: every hook point that can deny or modify (§3's table: the model request and
response, a tool call's arguments and result; §8: a compaction call's request and response)
× the hook's decision (allow, modify — an allow with a valid patch —, deny, fail — the handler
fails) × the kind of call the actor makes (a tool, a Planner's ``delegate``, the runtime's
``result.read``) × where the item's patch lands (the actor's private context, or a Run-level
shared field) × the role the hook acts in (the root role, or an Executor the Planner delegated
to) × how the Run ends. The ending follows from the rule row; the rows that stop the Run or let
its deadline pass while the actor's tool runs, with the point's hook allowing, are the only
ones that set it (§3: an allow never skips the stop or the deadline).

Every expectation below (``_ending``, ``_tools``, ``_actor_requests``, ``_compacts`` and the
checks) reads the point's :class:`~ctxspec.conformance.hook_rules.Rule` — its write, whether the
guarded action runs, what becomes of the actor — and the kind of call's row; each case carries
its coordinate, which ``ctxspec trace --matrix CTX-…`` shows per requirement. The Sessions are
in ``conformance/matrix_sessions.py``.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from itertools import product
from typing import Any

from ctxspec.conformance.case import (
    COMPACTING,
    Case,
    Trace,
    endings,
    equal,
    expect,
    of,
    request_text,
    requests,
    result_facts,
)
from ctxspec.conformance.hook_rules import (
    CALL,
    CALLS,
    DECISIONS,
    POINTS,
    RULE,
    SCOPES,
    SHARED_WRITES,
    Rule,
    applicable,
)
from ctxspec.conformance.matrix_sessions import (
    BIG,
    BODY,
    DECISION,
    PRE_CALL,
    RAW,
    SHARED_NEW,
    SHARED_OLD,
    item,
    ordinal,
    scenario,
)

ROLES = ("root", "executor")
ENDINGS = ("succeeded", "failed", "stopped", "timed_out")
DIMENSIONS: Mapping[str, tuple[str, ...]] = {"point": POINTS, "decision": DECISIONS,
                                             "role": ROLES, "ending": ENDINGS, "call": CALLS,
                                             "scope": SCOPES}
"""The matrix's dimensions, in the order a coordinate lists them."""

SHORT = {"model.pre_request": "MPRE", "model.post_response": "MPOST", "tool.pre_call": "TPRE",
         "tool.post_call": "TPOST", "compaction.pre_request": "CPRE",
         "compaction.post_response": "CPOST"}


@dataclass(frozen=True)
class Point:
    """One coordinate of the matrix."""

    point: str
    decision: str
    role: str
    ending: str
    call: str = "tool"
    scope: str = "private"

    @property
    def id(self) -> str:
        suffix = ("" if self.call == "tool" else f"-{self.call.upper().replace('_', '')}") + \
            ("" if self.scope == "private" else "-SHARED")
        return (f"HM-{SHORT[self.point]}-{self.decision.upper()}-{self.role.upper()}-"
                f"{self.ending.upper()}{suffix}")

    @property
    def rule(self) -> Rule:
        return RULE[(self.point, self.decision)]

    def coordinate(self) -> dict[str, str]:
        return {"point": self.point, "decision": self.decision, "role": self.role,
                "ending": self.ending, "call": self.call, "scope": self.scope}


def _ending(rule: Rule, role: str) -> str:
    """§3, §11, Q75, Q77: a role with no answer fails — the root's Run, or only an Executor's
    delegation (its error is the Planner's result and the Planner goes on); a failed
    compaction ends the whole invocation in either role."""
    if rule.actor == "invocation_fails" or (rule.actor == "fails" and role == "root"):
        return "failed"
    return "succeeded"


TABLE: tuple[Point, ...] = (
    *(Point(point, decision, "root", _ending(RULE[(point, decision)], "root"), call, scope)
      for call, point, decision, scope in product(CALLS, POINTS, DECISIONS, SCOPES)
      if applicable(point, decision, scope)),
    *(Point(point, decision, "executor", _ending(RULE[(point, decision)], "executor"))
      for point, decision in product(POINTS, DECISIONS)),
    *(Point(point, "allow", role, ending)
      for point, role, ending in product(POINTS, ROLES, ("stopped", "timed_out"))),
)
"""The matrix's points: every kind of call × point × decision × scope the rules apply to, in
the root role; every point × decision for an Executor's tool; and every point × role with an
allowing hook while the Run stops or times out."""


# --- the Session ------------------------------------------------------------------------------


def _scenario(point: Point) -> dict[str, Any]:
    document = scenario(point.call, point.role, shared=point.scope == "shared",
                        compacting=_compaction_point(point))
    subject = CALL[point.call].subject
    document["hooks"] = [{"point": point.point,
                          "ordinal": ordinal(point.point, point.decision, point.call,
                                             point.role, subject),
                          "items": [item(point.point, point.decision, point.call,
                                         point.scope)]}]
    if point.ending == "stopped":  # the stop arrives while t runs
        document["triggers"] = [{"on": {"tool": "t", "ordinal": 1}, "do": {"stop": True}}]
    if point.ending == "timed_out":  # one tick per model call and tool run: t spends the last
        document["agent"]["run_deadline"] = 2 if point.role == "root" else 3
    return document


# --- the expectations, from the rule row --------------------------------------------------------


def _subject_runs(point: Point) -> bool:
    """The subject call runs unless the actor's model call is denied (no answer proposes it)
    or its own pre-call chain denies it (the rule's ``runs``)."""
    if point.point.startswith("model.") and point.decision == "deny":
        return False
    return point.point != "tool.pre_call" or point.rule.runs


def subject_write(point: Point) -> str:
    """How the subject's own record is written: a shared-scope edit writes the shared field,
    never the subject, so the subject is appended as produced (a deny still marks it)."""
    if point.scope == "shared" and point.decision != "deny":
        return "append"
    return point.rule.write


def _tools(point: Point) -> list[tuple[str, dict[str, Any]]]:
    """The tools executed, with their effective arguments: the Session's tools before the
    subject; the subject, with the pre-call modify's arguments, when it runs. A delegation is
    an Executor execution, not a tool, and the Executor of a ``delegate`` call runs none."""
    before: list[tuple[str, dict[str, Any]]] = \
        [("dump", {})] if point.call == "result_read" else []
    if point.call == "delegate" or not _subject_runs(point):
        return before
    proposed = DECISION["tool" if point.role == "executor" else point.call]["arguments"]
    arguments: dict[str, Any] = dict(proposed) if isinstance(proposed, dict) else {}
    if point.point == "tool.pre_call" and subject_write(point) == "hook_change":
        name, value = PRE_CALL["tool" if point.role == "executor" else point.call]
        arguments[name] = value
    name = "t" if point.role == "executor" else CALL[point.call].tool
    return [*before, (name, arguments)]


def _actor_requests(point: Point) -> int:
    """The actor's business requests: the subject's k-th and those before it when a denied
    request is never sent (k − 1), a denied answer ends it (k), or the Run stops or times out
    while the subject runs (k); all but the last, compacting one when the compaction fails;
    else all of them."""
    kind = CALL["tool" if point.role == "executor" else point.call]
    k = 1 if point.role == "executor" else kind.subject
    if point.ending in ("stopped", "timed_out"):
        return k
    if point.decision == "deny" and point.point == "model.pre_request":
        return k - 1
    if point.decision == "deny" and point.point == "model.post_response":
        return k
    if point.rule.actor == "invocation_fails":
        return kind.business_requests - 1
    return kind.business_requests


def _compaction_point(point: Point) -> bool:
    """A compaction call's point: only its Session compacts (Q393)."""
    return point.point.startswith("compaction.")


def _reaches(point: Point) -> bool:
    """The subject's result reaches the actor's next request as produced: not when the Run
    stopped or timed out while it ran, the subject never ran, or a post-call hook replaced or
    denied its result."""
    if point.ending in ("stopped", "timed_out") or not _subject_runs(point):
        return False
    return not (point.point == "tool.post_call" and subject_write(point) != "append")


def _produced(point: Point) -> str:
    """The start of the subject's result as produced: t's or the Executor's answer, or the
    characters the read spans — from 4000, or from where a pre-call modify moved it."""
    if point.role == "executor" or point.call != "result_read":
        return BIG[:20]
    start = 4000
    if point.point == "tool.pre_call" and subject_write(point) == "hook_change":
        start = int(PRE_CALL["result_read"][1])
    return BODY[start:start + 20]


def _compacts(point: Point) -> bool:
    """At a compaction point, the actor's last request compacts when the subject's result
    reaches it as produced, and a compaction request is sent unless its own pre-request chain
    denied it (§3)."""
    return _reaches(point) and not (point.point == "compaction.pre_request"
                                    and not point.rule.runs)


def _run_ending(point: Point) -> tuple[str, str | None]:
    if point.ending != "failed":
        return point.ending, None
    return "failed", "COMPACTION_FAILED" if point.rule.actor == "invocation_fails" \
        else "HOOK_DENIED"


def _check_shape(point: Point, trace: Trace) -> list[dict[str, Any]]:
    equal(endings(trace), [(1, *_run_ending(point))], "Run endings")
    # §2: the final answer is delivered with the Run's end, only when it succeeds: the
    # actor's "final words" (the root role), or the Planner's "planner done".
    final = ("final words" if point.role == "root" else "planner done") \
        if point.ending == "succeeded" else None
    equal([e.get("final_answer") for e in of(trace, "run_ended")], [final],
          "the final answer delivered to the user")
    equal([(e["name"], e["effective_arguments"]) for e in of(trace, "tool_executed")],
          _tools(point), "tools executed (name, effective arguments)")
    actor = [r for r in requests(trace, "business") if r["role"] == point.role]
    equal(len(actor), _actor_requests(point), f"the {point.role}'s business requests")
    if _compaction_point(point):
        compactions = requests(trace, "compaction")
        expect(bool(compactions) == _compacts(point),
               f"compaction requests: expected {'some' if _compacts(point) else 'none'}, saw "
               f"{len(compactions)}")
    elif _reaches(point):  # the result as produced, in the actor's request after the call
        produced = _produced(point)
        expect(produced in str(_subject_result(point, trace, actor).get("text")),
               f"the {point.role}'s request after the subject call lacks its result as "
               f"produced ({produced!r} …)")
    if point.role == "executor":
        planner = [r for r in requests(trace, "business") if r["role"] == "root"]
        # The Planner asks once, and again with the delegation's result unless the Executor's
        # failure ended the whole invocation or the Run stopped or timed out (§11).
        equal(len(planner), 2 if point.ending == "succeeded" else 1,
              "the Planner's business requests")
    if point.call == "delegate":
        executor = [r for r in requests(trace, "business") if r["role"] == "executor"]
        equal(len(executor), 1 if _subject_runs(point) else 0,
              "the Executor's business requests")
    return actor


def _subject_result(point: Point, trace: Trace, actor: list[dict[str, Any]]
                    ) -> dict[str, Any]:
    """The tool result answering the subject call in the actor's next request."""
    request = actor[CALL["tool" if point.role == "executor" else point.call].subject]
    results = [m for m in request["view"]["messages"] if m["role"] == "tool"]
    expect(bool(results), f"the {point.role}'s request after the subject call has no tool "
           "result")
    return dict(results[-1])


MARK = {"model.pre_request": "NOTE-PRE", "model.post_response": "PATCHED-DECISION",
        "tool.post_call": "PATCHED-RESULT", "compaction.pre_request": "NOTE-COMPACT",
        "compaction.post_response": "PATCHED-SUMMARY"}
"""What a private modify's edit shows in the requests it reaches (matrix_sessions.MODIFY)."""


def _raw(point: Point) -> str | None:
    """A word of what a private edit or a deny replaced, which no request may show."""
    if point.point == "model.post_response":
        return "RAW-DECISION"
    if point.point == "tool.post_call":
        return RAW["tool" if point.role == "executor" else point.call]
    return "ZSUM" if point.point == "compaction.post_response" else None


def _check_hook_change(point: Point, trace: Trace) -> None:
    """§1, §3: the effective value reaches its consumers, the raw one none of them."""
    everything = [request_text(r) for r in requests(trace)]
    if point.point == "tool.pre_call" and point.call == "delegate":
        # The Executor's hand-over is the effective task, never the model's proposal.
        [executor] = [r for r in requests(trace, "business") if r["role"] == "executor"]
        expect("do it differently" in request_text(executor),
               "the Executor was handed the task the pre-call hook replaced")
        return
    mark = MARK.get(point.point)
    if mark is not None:
        expect(any(mark in text for text in everything), f"no request shows {mark!r}")
    raw = _raw(point)
    if raw is not None:
        expect(not any(raw in text for text in everything),
               f"a request shows the raw {raw!r} a hook replaced")


def _check_runtime_mark(point: Point, trace: Trace, actor: list[dict[str, Any]]) -> None:
    """§2, §3: a deny's explicit denied state stands in for what it withheld."""
    everything = [request_text(r) for r in requests(trace)]
    if point.point.startswith("tool."):
        stage = "pre" if point.point == "tool.pre_call" else "post"
        denied = result_facts(_subject_result(point, trace, actor), "the subject's result")
        equal((denied.get("status"), denied.get("stage"), denied.get("executed")),
              ("denied", stage, stage == "post"), f"the denied state the {point.role} receives")
    raw = _raw(point)
    if raw is not None and point.point == "tool.post_call":
        expect(not any(raw in text for text in everything),
               "a request shows the result a post-call hook denied")
    if point.point == "model.post_response":
        later = everything[_actor_requests(point):] if point.role == "root" else everything
        expect(not any("RAW-DECISION" in text for text in later[1:]),
               "a later request shows the denied answer")


def _check_decision(point: Point, trace: Trace, actor: list[dict[str, Any]]) -> None:
    """What the decision itself must show, read from the rule's write (and, for a shared
    scope, the shared field's value in the next request of its consumer, §3 "共享字段与私有
    context 使用各自 revision")."""
    if point.scope == "shared":
        _check_shared(point, trace)
    write = subject_write(point)
    if write == "hook_change":
        _check_hook_change(point, trace)
    if write == "runtime_mark" or (point.decision == "deny" and point.scope == "shared"
                                   and point.point.startswith("tool.")):
        _check_runtime_mark(point, trace, actor)
    if point.decision == "deny" and point.point.startswith("model.") \
            and point.role == "executor":
        answer = result_facts(_subject_planner_result(trace), "delegate's result")
        equal((answer.get("status"), answer.get("code")), ("error", "HOOK_DENIED"),
              "the delegation's error")


def _check_shared(point: Point, trace: Trace) -> None:
    """§3: a shared field a pre-stage hook of its consumer changed is the value every request
    sent after that decision reads — the request itself when it is rebuilt — never the old
    one; a post-stage hook changes only the response not yet delivered (§3 "响应后置阶段只允许
    修改本次尚未交付的有效响应"), so its shared patch is invalid and an allow fails open; a deny
    commits nothing. Whether a compaction summarised the field is the compaction's business:
    only its value is read, wherever it appears."""
    decided = next(i for i, e in enumerate(trace) if e["kind"] == "hook_decided")
    after = [request_text(e) for e in trace[decided:] if e["kind"] == "model_request"]
    written = point.decision == "modify" and SHARED_WRITES[point.point] == "written"
    if written:
        expect(any(SHARED_NEW in text for text in after),
               f"no request after the hook's decision shows the shared field as it wrote it "
               f"({SHARED_NEW!r})")
        expect(not any(SHARED_OLD in text for text in after),
               f"a request after the hook's decision shows the shared field's old value "
               f"({SHARED_OLD!r})")
    else:
        expect(not any(SHARED_NEW in request_text(r) for r in requests(trace)),
               "a request shows the shared field a "
               f"{'denied' if point.decision == 'deny' else 'post-stage'} item patched")


def _subject_planner_result(trace: Trace) -> dict[str, Any]:
    results = [m for m in requests(trace, "business")[-1]["view"]["messages"]
               if m["role"] == "tool"]
    equal(len(results), 1, "tool results in the Planner's second request")
    return dict(results[0])


def _check(point: Point) -> Any:
    def check(trace: Trace) -> None:
        actor = _check_shape(point, trace)
        _check_decision(point, trace, actor)
    return check


REQUIREMENTS: Mapping[tuple[str, str], tuple[str, ...]] = {
    **{(p, "allow"): ("CTX-3.61",) for p in POINTS},
    **{(p, "fail"): ("CTX-3.61", "CTX-8.21") for p in POINTS},
    ("model.pre_request", "modify"): ("CTX-3.69", "CTX-2.31", "CTX-3.14"),
    ("model.post_response", "modify"): ("CTX-3.69", "CTX-2.31", "CTX-3.16", "CTX-2.34"),
    ("tool.pre_call", "modify"): ("CTX-3.69", "CTX-2.31", "CTX-3.15", "CTX-3.57"),
    ("tool.post_call", "modify"): ("CTX-3.69", "CTX-2.31", "CTX-3.16", "CTX-1.10"),
    ("compaction.pre_request", "modify"): ("CTX-3.69", "CTX-2.31", "CTX-8.20"),
    ("compaction.post_response", "modify"): ("CTX-3.69", "CTX-2.31", "CTX-8.20", "CTX-8.70"),
    ("model.pre_request", "deny"): ("CTX-3.18", "CTX-3.60"),
    ("model.post_response", "deny"): ("CTX-3.18", "CTX-2.35"),
    ("tool.pre_call", "deny"): ("CTX-3.18", "CTX-3.70"),
    ("tool.post_call", "deny"): ("CTX-3.18", "CTX-3.71"),
    ("compaction.pre_request", "deny"): ("CTX-3.18", "CTX-8.22", "CTX-11.2", "CTX-11.11"),
    ("compaction.post_response", "deny"): ("CTX-3.18", "CTX-8.22", "CTX-11.2", "CTX-11.11"),
}
"""The requirements a point × decision pins: the rule the row follows."""


def _requirements(point: Point) -> tuple[str, ...]:
    """The rule's requirements; for an ending the rule that decides it; a delegation's and a
    read's result rules; a shared field's own revision."""
    if point.ending == "stopped":
        return ("CTX-11.5", "CTX-11.13", "CTX-3.93")
    if point.ending == "timed_out":
        return ("CTX-8.72", "CTX-11.13", "CTX-3.93")
    extra = {"tool": (), "delegate": ("CTX-10.14",), "result_read": ("CTX-6.18",)}[point.call]
    shared = ("CTX-3.80", "CTX-3.75") if point.scope == "shared" else ()
    return (*REQUIREMENTS[(point.point, point.decision)], *extra, *shared)


def _needs(point: Point) -> frozenset[str]:
    # Only a compaction point's Session compacts (Q393).
    needs = {"hooks", "final_answers"} | (set(COMPACTING) if _compaction_point(point) else set())
    # The root's request denied ends the Run before its call is made or the denied item's
    # patch could be read: the call's kind and the patch's scope are never seen (Q311).
    unseen = (point.point, point.decision, point.role) == ("model.pre_request", "deny", "root")
    if point.role == "executor" or (point.call == "delegate" and not unseen):
        needs.add("planner_executor")
    if point.scope == "shared" and not unseen:
        needs.add("shared_scopes")
    if point.ending == "stopped":
        needs |= {"stop", "triggers"}
    return frozenset(needs)


def _title(point: Point) -> str:
    call = {"tool": "a tool call", "delegate": "a delegate call",
            "result_read": "a result.read"}[point.call]
    scope = ", patching a shared field" if point.scope == "shared" else ""
    return (f"{point.point} {point.decision} on {call} in the {point.role} role{scope}: the Run "
            f"{point.ending.replace('_', ' ')}")


HOOK_MATRIX: tuple[Case, ...] = tuple(
    Case(point.id, _title(point), "hook matrix", _requirements(point), _scenario(point),
         _check(point), _needs(point), matrix=point.coordinate())
    for point in TABLE)

__all__ = ["DIMENSIONS", "ENDINGS", "HOOK_MATRIX", "ROLES", "SHORT", "TABLE", "Point",
           "subject_write"]
