"""§12 rows 4, 5, 6, 11 and 20 as conformance cases: the 80% boundary, a question that
triggers compaction, a supplement during it, a request still over the window after the summary,
and an old summary over a modified record (§7, §8, §9). Each case stands beside its check."""


from ctxspec.conformance.case import (
    Case,
    Trace,
    ending_figures,
    endings,
    equal,
    exactly,
    example,
    expect,
    lines,
    of,
    requests,
)
from ctxspec.conformance.sessions import boundary, corrected_summary, supplement_during_compaction

# --- §12 row 4: the 80% boundary, both sides ----------------------------------------------------


def _below_check(trace: Trace) -> None:
    seen = [(r["purpose"], r["estimated_input_tokens"], r["compaction"])
            for r in requests(trace)]
    # Run 1: "sys" 3 + "a" × 1000; Run 2: 3 + 1000 + 1000 + 1596 = 3599 (sessions.boundary).
    equal(seen, [("business", 1003, "below_trigger"), ("business", 3599, "below_trigger")],
          "requests at I = threshold − 1")
    _within_window(trace)


ROW_04_BELOW = Case(
    "ROW-04-BELOW", "80% boundary: I = threshold − 1 does not compact", "§12 row 4",
    ("CTX-7.12", "CTX-7.13", "CTX-8.28", "CTX-6.21"), boundary(1596), _below_check,
    frozenset({"estimator_injection"}))


def _at_check(trace: Trace) -> None:
    seen = [(r["purpose"], r["compaction"]) for r in requests(trace)]
    equal(seen, [("business", "below_trigger"), ("compaction", None), ("business", "compact")],
          "requests at I = threshold")
    # After the summary: "sys" + "SUMMARY" + the question (the summary's envelope is the
    # runtime's wording and counts 0).
    equal(requests(trace)[-1]["estimated_input_tokens"], 3 + 7 + 1597,
          "I of the request after compaction", cites="CTX-8.11")
    _within_window(trace)


ROW_04_AT = Case(
    "ROW-04-AT", "80% boundary: I = threshold compacts", "§12 row 4",
    ("CTX-7.12", "CTX-7.13", "CTX-8.28", "CTX-8.46", "CTX-6.21", "CTX-8.11"),
    boundary(1597), _at_check,
    frozenset({"estimator_injection", "compaction"}))


def _floor_check(trace: Trace) -> None:
    # W = 5001: B = 4501 and the trigger is floor(0.8 × 4501) = floor(3600.8) = 3600, not the
    # 3601 a rounded floating-point product gives; I = 2003 + 1597 = 3600 compacts.
    business = requests(trace, "business")
    equal([r["trigger_threshold"] for r in business], [3600, 3600], "the trigger")
    equal([(r["purpose"], r["compaction"]) for r in requests(trace)],
          [("business", "below_trigger"), ("compaction", None), ("business", "compact")],
          "requests at I = floor(r × B)")


ROW_04_FLOOR = Case(
    "ROW-04-FLOOR", "80% boundary: the trigger is floor(r × B), exactly", "§12 row 4",
    ("CTX-7.12", "CTX-7.18"), {**boundary(1597), "agent": {
        **boundary(1597)["agent"], "window": 5001}}, _floor_check,
    frozenset({"estimator_injection", "compaction"}))


def _within_window(trace: Trace) -> None:
    for request in requests(trace):
        expect(request["estimated_input_tokens"] + request["max_output_tokens"]
               + request["safety_margin"] <= request["window"],
               f"request {request['purpose_key']} exceeds the hard window", cites="CTX-7.13")


# --- §12 row 5: a new question that triggers compaction -------------------------------------


def _row5_check(trace: Trace) -> None:
    # Run 2's question (1597) brings I to the trigger (3600): Run 1's two texts are summarised,
    # and the request sent after shows the summary and the question itself, verbatim — the
    # question is never material of the summary request.
    business = requests(trace, "business")[-1]
    equal(lines(business), [("system", "system_prompt", "sys"),
                            ("system", "summary", "SUMMARY"),
                            ("user", "user_ref", "Q" * 1597)], "the request after compaction")
    material = "\n".join(m["text"] for m in requests(trace, "compaction")[0]["view"]["messages"])
    expect("a" * 1000 in material and "b" * 1000 in material,
           "the summary request lacks Run 1's material")
    expect("Q" * 1597 not in material, "the new question was sent to be summarised",
           cites="CTX-8.64")


ROW_05 = Case(
    "ROW-05", "a new question that triggers compaction stays verbatim", "§12 row 5",
    ("CTX-4.18", "CTX-5.5", "CTX-5.7", "CTX-8.64", "CTX-9.25", "CTX-5.8"), boundary(1597),
    _row5_check, frozenset({"estimator_injection", "compaction_summary"}))


def _row5_snapshot_check(trace: Trace) -> None:
    # §9: the summary of Run 1 is committed as a snapshot before the request that uses it: the
    # request after compaction (its third, after Run 1's and the summary request) names it; the
    # request before compaction names none.
    equal([r["purpose"] for r in requests(trace)], ["business", "compaction", "business"],
          "requests")
    before, after = exactly(2, requests(trace, "business"), "business requests")
    equal(before["snapshot_id"], None, "the snapshot of Run 1's request")
    expect(after["snapshot_id"] is not None, "the request after compaction names no snapshot",
           cites="CTX-8.11")


ROW_05_SNAPSHOT = Case(
    "ROW-05-SNAPSHOT", "the request after the compaction a new question triggers names its "
    "snapshot", "§12 row 5", ("CTX-1.7", "CTX-8.11"), boundary(1597), _row5_snapshot_check,
    frozenset({"estimator_injection", "compaction"}))


# --- §12 row 6: a supplement during compaction ------------------------------------------------


def _row6_check(trace: Trace) -> None:
    # The supplement arrives while the first chunk is summarised: after the input cutoff of the
    # request being prepared, so not in it, and verbatim in the next request, one input later.
    business = requests(trace, "business")
    after_summary, next_loop = business[1], business[2]
    expect("late words" not in [m["text"] for m in after_summary["view"]["messages"]],
           "the supplement joined the request it arrived after", cites="CTX-5.29")
    equal([m["text"] for m in next_loop["view"]["messages"] if m["kind"] == "user_ref"],
          ["Q" * 1597, "late words"], "user inputs of the next request", cites="CTX-9.44")
    equal(next_loop["input_cutoff"], after_summary["input_cutoff"] + 1, "input cutoff",
          cites="CTX-5.28")


ROW_06 = Case(
    "ROW-06", "a supplement during compaction joins the next request", "§12 row 6",
    ("CTX-5.28", "CTX-5.29", "CTX-9.44", "CTX-8.72"), supplement_during_compaction(), _row6_check,
    frozenset({"estimator_injection", "compaction", "triggers"}))


# --- §12 row 11: still over the window after the summary --------------------------------------


def _row11_check(trace: Trace) -> None:
    # The example: three chunks summarised, the last summary still too long; Run 2 fails with
    # CONTEXT_WINDOW_EXCEEDED, no second compaction and nothing over the window is sent.
    equal([r["purpose"] for r in requests(trace)], ["business"] * 4 + ["compaction"] * 3,
          "requests")
    equal(endings(trace)[-1], (2, "failed", "CONTEXT_WINDOW_EXCEEDED"), "Run 2's ending",
          cites="CTX-11.4")
    ending_figures(trace, {"window": 4000}, "the window", cites="CTX-11.4")
    expect("You are" not in (of(trace, "run_ended")[-1]["message"] or ""),
           "the message shows the system prompt", cites="CTX-11.14")
    _within_window(trace)


ROW_11 = Case(
    "ROW-11", "still over the window after the summary ends the Run", "§12 row 11",
    ("CTX-8.53", "CTX-8.77", "CTX-11.4", "CTX-11.14", "CTX-8.15", "CTX-11.11", "CTX-7.17",
     "CTX-8.45", "CTX-7.13"),
    example("compaction-three-chunks-window-exceeded"), _row11_check,
    frozenset({"compaction", "estimator_injection"}))


# --- §12 row 20: an old summary over a modified record ----------------------------------------


def _row20_check(trace: Trace) -> None:
    # Loop 3 crosses the trigger (I = 4205 ≥ 3600, sessions.corrected_summary) and compacts in
    # two chunks. Before loop 4 a hook corrects the first decision, which the summary covers:
    # the snapshot no longer applies and the covered records come back as they are now —
    # I = 3 + 2 + 12 ("A, corrected") + 1500 + 700 + 500 + 1 ("C") + 1 ("x") = 2719.
    equal([r["purpose"] for r in requests(trace)],
          ["business", "business", "compaction", "compaction", "business", "business"],
          "requests")
    third, fourth = requests(trace)[4], requests(trace)[5]
    expect(third["snapshot_id"] is not None, "loop 3 uses no snapshot")
    expect(("system", "summary", "SUM2") in lines(third), "loop 3 lacks the summary")
    equal((fourth["snapshot_id"], fourth["compaction"], fourth["estimated_input_tokens"]),
          (None, "below_trigger", 2719), "loop 4", cites="CTX-9.28")
    texts = [m["text"] for m in fourth["view"]["messages"]]
    expect("A, corrected" in texts and "r" * 1500 in texts and "B" * 700 in texts,
           "loop 4 lacks the covered records as they are now", cites="CTX-9.27")
    expect(not any(kind == "summary" or "SUM" in text for _, kind, text in lines(fourth)),
           "loop 4 still shows the old summary")


ROW_20 = Case(
    "ROW-20", "a modified covered record retires the old summary", "§12 row 20",
    ("CTX-9.26", "CTX-9.27", "CTX-9.28", "CTX-9.32", "CTX-6.16"), corrected_summary(),
    _row20_check,
    frozenset({"hooks", "compaction", "estimator_injection"}))
