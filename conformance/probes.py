"""Capability probes (docs/architecture.md "Layers": capabilities are declared by the
driver and confirmed by probing). For each capability a driver declares, one small scenario
that exercises it and the sign its trace must show — that the runtime did the thing at all, not
that it did it right (the cases judge that). A declared capability whose probe shows no sign is
*not confirmed*: the harness reports every case that needs it ``failed``, naming the probe, so
a driver never collects ``unsupported`` (or a pile of puzzling failures) for a claim it does not
keep. A probe whose scenario needs another capability the driver does not declare is not run.
"""

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ctxspec.conformance.capabilities import COARSE, HOOK_POINTS
from ctxspec.conformance.case import Trace, base, of, requests
from ctxspec.conformance.phases import CRASH_CAPABILITIES, PHASES, crash_need
from ctxspec.conformance.sessions import boundary
from ctxspec.conformance.universal import Findings
from ctxspec.conformance.verdicts import passes_on

ProbeStatus = Literal["confirmed", "not_confirmed", "not_probed"]


@dataclass(frozen=True)
class Probe:
    capability: str
    scenario: Mapping[str, Any]
    sign: str
    """What the trace must show, in words (the report quotes it)."""
    shows: Callable[[Trace], bool]
    needs: frozenset[str] = field(default_factory=frozenset)
    """Other capabilities the scenario uses."""


@dataclass(frozen=True)
class ProbeResult:
    capability: str
    status: ProbeStatus
    detail: str
    universal: Findings = field(default_factory=Findings)
    """The universal checks' findings on the probe's trace (conformance/universal.py)."""

    def to_json(self) -> dict[str, object]:
        return {"capability": self.capability, "status": self.status, "detail": self.detail,
                "universal": self.universal.counts()}


def _session(*steps: Mapping[str, Any], answers: Sequence[Mapping[str, Any]] = ({"text": "hi"},),
             **agent: Any) -> dict[str, Any]:
    """"hello" asked and answered (plus ``steps``), measured in characters: I = 3 + 5 = 8."""
    document = base(**agent)
    document["name"] = "probe"
    document["steps"] = [{"ask": "hello"}, {"advance": True}, *steps]
    document["model"] = {"business": list(answers)}
    return document


def _with(document: dict[str, Any], **parts: Any) -> dict[str, Any]:
    return {**document, **parts}


def _tool_loop(**result: Any) -> dict[str, Any]:
    """One call of tool t, then the answer."""
    return _with(_session(answers=({"text": "", "tool_calls": [{"name": "t"}]}, {"text": "done"}),
                          tools=[{"name": "t"}]),
                 tools={"t": [{"text": "ok", **result}]})


def _texts(trace: Trace) -> list[str]:
    return [m["text"] for r in requests(trace) for m in r["view"]["messages"]]


def _workflow() -> dict[str, Any]:
    return {"scenario_version": 1, "name": "probe", "agent": base()["agent"],
            "workflow": {"stages": [[{"capability_node": {
                "name": "fetch", "tool": "t", "input": {}, "output_key": "out"}}]]},
            "tools": {"t": [{"text": "x"}]}}


def _chunked() -> dict[str, Any]:
    """A Run whose material is far more than one chunk holds: W = 5000, B = 4500, trigger 3600,
    T = 400 and a chunk carries 4100 with the content estimator. Loop 2 is I = 3 + 2 + 1500 +
    1500 = 3005, well below the trigger; loop 3 adds 3000 more (6005) and folds two units of
    3000 — at least two chunks, whatever framing a runtime adds."""
    document = base(window=5000, tools=[{"name": "t"}])
    document["steps"] = [{"ask": "go"}, {"advance": True}]
    document["model"] = {"business": [{"text": "A" * 1500, "tool_calls": [{"name": "t"}]},
                                      {"text": "B" * 1500, "tool_calls": [{"name": "t"}]},
                                      {"text": "done"}],
                         "compaction": [{"text": "S1"}, {"text": "S2"}, {"text": "S3"}]}
    document["tools"] = {"t": [{"text": "r" * 1500}, {"text": "s" * 1500}]}
    return document


def _hook_probe(point: str) -> Probe:
    """A hook at ``point`` that allows: the sign is its decision at that point."""
    hooks = [{"point": point, "items": [{"decision": "allow"}]}]
    needs: frozenset[str] = frozenset()
    if point.startswith("tool."):
        scenario: dict[str, Any] = _with(_tool_loop(), hooks=hooks)
    elif point.startswith("compaction."):
        scenario, needs = _with(boundary(2200), hooks=hooks), frozenset(
            {"compaction_summary", "estimator_injection"})
    elif point.startswith("capability."):
        scenario, needs = _with(_workflow(), hooks=hooks), frozenset({"workflow"})
    else:
        scenario = _with(_session(), hooks=hooks)
    return Probe(f"hooks:{point}", scenario, f"a hook_decided event at {point}",
                 lambda t: any(e["point"] == point for e in of(t, "hook_decided")), needs)


PLANNER_PROBE = _with(_session(executor={}), model={
    "business": [{"text": "", "tool_calls": [{"name": "delegate", "arguments": {"task": "look"}}]},
                 {"text": "done"}],
    "executor": [{"text": "seen"}]})
"""A Planner that delegates one task to an Executor, which answers."""

PROBES: tuple[Probe, ...] = (
    Probe("root_loop", _session(), "a business request and the Run's ending",
          lambda t: bool(requests(t, "business")) and bool(of(t, "run_ended"))),
    Probe("estimator_injection", _session(),
          'I = 8 for "sys" and "hello" with the character estimator',
          lambda t: [r["estimated_input_tokens"] for r in requests(t)] == [8]),
    *(_hook_probe(point) for point in HOOK_POINTS),
    Probe("stop", _with(_session(), steps=[{"ask": "hello"}, {"stop": True}, {"advance": True}]),
          "the Run ended stopped",
          lambda t: [e["status"] for e in of(t, "run_ended")][-1:] == ["stopped"]),
    Probe("stop_mid_batch", _with(_tool_loop(), triggers=[
        {"on": {"tool": "t", "ordinal": 1}, "do": {"stop": True}}]),
          "the Run ended stopped after a stop while its tool ran",
          lambda t: [e["status"] for e in of(t, "run_ended")][-1:] == ["stopped"],
          frozenset({"triggers"})),
    Probe("triggers", _with(_tool_loop(), triggers=[
        {"on": {"tool": "t", "ordinal": 1}, "do": {"supplement": "also this"}}]),
          'the supplement "also this", sent while the tool ran, in a later request',
          lambda t: "also this" in _texts(t)),
    Probe("moments", _with(_tool_loop(), triggers=[
        {"on": {"moment": "freeze", "ordinal": 1}, "do": {"supplement": "at the freeze"}}]),
          'the supplement "at the freeze", sent before the first request was frozen, in the '
          "second request only",
          lambda t: ["at the freeze" in [m["text"] for m in r["view"]["messages"]]
                     for r in requests(t)] == [False, True]),
    Probe("writer", _with(_tool_loop(), triggers=[
        {"on": {"tool": "t", "ordinal": 1}, "do": {"write": {
            "target": "first_assistant", "field": "text", "value": "corrected"}}}]),
          'the decision written as "corrected" in the second request',
          lambda t: "corrected" in [m["text"] for m in requests(t)[-1]["view"]["messages"]]),
    Probe("compaction_summary", boundary(2200), "a compaction request",
          lambda t: bool(requests(t, "compaction")), frozenset({"estimator_injection"})),
    Probe("compaction_chunks", _chunked(), "two compaction requests in one episode",
          lambda t: len(requests(t, "compaction")) >= 2,
          frozenset({"estimator_injection", "compaction_summary"})),
    Probe("compaction_snapshots", boundary(2200),
          "a snapshot named by the business request after the summary",
          lambda t: any(r.get("snapshot_id") for r in requests(t, "business")),
          frozenset({"estimator_injection", "compaction_summary"})),
    Probe("planner_executor", PLANNER_PROBE, "a request of the executor role",
          lambda t: any(r["role"] == "executor" for r in requests(t))),
    Probe("crash_points", _with(_session(), crash={"phase": "request_frozen", "occurrence": 1,
                                                   "when": "after"}),
          "a restarted event", lambda t: bool(of(t, "restarted"))),
    Probe("retention", _session({"observe_retention": True}), "a retained event",
          lambda t: bool(of(t, "retained"))),
    Probe("history_api", _session({"read_history": {"kind": "audit"}}), "a history_read event",
          lambda t: bool(of(t, "history_read"))),
    Probe("history_bodies", _session({"read_history": {"kind": "audit", "bodies": True}}),
          "a history_read event with records",
          lambda t: any(e.get("records") for e in of(t, "history_read")),
          frozenset({"history_api"})),
    Probe("shared_scopes", _session(shared=[{"name": "style", "text": "be brief",
                                             "consumers": ["root"]}]),
          'the shared field "be brief" in the request', lambda t: any(
              "be brief" in text for text in _texts(t))),
    Probe("usage_reports", _session(answers=({"text": "hi", "usage": {"input_tokens": 5}},)),
          "a model_usage event", lambda t: bool(of(t, "model_usage"))),
    Probe("tool_latency", _tool_loop(latency=2), "a tool_executed event with latency 2",
          lambda t: [e.get("latency") for e in of(t, "tool_executed")] == [2]),
    Probe("sessions", _session({"new_session": True}, {"ask": "again"}, {"advance": True},
                               answers=({"text": "hi"}, {"text": "hi again"})),
          "a session_opened event", lambda t: bool(of(t, "session_opened"))),
    Probe("error_figures", _with(_session(), steps=[{"ask": "Q" * 4000}, {"advance": True}]),
          "a run_ended event with figures and a client run_ended event with its error code",
          lambda t: any(e.get("figures") for e in of(t, "run_ended")) and any(
              e.get("error_code") for e in of(t, "client_event") if e["event"] == "run_ended")),
    Probe("final_answers", _session(), 'a run_ended event delivering the answer "hi"',
          lambda t: [e.get("final_answer") for e in of(t, "run_ended")] == ["hi"]),
    Probe("workflow", _workflow(), "a workflow_ended event",
          lambda t: bool(of(t, "workflow_ended"))),
)


_HOOKED = ("tool.pre_call", "tool.post_call", "model.pre_request", "model.post_response")
"""Hook points whose probe Session passes ``hook_started`` and ``hook_decided``, in the order
a crash probe picks the first one a driver declares."""
_PASSES: Mapping[str, str] = {
    **dict.fromkeys(("session_opened", "input_accepted", "request_frozen", "first_output",
                     "raw_answer_saved", "effective_result_committed", "run_finalised"),
                    "session"),
    **dict.fromkeys(("tool_started", "tool_settled", "batch_fed_back"), "tools"),
    "attempt_failed": "retried", "hook_started": "hooked", "hook_decided": "hooked",
    **dict.fromkeys(("episode_started", "chunk_answer_saved", "chunk_committed",
                     "snapshot_published"), "compacting"),
    **dict.fromkeys(("execution_started", "execution_ended"), "delegating")}
"""Which small Session of a probe passes each phase (conformance/phases.py)."""


def _passing(phase: str, declared: frozenset[str]) -> tuple[dict[str, Any], frozenset[str]]:
    """A small Session that passes ``phase`` once at least, and the capabilities it needs."""
    session = _PASSES[phase]
    if session == "tools":
        return _tool_loop(), frozenset()
    if session == "retried":
        return _session(answers=({"fail": "provider_error"}, {"text": "hi"})), frozenset()
    if session == "hooked":
        point = next((p for p in _HOOKED if f"hooks:{p}" in declared), _HOOKED[0])
        hooks = [{"point": point, "items": [{"decision": "allow"}]}]
        return (_with(_tool_loop() if point.startswith("tool.") else _session(), hooks=hooks),
                frozenset({f"hooks:{point}"}))
    if session == "compacting":
        return boundary(2200), frozenset({"compaction_summary", "estimator_injection"})
    if session == "delegating":
        return PLANNER_PROBE, frozenset({"planner_executor"})
    return _session(), frozenset()


def crash_probe(phase: str, declared: frozenset[str]) -> Probe:
    """``crash:<phase>``: the runtime dies just after it first passes the phase and restarts;
    the sign is a ``restarted`` event naming that phase."""
    scenario, needs = _passing(phase, declared)
    return Probe(crash_need(phase), _with(scenario, crash={
        "phase": phase, "occurrence": 1, "when": "after"}),
        f"a restarted event at phase {phase}",
        lambda t: any(e.get("phase") == phase for e in of(t, "restarted")), needs)


def commit_failure_probe(declared: frozenset[str]) -> Probe:
    """``commit_failures``: the store refuses a commit at a phase the driver declares it can
    crash at (``request_frozen`` unless it declares others but not that one); the sign is a
    ``persistence_failed`` event."""
    phases = [p for p in PHASES if crash_need(p) in declared]
    phase = "request_frozen" if not phases or "request_frozen" in phases else phases[0]
    scenario, needs = _passing(phase, declared)
    return Probe("commit_failures", _with(scenario, crash={
        "phase": phase, "occurrence": 1, "when": "fails"}),
        f"a persistence_failed event after a refused commit at phase {phase}",
        lambda t: bool(of(t, "persistence_failed")), needs)


def probes_for(declared: frozenset[str]) -> tuple[Probe, ...]:
    """Every probe of the capabilities a driver declares: the fixed ones, a crash probe per
    ``crash:<phase>`` and the commit-failure probe at a phase it declares."""
    return (*(each for each in PROBES if each.capability in declared),
            *(crash_probe(p, declared) for p in PHASES if crash_need(p) in declared),
            *((commit_failure_probe(declared),) if "commit_failures" in declared else ()))


def probe(declared: frozenset[str], trace_of: Callable[[Mapping[str, Any]], Trace],
          probes: Sequence[Probe] | None = None) -> dict[str, ProbeResult]:
    """Run the probe of every declared capability; ``trace_of`` runs a scenario on a fresh
    driver and returns its trace as plain JSON. A declared name the suite has no probe for is
    ``not_probed`` (no case needs it either)."""
    chosen = probes_for(declared) if probes is None else tuple(probes)
    results: dict[str, ProbeResult] = {
        name: ProbeResult(name, "not_probed", "the suite knows no such capability")
        for name in sorted(declared - {each.capability for each in chosen} - set(COARSE)
                           - CRASH_CAPABILITIES - {"commit_failures"})}
    for each in chosen:
        missing = sorted(each.needs - declared)
        if missing:
            results[each.capability] = ProbeResult(
                each.capability, "not_probed", f"its probe needs {', '.join(missing)}")
            continue
        try:
            shown = each.shows(trace_of(each.scenario))
        except BaseException as failure:  # the probe's own run broke: no confirmation
            passes_on(failure)
            results[each.capability] = ProbeResult(
                each.capability, "not_confirmed",
                f"its probe scenario failed: {type(failure).__name__}: {failure}")
            continue
        results[each.capability] = ProbeResult(
            each.capability, "confirmed" if shown else "not_confirmed",
            "" if shown else f"its probe's trace lacks {each.sign}")
    return results


__all__ = ["PLANNER_PROBE", "PROBES", "Probe", "ProbeResult", "commit_failure_probe", "crash_probe",
           "probe", "probes_for"]
