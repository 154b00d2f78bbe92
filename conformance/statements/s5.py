"""Conformance cases for normative statements of §5 outside the §12 table and the worked
examples (IDs ``S5-<name>``): each a scenario and a predicate over the neutral trace, its
expected values derived by hand from the design (see conformance/case.py)."""

from typing import Any

from ctxspec.conformance.case import (
    Case,
    Trace,
    base,
    delivery_chains,
    endings,
    equal,
    lines,
    of,
    requests,
)

# --- §5 statement: a retry sends the frozen request ----------------------------------------------


def _retry_scenario() -> dict[str, Any]:
    document = base()
    document["steps"] = [{"ask": "q1"}, {"advance": True}]
    document["model"] = {"business": [{"fail": "reset"}, {"text": "done"}]}
    document["triggers"] = [{"on": {"purpose": "business", "ordinal": 1},
                             "do": {"supplement": "late words"}}]
    return document


def _retry_check(trace: Trace) -> None:
    # The supplement arrives while attempt 1 is in flight, after the request was frozen. §5:
    # a retry uses the same frozen version and input list — attempt 2 sends exactly what
    # attempt 1 did; the late supplement waits (there is no next loop: it is carried).
    attempt1, attempt2 = requests(trace, "business")
    equal((attempt1["attempt"], attempt2["attempt"]), (1, 2), "attempts")
    equal(lines(attempt2), lines(attempt1), "attempt 2's messages")
    equal(endings(trace), [(1, "succeeded", None)], "Run endings")
    chains = delivery_chains(trace, of(trace, "delivery")[-1]["input_id"])
    equal([states for _, states, _ in chains], [["pending", "carried"], ["pending"]],
          "the late supplement's deliveries: never claimed, carried to the next question")
    equal(chains[1][2], chains[0][0], "the carried delivery's successor points back")


CASES: tuple[Case, ...] = (
    Case("S5-RETRY-FROZEN", "a retry sends the frozen request, not a supplement that came later",
         "§5", ("CTX-5.31", "CTX-5.32"), _retry_scenario(), _retry_check,
         frozenset({"triggers"})),
)
