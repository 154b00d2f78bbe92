"""The trace contract covers every field a case reads (issue #33): each field a case's checks
look up in the reference's traces is named by the contract (conformance/trace_contract.py,
spec/schemas/Trace.json), and spec/trace-fields.json — each field required or optional, with
the cases that read the optional ones — is what the cases read now (``ctxspec contracts
--check`` checks the same)."""

import json
from pathlib import Path

import jsonschema
import pytest

from ctxspec.conformance.cases import CASES
from ctxspec.conformance.trace_fields import lookups, trace_fields, unnamed
from ctxspec.contracts import render
from ctxspec.schemas import published_schemas
from tests.reference_traces import TraceOf

SPEC = Path(__file__).resolve().parent.parent / "spec"
Read = dict[tuple[str, str], set[str]]


@pytest.fixture(scope="module")
def read(reference_trace: TraceOf) -> Read:
    return lookups(CASES, reference_trace)


@pytest.mark.first  # the reference traces' parts, shared by the workers as they start
def test_every_field_a_case_reads_is_in_the_contract(read: Read) -> None:
    assert unnamed(read) == []
    assert ("run_ended", "final_answer") in read  # not vacuous: optional fields are read


def test_a_field_outside_the_contract_is_caught(read: Read) -> None:
    assert unnamed({**read, ("run_ended", "no_such_field"): {"ROW-01"}}) == [
        "run_ended.no_such_field: ROW-01"]


def test_the_published_table_is_what_the_cases_read(read: Read) -> None:
    text = (SPEC / "trace-fields.json").read_text("utf-8")
    assert text == render(trace_fields(read)), "run `ctxspec contracts` and commit"
    document = json.loads(text)
    jsonschema.validate(document, published_schemas()["TraceFields.json"])
    fields = {(e["kind"], f["path"]): f for e in document["events"] for f in e["fields"]}
    assert fields[("model_request", "purpose")] == {"path": "purpose", "status": "required",
                                                    "read_by": []}
    modified = fields[("model_request", "view.messages.modified_by")]
    assert modified["status"] == "optional"
    assert "S2-POST-PROCESSED" in modified["read_by"]
