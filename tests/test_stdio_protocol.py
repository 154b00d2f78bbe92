"""The stdio protocol's version 2 operations against small runtimes written here
(docs/stdio-protocol.md): the case ID and a store on every run, the scenario sent with its
defaults filled in, a died answer whose process does not exit, the log channel in a broken
runtime's error, and a runtime of version 1 still spoken to in version 1 (Q360). The
JavaScript runtime (tests/test_stdio_runtime_js.py) runs every op end to end."""

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ctxspec.cli import main
from ctxspec.conformance.capabilities import declared
from ctxspec.conformance.cases import by_id
from ctxspec.conformance.driver import ReferenceDriver
from ctxspec.conformance.probes import probes_for
from ctxspec.conformance.scenario import filled_in, parse_scenario

RECORDER = """\
import io, json, sys
from ctxspec.conformance.stdio import serve
seen = open({seen!r}, "a")
for line in sys.stdin:
    request = json.loads(line)
    seen.write(line)
    seen.flush()
    if {refuse_v2} and request.get("version") != 1:
        print(json.dumps({{"ok": False, "error": "expected version 1"}}), flush=True)
        continue
    out = io.StringIO()
    serve(iter([line]), out)
    print(out.getvalue(), end="", flush=True)
    if request.get("op") == "bye":
        break
"""


def recorder(tmp_path: Path, refuse_v2: bool = False) -> tuple[str, Path]:
    """A runtime that records every request it gets and answers as the reference server."""
    seen = tmp_path / "requests.jsonl"
    script = tmp_path / "recorder.py"
    script.write_text(RECORDER.format(seen=str(seen), refuse_v2=refuse_v2))
    return f"{sys.executable} {script}", seen


def requests(seen: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in seen.read_text().splitlines()]


def run(*args: str) -> tuple[int, str]:
    outcome = CliRunner().invoke(main, ["conformance", *args])
    return outcome.exit_code, outcome.output


def test_every_run_names_its_case_and_a_store_and_sends_the_scenario_filled_in(
        tmp_path: Path) -> None:
    command, seen = recorder(tmp_path)
    code, output = run("--stdio", command, "--json", "--jobs", "1", "--case", "ROW-02",
                       "--case", "S7-USAGE-TINY", "--case", "BAD-SCENARIO-FIELD")
    assert code == 0, output
    runs = [r for r in requests(seen) if r["op"] == "run"]
    assert {r["version"] for r in requests(seen)} == {2}
    cases = {case.id: case for case in by_id(["ROW-02", "S7-USAGE-TINY", "BAD-SCENARIO-FIELD"])}
    named = [r["case"] for r in runs]
    # Each case's runs under its ID (a case with a baseline: two runs), every probe's under
    # probe:<capability>, and nothing else.
    assert sorted(n for n in named if not n.startswith("probe:")) == sorted(
        run_of for case in cases.values()
        for run_of in [case.id] * (1 + (case.baseline is not None))), named
    probed = {f"probe:{each.capability}"
              for each in probes_for(declared(ReferenceDriver.capabilities))}
    assert {n for n in named if n.startswith("probe:")} == probed
    assert all(Path(r["store"]).name.startswith("ctxspec-store-") for r in runs)
    assert len({r["store"] for r in runs}) == len(runs)  # a fresh store for each run
    for r in runs:
        if r["case"] in cases:
            case = cases[r["case"]]
            sent = r["scenario"]
            written = case.baseline if sent != filled_in(case.scenario) else case.scenario
            assert written is not None and sent == filled_in(written)
    [row2] = [r["scenario"] for r in runs if r["case"] == "ROW-02"]
    # Filled in: every field of the Agent is there (null where its default is none), and it
    # means what the case wrote.
    assert set(row2["agent"]) == set(parse_scenario(row2).agent.model_dump(by_alias=True))
    assert row2["agent"]["recent_runs"] == 2 and row2["agent"]["model_attempts"] == 2
    assert parse_scenario(row2) == parse_scenario(cases["ROW-02"].scenario)
    # A document the harness cannot read goes as written, for the runtime to refuse.
    [bad] = [r["scenario"] for r in runs if r["case"] == "BAD-SCENARIO-FIELD"]
    assert bad == dict(cases["BAD-SCENARIO-FIELD"].scenario)


@pytest.mark.parametrize("refuse_v2", [True, False], ids=["refuses-v2", "answers-v1"])
def test_a_runtime_of_version_1_is_still_spoken_to_in_version_1(tmp_path: Path,
                                                                refuse_v2: bool) -> None:
    command, seen = recorder(tmp_path, refuse_v2)
    if not refuse_v2:  # it answers a version 2 hello in its own version 1
        script = tmp_path / "recorder.py"
        script.write_text(script.read_text().replace(
            "serve(iter([line]), out)",
            "serve(iter([json.dumps({**request, 'version': 1}) + '\\n']), out)"))
    code, output = run("--stdio", command, "--json", "--jobs", "1", "--case", "ROW-02",
                       "--case", "CRASH-TOOLS-REQUEST_FROZEN-1-AFTER")
    assert code == 0, output
    assert json.loads(output)["summary"]["passed"] == 2
    later = requests(seen)[2 if refuse_v2 else 1:]
    assert {r["version"] for r in later} == {1}
    assert all("case" not in r and "store" not in r for r in later)


DIES_BUT_LIVES = """\
import json, sys, time
for line in sys.stdin:
    request = json.loads(line)
    if request["op"] == "hello":
        print(json.dumps({"ok": True, "version": 2, "capabilities": []}), flush=True)
    elif request["op"] == "run":
        print(json.dumps({"ok": True, "died": True, "world": None, "trace": []}), flush=True)
        time.sleep(60)
"""


def test_a_runtime_that_answers_died_but_goes_on_running_is_ended_and_named(
        tmp_path: Path) -> None:
    script = tmp_path / "lives.py"
    script.write_text(DIES_BUT_LIVES)
    code, output = run("--stdio", f"{sys.executable} {script}", "--stdio-timeout", "1",
                       "--case", "ROW-02")
    assert code == 1
    assert "answered died but was still running after 1 s" in output, output


BROKEN = """\
import sys
sys.stderr.write("Traceback (most recent call last):\\n  boom\\nValueError: the store is gone\\n")
sys.stderr.flush()
sys.exit(3)
"""


def test_a_broken_runtimes_last_log_lines_are_in_its_error(tmp_path: Path) -> None:
    script = tmp_path / "broken.py"
    script.write_text(BROKEN)
    code, output = run("--stdio", f"{sys.executable} {script}", "--case", "ROW-02")
    assert code == 1
    assert "closed its output" in output, output
    assert "its last log lines: Traceback (most recent call last): |   boom | ValueError: " \
           "the store is gone" in output, output


def test_a_scenario_filled_in_means_what_it_meant() -> None:
    # Every case's documents: filled in, each parses to the same scenario, and filling in
    # again changes nothing; a document the schema refuses is given back as written.
    for case in by_id(None):
        for document in (case.scenario, case.baseline):
            if document is None or case.refusal == "SCENARIO_INVALID":
                continue
            filled = filled_in(document)
            assert parse_scenario(filled) == parse_scenario(document), case.id
            assert filled_in(filled) == filled, case.id
    bad = {"scenario_version": 1, "name": "x", "surprise": 1}
    assert filled_in(bad) == bad
