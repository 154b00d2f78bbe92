"""A conformance case for §8's trigger over a history that holds a call a stop left without a
result (ID ``S8-STOPPED-CALL-COMPACTS``): the call has no result for ever — §6 shows it with a
placeholder, or a runtime drops it — and it must never keep the material around it from being
compacted once a later request reaches the trigger, so every later request stays within B
(CTX-7.12, CTX-7.17). The public report google/adk-python#7236 (an orphaned function_call
silently blocks every later compaction) is caught by it (tests/real_bugs/). Its expected
values are derived by hand from the design (see conformance/case.py)."""

from typing import Any

from ctxspec.conformance.case import Case, Trace, base, endings, equal, expect, requests


def _scenario() -> dict[str, Any]:
    document = base(window=5000, tools=[{"name": "t"}])
    document["steps"] = [{"ask": "go"}, {"advance": True},
                         {"ask": "a" * 1900}, {"advance": True},
                         {"ask": "b" * 1900}, {"advance": True},
                         {"ask": "c" * 800}, {"advance": True}]
    # Run 1's only answer proposes t while the user's stop is in flight: the call never runs.
    document["model"] = {"business": [{"text": "", "tool_calls": [{"name": "t"}]},
                                      {"text": "x" * 10}, {"text": "y" * 10}, {"text": "z"}],
                         "compaction": [{"text": "SUMMARY"}] * 2}
    document["tools"] = {"t": [{"text": "never"}]}
    document["triggers"] = [{"on": {"purpose": "business", "ordinal": 1}, "do": {"stop": True}}]
    return document


def _check(trace: Trace) -> None:
    # Content estimator, one token a character: B = 5000 − 400 − 100 = 4500, trigger
    # floor(0.8 × 4500) = 3600. Run 1 stops with t's call unanswered (its placeholder, or
    # nothing, counts 0). Run 2's request is 3 + 2 + 1900 = 1905, below the trigger. Run 3's
    # would be 1905 + "x" × 10 + 1900 = 3815 ≥ 3600: the material of the older Runs — the
    # stopped call among it — is compacted, for that request or, by a runtime that compacts
    # later, before a later one. Without any compaction Run 4's request would be 3815 + 10 +
    # 800 = 4625 > B, which is never sent: so Run 4's request carries a summary and stays
    # within B, however the runtime treats the call that has no result. (The compaction script
    # has two answers: a runtime that keeps the last two Runs whole, as recent_runs = 2 says,
    # compacts in Run 3 and again, in one chunk, in Run 4.)
    equal(endings(trace), [(1, "stopped", None), (2, "succeeded", None),
                           (3, "succeeded", None), (4, "succeeded", None)], "Run endings")
    last = requests(trace, "business")[-1]
    kinds = [m["kind"] for m in last["view"]["messages"]]
    expect("summary" in kinds, f"Run 4's request carries no summary: its messages are {kinds}")
    expect(last["estimated_input_tokens"] <= last["input_budget"],
           f"Run 4's request is I = {last['estimated_input_tokens']} > B = "
           f"{last['input_budget']}", "CTX-7.17")


CASES: tuple[Case, ...] = (
    Case("S8-STOPPED-CALL-COMPACTS", "a call a stop left without a result never keeps later "
         "material from being compacted", "§8", ("CTX-7.12", "CTX-7.17"), _scenario(), _check,
         frozenset({"stop", "triggers", "compaction_summary", "estimator_injection"})),
)
