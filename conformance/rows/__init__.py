"""The §12 acceptance table's rows as conformance cases (IDs ``ROW-<n>[-<variant>]``), one module
per topic, each case written beside its scenario and check. ``ROWS`` lists them in the table's
order, which the suite keeps."""

from ctxspec.conformance.case import Case
from ctxspec.conformance.rows import compaction, crashes, history, hooks, roles, runs, tools

ROWS: tuple[Case, ...] = (
    runs.ROW_01, runs.ROW_02, roles.ROW_03, compaction.ROW_04_BELOW, compaction.ROW_04_AT,
    compaction.ROW_04_FLOOR, compaction.ROW_05,
    compaction.ROW_05_SNAPSHOT, compaction.ROW_06, tools.ROW_07,
    tools.ROW_07_PLACEHOLDERS, tools.ROW_08,
    crashes.ROW_09, crashes.ROW_10, compaction.ROW_11, runs.ROW_12, runs.ROW_13, runs.ROW_14,
    hooks.ROW_15, hooks.ROW_16_17, hooks.ROW_18, roles.ROW_19, compaction.ROW_20,
    crashes.ROW_21, crashes.ROW_22, crashes.ROW_23, history.ROW_24, history.ROW_25,
)

__all__ = ["ROWS"]
