"""The compare page a failure's command writes, as a person sees it in headless Chromium (issue
#36): `ctxspec replay ROW-01 --driver ctxspec.adapters.langchain:make_driver --compare --html`
shows, at the top, that the reference carries the supplement Run 2 claimed to the next question
and LangChain does not, and the two pages side by side, each drawing its own deliveries."""

from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from ctxspec.cli import main
from tests.browser import Browser

LANGCHAIN = "ctxspec.adapters.langchain:make_driver"

CARRIED = """
const items = [...document.querySelectorAll('#differences li')]
  .filter(li => li.textContent.includes('carried'));
const frames = [...document.querySelectorAll('.sides section')].map(s => ({
  side: s.dataset.side,
  carried: s.querySelector('iframe').contentDocument
    .querySelectorAll('[data-state="carried"]').length}));
return {items: items.map(li => ({text: li.textContent, visible: li.checkVisibility(),
                                  top: li.getBoundingClientRect().top})),
        height: window.innerHeight, frames: frames};
"""


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    opened = Browser()
    opened.offline()  # the page shows everything with no network
    yield opened
    opened.close()


def test_the_carried_delivery_difference_is_visible_at_the_top(browser: Browser,
                                                                tmp_path: Path) -> None:
    page = tmp_path / "ROW-01.html"
    outcome = CliRunner().invoke(main, ["replay", "ROW-01", "--driver", LANGCHAIN, "--compare",
                                        "--html", str(page)])
    assert outcome.exit_code == 0, outcome.output
    browser.open(page)
    seen = browser.run(CARRIED)
    # The supplement 包括构建缓存: claimed by Run 2, which failed before any output, so carried
    # (§5, CTX-5.14) — the reference's deliveries say so, LangChain's do not.
    [item] = seen["items"]
    assert "包括构建缓存" in item["text"] and "the runtime pending → claimed" in item["text"]
    assert item["visible"] and 0 <= item["top"] < seen["height"]  # seen without scrolling
    sides = {frame["side"]: frame["carried"] for frame in seen["frames"]}
    assert sides[LANGCHAIN] == 0 and sides["the reference"] >= 1, sides
