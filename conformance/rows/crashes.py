"""§12 rows 9, 10 and 21 to 23 as conformance cases: a crash inside a compaction episode and
after each saved step of a tool batch (§10). Each case stands beside its scenario and check."""

from typing import Any

from ctxspec.conformance.case import (
    Case,
    Trace,
    endings,
    equal,
    example,
    expect,
    lines,
    of,
    requests,
    taken_over,
)

# --- §12 rows 9, 21-23: crashes --------------------------------------------------------------


def _crash(name: str, phase: str, occurrence: int, when: str) -> dict[str, Any]:
    return {**example(name), "crash": {"phase": phase, "occurrence": occurrence,
                                       "when": when}}


def _row9_check(trace: Trace) -> None:
    # The example's episode summarises three chunks; dying after the second leaves one to do.
    chunks = requests(trace, "compaction")
    equal(len(chunks), 3, "compaction requests")
    equal(len({r["purpose_key"] for r in chunks}), 3, "distinct chunk purpose keys")
    restart = next(i for i, e in enumerate(trace) if e["kind"] == "restarted")
    expect(trace.index(chunks[1]) < restart < trace.index(chunks[2]),
           "the third chunk is not the only one asked after the restart")
    equal(len({e["episode_id"] for e in of(trace, "compaction")}), 1, "episodes")
    equal(endings(trace), [(1, "succeeded", None), (2, "failed", "CONTEXT_WINDOW_EXCEEDED")],
          "Run endings")


ROW_09 = Case(
    "ROW-09", "a crash after the second chunk resumes at the third", "§12 row 9",
    ("CTX-10.9", "CTX-8.74", "CTX-8.10"),
    _crash("compaction-three-chunks-window-exceeded", "chunk_committed", 2, "after"),
    _row9_check, frozenset({"compaction", "crash_points", "estimator_injection"}))


# --- §12 row 10: a crash before the summary commit --------------------------------------------


def _row10_check(trace: Trace) -> None:
    # Dying just before the snapshot is committed loses no history: the three committed chunks
    # are not asked again and the Session ends as without the crash.
    equal(len(requests(trace, "compaction")), 3, "compaction requests")
    equal(len(of(trace, "restarted")), 1, "restarts")
    equal(endings(trace), [(1, "succeeded", None), (2, "failed", "CONTEXT_WINDOW_EXCEEDED")],
          "Run endings")


ROW_10 = Case(
    "ROW-10", "a crash before the summary commit loses no history", "§12 row 10",
    ("CTX-10.10",),
    _crash("compaction-three-chunks-window-exceeded", "snapshot_published", 1, "before"),
    _row10_check, frozenset({"compaction", "crash_points", "estimator_injection"}))


def _saved_step_check(trace: Trace) -> None:
    # tool-batch-hook: one decision with two calls, a pre-call hook moving write's path to
    # reports/a.md, then the final answer — two business requests, each tool once, and the
    # moved path is the one that ran.
    business = {r["purpose_key"] for r in requests(trace, "business")}
    equal(len(business), 2, "business Operations")
    # Every answer was saved before the crash: no request is sent a second time.
    asked = [(r["purpose_key"], r["attempt"]) for r in requests(trace)]
    equal(len(asked), len(set(asked)), "requests sent (each once)")
    equal(sorted(e["name"] for e in of(trace, "tool_executed")), ["read", "write"],
          "tools executed")
    equal([e["effective_arguments"].get("path") for e in of(trace, "tool_executed")
           if e["name"] == "write"], ["reports/a.md"], "write's effective path")
    final = lines(requests(trace, "business")[-1])
    equal([kind for _, kind, _ in final],
          ["system_prompt", "user_ref", "assistant", "tool_result", "tool_result"],
          "the second request: the question, the decision and its two results, once")
    equal(endings(trace), [(1, "succeeded", None)], "Run endings")


ROW_21 = Case(
    "ROW-21", "a crash after the raw result is saved repeats no call", "§12 row 21",
    ("CTX-10.6", "CTX-10.7"), _crash("tool-batch-hook", "raw_answer_saved", 1, "after"),
    taken_over(_saved_step_check), frozenset({"crash_points", "hooks"}))


ROW_22 = Case(
    "ROW-22", "a crash after one batch member settled reuses it", "§12 row 22",
    ("CTX-10.12", "CTX-10.15", "CTX-10.18"),
    _crash("tool-batch-hook", "tool_settled", 1, "after"),
    taken_over(_saved_step_check), frozenset({"crash_points", "hooks"}))


ROW_23 = Case(
    "ROW-23", "a crash after the feedback commit appends nothing twice", "§12 row 23",
    ("CTX-10.12", "CTX-3.5", "CTX-10.20"),
    _crash("tool-batch-hook", "batch_fed_back", 1, "after"),
    taken_over(_saved_step_check), frozenset({"crash_points", "hooks"}))
