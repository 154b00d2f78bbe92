"""What a conformance case is and how it reads the neutral trace (docs/architecture.md
"Layers"): a declarative scenario plus a predicate over the trace read back as plain JSON, so
a runtime in any language can pass it. The cases themselves are listed by ``cases.py``
and written in ``rows/`` (§12 rows), ``worked_examples.py``, ``bad_input.py``, ``statements/``,
``matrix.py`` and ``crash_matrix.py`` (§10 crash points).
"""

import difflib
import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from ctxspec.conformance.reads import selected

Trace = list[dict[str, Any]]
T = TypeVar("T")
EXAMPLES = Path(__file__).resolve().parent.parent / "spec" / "examples"
"""docs/examples, linked into spec/ so the installed package carries them."""


class CaseFailure(AssertionError):
    """A case's expectation does not hold; the message says which and what was seen.
    ``requirement``: the ID of the requirement that expectation checks, when the check names
    it (``cites=``); None: the case's own first requirement (conformance/verdicts.py)."""

    def __init__(self, message: str, requirement: str | None = None) -> None:
        super().__init__(message)
        self.requirement = requirement


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


def expect(condition: bool, message: str, cites: str | None = None) -> None:
    """Fail with ``message`` unless ``condition``; ``cites``: the requirement this expectation
    checks, when it is not the case's first one."""
    if not condition:
        raise CaseFailure(message, cites)


def equal(seen: object, expected: object, what: str, cites: str | None = None) -> None:
    """Fail naming ``what``, expected and seen, unless they are equal; ``cites`` as for
    :func:`expect`."""
    if seen != expected:
        raise CaseFailure(f"{what}: {difference(expected, seen)}", cites)


LONG = 48
"""Texts longer than this are shown elided around their middle in a failure's detail."""
DIFF_LINES = 20


def short(value: object) -> str:
    """``repr`` with every long text elided (its start, its end and its length kept), so a
    detail stays readable whatever the scenario's texts are."""
    if isinstance(value, str):
        if len(value) <= LONG:
            return repr(value)
        return repr(value[:24]) + f" …({len(value)} characters)… " + repr(value[-12:])
    if isinstance(value, tuple):
        inner = ", ".join(short(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if isinstance(value, list):
        return "[" + ", ".join(short(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{short(k)}: {short(v)}" for k, v in value.items()) + "}"
    return repr(value)


def difference(expected: object, seen: object) -> str:
    """Expected against seen: on one line when short, else — for two sequences — the items
    that differ as a diff (``-`` expected, ``+`` seen) of at most DIFF_LINES lines."""
    line = f"expected {short(expected)}, saw {short(seen)}"
    if len(line) <= 160 or not (isinstance(expected, list | tuple)
                                and isinstance(seen, list | tuple)):
        return line
    diff = [d for d in difflib.ndiff([short(e) for e in expected], [short(s) for s in seen])
            if not d.startswith("?")]
    if len(diff) > DIFF_LINES:
        changed = [i for i, d in enumerate(diff) if not d.startswith("  ")]
        start = max(0, (changed[0] if changed else 0) - 2)
        diff = [*diff[start:start + DIFF_LINES], f"  … ({len(diff) - DIFF_LINES} more lines)"]
    return "expected (-) and seen (+) differ:\n" + "\n".join(diff)


def structured(text: str, what: str) -> Any:
    """A result the design makes structured (a placeholder, a denial, an item's error), read as
    JSON; anything else fails the case, naming ``what``."""
    try:
        return json.loads(text)
    except ValueError:
        raise CaseFailure(f"{what}: expected a structured (JSON) result, saw {text!r}") from None


def result_facts(message: dict[str, Any], what: str) -> dict[str, Any]:
    """What a tool result view message stands for (its ``result_facts``: a denial's status,
    stage, executed and result_delivered; an error's status and code), whatever its wording
    (Q210); a message without them fails the case, naming ``what`` and the missing field."""
    facts = message.get("result_facts")
    if not isinstance(facts, dict):
        raise CaseFailure(f"{what}: the tool_result view message carries no result_facts (the "
                          "denial or error it stands for, docs/implementing-a-driver.md); its "
                          f"text is {message.get('text')!r}")
    return facts


def exactly(count: int, events: Sequence[T], what: str, cites: str | None = None) -> list[T]:
    """``events`` when there are ``count`` of them, to unpack; otherwise a failure naming
    ``what`` and how many the trace shows (an empty trace, an extra request), never a
    ``ValueError`` of the unpacking that would read as the suite's fault."""
    if len(events) != count:
        raise CaseFailure(f"{what}: expected {count}, the trace shows {len(events)}", cites)
    return list(events)


def the(events: Iterable[T], missing: str, cites: str | None = None) -> T:
    """The first of ``events``; when there is none, a failure that names in words what the
    trace lacks (``missing``: "no delivery event with state carried", …)."""
    for event in events:
        return event
    raise CaseFailure(f"the trace has {missing}", cites)


def of(trace: Trace, kind: str) -> list[dict[str, Any]]:
    """The events of ``kind``; picking them reads which there are (conformance/reads.py)."""
    events = [event for event in trace if event["kind"] == kind]
    selected(trace, kind, events)
    return events


def requests(trace: Trace, purpose: str | None = None) -> list[dict[str, Any]]:
    """The model requests of ``purpose`` (all when None). Picking them is no read of their
    ``purpose`` (conformance/reads.py): comparing it is."""
    picked = [e for e in of(trace, "model_request") if purpose in (None, dict.get(e, "purpose"))]
    if purpose is not None:
        selected(trace, f"model_request[{purpose}]", picked)
    return picked


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


def taken_over(check: Callable[[Trace], None]) -> Callable[[Trace], None]:
    """``check`` of a Session whose runtime dies once at the scenario's ``crash``: first that
    it was taken over exactly once (one ``restarted`` event, §10) — else the check would judge
    a Session that never crashed."""
    def crashed(trace: Trace) -> None:
        equal(len(of(trace, "restarted")), 1, "restarts (the scenario's one crash)")
        check(trace)
    crashed.__doc__ = check.__doc__
    return crashed


def result_ref(text: str) -> str:
    """A result_ref as the model names it (§6): ``sha256:`` and the hex SHA-256 of the body's
    UTF-8 bytes, computed here from the text a case scripts."""
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def request_text(request: Mapping[str, Any]) -> str:
    """Everything a request shows, its messages' texts and calls, as one string to search."""
    return "\n".join(m["text"] + "".join(c["arguments"] + c["name"] for c in m["tool_calls"])
                     for m in request["view"]["messages"])


def digest(text: str) -> dict[str, Any]:
    """A text as a ``history_read`` with bodies shows it: characters and SHA-256 (hex) of its
    UTF-8 bytes, computed here from the text a case scripts."""
    return {"chars": len(text),
            "sha256": hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()}


WORDED = {"outcome": "system", "marker": "system", "placeholder": "tool",
          "fragment": "system", "summary": "system", "shared": "system",
          "annotation": "system"}
"""Message kinds whose wording and protocol role the runtime chooses (the design fixes what
they stand for, not how they read): a case compares their structure, never their text."""


def said(message: Mapping[str, Any]) -> tuple[str, str, str]:
    """A view message as a case compares it: (role, kind, text) for what the scenario, the
    user or the model wrote; for a message the runtime words, what it stands for — an outcome
    its Run and status (:func:`outcome`), a marker the input it points at (or the orphaned
    result it carries), a placeholder its call, a summary, fragment, shared field or
    annotation the text it carries verbatim (``body``)."""
    kind = message["kind"]
    if kind not in WORDED:
        return message["role"], kind, message["text"]
    if kind == "outcome":
        return outcome(message["run_no"], message["status"], message["final_result"])
    if kind == "placeholder":
        return WORDED[kind], kind, f"call {message['call_id']}"
    if kind == "marker" and message.get("input_id") is not None:
        return WORDED[kind], kind, f"input {message['input_id']}"
    return WORDED[kind], kind, message["body"]


def outcome(run_no: int, status: str, final: bool = True) -> tuple[str, str, str]:
    """An outcome message as :func:`said` reads it: Run ``run_no`` ended ``status``, with or
    without a final result."""
    return "system", "outcome", f"run {run_no} {status}" + ("" if final else
                                                              ", no final result")


def lines(request: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """The messages of a request as a case compares them (:func:`said`)."""
    return [said(m) for m in request["view"]["messages"]]


def rendered_mark(request: Mapping[str, Any], kind: str
                  ) -> tuple[dict[str, Any], dict[str, Any]]:
    """(message, mark) for the one mark of ``kind`` in what the adapter sent for a request (its
    ``rendered`` messages); none or several fail the case. Cases read a mark's data — its call,
    range, ref, sources — never its words, which are the runtime's own."""
    found = [(message, mark) for message in request["rendered"]["messages"]
             for mark in message["marks"] if mark["kind"] == kind]
    equal(len(found), 1, f"{kind} marks in what the provider receives")
    return found[0]


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


def ending_figures(trace: Trace, expected: Mapping[str, int], what: str,
                   cites: str | None = None) -> None:
    """A window error's figures as the last Run ending carries them, compared as numbers,
    never as the words of its message, which are the runtime's own (#32, Q294, Q295); a
    runtime that traces no figures is judged on the ending alone."""
    figures = of(trace, "run_ended")[-1].get("figures")
    if figures is not None:
        equal({key: figures.get(key) for key in expected}, dict(expected),
              f"the ending's figures ({what})", cites=cites)


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


def two_call_batch() -> dict[str, Any]:
    """The tool-batch-hook example without its pre-call hook: one decision with two calls,
    their results and the answer — a Run's records for a case whose rule reads no hook."""
    document = example("tool-batch-hook")
    del document["hooks"]
    return document


def base(**agent: Any) -> dict[str, Any]:
    """A scenario skeleton measured with the character estimator (one token per character)."""
    return {"scenario_version": 1, "name": "case", "steps": [],
            "agent": {"system_prompt": "sys", "window": 4000, "output_reserve": 400,
                      "safety_margin": 100, "estimator": "content", **agent}}


