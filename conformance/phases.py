"""Crash points named by the design (§3, §10, §12): the phases after which something is
durably committed, for a runtime to map onto its own commits. A scenario's ``crash`` names a
phase; a driver declares the phases it can die at (``crash:<phase>``, or ``crash_points`` for
all of them) and maps each onto one of its commits. The reference maps them onto its own
commit names (``REFERENCE_COMMITS``), which stay internal (docs/recovery.md).
"""

from collections.abc import Mapping

PHASES: Mapping[str, str] = {
    "session_opened": "§10: the Session exists in the store",
    "input_accepted": "§5: a user input is received (its UserInput and first delivery)",
    "request_frozen": "§3, §7: a request's view, revisions, snapshot and inputs are frozen",
    "attempt_failed": "§11: an Attempt's failure is recorded before the next Attempt",
    "first_output": "§5: the first output of an answer arrived (the first-output receipt)",
    "raw_answer_saved": "§10: the model's raw answer is saved",
    "hook_started": "§3: a hook chain is marked as asked",
    "hook_decided": "§3: a hook chain's decision and patch are committed",
    "effective_result_committed": "§3: the answer's effective (post-processed) revision",
    "tool_started": "§10: a tool call is marked started, before it runs",
    "tool_settled": "§10: a tool call's result is saved",
    "batch_fed_back": "§2: a batch's results are appended in action order",
    "episode_started": "§9: a compaction episode and its frozen plan",
    "chunk_answer_saved": "§8: a chunk's raw summary is saved",
    "chunk_committed": "§8, §9: a chunk's summary and the fold's cursor",
    "snapshot_published": "§9: the snapshot becomes the head (the CAS switch)",
    "execution_started": "§10: an Executor execution starts",
    "execution_ended": "§10: an Executor execution's result is handed back",
    "run_finalised": "§11: the Run's terminal state",
}
"""Each phase and what has just been committed when it is passed."""

REFERENCE_COMMITS: Mapping[str, str] = {
    "session_opened": "SESSION_OPENED", "input_accepted": "APP-INPUT",
    "request_frozen": "T_FREEZE", "attempt_failed": "ATTEMPT_FAILED",
    "first_output": "T_FIRST_OUTPUT", "raw_answer_saved": "RAW_RESULT_SAVED",
    "hook_started": "HOOK_STARTED", "hook_decided": "HOOK_DECISION",
    "effective_result_committed": "EFFECTIVE_RESULT", "tool_started": "TOOL_STARTED",
    "tool_settled": "TOOL_SETTLED", "batch_fed_back": "BATCH_FEEDBACK",
    "episode_started": "EPISODE_STARTED", "chunk_answer_saved": "CHUNK_RAW_SAVED",
    "chunk_committed": "CHUNK_COMMITTED", "snapshot_published": "SNAPSHOT_COMMITTED",
    "execution_started": "EXECUTION_STARTED", "execution_ended": "EXECUTION_ENDED",
    "run_finalised": "APP-FINALIZE",
}
"""The reference's commit for each phase (its TAKEOVER commit is no phase of the design: a
takeover's own bookkeeping)."""

CRASH_CAPABILITIES = frozenset(f"crash:{phase}" for phase in PHASES)


def crash_need(phase: str) -> str:
    """The capability a crash at ``phase`` needs of a driver."""
    return f"crash:{phase}"


__all__ = ["CRASH_CAPABILITIES", "PHASES", "REFERENCE_COMMITS", "crash_need"]
