"""The design's crash phases (§10, conformance/phases.py) mapped onto ADK's own writes (the
Google ADK driver, driver.py). A ``DatabaseSessionService`` stores a Session as its events,
each appended as it is yielded (google/adk/sessions/database_session_service.py:
``append_event``; the Runner appends every non-partial event, google/adk/runners.py). The
driver's session service is a :class:`WatchedSessions`, which reads from each event which phase
it commits and dies just before or just after storing it:

- ``input_accepted`` (§5): the user's event, the new message of an invocation (one occurrence
  per input it carries: the question and the supplements sent with it);
- ``effective_result_committed`` (§3): a model answer's event, saved after every after-model
  callback (the answer as they left it; ADK saves no raw answer apart);
- ``batch_fed_back`` (§2): the event of a batch's function responses, all of them at once;
- ``run_finalised`` (§11): the root agent's ``end_of_agent`` event, which a resumable App
  appends when the invocation's agent is done (after its final answer's event).

After a death the driver builds a new session service and Runner on the same SQLite file, as
a restarted process would, and — with ``ResumabilityConfig(is_resumable=True)`` — resumes the
invocation by its id (``Runner.run_async(invocation_id=...)``); what ADK runs again then is what
the suite judges; a restarted client whose store holds the Run's final answer reads it there.
Not mapped, because ADK writes nothing there: a request frozen, a first output, a hook asked
or decided, a tool started or settled alone, and the compaction phases (a summary is one
event, appended after the summarizer returned).
"""

from dataclasses import dataclass
from typing import Any

from google.adk.events.event import Event
from google.adk.sessions.database_session_service import DatabaseSessionService
from google.adk.sessions.session import Session

PHASES = ("input_accepted", "effective_result_committed", "batch_fed_back", "run_finalised")
CAPABILITIES = frozenset(f"crash:{phase}" for phase in PHASES)


class Died(BaseException):
    """The process dies (a BaseException, so ADK's error handling never takes it for a failure
    of a model call or a tool)."""


@dataclass
class Crash:
    """The scenario's crash, counted over the events that commit its phase."""

    plan: Any
    passed: int = 0
    done: bool = False
    dead: bool = False

    def alive(self) -> None:
        if self.dead:
            raise Died

    def at(self, phase: str | None, when: str, count: int = 1) -> None:
        """Die here if this write holds the crash's occurrence (``count`` occurrences of
        ``phase``: a user event holds one per input it carries)."""
        plan = self.plan
        if plan is None or self.done or phase != plan.phase or plan.when != when:
            return
        self.passed += count
        if self.passed < plan.occurrence:
            return
        self.done = self.dead = True
        raise Died

    def restarted(self) -> dict[str, Any]:
        return {"phase": self.plan.phase, "occurrence": self.plan.occurrence,
                "when": self.plan.when}


def phase_of(event: Event) -> str | None:
    """The phase an event's write commits, if any."""
    if event.actions and event.actions.compaction:
        return None
    if event.actions and event.actions.end_of_agent and event.author == "root":
        return "run_finalised"
    if event.get_function_responses():
        return "batch_fed_back"
    if event.content is None or not event.content.parts:
        return None
    return "input_accepted" if event.author == "user" else "effective_result_committed"


class WatchedSessions(DatabaseSessionService):
    """ADK's SQL session service, which dies at the scenario's crash."""

    def __init__(self, db_url: str, crash: Crash) -> None:
        super().__init__(db_url=db_url)
        self.crash = crash

    async def append_event(self, session: Session, event: Event) -> Event:
        self.crash.alive()
        phase = None if event.partial else phase_of(event)
        count = sum(bool(part.text) for part in event.content.parts or []) \
            if phase == "input_accepted" and event.content is not None else 1
        self.crash.at(phase, "before", count)
        stored = await super().append_event(session, event)
        self.crash.at(phase, "after", count)
        return stored
