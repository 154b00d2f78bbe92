"""Generated long Sessions for the scale benchmarks (issue #35).

``n_run_session(n)`` is the Session issue #35 measures: N Runs, each a question, four tool Loops
(one ``read`` call each, its result a short text) and a final answer; recent_runs = 2 and a
window wide enough that nothing is compacted. ``supplement_session(k)`` is one question with k
supplements before it is advanced; ``short_runs_session(n)`` is n Runs of a question and an
answer each. Each returns a scenario document (a JSON-serialisable dict) that
``ctxspec replay`` reads; ``python3 tests/benchmarks/long_session.py N > s.json`` writes one.
"""

import json
import sys
from typing import Any

LOOPS = 4


def _agent(window: int = 1_000_000) -> dict[str, Any]:
    return {"system_prompt": "You answer questions about the project's files.",
            "window": window, "estimator": "bytes", "recent_runs": 2, "loop_limit": LOOPS + 2,
            "tools": [{"name": "read", "schema": {"type": "object",
                                                  "properties": {"path": {"type": "string"}}}}]}


def n_run_session(n: int) -> dict[str, Any]:
    """N Runs of a question, four tool Loops and a final answer (5 requests a Run)."""
    steps: list[dict[str, Any]] = []
    business: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []
    for run in range(n):
        steps += [{"ask": f"Question {run}: what do files {run}.0 to {run}.3 say?"},
                  {"advance": True}]
        for loop in range(LOOPS):
            business.append({"text": f"Reading file {run}.{loop}.", "tool_calls": [
                {"name": "read", "arguments": {"path": f"docs/{run}/{loop}.md"}}]})
            results.append({"text": f"File {run}.{loop}: " + "lorem ipsum dolor sit amet " * 8})
        business.append({"text": f"Answer {run}: the four files describe part {run}."})
    return {"scenario_version": 1, "name": f"long-session-{n}",
            "description": f"{n} Runs, each a question, {LOOPS} tool Loops and a final answer",
            "agent": _agent(), "steps": steps, "model": {"business": business},
            "tools": {"read": results}}


def supplement_session(k: int) -> dict[str, Any]:
    """One question with ``k`` supplements received before it is advanced."""
    steps: list[dict[str, Any]] = [{"ask": "Collect the notes that follow."}]
    steps += [{"supplement": f"note {i}"} for i in range(k)]
    steps.append({"advance": True})
    return {"scenario_version": 1, "name": f"supplements-{k}",
            "description": f"one question with {k} supplements", "agent": _agent(10_000_000),
            "steps": steps, "model": {"business": [{"text": "Collected."}]}}


def short_runs_session(n: int) -> dict[str, Any]:
    """``n`` Runs of a question and an answer each."""
    steps: list[dict[str, Any]] = []
    for run in range(n):
        steps += [{"ask": f"Question {run}?"}, {"advance": True}]
    return {"scenario_version": 1, "name": f"short-runs-{n}",
            "description": f"{n} Runs of a question and an answer", "agent": _agent(),
            "steps": steps, "model": {"business": [{"text": f"Answer {run}."}
                                                    for run in range(n)]}}


if __name__ == "__main__":
    kinds = {"runs": n_run_session, "supplements": supplement_session,
             "short": short_runs_session}
    kind = sys.argv[2] if len(sys.argv) > 2 else "runs"
    json.dump(kinds[kind](int(sys.argv[1])), sys.stdout)
