"""Conformance cases for normative statements of §4 outside the §12 table and the worked
examples (IDs ``S4-<name>``): each a scenario and a predicate over the neutral trace, its
expected values derived by hand from the design (see conformance/case.py)."""

import json
from typing import Any

from ctxspec.conformance.case import (
    Case,
    Trace,
    base,
    equal,
    exactly,
    expect,
    lines,
    of,
    outcome,
    requests,
    result_facts,
)

# --- §4 statements: the current Run stands apart from ended history -----------------------------


def _current_run_scenario() -> dict[str, Any]:
    document = base(recent_runs=0, tools=[{"name": "t"}])
    document["steps"] = [{"ask": "q1"}, {"advance": True}, {"ask": "q2"}, {"advance": True}]
    document["model"] = {"business": [{"text": "a1"},
                                      {"text": "", "tool_calls": [{"name": "t"}]},
                                      {"text": "a2"}]}
    document["tools"] = {"t": [{"text": "tool says hi"}]}
    return document


def _current_run_check(trace: Trace) -> None:
    # recent_runs = 0 is allowed: Run 1 is older history only (question, result, status), while
    # Run 2 — the current Run, never one of the recent Runs to select — keeps its own decision
    # and tool result in its second request.
    last = requests(trace, "business")[-1]
    equal(lines(last), [("system", "system_prompt", "sys"), ("user", "user_ref", "q1"),
                        ("assistant", "assistant", "a1"),
                        outcome(1, "succeeded"),
                        ("user", "user_ref", "q2"), ("assistant", "assistant", ""),
                        ("tool", "tool_result", "tool says hi")], "Run 2's second request")


# --- §4 statements: recent Runs by question order and terminal state only -----------------------


def _recent_scenario() -> dict[str, Any]:
    document = base(tools=[{"name": "t"}])  # recent_runs left to its default
    document["steps"] = [{"ask": "q1"}, {"advance": True}, {"ask": "q2"}, {"advance": True},
                         {"ask": "q3"}, {"advance": True}, {"ask": "q4"}, {"advance": True}]
    document["model"] = {"business": [
        {"text": "", "tool_calls": [{"name": "t"}]}, {"text": "a long and useful answer " * 8},
        {"fail": "upstream_unavailable"}, {"fail": "upstream_unavailable"},
        {"text": "", "tool_calls": [{"name": "t"}]}, {"text": "a3"},
        {"text": "a4"}]}
    document["tools"] = {"t": [{"text": "t1 result"}, {"text": "t3 result"}]}
    return document


def _recent_check(trace: Trace) -> None:
    # recent_runs defaults to 2. For Run 4 the two latest ended Runs by question order are Runs
    # 2 and 3 — whatever their status: Run 2 failed before any output (both attempts), Run 1
    # succeeded with the longest answer. Runs 2 and 3 keep their whole process; Run 1, older,
    # keeps its question, final result and status, and loses its tool call and result.
    answer = "a long and useful answer " * 8
    equal(lines(requests(trace, "business")[-1]), [
        ("system", "system_prompt", "sys"),
        ("user", "user_ref", "q1"), ("assistant", "assistant", answer),
        outcome(1, "succeeded"),
        ("user", "user_ref", "q2"), outcome(2, "failed", final=False),
        ("user", "user_ref", "q3"), ("assistant", "assistant", ""),
        ("tool", "tool_result", "t3 result"), ("assistant", "assistant", "a3"),
        outcome(3, "succeeded"),
        ("user", "user_ref", "q4")], "Run 4's request")


# --- §4 statements: history shows the actual process, hook changes and denials included ---------


def _actual_process_scenario() -> dict[str, Any]:
    document = base(tools=[{"name": "write"}, {"name": "rm"}])
    document["steps"] = [{"ask": "q1"}, {"advance": True}, {"ask": "q2"}, {"advance": True},
                         {"read_history": {"kind": "audit"}}]
    document["model"] = {"business": [
        {"text": "", "tool_calls": [{"name": "write", "arguments": {"path": "a.md"}},
                                    {"name": "rm", "arguments": {"path": "x"}}]},
        {"text": "a1"}, {"text": "a2"}]}
    document["tools"] = {"write": [{"text": "wrote"}]}
    document["hooks"] = [
        {"point": "tool.pre_call", "ordinal": 1, "items": [
            {"decision": "allow",
             "payload_patch": [{"path": "arguments.path", "value": "reports/a.md"}]}]},
        {"point": "tool.pre_call", "ordinal": 2, "items": [{"decision": "deny"}]}]
    return document


def _calls(request: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(c["name"], json.loads(c["arguments"])) for m in request["view"]["messages"]
            for c in m["tool_calls"]]


def _actual_process_check(trace: Trace) -> None:
    # A pre-call hook moves write to reports/a.md, another denies rm. The raw proposal stays
    # a.md (the hook appended a change, it edited nothing); the handler ran with reports/a.md;
    # rm never ran.
    equal([(e["name"], e["proposed_arguments"], e["effective_arguments"])
           for e in of(trace, "tool_executed")],
          [("write", {"path": "a.md"}, {"path": "reports/a.md"})], "tools executed")
    first, loop2, run2 = exactly(3, requests(trace, "business"), "business requests")
    # The next loop reads the effective revision current at its own time: a later revision
    # of the one context than the first request's, with the moved path in it.
    [context] = first["frozen_revisions"]
    equal(list(loop2["frozen_revisions"]), [context], "the context the second loop reads")
    expect(loop2["frozen_revisions"][context] > first["frozen_revisions"][context],
           "the second loop reads no later revision than the first")
    # History is rebuilt from the effective revision, never from the raw proposal: Run 2 (Run
    # 1 is recent, so whole) shows write with reports/a.md, marked as modified, and rm's
    # explicit pre-call denial — not executed.
    for request, what in ((loop2, "the second loop"), (run2, "Run 2's request")):
        equal(_calls(request), [("write", {"path": "reports/a.md"}), ("rm", {"path": "x"})],
              f"the calls {what} shows")
        decision = next(m for m in request["view"]["messages"] if m["tool_calls"])
        expect(bool(decision["modified_by"]), f"{what}: the changed call is not marked")
        results = [m for m in request["view"]["messages"] if m["kind"] == "tool_result"]
        equal(results[0]["text"], "wrote", f"{what}: write's result")
        denied = result_facts(results[1], f"{what}: rm's result")
        equal((denied.get("status"), denied.get("stage"), denied.get("executed")),
              ("denied", "pre", False), f"{what}: rm's result")
    # The records behind it: each Run's question and answers, both results, none rewritten.
    equal(of(trace, "history_read")[0]["message_kinds"],
          ["user_ref", "assistant", "tool_result", "tool_result", "assistant", "user_ref",
           "assistant"], "the record kinds an audit read returns")


# --- §4 statements: a new Run projects afresh, never reusing another Run's summary --------------


def _fresh_projection_scenario() -> dict[str, Any]:
    """W = 5000, O = 400, S = 100: B = 4500, trigger 3600 (content estimator)."""
    document = base(window=5000)
    document["steps"] = [{"ask": "a" * 1000}, {"advance": True},
                         {"ask": "Q" * 1597}, {"advance": True},
                         {"ask": "q3"}, {"advance": True}]
    document["model"] = {"business": [{"text": "b" * 1000}, {"text": "done"}, {"text": "a3"}],
                         "compaction": [{"text": "SUMMARY-ONE"}, {"text": "SUMMARY-TWO"}]}
    return document


def _fresh_projection_check(trace: Trace) -> None:
    # Run 2: "sys" 3 + 1000 + 1000 + 1597 = 3600 ≥ 3600 (outcomes count 0): compacted, Run 2's
    # request carries SUMMARY-ONE. Run 3 must not reuse that summary in place of its recent
    # Runs: it projects Runs 1 and 2 from their records again — 3 + 2000 + 1597 + "done" 4 +
    # "q3" 2 = 3606 ≥ 3600 — so it starts its own episode, whose material holds Run 1's
    # original text, and its request carries SUMMARY-TWO, not SUMMARY-ONE.
    business = requests(trace, "business")
    equal([r["compaction"] for r in business], ["below_trigger", "compact", "compact"],
          "the §8 evaluation of each Run's request")
    # (Run 3's material, 3601 characters, goes in one chunk: F = 5, T = 400, and a chunk
    # carries W − 2T − S = 4100.)
    run3_start = trace.index(business[1])
    chunks = [r for r in requests(trace, "compaction") if trace.index(r) > run3_start]
    expect(bool(chunks), "Run 3 started no episode of its own")
    material = " ".join(m["text"] for r in chunks for m in r["view"]["messages"])
    expect("a" * 1000 in material and "SUMMARY-ONE" not in material,
           "Run 3's episode does not summarise Run 1's records afresh")
    summaries = [[text for _, kind, text in lines(r) if kind == "summary"] for r in business]
    equal(summaries, [[], ["SUMMARY-ONE"], ["SUMMARY-TWO"]],
          "the summaries the business requests carry")
    expect(business[2]["snapshot_id"] != business[1]["snapshot_id"],
           "Run 3's request names Run 2's snapshot")


CASES: tuple[Case, ...] = (
    Case("S4-CURRENT-RUN", "with recent_runs = 0 the current Run is still whole", "§4",
         ("CTX-4.1", "CTX-4.2"), _current_run_scenario(), _current_run_check),
    Case("S4-RECENT-BY-ORDER", "the recent Runs are the latest by question order, whatever "
         "their status or length", "§4", ("CTX-4.1", "CTX-4.3"), _recent_scenario(),
         _recent_check),
    Case("S4-ACTUAL-PROCESS", "history shows the effective calls and the denial, never the raw "
         "proposal", "§4", ("CTX-4.10", "CTX-1.6", "CTX-1.10", "CTX-1.11", "CTX-2.13",
                            "CTX-5.33"),
         _actual_process_scenario(), _actual_process_check, frozenset({"hooks", "history_api"})),
    Case("S4-FRESH-PROJECTION", "a new Run projects its history afresh, never reusing another "
         "Run's summary", "§4", ("CTX-4.21", "CTX-4.22"), _fresh_projection_scenario(),
         _fresh_projection_check, frozenset({"compaction", "estimator_injection"})),
)
