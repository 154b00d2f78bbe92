"""The crash matrix (§10, §12 rows 9, 10, 21-23): every phase the design names
(conformance/phases.py) each worked example passes through, each occurrence, a crash just before
and just after it — as relational conformance cases. A crashed Session must end as the same
driver's uncrashed Session does: the same requests with the same messages, no request asked
again whose answer was saved, no tool run more often, no hook asked more often, the same Run
endings. Where the design allows a difference it says so: only the answer in flight when the
crash came is asked again, a tool that started but never saved its result is reported
UNKNOWN_OUTCOME (Q44) instead of being re-run, and a hook running at the crash is dropped (Q50).

``REFUSED_COMMITS`` are two more: the tool example with the store refusing its inputs' commit or
its batch's feedback (``"when": "fails"``), judged as a crash just before it once the refusal
is surfaced (Q64, Q542). Where requests differ because one went out again after the restart
under a new key, the failure names it as asked again.

A case needs ``crash:<phase>``: a driver maps each phase it declares onto one of its commits
(the reference onto its own, docs/recovery.md). ``CRASH_POINTS`` lists how often each example
passes each phase (tests/test_crash_matrix.py checks the table against the reference).
"""

import json
import re
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from ctxspec.conformance.case import (
    Case,
    Trace,
    endings,
    equal,
    example,
    expect,
    no_check,
    of,
    requests,
)
from ctxspec.conformance.phases import crash_need
from ctxspec.conformance.sessions import hooked_executor_answer

EXAMPLES: Mapping[str, tuple[str, frozenset[str]]] = {
    "TOOLS": ("tool-batch-hook", frozenset({"hooks"})),
    "CHUNKS": ("compaction-three-chunks-window-exceeded",
               frozenset({"compaction", "estimator_injection"})),
    "RUNS": ("supplements-across-runs", frozenset({"stop"})),
    "PLANNER": ("planner-two-executors", frozenset({"planner_executor", "triggers"})),
}
"""Short name → (worked example, the capabilities it needs besides crash points)."""

CRASH_POINTS: Mapping[str, Mapping[str, int]] = {
    # One question, one decision with two calls (each with a pre-call hook), one answer.
    "TOOLS": {"session_opened": 1, "input_accepted": 1, "request_frozen": 2, "first_output": 2,
              "raw_answer_saved": 2, "effective_result_committed": 2, "hook_started": 2,
              "hook_decided": 2, "tool_started": 2, "tool_settled": 2, "batch_fed_back": 1,
              "run_finalised": 1},
    # Two questions, three tool loops, one episode of three chunks (each saves its raw answer,
    # then commits its summary and the cursor), then the window is exceeded.
    "CHUNKS": {"session_opened": 1, "input_accepted": 2, "request_frozen": 4, "first_output": 4,
               "raw_answer_saved": 4, "effective_result_committed": 4, "tool_started": 3,
               "tool_settled": 3, "batch_fed_back": 3, "episode_started": 1,
               "chunk_answer_saved": 3, "chunk_committed": 3, "snapshot_published": 1,
               "run_finalised": 2},
    # Four questions and three supplements; Run 2's model fails twice, Run 3 is stopped before
    # its request (a stop is written outside a step: not a crash point).
    "RUNS": {"session_opened": 1, "input_accepted": 7, "request_frozen": 3, "attempt_failed": 1,
             "first_output": 2, "raw_answer_saved": 2, "effective_result_committed": 2,
             "run_finalised": 4},
    # A Planner delegating to two Executors (one greps, with a supplement sent meanwhile).
    "PLANNER": {"session_opened": 1, "input_accepted": 3, "request_frozen": 7, "first_output": 3,
                "raw_answer_saved": 7, "effective_result_committed": 7, "tool_started": 2,
                "tool_settled": 2, "batch_fed_back": 3, "execution_started": 2,
                "execution_ended": 2, "run_finalised": 2},
}

FOCUSED: Mapping[str, tuple[Callable[[], dict[str, Any]], frozenset[str],
                            Mapping[str, tuple[int, ...]]]] = {
    # A Planner whose Executor's answer a model.post_response hook rewrites (conformance/
    # sessions.py): every commit of the Executor's execution — its request frozen, its raw
    # answer saved, its effective result, the post-response chain marked and decided, the
    # execution ended. The Planner's own commits are those PLANNER crosses already.
    "HOOKED": (hooked_executor_answer, frozenset({"hooks", "planner_executor"}), {
        "execution_started": (1,), "request_frozen": (2,), "raw_answer_saved": (2,),
        "effective_result_committed": (2,), "hook_started": (2,), "hook_decided": (2,),
        "execution_ended": (1,)}),
}
"""Sessions crossed at chosen commits only (short name → scenario builder, capabilities,
commit → occurrences), each before and after: the crashed Planner must still receive the
Executor's effective answer, as the uncrashed one does."""

LOST_ANSWER = frozenset({("first_output", "before"), ("first_output", "after"),
                         ("raw_answer_saved", "before"), ("attempt_failed", "before"),
                         ("chunk_answer_saved", "before")})
"""Crash points at which the answer to the request in flight (a business answer, a failure, a
chunk summary) was not saved yet: that one request is asked again, once. A chunk's raw answer is
saved (chunk_answer_saved) before its post-response chain (§8, CTX-8.70), so a crash before
chunk_committed post-processes the saved answer and asks nothing again (CTX-9.43)."""

UNKNOWN_TOOL = frozenset({("tool_started", "after"), ("tool_settled", "before")})
"""Crash points at which a tool may have acted but its result was not saved."""

INSIDE_A_TOOL = frozenset({("PLANNER", "input_accepted", 2)})
"""Commits a runtime may make while a tool runs: the planner example's trigger sends a
supplement during the first Executor's grep. When the input is committed is the runtime's (the
design fixes only that it is received): one that commits it at once dies with the grep's
outcome unknown, one that commits it later does not. The case takes the outcome the crashed
trace shows — the unknown outcome told, or nothing lost (#32, Q294)."""

HOOK_DROPPED = frozenset({("hook_started", "after"), ("hook_decided", "before")})
"""Crash points at which a hook was running: its outcome is unknown, so by the hook failure
rule only its item is dropped (Q50) and the call runs as it was before the hook — the same
tools, possibly with other arguments."""

SPARE = {"text": "(a spare answer: the model saw an unknown tool outcome)"}
"""Appended to the crashed Session's scripts where a tool's outcome becomes unknown: the model
then reads an error instead of the result and its Session may take another turn."""

REQUIREMENTS = ("CTX-10.2", "CTX-10.6", "CTX-10.9", "CTX-10.12", "CTX-10.17", "CTX-10.19",
                "CTX-3.11", "CTX-3.66", "CTX-10.11", "CTX-10.15", "CTX-10.21", "CTX-9.45")
"""CTX-9.45: a chunk whose answer was in flight (before CHUNK_RAW_SAVED) is asked again, once,
as an attempt — never taken as done because a blob exists."""

_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _masked(request: dict[str, Any]) -> list[tuple[str, str, str]]:
    """A request's messages, identifiers masked (a restarted runtime may mint new ones)."""
    return [(m["role"], m["kind"], _UUID.sub("<id>", m["text"]))
            for m in request["view"]["messages"]]


def _sent(trace: Trace) -> list[list[tuple[str, str, str]]]:
    """Every distinct request (purpose_key, attempt) in first-sent order, as the messages it
    carried, identifiers masked."""
    seen: dict[tuple[str, int], list[tuple[str, str, str]]] = {}
    for request in requests(trace):
        seen.setdefault((request["purpose_key"], request["attempt"]), _masked(request))
    return list(seen.values())


def asked_again(trace: Trace) -> list[tuple[str, str]]:
    """Requests the restarted runtime sent with the messages and the attempt of one sent
    before the restart, under another ``purpose_key``: (the first key, the key it came back
    under). A runtime that mints new identities after a restart shows a repeated request only
    this way; the key counts of :func:`same_requests`' callers miss it."""
    restart = next((i for i, e in enumerate(trace) if e["kind"] == "restarted"), None)
    if restart is None:
        return []
    first: dict[tuple[Any, ...], str] = {}
    again: list[tuple[str, str]] = []
    for index, event in enumerate(trace):
        if event["kind"] != "model_request":
            continue
        key = (event["attempt"], *_masked(event))
        if index < restart:
            first.setdefault(key, event["purpose_key"])
        elif key in first and first[key] != event["purpose_key"]:
            again.append((first[key], event["purpose_key"]))
    return again


def same_requests(crashed: Trace, uncrashed: Trace, what: str) -> None:
    """The crashed Session's requests against the uncrashed one's; where they differ because
    a request sent before the restart went out again after it, the failure says so (a request
    the callers' key counts allow again keeps its key, so it is not among these)."""
    if _sent(crashed) == _sent(uncrashed):
        return
    again = asked_again(crashed)
    expect(not again, "requests sent before the restart and asked again after it: "
           f"expected none, saw {len(again)} ("
           + ", ".join(f"{first} again as {later}" for first, later in again) + ")")
    equal(_sent(crashed), _sent(uncrashed), what)


def _tools(trace: Trace) -> Counter[str]:
    """Each tool run with the arguments the model proposed and those it ran with: a takeover
    changes neither (§3: the proposed input stays the model's, Q163)."""
    return Counter(f"{e['name']} {json.dumps(e['proposed_arguments'], sort_keys=True)} → "
                   f"{json.dumps(e['effective_arguments'], sort_keys=True)}"
                   for e in of(trace, "tool_executed"))


def _compare(short: str, commit: str, occurrence: int, when: str
             ) -> Callable[[Trace, Trace], None]:
    # A refused commit is recovered from as a crash just before it (Q64).
    at = "before" if when == "fails" else when
    lost_answer = (commit, at) in LOST_ANSWER
    unknown_tool = (commit, at) in UNKNOWN_TOOL
    maybe_inside = (short, commit, occurrence) in INSIDE_A_TOOL
    hook_dropped = (commit, at) in HOOK_DROPPED

    def compare(crashed: Trace, uncrashed: Trace) -> None:
        equal([(e["phase"], e["when"]) for e in of(crashed, "restarted")], [(commit, when)],
              "restarts (phase, before or after)")
        if when == "fails":
            _surfaced(crashed, commit)
        asked = Counter((r["purpose_key"], r["attempt"]) for r in requests(crashed))
        equal(sum(n - 1 for n in asked.values()), 1 if lost_answer else 0,
              "requests asked again after the restart")
        names, expected_names = Counter(_names(crashed)), Counter(_names(uncrashed))
        expect(names <= expected_names,
               f"tools ran more often than without the crash: {names - expected_names}")
        told = [m["text"] for r in requests(crashed) for m in r["view"]["messages"]
                if m["kind"] == "tool_result"
                and (m.get("result_facts") or {}).get("code") == "UNKNOWN_OUTCOME"]
        if unknown_tool or (maybe_inside and told):
            # The model is told the outcome is unknown; the rest of its script may then no
            # longer fit, so only what precedes it is compared.
            expect(bool(told), "no tool result carries result_facts with code "
                   "UNKNOWN_OUTCOME (Q210)")
            return
        equal(endings(crashed), endings(uncrashed), "Run endings")
        equal(names, expected_names, "tools executed")
        if hook_dropped:
            # The hook running at the crash is dropped, never asked again (it may not have been
            # asked at all when the process died right after marking it started).
            calls, expected_calls = Counter(_hook_calls(crashed)), Counter(_hook_calls(uncrashed))
            expect(calls <= expected_calls, f"hooks asked again: {calls - expected_calls}")
            return
        # A committed decision is reused: each hook is asked as often as without the crash.
        equal(_hook_calls(crashed), _hook_calls(uncrashed), "hook calls")
        equal(_tools(crashed), _tools(uncrashed), "tools executed with their arguments")
        same_requests(crashed, uncrashed, "the requests sent (messages, in order)")

    return compare


def _surfaced(crashed: Trace, commit: str) -> None:
    """A refused commit is surfaced (``persistence_failed`` naming its phase) before the
    runtime restarts, and nothing runs in between (CTX-3.90, CTX-10.28, Q64)."""
    equal([e["phase"] for e in of(crashed, "persistence_failed")], [commit],
          "refused commits surfaced (persistence_failed, the phase)", "CTX-10.28")
    kinds = [e["kind"] for e in crashed]
    between = kinds[kinds.index("persistence_failed"):kinds.index("restarted")]
    equal([kind for kind in between if kind in ("model_request", "tool_executed")], [],
          "model requests and tools between the refused commit and the restart", "CTX-3.90")


def _unknown_tool(short: str, commit: str, occurrence: int, when: str) -> bool:
    return (commit, when) in UNKNOWN_TOOL or (short, commit, occurrence) in INSIDE_A_TOOL


def _hook_calls(trace: Trace) -> list[tuple[str, str]]:
    return [(e["point"], e["stage"]) for e in of(trace, "hook_called")]


def _names(trace: Trace) -> list[str]:
    return [e["name"] for e in of(trace, "tool_executed")]


def _crashed(scenario: dict[str, Any], short: str, commit: str, occurrence: int, when: str
             ) -> dict[str, Any]:
    document = {**scenario, "crash": {"phase": commit, "occurrence": occurrence,
                                      "when": when}}
    if _unknown_tool(short, commit, occurrence, when):
        document["model"] = {purpose: [*script, SPARE, SPARE]
                             for purpose, script in document["model"].items()}
    return document


def _cases() -> tuple[Case, ...]:
    crossed: list[tuple[str, str, dict[str, Any], frozenset[str],
                        Mapping[str, tuple[int, ...]]]] = [
        (short, name, example(name), EXAMPLES[short][1],
         {commit: tuple(range(1, count + 1)) for commit, count in points.items()})
        for short, points in CRASH_POINTS.items() for name in (EXAMPLES[short][0],)]
    crossed += [(short, short.lower(), build(), needs, points)
                for short, (build, needs, points) in FOCUSED.items()]
    cases: list[Case] = []
    for short, name, scenario, needs, points in crossed:
        for commit, occurrences in points.items():
            for occurrence in occurrences:
                for when in ("before", "after"):
                    cases.append(Case(
                        f"CRASH-{short}-{commit.upper()}-{occurrence}-{when.upper()}",
                        f"{name}: a crash {when} {commit} #{occurrence} changes nothing",
                        "§10 crash matrix", REQUIREMENTS,
                        _crashed(scenario, short, commit, occurrence, when),
                        no_check, needs | {crash_need(commit)}, baseline=scenario,
                        compare=_compare(short, commit, occurrence, when)))
    return tuple(cases)


CRASH_MATRIX: tuple[Case, ...] = _cases()

REFUSED: Mapping[str, tuple[str, ...]] = {"TOOLS": ("input_accepted", "batch_fed_back")}
"""Commits the store refuses (``"when": "fails"``, capability ``commit_failures``): a Run's
inputs and a fed-back batch, the two writes every runtime that stores a conversation makes.
Q64: the refusal is surfaced, the runtime stops and restarts on the store, and the Session then
ends as the uncrashed one, as after a crash just before that commit."""


def _refused_cases() -> tuple[Case, ...]:
    cases = []
    for short, commits in REFUSED.items():
        name, needs = EXAMPLES[short]
        scenario = example(name)
        for commit in commits:
            cases.append(Case(
                f"CRASH-{short}-{commit.upper()}-1-FAILS",
                f"{name}: a refused {commit} #1 is surfaced and changes nothing else",
                "§10 crash matrix", (*REQUIREMENTS, "CTX-10.28", "CTX-3.90"),
                _crashed(scenario, short, commit, 1, "fails"), no_check,
                needs | {crash_need(commit), "commit_failures"}, baseline=scenario,
                compare=_compare(short, commit, 1, "fails")))
    return tuple(cases)


REFUSED_COMMITS: tuple[Case, ...] = _refused_cases()


__all__ = ["CRASH_MATRIX", "CRASH_POINTS", "EXAMPLES", "INSIDE_A_TOOL", "LOST_ANSWER",
           "REFUSED", "REFUSED_COMMITS", "UNKNOWN_TOOL", "asked_again", "same_requests"]
