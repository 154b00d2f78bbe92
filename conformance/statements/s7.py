"""Conformance cases for normative statements of §7 outside the §12 table and the worked
examples (IDs ``S7-<name>``): each a scenario and a predicate over the neutral trace, its
expected values derived by hand from the design (see conformance/case.py)."""

from typing import Any

from ctxspec.conformance.case import (
    Case,
    Trace,
    base,
    endings,
    equal,
    expect,
    of,
    requests,
)

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
    # The provider answers context_length_exceeded: the role ends with that code and a message
    # giving the window and the estimate; the same request is never sent again.
    equal(len(requests(trace)), 1, "requests sent")
    equal(endings(trace), [(1, "failed", "CONTEXT_LENGTH_EXCEEDED")], "Run endings")
    message = of(trace, "run_ended")[-1]["message"]
    expect(message is not None and "window is 4000" in message,
           f"the message does not give the window: {message!r}")


CASES: tuple[Case, ...] = (
    Case("S7-BYTES-CJK", "the byte estimator counts CJK text by its UTF-8 bytes", "§7",
         ("CTX-7.20",), _cjk_scenario(), _cjk_check,
         frozenset({"estimator_injection"})),
    Case("S7-PROVIDER-REFUSES", "context_length_exceeded ends the role and is never retried",
         "§7", ("CTX-7.23", "CTX-7.24"), _refused_scenario(), _refused_check),
)
