"""The report picture of docs/design-review.md (docs/images/conformance-report.png) is of a real
runtime's run, made the documented way: `python -m tests.browser report` runs the command the
guide prints — the LangChain adapter over the whole suite — and photographs the top of its page.
Here the same command, limited to three cases, writes a page whose failures print replay
commands that load that driver and run, the first of them within the picture's height."""

import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from ctxspec.cli import main
from tests.browser import REPORT_DRIVER, REPORT_HEIGHT, Browser, report_command, write_report

ROOT = Path(__file__).resolve().parent.parent

SEEN = """
return {height: window.innerHeight,
        replays: [...document.querySelectorAll('#failures li p.replay code')].map(c => ({
          text: c.textContent, bottom: c.getBoundingClientRect().bottom}))};
"""


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    opened = Browser()
    opened.offline()
    yield opened
    opened.close()


def test_the_guide_prints_the_command_its_report_picture_comes_from() -> None:
    guide = (ROOT / "docs" / "design-review.md").read_text("utf-8")
    assert f"`{shlex.join(report_command(Path('report.html')))}`" in guide
    assert "`python -m tests.browser report`" in guide
    assert "(images/conformance-report.png)" in guide


@pytest.mark.slow  # a browser and LangChain, three cases and a replay
def test_the_pictured_commands_failures_replay_on_the_same_driver(
        browser: Browser, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # docs/compatibility/langchain.md (its own `ctxspec compat` run) has ROW-01 and ROW-02
    # failed and ROW-03 passed for this driver, the best configuration.
    page = tmp_path / "report.html"
    write_report(page, "ROW-01", "ROW-02", "ROW-03")
    browser.open(page)
    browser.resize(1280, REPORT_HEIGHT)  # the window the picture is taken in
    seen = browser.run(SEEN)
    assert [r["text"] for r in seen["replays"]] == [
        f"ctxspec replay {case} --driver {REPORT_DRIVER} --compare --html {case}.html"
        for case in ("ROW-01", "ROW-02")]
    assert 0 < seen["replays"][0]["bottom"] <= seen["height"], "the picture shows no command"
    monkeypatch.chdir(tmp_path)  # the command writes ROW-01.html where it is run
    outcome = CliRunner().invoke(main, shlex.split(seen["replays"][0]["text"])[1:])
    assert outcome.exit_code == 0, outcome.output
    assert (tmp_path / "ROW-01.html").stat().st_size > 0
