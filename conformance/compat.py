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

Two configurations (issue #32, Q291): the driver is the framework configured as a careful
user following the design would (the best configuration); its profile may name a second driver
with the framework's defaults. Both run; a failure of the best configuration is *inherent*
(no setting fixes it: the profile says why, with the framework source read), a failure of the
defaults only is *default* (the profile's :class:`Setting` names the setting and value, and the
two runs verify it).

A driver describes itself with an optional ``compat_profile`` attribute (:class:`Profile`); a
driver without one is reported under its module's name.
"""

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ctxspec.conformance.capabilities import declared
from ctxspec.conformance.case import Case
from ctxspec.conformance.harness import (
    SUITE_VERSION,
    CaseResult,
    DriverFactory,
    confirm_capabilities,
    load_factory,
    rule,
    run_suite,
)
from ctxspec.conformance.replays import replay_command

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
class Divergence:
    """An *inherent* failure: no setting of the framework's public API fixes it."""

    sentence: str
    """What the framework does instead of what the design says, in one sentence."""
    source: str
    """The framework file and function read that show why no setting fixes it."""


@dataclass(frozen=True)
class Setting:
    """A framework setting whose default fails cases its best value passes (a *default*
    failure): the report checks, by the two runs, that each case named fails with the default
    and passes with the best value."""

    name: str
    """The setting as a user writes it, e.g. ``SummarizationMiddleware(trim_tokens_to_
    summarize=...)``."""
    default: str
    best: str
    why: str
    """What the default does that the design forbids, in one sentence."""
    cases: frozenset[str]


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
    divergences: Mapping[str, Divergence] = field(default_factory=dict)
    """Case ID → the framework's inherent divergence the case shows."""
    settings: tuple[Setting, ...] = ()
    """The settings whose defaults the best configuration changes, each with the cases it
    fixes."""
    doubts: Mapping[str, str] = field(default_factory=dict)
    """Case ID → why its verdict is one we are least sure of (issue #32: disagreement is a
    test)."""
    defaults: str = ""
    """``MODULE:FACTORY`` of the driver configuring the framework with its defaults (the
    driver itself is the best configuration); empty: one configuration only."""
    suite_flaws: Mapping[str, str] = field(default_factory=dict)
    """Case ID → why its failure is the suite's, not the framework's (to be fixed there)."""
    findings: tuple[Finding, ...] = ()
    notes: tuple[str, ...] = ()
    """How the adapter maps the design onto the framework, one sentence each."""
    stated: bool = True
    """False for the profile a driver without ``compat_profile`` gets: then nothing is known
    of who supplies a capability, and the report says so (docs/implementing-a-driver.md §9)."""


def profile_of(driver: object, driver_spec: str) -> Profile:
    found = getattr(driver, "compat_profile", None)
    if isinstance(found, Profile):
        return found
    module = driver_spec.partition(":")[0]
    return Profile(runtime=module.rsplit(".", 1)[-1] or "runtime", stated=False)


def reasons(profile: Profile) -> dict[str, str]:
    """Case ID → why it fails, as the profile says: an inherent divergence (with the source
    read), a flaw of the suite, or the setting whose default fails it."""
    why = {case: f"{d.sentence} (source read: {d.source})"
           for case, d in profile.divergences.items()}
    why.update({case: f"a flaw of the suite: {flaw}" for case, flaw in profile.suite_flaws.items()})
    for setting in profile.settings:
        for case in setting.cases:
            why.setdefault(case, f"{setting.why} Setting {setting.name} = {setting.best} "
                                 f"(default {setting.default}) fixes it.")
    return why


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
    """The command that shows the case's run on this runtime beside the reference's
    (conformance/replays.py)."""
    return f"`{replay_command(case.id, driver_spec)}`"


def _sentence(result: CaseResult, profile: Profile) -> dict[str, str]:
    """A failure of the best configuration: its kind (inherent, suite flaw or unexplained), its
    sentence and, for an inherent one, the framework source read."""
    case = result.case
    if case.id in profile.divergences:
        found = profile.divergences[case.id]
        return {"kind": "inherent", "sentence": found.sentence, "source": found.source}
    if case.id in profile.suite_flaws:
        return {"kind": "suite_flaw", "sentence": profile.suite_flaws[case.id]}
    lines = [line for line in result.detail.splitlines() if line.strip()]
    seen = lines[1] if len(lines) > 1 and lines[0] == rule(case) else (lines or [""])[0]
    return {"kind": "unexplained", "sentence": f"not yet analysed: {seen.strip()[:300]}."}


def _default_failure(case: Case, best: str, profile: Profile) -> dict[str, str]:
    """A failure of the defaults only: the setting that fixes it, verified by the best run."""
    named = [s for s in profile.settings if case.id in s.cases]
    if not named:
        return {"kind": "unexplained", "sentence": "not yet analysed: it fails with the "
                "framework's defaults and passes with the best configuration, but no setting "
                "of the profile names it."}
    if best not in ("passed", "adapter"):
        return {"kind": "unexplained", "sentence": f"{named[0].name} = {named[0].best} is "
                f"named as its fix, but the best configuration's run says {best}."}
    sentence = " ".join(f"{s.why} Setting {s.name} = {s.best} (default {s.default}) fixes it."
                        for s in named)
    return {"kind": "default", "sentence": sentence,
            "setting": "; ".join(f"{s.name} = {s.best}" for s in named)}


def _failure(result: CaseResult, status: str, driver_spec: str) -> dict[str, Any]:
    case = result.case
    return {"case": case.id, "title": case.title,
            "requirement": result.requirement or (case.requirements or ("",))[0],
            "status": status,
            "replay": _replay(case, driver_spec), "detail": result.detail}


def _failures(profile: Profile, driver_spec: str, results: Sequence[CaseResult],
              statuses: Mapping[str, str], defaults: Sequence[CaseResult],
              default_statuses: Mapping[str, str]) -> list[dict[str, Any]]:
    """Every failure of the best configuration, then every failure of the defaults the best
    configuration does not share (each a *default*, naming its setting)."""
    failures = [{**_failure(r, statuses[r.case.id], driver_spec), "configuration": "best",
                 **_sentence(r, profile)}
                for r in results if statuses[r.case.id] in ("failed", "error")]
    spec = profile.defaults or driver_spec
    for result in defaults:
        status, best = default_statuses[result.case.id], statuses.get(result.case.id, "")
        if status in ("failed", "error") and best not in ("failed", "error"):
            failures.append({**_failure(result, status, spec), "configuration": "defaults",
                             **_default_failure(result.case, best, profile)})
    return failures


def build_report(profile: Profile, driver_spec: str, results: Sequence[CaseResult],
                 capabilities: Iterable[str], probes: Mapping[str, str], date: str,
                 defaults: Sequence[CaseResult] = ()) -> dict[str, Any]:
    """The report as JSON-ready data: deterministic for a deterministic runtime (no timings).
    ``results`` are the best configuration's, ``defaults`` the framework defaults' (empty: the
    report has the one configuration)."""
    statuses = {r.case.id: status_of(r, profile.adapter_supplied) for r in results}
    default_statuses = {r.case.id: status_of(r, profile.adapter_supplied) for r in defaults}
    rows: dict[str, dict[str, Any]] = {}
    for number, title in ROWS.items():
        members = [r.case.id for r in results if number in rows_of(r.case)]
        rows[str(number)] = {"title": title, "cases": {i: statuses[i] for i in members},
                             "status": _row_status([statuses[i] for i in members])}
        if defaults:
            rows[str(number)]["defaults"] = {
                "cases": {i: default_statuses[i] for i in members if i in default_statuses},
                "status": _row_status([default_statuses[i] for i in members
                                       if i in default_statuses])}
    sections = {str(s): _counts(statuses[r.case.id] for r in results
                                if s in sections_of(r.case)) for s in SECTIONS}
    configurations = {"best": {"driver": driver_spec, "summary": _counts(statuses.values())}}
    if defaults:
        configurations["defaults"] = {"driver": profile.defaults or driver_spec,
                                      "summary": _counts(default_statuses.values()),
                                      "cases": default_statuses}
    return {
        "report_version": 2, "suite_version": SUITE_VERSION, "runtime": profile.runtime,
        "framework": profile.framework, "versions": dict(sorted(profile.versions.items())),
        "driver": driver_spec, "date": date,
        "capabilities": sorted(capabilities), "probes": dict(sorted(probes.items())),
        "adapter_supplied": dict(sorted(profile.adapter_supplied.items())),
        "summary": _counts(statuses.values()), "configurations": configurations,
        "settings": [{"name": s.name, "default": s.default, "best": s.best, "why": s.why,
                      "cases": sorted(s.cases)} for s in profile.settings],
        "rows": rows, "sections": sections,
        "failures": _failures(profile, driver_spec, results, statuses, defaults,
                              default_statuses),
        "findings": [{"behaviour": f.behaviour, "source": f.source} for f in profile.findings],
        "doubts": dict(profile.doubts),
        "configuration_dependent": sorted(
            i for i, status in default_statuses.items() if statuses.get(i) != status),
        "notes": list(profile.notes),
        "cases": statuses,
        **({} if profile.stated else {"profile": False}),
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


def run_compat(factory: DriverFactory, driver_spec: str, cases: Sequence[Case], date: str,
               profile: Profile | None = None, defaults: DriverFactory | None = None
               ) -> dict[str, Any]:
    """Probe the driver's capabilities, run every case on a fresh driver — of the best
    configuration (the driver) and, when its profile names one, of the framework's defaults —
    and build the report. A driver that carries no profile of its own (one over stdio) is given
    ``profile``, and the factory of its defaults configuration as ``defaults``."""
    driver = factory()
    profile = profile or profile_of(driver, driver_spec)
    probes = confirm_capabilities(factory)
    results = list(run_suite(cases, factory, probes))
    default_results: list[CaseResult] = []
    if profile.defaults:
        plain = defaults or load_factory(profile.defaults)
        default_results = list(run_suite(cases, plain, confirm_capabilities(plain)))
    return build_report(profile, driver_spec, results, driver.capabilities,
                        {name: p.status for name, p in probes.items()}, date, default_results)
