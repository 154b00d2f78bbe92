"""The design's crash phases (§10, conformance/phases.py) mapped onto the Agents SDK's own writes
(the driver, ctxspec/adapters/openai_agents/driver.py).

What the SDK itself stores of a Run is its session's items (agents/run_internal/run_loop.py:
``run_single_turn_streamed``, ``_persist_stream_input_if_needed``; ``_save_stream_items``):

- ``input_accepted`` (§5): the write of the Run's inputs (the question, the supplements staged
  with ``RunState.add_input``), made just before the first model call that carries them — one
  occurrence per input;
- ``batch_fed_back`` (§2): the write of a turn whose answer called tools, made after the
  batch ran: the answer and every result of its batch in one ``add_items``.

The Session's store is a :class:`WatchedSession`, the SDK's ``SQLiteSession`` that dies just
before or just after such a write as the scenario's crash says, or refuses it (``"when":
"fails"``, capability ``commit_failures``): its ``add_items`` raises, as a user's ``Session``
whose store fails does, the SDK ends the Run on it and the driver traces ``persistence_failed``
before the restart (Q64, Q542). Once dead, no model call, tool or write is made.

A restarted process has what the SDK offers: the session. It opens it anew
(a fresh compaction session around it), sends again any input of the Run the session does not
hold, and starts ``Runner.run_streamed`` on it — with no input when the session holds them all,
a new Run of the SDK (new max_turns, new hook state) that continues from the stored items.

Not mapped, because the SDK writes nothing there or nothing of its own: a request frozen, a
first output, an answer before its batch ran (it is stored with the batch's results), a tool's
result alone, a hook started or decided, an Executor's start or end (its nested Run has no
session), a compaction's steps (the compaction session replaces the items in one write), a
Run's end (a failed or stopped Run writes nothing), and a RunState (written only by the
caller, ``RunState.to_json``) (Q493).
"""

from collections import Counter
from dataclasses import dataclass
from typing import Any

from agents import SQLiteSession
from agents.items import TResponseInputItem
from agents.memory import SessionSettings

from ctxspec.adapters.run_facts import root_cause

PHASES = ("input_accepted", "batch_fed_back")
CAPABILITIES = frozenset({*(f"crash:{phase}" for phase in PHASES), "commit_failures"})


class Died(Exception):
    """The process dies at a write (an Exception, so the SDK's run loop ends on it and the
    stream reports it; nothing runs after it, every act checks :meth:`Crash.alive`)."""


class Refused(Died):
    """The session refused a write (``"when": "fails"``, capability ``commit_failures``): what a
    user's ``Session`` whose ``add_items`` raises does, e.g. a ``SQLiteSession`` subclass on a
    full disk. The SDK gets the exception from ``add_items`` and ends the Run on it; the
    process then stops and restarts as after a death (Q64)."""


@dataclass
class Crash:
    """The scenario's crash, counted over the writes that commit its phase."""

    plan: Any
    passed: int = 0
    done: bool = False
    dead: bool = False

    def alive(self) -> None:
        """Called at each model call, tool run and write: a dead process does none."""
        if self.dead:
            raise Died("the process died")

    def at_write(self, phases: Counter[str], when: str) -> None:
        """Die if the scenario's crash falls ``when`` this write; refuse the write, before it
        is made, if the crash is a refusal of it."""
        plan = self.plan
        due = plan is not None and (plan.when == when or (plan.when, when) == ("fails", "before"))
        if plan is None or self.done or not due or not phases[str(plan.phase)]:
            return
        self.passed += phases[str(plan.phase)]
        if self.passed >= plan.occurrence:
            self.done = self.dead = True
            if plan.when == "fails":
                raise Refused(f"the session refused a write of {plan.phase}")
            raise Died(f"the process died {when} a write of {plan.phase}")

    def restarted(self) -> dict[str, Any]:
        return {"kind": "restarted", "phase": self.plan.phase,
                "occurrence": self.plan.occurrence, "when": self.plan.when}


def phases_of(items: list[TResponseInputItem]) -> Counter[str]:
    """The phases one write of the SDK commits: its inputs when it holds only user messages,
    a fed-back batch when it holds a call's output."""
    kinds = [(item.get("type", "message"), item.get("role")) for item in items
             if isinstance(item, dict)]
    if kinds and all(kind == ("message", "user") for kind in kinds):
        return Counter({"input_accepted": len(kinds)})
    if any(kind == "function_call_output" for kind, _ in kinds):
        return Counter({"batch_fed_back": 1})
    return Counter()


class WatchedSession(SQLiteSession):
    """The SDK's SQLite session, dying at the scenario's crash."""

    def __init__(self, crash: Crash, name: str, database: str,
                 settings: SessionSettings | None) -> None:
        super().__init__(name, database, session_settings=settings)
        self.crash = crash

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        self.crash.alive()
        phases = phases_of(items)
        self.crash.at_write(phases, "before")
        await super().add_items(items)
        self.crash.at_write(phases, "after")


def died(failure: BaseException) -> Died | None:
    """The process's death (or the session's refusal) a Run's failure is, if it is one (the
    SDK may wrap it)."""
    found = root_cause(failure, (Died,))
    return found if isinstance(found, Died) else None


__all__ = ["CAPABILITIES", "PHASES", "Crash", "Died", "Refused", "WatchedSession", "died",
           "phases_of"]
