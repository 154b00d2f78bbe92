"""§12 rows 3 and 19 as conformance cases: an Executor sees only its hand-over; private and
shared scopes (§2, §3). Each case stands beside its scenario and check."""

from collections.abc import Mapping
from typing import Any

from ctxspec.conformance.case import (
    Case,
    Trace,
    equal,
    example,
    expect,
    lines,
    of,
    requests,
)

# --- §12 rows 3 and 19: roles and scopes ------------------------------------------------------


def _texts(request: Mapping[str, Any]) -> list[str]:
    return [m["text"] for m in request["view"]["messages"]]


def _by_role(trace: Trace, role: str) -> list[dict[str, Any]]:
    return [r for r in requests(trace, "business") if r["role"] == role]


def _row3_check(trace: Trace) -> None:
    # planner-two-executors: each Executor's request holds its prompt and exactly its hand-over
    # (task, constraint, material ref) — none of the Planner's words, prompt or the supplement
    # the user sent meanwhile; the executions share no record; the Planner gets one feedback
    # with both answers in action order; later history never shows an Executor's own log.
    # The hand-over is compared by its contents, never by how a runtime words it (#32).
    executor = _by_role(trace, "executor")
    equal(len(executor), 4, "Executor requests (two executions of two loops)")
    first = executor[0]["view"]["messages"]
    equal(first[0]["text"], "You carry out one task the Planner handed over.",
          "the first Executor request's system prompt", cites="CTX-3.73")
    equal({m["role"] for m in first[1:]}, {"user"}, "the roles of the first Executor "
          "request's other messages (its hand-over only)", cites="CTX-5.2")
    handed = "\n".join(m["text"] for m in first[1:])
    for part in ("list TODO lines", "only src/", "repo://main"):
        expect(part in handed, f"the first Executor request lacks the hand-over's {part!r}",
               cites="CTX-5.2")
    planner_words = ("Find every TODO", "You are a Planner", "Two searches",
                     "also look in tests/")
    for request in executor:
        expect(not any(w in t for w in planner_words for t in _texts(request)),
               "an Executor saw the Planner's context", cites="CTX-5.3")
    records = [{m["record_id"] for m in r["view"]["messages"] if m["record_id"]}
               for r in (executor[0], executor[2])]
    equal(records[0] & records[1], set(), "records shared by the two executions",
          cites="CTX-3.73")
    planner = _by_role(trace, "root")
    feedback = [m["text"] for m in planner[1]["view"]["messages"] if m["kind"] == "tool_result"]
    equal(feedback, ["TODO: src/a.py:3, src/b.py:9, src/c.py:1", "FIXME: src/db.py:42"],
          "the Planner's feedback", cites="CTX-6.1")
    history = _texts(planner[-1])
    expect("FIXME: src/db.py:42" in history, "the next question lost a delegation's answer",
           cites="CTX-4.9")
    expect(not any("src/db.py:42 FIXME" in t for t in history),
           "the next question shows an Executor's own tool result", cites="CTX-4.11")


ROW_03 = Case(
    "ROW-03", "an Executor sees only its hand-over", "§12 row 3",
    ("CTX-2.4", "CTX-5.2", "CTX-5.3", "CTX-3.73", "CTX-4.11", "CTX-6.1", "CTX-10.16",
     "CTX-4.9", "CTX-10.18"),
    example("planner-two-executors"), _row3_check,
    frozenset({"planner_executor", "triggers"}))


def _row19_scenario() -> dict[str, Any]:
    return {
        "scenario_version": 1, "name": "scopes",
        "agent": {"system_prompt": "plan", "window": 16384, "estimator": "chars",
                  "executor": {"system_prompt": "execute"},
                  "shared": [{"name": "budget", "text": "budget: 5", "consumers": ["root"]}]},
        "steps": [{"ask": "go"}, {"advance": True}],
        "model": {"business": [{"text": "plan v1", "tool_calls": [
                                   {"name": "delegate", "arguments": {"task": "t"}}]},
                               {"text": "done"}],
                  "executor": [{"text": "executed"}]},
        "hooks": [
            {"point": "model.pre_request", "ordinal": 2, "items": [{"context_patch": [
                {"target": "shared:budget", "field": "text", "value": "budget: 99",
                 "scope": "shared"}]}]},
            {"point": "model.pre_request", "ordinal": 3, "items": [
                {"context_patch": [{"target": "shared:budget", "field": "text",
                                    "value": "budget: 3", "scope": "shared"}]},
                {"context_patch": [{"target": "first_assistant", "field": "text",
                                    "value": "plan v1 (private note)"}]}]}]}


def _row19_check(trace: Trace) -> None:
    # The Executor (2nd pre-request hook) is no consumer of the shared budget: its patch is
    # UNAUTHORISED_SCOPE. The Planner's next request reads the updated field and its private
    # note; its first request, already sent, keeps budget 5; the Executor sees neither.
    equal([(d["decision"], d["patch_valid"], d["diagnostics"])
           for d in of(trace, "hook_decided")],
          [("allow", False, ["UNAUTHORISED_SCOPE"]), ("allow", True, []), ("allow", True, [])],
          "hook decisions")
    planner = _by_role(trace, "root")
    def shared(request: Mapping[str, Any]) -> list[str]:
        return [text for _, kind, text in lines(request) if kind == "shared"]
    equal(shared(planner[0]), ["budget: 5"], "the shared field in the first request (as sent)")
    equal(shared(planner[1]), ["budget: 3"], "the shared field the Planner reads next")
    expect("plan v1 (private note)" in _texts(planner[1]), "the private note is missing")
    for request in _by_role(trace, "executor"):
        expect(not any("budget" in t or "plan v1" in t for t in _texts(request)),
               "the Executor saw the shared field or the Planner's context")


ROW_19 = Case(
    "ROW-19", "private and shared scopes", "§12 row 19",
    ("CTX-3.72", "CTX-3.74", "CTX-3.75", "CTX-3.80", "CTX-3.87", "CTX-3.39", "CTX-3.32",
     "CTX-3.17", "CTX-3.53", "CTX-3.78"),
    _row19_scenario(), _row19_check,
    frozenset({"planner_executor", "hooks", "shared_scopes"}))
