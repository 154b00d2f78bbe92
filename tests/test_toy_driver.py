"""The example driver of docs/implementing-a-driver.md: a toy runtime written apart from the
reference passes every case that needs no capability and gets ``unsupported`` for the rest —
the suite asserts the design's observables, not the reference's internals."""

import sys
from pathlib import Path

from ctxspec.conformance.cases import CASES
from ctxspec.conformance.harness import run_case

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "docs" / "driver-example"
sys.path.insert(0, str(EXAMPLE))

from toy_driver import ToyDriver  # noqa: E402  (the example lives beside the guide)

LACKS = {"ROW-08", "S6-PREVIEW-STAYS", "S6-PREVIEW-MARKED-SENT", "S6-RESULT-READ"}
"""What the toy really lacks: bounded previews of large results and the rendered request that
would carry their marks (§6) — the cases about them fail, saying what they saw or which trace
field is missing."""


def test_the_toy_passes_what_it_supports_and_reports_the_rest_unsupported() -> None:
    results = {case.id: run_case(case, ToyDriver) for case in CASES}
    supported = {case.id for case in CASES if case.needs <= ToyDriver.capabilities}
    assert {i for i, r in results.items() if r.status == "passed"} == supported - LACKS, \
        {i: r.detail for i, r in results.items() if r.status in ("failed", "error")}
    assert {i for i, r in results.items() if r.status == "failed"} == LACKS
    assert {r.status for i, r in results.items() if i not in supported} == {"unsupported"}
    # What it supports: §12 rows 2, 12 (also a good retry after a fragment), 13 and 14, the §4
    # example, statements of §2-§8 and §11 (provider call ids, the deadline between attempts,
    # arguments against the tool's schema), and the refusals of bad budgets and malformed
    # scenarios.
    assert {case.id for case in CASES if not case.needs} == {
        "ROW-02", "ROW-07", "ROW-08", "S6-PREVIEW-STAYS", "S6-RESULT-READ", "ROW-12",
        "ROW-12-RETRY", "ROW-13", "ROW-14", "EX4-OLDER-RUN",
        "S2-PROVIDER-CALL-IDS", "S3-FROZEN-RETRY", "S4-CURRENT-RUN", "S4-RECENT-BY-ORDER",
        "S5-DELIVERED-ON-OUTPUT", "S5-RECEIPT", "S6-ITEM-ERROR", "S7-PROVIDER-REFUSES",
        "S8-DEADLINE-BETWEEN-ATTEMPTS", "S11-FORMAT-ERROR", "S11-ARGUMENTS-SCHEMA",
        "BAD-BUDGET", "BAD-SCENARIO-FIELD", "BAD-SCENARIO-VERSION"}
    # Beyond the cases that need nothing, the injected estimator lets it run the
    # budget's defaults and overrides, the §7 example and the §8 table's rows without material.
    assert {"EX7-BUDGET", "S7-DEFAULTS-LARGE-WINDOW", "S7-RATIO-ONE"} <= supported
    assert len(supported - LACKS) == 34
