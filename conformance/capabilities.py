"""Capabilities at the grain real runtimes have (docs/implementing-a-driver.md §4). A driver
declares fine capabilities — a threshold-triggered summary without the chunked fold, hooks at
some points only, a stop between Loops but not in the middle of a batch — or a coarse name that
stands for all of its parts (``compaction``, ``hooks``). A case needs the finest capabilities
its scenario uses: the hook points it scripts, a stop while a tool runs, the chunked fold or
snapshots where it reads them (``refine``).
"""

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any, get_args

from ctxspec.conformance.case import Case
from ctxspec.conformance.phases import CRASH_CAPABILITIES, PHASES, crash_need
from ctxspec.conformance.reads import matches
from ctxspec.reference.ports import HookPoint

HOOK_POINTS: tuple[str, ...] = get_args(HookPoint)
COMPACTION_PARTS = ("compaction_summary", "compaction_chunks", "compaction_snapshots")
"""A threshold-triggered summary (§8: the trigger, T, the summary in place of the material);
the chunked sequential fold (§8: a chunk plan, S1 then S1 + chunk 2, …); snapshots with their
coverage, increments and the CAS switch (§9)."""

COARSE: Mapping[str, tuple[str, ...]] = {
    "compaction": COMPACTION_PARTS,
    "hooks": tuple(f"hooks:{point}" for point in HOOK_POINTS),
}
"""A coarse name a driver may declare, and the fine capabilities it stands for."""

CHUNKED = frozenset({
    "ROW-09", "ROW-10", "ROW-11", "ROW-20", "S3-STABLE-IDS", "S7-HOOK-THEN-COMPACT",
    "S8-COMPACTION-PROMPT", "S8-COMPACTION-PIPELINE", "S8-COMPACTION-DENIED",
    "S8-CHUNK-FAILS", "S8-MODEL-CURSOR", "S8-CHUNK-RETRIED", "S8-CHUNK-ONE-ATTEMPT",
    "S8-CHUNK-LAST-ATTEMPT", "S8-MATERIAL-ORDER", "S8-OVERSIZE-RECORD", "S9-CHUNK-RESUME",
    "S9-CHUNK-RAW-SAVED", "S9-NO-SECOND-ATTEMPT", "S9-RESUMMARY", "S9-UNCOVERED-CHANGE",
    "S9-CAS-REBUILT", "S9-CAS-OVER", "S9-CAS-TAKEOVER", "S10-CORRECTION-SURVIVES",
    "S9-CAS-WRITER"})
"""Cases whose episodes fold more than one chunk (tests/test_capabilities.py checks this
against the reference's requests); the crash matrix's three-chunk example is one too."""

SNAPSHOTS = frozenset({
    "ROW-05-SNAPSHOT", "ROW-09", "ROW-10", "ROW-20", "S4-FRESH-PROJECTION", "S7-HOOK-THEN-COMPACT",
    "S8-EPISODE-WAITS", "S9-INCREMENTS", "S9-SNAPSHOT-TAKEOVER", "S9-RESUMMARY",
    "S9-UNCOVERED-CHANGE", "S9-FROZEN-BINDING", "S9-SUMMARY-ATOMIC", "S9-CAS-REBUILT",
    "S9-CAS-OVER", "S9-CAS-TAKEOVER", "S10-CORRECTION-SURVIVES", "S10-SNAPSHOT-NOT-CHECKPOINT",
    "S9-CAS-WRITER"})
"""Cases that read a request's snapshot, its coverage or the CAS switch (§9)."""


def declared(capabilities: Iterable[str]) -> frozenset[str]:
    """What a driver's declaration covers: each name, the fine parts of a coarse one, and with
    ``crash_points`` a crash at every phase (``crash:<phase>``, conformance/phases.py)."""
    names = frozenset(capabilities)
    parts = {part for name in names for part in COARSE.get(name, ())}
    return names | parts | (CRASH_CAPABILITIES if "crash_points" in names else frozenset())


def refine(case: Case) -> Case:
    """The case with its needs at the finest grain its scenario uses."""
    needs = set(case.needs)
    if "compaction" in needs:
        needs.discard("compaction")
        needs.add("compaction_summary")
        if case.id in CHUNKED or case.id.startswith("CRASH-CHUNKS-"):
            needs.add("compaction_chunks")
        if case.id in SNAPSHOTS:
            needs.add("compaction_snapshots")
    if "hooks" in needs:
        points = _hook_points(case.scenario)
        if points:
            needs.discard("hooks")
            needs.update(f"hooks:{point}" for point in points)
    if "stop" in needs and _stops_mid_batch(case.scenario):
        needs.add("stop_mid_batch")
    crash = case.scenario.get("crash")
    if isinstance(crash, Mapping) and crash.get("phase") in PHASES:
        # A crash at a phase the design names: the driver must map that phase onto a commit
        # (a misspelt phase is the scenario's error, refused whatever the driver declares).
        needs.discard("crash_points")
        needs.add(crash_need(str(crash["phase"])))
    return case if needs == set(case.needs) else replace(case, needs=frozenset(needs))


def _hook_points(scenario: Mapping[str, Any]) -> set[str]:
    return {str(hook["point"]) for hook in scenario.get("hooks", ())}


def _stops_mid_batch(scenario: Mapping[str, Any]) -> bool:
    """A stop the scenario sends while one of a batch's tools runs."""
    return any(trigger["do"].get("stop") and trigger["on"].get("tool") is not None
               for trigger in scenario.get("triggers", ()))


# --- what a check reads of each capability (docs/open-questions.md Q310) ----------------------

_SUMMARY = ("model_request[compaction*", "*.messages[summary]*", "model_request*.compaction",
            "compaction.*", "run_ended[*/COMPACTION_FAILED]*", "*[compaction.*",
            "model_usage[compaction]*", "restarted[chunk_*", "restarted[episode_*",
            "restarted[snapshot_*", "model_request*.purpose", "budget_decision*")
_COUNTED = ("*.estimated_input_tokens", "*.trigger_threshold", "*.input_budget",
            "run_ended[*/CONTEXT_*", "node_ended[*/CONTEXT_*", "model_usage*", "*.figures*",
            "*.messages[marker]*", "budget_decision*")
_INPUTS = ("*.messages[user_ref]*", "delivery.*", "*.input_cutoff", "*.protected_input_ids",
           "client_event*")
_STOPPED = ("run_ended[stopped*", "*.messages[placeholder]*", "workflow_ended[stopped*",
            "node_ended[stopped*", "client_event*")
EVIDENCE: Mapping[str, tuple[str, ...]] = {
    "compaction_summary": _SUMMARY,
    "compaction_chunks": ("model_request[compaction chunk *", "restarted[chunk_*"),
    "compaction_snapshots": ("*.snapshot_id", "restarted[snapshot_*", "compaction.*",
                             "*.frozen_revisions"),
    "estimator_injection": (*_SUMMARY, *_COUNTED),
    "stop": _STOPPED,
    "stop_mid_batch": _STOPPED[:-1],
    "history_api": ("history_read*",),
    "history_bodies": ("history_read*.records*",),
    "usage_reports": ("model_usage*", "*.estimated_input_tokens"),
    "final_answers": ("run_ended*.final_answer",),
    "error_figures": ("*.figures*", "client_event*"),
    "retention": ("retained*",),
    "sessions": ("session_opened*", "*"),
    "planner_executor": ("model_request*.role", "*.messages[*]*", "history_read*"),
    "workflow": ("node_*", "workflow_*", "capability_called*", "graph_state_written*"),
    "crash_points": ("restarted*",),
    "commit_failures": ("persistence_failed*",),
    "shared_scopes": ("*.messages[shared]*",),
    "tool_latency": ("tool_executed*", "*.messages[tool_result]*"),
    "writer": ("*",),
}
"""The trace paths (conformance/reads.py, ``*`` for any run of characters) that show a
capability at work: a case that needs the capability must read at least one of them. Stimuli
a scenario sends mid-call or at a boundary (``triggers``, ``moments``) are shown by what they
do (``DOING``); a hook point by its ``hook_*`` events, or by what the model is sent after it
acted; a crash at a phase by its ``restarted`` event or the relational comparison."""

DOING: Mapping[str, tuple[str, ...]] = {
    "supplement": _INPUTS, "stop": _STOPPED, "write": ("*",), "crash": ("restarted*",),
    "read_history": ("history_read*",)}
"""What a step that a trigger or a moment sends shows in the trace, by the step's verb."""


def evidence(case: Case, need: str) -> tuple[str, ...]:
    """The paths one of which a check of ``case`` must read for it to need ``need``."""
    if need in ("triggers", "moments"):
        verbs = {verb for trigger in case.scenario.get("triggers", ())
                 if need == "triggers" or trigger["on"].get("moment") is not None
                 for verb, value in trigger["do"].items() if value not in (None, False)}
        return tuple(path for verb in sorted(verbs) for path in DOING.get(verb, ("*",)))
    if need.startswith("hooks:"):
        point = need.removeprefix("hooks:")
        # A history read shows a hook's work only in the records' bodies; which kinds of
        # record there are is the same whether or not the hook acted.
        return (f"hook_*[{point}]*", "model_request*", "tool_executed*", "run_ended*",
                "capability_called*", "history_read*.records*")
    if need.startswith("crash:"):
        # The crash itself, or (a relational case) its comparison with the uncrashed Session.
        phase = need.removeprefix("crash:")
        return (f"restarted[{phase}]*", f"persistence_failed[{phase}]*") \
            if case.compare is None else ("*",)
    return EVIDENCE.get(need, ())


def unread(case: Case, paths: Iterable[str]) -> list[str]:
    """The capabilities ``case`` needs of which its checks read nothing (``paths``: what they
    read of the reference's trace, conformance/reads.py). A relational case compares its whole
    Session with the baseline's, so it reads every capability the two scenarios run on; only
    its own crash is asked of it (Q312)."""
    if case.compare is not None:
        return sorted(need for need in case.needs if need.startswith("crash:")
                      and not any(matches(path, ("restarted*",)) for path in paths))
    read = tuple(paths)
    return sorted(need for need in case.needs
                  if not any(matches(path, evidence(case, need)) for path in read))


__all__ = ["CHUNKED", "COARSE", "COMPACTION_PARTS", "DOING", "EVIDENCE", "HOOK_POINTS",
           "SNAPSHOTS", "declared", "evidence", "refine", "unread"]
