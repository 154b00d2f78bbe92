"""A real crash (§10, §12 rows 21-23): a child process runs a worked example on a database
file and is killed with SIGKILL at random moments; each restart builds a new runtime from the
file alone and goes on. At the end the Session must have ended as it does without kills, with no
external call repeated for a result that was saved and `PRAGMA integrity_check` = ok.

The scripted model and tools play the outside world, so their memory survives the kills: they
keep a journal (fsync'ed before they answer) of what they were asked and answered. A model
request asked again is answered as before (the world does not forget) — but if the runtime
re-asks for an answer the store held when it started, the world notes a violation.
"""

import json
import multiprocessing
import os
import random
import signal
import sqlite3
import time
import traceback
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from ctxspec.conformance.case import example
from ctxspec.conformance.driver import ReferenceDriver, run_scenario
from ctxspec.conformance.driver_config import agent_config
from ctxspec.conformance.estimator import estimator_for
from ctxspec.conformance.scenario import (
    Scenario,
    ScriptedHooks,
    ScriptedModel,
    ScriptedTools,
    Triggers,
    parse_scenario,
)
from ctxspec.reference.ports import (
    LogicalClock,
    ModelCall,
    ModelOutcome,
    ScriptExhausted,
    ToolOutcome,
)
from ctxspec.reference.registry import JSON
from ctxspec.reference.runtime.ownership import HARNESS
from ctxspec.reference.runtime.restore import restore
from ctxspec.reference.runtime.runtime import ReferenceRuntime
from ctxspec.reference.runtime.store import CommitCoordinator, Store
from ctxspec.reference.runtime.trace import ToolExecuted

SESSIONS = ("tool-batch-hook", "compaction-three-chunks-window-exceeded",
            "supplements-across-runs")
KILLS = 150
"""Kills in all, spread over the three Sessions (the issue asks for at least 50; with 150 a
runtime that re-asks a saved answer after a takeover is caught by seed 20261129)."""
DELAY = 0.004
"""Seconds each model or tool call, and each commit, takes in the child, so that kills land
inside calls and between commits alike."""
EXHAUSTED = 3
"""The child's exit code when an unknown tool outcome made the rest of the script not fit."""


def load(name: str) -> Scenario:
    return parse_scenario(example(name))


def note(path: Path, entry: dict[str, Any]) -> None:
    """Append one journal line and make it durable before going on."""
    with path.open("a", encoding="utf-8") as file:
        file.write(json.dumps(entry) + "\n")
        file.flush()
        os.fsync(file.fileno())


def saved_answers(database: Path) -> frozenset[str]:
    if not database.exists():
        return frozenset()
    with sqlite3.connect(f"file:{database}?mode=ro", uri=True) as db:
        rows = db.execute("SELECT purpose_key FROM operations WHERE raw_result_ref IS NOT NULL "
                          "AND purpose IN ('model', 'compaction')").fetchall()
    return frozenset(row[0] for row in rows)


class World:
    """The scripted model and tools with a durable journal of every call they answered."""

    def __init__(self, scenario: Scenario, journal: Path, database: Path) -> None:
        self.model = ScriptedModel(scenario.model, Triggers(()))
        self.tools = ScriptedTools(scenario.tools, Triggers(()))
        self.journal = journal
        self.saved = saved_answers(database)
        """Operations whose answer the store held when this incarnation started: asking for
        one of them again is the violation this test looks for."""
        for entry in self.entries(journal):
            if entry["kind"] == "model":
                key, index = entry["script"], entry["index"]
                self.model.used[key] = max(self.model.used[key], index + 1)
                self.model.answered[(entry["purpose_key"], entry["attempt"])] = \
                    self.model.script[key][index].outcome()
            elif entry["kind"] == "tool":
                self.tools.calls[entry["name"]] = entry["ordinal"]

    @staticmethod
    def entries(journal: Path) -> list[dict[str, Any]]:
        if not journal.exists():
            return []
        lines = journal.read_text("utf-8").split("\n")
        # A kill can cut the last line short: the world never finished answering that call.
        return [json.loads(line) for line in lines if line.endswith("}")]

    def note(self, entry: dict[str, Any]) -> None:
        note(self.journal, entry)

    def call(self, request: ModelCall) -> ModelOutcome:
        time.sleep(DELAY)
        if request.purpose_key in self.saved:
            self.note({"kind": "violation", "purpose_key": request.purpose_key})
        asked = (request.purpose_key, request.attempt)
        if asked in self.model.answered:
            self.note({"kind": "replay", "purpose_key": request.purpose_key})
            return self.model.answered[asked]
        outcome = self.model.call(request)
        key = "executor" if request.purpose == "business" and request.role == "executor" \
            else request.purpose
        self.note({"kind": "model", "script": key, "index": self.model.used[key] - 1,
                   "purpose_key": request.purpose_key, "attempt": request.attempt})
        return outcome

    def run(self, name: str, arguments: Mapping[str, JSON], ordinal: int) -> ToolOutcome:
        time.sleep(DELAY)
        outcome = self.tools.run(name, arguments, ordinal)
        self.note({"kind": "tool", "name": name, "ordinal": self.tools.calls[name]})
        return outcome


def child(name: str, database: Path, journal: Path, progress: Path, commits: Any) -> None:
    """One incarnation: open or restore the Session, then perform the steps not yet done.
    ``commits`` (shared with the parent) counts the commits begun, so the parent can aim."""
    def slow_disk(commit: str, write: int) -> None:
        if write == 0:  # once per commit, before it: kills land between commits as in calls
            commits.value += 1
            time.sleep(DELAY)

    try:
        scenario = load(name)
        store = Store(database)
        coordinator = CommitCoordinator(store, slow_disk)
        world = World(scenario, journal, database)
        agent = agent_config(scenario.agent)
        ports: dict[str, Any] = {"model": world, "tools": world,
                                 "hooks": ScriptedHooks(scenario.hooks),
                                 "estimator": estimator_for(scenario, scenario.agent),
                                 "clock": LogicalClock()}
        # The test kills its runtimes itself: a takeover need not wait a lease out.
        runtime = restore(store, agent, seed=name, coordinator=coordinator, lease=HARNESS,
                          **ports) \
            if store.count("sessions") else ReferenceRuntime(
                agent, seed=name, store=store, coordinator=coordinator, lease=HARNESS, **ports)
        done = World.entries(progress)
        finished = {e["step"] for e in done if e["kind"] == "done"}
        began = {e["step"]: e["inputs"] for e in done if e["kind"] == "start"}
        for index, step in enumerate(scenario.steps):
            if index in finished:
                continue
            inputs = store.count("user_inputs")
            if index not in began:
                note(progress, {"kind": "start", "step": index, "inputs": inputs})
            accepted = index in began and inputs > began[index]
            if step.ask is not None and not accepted:
                runtime.ask(step.ask)
            elif step.supplement is not None and not accepted:
                runtime.supplement(step.supplement)
            elif step.stop:
                runtime.stop()
            elif step.advance:
                runtime.advance()
            note(progress, {"kind": "done", "step": index})
    except ScriptExhausted:
        os._exit(EXHAUSTED)
    except BaseException:
        (database.parent / "child-error.txt").write_text(traceback.format_exc(), "utf-8")
        os._exit(1)
    os._exit(0)




def uncrashed(name: str) -> tuple[tuple[list[str], int, Counter[str]], Counter[str]]:
    """The Session's outcome without kills, and how often each tool ran."""
    driver = ReferenceDriver()
    run_scenario(load(name), lambda: driver)
    assert driver.runtime is not None
    ran = Counter(str(e.name) for e in driver.raw_trace().of(ToolExecuted))
    return outcome(driver.runtime.store), ran


def outcome(store: Store) -> tuple[list[str], int, Counter[str]]:
    """Run statuses, tool results saved, stored record kinds."""
    statuses = [row["status"] for row in store.query("SELECT status FROM runs ORDER BY run_no")]
    kinds = Counter(row["message_kind"] for row in store.query(
        "SELECT message_kind FROM records"))
    tools = store.query("SELECT COUNT(*) AS n FROM operations WHERE purpose = 'tool'")[0]["n"]
    return statuses, int(tools), kinds


def session_with_kills(name: str, directory: Path, kills: int, rng: random.Random
                       ) -> tuple[int, int]:
    """Run one Session to its end, killing its process ``kills`` times; (kills, exit code).
    Each kill waits for a random number of commits of that incarnation, then a random part of a
    call's time, so kills land all along the Session and at no chosen instruction."""
    directory.mkdir()
    database, journal, progress = (directory / "session.db", directory / "world.jsonl",
                                   directory / "progress.jsonl")
    fork = multiprocessing.get_context("fork")
    killed = 0
    while True:
        commits = fork.Value("i", 0)
        process = fork.Process(target=child, args=(name, database, journal, progress, commits))
        process.start()
        if killed < kills:
            target = rng.randint(0, 8)
            while process.is_alive() and commits.value < target:
                time.sleep(DELAY / 8)
            time.sleep(rng.uniform(0, 2 * DELAY))
            if process.is_alive():
                assert process.pid is not None
                os.kill(process.pid, signal.SIGKILL)
                process.join()
                killed += 1
                continue
        process.join(60)
        assert process.exitcode is not None, "a child never finished"
        if process.exitcode not in (0, EXHAUSTED):
            pytest.fail((directory / "child-error.txt").read_text("utf-8"))
        return killed, process.exitcode


@pytest.mark.slow  # real processes killed again and again
@pytest.mark.first  # mostly waiting: the other core runs tests meanwhile
@pytest.mark.covers("CTX-10.2", "CTX-10.4", "CTX-10.19")
def test_sigkill_at_random_moments_loses_nothing_and_repeats_no_saved_call(
        tmp_path: Path) -> None:
    seed = 20261129
    rng = random.Random(seed)
    expected = {name: uncrashed(name) for name in SESSIONS}
    total, session = 0, 0
    while total < KILLS:
        name = SESSIONS[session % len(SESSIONS)]
        directory = tmp_path / f"{session:02d}-{name}"
        killed, code = session_with_kills(name, directory, rng.randint(2, 5), rng)
        total += killed
        session += 1
        where = f"seed {seed}, session {directory.name}"
        with Store(directory / "session.db") as store:
            assert store.query("PRAGMA integrity_check")[0]["integrity_check"] == "ok", where
            got = outcome(store)
            unknown = [row for row in store.query(
                "SELECT content FROM records WHERE message_kind = 'tool_result'")
                if "UNKNOWN_OUTCOME" in row["content"]]
        journal = World.entries(directory / "world.jsonl")
        assert not [e for e in journal if e["kind"] == "violation"], where
        ran = Counter(e["name"] for e in journal if e["kind"] == "tool")
        assert ran <= expected[name][1], where  # no tool ran more often than without kills
        if unknown:  # a kill between a tool's start and its saved result (Q44)
            continue
        assert code == 0, where
        assert got == expected[name][0], where
    assert total >= KILLS
