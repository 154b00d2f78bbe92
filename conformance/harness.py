"""The conformance harness: runs cases against a Driver and reports each honestly
(docs/architecture.md "Layers"): ``passed`` only when the scenario ran and every expectation held;
``failed`` when an expectation did not, or the runtime asked a scripted port for more than the
scenario scripts; ``error`` when the driver itself broke; ``unsupported``
when the driver lacks a capability the case needs — never ``passed``.

The trace is read back as plain JSON (a round trip through ``json``), so a case sees exactly what
a driver in another language would send.
"""

import functools
import importlib
import json
import time
import traceback
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from multiprocessing.util import Finalize
from pathlib import Path
from typing import Any, Literal, cast
from xml.etree import ElementTree

from pydantic import BaseModel, ConfigDict, Field

from ctxspec.catalogue import load_catalogue
from ctxspec.conformance.capabilities import declared
from ctxspec.conformance.cases import Case, CaseFailure, Trace
from ctxspec.conformance.driver import Driver, ReferenceDriver, run_scenario
from ctxspec.conformance.probes import ProbeResult, probe
from ctxspec.conformance.scenario import parse_scenario
from ctxspec.conformance.stdio import StdioDriver
from ctxspec.conformance.trace_contract import OPTIONAL, TRACE_CONTRACT_VERSION, violations
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


@dataclass(frozen=True)
class CaseResult:
    case: Case
    status: Status
    detail: str
    seconds: float

    def to_json(self) -> dict[str, object]:
        """The case's entry in ``--json`` output: its report line without the run's context."""
        return self.report_line("").model_dump(
            include={"id", "title", "source", "requirements", "status", "detail"})

    def report_line(self, driver: str) -> ReportLine:
        return ReportLine(suite_version=SUITE_VERSION, driver=driver, id=self.case.id,
                          title=self.case.title, source=self.case.source,
                          requirements=list(self.case.requirements), status=self.status,
                          detail=self.detail, seconds=round(self.seconds, 6))


def write_reports(results: Sequence[CaseResult], driver: str, *, jsonl: Path | None = None,
                  junit: Path | None = None) -> None:
    """The JSON Lines and JUnit XML reports, each written whole or not at all (a temporary file
    renamed into place)."""
    if jsonl is not None:
        _write_atomically(jsonl, "".join(
            r.report_line(driver).model_dump_json() + "\n" for r in results))
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
                ElementTree.SubElement(case, tag, {"message": result.detail})
        _write_atomically(junit, ElementTree.tostring(suite, encoding="unicode") + "\n")


def _write_atomically(path: Path, text: str) -> None:
    temporary = path.with_name(path.name + ".partial")
    temporary.write_text(text, "utf-8")
    temporary.replace(path)


def scenario_trace(driver: Driver | StdioDriver, scenario: Mapping[str, Any]) -> Trace:
    """Run a scenario on a driver and read its neutral trace back as plain JSON — exactly what
    a driver in another language would send."""
    if isinstance(driver, StdioDriver):  # the ports live in the other process
        return driver.run_document(dict(scenario))
    run_scenario(parse_scenario(scenario), lambda: driver)
    trace: Trace = json.loads(json.dumps(driver.trace(), default=str))
    return trace


class Baselines:
    """The uncrashed traces of one driver factory within one suite run, by baseline scenario.

    Hundreds of relational cases (the crash matrices) share a handful of baselines: each case
    still runs its own scenario on its own fresh driver, and is judged against the trace the
    same factory gave for its baseline the first time it ran in this suite run, instead of
    running that baseline again (the same scenario on a fresh driver of the same factory).
    Only a baseline that ran through is kept, with its trace-contract verdict (checked once):
    one that raised is run again by the next case, which reports it itself. Each case reads
    its own copy (parsed from the kept JSON), so no case can change what another is judged
    against."""

    def __init__(self, factory: DriverFactory) -> None:
        self.factory = factory
        self._kept: dict[str, tuple[str, str]] = {}

    def trace(self, scenario: Mapping[str, Any]) -> tuple[Trace, str]:
        """The baseline's trace (a copy of its own) and its trace-contract violations in words
        (empty when it holds), checked once with the run that is kept."""
        try:
            key = json.dumps(scenario, sort_keys=True)
        except (TypeError, ValueError):  # not a JSON document: nothing to key it by
            fresh = scenario_trace(self.factory(), scenario)
            return fresh, _contract("the baseline's trace", fresh)
        kept = self._kept.get(key)
        if kept is None:
            fresh = scenario_trace(self.factory(), scenario)
            kept = self._kept[key] = (json.dumps(fresh),
                                      _contract("the baseline's trace", fresh))
        trace: Trace = json.loads(kept[0])
        return trace, kept[1]


def run_case(case: Case, factory: DriverFactory,
             probes: Mapping[str, ProbeResult] | None = None,
             baselines: Baselines | None = None) -> CaseResult:
    """One case on a fresh driver. ``probes`` (from :func:`confirm_capabilities`): a case that
    needs a declared capability its probe did not confirm still runs, and if it does not pass
    its detail says so (the probe's own words are reported once, before the cases).
    ``baselines`` (of the same ``factory``): a relational case's baseline trace is taken from
    there, run once per suite run; without it the baseline runs for this case alone."""
    began = time.perf_counter()

    def result(status: Status, detail: str) -> CaseResult:
        return CaseResult(case, status, detail, time.perf_counter() - began)

    try:
        driver = factory()
    except Exception as failure:  # the driver could not even be built
        return result("error", f"driver factory failed: {failure!r}")
    missing = sorted(case.needs - declared(driver.capabilities))
    if missing:
        return result("unsupported", f"the driver lacks {', '.join(missing)}")
    # A crash at any phase is confirmed by the crash_points probe (one crash and a restart).
    probed = sorted({"crash_points" if need.startswith("crash:") else need
                     for need in case.needs})
    unconfirmed = [need for need in probed if probes is not None
                   and need in probes and probes[need].status == "not_confirmed"]
    if baselines is None or baselines.factory is not factory:
        baselines = Baselines(factory)
    judged = _judge(case, baselines, driver, result)
    if unconfirmed and judged.status != "passed":
        # The probe's verdict is reported once, at the top; the case still shows what it saw.
        return replace(judged, detail=f"{judged.detail}\n(the driver declares "
                                      f"{', '.join(unconfirmed)}, which its probe did not "
                                      f"confirm: see the report's first lines)")
    return judged


def _judge(case: Case, baselines: Baselines, driver: Driver | StdioDriver,
           result: Callable[[Status, str], CaseResult]) -> CaseResult:
    if case.refusal is not None:
        return _expect_refusal(case, driver, result)
    try:
        baseline, broken = (None, "") if case.baseline is None else baselines.trace(
            case.baseline)
        trace = scenario_trace(driver, case.scenario)
    except ScriptExhausted as exhausted:
        # The scenario scripts every call the design allows; asking for more is a wrong
        # behaviour observed (an extra model, tool or summary call), not a broken driver.
        return result("failed", f"{rule(case)}\nthe runtime made a call the scenario does not "
                                f"script: "
                                f"{exhausted}")
    except Exception:
        return result("error", traceback.format_exc(limit=3).strip().splitlines()[-1])
    broken = _contract("the trace", trace) or broken
    if broken:
        return result("failed", broken)
    try:
        case.check(trace)
        if case.compare is not None and baseline is not None:
            case.compare(trace, baseline)
    except CaseFailure as failure:
        return result("failed", f"{rule(case)}\n{failure}")
    except (IndexError, StopIteration) as failure:
        # The trace holds every field the case reads (the contract held), so what is missing
        # is an event the case looks for: the runtime did not do something.
        return result("failed", f"{rule(case)}\nan event the case looks for is not in the "
                                f"trace ({type(failure).__name__} in the case's reading)")
    except KeyError as failure:
        if failure.args and failure.args[0] in OPTIONAL:
            return result("failed", f"{rule(case)}\nthe trace lacks the field "
                                    f"{failure.args[0]!r} of a model_request, which this case "
                                    f"reads (optional in the trace contract)")
        return _suite_fault(failure, result)
    except Exception as failure:  # the case's own predicate broke: the suite's fault
        return _suite_fault(failure, result)
    return result("passed", "")


def _suite_fault(failure: Exception, result: Callable[[Status, str], CaseResult]) -> CaseResult:
    return result("error", f"the case's own check raised {failure!r}: a fault of the suite, "
                           f"not of the driver — please report it")


def _contract(name: str, trace: Trace) -> str:
    """The first violations of the trace contract (conformance/trace_contract.py) by ``trace``
    (the case's, or its baseline's), in words; empty when it holds."""
    found = violations(trace)
    if found:
        return (f"{name} breaks the trace contract v{TRACE_CONTRACT_VERSION} "
                f"(spec/schemas/Trace.json): " + "; ".join(found))
    return ""


def rule(case: Case) -> str:
    """The rule a case holds a runtime to: its first requirement's ID and English
    statement (spec/requirements.toml), or its source."""
    for requirement in case.requirements:
        statement = _statements().get(requirement)
        if statement is not None:
            return f"{requirement}: {statement}"
    return f"{case.source}: {case.title}"


@functools.cache
def _statements() -> dict[str, str]:
    return {r.id: r.statement for r in load_catalogue()}


def _expect_refusal(case: Case, driver: Driver | StdioDriver,
                    result: Callable[[Status, str], CaseResult]) -> CaseResult:
    """Bad input: the driver must refuse the scenario naming the documented code."""
    try:
        scenario_trace(driver, case.scenario)
    except Exception as refused:
        if case.refusal is not None and case.refusal in str(refused):
            return result("passed", "")
        return result("failed", f"{rule(case)}\nrefused without {case.refusal}: {refused}")
    return result("failed", f"{rule(case)}\nthe driver accepted a scenario it must refuse with "
                            f"{case.refusal}")


def confirm_capabilities(factory: DriverFactory) -> dict[str, ProbeResult]:
    """Probe every capability the driver declares (conformance/probes.py)."""
    return probe(declared(factory().capabilities),
                 lambda scenario: scenario_trace(factory(), scenario))


def run_suite(cases: Iterable[Case], factory: DriverFactory,
              probes: Mapping[str, ProbeResult] | None = None) -> Iterator[CaseResult]:
    """Each case on a fresh driver; the relational cases' baselines run once each
    (:class:`Baselines`)."""
    baselines = Baselines(factory)
    for case in cases:
        yield run_case(case, factory, probes, baselines)


_WORKER: dict[str, Any] = {}
"""In a worker process of :func:`run_suite_in_processes`: its driver factory, the probes'
verdicts and the suite's cases by id."""


def _start_worker(driver_spec: str | None, stdio: tuple[str, float, int] | None,
                  probes: Mapping[str, ProbeResult]) -> None:
    factory: DriverFactory
    if stdio is None:
        factory = load_factory(driver_spec)
    else:  # one subprocess per worker, closed when the worker exits
        connected = StdioDriver(*stdio)
        Finalize(connected, connected.close, exitpriority=10)

        def factory() -> StdioDriver:
            return connected
    from ctxspec.conformance.cases import by_id
    _WORKER.update(factory=factory, probes=probes, cases={c.id: c for c in by_id(None)},
                   baselines=Baselines(factory))


def _run_in_worker(case_id: str) -> tuple[str, Status, str, float]:
    result = run_case(_WORKER["cases"][case_id], _WORKER["factory"], _WORKER["probes"],
                      _WORKER["baselines"])
    return case_id, result.status, result.detail, result.seconds


def run_suite_in_processes(cases: Sequence[Case], jobs: int, *, driver_spec: str | None,
                           stdio: tuple[str, float, int] | None,
                           probes: Mapping[str, ProbeResult]) -> Iterator[CaseResult]:
    """:func:`run_suite` over ``jobs`` worker processes, each with its own driver (and, with
    ``stdio`` — the command, read timeout and longest line of a :class:`StdioDriver` — its own
    runtime subprocess, started once per worker: a runtime that is
    slow to start pays it ``jobs`` times, not once per case). Results come in the cases'
    order, each case still on a fresh driver from the worker's factory."""
    chosen = {case.id: case for case in cases}
    with ProcessPoolExecutor(jobs, initializer=_start_worker,
                             initargs=(driver_spec, stdio, dict(probes))) as pool:
        for case_id, status, detail, seconds in pool.map(_run_in_worker, list(chosen)):
            yield CaseResult(chosen[case_id], status, detail, seconds)


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


__all__ = ["SUITE_VERSION", "Baselines", "CaseResult", "DriverFactory", "ReportLine",
           "confirm_capabilities", "load_factory", "run_case", "run_suite",
           "run_suite_in_processes", "scenario_trace", "write_reports"]
