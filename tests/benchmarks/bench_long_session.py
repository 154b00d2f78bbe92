"""The oracle at production scale beside LangGraph (issue #35).

Run: ``python3 tests/benchmarks/bench_long_session.py [--sizes 50 200 1000]`` with the
``langchain`` extra installed (langchain, langgraph and its SQLite checkpointer).

Both sides replay the generated Session of ``long_session.n_run_session``: N Runs, each a
question, four tool Loops (one ``read`` call each, a short result) and a final answer — five
model requests a Run. ctxspec: the reference runtime through its Driver, the scenario's
scripted model and tool, recent_runs = 2, nothing compacted, on an in-memory store.
LangGraph: ``langchain.agents.create_agent`` with a scripted chat model answering the same
texts and tool calls, the same ``read`` tool, and ``SqliteSaver`` on a file, one
``invoke`` per Run on one thread id (it sends the whole history every time).

Each measurement runs in a fresh child process (peak RSS is the child's ``ru_maxrss``), and
the sizes are interleaved: for each N, ctxspec then LangGraph, in one run. Figures:

- ``total``: wall time of the N Runs (the scenario read and the agent built before it);
  ``CPU``: the child's CPU time over the same span (steadier on a shared machine);
- ``last 10``: wall time of the last two Runs (their ten requests);
- ``per message``: a Run's time divided by the messages its five requests sent, at Run 100
  and at the last Run (ctxspec; the issue's "within 2x after dividing by what it sends"), and
  the same of CPU time over ten Runs (96-105 against the last ten);
- ``peak RSS``: the child's peak; for ctxspec first at the end of the run, then after its
  trace was converted and written as ``replay --json`` writes it (its linear form, made one
  event at a time where the checkout can);
- ``stored``: bytes of the store (ctxspec: the SQLite image; LangGraph: the checkpoint file);
- ``trace``: bytes of ``ctxspec replay --json``'s document (the linear trace) for ctxspec;
- ``load``: the machine's 1-minute load average when the child started and when it ended.

``--extra`` also runs the two other shapes of the issue on ctxspec: one question with 50,000
supplements and 5,000 short Runs. LangGraph is given ``--langgraph-seconds`` (default 600)
per size; a size it does not finish in that time is reported with the Runs it reached.
A last table puts each of issue #35's "Done when" figures this run measured beside its target.
"""

import argparse
import itertools
import json
import os
import resource
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, cast

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from tests.benchmarks.long_session import (  # noqa: E402
    LOOPS,
    n_run_session,
    short_runs_session,
    supplement_session,
)

CODE = os.environ.get("BENCH_CODE")
"""A checkout whose ctxspec the ``ours`` child measures instead of this one (``--before``)."""
if CODE:
    sys.path.insert(0, CODE)


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child_ours(kind: str, n: int) -> dict[str, Any]:
    import importlib

    from ctxspec.conformance.driver import ReferenceDriver, run_scenario
    from ctxspec.conformance.scenario import Scenario

    try:
        form: Any = importlib.import_module("ctxspec.conformance.linear_trace").linear
    except ImportError:  # a checkout from before the linear trace: its trace as it wrote it
        form = list

    document = {"runs": n_run_session, "supplements": supplement_session,
                "short": short_runs_session}[kind](n)
    scenario = Scenario.model_validate(document)
    ends: list[float] = []
    ends_cpu: list[float] = []

    class Timed(ReferenceDriver):
        def advance(self) -> None:
            super().advance()
            ends.append(time.perf_counter())
            ends_cpu.append(time.process_time())

    driver = Timed()
    start, start_cpu = time.perf_counter(), time.process_time()
    run_scenario(scenario, lambda: driver)
    total, cpu = time.perf_counter() - start, time.process_time() - start_cpu
    run_peak = _peak_mb()  # before the trace is converted and written
    per_run: list[int] = []

    def counted(events: Any) -> Any:
        for event in events:
            if event["kind"] == "run_ended" or not per_run:
                per_run.append(0)
            if event["kind"] == "model_request":
                per_run[-1] += len(event["view"]["messages"])
            yield event
    # As ``replay --json`` makes it: one event at a time where the checkout can (Q502).
    streamed = getattr(driver, "trace_events", None)
    document = form(counted(driver.trace() if streamed is None else streamed()))
    run_times = [b - a for a, b in itertools.pairwise([start, *ends])]
    run_cpu = [b - a for a, b in itertools.pairwise([start_cpu, *ends_cpu])]
    result: dict[str, Any] = {
        "total_s": total, "cpu_s": cpu,
        "last10_s": sum(run_times[-2:]) if kind == "runs" else None,
        "stored_bytes": len(driver.store.db.conn.serialize()),
        "trace_bytes": len(json.dumps(document, indent=1, ensure_ascii=False)),
        "peak_mb": _peak_mb(), "run_peak_mb": run_peak}
    if kind == "runs" and n >= 100:
        result["us_per_message_run100"] = 1e6 * run_times[99] / per_run[99]
        result["us_per_message_last"] = 1e6 * run_times[-1] / per_run[len(run_times) - 1]
        # The same of CPU time, the last ten Runs' mean against Runs 96-105: a single Run's
        # wall time on a shared machine is mostly its neighbours'.
        result["cpu_us_per_message_run100"] = 1e6 * sum(run_cpu[95:105]) / sum(per_run[95:105])
        result["cpu_us_per_message_last"] = 1e6 * sum(run_cpu[-10:]) / sum(
            per_run[len(run_cpu) - 10:len(run_cpu)])
    return result


def child_langgraph(n: int, seconds: float) -> dict[str, Any]:
    from langchain.agents import create_agent
    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.messages import AIMessage, BaseMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_core.tools import tool
    from langgraph.checkpoint.sqlite import SqliteSaver

    document = n_run_session(n)
    answers = iter(document["model"]["business"])
    results = iter(document["tools"]["read"])
    calls = iter(range(10**9))

    class Scripted(BaseChatModel):
        @property
        def _llm_type(self) -> str:
            return "scripted"

        def bind_tools(self, tools: Any, **_: Any) -> "Scripted":
            return self

        def _generate(self, messages: list[BaseMessage], stop: Any = None,
                      run_manager: Any = None, **_: Any) -> ChatResult:
            answer = next(answers)
            message = AIMessage(content=answer["text"], tool_calls=[
                {"name": c["name"], "args": c["arguments"], "id": f"call-{next(calls)}"}
                for c in answer.get("tool_calls", [])])
            return ChatResult(generations=[ChatGeneration(message=message)])

    @tool
    def read(path: str) -> str:
        """Read a file of the project."""
        return str(next(results)["text"])

    folder = tempfile.mkdtemp(prefix="bench-langgraph-")
    path = os.path.join(folder, "checkpoints.sqlite")
    connection = sqlite3.connect(path, check_same_thread=False)
    agent = create_agent(Scripted(), tools=[read], checkpointer=SqliteSaver(connection),
                         system_prompt=document["agent"]["system_prompt"])
    questions = [step["ask"] for step in document["steps"] if "ask" in step]
    config: Any = {"configurable": {"thread_id": "session"}, "recursion_limit": 4 * LOOPS + 8}
    ends: list[float] = []
    start, cpu = time.perf_counter(), time.process_time()
    for question in questions:
        agent.invoke(cast(Any, {"messages": [{"role": "user", "content": question}]}), config)
        ends.append(time.perf_counter())
        if ends[-1] - start > seconds:
            break
    total, cpu = time.perf_counter() - start, time.process_time() - cpu
    connection.close()
    marks = [start, *ends]
    run_times = [b - a for a, b in itertools.pairwise(marks)]
    stored = sum(os.path.getsize(os.path.join(folder, f)) for f in os.listdir(folder))
    for name in os.listdir(folder):
        os.remove(os.path.join(folder, name))
    os.rmdir(folder)
    return {"total_s": total, "cpu_s": cpu, "last10_s": sum(run_times[-2:]),
            "stored_bytes": stored,
            "trace_bytes": None, "peak_mb": _peak_mb(), "runs_done": len(ends)}


def _child(args: list[str], code: str | None = None, limit: float = 1800) -> dict[str, Any]:
    env = {**os.environ, **({"BENCH_CODE": code} if code else {})}
    load = os.getloadavg()[0]
    try:
        done = subprocess.run([sys.executable, __file__, "--child", *args], capture_output=True,
                              text=True, check=False, cwd=ROOT, env=env, timeout=limit)
    except subprocess.TimeoutExpired:
        return {"error": f"did not finish within {limit:g} s"}
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1:]}
    figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    figures["load"] = (load, os.getloadavg()[0])  # the machine is shared: its 1-minute load
    return figures


def _mb(value: Any) -> str:
    return "—" if value is None else f"{value / 1e6:,.1f} MB"


def _row(name: str, n: int, f: dict[str, Any]) -> str:
    if "error" in f:
        return f"| {name} | {n:,} | error: {f['error']} |"
    reached = f.get("runs_done")
    runs = f"{n:,}" if reached in (None, n) else f"{n:,} (reached {reached:,})"
    per = (f" | {f['us_per_message_run100']:.1f} → {f['us_per_message_last']:.1f} µs"
           if "us_per_message_last" in f else " | —")
    if "cpu_us_per_message_last" in f:
        per += (f" (CPU, ten Runs: {f['cpu_us_per_message_run100']:.1f} → "
                f"{f['cpu_us_per_message_last']:.1f} µs)")
    last = "—" if f["last10_s"] is None else f"{f['last10_s']:.2f} s"
    peak = (f"{f['run_peak_mb']:.0f} MB ({f['peak_mb']:.0f} MB with the trace)"
            if "run_peak_mb" in f else f"{f['peak_mb']:.0f} MB")
    cpu = f"{f['cpu_s']:.1f} s" if "cpu_s" in f else "—"
    load = "{:.1f} → {:.1f}".format(*f["load"]) if "load" in f else "—"
    return (f"| {name} | {runs} | {f['total_s']:.1f} s | {cpu} | {last} | {peak} | "
            f"{_mb(f['stored_bytes'])} | {_mb(f['trace_bytes'])}{per} | {load} |")


def _seconds(f: dict[str, Any]) -> str:
    cpu = f" ({f['cpu_s']:.1f} s CPU)" if "cpu_s" in f else ""
    return f"{f['total_s']:.1f} s{cpu}"


def _targets(figures: dict[tuple[str, str, int], dict[str, Any]]) -> None:
    """Issue #35's "Done when" figures from this run, each beside its target."""
    ours, peer = figures.get(("ours", "runs", 1000), {}), figures.get(("lg", "runs", 200), {})
    at200 = figures.get(("ours", "runs", 200), {})
    rows: list[tuple[str, str, bool | None]] = []

    def row(name: str, figure: str, met: bool | None) -> None:
        rows.append((name, figure, met))
    if "total_s" in ours:
        row("1,000 Runs in under 30 s", _seconds(ours), ours["total_s"] < 30)
        row("… peak RSS under 200 MB", f"{ours['run_peak_mb']:.0f} MB",
            ours["run_peak_mb"] < 200)
        per = ours["us_per_message_last"] / ours["us_per_message_run100"]
        figure = f"{per:.2f}×"
        if "cpu_us_per_message_last" in ours:
            figure += " ({:.2f}× of CPU, ten Runs each)".format(
                ours["cpu_us_per_message_last"] / ours["cpu_us_per_message_run100"])
        row("a request at Run 1,000 within 2× of Run 100, per message", figure, per <= 2)
    if "total_s" in at200 and "total_s" in peer:
        ratio, share = peer["total_s"] / at200["total_s"], at200["stored_bytes"] / peer[
            "stored_bytes"]
        row("200 Runs at least 5× faster than LangGraph", f"{ratio:.1f}×", ratio >= 5)
        row("… with at most 1/50 of its stored bytes", f"1/{1 / share:.0f}", share <= 1 / 50)
    for kind, n, name in (("supplements", 50_000, "50,000 supplements in under 60 s"),
                          ("short", 5_000, "5,000 short Runs in under 60 s")):
        if (key := ("ours", kind, n)) in figures:
            f = figures[key]
            row(name, f.get("error") or _seconds(f),
                "total_s" in f and f["total_s"] < 60)
    print("\n| target (issue #35) | this run | met |\n|---|---:|---|")
    for name, figure, met in rows:
        print(f"| {name} | {figure} | {'yes' if met else 'no'} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[50, 200, 1000])
    parser.add_argument("--langgraph-seconds", type=float, default=600.0)
    parser.add_argument("--no-langgraph", action="store_true")
    parser.add_argument("--extra", action="store_true",
                        help="also 50,000 supplements and 5,000 short Runs (ctxspec)")
    parser.add_argument("--before", metavar="CHECKOUT",
                        help="also measure the ctxspec of this checkout (interleaved)")
    parser.add_argument("--before-sizes", type=int, nargs="+", default=[50, 200])
    parser.add_argument("--before-seconds", type=float, default=600.0)
    parser.add_argument("--before-extra", action="store_true",
                        help="with --extra and --before: the two other shapes on the checkout too")
    parser.add_argument("--extra-seconds", type=float, default=600.0,
                        help="the time an --extra shape is given before it is reported unfinished")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        side, kind, n = args.child[0], args.child[1], int(args.child[2])
        figures = child_ours(kind, n) if side == "ours" else child_langgraph(
            n, float(args.child[3]))
        print(json.dumps(figures))
        return
    print("| side | Runs | total | CPU | last 10 requests | peak RSS | stored | trace "
          "| per message sent (Run 100 → last) | load |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    if args.before:
        print(f"(before: {args.before})")
    measured: dict[tuple[str, str, int], dict[str, Any]] = {}
    for n in args.sizes:
        if args.before and n in args.before_sizes:
            print(_row("ctxspec before", n, _child(["ours", "runs", str(n)], args.before,
                                                   args.before_seconds)), flush=True)
        measured["ours", "runs", n] = _child(["ours", "runs", str(n)])
        print(_row("ctxspec", n, measured["ours", "runs", n]), flush=True)
        if not args.no_langgraph:
            measured["lg", "runs", n] = _child(
                ["langgraph", "runs", str(n), str(args.langgraph_seconds)])
            print(_row("LangGraph + SqliteSaver", n, measured["lg", "runs", n]), flush=True)
    if args.extra:
        for kind, n in (("supplements", 50_000), ("short", 5_000)):
            if args.before and args.before_extra:
                print(_row(f"ctxspec before, {kind}", n, _child(
                    ["ours", kind, str(n)], args.before, args.extra_seconds)), flush=True)
            measured["ours", kind, n] = _child(["ours", kind, str(n)], limit=args.extra_seconds)
            print(_row(f"ctxspec, {kind}", n, measured["ours", kind, n]), flush=True)
    _targets(measured)


if __name__ == "__main__":
    main()
