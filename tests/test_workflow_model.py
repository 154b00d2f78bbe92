"""Runs the workflow model (models/workflow_model.py) on the reference driver: random
WorkflowSessions judged from their traces, and what the run reached (every row demanded under
the ci and thorough profiles)."""

import json
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings

from ctxspec.conformance.driver import ReferenceDriver, run_scenario
from ctxspec.conformance.scenario import parse_scenario
from ctxspec.models.workflow_model import ROWS, check, coverage, workflows
from tests.model_runs import PROFILE, expect_every_row

CAP = 600
"""A workflow example plays a whole WorkflowSession: the thorough profile's examples are
capped to keep the run near ten minutes (docs/models.md)."""


@pytest.mark.covers("CTX-1.16", "CTX-1.17", "CTX-2.21", "CTX-11.11", "CTX-11.12", "CTX-11.13")
def test_the_workflow_model_holds_and_reaches_every_row() -> None:
    reached: Counter[str] = Counter()
    sized = settings(max_examples=min(CAP, settings().max_examples),
                     suppress_health_check=[HealthCheck.too_slow])
    if PROFILE != "thorough":
        sized = settings(sized, derandomize=True, database=None)

    @settings(sized)
    @given(document=workflows())
    def played(document: dict[str, object]) -> None:
        driver = run_scenario(parse_scenario(document), ReferenceDriver)
        trace = json.loads(json.dumps(driver.trace(), default=str))
        check(document, trace)
        reached.update(coverage(document, trace))

    played()
    expect_every_row(reached, ROWS, "workflow model")
