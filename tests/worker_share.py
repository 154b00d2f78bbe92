"""Work that every xdist worker of one test run would repeat, done once per run and shared
through the run's temporary folder.

A whole-suite pass on the reference takes seconds; several test modules need one, and under
xdist they land on either worker. The pass is cut into parts: a worker computes each part no
other worker has started (a part's lock is held while it is computed), then waits for the
others' on a second, blocking pass; a part its worker left unwritten (it failed) is computed by
the next. Outside xdist the run's folder outlives the run, so the parts are computed in place.
"""

import fcntl
import json
import os
from collections.abc import Callable, Sequence

import pytest

from ctxspec.conformance.case import Case


def once_per_run(tmp_path_factory: pytest.TempPathFactory, name: str, parts: int,
                 compute: Callable[[int], str]) -> list[str]:
    """The text ``compute(part)`` gives for each of ``parts`` parts, computed once per test run
    across its workers (``name`` tells this work's files from other work's)."""
    if "PYTEST_XDIST_WORKER" not in os.environ:
        return [compute(part) for part in range(parts)]
    folder = tmp_path_factory.getbasetemp().parent
    for blocking in (False, True):
        flags = fcntl.LOCK_EX if blocking else fcntl.LOCK_EX | fcntl.LOCK_NB
        for part in range(parts):
            path = folder / f"{name}-{part}.json"
            with open(path.with_suffix(".lock"), "w") as lock:
                try:
                    fcntl.flock(lock, flags)
                except BlockingIOError:  # another worker computes it: awaited on the second pass
                    continue
                if not path.exists():
                    # Written whole, then renamed: a reader never sees half a part.
                    partial = path.with_suffix(".partial")
                    partial.write_text(compute(part), "utf-8")
                    partial.replace(path)
    return [(folder / f"{name}-{part}.json").read_text("utf-8") for part in range(parts)]


def split_cases(cases: Sequence[Case], parts: int) -> list[list[Case]]:
    """``cases`` in ``parts`` parts of about as many cases, the cases that run one scenario
    but for its crash (a crash matrix's group, which shares its run-up and its baseline) kept
    in one part, each part in the suite's order."""
    groups: dict[str, list[int]] = {}
    for index, case in enumerate(cases):
        scenario = {k: v for k, v in case.scenario.items() if k != "crash"}
        groups.setdefault(json.dumps(scenario, sort_keys=True, default=str), []).append(index)
    chosen: list[list[int]] = [[] for _ in range(parts)]
    for members in sorted(groups.values(), key=len, reverse=True):
        min(chosen, key=len).extend(members)
    return [[cases[i] for i in sorted(part)] for part in chosen]
