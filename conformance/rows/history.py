"""§12 rows 24 and 25 as conformance cases: retention at Run end and Agent deletion, and the
history API's refusals (§1, §11). Each case stands beside its scenario and check."""

from typing import Any

from ctxspec.conformance.case import (
    Case,
    Trace,
    equal,
    exactly,
    expect,
    of,
    two_call_batch,
)

# --- §12 rows 24 and 25: retention and the history API ----------------------------------------


def _row24_scenario() -> dict[str, Any]:
    document = two_call_batch()
    document["tools"]["write"][0]["workspace_writes"] = {"reports/a.md": "report"}
    document["steps"] = [*document["steps"], {"observe_retention": True},
                         {"read_history": {"kind": "role", "role": "root"}},
                         {"delete_agent": True}, {"observe_retention": True}]
    return document


def _row24_check(trace: Trace) -> None:
    # The write tool left reports/a.md; without a persistent sandbox it is gone when the Run
    # ends, while the five records (question, decision, two results, answer) and their blobs
    # stay. Deleting the Agent leaves no record and no blob.
    before, after = exactly(2, of(trace, "retained"), "retained events")
    equal(before["workspace_files"], [], "working files after the Run", cites="CTX-1.15")
    equal(before["records"], 5, "records kept after the Run")
    expect(before["blobs"] > 0, "no blob kept after the Run")
    [read] = exactly(1, of(trace, "history_read"), "history_read events")
    equal(read["message_kinds"], ["user_ref", "assistant", "tool_result", "tool_result",
                                  "assistant"], "history after the Run")
    equal((after["records"], after["blobs"]), (0, 0), "records and blobs after deletion")


ROW_24 = Case(
    "ROW-24", "working files go at Run end; deleting the Agent removes its records",
    "§12 row 24", ("CTX-1.14", "CTX-1.15"), _row24_scenario(), _row24_check,
    frozenset({"retention", "history_api"}))


def _row25_scenario() -> dict[str, Any]:
    document = two_call_batch()
    callers = [{"kind": "role", "role": "root"}, {"kind": "role", "role": "executor"},
               {"kind": "script"}, {"kind": "script", "role": "root"},
               {"kind": "role", "role": "root", "session": "other"}]
    document["steps"] = [*document["steps"], *({"read_history": c} for c in callers)]
    return document


def _row25_check(trace: Trace) -> None:
    # The root role reads its own Session's records; an unauthorised role, a workspace script
    # (even naming the root role) and a caller of another Session are refused, all with the
    # same words, which name nothing of the Session.
    reads = of(trace, "history_read")
    equal([(r["caller"], r["session"], r["allowed"]) for r in reads],
          [("role:root", "own", True), ("role:executor", "own", False), ("script", "own", False),
           ("script:root", "own", False), ("role:root", "other", False)], "history reads")
    refusals = {r["refusal"] for r in reads if not r["allowed"]}
    equal(len(refusals), 1, "distinct refusal messages")
    refusal = refusals.pop()
    expect(not any(word in refusal for word in ("report", "notes", "sha256", "-")),
           f"the refusal names something of the Session: {refusal!r}")
    equal(reads[0]["message_kinds"], ["user_ref", "assistant", "tool_result", "tool_result",
                                      "assistant"], "what the root role reads")


ROW_25 = Case(
    "ROW-25", "the history API refuses other Sessions, roles and scripts", "§12 row 25",
    ("CTX-11.15", "CTX-4.11"), _row25_scenario(), _row25_check,
    frozenset({"history_api"}))
