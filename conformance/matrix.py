"""The hook matrix (issue #22): the rules of §2, §3, §8 and §11 that apply at several points,
pinned at every point from one table rather than case by case.

Its dimensions: every hook point that can deny or modify (§3's table: the model request and
response, a tool call's arguments and result; §8: a compaction call's request and response)
× the hook's decision (allow, allow with a valid patch — "modify" —, deny) × the role the hook
acts in (the root role, or an Executor the Planner delegated to) × how the Run ends (it
succeeds, fails, stops or times out). The Run's ending follows from the other three (a deny of
a model call or of a compaction call fails the role; §11 says which failures end the whole
invocation, Q77), except for the rows that stop the Run or let its deadline pass while the
actor's tool runs, with the point's hook allowing (§3: an allow never skips the stop or the
deadline).

Every case runs the same Session: the *actor* (the root role, or the Executor) asks for tool
``t`` (its answer text ``RAW-DECISION``), ``t`` returns a result large enough that the actor's
next request reaches the compaction trigger, the actor then answers ``final words``. The
expectations are derived by hand from the rules below (``_ending``, ``_tools``,
``_actor_requests``, ``_compacts``, ``_check_decision``), never from a run; each
case carries its coordinate, which ``ctxspec trace --matrix CTX-…`` shows per requirement.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from itertools import product
from typing import Any

from ctxspec.conformance.case import (
    COMPACTING,
    Case,
    Trace,
    base,
    endings,
    equal,
    expect,
    of,
    request_text,
    requests,
    result_facts,
)

POINTS = ("model.pre_request", "model.post_response", "tool.pre_call", "tool.post_call",
          "compaction.pre_request", "compaction.post_response")
DECISIONS = ("allow", "modify", "deny")
ROLES = ("root", "executor")
ENDINGS = ("succeeded", "failed", "stopped", "timed_out")
DIMENSIONS: Mapping[str, tuple[str, ...]] = {"point": POINTS, "decision": DECISIONS,
                                             "role": ROLES, "ending": ENDINGS}
"""The matrix's dimensions, in the order a coordinate lists them."""

SHORT = {"model.pre_request": "MPRE", "model.post_response": "MPOST", "tool.pre_call": "TPRE",
         "tool.post_call": "TPOST", "compaction.pre_request": "CPRE",
         "compaction.post_response": "CPOST"}

BIG = "RAW-RESULT " + "r" * 3600
"""t's result: W = 5000, O = 400, S = 100 give B = 4500 and the trigger floor(0.8 × B) =
3600; the actor's second request (its prompt, its hand-over or question, RAW-DECISION with its
call and these 3611 characters) is over 3600 and compacts, while a result a hook replaced or
denied leaves it far below."""

FIRST = {"root": {"model.pre_request": 1, "model.post_response": 1, "tool.pre_call": 1,
                  "tool.post_call": 1},
         "executor": {"model.pre_request": 2, "model.post_response": 2, "tool.pre_call": 2,
                      "tool.post_call": 1}}
"""The ordinal of the actor's first invocation of a point. For an Executor the Planner's
first request, its delegating answer and its ``delegate`` call's pre-call chain come first; the
Executor's own tool ``t`` settles before the delegation's post-call chain, so its post-call
chain is the point's first."""

MODIFY: Mapping[str, dict[str, Any]] = {
    "model.pre_request": {"context_patch": [{"target": "last", "field": "text",
                                             "operation": "append_annotation",
                                             "value": "NOTE-PRE"}]},
    "model.post_response": {"payload_patch": [{"path": "text", "value": "PATCHED-DECISION"}]},
    "tool.pre_call": {"payload_patch": [{"path": "arguments.path", "value": "b"}]},
    "tool.post_call": {"payload_patch": [{"path": "result", "value": "PATCHED-RESULT"}]},
    "compaction.pre_request": {"context_patch": [{"target": "last", "field": "text",
                                                  "operation": "append_annotation",
                                                  "value": "NOTE-COMPACT"}]},
    "compaction.post_response": {"payload_patch": [{"path": "summary",
                                                    "value": "PATCHED-SUMMARY"}]},
}
"""What a "modify" item writes at each point: a valid patch of a registered field."""


@dataclass(frozen=True)
class Point:
    """One coordinate of the matrix."""

    point: str
    decision: str
    role: str
    ending: str

    @property
    def id(self) -> str:
        return (f"HM-{SHORT[self.point]}-{self.decision.upper()}-{self.role.upper()}-"
                f"{self.ending.upper()}")

    def coordinate(self) -> dict[str, str]:
        return {"point": self.point, "decision": self.decision, "role": self.role,
                "ending": self.ending}


def _ending(point: str, decision: str, role: str) -> str:
    """§3, §11, Q75, Q77: how the Run ends when the hook at ``point`` decides ``decision``.
    A denied model call leaves its role without an answer (HOOK_DENIED): the root's Run fails,
    an Executor's failure is its delegation's error result and the Planner goes on. A denied
    compaction call fails the compaction, which ends the whole invocation in either role. A
    denied tool call is feedback the actor reads and goes on."""
    if decision != "deny" or point.startswith("tool."):
        return "succeeded"
    if point.startswith("compaction."):
        return "failed"
    return "failed" if role == "root" else "succeeded"


TABLE: tuple[Point, ...] = (
    *(Point(point, decision, role, _ending(point, decision, role))
      for point, decision, role in product(POINTS, DECISIONS, ROLES)),
    *(Point(point, "allow", role, ending)
      for point, role, ending in product(POINTS, ROLES, ("stopped", "timed_out"))),
)
"""The matrix's points: every point × decision × role with the ending it leads to, and every
point × role with an allowing hook while the Run stops or times out."""


# --- the Session --------------------------------------------------------------------------------


def _item(point: Point) -> dict[str, Any]:
    if point.decision == "modify":
        return dict(MODIFY[point.point])
    return {"decision": point.decision}


def _ordinal(point: Point) -> int | None:
    """The chain the item answers: the actor's first at a model or tool point; the first
    chunk's at compaction.pre_request; every chunk's at compaction.post_response, so that a
    modified summary is the one the business request receives."""
    if point.point == "compaction.post_response" and point.decision == "modify":
        return None
    return FIRST[point.role].get(point.point, 1)


def scenario(point: Point) -> dict[str, Any]:
    decision = {"text": "RAW-DECISION", "tool_calls": [{"name": "t",
                                                        "arguments": {"path": "a"}}]}
    actor = [decision, {"text": "final words"}]
    if point.role == "root":
        document = base(window=5000, tools=[{"name": "t"}])
        document["model"] = {"business": actor}
    else:
        document = base(window=5000, executor={"tools": [{"name": "t"}]})
        document["model"] = {"business": [
            {"text": "", "tool_calls": [{"name": "delegate", "arguments": {"task": "do it"}}]},
            {"text": "planner done"}], "executor": actor}
    document["model"]["compaction"] = [{"text": f"ZSUM{n}"} for n in range(1, 6)]
    document["steps"] = [{"ask": "go"}, {"advance": True}]
    document["tools"] = {"t": [{"text": BIG}]}
    document["hooks"] = [{"point": point.point, "ordinal": _ordinal(point),
                          "items": [_item(point)]}]
    if point.ending == "stopped":  # the stop arrives while t runs
        document["triggers"] = [{"on": {"tool": "t", "ordinal": 1}, "do": {"stop": True}}]
    if point.ending == "timed_out":  # one tick per model call and tool run: t spends the last
        document["agent"]["run_deadline"] = 2 if point.role == "root" else 3
    return document


# --- the expectations -----------------------------------------------------------------------------


def _tool_result(request: dict[str, Any], what: str) -> dict[str, Any]:
    results = [m for m in request["view"]["messages"] if m["role"] == "tool"]
    equal(len(results), 1, f"tool results in {what}")
    return dict(results[0])


def _tools(point: Point) -> list[tuple[str, dict[str, Any]]]:
    """§3: a pre-call deny runs nothing; a pre-call patch runs t with the patched argument;
    a denied model answer's call never runs; a stop or the deadline comes while t runs."""
    if point.decision == "deny" and point.point in ("model.pre_request", "model.post_response",
                                                    "tool.pre_call"):
        return []
    if point.point == "tool.pre_call" and point.decision == "modify":
        return [("t", {"path": "b"})]
    return [("t", {"path": "a"})]


def _actor_requests(point: Point) -> int:
    """The actor's business requests: none after a pre-request deny, one when its answer is
    denied, its compaction fails, or the Run stops or times out while t runs; else two."""
    if point.ending in ("stopped", "timed_out"):
        return 1
    if point.decision == "deny" and point.point == "model.pre_request":
        return 0
    if point.decision == "deny" and point.point in ("model.post_response",
                                                    "compaction.pre_request",
                                                    "compaction.post_response"):
        return 1
    return 2


def _compacts(point: Point) -> bool:
    """The actor's second request compacts when t's big result reaches it: not when there is
    no second request, nor when a hook replaced or denied that result or denied the call. A
    denied compaction response was a compaction request sent; a denied compaction request
    was never sent (§3)."""
    if point.ending in ("stopped", "timed_out"):
        return False
    if point.decision == "deny":
        return point.point == "compaction.post_response"
    return not (point.decision == "modify" and point.point == "tool.post_call")


def _run_ending(point: Point) -> tuple[str, str | None]:
    if point.ending != "failed":
        return point.ending, None
    if point.point.startswith("compaction."):
        return "failed", "COMPACTION_FAILED"
    return "failed", "HOOK_DENIED"


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
    compactions = requests(trace, "compaction")
    expect(bool(compactions) == _compacts(point),
           f"compaction requests: expected {'some' if _compacts(point) else 'none'}, saw "
           f"{len(compactions)}")
    if point.role == "executor":
        planner = [r for r in requests(trace, "business") if r["role"] == "root"]
        # The Planner asks once, and again with the delegation's result unless the Executor's
        # failure ended the whole invocation or the Run stopped or timed out (§11).
        asked_again = point.ending == "succeeded"
        equal(len(planner), 2 if asked_again else 1, "the Planner's business requests")
    return actor


def _check_decision(point: Point, trace: Trace, actor: list[dict[str, Any]]) -> None:
    """What the decision itself must show, by point (§2, §3, §8)."""
    everything = [request_text(r) for r in requests(trace)]
    if point.decision == "modify":
        mark = {"model.pre_request": "NOTE-PRE", "model.post_response": "PATCHED-DECISION",
                "tool.post_call": "PATCHED-RESULT", "compaction.pre_request": "NOTE-COMPACT",
                "compaction.post_response": "PATCHED-SUMMARY"}.get(point.point)
        raw = {"model.post_response": "RAW-DECISION", "tool.post_call": "RAW-RESULT",
               "compaction.post_response": "ZSUM"}.get(point.point)
        if mark is not None:  # the effective value reaches its consumers
            expect(any(mark in text for text in everything), f"no request shows {mark!r}")
        if raw is not None:  # and the raw one none of them
            expect(not any(raw in text for text in everything),
                   f"a request shows the raw {raw!r} a hook replaced")
        return
    if point.decision == "deny" and point.point in ("tool.pre_call", "tool.post_call"):
        stage = "pre" if point.point == "tool.pre_call" else "post"
        denied = result_facts(_tool_result(actor[1], f"the {point.role}'s second request"),
                              "t's result")
        equal((denied.get("status"), denied.get("stage"), denied.get("executed")),
              ("denied", stage, stage == "post"), "the denied state the actor receives")
        expect(not any("RAW-RESULT" in text for text in everything),
               "a request shows the result a post-call hook denied")
    if point.decision == "deny" and point.point.startswith("model.") \
            and point.role == "executor":
        answer = result_facts(_tool_result(requests(trace, "business")[-1],
                                           "the Planner's second request"), "delegate's result")
        equal((answer.get("status"), answer.get("code")), ("error", "HOOK_DENIED"),
              "the delegation's error")
    if point.decision == "deny" and point.point == "model.post_response":
        expect(not any("RAW-DECISION" in text for text in everything[1:]),
               "a later request shows the denied answer")


def _check(point: Point) -> Any:
    def check(trace: Trace) -> None:
        actor = _check_shape(point, trace)
        _check_decision(point, trace, actor)
    return check


def _requirements(point: Point) -> tuple[str, ...]:
    """The requirements a point pins: the decision's rule at that point, and for an ending the
    rule that decides it."""
    if point.ending == "stopped":
        return ("CTX-11.5", "CTX-11.13", "CTX-3.93")
    if point.ending == "timed_out":
        return ("CTX-8.72", "CTX-11.13", "CTX-3.93")
    compaction = point.point.startswith("compaction.")
    if point.decision == "allow":
        return ("CTX-3.61", "CTX-8.20") if compaction else ("CTX-3.61",)
    if point.decision == "modify":
        by_point = {"model.pre_request": ("CTX-3.14",), "model.post_response":
                    ("CTX-3.16", "CTX-2.34"), "tool.pre_call": ("CTX-3.15", "CTX-3.57"),
                    "tool.post_call": ("CTX-3.16",), "compaction.pre_request": ("CTX-8.20",),
                    "compaction.post_response": ("CTX-8.20", "CTX-8.70")}
        return ("CTX-3.69", "CTX-2.31", *by_point[point.point])
    if compaction:
        return ("CTX-3.18", "CTX-8.22", "CTX-11.2", "CTX-11.11")
    by_point = {"model.pre_request": ("CTX-3.60",), "model.post_response": ("CTX-2.35",),
                "tool.pre_call": ("CTX-3.70",), "tool.post_call": ("CTX-3.71",)}
    return ("CTX-3.18", *by_point[point.point])


def _needs(point: Point) -> frozenset[str]:
    needs = {"hooks", "final_answers"} | set(COMPACTING)
    if point.role == "executor":
        needs.add("planner_executor")
    if point.ending == "stopped":
        needs |= {"stop", "triggers"}
    return frozenset(needs)


HOOK_MATRIX: tuple[Case, ...] = tuple(
    Case(point.id, f"{point.point} {point.decision} in the {point.role} role: the Run "
         f"{point.ending.replace('_', ' ')}", "hook matrix", _requirements(point),
         scenario(point), _check(point), _needs(point), matrix=point.coordinate())
    for point in TABLE)

__all__ = ["DIMENSIONS", "HOOK_MATRIX", "TABLE", "Point"]
