"""The checked-in compatibility reports (docs/compatibility/) match a fresh run of their
drivers: a report always says what the code that produced it does (issue #16). The drivers'
extras and the LangChain.js runtime's npm packages are installed by .ci/run; without them this
test errors or fails, it never skips."""

import json
from pathlib import Path

import pytest

from ctxspec.conformance.cases import by_id
from ctxspec.conformance.compat import run_compat
from ctxspec.conformance.compat_page import write_report
from ctxspec.conformance.compat_stdio import run_compat_stdio
from ctxspec.conformance.harness import load_factory

FOLDER = Path(__file__).resolve().parent.parent / "docs" / "compatibility"
DRIVERS = {"langchain": "ctxspec.adapters.langchain:make_driver",
           "openai-agents": "ctxspec.adapters.openai_agents:make_driver",
           "pydantic-ai": "ctxspec.adapters.pydantic_ai:make_driver",
           "google-adk": "ctxspec.adapters.google_adk:make_driver"}
STDIO_RUNTIMES = {"langchain-js": ("node adapters/langchain-js/runtime.js",
                                   "adapters/langchain-js/profile.json")}
"""Runtimes driven over the stdio protocol: the command (run from the checkout's root, as the
report names it) and the profile."""


@pytest.mark.slow
@pytest.mark.first  # up to a minute and a half each (Google ADK's is the longest)
@pytest.mark.parametrize("runtime", sorted(DRIVERS))
def test_a_checked_in_report_matches_a_fresh_run(runtime: str, tmp_path: Path) -> None:
    checked = json.loads((FOLDER / f"{runtime}.json").read_text("utf-8"))
    for other in FOLDER.glob("*.json"):  # the README sums every report of the folder
        (tmp_path / other.name).write_text(other.read_text("utf-8"), "utf-8")
    spec = DRIVERS[runtime]
    report = run_compat(load_factory(spec), spec, by_id(None), checked["date"])
    for path in write_report(tmp_path, report):
        assert path.read_text("utf-8") == (FOLDER / path.name).read_text("utf-8"), (
            f"docs/compatibility/{path.name} drifted from a fresh run: regenerate it with "
            f"`ctxspec compat --driver {spec} --date {checked['date']}`")


@pytest.mark.slow
@pytest.mark.first  # tens of seconds of one Node process
@pytest.mark.parametrize("runtime", sorted(STDIO_RUNTIMES))
def test_a_checked_in_stdio_report_matches_a_fresh_run(runtime: str, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    checked = json.loads((FOLDER / f"{runtime}.json").read_text("utf-8"))
    for other in FOLDER.glob("*.json"):
        (tmp_path / other.name).write_text(other.read_text("utf-8"), "utf-8")
    command, profile = STDIO_RUNTIMES[runtime]
    monkeypatch.chdir(FOLDER.parent.parent)
    report = run_compat_stdio(command, Path(profile), by_id(None), checked["date"])
    for path in write_report(tmp_path, report):
        assert path.read_text("utf-8") == (FOLDER / path.name).read_text("utf-8"), (
            f"docs/compatibility/{path.name} drifted from a fresh run: regenerate it with "
            f"`ctxspec compat --stdio '{command}' --profile {profile} --date {checked['date']}`")


def test_every_failure_of_a_report_is_explained() -> None:
    for path in FOLDER.glob("*.json"):
        report = json.loads(path.read_text("utf-8"))
        unexplained = [f["case"] for f in report["failures"] if f["kind"] == "unexplained"]
        assert not unexplained, f"{path.name}: failures nobody explained: {unexplained}"
