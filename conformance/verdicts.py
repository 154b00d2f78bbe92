"""Who a case's failure points at (docs/conformance.md "Statuses"): the verdict of a case's own
check on a trace that already holds the trace contract, and — when the check raised instead of
concluding — whether what it tripped on is the driver's (a field or an event the trace lacks,
a field it left null) or the suite's own fault.

A check that raised is asked again on the same trace with every lookup noted
(conformance/reads.py): a ``KeyError`` for a field the trace lacks, or a ``TypeError`` /
``AttributeError`` right after it read a null, is the driver's ``failed``, naming the field's
path in the trace and what the trace contract says of it; only an exception that no missing or
null field of the trace explains is the suite's ``error``.
"""

import functools

from ctxspec.catalogue import load_catalogue
from ctxspec.conformance.case import Case, CaseFailure, Trace
from ctxspec.conformance.reads import Reads
from ctxspec.conformance.trace_fields import contract_field

Verdict = tuple[str, str, str]
"""(status, detail, requirement) of a case's own check: ``passed``, ``failed`` or ``error``;
the ID of the requirement a failure cites ("" when it passed or erred)."""


USER_STOPS = (KeyboardInterrupt, SystemExit)
"""What ends a whole run when a driver's call raises it: the user's Ctrl-C and the SIGTERM the
harness turns into ``SystemExit`` (conformance/stdio.py ``Stop``). Any other ``BaseException``
a driver raises (``asyncio.CancelledError``, ``GeneratorExit``, a framework's own) is that
case's ``error``, and the run goes on."""


def passes_on(failure: BaseException) -> None:
    """Raise ``failure`` again when it is the user's stop (``USER_STOPS``); else return, so the
    caller reports it as the driver's fault of one case (or probe)."""
    if isinstance(failure, USER_STOPS):
        raise failure


def cited(case: Case, failure: BaseException | None = None) -> str:
    """The requirement a failure cites: the one its check names (``cites=`` of
    conformance/case.py), else the case's first known one; "" for a case with none."""
    named = getattr(failure, "requirement", None)
    if isinstance(named, str) and named in _statements():
        return named
    return next((r for r in case.requirements if r in _statements()), "")


def rule(case: Case, requirement: str | None = None) -> str:
    """The rule a case holds a runtime to: ``requirement``'s (else the case's first
    requirement's) ID and English statement (spec/requirements.toml), or its source."""
    chosen = requirement or cited(case)
    if chosen in _statements():
        return f"{chosen}: {_statements()[chosen]}"
    return f"{case.source}: {case.title}"


@functools.cache
def _statements() -> dict[str, str]:
    return {r.id: r.statement for r in load_catalogue()}


def own_check(case: Case, trace: Trace, baseline: Trace | None) -> Verdict:
    """The case's own predicate (and comparison with its baseline) on the trace."""
    try:
        _run(case, trace, baseline)
    except CaseFailure as failure:
        requirement = cited(case, failure)
        return "failed", f"{rule(case, requirement)}\n{failure}", requirement
    except (IndexError, StopIteration) as failure:
        # The trace holds every field the contract requires, so what is missing is an event
        # the case looks for: the runtime did not do something.
        return "failed", (f"{rule(case)}\nan event the case looks for is not in the trace "
                          f"({type(failure).__name__} in the case's reading)"), cited(case)
    except Exception as failure:
        blamed = driver_field(case, trace, baseline, failure)
        if blamed is not None:
            return "failed", f"{rule(case)}\n{blamed}", cited(case)
        return "error", (f"the case's own check raised {failure!r}: a fault of the suite, not "
                         f"of the driver — please report it"), ""
    return "passed", "", ""


def _run(case: Case, trace: Trace, baseline: Trace | None) -> None:
    case.check(trace)
    if case.compare is not None and baseline is not None:
        case.compare(trace, baseline)


def driver_field(case: Case, trace: Trace, baseline: Trace | None,
                 failure: Exception) -> str | None:
    """The words for a check's ``failure`` that a field of the driver's trace explains — one
    it lacks (a ``KeyError`` for it) or one it left null and the check then used (a
    ``TypeError`` or ``AttributeError``) — or None when none does (the suite's fault)."""
    if not isinstance(failure, KeyError | TypeError | AttributeError):
        return None
    reads = Reads()
    try:
        case.check(reads.wrap(trace))
        if case.compare is not None and baseline is not None:
            case.compare(reads.wrap(trace), reads.wrap(baseline))
    except Exception as again:
        if type(again) is not type(failure):
            return None
    else:  # asked again it did not raise: nothing of the trace explains the failure
        return None
    if isinstance(failure, KeyError):
        key = str(failure.args[0]) if failure.args else ""
        missing = [p for p in reads.missing if p == key or p.endswith("." + key)]
        if missing and named(missing[-1]):
            return (f"the trace lacks {missing[-1]}, which this case reads "
                    f"({contract_words(missing[-1])})")
        return None
    if reads.nulls and named(reads.nulls[-1]):
        return (f"the trace has null for {reads.nulls[-1]}, which this case reads as a value "
                f"({contract_words(reads.nulls[-1])})")
    return None


def named(path: str) -> bool:
    """Whether the trace contract names the field at a read path: a field it does not name is
    no promise a driver broke, so a check that trips on its absence is the suite's fault."""
    from ctxspec.conformance.trace_contract import field_status

    return field_status(*contract_field(path)) is not None


def contract_words(path: str) -> str:
    """What the trace contract says of the field at ``path``: required or optional."""
    from ctxspec.conformance.trace_contract import field_status

    kind, name = contract_field(path)
    return (f"{kind} field {name!r}, {field_status(kind, name)} in the trace contract v1 "
            "(spec/schemas/Trace.json)")


__all__ = ["USER_STOPS", "Verdict", "cited", "contract_words", "driver_field",
           "named", "own_check", "passes_on", "rule"]
