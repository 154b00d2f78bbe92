"""The named RuntimeCommits (§3 "一致提交", §10 "上下文与执行现场的边界"): the design's phases a
runtime maps onto its own transactions, and the points where a crash can be placed, just before
or just after one of them.

A public seam (docs/architecture.md "Layers"): the reference runtime commits under these names,
and the conformance package (the scenario's ``crash``, the crash matrix) and the models name
crash points with them. docs/recovery.md says what each persists and how a takeover continues
from it.
"""

COMMIT_NAMES = ("SESSION_OPENED", "APP-INPUT", "T_FREEZE", "ATTEMPT_FAILED", "T_FIRST_OUTPUT",
                "RAW_RESULT_SAVED", "HOOK_STARTED", "HOOK_DECISION", "EFFECTIVE_RESULT",
                "TOOL_STARTED", "TOOL_SETTLED", "BATCH_FEEDBACK", "EPISODE_STARTED",
                "CHUNK_RAW_SAVED", "CHUNK_COMMITTED", "SNAPSHOT_COMMITTED", "EXECUTION_STARTED",
                "EXECUTION_ENDED", "APP-FINALIZE", "TAKEOVER", "CONTEXT_WRITTEN")
"""The named RuntimeCommits a crash can be placed before or after (docs/recovery.md says what
each persists and how recovery continues from it)."""
