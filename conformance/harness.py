"""The conformance harness: runs cases against a Driver and reports each honestly
(docs/architecture.md "Layers"): ``passed`` only when the scenario ran and every expectation held;
``failed`` when an expectation did not, or the runtime asked a scripted port for more than the
scenario scripts; ``error`` when the driver itself broke; ``unsupported``
when the driver lacks a capability the case needs — never ``passed``.

The trace is read back as plain JSON (a round trip through ``json``), so a case sees exactly what
a driver in another language would send.
"""

import contextlib
import importlib
import json
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from multiprocessing.util import Finalize
from pathlib import Path
from typing import Any, Literal, cast
from xml.etree import ElementTree

from pydantic import BaseModel, ConfigDict, Field

from ctxspec.conformance.capabilities import declared
from ctxspec.conformance.case import no_check
from ctxspec.conformance.cases import Case, Trace
from ctxspec.conformance.driver import (
    CrashRunsDriver,
    Driver,
    LaterTrace,
    ReferenceDriver,
    run_scenario,
)
from ctxspec.conformance.probes import ProbeResult, probe, probes_for
from ctxspec.conformance.replays import replay_command
from ctxspec.conformance.scenario import parse_scenario
from ctxspec.conformance.stdio import StdioDriver, Stop
from ctxspec.conformance.trace_contract import TRACE_CONTRACT_VERSION, violations
from ctxspec.conformance.universal import INVARIANTS, Findings, check, summary
from ctxspec.conformance.verdicts import cited, own_check, passes_on, rule
from ctxspec.reference.ports import ScriptExhausted

SUITE_VERSION = "0.1.0"
Status = Literal["passed", "failed", "unsupported", "error"]
DriverFactory = Callable[[], Driver | StdioDriver]


class ReportLine(BaseModel):
    """One line of the JSON Lines report (spec/schemas/ConformanceReportLine.json)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    suite_version: str
    driver: str
    id: str
    title: str
    source: str
    requirements: list[str]
    status: Status
    detail: str
    seconds: float = Field(ge=0)
    universal: dict[str, int] = Field(default_factory=dict, description=(
        "violations of the universal checks in the case's traces, by invariant "
        "(docs/conformance.md \"Universal checks\"); empty when none"))
    log: list[str] = Field(default_factory=list, description=(
        "the lines a stdio runtime wrote on its standard error while its runs for this case "
        "were out (docs/stdio-protocol.md \"Log\"); empty for other drivers"))
    requirement: str = Field(default="", description=(
        "the ID of the requirement whose check failed (the check's own, else the case's "
        "first); empty when the case did not fail"))
    replay: str = Field(default="", description=(
        "the command that replays the case on the same runtime (ctxspec replay), beside the "
        "reference's run; empty when the case did not fail"))


@dataclass(frozen=True)
class CaseResult:
    case: Case
    status: Status
    detail: str
    seconds: float
    universal: Findings = field(default_factory=Findings)
    """The universal checks' findings on the case's traces (its own and its baseline's)."""
    log: tuple[str, ...] = ()
    """What a stdio runtime logged while its runs for this case were out."""
    requirement: str = ""
    """The requirement a failure cites (its check's own, conformance/verdicts.py ``cited``);
    "" when the case did not fail."""
    trace: Trace | None = None
    """The case's trace (as far as it got) when it failed or erred, for ``-v`` and
    ``--json --traces``; None otherwise."""

    def to_json(self, replay: str = "") -> dict[str, object]:
        """The case's entry in ``--json`` output: its report line without the run's context
        (``replay``: the command a failure prints)."""
        return self.report_line("", replay).model_dump(
            include={"id", "title", "source", "requirements", "status", "detail", "universal",
                     "requirement", "replay", *(("log",) if self.log else ())})

    def report_line(self, driver: str, replay: str = "") -> ReportLine:
        return ReportLine(suite_version=SUITE_VERSION, driver=driver, id=self.case.id,
                          title=self.case.title, source=self.case.source,
                          requirements=list(self.case.requirements), status=self.status,
                          detail=self.detail, seconds=round(self.seconds, 6),
                          universal=self.universal.counts(), log=list(self.log),
                          requirement=self.requirement if self.status == "failed" else "",
                          replay=replay if self.status in ("failed", "error") else "")


def write_reports(results: Sequence[CaseResult], driver: str, *, jsonl: Path | None = None,
                  junit: Path | None = None) -> None:
    """The JSON Lines and JUnit XML reports, each written whole or not at all (a temporary file
    renamed into place)."""
    if jsonl is not None:
        _write_atomically(jsonl, "".join(
            r.report_line(driver, replay_command(r.case.id, driver)).model_dump_json() + "\n"
            for r in results))
    if junit is not None:
        suite = ElementTree.Element("testsuite", {
            "name": "ctxspec-conformance", "tests": str(len(results)),
            "failures": str(sum(r.status == "failed" for r in results)),
            "errors": str(sum(r.status == "error" for r in results)),
            "skipped": str(sum(r.status == "unsupported" for r in results)),
            "time": f"{sum(r.seconds for r in results):.3f}"})
        for result in results:
            case = ElementTree.SubElement(suite, "testcase", {
                "classname": result.case.source, "name": f"{result.case.id} {result.case.title}",
                "time": f"{result.seconds:.3f}"})
            tag = {"failed": "failure", "error": "error", "unsupported": "skipped"}.get(
                result.status)
            if tag is not None:
                replay = "" if tag == "skipped" else \
                    f"\nreplay: {replay_command(result.case.id, driver)}"
                ElementTree.SubElement(case, tag, {"message": result.detail + replay})
        _write_atomically(junit, ElementTree.tostring(suite, encoding="unicode") + "\n")


def _write_atomically(path: Path, text: str) -> None:
    temporary = path.with_name(path.name + ".partial")
    temporary.write_text(text, "utf-8")
    temporary.replace(path)


def scenario_trace(driver: Driver | StdioDriver, scenario: Mapping[str, Any]) -> Trace:
    """Run a scenario on a driver and read its neutral trace back as plain JSON — exactly what
    a driver in another language would send."""
    return scenario_run(driver, scenario)[0]


def scenario_run(driver: Driver | StdioDriver, scenario: Mapping[str, Any]
                 ) -> tuple[Trace, tuple[int, ...] | None]:
    """:func:`scenario_trace`, with the trace's length each time the harness performed a stop
    step (what U-AFTER-STOP reads); None over stdio, where the steps run in the other
    process (and each run names the case it is for: :func:`for_case`)."""
    if isinstance(driver, StdioDriver):  # the ports live in the other process
        return driver.run_document(dict(scenario)), None
    marked = _StopMarks(driver)
    run_scenario(parse_scenario(scenario), lambda: cast(Driver, marked))
    trace: Trace = json.loads(json.dumps(driver.trace(), default=str))
    return trace, None if marked.marks is None else tuple(marked.marks)


class _StopMarks:
    """A driver as the harness hands it the steps, noting the length of its trace each time
    it is told to stop (None once a trace could not be read then: a workflow's, say)."""

    def __init__(self, driver: Driver) -> None:
        self._driver = driver
        self.marks: list[int] | None = []

    def stop(self) -> None:
        if self.marks is not None:
            try:
                self.marks.append(len(self._driver.trace()))
            except Exception:  # no trace to read while it runs: when the stop came is unknown
                self.marks = None
        self._driver.stop()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._driver, name)


@contextlib.contextmanager
def for_case(driver: Driver | StdioDriver, case: str) -> Iterator[None]:
    """The runs made meanwhile are for ``case`` (a case's ID, or ``probe:<capability>``): a
    stdio runtime is told so on each ``run`` (docs/stdio-protocol.md)."""
    if not isinstance(driver, StdioDriver):
        yield
        return
    before, driver.case = driver.case, case
    try:
        yield
    finally:
        driver.case = before


def judged_trace(driver: Driver | StdioDriver, scenario: Mapping[str, Any]
                 ) -> tuple[Trace, Findings]:
    """A scenario's trace and the universal checks' findings on it (probes use it)."""
    trace, stops = scenario_run(driver, scenario)
    return trace, check(trace, scenario, stops)


class SharedRuns:
    """The traces of one driver factory's runs of the scenario documents that several cases of
    one suite run need (a case's scenario or a relational case's baseline).

    Hundreds of relational cases (the crash matrices) share a handful of baselines, and a few
    cases share a scenario: a document several cases need runs once, on a fresh driver of the
    factory, and each of those cases is judged against its own copy of that trace (parsed from
    the kept JSON, so no case can change what another reads) and the trace-contract verdict
    checked once. A document only one case needs runs for that case on its own driver, as
    before. Only a run that went through is kept: one that raised is run again by the next
    case, which reports what it saw itself (Q240).

    The crashed runs of one scenario (the crash matrices: the same document but for its
    ``crash``) share their run-up when the driver offers the optional ``crashed_runs``
    (``CrashRunsDriver``; the reference's is conformance/crash_runup.py): the group runs once
    through it and each crashed document it gives no trace for runs from scratch (Q241)."""

    def __init__(self, factory: DriverFactory, cases: Iterable[Case] = ()) -> None:
        self.factory = factory
        cases = tuple(cases)
        self._keys: dict[int, tuple[Mapping[str, Any], str | None]] = {}
        needed = Counter(key for case in cases
                         for document in (None if case.refusal else case.scenario, case.baseline)
                         if document is not None and (key := self._key(document)) is not None)
        self.shared = {key for key, count in needed.items() if count > 1}
        self._kept: dict[str, tuple[str, tuple[str, ...], Findings]] = {}
        self._splits: dict[int, tuple[Mapping[str, Any], tuple[str, str] | None]] = {}
        self.crashes: dict[str, dict[str, Mapping[str, Any]]] = {}
        """Crashed documents' ``crash`` by their document without it, then by the crash's own
        JSON: a group of several is asked of a driver that offers ``crashed_runs``."""
        for case in cases:
            split = None if case.refusal else self._split(case.scenario)
            if split is not None and split[1]:
                self.crashes.setdefault(split[0], {})[split[1]] = case.scenario["crash"]
        self._later: dict[str, dict[str, LaterTrace]] = {}
        """By group, the traces the driver's ``crashed_runs`` has not computed yet."""
        self._crashed: dict[tuple[str, str], tuple[str, tuple[str, ...], Findings] | None] = {}

    def _key(self, document: Mapping[str, Any]) -> str | None:
        """The document's canonical JSON, computed once per document object (the same
        objects are looked up case after case); None if it is not JSON."""
        known = self._keys.get(id(document))
        if known is not None and known[0] is document:
            return known[1]
        try:
            key: str | None = json.dumps(document, sort_keys=True)
        except (TypeError, ValueError):  # not a JSON document: nothing to key it by
            key = None
        self._keys[id(document)] = (document, key)  # kept alive: its id stays its own
        return key

    def trace(self, scenario: Mapping[str, Any], driver: Driver | StdioDriver | None = None
              ) -> tuple[Trace, tuple[str, ...]]:
        """The trace of ``scenario`` (run on ``driver``, else on a fresh one, unless kept) and
        its trace-contract violations."""
        trace, found, _ = self.judged(scenario, driver)
        return trace, found

    def judged(self, scenario: Mapping[str, Any], driver: Driver | StdioDriver | None = None
               ) -> tuple[Trace, tuple[str, ...], Findings]:
        """:meth:`trace`, and the universal checks' findings on it (judged once per run)."""
        crashed = self._crashed_run(scenario, driver)
        if crashed is not None:
            return crashed
        key = self._key(scenario)
        kept = self._kept.get(key) if key in self.shared else None
        if kept is None:
            fresh, stops = scenario_run(self.factory() if driver is None else driver, scenario)
            found = tuple(violations(fresh))
            findings = check(fresh, scenario, stops)
            if key is None or key not in self.shared:
                return fresh, found, findings
            kept = self._kept[key] = (json.dumps(fresh), found, findings)
        trace: Trace = json.loads(kept[0])
        return trace, kept[1], kept[2]

    def _split(self, document: Mapping[str, Any]) -> tuple[str, str] | None:
        """A document's JSON without its ``crash``, and its crash's JSON ("" without one), once
        per document object; None for a document that is not JSON."""
        known = self._splits.get(id(document))
        if known is not None and known[0] is document:
            return known[1]
        crash = document.get("crash") if isinstance(document, Mapping) else None
        try:
            if "crash" in document and not isinstance(crash, Mapping):
                raise ValueError("a crash that is not a crash document: not grouped")
            # Keys in the document's own order: a runtime may echo a script's order in its
            # trace, so documents equal but for it are not grouped together (Q246).
            split: tuple[str, str] | None = (
                json.dumps({k: v for k, v in document.items() if k != "crash"}),
                "" if crash is None else json.dumps(crash))
        except (TypeError, ValueError, AttributeError):  # not a JSON document
            split = None
        self._splits[id(document)] = (document, split)  # kept alive: its id stays its own
        return split

    def _crashed_run(self, scenario: Mapping[str, Any], driver: Driver | StdioDriver | None
                     ) -> tuple[Trace, tuple[str, ...], Findings] | None:
        """A document of a group of crashed documents several cases need (a crashed one, or
        the uncrashed one they share), through the driver's optional ``crashed_runs`` (the
        group's run-up once, conformance/crash_runup.py); None where the driver does not
        share it, so the document runs from scratch (Q241)."""
        split = self._split(scenario)
        crashes = None if split is None else self.crashes.get(split[0])
        if split is None or crashes is None or len(crashes) < 2:
            return None
        if split[0] not in self._later:
            self._later[split[0]] = {}  # unless it goes through: then from scratch
            try:
                self._later[split[0]] = self._run_crashes(
                    {k: v for k, v in scenario.items() if k != "crash"}, crashes,
                    self.factory() if driver is None else driver)
            except BaseException as failure:
                passes_on(failure)
                if not split[1]:  # the uncrashed run itself broke: this case reports it
                    raise
                return None
        later = self._later[split[0]].pop(split[1], None)
        if later is not None:  # called once; its trace kept for the cases that share it
            try:
                computed = later()
            except BaseException as failure:  # the ability broke: it runs from scratch
                passes_on(failure)
                computed = None
            # When the harness's stops came is not known for a trace computed this way.
            self._crashed[split] = None if computed is None else (
                json.dumps(computed), tuple(violations(computed)),
                check(computed, scenario, None))
        kept = self._crashed.get(split)
        if kept is None:
            return None
        trace: Trace = json.loads(kept[0])
        return trace, kept[1], kept[2]

    def _run_crashes(self, document: Mapping[str, Any], crashes: Mapping[str, Mapping[str, Any]],
                     driver: Driver | StdioDriver) -> dict[str, LaterTrace]:
        """The group's traces by crash ("": the uncrashed document, the run-up itself), each
        computed when a case first needs it. What the ability raises goes up: the group then
        runs from scratch, and only a case that asked for the uncrashed document reports it
        (as when it broke there, Q240)."""
        if isinstance(driver, StdioDriver) or not callable(getattr(driver, "crashed_runs",
                                                                   None)):
            return {}
        later = cast(CrashRunsDriver, driver).crashed_runs(
            document, [*crashes.values(), None], self.factory)
        return dict(zip([*crashes, ""], later, strict=False))


def run_case(case: Case, factory: DriverFactory,
             probes: Mapping[str, ProbeResult] | None = None,
             runs: SharedRuns | None = None) -> CaseResult:
    """One case on a fresh driver. ``probes`` (from :func:`confirm_capabilities`): a case that
    needs a declared capability its probe did not confirm still runs, and if it does not pass
    its detail says so (the probe's own words are reported once, before the cases).
    ``runs`` (of the same ``factory``): the documents several cases of the suite run need are
    run once there (:class:`SharedRuns`); without it the case runs its scenario and its
    baseline itself."""
    began = time.perf_counter()

    def result(status: Status, detail: str) -> CaseResult:
        return CaseResult(case, status, detail, time.perf_counter() - began)

    try:
        driver = factory()
    except BaseException as failure:  # the driver could not even be built
        passes_on(failure)
        return result("error", f"driver factory failed: {failure!r}")
    missing = sorted(case.needs - declared(driver.capabilities))
    if missing:
        return result("unsupported", f"the driver lacks {', '.join(missing)}")
    # A crash at a phase is confirmed by that phase's probe (conformance/probes.py).
    probed = sorted(case.needs)
    unconfirmed = [need for need in probed if probes is not None
                   and need in probes and probes[need].status == "not_confirmed"]
    if runs is None or runs.factory is not factory:
        runs = SharedRuns(factory)
    with for_case(driver, case.id):  # its baseline's run too: a stdio factory gives one driver
        judged = _judge(case, runs, driver, result)
    if isinstance(driver, StdioDriver):
        judged = replace(judged, log=tuple(driver.take_log(case.id)))
    if unconfirmed and judged.status != "passed":
        # The probe's verdict is reported once, at the top; the case still shows what it saw.
        return replace(judged, detail=f"{judged.detail}\n(the driver declares "
                                      f"{', '.join(unconfirmed)}, which its probe did not "
                                      f"confirm: see the report's first lines)")
    return judged


def _judge(case: Case, runs: SharedRuns, driver: Driver | StdioDriver,
           result: Callable[[Status, str], CaseResult]) -> CaseResult:
    if case.refusal is not None:
        return _expect_refusal(case, driver, result)
    try:
        baseline, broken, before = (None, (), Findings()) if case.baseline is None \
            else runs.judged(case.baseline)
        trace, found, findings = runs.judged(case.scenario, driver)
    except ScriptExhausted as exhausted:
        # The scenario scripts every call the design allows; asking for more is a wrong
        # behaviour observed (an extra model, tool or summary call), not a broken driver.
        return replace(result("failed", f"{rule(case)}\nthe runtime made a call the scenario "
                                        f"does not script: {exhausted}"),
                       requirement=cited(case), trace=_partial(driver))
    except BaseException as failure:  # the driver broke (an asyncio.CancelledError, say)
        passes_on(failure)
        return replace(result("error", traceback.format_exc(limit=3).strip().splitlines()[-1]),
                       trace=_partial(driver))
    contract = _contract("the trace", found) or _contract("the baseline's trace", broken)
    if contract:
        return replace(result("failed", contract), requirement=cited(case), trace=trace)
    own = _own_check(case, trace, baseline, result)
    judged = _with_universal(own, findings, before)
    return judged if judged.status == "passed" else replace(judged, trace=trace)


def _partial(driver: Driver | StdioDriver) -> Trace | None:
    """What a driver traced before its run broke off, as plain JSON; None when it cannot say
    (over stdio the run is one request, or its trace broke too)."""
    if isinstance(driver, StdioDriver):
        return None
    try:
        partial: Trace = json.loads(json.dumps(driver.trace(), default=str))
    except Exception:  # the driver's trace broke with its run: nothing to show
        return None
    return partial


UNIVERSAL_FAILURE = "the trace breaks a universal check (docs/conformance.md \"Universal checks\")"
"""The first line of the detail of a case that failed on a universal check alone."""


def _with_universal(own: CaseResult, findings: Findings, before: Findings) -> CaseResult:
    """A case's own verdict, failed as well by any universal violation in its trace or its
    baseline's (each named with its invariant, request and evidence)."""
    merged = Findings(findings.violations + before.violations, findings.skipped)
    if not merged.violations:
        return replace(own, universal=merged)
    said = [text for text in (summary(findings),
                              before.violations and "the baseline's trace: " + summary(before))
            if text]
    if own.status == "passed":
        detail = UNIVERSAL_FAILURE + "\n" + "\n".join(said)
        first = merged.violations[0].invariant
        own = replace(own, requirement=next(
            (i.requirements[0] for i in INVARIANTS if i.id == first), ""))
    else:
        detail = own.detail + "\nand " + UNIVERSAL_FAILURE.replace("the trace", "it") + ":\n" \
            + "\n".join(said)
    return replace(own, status="failed" if own.status == "passed" else own.status,
                   detail=detail, universal=merged)


def _own_check(case: Case, trace: Trace, baseline: Trace | None,
               result: Callable[[Status, str], CaseResult]) -> CaseResult:
    """The case's own predicate (and comparison with its baseline) on the trace; a failure a
    field of the driver's trace explains is the driver's (conformance/verdicts.py)."""
    status, detail, requirement = own_check(case, trace, baseline)
    return replace(result(cast(Status, status), detail), requirement=requirement)


def _contract(name: str, found: Sequence[str]) -> str:
    """A trace's violations of the trace contract (conformance/trace_contract.py) in words;
    empty when it holds."""
    if found:
        return (f"{name} breaks the trace contract v{TRACE_CONTRACT_VERSION} "
                f"(spec/schemas/Trace.json): " + "; ".join(found))
    return ""


def _expect_refusal(case: Case, driver: Driver | StdioDriver,
                    result: Callable[[Status, str], CaseResult]) -> CaseResult:
    """Bad input: the driver must refuse the scenario naming the documented code."""
    try:
        scenario_trace(driver, case.scenario)
    except BaseException as refused:
        passes_on(refused)
        if case.refusal is not None and case.refusal in str(refused):
            return result("passed", "")
        return replace(result("failed", f"{rule(case)}\nrefused without {case.refusal}: "
                                        f"{refused}"), requirement=cited(case))
    return replace(result("failed", f"{rule(case)}\nthe driver accepted a scenario it must "
                                    f"refuse with {case.refusal}"), requirement=cited(case))


def confirm_capabilities(factory: DriverFactory) -> dict[str, ProbeResult]:
    """Probe every capability the driver declares (conformance/probes.py). The universal
    checks judge each probe's trace too: a violation is added to that probe's result (its
    status stays what its sign says) and counted in the report."""
    seen: dict[int, Findings] = {}
    chosen = probes_for(declared(factory().capabilities))
    names = {id(each.scenario): f"probe:{each.capability}" for each in chosen}

    def trace_of(scenario: Mapping[str, Any]) -> Trace:
        driver = factory()
        with for_case(driver, names.get(id(scenario), "probe")):
            trace, seen[id(scenario)] = judged_trace(driver, scenario)
        return trace

    results = probe(declared(factory().capabilities), trace_of, chosen)
    for each in chosen:
        findings = seen.get(id(each.scenario))
        if each.capability in results and findings is not None and findings.violations:
            result = results[each.capability]
            results[each.capability] = replace(result, universal=findings, detail=(
                f"{result.detail}; " if result.detail else "") + "its probe's trace breaks a "
                "universal check: " + "; ".join(map(str, findings.violations[:3])))
    return results


def run_suite(cases: Iterable[Case], factory: DriverFactory,
              probes: Mapping[str, ProbeResult] | None = None) -> Iterator[CaseResult]:
    """Each case on a fresh driver; a scenario document several cases need runs once
    (:class:`SharedRuns`)."""
    cases = tuple(cases)
    runs = SharedRuns(factory, cases)
    for case in cases:
        yield run_case(case, factory, probes, runs)


_NO_CASE = Case("", "", "", (), {}, no_check)
"""What a worker's result carries in place of its case (whose check cannot be pickled)."""
_WORKER: dict[str, Any] = {}
"""In a worker process of :func:`run_suite_in_processes`: its driver factory, the probes'
verdicts and the suite's cases by id."""


def _start_worker(driver_spec: str | None, stdio: tuple[str, float, int] | None,
                  probes: Mapping[str, ProbeResult]) -> None:
    factory: DriverFactory
    if stdio is None:
        factory = load_factory(driver_spec)
    else:  # one subprocess per worker, closed when the worker exits
        stop = Stop()
        stop.install()
        connected = StdioDriver(*stdio, stop=stop.check)
        Finalize(connected, connected.close, exitpriority=10)

        def factory() -> StdioDriver:
            return connected
    from ctxspec.conformance.cases import by_id
    suite = by_id(None)
    _WORKER.update(factory=factory, probes=probes, cases={c.id: c for c in suite},
                   runs=SharedRuns(factory, suite))


def _run_in_worker(case_id: str) -> tuple[str, CaseResult]:
    result = run_case(_WORKER["cases"][case_id], _WORKER["factory"], _WORKER["probes"],
                      _WORKER["runs"])
    # The case goes back by its id: its check functions are the parent's own.
    return case_id, replace(result, case=_NO_CASE)


def run_suite_in_processes(cases: Sequence[Case], jobs: int, *, driver_spec: str | None,
                           stdio: tuple[str, float, int] | None,
                           probes: Mapping[str, ProbeResult]) -> Iterator[CaseResult]:
    """:func:`run_suite` over ``jobs`` worker processes, each with its own driver (and, with
    ``stdio`` — the command, read timeout and longest line of a :class:`StdioDriver` — its own
    runtime subprocess, started once per worker: a runtime that is
    slow to start pays it ``jobs`` times, not once per case). Results come in the cases'
    order, each case still on a fresh driver from the worker's factory."""
    chosen = {case.id: case for case in cases}
    # Runs of neighbouring cases in one worker: the suite lists a crash group's cases together,
    # and a worker shares a group's run-up only among its own cases (four runs per worker keep
    # the workers' loads even).
    run = -(-len(chosen) // (4 * jobs))
    pool = ProcessPoolExecutor(jobs, initializer=_start_worker,
                               initargs=(driver_spec, stdio, dict(probes)))
    try:
        for case_id, result in pool.map(_run_in_worker, list(chosen), chunksize=run):
            yield replace(result, case=chosen[case_id])
    finally:
        # Stopped (Ctrl-C, SIGTERM, a consumer that stops reading): the runs not started are
        # dropped, not run to the end; the workers finish the cases in hand and exit, closing
        # their runtimes.
        pool.shutdown(cancel_futures=True)


def load_factory(spec: str | None) -> DriverFactory:
    """``module:factory`` (a callable returning a Driver), or the reference driver."""
    if spec is None:
        return ReferenceDriver
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise ValueError(f"--driver {spec!r}: expected module:factory")
    factory: object = getattr(importlib.import_module(module_name), attribute, None)
    if not callable(factory):
        raise ValueError(f"--driver {spec!r}: {attribute!r} is not a callable of {module_name}")
    return cast(DriverFactory, factory)


__all__ = ["SUITE_VERSION", "CaseResult", "DriverFactory", "ReportLine", "SharedRuns",
           "confirm_capabilities", "load_factory", "rule", "run_case", "run_suite",
           "run_suite_in_processes", "scenario_trace", "write_reports"]
