"""LangChain mapped a second way (tests/langchain_second_mapping.py: the design's hook points
written as LangChain's decorator middleware instead of one AgentMiddleware class) reaches the
adapter's verdict on every case the adapter fails that runs through those points (issue #32: no
failure that passes when only the mapping changes). The adapter's verdicts are its checked-in
report's, which tests/test_compat_reports.py keeps equal to a fresh run; the whole comparison
is in the slow tier."""

import pytest

from ctxspec.adapters.langchain_hooks import DesignHooks
from ctxspec.conformance.cases import by_id
from ctxspec.conformance.harness import run_case, scenario_trace
from tests.langchain_second_mapping import make_driver
from tests.second_mappings import reported

POINTS = frozenset({"hooks:model.pre_request", "hooks:model.post_response",
                    "hooks:tool.post_call"})
"""The points the second mapping writes otherwise: only cases through them can differ."""
FEW = ("S2-POST-PROCESSED", "S3-POST-CALL", "HM-MPRE-DENY-ROOT-FAILED-SHARED")
"""Failures of the adapter at each of the three points."""


def _differences(ids: list[str]) -> dict[str, tuple[str, str]]:
    adapter = reported("langchain")
    second = {case.id: run_case(case, make_driver).status for case in by_id(ids)}
    return {case: (adapter[case], status) for case, status in second.items()
            if status != adapter[case]}


def test_the_second_mapping_writes_the_hooks_as_decorated_functions() -> None:
    # The comparison means something only if the second driver really does it differently.
    [case] = by_id(["HM-MPRE-MODIFY-ROOT-SUCCEEDED"])
    driver = make_driver()
    scenario_trace(driver, case.scenario)
    kinds = [type(each) for each in driver.middleware]
    assert DesignHooks not in kinds, kinds
    assert {"design_pre_request", "design_request_settings"} <= {
        each.name for each in driver.middleware}


def test_the_failures_at_each_point_hold_for_a_second_mapping() -> None:
    assert not _differences(list(FEW)), "verdicts that depend on how the middleware is written"


@pytest.mark.slow
def test_every_failure_through_the_hooks_holds_for_a_second_mapping() -> None:
    # Q541: decorator middleware in place of the adapter's class, on every failure through it.
    adapter = reported("langchain")
    failed = [case.id for case in by_id(None)
              if case.needs & POINTS and adapter.get(case.id) == "failed"]
    assert len(failed) >= 30, f"only {len(failed)} failures compared"
    differ = _differences(failed)
    assert not differ, f"verdicts that depend on the adapter's mapping (adapter, second): {differ}"
