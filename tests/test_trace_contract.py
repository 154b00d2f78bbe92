"""The trace contract (spec/schemas/Trace.json, conformance/trace_contract.py): the reference's
traces satisfy it, the published JSON Schema says the same as the harness's check, and a trace
that breaks it is reported by event index, field path and rule before any case judges it."""

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from ctxspec.conformance.cases import CASES
from ctxspec.conformance.driver import ReferenceDriver
from ctxspec.conformance.harness import run_case, scenario_trace
from ctxspec.conformance.trace_contract import violations

SCHEMA = json.loads((Path(__file__).resolve().parent.parent / "spec" / "schemas" /
                     "Trace.json").read_text("utf-8"))
BY_ID = {case.id: case for case in CASES}


def _trace(case_id: str) -> list[dict[str, Any]]:
    return scenario_trace(ReferenceDriver(), BY_ID[case_id].scenario)


def test_reference_traces_hold_the_contract_and_its_schema() -> None:
    for case_id in ("ROW-01", "ROW-07", "ROW-12", "ROW-20", "S7-USAGE-AUDITED", "ROW-19"):
        trace = _trace(case_id)
        assert violations(trace) == []
        jsonschema.validate(trace, SCHEMA)


def test_a_broken_trace_is_named_by_event_field_and_rule() -> None:
    trace = _trace("ROW-01")
    index, message = next((i, m) for i, e in enumerate(trace) if e["kind"] == "model_request"
                          for m in e["view"]["messages"] if m["kind"] == "outcome")
    del message["run_no"]
    found = violations(trace)
    assert len(found) == 1
    assert found[0].startswith(f"event {index} (model_request) view.messages[")
    assert "an outcome message carries run_no, status and final_result" in found[0]
    with pytest.raises(jsonschema.ValidationError):  # the published schema refuses it too
        jsonschema.validate(trace, SCHEMA)


def test_the_harness_reports_a_contract_violation_before_judging() -> None:
    class Missing(ReferenceDriver):
        def trace(self) -> list[dict[str, Any]]:
            return [{k: v for k, v in e.items() if k != "attempt"} for e in super().trace()]

    result = run_case(BY_ID["ROW-02"], Missing)
    assert result.status == "failed"
    assert "breaks the trace contract v2" in result.detail
    assert "(model_request) attempt: Field required" in result.detail
    assert len(result.detail.splitlines()) <= 25


def test_a_broken_predicate_is_the_suites_error() -> None:
    case = BY_ID["ROW-02"]

    def broken(trace: list[dict[str, Any]]) -> None:
        trace[0]["no such field"]

    result = run_case(type(case)(**{**case.__dict__, "check": broken}), ReferenceDriver)
    assert result.status == "error"
    assert "a fault of the suite" in result.detail


def test_a_denial_carries_its_facts_and_the_contract_checks_them() -> None:
    # ROW-18: a pre-call deny blocks rm — by §3 the call did not run and no ordinary result
    # was delivered (Q210).
    trace = _trace("ROW-18")
    index, message = next((i, m) for i, e in enumerate(trace) if e["kind"] == "model_request"
                          for m in e["view"]["messages"] if m.get("result_facts"))
    assert message["result_facts"] == {"status": "denied", "stage": "pre", "executed": False,
                                       "result_delivered": False}
    assert violations(trace) == []
    jsonschema.validate(trace, SCHEMA)
    del message["result_facts"]["stage"]
    found = violations(trace)
    assert len(found) == 1 and found[0].startswith(f"event {index} (model_request) view.")
    assert "a denial's result_facts carry stage, executed and result_delivered" in found[0]
