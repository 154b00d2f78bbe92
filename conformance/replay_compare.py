"""``ctxspec replay … --compare`` (issue #36): a runtime's run of a scenario beside the
reference's — the differences between the two traces as a list, then the two replay pages side
by side (each drawn by :mod:`replay_page`, in its own frame).

The differences compare what the design makes observable and no runtime chooses (the same
ground as the golden vectors, conformance/vectors.py): how each Run ended, the deliveries of
each input (an input named by its text, its ids being the runtime's own), the model requests
one by one (purpose, role, attempt, the §8 decision, I and the messages as a case compares
them, conformance/case.py ``said``), the tools executed and the hook decisions. A difference is
not a verdict — the design lets a runtime word and measure its own way — it shows where to look.
"""

from collections.abc import Mapping, Sequence
from typing import Any

from ctxspec.conformance.html_page import document, esc

Trace = Sequence[Mapping[str, Any]]
LIMIT = 40
"""Differences listed; more are counted."""


def _inputs(trace: Trace) -> dict[str, str]:
    """Each input id → how the page names it: its number in order of first delivery and the
    start of its text (from the request that showed it), so two runtimes' inputs line up."""
    texts: dict[str, str] = {}
    for event in trace:
        if event.get("kind") == "model_request":
            for message in event.get("view", {}).get("messages", ()):
                if message.get("input_id") and message.get("kind") == "user_ref":
                    texts.setdefault(message["input_id"], str(message.get("text", "")))
    names: dict[str, str] = {}
    for event in trace:
        if event.get("kind") == "delivery" and event.get("input_id") not in names:
            known = texts.get(event["input_id"])
            names[event["input_id"]] = repr(known[:30]) if known is not None else \
                f"input {len(names) + 1}"
    return names


def deliveries(trace: Trace) -> dict[str, list[str]]:
    """Per input (named as :func:`_inputs` does), each of its deliveries' states in order,
    without repeats: ``pending → claimed → carried``."""
    names = _inputs(trace)
    chains: dict[str, dict[str, list[str]]] = {}
    for event in trace:
        if event.get("kind") != "delivery":
            continue
        states = chains.setdefault(names[event["input_id"]], {}).setdefault(
            str(event.get("delivery_id")), [])
        if not states or states[-1] != event.get("state"):
            states.append(str(event.get("state")))
    return {name: [" → ".join(s) for s in per.values()] for name, per in chains.items()}


def _said(message: Mapping[str, Any], names: Mapping[str, str]) -> str:
    kind = message.get("kind")
    if kind == "outcome":
        return f"outcome: run {message.get('run_no')} {message.get('status')}"
    if kind == "marker" and message.get("input_id"):
        return f"marker: {names.get(message['input_id'], 'an input')} shown elsewhere"
    if kind == "placeholder":
        return "placeholder"
    text = message.get("body") if kind in ("summary", "fragment", "shared") else \
        message.get("text")
    return f"{message.get('role')} {kind}: {str(text)[:60]!r}"


def _requests(trace: Trace) -> list[dict[str, Any]]:
    names = _inputs(trace)
    return [{"purpose": e.get("purpose"), "role": e.get("role"), "attempt": e.get("attempt"),
             "§8": e.get("compaction"), "I": e.get("estimated_input_tokens"),
             "messages": [_said(m, names) for m in e.get("view", {}).get("messages", ())]}
            for e in trace if e.get("kind") == "model_request"]


def _listed(trace: Trace, kind: str, fields: Sequence[str]) -> list[str]:
    return [", ".join(str(e.get(f)) for f in fields) for e in trace if e.get("kind") == kind]


def _messages(number: int, theirs: Sequence[str], ours: Sequence[str]) -> list[str]:
    missing = [m for m in ours if m not in theirs]
    extra = [m for m in theirs if m not in ours]
    found = [f"request {number}: the runtime does not send {m}" for m in missing]
    found += [f"request {number}: the runtime sends {m}, the reference does not" for m in extra]
    if not found and list(theirs) != list(ours):
        found.append(f"request {number}: the same messages in another order")
    return found


def differences(reference: Trace, runtime: Trace) -> list[str]:
    """The differences between the reference's trace and the runtime's, in words."""
    found: list[str] = []
    found += _compare("Run endings", _listed(reference, "run_ended",
                                              ("run_no", "status", "error_code")),
                      _listed(runtime, "run_ended", ("run_no", "status", "error_code")))
    ours, theirs = deliveries(reference), deliveries(runtime)
    for name in [*ours, *(n for n in theirs if n not in ours)]:
        if ours.get(name) != theirs.get(name):
            found.append(f"deliveries of {name}: the reference "
                         f"{'; '.join(ours.get(name, [])) or 'none'}, the runtime "
                         f"{'; '.join(theirs.get(name, [])) or 'none'}")
    mine, other = _requests(reference), _requests(runtime)
    if len(mine) != len(other):
        found.append(f"model requests: the reference sends {len(mine)}, the runtime "
                     f"{len(other)}")
    for number, (ours_request, theirs_request) in enumerate(zip(mine, other, strict=False),
                                                            start=1):
        for key in ("purpose", "role", "attempt", "§8", "I"):
            if ours_request[key] != theirs_request[key]:
                found.append(f"request {number}: {key} {theirs_request[key]} (the reference: "
                             f"{ours_request[key]})")
        found += _messages(number, theirs_request["messages"], ours_request["messages"])
    found += _compare("tools executed", _listed(reference, "tool_executed",
                                                ("name", "effective_arguments")),
                      _listed(runtime, "tool_executed", ("name", "effective_arguments")))
    found += _compare("hook decisions", _listed(reference, "hook_decided",
                                                ("point", "decision")),
                      _listed(runtime, "hook_decided", ("point", "decision")))
    return found


def _compare(what: str, ours: Sequence[str], theirs: Sequence[str]) -> list[str]:
    if list(ours) == list(theirs):
        return []
    return [f"{what}: the reference {'; '.join(ours) or 'none'}, the runtime "
            f"{'; '.join(theirs) or 'none'}"]


CSS = """
.sides { display: grid; grid-template-columns: 1fr 1fr; gap: 12px; }
.sides iframe { width: 100%; height: 1400px; border: 1px solid #d0d7de; }
#differences li { background: #ffebe9; margin: 2px 0; padding: 2px 6px; }
.stopped { color: #cf222e; font-weight: 600; }
"""


def compare_html(title: str, runtime: str, found: Sequence[str],
                 sides: Sequence[tuple[str, str, str]]) -> str:
    """The compare page: ``found`` (the differences) listed first, then each side — (its
    label, why its run stopped short or "", its own replay page as HTML) — in a frame."""
    listed = "".join(f"<li>{esc(d)}</li>" for d in found[:LIMIT])
    if len(found) > LIMIT:
        listed += f"<li>… and {len(found) - LIMIT} more</li>"
    frames = "".join(
        f'<section data-side="{esc(label)}"><h2>{esc(label)}</h2>'
        + (f'<p class="stopped">{esc(stopped)}</p>' if stopped else "")
        + f'<iframe title="{esc(label)}" srcdoc="{esc(page)}"></iframe></section>'
        for label, stopped, page in sides)
    body = [f"<h1>Replay compared: {esc(title)}</h1>",
            f"<p>The reference runtime and {esc(runtime)}, on the same scenario.</p>",
            f"<h2>Differences ({len(found)})</h2>",
            f'<ul id="differences">{listed}</ul>' if found else
            '<p id="differences">None: the two traces agree on everything compared.</p>',
            '<p class="note">What is compared: Run endings, each input\'s deliveries, every '
            "model request sent (numbered in the order sent; kind, attempt, the §8 decision, I, "
            "its messages as a case compares them), tools executed, hook decisions. A "
            "difference is where to look, not a verdict: the case's check is.</p>",
            f'<div class="sides">{frames}</div>']
    return document(f"ctxspec replay --compare: {title}", CSS, "\n".join(body))


__all__ = ["compare_html", "deliveries", "differences"]
