"""The command line: ``ctxspec budget`` on the design's examples, ``trace``, ``schemas``.

Expected numbers are the hand derivations of tests/test_budget.py, repeated here as literals.
"""

import json
import subprocess
import sys
from typing import Any

import pytest
from click.testing import CliRunner

from ctxspec.cli import main

# The §8 table's B=100000 and O=8192: W=110000, S=1808 (110000 − 8192 − 1808 = 100000).
TABLE = ["--window", "110000", "--output-reserve", "8192", "--safety-margin", "1808"]


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output


def budget_json(*args: str) -> dict[str, Any]:
    code, output = run("budget", "--json", *args)
    assert code == 0, output
    document: dict[str, Any] = json.loads(output)
    return document


@pytest.mark.covers("CTX-7.7", "CTX-7.12", "CTX-7.16", "CTX-7.18")
def test_section7_example_through_the_cli() -> None:
    document = budget_json("--window", "128K", "--output-reserve", "8K", "--safety-margin", "1280")
    assert {key: document[key] for key in (
        "window", "output_reserve", "safety_margin", "input_budget", "trigger_ratio",
        "trigger_threshold")} == {
        "window": 131_072, "output_reserve": 8192, "safety_margin": 1280,
        "input_budget": 121_600, "trigger_ratio": "0.80", "trigger_threshold": 97_280}
    assert "decision" not in document


@pytest.mark.covers("CTX-7.5", "CTX-7.6", "CTX-7.9")
def test_defaults_through_the_cli() -> None:
    document = budget_json("--window", "131072")
    assert (document["safety_margin"], document["output_reserve"]) == (1311, 4096)
    assert (document["safety_margin_source"], document["output_reserve_source"]) == \
        ("default", "default")


def test_human_table_shows_k_and_tokens() -> None:
    code, output = run("budget", "--window", "128K", "--output-reserve", "8K",
                       "--safety-margin", "1280")
    assert code == 0
    assert "trigger floor(r × B)" in output
    assert "95K  97280 tokens" in output
    assert "121600 tokens" in output


@pytest.mark.covers("CTX-8.56", "CTX-8.57", "CTX-8.58", "CTX-8.59", "CTX-8.60", "CTX-8.61")
@pytest.mark.parametrize(("args", "expected"), [
    # Row 1: compact with T=8192; a summary of 8192 assembles to 73192 and continues.
    (["--fixed", "65000", "--material", "20000", "--summary-tokens", "8192"],
     {"input_tokens": 85_000, "decision": "compact", "error_code": None,
      "summary_space": 35_000, "summary_output_cap": 8192, "summary_target": 8192,
      "assembled_tokens": 73_192, "after_summary": "continue"}),
    # Row 2: T=8192; 87192 is above 80% but within B: continue.
    (["--fixed", "79000", "--material", "6000", "--summary-tokens", "8192"],
     {"decision": "compact", "summary_target": 8192, "assembled_tokens": 87_192,
      "after_summary": "continue"}),
    # Row 3: the source request exceeds B, yet H=4000 and T=4000.
    (["--fixed", "96000", "--material", "6000"],
     {"input_tokens": 102_000, "decision": "compact", "summary_space": 4000,
      "summary_target": 4000}),
    # Row 4: H=0 with material to summarise.
    (["--fixed", "100000", "--material", "6000"],
     {"decision": "error", "error_code": "CONTEXT_PROTECTED_INPUT_TOO_LARGE",
      "summary_space": 0}),
    # Row 5: no compressible material, I=85000 within B.
    (["--fixed", "85000", "--material", "0"],
     {"decision": "no_compressible_material", "error_code": None, "summary_target": None}),
    # Row 6: a supplement arriving after the summary brings the request to 100001.
    (["--fixed", "70000", "--material", "20000", "--summary-tokens", "8000",
      "--added-after-compaction", "22001"],
     {"decision": "compact", "assembled_tokens": 100_001,
      "after_summary": "CONTEXT_WINDOW_EXCEEDED"}),
])
def test_section8_table_through_the_cli(args: list[str], expected: dict[str, Any]) -> None:
    document = budget_json(*TABLE, *args)
    assert document["input_budget"] == 100_000
    assert {key: document[key] for key in expected} == expected


@pytest.mark.covers("CTX-7.12")
def test_trigger_boundary_through_the_cli() -> None:
    assert budget_json(*TABLE, "--fixed", "79999", "--material", "0")["decision"] == \
        "below_trigger"
    assert budget_json(*TABLE, "--fixed", "79999", "--material", "1")["decision"] == "compact"


@pytest.mark.parametrize(("args", "needle"), [
    (["--window", "128X"], "'128X' is not a token count"),
    (["--window", "1000", "--trigger-ratio", "1.0"], "--trigger-ratio: must be decimal text"),
    (["--window", "1000", "--output-reserve", "600", "--safety-margin", "400"],
     "BUDGET_CONFIGURATION_INVALID: --input-budget: B = W - O - S must be > 0"),
    (["--window", "0"], "--window: must be a positive integer"),
    (["--window", "1000", "--fixed", "10"], "--fixed and --material go together"),
    (["--window", "1000", "--summary-tokens", "10"], "--summary-tokens needs --fixed"),
    (["--window", "1000", "--fixed", "1", "--material", "1", "--added-after-compaction", "5"],
     "--added-after-compaction needs --summary-tokens"),
])
def test_invalid_arguments_exit_2_naming_the_field(args: list[str], needle: str) -> None:
    code, output = run("budget", *args)
    assert code == 2
    assert needle in output


@pytest.mark.covers("CTX-8.50")
def test_error_verdicts_exit_0() -> None:
    code, output = run("budget", "--json", *TABLE, "--fixed", "100000", "--material", "1")
    assert code == 0
    assert json.loads(output)["error_code"] == "CONTEXT_PROTECTED_INPUT_TOO_LARGE"


def test_trace_prints_the_matrix_requirement_to_cases_to_status() -> None:
    code, output = run("trace", "--section", "7")
    assert code == 0, output
    matrix = [line for line in output.splitlines() if line.startswith("CTX-")]
    assert all(line.startswith("CTX-7.") for line in matrix)
    [boundary] = [line for line in matrix if line.split()[0] == "CTX-7.12"]
    assert boundary.split(None, 2)[1] == "conformance"
    assert boundary.split(None, 2)[2].startswith(
        "EX7-BUDGET, ROW-04-AT, ROW-04-BELOW, ROW-04-FLOOR, ")
    code, output = run("trace")
    [retries] = [line for line in output.splitlines() if line.startswith("CTX-10.2 ")]
    assert "crash matrix (258 cases)" in retries
    [platform] = [line for line in output.splitlines() if line.startswith("CTX-1.1 ")]
    assert platform.split()[1] == "not_testable" and "not testable: " in platform
    code, output = run("trace", "--summary")
    assert not any(line.startswith("CTX-") for line in output.splitlines())
    assert output.splitlines()[-1].startswith("all ")


def test_trace_shows_which_points_of_the_hook_matrix_pin_a_requirement() -> None:
    code, output = run("trace", "--matrix", "CTX-3.18")
    assert code == 0, output
    lines = output.splitlines()
    assert lines[1] == ("hook matrix: 39 of 1152 points pinned "
                        "(point × decision × role × ending × call × scope)")
    [deny] = [line for line in lines if line.startswith("TPRE deny")]
    # root succeeded, failed, stopped, timed_out; then the Executor's four endings
    assert deny.split()[2:] == ["✓", "·", "·", "·", "✓", "·", "·", "·"]
    assert "HM-TPRE-DENY-EXECUTOR-SUCCEEDED" in lines[-1]
    code, output = run("trace", "--section", "3")
    [row] = [line for line in output.splitlines() if line.startswith("CTX-3.18 ")]
    assert "hook matrix (39 points; --matrix CTX-3.18)" in row and "HM-" not in row
    code, output = run("trace", "--matrix", "CTX-99.1")
    assert code != 0 and "no requirement CTX-99.1" in output


def test_trace_json_lists_every_section() -> None:
    code, output = run("trace", "--json")
    assert code == 0, output
    rows = json.loads(output[output.index("["):])
    assert {row["section"] for row in rows} == set(range(1, 12))
    for row in rows:
        assert set(row) >= {"id", "section", "level", "status", "covered_by"}
        assert row["status"] in {"conformance", "unit", "uncovered", "not_testable"}
        assert (row["status"] in {"conformance", "unit"}) == bool(row["covered_by"])
    covered = {row["id"] for row in rows if row["status"] == "unit"}
    assert "CTX-7.19" in covered  # the tokenizer preference: white box, unit tests only
    # A conformance case outranks the reference's own tests: ROW-04 names CTX-7.12.
    [boundary] = [row for row in rows if row["id"] == "CTX-7.12"]
    assert boundary["status"] == "conformance"
    assert "conformance case ROW-04-BELOW" in boundary["covered_by"]


def test_trace_summary_table() -> None:
    code, output = run("trace", "--summary")
    assert code == 0
    assert output.splitlines()[0].split() == ["section", "total", "conformance", "unit",
                                              "not_testable", "uncovered"]
    assert output.splitlines()[-1].startswith("all")


def test_schemas_check_passes_on_the_committed_schemas() -> None:
    code, output = run("schemas", "--check")
    assert code == 0, output


def test_installed_entry_point_runs() -> None:
    result = subprocess.run([sys.executable, "-m", "ctxspec", "budget", "--window", "128K",
                             "--json"], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["input_budget"] == 131_072 - 4096 - 1311
