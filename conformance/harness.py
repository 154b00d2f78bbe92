"""The conformance harness: runs cases against a Driver and reports each honestly (ARCHITECTURE.md
"The conformance suite"): ``passed`` only when the scenario ran and every expectation held;
``failed`` when an expectation did not; ``error`` when the driver itself broke; ``unsupported``
when the driver lacks a capability the case needs — never ``passed``.

The trace is read back as plain JSON (a round trip through ``json``), so a case sees exactly what
a driver in another language would send.
"""

import importlib
import json
import time
import traceback
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Literal, cast

from ctxspec.conformance.cases import Case, CaseFailure
from ctxspec.conformance.driver import Driver, ReferenceDriver, run_scenario
from ctxspec.conformance.scenario import parse_scenario

SUITE_VERSION = "0.1.0"
Status = Literal["passed", "failed", "unsupported", "error"]
DriverFactory = Callable[[], Driver]


@dataclass(frozen=True)
class CaseResult:
    case: Case
    status: Status
    detail: str
    seconds: float

    def to_json(self) -> dict[str, object]:
        return {"id": self.case.id, "title": self.case.title, "source": self.case.source,
                "requirements": list(self.case.requirements), "status": self.status,
                "detail": self.detail}


def run_case(case: Case, factory: DriverFactory) -> CaseResult:
    began = time.perf_counter()

    def result(status: Status, detail: str) -> CaseResult:
        return CaseResult(case, status, detail, time.perf_counter() - began)

    try:
        driver = factory()
    except Exception as failure:  # the driver could not even be built
        return result("error", f"driver factory failed: {failure!r}")
    missing = sorted(case.needs - frozenset(driver.capabilities))
    if missing:
        return result("unsupported", f"the driver lacks {', '.join(missing)}")
    try:
        run_scenario(parse_scenario(case.scenario), lambda: driver)
        trace = json.loads(json.dumps(driver.trace(), default=str))
    except Exception:
        return result("error", traceback.format_exc(limit=3).strip().splitlines()[-1])
    try:
        case.check(trace)
    except CaseFailure as failure:
        return result("failed", str(failure))
    except (KeyError, IndexError, TypeError, StopIteration) as failure:
        # The trace lacks what the case reads: an event or field the design makes observable.
        return result("failed", f"the trace lacks what the case reads: {failure!r}")
    return result("passed", "")


def run_suite(cases: Iterable[Case], factory: DriverFactory) -> Iterator[CaseResult]:
    for case in cases:
        yield run_case(case, factory)


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


__all__ = ["SUITE_VERSION", "CaseResult", "DriverFactory", "load_factory", "run_case", "run_suite"]
