"""A takeover hunt in the manner of Jepsen (issue #34): worker processes share one store file of
many Sessions and take them from each other at random — each owner holds a lease of a few
milliseconds and its tool sleeps past it now and then, so the Session is taken over while the
old owner still runs — and the parent kills workers with SIGKILL and starts new ones. Then a
checker reads the store and every process's log:

- no Run ended by two processes (each process logs the endings it committed);
- no tool call run twice (each question's ``write`` runs at most once: a call that started
  before a takeover is reported unknown, never run again);
- no budget regained (the quota of one leaves ``read`` refused in every Run);
- no commit accepted from a stale epoch and none lost (each Session's accepted commits, as the
  processes logged them, form one chain of commit sequence numbers, one apart, whose epochs
  never go down, ending at the sequence number the store holds).

``python -m tests.takeover_hunt --sessions 50 --workers 4 --takeovers 1000`` prints the figures
(docs/robustness.md); ``tests/test_takeover_hunt.py`` runs a small hunt in the slow tier.
"""

import argparse
import itertools
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from uuid import UUID

from ctxspec.reference.ports import LogicalClock, ModelCall, ModelOutcome, ToolOutcome
from ctxspec.reference.runtime.ownership import Lease, OwnerAlive
from ctxspec.reference.runtime.restore import restore
from ctxspec.reference.runtime.runtime import ReferenceRuntime
from ctxspec.reference.runtime.store import CommitCoordinator, CommitFailed, Store, Write
from ctxspec.reference.runtime.trace import RunEnded
from tests.ownership_world import AGENT, World, ports

LEASE = 0.005
"""Seconds an owner's commit keeps its Session: short, so takeovers happen mid-Run."""
PAUSE = 0.2
"""Seconds a tool takes: forty leases, long enough for another process to read the Session and
take it over while its owner waits for the tool."""


class SlowWorld(World):
    """The tool, and the model now and then, take longer than the lease: the owner is still
    running when another process takes its Session over."""

    pause = PAUSE

    def call(self, request: ModelCall) -> ModelOutcome:
        time.sleep(random.choice((0.0, self.pause / 2)))
        return super().call(request)

    def run(self, name: str, arguments: Any, ordinal: int) -> ToolOutcome:
        time.sleep(self.pause)
        return super().run(name, arguments, ordinal)


class LoggingCoordinator(CommitCoordinator):
    """Logs every accepted commit's fence: what the row was and what it became."""

    log: Any = None

    def commit(self, name: str, writes: Sequence[Write]) -> None:
        super().commit(name, writes)
        for write in writes:
            if write.kind == "fence" and write.expect is not None:
                self.log.write(json.dumps({
                    "kind": "commit", "name": name, "session": str(write.expect["session_id"]),
                    "from": [write.expect["owner_epoch"], write.expect["commit_seq"]],
                    "to": [write.row["owner_epoch"], write.row["commit_seq"]]}) + "\n")
                self.log.flush()


def _coordinator(store: Store, log: Any) -> LoggingCoordinator:
    coordinator = LoggingCoordinator(store)
    coordinator.log = log
    return coordinator


def setup(folder: Path, sessions: int) -> list[str]:
    """The store with ``sessions`` idle Sessions, each with its first question asked."""
    store = Store(folder / "store.db")
    world = SlowWorld(folder / "tools.log")
    ids = []
    with (folder / "setup.log").open("a", encoding="utf-8") as log:
        for n in range(sessions):
            runtime = ReferenceRuntime(AGENT, **ports(world), clock=LogicalClock(), store=store,
                                       coordinator=_coordinator(store, log),
                                       lease=Lease(LEASE))
            runtime.ask(f"q-{n}-1")
            ids.append(str(runtime.session_id))
    store.close()
    return ids


def _drive(runtime: ReferenceRuntime, log: Any) -> None:
    """Advance the Session's Run, or ask its next question when it has none; log the endings
    this owner committed."""
    if runtime.session.active_run is None:
        runtime.ask(f"q-{runtime.session_id}-{len(runtime.runs) + 1}")
    ended = len(runtime.trace.of(RunEnded))
    runtime.advance()
    for event in runtime.trace.of(RunEnded)[ended:]:
        log.write(json.dumps({"kind": "ended", "run": str(event.run_id),
                              "status": event.status}) + "\n")
    log.flush()


def _target(store: Store, sessions: Sequence[str]) -> str:
    """The nemesis: mostly a Session whose owner committed last — most likely still running,
    its lease just run out —, else any Session."""
    if random.random() < 0.7:
        recent = store.query("SELECT session_id FROM sessions ORDER BY lease_until DESC "
                             "LIMIT 8")
        if recent:
            return str(random.choice(recent)["session_id"])
    return random.choice(sessions)


def worker(folder: Path, sessions: Sequence[str], seconds: float, pause: float = PAUSE) -> None:
    """Take Sessions over at random and drive them until ``seconds`` have passed."""
    log = (folder / f"worker-{os.getpid()}.log").open("a", encoding="utf-8")
    store = Store(folder / "store.db")
    world = SlowWorld(folder / "tools.log")
    world.pause = pause
    end = time.time() + seconds
    while time.time() < end:
        session = _target(store, sessions)
        try:
            runtime = restore(store, AGENT, **ports(world), clock=LogicalClock(),
                              session_id=UUID(session), lease=Lease(LEASE),
                              coordinator=_coordinator(store, log))
        except (OwnerAlive, CommitFailed):
            continue
        log.write(json.dumps({"kind": "takeover", "session": session,
                              "t": round(time.time(), 2)}) + "\n")
        try:
            _drive(runtime, log)
        except CommitFailed as failed:  # taken over meanwhile: this owner stops here
            if "StaleOwner" not in str(failed):
                raise
            log.write(json.dumps({"kind": "fenced", "session": session,
                                  "t": round(time.time(), 2)}) + "\n")
        log.flush()


def hunt(folder: Path, sessions: int, workers: int, takeovers: int, kills: bool = True,
         limit: float = 600.0, pause: float = PAUSE) -> dict[str, Any]:
    """Run workers (killing and replacing one now and then) until the logs count
    ``takeovers`` takeovers of a Session whose owner was still running — each old owner's
    next commit was fenced — and, with ``kills``, at least one worker was killed; then check."""
    folder.mkdir(parents=True, exist_ok=True)
    ids = setup(folder, sessions)
    (folder / "sessions.json").write_text(json.dumps(ids), "utf-8")
    started = time.time()
    command = [sys.executable, "-m", "tests.takeover_hunt", "--worker", str(folder),
               "--pause", str(pause)]
    running = [subprocess.Popen(command) for _ in range(workers)]
    killed = 0
    fenced = Tally(folder, "fenced")
    wal = WalTrimmer(folder / "store.db")
    # With kills asked for, the hunt also goes on until one happened: fast takeovers alone
    # could reach their count before the first kill, and a hunt without one proves less.
    while (fenced.count() < takeovers or (kills and killed == 0)) \
            and time.time() - started < limit:
        time.sleep(0.2)
        wal.trim()
        if kills and random.random() < 0.3:
            victim = running.pop(random.randrange(len(running)))
            victim.send_signal(signal.SIGKILL)
            victim.wait()
            killed += 1
            running.append(subprocess.Popen(command))
    for process in running:
        process.terminate()
    for process in running:
        process.wait()
    figures = check(folder)
    figures.update(seconds=round(time.time() - started, 1), killed=killed, sessions=sessions,
                   workers=workers, pause=pause, **wal.figures(),
                   **{"fenced per minute": per_minute(folder, started)})
    wal.close()
    return figures


class WalTrimmer:
    """The parent's checkpoint of the store's write-ahead log between rounds. Workers read all
    the time, so SQLite's automatic (passive) checkpoint never finds a moment when no reader
    holds an old snapshot, and the log grew past 400 MB in the first hunts, slowing every
    query; ``wal_checkpoint(TRUNCATE)`` waits (the busy timeout) until the readers are on the
    newest snapshot, copies the log into the database and empties it."""

    def __init__(self, path: Path) -> None:
        self.conn = sqlite3.connect(path, timeout=2.0)
        self.wal = path.with_name(path.name + "-wal")
        self.largest = self.trims = self.busy = 0

    def trim(self) -> None:
        self.largest = max(self.largest, self.wal.stat().st_size if self.wal.exists() else 0)
        busy, _, _ = self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        self.trims += 1
        self.busy += busy  # 1 when a reader or writer kept it from finishing this time

    def figures(self) -> dict[str, int]:
        return {"largest write-ahead log (bytes)": self.largest, "wal checkpoints": self.trims,
                "wal checkpoints not finished (busy)": self.busy}

    def close(self) -> None:
        self.conn.close()


class Tally:
    """Counts the log lines of one kind as the workers append them, reading each log only
    from where the last count stopped (re-reading every log each round cost the parent more
    and more of a busy machine)."""

    def __init__(self, folder: Path, kind: str) -> None:
        self.folder, self.needle = folder, f'"kind": "{kind}"'
        self.offsets: dict[Path, int] = {}
        self.total = 0

    def count(self) -> int:
        for path in self.folder.glob("worker-*.log"):
            with path.open("rb") as log:
                log.seek(self.offsets.get(path, 0))
                data = log.read()
            whole = data[:data.rfind(b"\n") + 1]  # a line still being written waits
            self.offsets[path] = self.offsets.get(path, 0) + len(whole)
            self.total += whole.decode("utf-8").count(self.needle)
        return self.total


def _lines(folder: Path) -> list[dict[str, Any]]:
    lines = []
    for path in sorted(folder.glob("*.log")):
        for line in path.read_text("utf-8").splitlines():
            if line.endswith("}"):  # a killed worker's last line may be cut
                lines.append(json.loads(line))
    return lines


def per_minute(folder: Path, started: float) -> list[int]:
    """The takeovers of a running owner in each minute of the hunt: a hunt that stalls (the
    write-ahead log of the first hunts) shows as a run of zeros."""
    times = [line["t"] for line in _lines(folder) if line.get("kind") == "fenced" and "t" in line]
    counts = Counter(int((t - started) // 60) for t in times)
    return [counts.get(minute, 0) for minute in range(max(counts, default=-1) + 1)]


def check(folder: Path) -> dict[str, Any]:
    """The checker: every property of the module's docstring, as counts of violations."""
    lines = _lines(folder)
    endings = Counter(line["run"] for line in lines if line.get("kind") == "ended")
    tools = [line for line in lines if "tool" in line]
    writes = Counter(line["arguments"].get("path") for line in tools if line["tool"] == "write")
    chains: dict[str, list[tuple[list[int], list[int]]]] = defaultdict(list)
    for line in lines:
        if line.get("kind") == "commit":
            chains[line["session"]].append((line["from"], line["to"]))
    store = Store(folder / "store.db")
    stale = lost = unlogged = 0
    for session, commits in chains.items():
        row = store.session_owner(UUID(session))
        starts = Counter(c[0][1] for c in commits)
        # Two accepted commits from the same row: one of them was a stale owner's.
        stale += sum(n - 1 for n in starts.values() if n > 1)
        ordered = sorted(commits, key=lambda c: c[0][1])
        stale += sum(1 for c in ordered if c[1][1] != c[0][1] + 1 or c[1][0] < c[0][0])
        stale += sum(1 for a, b in itertools.pairwise(ordered)
                     if b[0][1] == a[1][1] and b[0][0] != a[1][0])
        # A killed worker may die between its commit and its log line: a gap in the chain.
        unlogged += (ordered[-1][1][1] - 1) - len(starts) if ordered else 0
        # The store holds no commit past the last one logged, nor one short of it.
        lost += 0 if row is not None and ordered and row["commit_seq"] >= ordered[-1][1][1] \
            else 1
    return {"takeovers": sum(1 for line in lines if line.get("kind") == "takeover"),
            "takeovers of a running owner (its next commit fenced)":
                sum(1 for line in lines if line.get("kind") == "fenced"),
            "runs ended": len(endings),
            "runs ended twice": sum(1 for n in endings.values() if n > 1),
            "tool calls run twice": sum(1 for n in writes.values() if n > 1),
            "quota regained (read ran)": sum(1 for line in tools if line["tool"] == "read"),
            "commits accepted from a stale owner": stale,
            "sessions whose store lost a logged commit": lost,
            "commits unlogged (a worker killed after committing)": unlogged,
            "commits accepted": sum(len(c) for c in chains.values())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=50)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--takeovers", type=int, default=1000)
    parser.add_argument("--dir", type=Path, default=Path("takeover-hunt"))
    parser.add_argument("--limit", type=float, default=600.0, help="seconds at most")
    parser.add_argument("--pause", type=float, default=PAUSE, help="seconds a tool takes")
    parser.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker is not None:
        ids = json.loads((args.worker / "sessions.json").read_text("utf-8"))
        worker(args.worker, ids, 3600.0, args.pause)
        return
    figures = hunt(args.dir, args.sessions, args.workers, args.takeovers, limit=args.limit,
                   pause=args.pause)
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
