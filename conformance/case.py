"""What a conformance case is and how it reads the neutral trace (docs/architecture.md
"Layers"): a declarative scenario plus a predicate over the trace read back as plain JSON, so
a runtime in any language can pass it. The cases themselves are in ``cases.py`` (§12 rows and
worked examples) and ``crash_matrix.py`` (§10 crash points).
"""

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Trace = list[dict[str, Any]]
EXAMPLES = Path(__file__).resolve().parent.parent / "spec" / "examples"
"""docs/examples, linked into spec/ so the installed package carries them."""


class CaseFailure(AssertionError):
    """A case's expectation does not hold; the message says which and what was seen."""


@dataclass(frozen=True)
class Case:
    id: str
    title: str
    source: str
    """Where the case comes from: "§12 row 4", "§8 table row 1", "§10 crash matrix"."""
    requirements: tuple[str, ...]
    scenario: Mapping[str, Any]
    check: Callable[[Trace], None]
    needs: frozenset[str] = field(default_factory=frozenset)
    """Driver capabilities the case needs; a driver without one reports it unsupported."""
    refusal: str | None = None
    """For bad input: the error code the driver must refuse the scenario with, before any
    step runs; ``check`` then reads nothing."""
    baseline: Mapping[str, Any] | None = None
    """For a relational case: a scenario run first, on a fresh driver; ``compare`` then judges
    the case's trace against that one (a crashed Session against the same Session uncrashed)."""
    compare: Callable[[Trace, Trace], None] | None = None
    matrix: Mapping[str, str] | None = None
    """For a case generated from a matrix (conformance/matrix.py): its coordinate, one value
    per dimension, which ``ctxspec trace --matrix`` shows per requirement."""


COMPACTING = frozenset({"compaction", "estimator_injection"})
"""What a case that compacts at known token counts needs of a driver."""


def no_check(trace: Trace) -> None:
    """The check of a case that reads no trace: a refusal (``refusal``) or a relational case
    (``compare``)."""


# --- reading the trace ----------------------------------------------------------------------


def expect(condition: bool, message: str) -> None:
    if not condition:
        raise CaseFailure(message)


def equal(seen: object, expected: object, what: str) -> None:
    if seen != expected:
        raise CaseFailure(f"{what}: expected {expected!r}, saw {seen!r}")


def structured(text: str, what: str) -> Any:
    """A result the design makes structured (a placeholder, a denial, an item's error), read as
    JSON; anything else fails the case, naming ``what``."""
    try:
        return json.loads(text)
    except ValueError:
        raise CaseFailure(f"{what}: expected a structured (JSON) result, saw {text!r}") from None


def of(trace: Trace, kind: str) -> list[dict[str, Any]]:
    return [event for event in trace if event["kind"] == kind]


def requests(trace: Trace, purpose: str | None = None) -> list[dict[str, Any]]:
    return [e for e in of(trace, "model_request") if purpose in (None, e["purpose"])]


def sessions(trace: Trace) -> list[Trace]:
    """The trace cut into its Sessions at each ``session_opened`` event (a scenario's
    ``new_session`` step): the first Session's events come before the first one."""
    parts: list[Trace] = [[]]
    for event in trace:
        if event["kind"] == "session_opened":
            parts.append([])
        else:
            parts[-1].append(event)
    return parts


def digest(text: str) -> dict[str, Any]:
    """A text as a ``history_read`` with bodies shows it: characters and SHA-256 (hex) of its
    UTF-8 bytes, computed here from the text a case scripts."""
    return {"chars": len(text),
            "sha256": hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()}


def lines(request: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    return [(m["role"], m["kind"], m["text"]) for m in request["view"]["messages"]]


def rendered_marks(request: Mapping[str, Any], kind: str
                   ) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(message, mark) for every mark of ``kind`` in what the adapter sent for a request (its
    ``rendered`` messages). Cases read a mark's data — its call, range, ref, sources — never
    its words, which are the runtime's own."""
    return [(message, mark) for message in request["rendered"]["messages"]
            for mark in message["marks"] if mark["kind"] == kind]


def rendered_size(request: Mapping[str, Any]) -> int:
    """Characters of everything a rendered request carries as text: each message's content and
    each tool schema (with the character estimator, a lower bound of I)."""
    rendered = request["rendered"]
    return sum(len(m["content"]) for m in rendered["messages"]) + sum(
        len(schema) for schema in rendered["tool_schemas"])


def rendered_pairing(request: Mapping[str, Any]) -> None:
    """§6 as the provider sees it: every call of an assistant message is answered by exactly
    one tool message right after it (before any other message), in call order, and every tool
    message answers a call of the assistant message it follows."""
    messages = request["rendered"]["messages"]
    open_calls: list[str] = []
    for index, message in enumerate(messages):
        if message["role"] == "tool":
            expect(bool(open_calls) and message["tool_call_id"] == open_calls[0],
                   f"message {index}: a tool message answering {message['tool_call_id']}, "
                   f"while the calls waiting are {open_calls}")
            open_calls.pop(0)
            continue
        expect(not open_calls, f"message {index} ({message['role']}) comes before the results "
               f"of calls {open_calls}")
        open_calls = [call["id"] for call in message["tool_calls"]]
    expect(not open_calls, f"calls {open_calls} have no result in the request")


def endings(trace: Trace) -> list[tuple[int, str, str | None]]:
    """(run_no, status, error code) of every Run's last ending (a dead incarnation may have
    traced an ending it never committed; the restarted one traces it again)."""
    last: dict[int, tuple[int, str, str | None]] = {}
    for event in of(trace, "run_ended"):
        last[event["run_no"]] = (event["run_no"], event["status"], event["error_code"])
    return [last[n] for n in sorted(last)]


def delivery_chains(trace: Trace, input_id: str) -> list[tuple[str, list[str], str | None]]:
    """The deliveries of one input, in the order they appear: (delivery_id, its states without
    repeats, previous_delivery_id). The order of events inside one commit is not the design's
    concern, so cases compare each delivery's own states."""
    chains: dict[str, list[str]] = {}
    previous: dict[str, str | None] = {}
    for event in of(trace, "delivery"):
        if event["input_id"] == input_id:
            states = chains.setdefault(event["delivery_id"], [])
            if not states or states[-1] != event["state"]:
                states.append(event["state"])
            previous[event["delivery_id"]] = event["previous_delivery_id"]
    return [(delivery, states, previous[delivery]) for delivery, states in chains.items()]


def example(name: str) -> dict[str, Any]:
    """A worked example of docs/examples, as the scenario of a case."""
    path = EXAMPLES / f"{name}.json"
    document: dict[str, Any] = json.loads(path.read_text("utf-8"))
    return document


def base(**agent: Any) -> dict[str, Any]:
    """A scenario skeleton measured with the character estimator (one token per character)."""
    return {"scenario_version": 1, "name": "case", "steps": [],
            "agent": {"system_prompt": "sys", "window": 4000, "output_reserve": 400,
                      "safety_margin": 100, "estimator": "chars", **agent}}


