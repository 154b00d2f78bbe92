"""Conformance cases for normative statements of §10 outside the §12 table and the worked
examples (IDs ``S10-<name>``): each a scenario and a predicate over the neutral trace, its
expected values derived by hand from the design (see conformance/case.py)."""

import json
from typing import Any

from ctxspec.conformance.case import (
    Case,
    Trace,
    base,
    endings,
    equal,
    example,
    expect,
    lines,
    of,
    requests,
)
from ctxspec.conformance.sessions import corrected_summary

# --- §10: each batch member keeps its own result; an unsaved one is unknown, never a success ---


def _unknown_scenario() -> dict[str, Any]:
    document = example("tool-batch-hook")
    document["crash"] = {"commit": "TOOL_SETTLED", "occurrence": 2, "when": "before"}
    return document


def _unknown_check(trace: Trace) -> None:
    # tool-batch-hook dies after read ran but before its result was settled; write had settled.
    # The takeover reuses write's saved result and runs neither tool again; read's outcome is
    # unknown (the handler may have acted), so its result says UNKNOWN_OUTCOME — not the text
    # it would have returned, not a made-up success inferred from its arguments.
    equal(len(of(trace, "restarted")), 1, "restarts")
    equal(sorted(e["name"] for e in of(trace, "tool_executed")), ["read", "write"],
          "tools executed (each once)")
    results = [m["text"] for m in requests(trace, "business")[-1]["view"]["messages"]
               if m["kind"] == "tool_result"]
    equal(results[0], "wrote 6 bytes to reports/a.md", "write's saved result")
    expect("UNKNOWN_OUTCOME" in results[1] and "ship on Friday" not in results[1],
           f"read's result does not say its outcome is unknown: {results[1]!r}")
    equal(json.loads(results[1])["status"] != "ok", True, "read's result is not a success")
    equal(endings(trace), [(1, "succeeded", None)], "Run endings")


# --- §10: a takeover renews no Loop budget ----------------------------------------------------


def _budget_scenario() -> dict[str, Any]:
    document = base(tools=[{"name": "t"}], loop_limit=2)
    document["steps"] = [{"ask": "loop"}, {"advance": True}]
    document["model"] = {"business": [{"text": "", "tool_calls": [{"name": "t"}]},
                                      {"text": "", "tool_calls": [{"name": "t"}]},
                                      {"text": "", "tool_calls": [{"name": "t"}]}]}
    document["tools"] = {"t": [{"text": "r1"}, {"text": "r2"}, {"text": "r3"}]}
    document["crash"] = {"commit": "BATCH_FEEDBACK", "occurrence": 1, "when": "after"}
    return document


def _budget_check(trace: Trace) -> None:
    # loop_limit = 2 and a model that always calls t. The process dies after loop 1's results
    # were fed back; the new owner continues with the Loops left (one), not a fresh budget of
    # two: two business requests in all, then the Run ends loop_exhausted.
    equal(len(of(trace, "restarted")), 1, "restarts")
    business = requests(trace, "business")
    equal(len({r["purpose_key"] for r in business}), 2, "business Loops")
    equal(endings(trace), [(1, "loop_exhausted", None)], "Run endings")


# --- §10: after a takeover an old summary never hides a committed correction -------------------


def _correction_scenario() -> dict[str, Any]:
    document = corrected_summary()
    document["crash"] = {"commit": "T_FREEZE", "occurrence": 4, "when": "before"}
    return document


def _correction_check(trace: Trace) -> None:
    # ROW-20's Session dying after the hook's correction of a covered record was committed and
    # before loop 4 was frozen. The new owner restores the snapshot and the correction: the
    # snapshot no longer applies, so loop 4 shows the covered records as they are now, with
    # I = 2484 as in ROW-20, and no old summary.
    equal(len(of(trace, "restarted")), 1, "restarts")
    last = requests(trace, "business")[-1]
    equal((last["snapshot_id"], last["estimated_input_tokens"]), (None, 2484), "loop 4")
    texts = [text for _, _, text in lines(last)]
    expect("A, corrected" in texts and "A" * 1500 not in texts,
           "loop 4 does not show the corrected record")
    expect(not any("SUM" in text for text in texts), "loop 4 still shows the old summary")
    equal(len(requests(trace, "compaction")), 2, "compaction requests")


# --- §10: a snapshot is no execution checkpoint ---------------------------------------------------


def _snapshot_scenario() -> dict[str, Any]:
    document = base(window=5000)
    document["steps"] = [{"ask": "a" * 1000}, {"advance": True}, {"ask": "Q" * 1573},
                         {"advance": True}]
    document["model"] = {"business": [{"text": "b" * 1000}, {"text": "done"}],
                         "compaction": [{"text": "SUMMARY"}]}
    document["crash"] = {"commit": "SNAPSHOT_COMMITTED", "occurrence": 1, "when": "after"}
    return document


def _snapshot_check(trace: Trace) -> None:
    # ROW-04-AT's Session (I = 3600 at the trigger) dying right after the summary's snapshot
    # was committed. The snapshot says nothing about where Run 2 is: the takeover neither
    # treats the Run as done nor summarises again — it sends Run 2's business request, with
    # the summary (I = 3 + 30 + 7 + 1573 = 1613), and Run 2 succeeds.
    equal(len(of(trace, "restarted")), 1, "restarts")
    equal([r["purpose"] for r in requests(trace)], ["business", "compaction", "business"],
          "requests")
    last = requests(trace)[-1]
    expect(last["snapshot_id"] is not None, "Run 2's request uses no snapshot")
    equal(last["estimated_input_tokens"], 1613, "I of Run 2's request")
    equal(endings(trace), [(1, "succeeded", None), (2, "succeeded", None)], "Run endings")


CASES: tuple[Case, ...] = (
    Case("S10-UNKNOWN-OUTCOME", "a settled member is reused; an unsaved one is unknown", "§10",
         ("CTX-10.14", "CTX-10.25"), _unknown_scenario(), _unknown_check,
         frozenset({"crash_points", "hooks"})),
    Case("S10-TAKEOVER-BUDGET", "a takeover continues with the Loops left, not a new budget",
         "§10", ("CTX-10.24",), _budget_scenario(), _budget_check,
         frozenset({"crash_points"})),
    Case("S10-CORRECTION-SURVIVES", "after a takeover the old summary hides no correction",
         "§10", ("CTX-10.8",), _correction_scenario(), _correction_check,
         frozenset({"crash_points", "hooks", "compaction", "estimator_injection"})),
    Case("S10-SNAPSHOT-NOT-CHECKPOINT", "a committed snapshot does not end the Run", "§10",
         ("CTX-10.3",), _snapshot_scenario(), _snapshot_check,
         frozenset({"crash_points", "compaction", "estimator_injection"})),
)
