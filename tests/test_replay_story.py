"""Each worked example's replay page tells its story (issue #36), as a person sees it in a real
headless Chromium with the network cut: the hooks, tools, deliveries, what an episode covered,
the summary against T, refused bars, workflow nodes and Executors — each mark asserted from the
scenario's own values (its steps, scripts, hooks, budgets) and the design's rules, never from
the page's numbers. Also: the y-axis fits the bars with a zoom to W, the role and kind columns do
not wrap, and Chinese text is drawn in a real font (no tofu)."""

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.browser import Browser
from tests.test_review_pages import load, replay

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "docs" / "examples"

SEEN = """
const svg = document.getElementById('timeline');
const box = e => { const r = e.getBoundingClientRect();
  return {left: r.left, right: r.right, top: r.top, bottom: r.bottom}; };
const group = (css) => [...svg.querySelectorAll(css)].map(g => ({...g.dataset,
  ...box(g.querySelector('rect') || g)}));
return {
  marks: [...svg.querySelectorAll('text.mark')].map(t => ({row: t.dataset.row,
    slot: +t.dataset.slot, names: JSON.parse(t.dataset.names), labels: t.dataset.labels,
    title: t.querySelector('title').textContent})),
  bars: [...svg.querySelectorAll('g.bar')].map(g => ({kind: g.dataset.kind,
    role: g.dataset.role, total: g.dataset.total, ...box(g),
    segments: [...g.querySelectorAll('rect.seg')].map(r => ({part: r.dataset.part,
      tokens: +r.dataset.tokens, stroke: r.getAttribute('stroke'),
      dash: r.getAttribute('stroke-dasharray'), ...box(r)})),
    targets: [...g.querySelectorAll('line.target')].map(l => ({value: +l.dataset.value,
      ...box(l)}))})),
  lines: [...svg.querySelectorAll('line.budget-line')].map(l => ({name: l.dataset.line,
    value: +l.dataset.value, ...box(l)})),
  nodes: group('g.node'), runs: group('g.run-band'), executors: group('g.executor'),
  episodes: group('g.episode'),
};
"""


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    opened = Browser()
    opened.offline()
    yield opened
    opened.close()


def shown(browser: Browser, tmp_path: Path, name: str) -> tuple[dict[str, Any], Any, Any]:
    document = load(EXAMPLES / f"{name}.json")
    trace = replay(document, tmp_path / "page.html")
    browser.open(tmp_path / "page.html")
    return document, trace, browser.run(SEEN)


def marks(seen: Any, row: str) -> dict[int, list[str]]:
    return {m["slot"]: m["names"] for m in seen["marks"] if m["row"] == row}


def sent_slots(seen: Any) -> list[int]:
    """The slot numbers (from 1) of the requests sent, in order."""
    return [i + 1 for i, b in enumerate(seen["bars"]) if b["kind"] in ("business", "compaction")]


def top(bar: dict[str, Any]) -> float:
    return float(min(s["top"] for s in bar["segments"]))


def test_the_hook_and_the_tools_of_a_batch(browser: Browser, tmp_path: Path) -> None:
    document, _, seen = shown(browser, tmp_path, "tool-batch-hook")
    first = sent_slots(seen)[0]  # the request whose answer proposed the batch
    calls = [c["name"] for c in document["model"]["business"][0]["tool_calls"]]
    [hook] = document["hooks"]
    assert marks(seen, "tools") == {first: calls}  # in action order (§2)
    assert marks(seen, "hooks") == {first: [hook["point"]]}
    assert marks(seen, "inputs") == {first: ["question"]}
    title = next(m["title"] for m in seen["marks"] if m["row"] == "hooks")
    # Numbered as the scenario numbers it (its ordinal, the first item), the field by name.
    path = hook["items"][0]["payload_patch"][0]["path"]
    write = calls.index("write") + 1
    assert f"{hook['point']} #{hook['ordinal']} item 1" in title
    assert f"write #{write} {path}" in title and "tool_call:" not in title


def test_a_planners_executors_are_spans_nested_in_its_run(browser: Browser,
                                                         tmp_path: Path) -> None:
    document, _, seen = shown(browser, tmp_path, "planner-two-executors")
    tasks = [c["arguments"]["task"] for c in document["model"]["business"][0]["tool_calls"]]
    executors = seen["executors"]
    assert [e["label"].split(": ", 1)[1] for e in executors] == [f"task: {t}" for t in tasks]
    # Each Executor's script: a grep call, then its answer — two requests each.
    per_task = len(document["model"]["executor"]) // len(tasks)
    roles = [b["role"] for b in seen["bars"]]
    for executor in executors:
        first, last = int(executor["first"]), int(executor["last"])
        assert last - first + 1 == per_task
        assert set(roles[first - 1:last]) == {"executor"}
    run = seen["runs"][0]
    assert all(run["left"] <= e["left"] and e["right"] <= run["right"] for e in executors)
    assert [int(e["first"]) for e in executors] == sorted(marks(seen, "tools"))
    # The supplement the first grep triggered is claimed into the Planner's next request.
    planner = [i + 1 for i, r in enumerate(roles) if r == "root"]
    inputs = marks(seen, "inputs")
    assert inputs[planner[0]] == ["question"] and inputs[planner[1]] == ["supplement"]
    assert inputs[planner[2]] == ["question"]


def test_deliveries_are_shown_at_the_request_that_carried_them(browser: Browser,
                                                              tmp_path: Path) -> None:
    document, _, seen = shown(browser, tmp_path, "supplements-across-runs")
    asked = [[next(iter(s))] for s in document["steps"]]
    runs: list[list[str]] = []
    for step in asked:  # each question with the supplements given before its advance
        if step == ["ask"]:
            runs.append(["question"])
        elif step == ["supplement"]:
            runs[-1].append("supplement")
    sent = sent_slots(seen)
    inputs = marks(seen, "inputs")
    assert inputs[sent[0]] == runs[0] and inputs[sent[1]][:len(runs[1])] == runs[1]
    # Run 2's model fails before any output, so its supplement is handed on (§5): "S→" at
    # run 2 and again at the stopped run 3, then claimed with run 4's question.
    carried = [m for m in seen["marks"] if m["row"] == "inputs" and "→" in m["labels"]]
    assert [m["slot"] for m in carried] == [sent[1], sent[1] + 1]
    assert sorted(inputs[sent[2]]) == ["question", "supplement"]


def test_the_episode_covers_the_first_runs_process_and_its_summary_overshoots_t(
        browser: Browser, tmp_path: Path) -> None:
    document, trace, seen = shown(browser, tmp_path, "compaction-three-chunks-window-exceeded")
    chunks = [e for e in trace if e["kind"] == "model_request" and e["purpose"] == "compaction"]
    target = chunks[0]["max_output_tokens"]  # a chunk's max_output_tokens is T (§8)
    agent = document["agent"]
    budget = agent["window"] - agent["output_reserve"] - agent["safety_margin"]
    fixed = len(agent["system_prompt"]) + len(document["steps"][2]["ask"])  # one token a char
    final = document["model"]["compaction"][-1]["text"]
    unsent = seen["bars"][-1]
    assert unsent["kind"] == "unsent" and unsent["segments"][0]["stroke"] == "#cf222e"
    parts = {s["part"]: s for s in unsent["segments"]}
    assert parts["fixed"]["tokens"] == fixed
    # The summary part holds the whole final summary, which is longer than T: so the
    # reassembled request exceeds B, and is never sent.
    assert parts["summary"]["tokens"] >= len(final) > target
    assert int(unsent["total"]) > budget
    lines = {line["name"]: line["top"] for line in seen["lines"]}
    assert top(unsent) < lines["input_budget"]
    [tick] = unsent["targets"]
    assert tick["value"] == target
    assert parts["summary"]["top"] < tick["top"] < parts["summary"]["bottom"]
    # Each chunk covers one fetch: the result first sent by the request after its call.
    items = browser.run("return [...document.querySelectorAll('#episodes li li')]"
                        ".map(li => li.textContent);")
    fetched = len(document["tools"]["fetch"])
    assert len(items) == fetched == len(chunks)
    for k, item in enumerate(items, start=1):
        assert item.startswith(f"chunk {k}:") and f"tool_result of request #{k + 1}" in item
    summary = browser.run("return document.querySelector('#episodes p.summary').dataset;")
    assert int(summary["target"]) == target and int(summary["summary"]) >= len(final)
    # The second question is in no request (its Run was refused): its text is the ask's.
    texts = browser.run("return [...document.querySelectorAll('#inputs tr.lane')].map(tr => "
                        "[tr.dataset.kind, tr.cells[1].title]);")
    asks = [" ".join(s["ask"].split()) for s in document["steps"] if "ask" in s]
    assert texts == [["question", ask] for ask in asks]
    [episode] = seen["episodes"]
    assert episode["left"] <= seen["bars"][4]["left"] and \
        seen["bars"][7]["right"] <= episode["right"] < seen["bars"][8]["left"]


def test_a_workflow_shows_its_nodes_the_refused_request_and_the_graph_state(
        browser: Browser, tmp_path: Path) -> None:
    document, _, seen = shown(browser, tmp_path, "workflow-sibling-failure")
    workflow = document["workflow"]
    nodes = [n.get("agent_node", n.get("capability_node")) for stage in workflow["stages"]
             for n in stage]
    assert [n["label"].split(" (")[0] for n in seen["nodes"]] == [n["name"] for n in nodes]
    assert [n["status"] for n in seen["nodes"]] == ["failed", "succeeded", "succeeded"]
    analyst = nodes[0]
    question = workflow["input"][next(k for k, v in workflow["input_mapping"].items()
                                      if v == analyst["question_key"])]
    refused = seen["bars"][int(seen["nodes"][0]["first"]) - 1]
    # chars: one token a character; the question and the system prompt cannot fit W.
    assert refused["kind"] == "unsent"
    assert int(refused["total"]) == len(question) + len(analyst["agent"]["system_prompt"])
    assert int(refused["total"]) > analyst["agent"]["window"]
    stroke = refused["segments"][0]
    assert (stroke["stroke"], stroke["dash"]) == ("#cf222e", "5 3")  # red dashed
    window = next(line for line in seen["lines"] if line["name"] == "window"
                  and line["value"] == analyst["agent"]["window"])
    assert top(refused) < window["top"]
    graph = [name for slot in sorted(marks(seen, "graph")) for name in marks(seen, "graph")[slot]]
    mapped = list(workflow["input_mapping"].values())
    assert graph[:len(mapped)] == mapped
    publish = int(seen["nodes"][2]["first"])
    assert seen["bars"][publish - 1]["kind"] == "capability"
    assert marks(seen, "tools") == {publish: [nodes[2]["tool"]]}
    assert marks(seen, "hooks") == {publish: [document["hooks"][0]["point"]]}
    assert {nodes[1]["output_key"], nodes[2]["output_key"]} <= set(graph)
    # A node's local failure is routed, not raised (§11): the route, and the error under the
    # node's output key in the graph state.
    assert seen["nodes"][0]["detail"].endswith("→ route error")
    assert f"{analyst['output_key']}.error" in graph


def test_the_y_axis_fits_the_bars_and_zooms_to_w(browser: Browser, tmp_path: Path) -> None:
    document, trace, seen = shown(browser, tmp_path, "tool-batch-hook")
    tallest = max(e["estimated_input_tokens"] for e in trace if e["kind"] == "model_request")
    assert tallest * 10 < document["agent"]["window"]  # a sliver if drawn to W
    plot = browser.run("const s = document.getElementById('timeline'); "
                       "const b = s.querySelector('line.baseline').getBoundingClientRect(); "
                       "return [b.top, +s.dataset.topValue];")
    heights = [max(s["bottom"] for s in b["segments"]) - top(b) for b in seen["bars"]]
    per_token = max(heights) / tallest
    # Fit: the tallest bar takes at least 9/10 of the plot (5% headroom), so the figures
    # drawn are legible; W and B are named above the plot instead.
    assert max(heights) >= 0.9 * per_token * plot[1]
    assert {line["name"] for line in seen["lines"]} == set()
    window = "return document.getElementById('timeline-window').checkVisibility();"
    assert browser.run(window) is False
    browser.click("label[for=zoom-window]")
    assert browser.run(window) is True
    assert browser.run("return document.getElementById('timeline').checkVisibility();") is False
    lines = browser.run("return [...document.querySelectorAll('#timeline-window "
                        "line.budget-line')].map(l => +l.dataset.value);")
    agent = document["agent"]
    assert agent["window"] in lines


COLUMNS = """
return [...document.querySelectorAll('table.messages tr:not(.shared) td:nth-child(-n+2), '
  + '#inputs tr.lane td:nth-child(1)')]
  .filter(td => td.checkVisibility())
  .map(td => { const range = document.createRange(); range.selectNodeContents(td);
    const tops = new Set([...range.getClientRects()].map(r => Math.round(r.top)));
    return [td.textContent, tops.size, td.scrollWidth - td.clientWidth]; });
"""


def test_role_and_kind_columns_do_not_wrap(browser: Browser, tmp_path: Path) -> None:
    """Every role, kind and input cell is on one line, whatever the text beside it."""
    shown(browser, tmp_path, "compaction-three-chunks-window-exceeded")
    browser.run("document.querySelectorAll('details.request').forEach(d => d.open = true);")
    cells = browser.run(COLUMNS)
    assert len(cells) > 20
    assert [c for c in cells if c[1] != 1 or c[2] > 1] == []


TOFU = """
const cells = [...document.querySelectorAll('#inputs tr.lane td:nth-child(2)')]
  .filter(td => /[\\u4e00-\\u9fff]/.test(td.textContent));
const family = getComputedStyle(cells[0]).fontFamily;
const canvas = document.createElement('canvas');
canvas.width = 48; canvas.height = 48;
const g = canvas.getContext('2d', {willReadFrequently: true});
g.font = '32px ' + family;
const draw = ch => { g.clearRect(0, 0, 48, 48); g.fillText(ch, 4, 38);
  return Array.from(g.getImageData(0, 0, 48, 48).data).join(','); };
const chars = [...new Set([...cells.map(c => c.textContent).join('')]
  .filter(ch => /[\\u4e00-\\u9fff]/.test(ch)))];
return {family: family, chars: chars.length, drawn: new Set(chars.map(draw)).size};
"""


def test_chinese_text_is_drawn_in_a_real_font(browser: Browser, tmp_path: Path) -> None:
    """Without a CJK font every Chinese character is drawn as the same empty box (tofu): the
    characters of the page's Chinese inputs must all be drawn differently."""
    shown(browser, tmp_path, "supplements-across-runs")
    seen = browser.run(TOFU)
    assert seen["chars"] >= 10 and "Noto Sans CJK" in seen["family"]
    assert seen["drawn"] == seen["chars"], (
        f"{seen['chars']} Chinese characters drawn as {seen['drawn']} distinct glyphs: no CJK "
        "font (apt-get install -y fonts-noto-cjk)")


def test_the_page_tells_when_the_script_ran_out(browser: Browser, tmp_path: Path) -> None:
    from ctxspec.conformance.driver import ReferenceDriver, run_scenario
    from ctxspec.conformance.replay_page import write_replay_page
    from ctxspec.conformance.scenario import parse_scenario
    from ctxspec.reference.ports import ScriptExhausted

    document = load(EXAMPLES / "tool-batch-hook.json")
    document["model"]["business"] = document["model"]["business"][:1]
    scenario = parse_scenario(document)
    driver = ReferenceDriver()
    with pytest.raises(ScriptExhausted) as ran_out:
        run_scenario(scenario, lambda: driver)
    write_replay_page(tmp_path / "partial.html", scenario, driver.trace(),
                      partial=f"the script ran out: {ran_out.value}")
    browser.open(tmp_path / "partial.html")
    said = browser.run("return document.getElementById('partial').innerText;")
    assert "ran out" in said
    seen = browser.run(SEEN)
    # Both requests were sent; the tools of the first answer ran before the script ran out.
    assert sent_slots(seen) == [1, 2]
    assert marks(seen, "tools") == {1: [c["name"] for c in
                                        document["model"]["business"][0]["tool_calls"]]}
    assert json.loads(json.dumps(seen["runs"][0]["status"])) == "(did not end)"


STORIES = {
    "tool-batch-hook": test_the_hook_and_the_tools_of_a_batch,
    "planner-two-executors": test_a_planners_executors_are_spans_nested_in_its_run,
    "supplements-across-runs": test_deliveries_are_shown_at_the_request_that_carried_them,
    "compaction-three-chunks-window-exceeded":
        test_the_episode_covers_the_first_runs_process_and_its_summary_overshoots_t,
    "workflow-sibling-failure":
        test_a_workflow_shows_its_nodes_the_refused_request_and_the_graph_state,
}
"""The story test of each shipped example (``ctxspec replay --example NAME`` finds them)."""


def test_every_shipped_example_has_its_story_asserted() -> None:
    assert {p.stem for p in EXAMPLES.glob("*.json")} == set(STORIES)
