"""The design's worked examples as conformance cases (IDs ``EX<section>-<name>``): §3's
write(path) and its conflicting variants, §7's budget, §4's older Run, and §8's table. Each case
stands beside its scenario and check; expected values are derived by hand in the check."""

from typing import Any

from ctxspec.conformance.case import (
    COMPACTING,
    Case,
    Trace,
    base,
    delivery_chains,
    ending_figures,
    endings,
    equal,
    exactly,
    lines,
    of,
    outcome,
    requests,
    result_facts,
)
from ctxspec.conformance.sessions import path_seen_by_model, write_path

# --- §3 worked example: write(path), and its conflicting variants ------------------------------

_MOVE = {"path": "arguments.path", "value": "reports/a.md"}
_ELSEWHERE = {"target": "call", "field": "tool_call:{call_id}.arguments.path",
              "value": "other/a.md"}


def _write_check(trace: Trace) -> None:
    # The hook moves only the payload path: the handler and the effective call record both use
    # reports/a.md, while the proposal (the raw model response) keeps a.md.
    equal([(e["proposed_arguments"], e["effective_arguments"])
           for e in of(trace, "tool_executed")],
          [({"path": "a.md"}, {"path": "reports/a.md"})], "write's arguments")
    equal(path_seen_by_model(trace), "reports/a.md", "the path in the effective call record",
          cites="CTX-3.69")


EX3_WRITE = Case(
    "EX3-WRITE", "write(path): the hook's path is what runs and what is recorded",
    "§3 example", ("CTX-3.57", "CTX-3.69", "CTX-3.42"), write_path(
        {"decision": "allow", "payload_patch": [_MOVE]}), _write_check,
    frozenset({"hooks"}))


def _write_conflict_check(trace: Trace) -> None:
    # The same item also sets the call's path in the context to other/a.md: every patch of the
    # item is invalid (HOOK_PATCH_CONFLICT); the allow goes on fail-open with the effective path
    # from before the item, a.md — never one path executed and another recorded.
    equal([(d["decision"], d["patch_valid"], d["diagnostics"]) for d in of(trace, "hook_decided")],
          [("allow", False, ["HOOK_PATCH_CONFLICT"])], "the hook's decision")
    equal([e["effective_arguments"] for e in of(trace, "tool_executed")], [{"path": "a.md"}],
          "write's effective arguments")
    equal(path_seen_by_model(trace), "a.md", "the path in the effective call record")
    equal(endings(trace), [(1, "succeeded", None)], "Run endings")


EX3_WRITE_CONFLICT = Case(
    "EX3-WRITE-CONFLICT", "write(path) with a conflicting context path keeps a.md",
    "§3 example", ("CTX-3.59", "CTX-3.41", "CTX-3.42"), write_path(
        {"decision": "allow", "payload_patch": [_MOVE], "context_patch": [_ELSEWHERE]}),
    _write_conflict_check, frozenset({"hooks"}))


def _deny_conflict_check(trace: Trace) -> None:
    # A legitimate deny with an invalid patch still blocks: nothing runs, the refusal and the
    # patch diagnostics are kept — a conflicting patch never turns a deny into an allow.
    equal([(d["decision"], d["patch_valid"], d["diagnostics"]) for d in of(trace, "hook_decided")],
          [("deny", False, ["HOOK_PATCH_CONFLICT"])], "the hook's decision")
    equal(of(trace, "tool_executed"), [], "tools executed")
    result = next(m for m in requests(trace, "business")[1]["view"]["messages"]
                  if m["kind"] == "tool_result")
    equal(result_facts(result, "write's result").get("status"), "denied", "write's result")


EX3_DENY_CONFLICT = Case(
    "EX3-DENY-CONFLICT", "a deny with a conflicting patch still blocks", "§3 example",
    ("CTX-3.59", "CTX-3.70", "CTX-3.41"), write_path(
        {"decision": "deny", "payload_patch": [_MOVE], "context_patch": [_ELSEWHERE]}),
    _deny_conflict_check, frozenset({"hooks"}))


# --- §7 worked example: W = 128K, O = 8K, S = 1280 ------------------------------------------------


def _ex7_scenario() -> dict[str, Any]:
    document = base(window=128 * 1024, output_reserve=8 * 1024, safety_margin=1280)
    document["steps"] = [{"ask": "hello"}, {"advance": True}]
    document["model"] = {"business": [{"text": "hi"}]}
    return document


def _ex7_check(trace: Trace) -> None:
    # B = W − O − S = 131072 − 8192 − 1280 = 121600; the trigger is floor(0.8 × B) = 97280
    # (the design's "about 95K", 1K = 1024); the request reserves O for the output.
    [request] = exactly(1, requests(trace), "model requests")
    equal((request["window"], request["output_reserve"], request["safety_margin"],
           request["input_budget"], request["trigger_threshold"], request["max_output_tokens"]),
          (131072, 8192, 1280, 121600, 97280, 8192), "the request's budget")


EX7_BUDGET = Case(
    "EX7-BUDGET", "W=128K, O=8K, S=1280 gives B=121600 and a trigger near 95K",
    "§7 example", ("CTX-7.12", "CTX-7.15", "CTX-7.16", "CTX-7.3"), _ex7_scenario(),
    _ex7_check,
    frozenset({"estimator_injection"}))


# --- §4 worked example: an older Run keeps its question, supplements, result and status ------


def _ex4_scenario() -> dict[str, Any]:
    document = base(tools=[{"name": "search"}])
    document["steps"] = [{"ask": "写部署方案"}, {"supplement": "只用 Docker"},
                         {"supplement": "不开放公网端口"}, {"advance": True},
                         {"ask": "q2"}, {"advance": True}, {"ask": "q3"}, {"advance": True},
                         {"ask": "q4"}, {"advance": True}]
    document["model"] = {"business": [{"text": "", "tool_calls": [{"name": "search"}]},
                                      {"text": "方案见……"}, {"text": "a2"}, {"text": "a3"},
                                      {"text": "a4"}]}
    document["tools"] = {"search": [{"text": "docker docs"}]}
    return document


def _ex4_check(trace: Trace) -> None:
    # Four questions, recent_runs = 2: Run 1 is older than Runs 2 and 3, so the fourth request
    # shows its question, both supplements, its final result and its end state — the four kinds
    # of §4's text — and none of its tool process; Runs 2 and 3 show their process and status.
    equal(lines(requests(trace, "business")[-1]), [
        ("system", "system_prompt", "sys"),
        ("user", "user_ref", "写部署方案"), ("user", "user_ref", "只用 Docker"),
        ("user", "user_ref", "不开放公网端口"), ("assistant", "assistant", "方案见……"),
        outcome(1, "succeeded"),
        ("user", "user_ref", "q2"), ("assistant", "assistant", "a2"),
        outcome(2, "succeeded"),
        ("user", "user_ref", "q3"), ("assistant", "assistant", "a3"),
        outcome(3, "succeeded"),
        ("user", "user_ref", "q4")], "the fourth Run's request")
    equal([e["name"] for e in of(trace, "tool_executed")], ["search"], "tools executed")


EX4_OLDER_RUN = Case(
    "EX4-OLDER-RUN", "an older Run keeps question, supplements, result and status",
    "§4 example", ("CTX-4.4", "CTX-4.5", "CTX-4.6", "CTX-4.8", "CTX-4.15", "CTX-4.16"),
    _ex4_scenario(), _ex4_check)


# --- §8 worked table: B = 100000, O = 8192 -------------------------------------------------------
#
# The table gives B and O only; W = 110000 and S = 1808 make B = 110000 − 8192 − 1808 = 100000
# (Q5), and no provider output limit is known. With the content estimator (one token per
# character of the scenario's text, the runtime's markers and envelopes 0), F counts "sys" (3),
# the current question and supplements; M = I − F is Run 1's question and answer. Run 1 stays
# below the trigger floor(0.8 × 100000) = 80000 on its own.


def _table(fixed: int, material: int, summary: int = 0, supplement: int = 0) -> dict[str, Any]:
    document = base(window=110_000, output_reserve=8192, safety_margin=1808)
    current = [{"ask": "Q" * (fixed - 3 - supplement)}]
    if supplement:
        current.append({"supplement": "S" * supplement})
    if material:
        asked = material // 2
        document["steps"] = [{"ask": "m" * asked}, {"advance": True}, *current,
                             {"advance": True}]
        document["model"] = {"business": [{"text": "n" * (material - asked)},
                                          {"text": "done"}],
                             "compaction": [{"text": "s" * summary}]}
    else:  # no material: the question alone is the whole request (F = I)
        document["steps"] = [{"ask": "Q" * (fixed - 3)}, {"advance": True}]
        document["model"] = {"business": [{"text": "done"}]}
    return document


def _sent(trace: Trace) -> list[tuple[str, int | None, int, str | None]]:
    """Purpose, I, max_output_tokens and §8 decision of each request. A compaction request's
    own I is left out (None): it depends on the prompt a runtime writes for its summariser."""
    return [(r["purpose"], r["estimated_input_tokens"] if r["purpose"] == "business" else None,
             r["max_output_tokens"], r["compaction"]) for r in requests(trace)]


def _table_row1(trace: Trace) -> None:
    # F=65000, M=20000, I=85000 ≥ 80000: H = 35000, P = min(8192, 35000) = 8192,
    # C = min(8192, 25000, 8192) = 8192, D = 60000 − 65000 = −5000 ≤ 0 → T = C = 8192.
    # A summary of 8192 gives 65000 + 8192 = 73192 ≤ B: the business request goes.
    equal(_sent(trace)[1:], [("compaction", None, 8192, None),
                             ("business", 73_192, 8192, "compact")], "Run 2's requests",
          cites="CTX-8.56")
    equal(endings(trace), [(1, "succeeded", None), (2, "succeeded", None)], "Run endings")


EX8_ROW1 = Case(
    "EX8-ROW1", "F=65000, M=20000: T=8192, the request goes at 73192", "§8 table row 1",
    ("CTX-8.34", "CTX-8.35", "CTX-8.36", "CTX-8.37", "CTX-8.38", "CTX-8.56", "CTX-8.14"),
    _table(65_000, 20_000, summary=8192), _table_row1, COMPACTING)


def _table_row2(trace: Trace) -> None:
    # F=79000, M=6000: H = 21000, T = 8192; 79000 + 8192 = 87192 is still ≥ 80000 but ≤ B, so the
    # business request goes and no second episode is started for it.
    equal(_sent(trace)[1:], [("compaction", None, 8192, None),
                             ("business", 87_192, 8192, "compact")], "Run 2's requests",
          cites="CTX-8.57")
    equal(endings(trace)[-1], (2, "succeeded", None), "Run 2's ending")


EX8_ROW2 = Case(
    "EX8-ROW2", "F=79000, M=6000: still above 80% after the summary, sent once",
    "§8 table row 2", ("CTX-8.30", "CTX-8.52", "CTX-8.55", "CTX-8.57", "CTX-9.37"),
    _table(79_000, 6000, summary=8192), _table_row2, COMPACTING)


def _table_row3(trace: Trace) -> None:
    # F=96000, M=6000, I=102000 > B: H = 4000, P = min(8192, 4000) = 4000, C = 4000, D < 0 →
    # T = 4000. An over-window source still compacts; 96000 + 4000 = 100000 = B fits
    # (I + O + S = 110000 = W).
    equal(_sent(trace)[1:], [("compaction", None, 4000, None),
                             ("business", 100_000, 8192, "compact")], "Run 2's requests",
          cites="CTX-8.58")
    equal(endings(trace)[-1], (2, "succeeded", None), "Run 2's ending")


EX8_ROW3 = Case(
    "EX8-ROW3", "F=96000, M=6000: an over-window source compacts with T=4000",
    "§8 table row 3", ("CTX-8.46", "CTX-8.58"), _table(96_000, 6000, summary=4000),
    _table_row3, COMPACTING)


def _table_row4(trace: Trace) -> None:
    # F=100000 with material: H = 0, no room for any summary → CONTEXT_PROTECTED_INPUT_TOO_LARGE;
    # nothing is summarised and no request leaves without the question.
    equal([r["purpose"] for r in requests(trace)], ["business"], "requests (Run 1's only)")
    equal(endings(trace)[-1], (2, "failed", "CONTEXT_PROTECTED_INPUT_TOO_LARGE"), "Run 2's ending")
    # I = F + M = 100000 + 6000, B = 110000 - 8192 - 1808.
    ending_figures(trace, {"input_tokens": 106_000, "input_budget": 100_000},
                   "the request's size and the budget")


EX8_ROW4 = Case(
    "EX8-ROW4", "F=100000 with material: no room for a summary", "§8 table row 4",
    ("CTX-8.50", "CTX-8.59", "CTX-7.32"), _table(100_000, 6000), _table_row4,
    COMPACTING)


def _table_row5(trace: Trace) -> None:
    # No material, I = 85000 ≥ 80000 but ≤ B: the evaluation records no_compressible_material
    # and the request goes; the 60% soft target fails nothing.
    equal(_sent(trace), [("business", 85_000, 8192, "no_compressible_material")], "requests")
    equal(endings(trace), [(1, "succeeded", None)], "Run endings")


EX8_ROW5 = Case(
    "EX8-ROW5", "no compressible material at I=85000: recorded, and the request goes",
    "§8 table row 5", ("CTX-8.30", "CTX-8.47", "CTX-8.48", "CTX-8.60"),
    _table(85_000, 0), _table_row5, frozenset({"estimator_injection"}))


def _table_row6_scenario() -> dict[str, Any]:
    """Row 6 with a provider that cuts at max_output_tokens (Q68): it counts the summary as
    T = 8191 tokens and reports so; the runtime's estimator counts its 8192 characters."""
    document = _table(91_809, 6000, summary=8192, supplement=31_776)
    document["model"]["limit_output"] = True
    document["model"]["compaction"][0]["usage"] = {"output_tokens": 8191}
    return document


def _table_row6(trace: Trace) -> None:
    # F = 91809 with a supplement of Run 2 (within its input cutoff, Q52): H = 8191 → T = 8191.
    # The provider counts its summary as T tokens (it is not cut, Q68), the estimator as one
    # more — estimates are not the provider's count (§7); re-assembled
    # with the question and the supplement, I = 91809 + 8192 = 100001 > B: the Run ends,
    # no business request is sent, no second compaction, and the supplement is kept — carried
    # to the next question, not dropped.
    equal(_sent(trace)[1:], [("compaction", None, 8191, None)], "Run 2's requests",
          cites="CTX-8.61")
    equal(endings(trace)[-1], (2, "failed", "CONTEXT_WINDOW_EXCEEDED"), "Run 2's ending")
    ending_figures(trace, {"input_tokens": 100_001}, "the re-assembled size")
    # The supplement is the last input received; its own delivery ends carried (the order of
    # two delivery events of one commit is not the design's, #32, Q294).
    supplement = list(dict.fromkeys(e["input_id"] for e in of(trace, "delivery")))[-1]
    equal(delivery_chains(trace, supplement)[0][1][-1], "carried",
          "the supplement's delivery after Run 2", cites="CTX-8.81")


EX8_ROW6 = Case(
    "EX8-ROW6", "re-assembled at 100001 after the summary: ended, supplement kept",
    "§8 table row 6", ("CTX-8.53", "CTX-8.61", "CTX-8.81", "CTX-9.37", "CTX-7.32"),
    _table_row6_scenario(), _table_row6, COMPACTING | {"usage_reports"})


CASES: tuple[Case, ...] = (
    EX3_WRITE, EX3_WRITE_CONFLICT, EX3_DENY_CONFLICT, EX7_BUDGET, EX4_OLDER_RUN, EX8_ROW1,
    EX8_ROW2, EX8_ROW3, EX8_ROW4, EX8_ROW5, EX8_ROW6,
)
