"""Runs the workflow model (models/workflow_model.py) on the reference driver: random
WorkflowSessions judged from their traces, and what the run reached (every row demanded under
the ci and thorough profiles)."""

import json
from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from ctxspec.conformance.driver import ReferenceDriver, run_scenario
from ctxspec.conformance.scenario import parse_scenario
from ctxspec.models.workflow_model import ROWS, check, check_recovered, coverage, workflows
from tests.model_runs import PROFILE, expect_every_row

CAP = 600
"""A workflow example plays a whole WorkflowSession: the thorough profile's examples are
capped to keep the run near ten minutes (docs/models.md)."""


def _played(document: dict[str, Any]) -> list[dict[str, Any]]:
    driver = run_scenario(parse_scenario(document), ReferenceDriver)
    trace: list[dict[str, Any]] = json.loads(json.dumps(driver.trace(), default=str))
    return trace


@pytest.mark.covers("CTX-1.16", "CTX-1.17", "CTX-2.21", "CTX-11.11", "CTX-11.12", "CTX-11.13")
def test_the_workflow_model_holds_and_reaches_every_row() -> None:
    reached: Counter[str] = Counter()
    sized = settings(max_examples=min(CAP, settings().max_examples),
                     suppress_health_check=[HealthCheck.too_slow])
    if PROFILE != "thorough":
        sized = settings(sized, derandomize=True, database=None)

    @settings(sized)
    @given(document=workflows())
    def played(document: dict[str, Any]) -> None:
        trace = _played(document)
        check(document, trace)
        if "crash" in document and "deadline" not in document["workflow"]:
            plain = {k: v for k, v in document.items() if k != "crash"}
            check_recovered(document, trace, _played(plain))
        reached.update(coverage(document, trace))

    played()
    expect_every_row(reached, ROWS, "workflow model")
