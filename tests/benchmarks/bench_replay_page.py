"""The replay page's size against the Session's length (issue #35: ``--html`` must not grow
with the square of the Session).

Run: ``python3 tests/benchmarks/bench_replay_page.py [--sizes 25 50 100 200]``. Each size
replays the generated Session of ``long_session.n_run_session`` (N Runs, five model requests a
Run, recent_runs = 2) on the reference runtime and builds its page as ``ctxspec replay --html``
does. Figures per size: the page's bytes, bytes per Run (flat when the page is linear in the
Session), the bytes of the messages the page would repeat if every request listed its whole
view (what grows with the square), and the time to build the page.
"""

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from tests.benchmarks.long_session import n_run_session  # noqa: E402


def measure(n: int) -> dict[str, float]:
    from ctxspec.conformance.driver import ReferenceDriver, run_scenario
    from ctxspec.conformance.replay_page import replay_html
    from ctxspec.conformance.scenario import Scenario

    scenario = Scenario.model_validate(n_run_session(n))
    driver = ReferenceDriver()
    run_scenario(scenario, lambda: driver)
    trace = driver.trace()
    start = time.perf_counter()
    page = replay_html(scenario, trace)
    took = time.perf_counter() - start
    expanded = sum(len(json.dumps(m["text"], ensure_ascii=False)) for e in trace
                   if e["kind"] == "model_request" for m in e["view"]["messages"])
    size = len(page.encode("utf-8"))
    return {"runs": n, "page_bytes": size, "per_run": size / n, "expanded_text": expanded,
            "seconds": took}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[25, 50, 100, 200])
    args = parser.parse_args()
    print("| Runs | page | page per Run | every view's texts repeated | build |")
    print("|---:|---:|---:|---:|---:|")
    for n in args.sizes:
        f = measure(n)
        print(f"| {n:,} | {f['page_bytes'] / 1e6:,.2f} MB | {f['per_run'] / 1e3:,.1f} kB | "
              f"{f['expanded_text'] / 1e6:,.1f} MB | {f['seconds']:.1f} s |", flush=True)


if __name__ == "__main__":
    main()
