"""Conformance case for §6's protocol message group at a cut (ID ``S6-<name>``): a history
that must be cut to fit keeps each assistant call message with all its results or drops them
together, never a token tail with half a group (CTX-6.2, CTX-6.3). Its expected values are
derived by hand from the design (see conformance/case.py)."""

from typing import Any

from ctxspec.conformance.case import Case, Trace, base, endings, equal, expect, of, requests

# --- §6: a cut never splits a call from its result -----------------------------------------------

_ANSWER = "n" * 3000
"""Run 1's answer text beside its call: heavier than everything after it together, so that a
cut taken by tokens from the end falls between this call message and its short result."""


def _cut_scenario() -> dict[str, Any]:
    document = base(window=5000, tools=[{"name": "t"}])
    document["steps"] = [{"ask": "q" * 100}, {"advance": True}, {"ask": "Q" * 700},
                         {"advance": True}]
    document["model"] = {"business": [{"text": _ANSWER, "tool_calls": [{"name": "t"}]},
                                      {"text": "done"},
                                      {"text": "", "tool_calls": [{"name": "t"}]},
                                      {"text": "all done"}],
                         "compaction": [{"text": "SUM"}]}
    document["tools"] = {"t": [{"text": "x"}, {"text": "y"}]}
    return document


def _groups_whole(messages: list[dict[str, Any]], what: str) -> None:
    """Each call message is followed at once by one result per call, answering it in call
    order, and no result stands anywhere else (the group is whole or absent)."""
    waiting: list[str] = []
    for at, message in enumerate(messages):
        if message["kind"] in ("tool_result", "placeholder"):
            expect(bool(waiting) and message["call_id"] == waiting[0],
                   f"{what}, message {at}: a {message['kind']} for call {message['call_id']}, "
                   f"while the calls before it still waiting are {waiting} (§6: a group is "
                   "never cut, CTX-6.3)")
            waiting.pop(0)
            continue
        expect(not waiting, f"{what}, message {at} comes before the results of calls {waiting}")
        waiting = [call["call_id"] for call in message["tool_calls"]]
    expect(not waiting, f"{what}: calls {waiting} have no result in the request")


def _cut_check(trace: Trace) -> None:
    # Content estimator, one token a character: B = 5000 − 400 − 100 = 4500, trigger
    # floor(0.8 × 4500) = 3600. Run 1 stays below it (3 + 100 + 3000 + "x" 1 = 3104). Run 2's
    # first request carries 3104 + "done" 4 + 700 = 3808 ≥ 3600, so the history is cut to fit
    # there, and the 700 + 4 + 1 = 705 tokens of its tail up to Run 1's result leave no room
    # for the 3000-token call message before it: a cut by tokens from the end would keep the
    # result "x" and drop its call. Whatever the runtime keeps, each group is whole in every
    # business request.
    equal(endings(trace), [(1, "succeeded", None), (2, "succeeded", None)], "Run endings")
    equal([e["name"] for e in of(trace, "tool_executed")], ["t", "t"], "tools executed")
    for index, request in enumerate(requests(trace, "business")):
        _groups_whole(request["view"]["messages"], f"business request {index + 1}")


S6_CUT_KEEPS_GROUPS = Case(
    "S6-CUT-KEEPS-GROUPS", "a history cut to fit keeps each call with all its results or "
    "drops them together", "§6", ("CTX-6.3", "CTX-6.2"), _cut_scenario(), _cut_check,
    frozenset({"compaction"}))

CASES = (S6_CUT_KEEPS_GROUPS,)
