"""The conformance cases as pytest tests (run with ``pytest --pyargs ctxspec.conformance.suite``;
``--ctxspec-driver`` picks the driver). A case the driver lacks a capability for is skipped with
the reason ``unsupported``: it is never reported as passed; one needing a capability the driver
declares but its probe does not confirm fails (conformance/probes.py)."""

import pytest

from ctxspec.conformance.cases import CASES, Case
from ctxspec.conformance.harness import DriverFactory, SharedRuns, confirm_capabilities, run_case
from ctxspec.conformance.probes import ProbeResult
from ctxspec.conformance.replays import replay_command

_PROBED: dict[DriverFactory, dict[str, ProbeResult]] = {}
"""The capability probes of each driver factory, run once per test session."""
_RUNS: dict[DriverFactory, SharedRuns] = {}
"""Each driver factory's runs of the scenario documents several cases need (the crash
matrix's baselines above all): run once per test session, as in ``ctxspec conformance``."""


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.id)
def test_conformance_case(case: Case, ctxspec_driver_factory: DriverFactory,
                          request: pytest.FixtureRequest) -> None:
    if ctxspec_driver_factory not in _PROBED:
        _PROBED[ctxspec_driver_factory] = confirm_capabilities(ctxspec_driver_factory)
        _RUNS[ctxspec_driver_factory] = SharedRuns(ctxspec_driver_factory, CASES)
    result = run_case(case, ctxspec_driver_factory, _PROBED[ctxspec_driver_factory],
                      _RUNS[ctxspec_driver_factory])
    if result.status == "unsupported":
        pytest.skip(f"unsupported: {result.detail}")
    driver = request.config.getoption("--ctxspec-driver")
    replay = replay_command(case.id, driver if isinstance(driver, str) else "reference")
    assert result.status == "passed", (f"{case.id} ({case.source}) {result.status}: "
                                       f"{result.detail}\nreplay: {replay}")
