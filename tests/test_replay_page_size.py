"""The replay page grows linearly with the Session (issue #35): each message's text is written
once, in the first request that sent it; a later request names the start it shares with the
request before it and links every other message it repeats (Q435). The figures for long
Sessions are in tests/benchmarks/bench_replay_page.py."""

import json
import re
from html import unescape

from ctxspec.conformance.driver import ReferenceDriver, run_scenario
from ctxspec.conformance.replay_page import replay_html
from ctxspec.conformance.scenario import Scenario
from tests.benchmarks.long_session import n_run_session


def page_of(runs: int) -> tuple[str, list[dict[str, object]]]:
    scenario = Scenario.model_validate(n_run_session(runs))
    driver = ReferenceDriver()
    run_scenario(scenario, lambda: driver)
    trace = driver.trace()
    return replay_html(scenario, trace), trace


def requests(page: str) -> list[str]:
    return re.findall(r'<details class="request" id="request-\d+">(.*?)</details>', page, re.S)


def test_each_message_is_written_once_and_every_request_accounts_for_all_of_its_own() -> None:
    page, trace = page_of(6)
    views: list[list[dict[str, object]]] = [
        e["view"]["messages"] for e in trace if e["kind"] == "model_request"]  # type: ignore[index]
    written = [unescape(t) for t in re.findall(r"<pre>(.*?)</pre>", page, re.S)]
    distinct = {json.dumps(m, sort_keys=True, default=str) for view in views for m in view}
    assert len(written) == len(distinct)  # each distinct message once
    for details, view in zip(requests(page), views, strict=True):
        shared = re.search(r'data-shared="(\d+)"', details)
        rows = len(re.findall(r"<tr id=\"m-\d+\"|<tr class=\"again\"", details))
        assert (int(shared.group(1)) if shared else 0) + rows == len(view)


def test_the_page_grows_linearly_with_the_session() -> None:
    """Twice the Runs, at most a little more than twice the page: a page that lists every
    request's whole view grows with the square (2.4 times for twice the Runs here)."""
    small, _ = page_of(8)
    large, _ = page_of(16)
    assert len(large) < 2.2 * len(small), (len(small), len(large))


def test_a_linear_trace_makes_the_same_page_as_the_expanded_one() -> None:
    """A runtime over stdio may answer with the linear form (docs/stdio-protocol.md)."""
    from ctxspec.conformance.linear_trace import linear

    scenario = Scenario.model_validate(n_run_session(3))
    driver = ReferenceDriver()
    run_scenario(scenario, lambda: driver)
    trace = driver.trace()
    document = json.loads(json.dumps(linear(trace), default=str))
    assert replay_html(scenario, document) == replay_html(scenario, trace)
