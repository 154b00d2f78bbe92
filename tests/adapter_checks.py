"""The checks every framework adapter's test file makes on a handful of cases
(tests/test_*_adapter.py): its declared capabilities confirmed by their probes, what the
framework keeps passing, and each divergence failing for the reason its report gives. Each
test file names its own cases and factory; the checks are the same for all."""

from collections.abc import Callable, Mapping
from typing import Any

from ctxspec.conformance.cases import by_id
from ctxspec.conformance.compat import Profile
from ctxspec.conformance.harness import CaseResult, DriverFactory, run_case
from ctxspec.conformance.probes import ProbeResult


def run(case_id: str, factory: DriverFactory, probes: dict[str, ProbeResult]) -> CaseResult:
    """One case against the adapter the factory makes."""
    [case] = by_id([case_id])
    return run_case(case, factory, probes)


def all_confirmed(probes: dict[str, ProbeResult], factory: Callable[[], Any]) -> None:
    """Every capability the driver declares is confirmed by its probe, and only those."""
    assert {name: p.status for name, p in probes.items()} == dict.fromkeys(
        factory().capabilities, "confirmed")


def passes(case_id: str, factory: DriverFactory, probes: dict[str, ProbeResult]) -> None:
    result = run(case_id, factory, probes)
    assert result.status == "passed", result.detail


def diverges(case_id: str, factory: DriverFactory, probes: dict[str, ProbeResult],
             diverging: Mapping[str, str], profile: Profile) -> None:
    """The case fails, its failure shows the word ``diverging`` gives for it, and the
    adapter's report explains it as a divergence."""
    result = run(case_id, factory, probes)
    assert result.status == "failed", result.detail
    assert diverging[case_id] in result.detail, (
        f"{case_id} failed, but not showing {diverging[case_id]!r}: {result.detail}")
    assert case_id in profile.divergences, f"{case_id} is no divergence the report explains"
