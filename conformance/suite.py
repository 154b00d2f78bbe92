"""The conformance cases as pytest tests (run with ``pytest --pyargs ctxspec.conformance.suite``;
``--ctxspec-driver`` picks the driver). A case the driver lacks a capability for is skipped with
the reason ``unsupported``: it is never reported as passed."""

import pytest

from ctxspec.conformance.cases import CASES, Case
from ctxspec.conformance.harness import DriverFactory, run_case


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.id)
def test_conformance_case(case: Case, ctxspec_driver_factory: DriverFactory) -> None:
    result = run_case(case, ctxspec_driver_factory)
    if result.status == "unsupported":
        pytest.skip(f"unsupported: {result.detail}")
    assert result.status == "passed", f"{case.id} ({case.source}) {result.status}: {result.detail}"
