"""The owner of a Session (§10, reference/runtime/ownership.py): every commit is fenced by the
owner's epoch in its own transaction — a Run in flight, a finalising commit, an idle Session —;
a takeover waits for the lease, reads its facts in one read transaction and fails when the
owner committed after that read; several processes can open one new store file; the tool quota
spent before a takeover is not regained."""

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from ctxspec.reference.ports import LogicalClock
from ctxspec.reference.runtime.ownership import HARNESS, Lease, OwnerAlive
from ctxspec.reference.runtime.restore import restore
from ctxspec.reference.runtime.runtime import (
    AccessDenied,
    AgentConfig,
    Crash,
    CrashPlan,
    ReferenceRuntime,
)
from ctxspec.reference.runtime.store import CommitCoordinator, CommitFailed, Store
from ctxspec.reference.runtime.trace import RunEnded
from tests.ownership_world import AGENT, World, ports


class Clock:
    """A lease clock the test moves by hand."""

    def __init__(self) -> None:
        self.seconds = 1000.0

    def __call__(self) -> float:
        return self.seconds


def open_session(folder: Path, world: World, lease: Lease, **options: Any) -> ReferenceRuntime:
    """A new Session of the test Agent on the store file in ``folder``, owned under ``lease``."""
    return ReferenceRuntime(AGENT, **ports(world), clock=LogicalClock(),
                            store=Store(folder / "s.db"), lease=lease, **options)


def take_over(folder: Path, world: World, lease: Lease, agent: AgentConfig = AGENT
              ) -> ReferenceRuntime:
    """A takeover of the store file's Session through a connection of its own (another
    process's, as far as SQLite can tell)."""
    return restore(Store(folder / "s.db"), agent, **ports(world), clock=LogicalClock(),
                   lease=lease)


def owner_row(store: Store, runtime: ReferenceRuntime) -> tuple[int, int]:
    row = store.session_owner(runtime.session_id)
    assert row is not None
    return int(row["owner_epoch"]), int(row["commit_seq"])


def test_a_takeover_waits_until_the_owners_lease_has_expired(tmp_path: Path) -> None:
    clock = Clock()
    lease = Lease(30.0, clock)
    world = World(tmp_path / "tools.log")
    first = open_session(tmp_path, world, lease)
    first.ask("write it")
    clock.seconds += 29.9
    with pytest.raises(OwnerAlive, match="whose lease runs until"):
        take_over(tmp_path, world, lease)
    clock.seconds += 0.2  # 30.1 s after the owner's last commit
    second = take_over(tmp_path, world, lease)
    assert owner_row(second.store, second)[0] == 2


def test_an_idle_sessions_old_owner_can_start_no_run_after_a_takeover(tmp_path: Path) -> None:
    world = World(tmp_path / "tools.log")
    old = open_session(tmp_path, world, HARNESS)
    old.ask("write it")
    old.advance()
    new = take_over(tmp_path, world, HARNESS)
    before = new.store.count("runs"), owner_row(new.store, new)
    with pytest.raises(CommitFailed, match="StaleOwner"):
        old.ask("and again")  # idle, the old owner still believes the Session is its own
    assert (new.store.count("runs"), owner_row(new.store, new)) == before
    new.ask("and again")
    new.advance()
    assert [e.status for e in new.trace.of(RunEnded)] == ["succeeded"]


def test_the_old_owners_finalising_commit_is_refused(tmp_path: Path) -> None:
    world = World(tmp_path / "tools.log")
    old = open_session(tmp_path, world, HARNESS, crash=CrashPlan("APP-FINALIZE", 1, "before"))
    old.ask("write it")
    with pytest.raises(Crash):
        old.advance()
    new = take_over(tmp_path, world, HARNESS)
    epoch = owner_row(new.store, new)[0]
    old.session.crash = None
    with pytest.raises(CommitFailed, match="StaleOwner"):
        old.session.commit("APP-FINALIZE", [])  # its late ending of the taken-over Run
    assert owner_row(new.store, new)[0] == epoch == 2
    new.advance()
    assert [e.status for e in new.trace.of(RunEnded)] == ["succeeded"]
    assert [r.status.value for r in new.store.runs_of_session(new.session_id)] == ["succeeded"]


def test_a_takeover_fails_when_the_owner_committed_after_its_read(tmp_path: Path) -> None:
    world = World(tmp_path / "tools.log")
    old = open_session(tmp_path, world, HARNESS)
    old.ask("write it")

    def owner_commits_meanwhile(name: str, index: int) -> None:
        if name == "TAKEOVER" and index == 0:
            old.supplement("also this")  # commits between the takeover's read and its claim

    coordinator = CommitCoordinator(Store(tmp_path / "s.db"), owner_commits_meanwhile)
    with pytest.raises(CommitFailed, match="StaleOwner"):
        restore(coordinator.store, AGENT, **ports(world), clock=LogicalClock(),
                coordinator=coordinator, lease=HARNESS)
    assert owner_row(old.store, old)[0] == 1  # still the old owner's: nothing was claimed
    again = take_over(tmp_path, world, HARNESS)  # a takeover that reads again sees the supplement
    assert [u.input_seq for u in again.session.book.inputs] == [1, 2]


def test_the_quota_spent_before_a_takeover_is_not_regained(tmp_path: Path) -> None:
    # A quota of one and a batch [write, read]: without a crash read is refused. The process
    # dies right after write's start was committed (TOOL_STARTED), before write ran: the new
    # owner reports write's outcome unknown and still refuses read — the quota write took is
    # not given back by the takeover (§10, §11).
    world = World(tmp_path / "tools.log")
    old = open_session(tmp_path, world, HARNESS, crash=CrashPlan("TOOL_STARTED", 1, "after"))
    old.ask("write it")
    with pytest.raises(Crash):
        old.advance()
    new = take_over(tmp_path, world, HARNESS)
    new.advance()
    log = tmp_path / "tools.log"
    executed = [json.loads(line)["tool"] for line in
                (log.read_text("utf-8").splitlines() if log.exists() else [])]
    assert executed == []  # write died started (unknown, never run again); read was refused
    assert [e.status for e in new.trace.of(RunEnded)] == ["succeeded"]


OPEN = """
import sys, time
from ctxspec.reference.runtime.store import Store
start = float(sys.argv[2])
while time.time() < start:
    time.sleep(0.001)
Store(sys.argv[1]).close()
"""


def test_four_processes_open_one_new_store_file_at_once(tmp_path: Path) -> None:
    path = tmp_path / "fresh.db"
    start = time.time() + 1.0  # all four past their imports, then at the same moment
    opened = [subprocess.Popen([sys.executable, "-c", OPEN, str(path), str(start)],
                               stderr=subprocess.PIPE, text=True) for _ in range(4)]
    failures = [(p.wait(60), p.stderr.read() if p.stderr else "") for p in opened]
    assert [code for code, _ in failures] == [0, 0, 0, 0], failures
    assert Store(path).count("sessions") == 0


def test_an_agent_built_without_an_id_is_told_apart_by_its_configuration(tmp_path: Path
                                                                         ) -> None:
    # Two Agents configured differently never share a default id: a takeover by the other one
    # is refused; the same configuration built again (another process) is the same Agent.
    world = World(tmp_path / "tools.log")
    first = open_session(tmp_path, world, HARNESS)
    first.ask("write it")
    other = AgentConfig("You only read.", AGENT.budget, AGENT.tools, tool_quota=1)
    assert other.agent_id != AGENT.agent_id
    with pytest.raises(AccessDenied, match="belongs to another Agent"):
        take_over(tmp_path, world, HARNESS, agent=other)
    same = AgentConfig(AGENT.system_prompt, AGENT.budget, AGENT.tools, tool_quota=1)
    assert same.agent_id == AGENT.agent_id
    take_over(tmp_path, world, HARNESS, agent=same)
