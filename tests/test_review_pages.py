"""The review pages as a person sees them: rendered by a real headless Chromium (Debian's chromium
and chromium-driver; `.ci/run` installs them), with the network cut. Expected positions are
derived here from the scenario's own figures (W, O, S, r), never read from the page's numbers.
One browser session serves the whole module."""

import copy
import json
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from ctxspec.conformance.cases import CASES
from ctxspec.conformance.driver import ReferenceDriver, run_scenario
from ctxspec.conformance.harness import CaseResult
from ctxspec.conformance.probes import ProbeResult
from ctxspec.conformance.replay_page import write_replay_page
from ctxspec.conformance.report_html import write_report_page
from ctxspec.conformance.scenario import parse_scenario
from tests.browser import CRASH, Browser

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "docs" / "examples").glob("*.json"))
COMPACTION = ROOT / "docs" / "examples" / "compaction-three-chunks-window-exceeded.json"

GEOMETRY = """
const box = e => { const r = e.getBoundingClientRect();
  return {left: r.left, right: r.right, top: r.top, bottom: r.bottom}; };
const svg = document.getElementById('timeline');
return {
  svg: box(svg),
  baseline: box(svg.querySelector('line.baseline')).top,
  lines: [...svg.querySelectorAll('line.budget-line')].map(l => ({
    name: l.dataset.line, value: +l.dataset.value, ...box(l)})),
  bars: [...svg.querySelectorAll('g.bar')].map(g => ({kind: g.dataset.kind,
    segments: [...g.querySelectorAll('rect.seg')].map(r => ({part: r.dataset.part, ...box(r)}))
  })),
  texts: [...svg.querySelectorAll('text')].map(t => ({text: t.textContent, ...box(t)})),
  episodes: [...svg.querySelectorAll('g.episode rect')].map(box),
  crashes: [...svg.querySelectorAll('g.crash line')].map(box),
};
"""
OVERFLOW = """
const wide = [...document.querySelectorAll('td, th, summary, p, li, pre, code, h1, h2')]
  .filter(e => e.clientWidth > 0 && e.scrollWidth > e.clientWidth + 1)
  .map(e => e.tagName + ': ' + e.textContent.slice(0, 60));
return {wide: wide, page: document.documentElement.scrollWidth - window.innerWidth,
        fetched: performance.getEntriesByType('resource').map(r => r.name)};
"""


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    opened = Browser()
    opened.offline()  # every page must show everything with no network
    yield opened
    opened.close()


def replay(document: dict[str, Any], target: Path) -> list[dict[str, Any]]:
    scenario = parse_scenario(document)
    driver = ReferenceDriver()
    run_scenario(scenario, lambda: driver)
    trace: list[dict[str, Any]] = json.loads(json.dumps(driver.trace(), default=str))
    write_replay_page(target, scenario, trace)
    return trace


def load(path: Path) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(path.read_text("utf-8"))
    return document


def height(bar: dict[str, Any]) -> float:
    return float(max(s["bottom"] for s in bar["segments"]) - min(s["top"] for s in bar["segments"]))


def test_bars_stand_in_proportion_against_the_trigger_b_and_w(browser: Browser,
                                                              tmp_path: Path) -> None:
    document = load(COMPACTION)
    trace = replay(document, tmp_path / "page.html")
    browser.open(tmp_path / "page.html")
    seen = browser.run(GEOMETRY)
    agent = document["agent"]
    ratio = Fraction(agent.get("trigger_ratio", "0.80"))
    window = agent["window"]
    budget = window - agent["output_reserve"] - agent["safety_margin"]
    trigger = budget * ratio.numerator // ratio.denominator  # floor(r × B), exact
    assert (budget, trigger) == (3500, 2800)  # the worked example's figures (design-review.md)
    lines = {line["name"]: line["top"] for line in seen["lines"]}
    per_token = (seen["baseline"] - lines["window"]) / window
    assert lines["trigger"] == pytest.approx(seen["baseline"] - trigger * per_token, abs=0.5)
    assert lines["input_budget"] == pytest.approx(seen["baseline"] - budget * per_token, abs=0.5)

    sent = [bar for bar in seen["bars"] if bar["kind"] in ("business", "compaction")]
    requests = [e for e in trace if e["kind"] == "model_request"]
    assert len(sent) == len(requests) == 7
    for bar, request in zip(sent, requests, strict=True):
        assert height(bar) == pytest.approx(request["estimated_input_tokens"] * per_token,
                                            abs=0.6)
        assert max(s["bottom"] for s in bar["segments"]) == pytest.approx(seen["baseline"],
                                                                           abs=0.5)
    question = document["steps"][0]["ask"]  # one token a character: the protected part
    for bar in sent[:4]:
        protected = [s for s in bar["segments"] if s["part"] == "protected"]
        assert protected[0]["bottom"] - protected[0]["top"] == \
            pytest.approx(len(question) * per_token, abs=0.6)

    kinds = [bar["kind"] for bar in seen["bars"]]
    assert kinds == ["business"] * 4 + ["evaluated"] + ["compaction"] * 3 + ["unsent"]
    evaluated, unsent = seen["bars"][4], seen["bars"][8]
    assert min(s["top"] for s in evaluated["segments"]) < lines["trigger"]  # it triggered
    assert min(s["top"] for s in unsent["segments"]) < lines["input_budget"]  # it cannot fit
    assert all(min(s["top"] for s in bar["segments"]) > lines["input_budget"] for bar in sent)
    episode = seen["episodes"][0]
    inside = [episode["left"] <= min(s["left"] for s in bar["segments"]) and
              max(s["right"] for s in bar["segments"]) <= episode["right"]
              for bar in seen["bars"]]
    assert inside == [False] * 4 + [True] * 4 + [False]
    labels = {t["text"]: t for t in seen["texts"]}
    assert abs(labels[f"⌊r×B⌋ {trigger}"]["bottom"] - lines["trigger"]) < 12


def test_a_crash_is_marked_where_the_takeover_happened(browser: Browser, tmp_path: Path) -> None:
    document = copy.deepcopy(load(COMPACTION))
    document["crash"] = {"commit": "CHUNK_COMMITTED", "occurrence": 2, "when": "after"}
    assert document["crash"] == CRASH  # the crash the screenshot in the docs shows
    replay(document, tmp_path / "crash.html")
    browser.open(tmp_path / "crash.html")
    seen = browser.run(GEOMETRY)
    chunks = [bar for bar in seen["bars"] if bar["kind"] == "compaction"]
    assert len(chunks) == 3 and len(seen["crashes"]) == 1
    x = seen["crashes"][0]["left"]
    assert max(s["right"] for s in chunks[1]["segments"]) < x < \
        min(s["left"] for s in chunks[2]["segments"])  # after chunk 2 was committed
    assert len(seen["episodes"]) == 1  # the takeover resumes the one episode
    assert "after CHUNK_COMMITTED #2" in browser.run(
        "return document.getElementById('crashes').textContent;")


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_every_worked_example_renders_offline_with_no_overflow(browser: Browser, tmp_path: Path,
                                                               example: Path) -> None:
    trace = replay(load(example), tmp_path / "page.html")
    browser.open(tmp_path / "page.html")
    seen = browser.run(GEOMETRY)
    sent = [bar for bar in seen["bars"] if bar["kind"] in ("business", "compaction")]
    assert len(sent) == sum(e["kind"] == "model_request" for e in trace)
    svg = seen["svg"]
    texts = [t for t in seen["texts"] if t["right"] > t["left"]]
    for text in texts:
        assert svg["left"] <= text["left"] and text["right"] <= svg["right"] and \
            svg["top"] <= text["top"] and text["bottom"] <= svg["bottom"], text
    overlapping = [(a["text"], b["text"]) for i, a in enumerate(texts) for b in texts[i + 1:]
                   if a["left"] < b["right"] - 1 and b["left"] < a["right"] - 1
                   and a["top"] < b["bottom"] - 1 and b["top"] < a["bottom"] - 1]
    assert overlapping == []
    layout = browser.run(OVERFLOW)
    assert layout == {"wide": [], "page": 0, "fetched": []}


def test_a_request_opens_to_its_messages_and_the_hooks_changes(browser: Browser,
                                                              tmp_path: Path) -> None:
    replay(load(ROOT / "docs" / "examples" / "tool-batch-hook.json"), tmp_path / "page.html")
    browser.open(tmp_path / "page.html")
    shown = "return document.querySelector('#request-2 table.messages').checkVisibility();"
    assert browser.run(shown) is False
    browser.click("#request-2 summary")
    assert browser.run(shown) is True
    changed = browser.run("return document.querySelector('#request-2 tr.changed').innerText;")
    assert "tool.pre_call" in changed and '"a.md" → "reports/a.md"' in changed


def test_scenario_texts_are_shown_as_text_never_run(browser: Browser, tmp_path: Path) -> None:
    document = load(ROOT / "docs" / "examples" / "tool-batch-hook.json")
    hostile = '<script>document.title="run"</script><img src=x onerror="document.title=1">'
    document["name"] = "<i>name</i>"
    document["description"] = hostile
    document["steps"][0]["ask"] = '</pre></details><b id="bold">loud</b>'
    replay(document, tmp_path / "page.html")
    browser.open(tmp_path / "page.html")
    assert browser.run("return [document.querySelectorAll('script, img, #bold, i').length, "
                       "document.title];") == [0, "ctxspec replay: <i>name</i>"]
    text = browser.run("return document.body.textContent;")
    assert hostile in text and '</pre></details><b id="bold">loud</b>' in text


def test_the_conformance_report_is_a_matrix_with_failures_one_click_away(
        browser: Browser, tmp_path: Path) -> None:
    row, crash = (next(c for c in CASES if c.source == source)
                  for source in ("§12 row 2", "§10 crash matrix"))
    results = [CaseResult(row, "failed", "<b>expected</b> 1 request, saw 2", 0.01),
               CaseResult(crash, "passed", "", 0.02),
               CaseResult(crash, "unsupported", "the driver lacks crash", 0.0)]
    probes = {"hooks": ProbeResult("hooks", "confirmed", "")}
    write_report_page(tmp_path / "report.html", results, "mypkg.ctx:make_driver", probes, 0.5)
    browser.open(tmp_path / "report.html")
    facts = browser.run("return document.getElementById('facts').innerText;")
    assert "mypkg.ctx:make_driver" in facts and "suite version" in facts and "ctxspec" in facts
    cell = "#by-source tr[data-row='§12 row 2'] td.failed"
    detail = f"return document.querySelector(\"{cell} pre\").checkVisibility();"
    assert browser.run(detail) is False
    browser.click(f"{cell} summary")
    assert browser.run(detail) is True
    assert "<b>expected</b> 1 request, saw 2" in browser.run(
        f"return document.querySelector(\"{cell} pre\").textContent;")
    sections = browser.run("return [...document.querySelectorAll('#by-section tr[data-row]')]"
                           ".map(r => r.dataset.row);")
    assert sections == sorted({f"§{r.split('-')[1].split('.')[0]}"
                               for c in (row, crash) for r in c.requirements},
                              key=lambda s: int(s[1:]))
    assert browser.run(OVERFLOW) == {"wide": [], "page": 0, "fetched": []}
