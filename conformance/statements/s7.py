"""Conformance cases for normative statements of §7 outside the §12 table and the worked
examples (IDs ``S7-<name>``): each a scenario and a predicate over the neutral trace, its
expected values derived by hand from the design (see conformance/case.py)."""

from collections.abc import Callable
from typing import Any

from ctxspec.conformance.case import (
    COMPACTING,
    Case,
    Trace,
    base,
    ending_figures,
    endings,
    equal,
    exactly,
    expect,
    lines,
    no_check,
    of,
    requests,
)
from ctxspec.conformance.sessions import boundary, corrected_summary

# --- §7 statements: the conservative estimator, the provider's refusal --------------------------


def _cjk_scenario() -> dict[str, Any]:
    document = base(estimator="bytes")
    document["steps"] = [{"ask": "部署方案"}, {"advance": True}]
    document["model"] = {"business": [{"text": "好"}]}
    return document


def _cjk_check(trace: Trace) -> None:
    # The byte estimator (docs/scenarios.md): 8 per request + per message its role's and text's
    # UTF-8 bytes + 8. "sys" as system: 6 + 3 + 8 = 17; "部署方案" as user: 4 + 4 × 3 + 8 = 24;
    # I = 8 + 17 + 24 = 49 — a character count would say 41.
    equal([r["estimated_input_tokens"] for r in requests(trace)], [49], "I of the request")


def _refused_scenario() -> dict[str, Any]:
    document = base()
    document["steps"] = [{"ask": "hello"}, {"advance": True}]
    document["model"] = {"business": [{"context_length_exceeded": True}]}
    return document


def _refused_check(trace: Trace) -> None:
    # The provider answers context_length_exceeded: the role ends with that code, telling the
    # window and the estimate; the same request is never sent again. The window and the
    # estimate are compared as the figures the ending carries, never as the words of its
    # message, which are the runtime's own (#32, Q294); a runtime that traces no figures is
    # judged on the ending alone.
    sent = requests(trace)
    equal(len(sent), 1, "requests sent")
    equal(endings(trace), [(1, "failed", "CONTEXT_LENGTH_EXCEEDED")], "Run endings")
    ending_figures(trace, {"window": 4000, "input_tokens": sent[0]["estimated_input_tokens"]},
                   "window, estimated input")



# --- §7 statements: the budget's defaults and overrides, as every request reports them ------------


def _budget_scenario(**agent: Any) -> dict[str, Any]:
    """One question, one answer, with only the given budget fields set (the chars estimator)."""
    document = base(**agent)
    for name in ("output_reserve", "safety_margin"):
        if name not in agent:
            del document["agent"][name]
    document["steps"] = [{"ask": "hi"}, {"advance": True}]
    document["model"] = {"business": [{"text": "ok"}]}
    return document


def _budget_check(window: int, reserve: int, margin: int, budget: int, trigger: int
                  ) -> Callable[[Trace], None]:
    def check(trace: Trace) -> None:
        [request] = exactly(1, requests(trace), "model requests")
        equal((request["window"], request["output_reserve"], request["safety_margin"],
               request["input_budget"], request["trigger_threshold"]),
              (window, reserve, margin, budget, trigger), "(W, O, S, B, trigger) of the request")
        equal(endings(trace), [(1, "succeeded", None)], "Run endings")
    return check


def _hook_then_compact_check(trace: Trace) -> None:
    # B = 5000 − 400 − 100 = 4500, trigger floor(0.8 × 4500) = 3600. Loop 3's chain replaces
    # the first decision's text (record and field, not a list position) by "Z" × 1500, the
    # same length: I = "sys" 3 + "go" 2 + 1500 + 1500 + 700 + 500 = 4205 ≥ 3600 (the calls'
    # framing and the schema count 0), so that loop compacts. §7: the material comes from the
    # committed effective context — the corrected text, never the old one — and the same call
    # does not run its completed hooks again: one pre-request chain per business loop (4).
    equal([r["purpose"] for r in requests(trace)],
          ["business", "business", "compaction", "compaction", "business", "business"],
          "requests")
    material = "".join(m["text"] for r in requests(trace, "compaction")
                       for m in r["view"]["messages"])
    expect("Z" * 1500 in material, "the summary material lacks the hook's correction")
    expect("A" * 1500 not in material, "the summary material holds the text before the hook")
    equal([(e["point"], e["stage"]) for e in of(trace, "hook_called")],
          [("model.pre_request", "pre")] * 4, "hook chains asked (one per business loop)")
    third = requests(trace, "business")[2]
    expect(third["snapshot_id"] is not None, "loop 3 is sent without the new snapshot")
    expect(("user", "user_ref", "go") in lines(third), "loop 3 lost the question")
    expect(third["estimated_input_tokens"] + third["max_output_tokens"]
           + third["safety_margin"] <= third["window"], "loop 3 exceeds the hard window")
    equal(endings(trace), [(1, "succeeded", None)], "Run endings")


def _hook_over_budget_scenario() -> dict[str, Any]:
    document = base(window=40_000, output_reserve=20_000, summary_target=50,
                    tools=[{"name": "t"}])
    document["steps"] = [{"ask": "go"}, {"advance": True}]
    document["model"] = {"business": [{"text": "", "tool_calls": [{"name": "t"}]},
                                      {"text": "done"}],
                         "compaction": [{"text": "SUM"}]}
    document["tools"] = {"t": [{"text": "r"}]}
    document["hooks"] = [{"point": "model.pre_request", "ordinal": 2, "items": [
        {"context_patch": [{"target": "last", "field": "text",
                            "operation": "append_annotation", "value": "N" * 20_000}]}]}]
    return document


def _hook_over_budget_check(trace: Trace) -> None:
    # B = 40000 − 20000 − 100 = 19900. Loop 2's hook annotates the tool result — compressible
    # material, not a protected input — making I = 3 + 2 + 1 + 20000 = 20006 > B before
    # compaction (the call's framing and the schema count 0). §7: the item is legitimate and
    # goes through CompactionPolicy — allowed, its patch valid, no diagnostic — and the
    # annotation is
    # summarised (T = 50 leaves one chunk room for all of it). The business request then
    # carries "sys", "go" and the summary: I = 3 + 2 + 3 = 8.
    equal([(d["decision"], d["patch_valid"], d["diagnostics"]) for d in of(trace, "hook_decided")],
          [("allow", True, [])], "the hook item's decision")
    equal([r["purpose"] for r in requests(trace)], ["business", "compaction", "business"],
          "requests")
    material = "".join(m["text"] for m in requests(trace, "compaction")[0]["view"]["messages"])
    expect("N" * 20_000 in material, "the hook's annotation was not summarised")
    business = requests(trace, "business")[1]
    equal(sorted(lines(business)), sorted([("system", "system_prompt", "sys"),
                                           ("user", "user_ref", "go"),
                                           ("system", "summary", "SUM")]),
          "the business request's messages")
    equal(business["estimated_input_tokens"], 8, "I of the business request")
    equal(endings(trace), [(1, "succeeded", None)], "Run endings")


def _annotated_question(*sizes: int) -> dict[str, Any]:
    """One question, "short question" (14), whose pre-request chain has one item per size,
    each annotating the question with that many "N"s."""
    document = base(window=3000, output_reserve=500)
    document["steps"] = [{"ask": "short question"}, {"advance": True}]
    document["model"] = {"business": [{"text": "ok"}]}
    document["hooks"] = [{"point": "model.pre_request", "items": [
        {"context_patch": [{"target": "question", "field": "text",
                            "operation": "append_annotation", "value": "N" * size}]}
        for size in sizes]}]
    return document


def _fixed_too_big_check(trace: Trace) -> None:
    # B = 3000 − 500 − 100 = 2400; the fixed input is "sys" 3 + the question 14 = 17. An
    # annotation of the current question rides with it as fixed material (Q56): the first
    # item's 2383 characters bring F to 2400 = B and fit; the second item's one more character
    # cannot fit by itself, so that item alone is discarded (ITEM_DOES_NOT_FIT) and the first
    # one's annotation stays. Nothing is compressible: the request goes at I = 2400.
    equal([(d["decision"], d["patch_valid"], d["diagnostics"]) for d in of(trace, "hook_decided")],
          [("allow", True, []), ("allow", False, ["ITEM_DOES_NOT_FIT"])], "the items' decisions")
    [request] = exactly(1, requests(trace), "model requests")
    equal(lines(request), [("system", "system_prompt", "sys"),
                           ("user", "user_ref", "short question"),
                           ("system", "annotation", "N" * 2383)], "the request")
    equal((request["estimated_input_tokens"], request["compaction"]),
          (2400, "no_compressible_material"), "I and the compaction verdict")
    equal(endings(trace), [(1, "succeeded", None)], "Run endings")


def _fixed_kept_scenario() -> dict[str, Any]:
    document = boundary(question_length=1000)
    document["hooks"] = [{"point": "model.pre_request", "ordinal": 2, "items": [
        {"context_patch": [{"target": "question", "field": "text",
                            "operation": "append_annotation", "value": "N" * 600}]}]}]
    return document


def _fixed_kept_check(trace: Trace) -> None:
    # The row 4 Session (B = 4500, trigger 3600) with a 1000-character second question: Run 2's
    # request is I = 2027 + 1000 = 3027 until its chain annotates the question with 600 "N"s:
    # 3627 ≥ 3600. Run 1's 2024 characters are summarised; the annotation, fixed material of
    # the current question, is not — it is sent verbatim after the question, and nothing of it
    # is in the compaction material.
    equal([r["purpose"] for r in requests(trace)], ["business", "compaction", "business"],
          "requests")
    material = "".join(m["text"] for m in requests(trace, "compaction")[0]["view"]["messages"])
    expect("a" * 1000 in material and "b" * 1000 in material, "Run 1 was not summarised")
    expect("N" * 600 not in material, "the question's annotation was sent to be summarised")
    equal(lines(requests(trace, "business")[1]),
          [("system", "system_prompt", "sys"),
           ("system", "summary", "SUMMARY"),
           ("user", "user_ref", "Q" * 1000), ("system", "annotation", "N" * 600)],
          "Run 2's request")
    equal(endings(trace), [(1, "succeeded", None), (2, "succeeded", None)], "Run endings")


def _whole_request_scenario() -> dict[str, Any]:
    document = base(tools=[{"name": "read", "schema": {
        "type": "object", "description": "Read one file of the workspace."}}])
    document["steps"] = [{"ask": "hello"}, {"advance": True}]
    document["model"] = {"business": [
        {"text": "", "tool_calls": [{"name": "read", "arguments": {"path": "notes.txt"}}]},
        {"text": "ok"}]}
    document["tools"] = {"read": [{"text": "contents"}]}
    document["hooks"] = [{"point": "model.pre_request", "ordinal": 1, "items": [
        {"context_patch": [{"target": "question", "field": "text",
                            "operation": "append_annotation", "value": "NOTE"}]}]}]
    return document


def _whole_request_check(trace: Trace) -> None:
    # The content estimator: one token per character of the scenario's text wherever the
    # request carries it — the tool schema's description "Read one file of the workspace."
    # (31) included, the schema's own format and the call's framing not (docs/implementing-a-
    # driver.md). Request 1: system "sys" 3 + the current input "hello" 5 + the hook's
    # legitimate annotation "NOTE" 4 + the schema's description 31 = 43 — measured after the
    # hook, schema included. Request 2 adds the history: the call's argument "notes.txt" (9)
    # and its result "contents" (8): 43 + 9 + 8 = 60.
    first = requests(trace)[0]
    expect(("system", "annotation", "NOTE") in lines(first),
           "the first request lacks the hook's annotation")
    equal([r["estimated_input_tokens"] for r in requests(trace)], [43, 60],
          "I of the two requests (system, schema, history, input and hook addition counted)")
    equal(endings(trace), [(1, "succeeded", None)], "Run endings")


# --- §7 statements: the provider's actual usage is audit data ---------------------------------

USAGE = frozenset({"usage_reports", "estimator_injection"})
"""What a case about reported usage needs: a driver that passes a scripted model's usage on
and traces it (``model_usage``), measured with the chars estimator."""


def _audited_scenario() -> dict[str, Any]:
    document = base(tools=[{"name": "t"}])
    document["steps"] = [{"ask": "hello"}, {"advance": True}]
    document["model"] = {"business": [
        {"text": "", "tool_calls": [{"name": "t"}],
         "usage": {"input_tokens": 80, "output_tokens": 12}},
        {"text": "ok", "usage": {"input_tokens": 40, "output_tokens": 3}}]}
    document["tools"] = {"t": [{"text": "r"}]}
    return document


def _audited_check(trace: Trace) -> None:
    # The content estimator: request 1 is "sys" 3 + "hello" 5 = 8 (t's schema and the call's
    # framing count 0); request 2 adds the result "r" 1: 9. The provider reports 80 and 40
    # input tokens: the requests keep their estimates (and O = 400), and each answer's usage is
    # reported beside its request's estimate with the deviation 80 − 8 = 72 and 40 − 9 = 31.
    sent = requests(trace)
    equal([(r["estimated_input_tokens"], r["max_output_tokens"]) for r in sent],
          [(8, 400), (9, 400)], "(I, max_output_tokens) of the requests as sent")
    equal([(u["purpose_key"], u["attempt"], u["estimated_input_tokens"], u["input_tokens"],
            u["output_tokens"], u["input_deviation"]) for u in of(trace, "model_usage")],
          [(sent[0]["purpose_key"], 1, 8, 80, 12, 72), (sent[1]["purpose_key"], 1, 9, 40, 3,
                                                        31)],
          "the usage reported (request, attempt, estimate, input, output, deviation)")
    equal(endings(trace), [(1, "succeeded", None)], "Run endings")


def _reporting(document: dict[str, Any], input_tokens: int, output_tokens: int
               ) -> dict[str, Any]:
    """The same Session, its model reporting this usage with every answer."""
    usage = {"input_tokens": input_tokens, "output_tokens": output_tokens}
    return {**document, "model": {purpose: [{**answer, "usage": usage} for answer in script]
                                  for purpose, script in document["model"].items()}}


def _sent_as(trace: Trace) -> list[tuple[Any, ...]]:
    """Each request as sent: purpose, attempt, messages, I, max_output_tokens, §8 decision."""
    return [(r["purpose"], r["attempt"], lines(r), r["estimated_input_tokens"],
             r["max_output_tokens"], r["compaction"]) for r in requests(trace)]


def _usage_check(input_tokens: int, output_tokens: int, business: list[int]
                 ) -> Callable[[Trace], None]:
    def check(trace: Trace) -> None:
        # Every answer reported (input_tokens, output_tokens): each is audited once, beside
        # the estimate its request was sent with; the business requests keep the estimates
        # derived by hand (sessions.boundary).
        sent = requests(trace)
        equal([r["estimated_input_tokens"] for r in requests(trace, "business")], business,
              "I of the business requests")
        equal([(u["purpose_key"], u["attempt"], u["estimated_input_tokens"], u["input_tokens"],
                u["output_tokens"], u["input_deviation"]) for u in of(trace, "model_usage")],
              [(r["purpose_key"], r["attempt"], r["estimated_input_tokens"], input_tokens,
                output_tokens, input_tokens - r["estimated_input_tokens"]) for r in sent],
              "the usage reported for each request")
    return check


def _usage_compare(trace: Trace, baseline: Trace) -> None:
    # §7: the reported usage changes no request — the same requests with the same messages,
    # estimates, max_output_tokens and §8 decisions as the Session whose model reports none —
    # and the same Run endings.
    equal(_sent_as(trace), _sent_as(baseline), "the requests sent")
    equal(endings(trace), endings(baseline), "Run endings")


def _refused(**agent: Any) -> dict[str, Any]:
    document = _budget_scenario(**agent)
    document["model"] = {"business": [{"text": "never asked"}]}
    return document


CASES: tuple[Case, ...] = (
    Case("S7-BYTES-CJK", "the byte estimator counts CJK text by its UTF-8 bytes", "§7",
         ("CTX-7.20",), _cjk_scenario(), _cjk_check,
         frozenset({"estimator_injection"})),
    Case("S7-PROVIDER-REFUSES", "context_length_exceeded ends the role and is never retried",
         "§7", ("CTX-7.23", "CTX-7.24"), _refused_scenario(), _refused_check),
    # W = 100001, nothing set: O = min(4096 [M unknown], floor(100001 / 4) = 25000) = 4096;
    # S = max(256, ceil(1000.01)) = 1001; B = 100001 − 4096 − 1001 = 94904; r = 0.80:
    # trigger floor(0.8 × 94904) = floor(75923.2) = 75923.
    Case("S7-DEFAULTS-LARGE-WINDOW", "O and S defaults on a large window, r = 0.80", "§7",
         ("CTX-7.5", "CTX-7.6", "CTX-7.9", "CTX-7.14"), _budget_scenario(window=100_001),
         _budget_check(100_001, 4096, 1001, 94_904, 75_923),
         frozenset({"estimator_injection"})),
    # W = 8000, M = 3000: O = min(3000, floor(8000 / 4) = 2000) = 2000; S = max(256, 80) = 256;
    # B = 8000 − 2000 − 256 = 5744; trigger floor(4595.2) = 4595.
    Case("S7-DEFAULTS-SMALL-WINDOW", "O is a quarter of a small window; S is at least 256",
         "§7", ("CTX-7.5", "CTX-7.6", "CTX-7.9", "CTX-7.14"),
         _budget_scenario(window=8000, max_output=3000),
         _budget_check(8000, 2000, 256, 5744, 4595),
         frozenset({"estimator_injection"})),
    # W = 8000, M = 1500 below floor(W/4) = 2000: O = 1500; S = 256; B = 6244; r = "0.75":
    # trigger floor(0.75 × 6244) = floor(4683) = 4683.
    Case("S7-DEFAULTS-MODEL-OUTPUT", "O is the model's known maximum output; r as set",
         "§7", ("CTX-7.5", "CTX-7.10", "CTX-7.14"),
         _budget_scenario(window=8000, max_output=1500, trigger_ratio="0.75"),
         _budget_check(8000, 1500, 256, 6244, 4683),
         frozenset({"estimator_injection"})),
    # Explicit O = 700 wins over min(1500, 2000), explicit S = 50 over 256: B = 8000 − 700 − 50
    # = 7250; r = "0.5": trigger 3625.
    Case("S7-EXPLICIT-BUDGET", "explicit O, S and r are used as set", "§7",
         ("CTX-7.4", "CTX-7.6", "CTX-7.10"),
         _budget_scenario(window=8000, max_output=1500, output_reserve=700, safety_margin=50,
                          trigger_ratio="0.5"),
         _budget_check(8000, 700, 50, 7250, 3625),
         frozenset({"estimator_injection"})),
    # B = 1000 − 500 − 500 = 0: B must be > 0.
    Case("S7-BUDGET-ZERO", "B = 0 is an invalid configuration", "§7", ("CTX-7.8",),
         _refused(window=1000, output_reserve=500, safety_margin=500), no_check,
         frozenset({"estimator_injection"}), refusal="BUDGET_CONFIGURATION_INVALID"),
    # r = 1 is outside 0 < r < 1.
    Case("S7-RATIO-ONE", "a trigger ratio of 1 is an invalid configuration", "§7", ("CTX-7.10",),
         _refused(window=1000, trigger_ratio="1"), no_check,
         frozenset({"estimator_injection"}), refusal="BUDGET_CONFIGURATION_INVALID"),
    # W = 3: the default O = min(4096, floor(3 / 4) = 0) = 0 — a window known to be unusable
    # is a configuration error, refused before any request, not a request that fails later.
    Case("S7-WINDOW-WRONG", "a window no request can fit is a configuration error", "§7",
         ("CTX-7.22",), _refused(window=3), no_check,
         frozenset({"estimator_injection"}), refusal="BUDGET_CONFIGURATION_INVALID"),
    Case("S7-ESTIMATE-WHOLE-REQUEST", "I counts system, tool schemas, history, the current "
         "input and the hook's addition", "§7", ("CTX-7.11",), _whole_request_scenario(),
         _whole_request_check, frozenset({"hooks", "estimator_injection"})),
    Case("S7-HOOK-THEN-COMPACT", "compaction summarises the hook-corrected context and asks "
         "no hook again", "§7", ("CTX-7.26", "CTX-7.27", "CTX-7.28"),
         corrected_summary(ordinal=3, correction="Z" * 1500), _hook_then_compact_check,
         frozenset({"hooks", "compaction", "estimator_injection"})),
    Case("S7-USAGE-AUDITED", "reported usage is traced beside the estimate with its "
         "deviation; the requests keep their estimates", "§7", ("CTX-7.21",),
         _audited_scenario(), _audited_check, USAGE),
    # boundary(1596): Run 1 is I = 3 + 1000 = 1003, Run 2 is 3599, one below the trigger; a
    # usage of a million tokens per answer must not make Run 2 compact or fail.
    Case("S7-USAGE-HUGE", "a huge reported usage changes no request", "§7", ("CTX-7.21",),
         _reporting(boundary(1596), 1_000_000, 1_000_000), _usage_check(
             1_000_000, 1_000_000, [1003, 3599]), USAGE, baseline=boundary(1596),
         compare=_usage_compare),
    # boundary(1597): Run 2 is I = 3600, at the trigger, and compacts; after the summary it is
    # "sys" 3 + "SUMMARY" 7 + the question 1597 = 1607 (the envelope counts 0). A usage of
    # one token per answer must not stop the compaction.
    Case("S7-USAGE-TINY", "a tiny reported usage changes no request", "§7", ("CTX-7.21",),
         _reporting(boundary(1597), 1, 1), _usage_check(1, 1, [1003, 1607]),
         USAGE | COMPACTING, baseline=boundary(1597), compare=_usage_compare),
    Case("S7-HOOK-OVER-BUDGET", "a hook addition over B is compacted, not judged failed", "§7",
         ("CTX-7.31",), _hook_over_budget_scenario(), _hook_over_budget_check,
         frozenset({"hooks", "compaction", "estimator_injection"})),
    Case("S7-HOOK-FIXED-TOO-BIG", "a hook item whose fixed material cannot fit by itself is "
         "discarded; the earlier item's stays", "§7", ("CTX-7.30",),
         _annotated_question(2383, 1), _fixed_too_big_check,
         frozenset({"hooks", "estimator_injection"})),
    Case("S7-HOOK-FIXED-KEPT", "a hook's annotation of the current question is fixed: sent "
         "verbatim, never summarised", "§7", ("CTX-7.30", "CTX-8.26"), _fixed_kept_scenario(),
         _fixed_kept_check, frozenset({"hooks", "compaction", "estimator_injection"})),
)
