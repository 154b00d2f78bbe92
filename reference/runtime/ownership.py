"""The owner of a Session (§9, §10): one owner at a time — an owner id, an epoch and a lease —
and every commit of that owner fenced by its epoch inside the commit's own transaction.

§10 "旧所有者的晚到结果不能推进已终结 Run", "执行权、版本检查、剩余额度和 deadline 一起参与恢复", §9
"租约 epoch". The Session's row in the store carries ``owner_id``, ``owner_epoch``, ``commit_seq``
(how many fenced commits it has taken) and ``lease_until`` (milliseconds on the lease clock).
Every commit of an owner updates that row *where* the epoch and the commit sequence are the ones
this owner last left there, renewing its lease; a row that has moved on — another owner took the
Session over — matches nothing, and the whole commit is refused in the same transaction
(:class:`StaleOwner`): there is no check-then-write window, for a Run in flight, a finalising
commit or an idle Session alike.

A takeover (:func:`restore.restore`) reads everything it needs in one read transaction, is
refused while the previous owner's lease runs (:class:`OwnerAlive`), and claims the Session
with its first commit (TAKEOVER): the same fence on the epoch and sequence it read, so an owner
that committed after that read makes the takeover fail instead of the takeover going on with
stale facts.
"""

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from uuid import UUID

from ctxspec.reference.runtime.writes import Write, fence


@dataclass(frozen=True)
class Lease:
    """How long an owner's commit keeps the Session its own, on which clock. A harness that
    killed an in-process runtime itself (a simulated crash) knows the owner is dead and
    uses a lease of 0 seconds: anyone may take over at once, and the epoch fence alone keeps
    the dead owner's late commits out."""

    seconds: float = 30.0
    now: Callable[[], float] = field(default=time.time, compare=False)

    def until(self) -> int:
        """The lease's end, in milliseconds on its clock, for a commit made now."""
        return int(self.now() * 1000) + int(self.seconds * 1000)

    def expired(self, lease_until: int | None) -> bool:
        return lease_until is None or lease_until <= int(self.now() * 1000)


HARNESS = Lease(seconds=0.0)
"""The lease of runtimes a harness kills itself (a simulated crash, a SIGKILL it sent): the
owner is known dead the moment it dies, so a takeover need not wait a lease out."""


class OwnerAlive(RuntimeError):
    """A takeover was asked while the Session's owner still holds its lease."""

    def __init__(self, session_id: UUID, owner_id: str, lease_until: int) -> None:
        super().__init__(f"Session {session_id} is owned by {owner_id}, whose lease runs until "
                         f"{lease_until} ms on the lease clock: a takeover waits for it to "
                         "expire (or for the owner to release it)")
        self.session_id = session_id


@dataclass
class Ownership:
    """This runtime's hold on its Session: its owner id, the epoch it commits under, and the
    row's commit sequence as its last commit left it. ``claimed_from`` is the epoch a
    takeover claims the Session from, fenced by its first commit only."""

    owner_id: UUID
    epoch: int
    seq: int
    lease: Lease
    claimed_from: int | None = None
    opened: bool = True
    """False for a new Session until its first commit writes the row the fence reads."""

    def fence(self, session_id: UUID) -> list[Write]:
        """The commit's owner fence: the Session's row, where it is as this owner left it (or,
        for a takeover's first commit, as the takeover read it), moved one commit on with the
        lease renewed. CTX-10.23, CTX-10.24"""
        if not self.opened:
            return []
        epoch = self.epoch if self.claimed_from is None else self.claimed_from
        return [fence("sessions", {"session_id": session_id, "owner_epoch": epoch,
                                   "commit_seq": self.seq},
                      owner_id=self.owner_id, owner_epoch=self.epoch,
                      commit_seq=self.seq + 1, lease_until=self.lease.until())]

    def committed(self, fenced: bool) -> None:
        """A commit succeeded: the row moved one on if it was fenced, the claim is made."""
        if fenced and self.opened:
            self.seq += 1
            self.claimed_from = None

    def opening_row(self, session_id: UUID, agent_id: UUID) -> dict[str, object]:
        """The Session's row as its first commit writes it: this owner, its epoch, one commit
        (:meth:`opened_by_first_commit` once that commit succeeded)."""
        return {"session_id": session_id, "agent_id": agent_id, "owner_id": self.owner_id,
                "owner_epoch": self.epoch, "commit_seq": 1, "lease_until": self.lease.until()}


    def opened_by_first_commit(self) -> None:
        self.opened, self.seq = True, 1


__all__ = ["HARNESS", "Lease", "OwnerAlive", "Ownership"]
