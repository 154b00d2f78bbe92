"""The Agents SDK mapped a second way (tests/agents_second_mapping.py: the history carried by the
caller with ``to_input_list()`` instead of a ``SQLiteSession``, the Executor's hand-over worded
by us instead of the SDK's builder) reaches the same verdict as the adapter on the cases that
read those choices (issue #32: no failure that passes when only the mapping changes). The
whole suite's comparison is in the slow tier. So does the SDK's tool approval
(``needs_approval``, a RunState approved or rejected) in place of its input guardrail as the
pre-call hook (ctxspec/adapters/openai_agents/approvals.py, Q540), on every case with a
pre-call hook the adapter judges."""

import asyncio
from typing import TYPE_CHECKING

import pytest

from ctxspec.conformance.cases import by_id
from ctxspec.conformance.harness import (
    confirm_capabilities,
    load_factory,
    run_case,
    scenario_trace,
)
from tests.second_mappings import reported

if TYPE_CHECKING:
    from ctxspec.conformance.harness import DriverFactory

ADAPTER = "ctxspec.adapters.openai_agents:make_driver"
SECOND = "tests.agents_second_mapping:make_driver"
CASES = ("ROW-01", "ROW-02", "ROW-07", "ROW-13", "EX4-OLDER-RUN", "S4-CURRENT-RUN",
         "S5-DELIVERED-ON-OUTPUT", "ROW-03", "S11-EXECUTOR-CONTEXT-ERROR", "S11-LOOPS-SHARED",
         "S3-DELEGATE-POST-DENY")
"""Cases of the history across Runs (what the session or the caller carries) and of the
Planner's hand-over; among them passes and failures of both kinds."""


def _statuses(spec: str, cases: tuple[str, ...] | None) -> dict[str, str]:
    factory: DriverFactory = load_factory(spec)
    probes = confirm_capabilities(factory)
    return {case.id: run_case(case, factory, probes).status
            for case in by_id(None if cases is None else list(cases))}


def test_the_second_mapping_is_another_mapping() -> None:
    # The comparison means something only if the second driver really does it differently.
    from tests.agents_second_mapping import make_driver
    driver = make_driver()
    [row2] = by_id(["ROW-02"])
    scenario_trace(driver, row2.scenario)
    assert asyncio.run(driver.session.get_items()) == [], "the second mapping used the session"
    assert driver.history, "the second mapping carried no history"
    [row3] = by_id(["ROW-03"])
    trace = scenario_trace(make_driver(), row3.scenario)
    handed = [m["text"] for e in trace if e["kind"] == "model_request" and e["role"] == "executor"
              for m in e["view"]["messages"] if m["kind"] == "user_ref"]
    assert handed and handed[0].startswith("task: list TODO lines"), handed[:1]


def test_the_verdicts_hold_for_a_second_mapping() -> None:
    adapter, second = _statuses(ADAPTER, CASES), _statuses(SECOND, CASES)
    assert {"passed", "failed"} <= set(adapter.values()), adapter  # not a vacuous comparison
    differ = {case: (adapter[case], second[case]) for case in CASES
              if adapter[case] != second[case]}
    assert not differ, (f"verdicts that depend on the adapter's mapping (adapter, second): "
                        f"{differ}; name them in the report's doubts or fix the case")


@pytest.mark.slow
def test_every_verdict_holds_for_a_second_mapping() -> None:
    # The adapter's verdicts are its checked-in report's (kept equal to a fresh run by
    # tests/test_compat_reports.py), so the suite runs once here, on the second mapping.
    adapter = reported("openai-agents")
    second = _statuses(SECOND, None)
    both = [case for case, status in second.items() if status != "unsupported"]
    assert len(both) >= 80, f"only {len(both)} cases compared"
    differ = {case: (adapter[case], second[case]) for case in both
              if adapter[case] != second[case]}
    assert not differ, f"verdicts that depend on the adapter's mapping (adapter, second): {differ}"


# --- tool.pre_call as the SDK's tool approval (ctxspec/adapters/openai_agents/approvals.py) ---

APPROVALS = "ctxspec.adapters.openai_agents.approvals:make_approvals_driver"


def _against_the_report(ids: list[str]) -> dict[str, tuple[str, str]]:
    """The approvals mapping's verdicts against the adapter's checked-in ones (which
    tests/test_compat_reports.py keeps equal to a fresh run)."""
    adapter = reported("openai-agents")
    factory = load_factory(APPROVALS)
    second = {case.id: run_case(case, factory).status for case in by_id(ids)}
    return {case: (adapter[case], status) for case, status in second.items()
            if status != adapter[case]}


def test_the_approvals_mapping_pauses_the_run_and_answers() -> None:
    from ctxspec.adapters.openai_agents.approvals import make_approvals_driver
    [case] = by_id(["HM-TPRE-DENY-ROOT-SUCCEEDED"])
    driver = make_approvals_driver()
    trace = scenario_trace(driver, case.scenario)
    assert driver.answered == 1, "no approval was asked for"
    assert all(not tool.tool_input_guardrails for tool in driver.tools)
    assert [e for e in trace if e["kind"] == "tool_executed"] == [], "a rejected call ran"


def test_pre_call_verdicts_hold_for_approvals() -> None:
    # A pre-call modify the SDK cannot make, a deny, and an allow.
    assert not _against_the_report(["HM-TPRE-MODIFY-ROOT-SUCCEEDED",
                                     "HM-TPRE-DENY-ROOT-SUCCEEDED",
                                     "HM-TPRE-ALLOW-ROOT-SUCCEEDED"])


@pytest.mark.slow
def test_every_pre_call_verdict_holds_for_approvals() -> None:
    # Q540: the approvals mapping must agree with the guardrail mapping the report judges.
    adapter = reported("openai-agents")
    judged = [case.id for case in by_id(None) if "hooks:tool.pre_call" in case.needs
              and adapter.get(case.id) not in (None, "unsupported")]
    assert len(judged) >= 40, f"only {len(judged)} cases compared"
    differ = _against_the_report(judged)
    assert not differ, f"verdicts that depend on the pre-call mapping (adapter, second): {differ}"
