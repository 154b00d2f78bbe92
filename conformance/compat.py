"""Compatibility reports (issue #16): a production runtime's driver run over the whole suite and
written down for its users — ``docs/compatibility/<runtime>.md`` and a JSON file beside it,
plus the folder's ``README.md``, a table runtime × §12 row generated from every JSON report
there.

A report holds the framework and its versions, a date (given, so a fresh run reproduces a
checked-in report byte for byte), the status of each §12 row and the counts per design section,
and for every failure one sentence naming the divergence, its requirement ID and the commands
that replay the case. A capability the *adapter* supplies because the framework lacks it (e.g.
computing W, O, S and B for a framework that has no such budget) is declared by the driver in
its profile: a case that needs one and passes is counted apart (``adapter``), never as the
framework's pass.

A driver describes itself with an optional ``compat_profile`` attribute (:class:`Profile`); a
driver without one is reported under its module's name.
"""

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ctxspec.conformance.capabilities import declared
from ctxspec.conformance.case import Case
from ctxspec.conformance.harness import (
    SUITE_VERSION,
    CaseResult,
    DriverFactory,
    confirm_capabilities,
    rule,
    run_suite,
)

STATUSES = ("passed", "adapter", "failed", "unsupported", "error")
"""A case's status in a report: ``adapter`` is a pass that needed a capability the adapter,
not the framework, supplies."""

ROWS: Mapping[int, str] = {
    1: "recent_runs = 2 after succeeded, failed, stopped Runs",
    2: "five supplements in one Run",
    3: "an Executor's private context",
    4: "the 80% boundary",
    5: "a new question that itself triggers compaction",
    6: "a supplement during compaction",
    7: "tool protocol over several Loops",
    8: "a very large tool result",
    9: "a crash after the second chunk",
    10: "a crash before the summary's commit",
    11: "a summary still over the hard window",
    12: "a retry after a partial stream",
    13: "a claimed supplement, failure before first output",
    14: "first output received, response incomplete",
    15: "a hook modifies the model input",
    16: "a modification visible along the whole path",
    17: "a modified argument fed back",
    18: "hook allow / deny and faults",
    19: "private and shared scopes",
    20: "an old summary over modified material",
    21: "a crash after the raw result is saved",
    22: "a crash after one item of a batch",
    23: "a crash after feedback, before the next wake-up",
    24: "a Run without a sandbox; deleting the Agent",
    25: "history API access beyond rights",
}
"""The acceptance table of design §12, one short title per row in our words."""

SECTIONS = tuple(range(1, 12))
_ROW = re.compile(r"§12 rows? (\d+)(?:-(\d+))?")


@dataclass(frozen=True)
class Finding:
    """A framework behaviour found while writing the adapter, with the source read."""

    behaviour: str
    source: str
    """The framework file and function, e.g. ``langchain/agents/middleware/summarization.py:
    SummarizationMiddleware.before_model``."""


@dataclass(frozen=True)
class Profile:
    """What a driver tells a report about the framework under it."""

    runtime: str
    """The report's file name: ``<runtime>.md`` and ``<runtime>.json``."""
    framework: str = ""
    versions: Mapping[str, str] = field(default_factory=dict)
    """The framework's packages and their installed versions."""
    adapter_supplied: Mapping[str, str] = field(default_factory=dict)
    """Each capability the adapter supplies itself, with what the framework lacks."""
    divergences: Mapping[str, str] = field(default_factory=dict)
    """Case ID → one sentence naming the framework's divergence the case shows."""
    suite_flaws: Mapping[str, str] = field(default_factory=dict)
    """Case ID → why its failure is the suite's, not the framework's (to be fixed there)."""
    findings: tuple[Finding, ...] = ()
    notes: tuple[str, ...] = ()
    """How the adapter maps the design onto the framework, one sentence each."""


def profile_of(driver: object, driver_spec: str) -> Profile:
    found = getattr(driver, "compat_profile", None)
    if isinstance(found, Profile):
        return found
    module = driver_spec.partition(":")[0]
    return Profile(runtime=module.rsplit(".", 1)[-1] or "runtime")


def rows_of(case: Case) -> tuple[int, ...]:
    """The §12 rows a case comes from (``§12 row 4``, ``§12 rows 16-17``)."""
    match = _ROW.fullmatch(case.source)
    if match is None:
        return ()
    first = int(match.group(1))
    return tuple(range(first, int(match.group(2) or first) + 1))


def sections_of(case: Case) -> tuple[int, ...]:
    """The design sections whose requirements a case pins."""
    return tuple(sorted({int(r.split("-")[1].split(".")[0]) for r in case.requirements}))


def status_of(result: CaseResult, adapter_supplied: Iterable[str]) -> str:
    """A pass that needed an adapter-supplied capability is the adapter's, not the
    framework's."""
    supplied = declared(adapter_supplied)
    if result.status == "passed" and result.case.needs & supplied:
        return "adapter"
    return result.status


def _replay(case: Case, driver_spec: str) -> str:
    vector = Path("spec") / "vectors" / f"{case.id}.json"
    reference = f"; the reference: `ctxspec replay {vector}`" if (
        Path(__file__).resolve().parent.parent / vector).exists() else ""
    return f"`ctxspec conformance --driver {driver_spec} --case {case.id} -v`{reference}"


def _sentence(result: CaseResult, profile: Profile) -> tuple[str, str]:
    """The failure's kind (divergence, suite flaw or unexplained) and its one sentence."""
    case = result.case
    if case.id in profile.divergences:
        return "divergence", profile.divergences[case.id]
    if case.id in profile.suite_flaws:
        return "suite_flaw", profile.suite_flaws[case.id]
    lines = [line for line in result.detail.splitlines() if line.strip()]
    seen = lines[1] if len(lines) > 1 and lines[0] == rule(case) else (lines or [""])[0]
    return "unexplained", f"not yet analysed: {seen.strip()[:300]}."


def build_report(profile: Profile, driver_spec: str, results: Sequence[CaseResult],
                 capabilities: Iterable[str], probes: Mapping[str, str], date: str
                 ) -> dict[str, Any]:
    """The report as JSON-ready data: deterministic for a deterministic runtime (no timings)."""
    statuses = {r.case.id: status_of(r, profile.adapter_supplied) for r in results}
    rows: dict[str, dict[str, Any]] = {}
    for number, title in ROWS.items():
        members = [r.case.id for r in results if number in rows_of(r.case)]
        rows[str(number)] = {"title": title, "cases": {i: statuses[i] for i in members},
                             "status": _row_status([statuses[i] for i in members])}
    sections = {str(s): _counts(statuses[r.case.id] for r in results
                                if s in sections_of(r.case)) for s in SECTIONS}
    failures = []
    for result in results:
        if statuses[result.case.id] in ("failed", "error"):
            kind, sentence = _sentence(result, profile)
            failures.append({"case": result.case.id, "title": result.case.title,
                             "requirement": (result.case.requirements or ("",))[0],
                             "status": statuses[result.case.id], "kind": kind,
                             "sentence": sentence,
                             "replay": _replay(result.case, driver_spec),
                             "detail": result.detail})
    return {
        "report_version": 1, "suite_version": SUITE_VERSION, "runtime": profile.runtime,
        "framework": profile.framework, "versions": dict(sorted(profile.versions.items())),
        "driver": driver_spec, "date": date,
        "capabilities": sorted(capabilities), "probes": dict(sorted(probes.items())),
        "adapter_supplied": dict(sorted(profile.adapter_supplied.items())),
        "summary": _counts(statuses.values()), "rows": rows, "sections": sections,
        "failures": failures,
        "findings": [{"behaviour": f.behaviour, "source": f.source} for f in profile.findings],
        "notes": list(profile.notes),
        "cases": statuses,
    }


def _counts(statuses: Iterable[str]) -> dict[str, int]:
    counted = Counter(statuses)
    return {s: counted.get(s, 0) for s in STATUSES}


def _row_status(statuses: Sequence[str]) -> str:
    """A row fails if one of its cases does; it is the adapter's if one needed the adapter."""
    for status in ("error", "failed"):
        if status in statuses:
            return "failed"
    if not statuses or all(s == "unsupported" for s in statuses):
        return "unsupported"
    return "adapter" if "adapter" in statuses else (
        "passed" if all(s == "passed" for s in statuses) else "partly unsupported")


def run_compat(factory: DriverFactory, driver_spec: str, cases: Sequence[Case], date: str
               ) -> dict[str, Any]:
    """Probe the driver's capabilities, run every case on a fresh driver, build the report."""
    driver = factory()
    profile = profile_of(driver, driver_spec)
    probes = confirm_capabilities(factory)
    results = list(run_suite(cases, factory, probes))
    return build_report(profile, driver_spec, results, driver.capabilities,
                        {name: p.status for name, p in probes.items()}, date)
