"""The example driver of docs/implementing-a-driver.md: a toy runtime written apart from the
reference passes every case that needs no capability and gets ``unsupported`` for the rest —
the suite asserts the design's observables, not the reference's internals."""

import re
import sys
from collections import Counter
from functools import cache
from pathlib import Path

from ctxspec.conformance.cases import CASES
from ctxspec.conformance.harness import CaseResult, run_case

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "docs" / "driver-example"
sys.path.insert(0, str(EXAMPLE))

from toy_driver import ToyDriver  # noqa: E402  (the example lives beside the guide)

LACKS = {"ROW-08", "S6-PREVIEW-STAYS", "S6-PREVIEW-MARKED-SENT", "S6-RESULT-READ"}
"""What the toy really lacks: bounded previews of large results and the rendered request that
would carry their marks (§6) — the cases about them fail, saying what they saw or which trace
field is missing."""


@cache
def toy_results() -> dict[str, CaseResult]:
    """The toy over the whole suite, once per test process."""
    return {case.id: run_case(case, ToyDriver) for case in CASES}


def test_the_toy_passes_what_it_supports_and_reports_the_rest_unsupported() -> None:
    results = toy_results()
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


NUMBERS = {"two": 2, "three": 3, "four": 4, "five": 5, "twenty-one": 21, "thirty-four": 34}
QUOTED = (
    ("docs/implementing-a-driver.md", r"It passes (\w+) cases", "passed"),
    ("docs/implementing-a-driver.md", r"the ([\w-]+) that need nothing and it has",
     "passed needing nothing"),
    ("docs/implementing-a-driver.md", r"It fails the\s+(\w+) cases about bounded previews",
     "failed"),
    ("docs/implementing-a-driver.md", r"cases in … s: (\w+) passed,", "passed"),
    ("docs/implementing-a-driver.md", r"cases in … s: \w+ passed, (\w+) failed,", "failed"),
    ("docs/conformance.md", r"`triggers` and passes (\w+) cases", "passed"),
    ("docs/conformance.md", r"failing only the (\w+) about bounded previews", "failed"),
    ("docs/driver-example/toy_driver.py", r"(\w+) cases it runs it fails", "failed"),
)
"""Every place the docs quote the toy's counts: the page, the words and which count they are
(issue #33: the pages disagreed, two failures in one place and four in another)."""


def test_every_page_quoting_the_toys_counts_agrees_with_a_run() -> None:
    results = toy_results()
    counted = Counter(r.status for r in results.values())
    seen = {"passed": counted["passed"], "failed": counted["failed"],
            "passed needing nothing": sum(r.status == "passed" and not r.case.needs
                                          for r in results.values())}
    for page, pattern, count in QUOTED:
        text = " ".join((ROOT / page).read_text("utf-8").split())  # words across line breaks
        found = re.findall(pattern, text)
        assert len(found) == 1, f"{page}: {pattern!r} found {len(found)} times"
        quoted = found[0].lower()
        value = int(quoted) if quoted.isdigit() else NUMBERS.get(quoted)
        assert value == seen[count], (f"{page} says the toy has {quoted} {count}; a run of "
                                      f"the suite gives {seen[count]}")
