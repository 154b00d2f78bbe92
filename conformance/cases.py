"""Every conformance case, in the suite's order: the §12 rows (``rows/``), the worked examples of
§3, §4, §7 and §8 (``worked_examples.py``), bad input (``bad_input.py``), the other normative
statements (``statements/``), the hook-point matrix (``matrix.py``), the crash matrix
(``crash_matrix.py``) and the hook crashes (``hook_crashes.py``). Each is a declarative scenario
plus a predicate over the neutral trace (docs/architecture.md "Layers"), written as one unit:
its ``Case`` beside its scenario and check.

A case asserts only what the design makes observable — requests as sent, tools executed, run
endings and their codes, deliveries, client events, restarts — read from the trace as plain JSON,
so a runtime in any language can pass it. Expected values are derived by hand from the design;
each case says how in its ``check``. IDs are permanent: ``ROW-<n>[-<variant>]`` for a §12 row,
``EX<section>-<name>`` for a worked example, ``S<section>-<name>`` for another normative
statement of a section, ``BAD-<name>`` for bad input, ``CRASH-…`` for a crash point.
"""

from collections.abc import Sequence

from ctxspec.conformance import bad_input, worked_examples
from ctxspec.conformance.bad_input import OUR_DOCUMENTS
from ctxspec.conformance.capabilities import refine
from ctxspec.conformance.case import Case, CaseFailure, Trace
from ctxspec.conformance.crash_matrix import CRASH_MATRIX, REFUSED_COMMITS
from ctxspec.conformance.hook_crashes import HOOK_CRASHES
from ctxspec.conformance.matrix import HOOK_MATRIX
from ctxspec.conformance.rows import ROWS
from ctxspec.conformance.statements import STATEMENTS

_CASES: tuple[Case, ...] = (
    *ROWS,
    *worked_examples.CASES,
    *bad_input.CASES,
    *STATEMENTS,
    *HOOK_MATRIX,
    *CRASH_MATRIX,
    *REFUSED_COMMITS,
    *HOOK_CRASHES,
)
CASES: tuple[Case, ...] = tuple(refine(case) for case in _CASES)
"""Every case, its needs at the finest grain its scenario uses (conformance/capabilities.py)."""


def by_id(ids: Sequence[str] | None = None) -> tuple[Case, ...]:
    """The cases with these IDs (all when None); an unknown ID is an error naming it."""
    if ids is None:
        return CASES
    known = {case.id: case for case in CASES}
    unknown = [i for i in ids if i not in known]
    if unknown:
        raise KeyError(f"no conformance case {', '.join(unknown)}")
    return tuple(known[i] for i in ids)


__all__ = ["CASES", "OUR_DOCUMENTS", "Case", "CaseFailure", "Trace", "by_id"]
