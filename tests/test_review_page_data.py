"""What the review pages are built from, without a browser: how a request's I is split into §8's
parts, the hook changes with their values before, the delivery lanes, and the pages written
whole or not at all by the command line."""

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from ctxspec.cli import main
from ctxspec.conformance.cases import by_id
from ctxspec.conformance.driver import ReferenceDriver, run_scenario
from ctxspec.conformance.replay_data import build_page
from ctxspec.conformance.scenario import parse_scenario
from tests.browser import replayed

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "docs" / "examples"


def page_of(name: str) -> Any:
    scenario, trace = replayed(EXAMPLES / name)
    return build_page(scenario, json.loads(json.dumps(trace, default=str))), trace


def test_the_parts_of_i_are_derived_from_the_requests_own_messages() -> None:
    page, trace = page_of("compaction-three-chunks-window-exceeded.json")
    document = json.loads((EXAMPLES / "compaction-three-chunks-window-exceeded.json").read_text())
    question = document["steps"][0]["ask"]
    sent = [e["estimated_input_tokens"] for e in trace if e["kind"] == "model_request"]
    business = [bar for bar in page.bars if bar.kind == "business"]
    parts = [dict(bar.segments) for bar in business]
    # One token a character: the question is its length; the first request is the fixed
    # input and the question only; each later one adds exactly one call and its result.
    assert all(p["protected"] == len(question) for p in parts)
    assert parts[0] == {"fixed": sent[0] - len(question), "protected": len(question)}
    assert [p.get("material", 0) for p in parts] == [i - sent[0] for i in sent[:4]]
    assert all(sum(p.values()) == bar.total for p, bar in zip(parts, business, strict=True))
    # The evaluated request of the second question: the first Run's process is the material
    # (its question, the three fetched reports, its answer), beside the system prompt and the
    # second question, each counted once by the content estimator.
    evaluated = next(bar for bar in page.bars if bar.kind == "evaluated")
    material = len(question) + sum(len(r["text"]) for r in document["tools"]["fetch"]) + len(
        document["model"]["business"][3]["text"])
    fixed, protected = len(document["agent"]["system_prompt"]), len(document["steps"][2]["ask"])
    assert (evaluated.total, dict(evaluated.segments)["material"]) == (
        fixed + protected + material, material)
    assert [bar.kind for bar in page.bars[page.episodes[0].first:page.episodes[0].last + 1]] == \
        ["evaluated", "compaction", "compaction", "compaction"]


def test_a_hooks_change_shows_the_value_before_it() -> None:
    page, _ = page_of("tool-batch-hook.json")
    change = page.bars[1].changes[0]
    document = json.loads((EXAMPLES / "tool-batch-hook.json").read_text("utf-8"))
    [hook] = document["hooks"]
    [call] = [c for c in document["model"]["business"][0]["tool_calls"]
              if c["name"] == "write"]
    ordinal = document["model"]["business"][0]["tool_calls"].index(call) + 1
    # Named as the scenario numbers it (Q430): the point's invocation is the hook's ordinal,
    # the item its first; the field by the call's name and action ordinal, never its UUID.
    assert (change.by, change.before, change.after) == (
        f"{hook['point']} #{hook['ordinal']} item 1 ({hook['items'][0]['decision']})",
        json.dumps(call["arguments"]["path"]),
        json.dumps(hook["items"][0]["payload_patch"][0]["value"]))
    assert change.field == f"write #{ordinal} {hook['items'][0]['payload_patch'][0]['path']}"


def test_a_carried_input_shows_each_delivery_per_run() -> None:
    page, _ = page_of("supplements-across-runs.json")
    carried = next(lane for lane in page.lanes if lane.text == "包括构建缓存")
    runs = [page.runs[column].label for column in sorted(carried.states)]
    assert runs == ["run 2", "run 3", "run 4"]
    ever = [(state, slot) for column in sorted(carried.states)
            for _, state, slot in carried.states[column]]
    assert [state for state, _ in ever].count("carried") == 2 and ever[-1][0] == "delivered"
    # Per request (§5): claimed into the request of run 2 (whose model failed before any
    # output) and into run 4's, delivered by run 4's; carried as runs 2 and 3 ended.
    request_of = {page.runs[b.run].label: i for i, b in enumerate(page.bars)
                  if b.kind == "business"}
    run_of = {i: page.runs[b.run].label for i, b in enumerate(page.bars)}
    assert [slot for state, slot in ever if state == "claimed"] == \
        [request_of["run 2"], request_of["run 4"]]
    assert [slot for state, slot in ever if state == "delivered"] == [request_of["run 4"]]
    assert [run_of[slot] for state, slot in ever if state == "carried"] == ["run 2", "run 3"]
    assert carried.kind == "supplement"
    kinds = {lane.text: lane.kind for lane in page.lanes}
    document = json.loads((EXAMPLES / "supplements-across-runs.json").read_text("utf-8"))
    assert kinds == {**{s["ask"]: "question" for s in document["steps"] if "ask" in s},
                     **{s["supplement"]: "supplement" for s in document["steps"]
                        if "supplement" in s}}


def test_replay_writes_its_page_whole_or_not_at_all(tmp_path: Path) -> None:
    target = tmp_path / "page.html"
    runner = CliRunner()
    good = runner.invoke(main, ["replay", str(EXAMPLES / "tool-batch-hook.json"), "--html",
                                str(target)])
    assert good.exit_code == 0, good.output
    assert target.read_text("utf-8").rstrip().endswith("</html>")
    short = json.loads((EXAMPLES / "tool-batch-hook.json").read_text("utf-8"))
    short["model"]["business"] = short["model"]["business"][:1]  # the script runs out
    (tmp_path / "short.json").write_text(json.dumps(short), "utf-8")
    target.write_text("the page before", "utf-8")
    failed = runner.invoke(main, ["replay", str(tmp_path / "short.json"), "--html",
                                  str(target)])
    # The script ran out at the second request's answer: the exit says so, and the page
    # shows what happened until then, whole: both requests (the second was sent, and found no
    # answer), the hook's change, a Run that did not end, and that it stopped early.
    assert failed.exit_code == 1 and "ran out" in failed.output
    assert "  tool read" in failed.output  # the timeline up to then is printed too
    text = target.read_text("utf-8")
    assert 'id="partial"' in text and "ran out" in text and "(did not end)" in text
    assert 'id="request-1"' in text and 'id="request-2"' in text and 'id="request-3"' not in text
    assert "reports/a.md" in text and text.rstrip().endswith("</html>")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["page.html", "short.json"]
    nowhere = runner.invoke(main, ["replay", str(EXAMPLES / "tool-batch-hook.json"), "--html",
                                   str(tmp_path / "missing" / "page.html")])
    # A page that cannot be written is a bad argument, refused before the scenario runs.
    assert nowhere.exit_code == 2 and "not a folder this user can write to" in nowhere.output


def test_conformance_writes_the_matrix_page(tmp_path: Path) -> None:
    target = tmp_path / "report.html"
    result = CliRunner().invoke(main, ["conformance", "--case", "ROW-02", "--html", str(target)])
    assert result.exit_code == 0, result.output
    text = target.read_text("utf-8")
    assert 'id="by-source"' in text and 'id="by-section"' in text
    assert 'data-row="§12 row 2"' in text and 'data-case="ROW-02"' in text
    assert "<th>driver</th><td>reference</td>" in text


def test_a_hooks_patch_of_a_record_shows_the_text_it_replaced() -> None:
    [case] = by_id(["ROW-20"])
    scenario = parse_scenario(case.scenario)
    driver = ReferenceDriver()
    run_scenario(scenario, lambda: driver)
    page = build_page(scenario, json.loads(json.dumps(driver.trace(), default=str)))
    [patch] = case.scenario["hooks"][0]["items"][0]["context_patch"]
    answer = case.scenario["model"]["business"][0]["text"]  # the record the patch targets
    changes = [c for bar in page.bars for c in bar.changes if c.field.endswith(" text")]
    assert changes and {(c.by.split(" #")[0], c.before, c.after) for c in changes} == \
        {("model.pre_request", json.dumps(answer), json.dumps(patch["value"]))}
    # The record is named by its kind and the request that first sent it, never its UUID: the
    # first answer is first sent by the request after the one it answered.
    first = next(i for i, bar in enumerate(page.bars)
                 if any(m.get("text") == answer for m in bar.messages))
    assert {c.field for c in changes} == {f"assistant of request #{first + 1} text"}


def test_the_terminal_timeline_names_the_hook_and_its_field_as_the_scenario_does() -> None:
    document = json.loads((EXAMPLES / "tool-batch-hook.json").read_text("utf-8"))
    [hook] = document["hooks"]
    calls = document["model"]["business"][0]["tool_calls"]
    ordinal = next(i for i, c in enumerate(calls, start=1) if c["name"] == "write")
    patch = hook["items"][0]["payload_patch"][0]
    result = CliRunner().invoke(main, ["replay", str(EXAMPLES / "tool-batch-hook.json")])
    assert result.exit_code == 0, result.output
    # Q430: the point's invocation and the item from 1, the field by the call's name.
    line = (f"  hook {hook['point']} #{hook['ordinal']} item 1 "
            f"({hook['items'][0]['decision']}): write #{ordinal} {patch['path']}="
            f"{json.dumps(patch['value'])}")
    assert line in result.output.splitlines()
