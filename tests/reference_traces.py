"""The reference's trace of every judged case's scenario and baseline, computed once per test
run (tests/worker_share.py) for the modules that read what the cases look up in them rather
than judge a runtime (tests/test_case_rules.py, tests/test_trace_fields.py,
tests/test_capabilities.py)."""

import json
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from ctxspec.conformance.case import Trace
from ctxspec.conformance.cases import CASES
from ctxspec.conformance.harness import SharedRuns, load_factory
from tests.worker_share import once_per_run, split_cases

TraceOf = Callable[[Mapping[str, Any]], Trace]
JUDGED = [case for case in CASES if case.refusal is None]
TRACE_PARTS = 4


def _reference_part(part: int) -> str:
    """The reference's trace (as JSON) of each scenario and baseline a part of the judged
    cases runs, by the document's canonical JSON."""
    cases = split_cases(JUDGED, TRACE_PARTS)[part]
    runs = SharedRuns(load_factory(None), cases)
    documents = [d for case in cases for d in (case.scenario, case.baseline) if d is not None]
    return json.dumps({json.dumps(d, sort_keys=True): json.dumps(runs.trace(d)[0])
                       for d in documents})


@pytest.fixture(scope="session")
def reference_trace(tmp_path_factory: pytest.TempPathFactory) -> TraceOf:
    """A judged case's scenario or baseline → the reference's trace of it, each its own copy:
    every judged case run once per test run, whichever modules and workers read them."""
    kept: dict[str, str] = {
        key: trace for text in once_per_run(tmp_path_factory, "reference-traces", TRACE_PARTS,
                                            _reference_part)
        for key, trace in json.loads(text).items()}

    def trace(document: Mapping[str, Any]) -> Trace:
        found: Trace = json.loads(kept[json.dumps(document, sort_keys=True)])
        return found
    return trace
