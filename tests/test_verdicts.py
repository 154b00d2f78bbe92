"""Failures that point at the right party (issue #33, docs/conformance.md "Statuses"): a field
the driver's trace lacks or leaves null is the driver's ``failed``, naming the field; a
``BaseException`` a driver raises is that case's ``error`` and the run goes on; no check
crashes on an empty trace; every ``crash:<phase>`` declared is probed or said unprobeable, and
``commit_failures`` is probed at a phase the driver declares."""

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from ctxspec.conformance.case import CaseFailure
from ctxspec.conformance.cases import CASES
from ctxspec.conformance.driver import ReferenceDriver
from ctxspec.conformance.harness import (
    confirm_capabilities,
    judged_trace,
    run_case,
    run_suite,
)
from ctxspec.conformance.phases import PHASES, crash_need
from ctxspec.conformance.probes import commit_failure_probe, crash_probe

BY_ID = {case.id: case for case in CASES}


def without(field: str) -> type[ReferenceDriver]:
    """The reference driver whose trace leaves ``field`` out of every event, view message and
    rendered message."""
    class Without(ReferenceDriver):
        def trace(self) -> list[dict[str, Any]]:
            events = super().trace()
            for event in events:
                event.pop(field, None)
                rendered = event.get("rendered")
                inner = rendered.get("messages", []) if isinstance(rendered, dict) else []
                for message in [*event.get("view", {}).get("messages", []), *inner]:
                    message.pop(field, None)
            return events
    return Without


@pytest.mark.parametrize(("case_id", "field", "path"), [
    ("S2-POST-PROCESSED", "modified_by",
     "model_request[business].view.messages[assistant].modified_by"),
    ("S6-ARGS-ADJUSTED-SENT", "marks", "model_request[business].rendered.messages.marks"),
    ("ROW-05-SNAPSHOT", "snapshot_id", "model_request[business].snapshot_id"),
    # The other two cases that broke with KeyError, a fault of the suite.
    ("S6-TEXT-MODIFIED-SENT", "marks", "model_request[business].rendered.messages.marks"),
    ("S6-RESULT-READ", "rendered", "model_request[business].rendered"),
])
def test_a_missing_optional_field_is_the_drivers_failure_naming_it(
        case_id: str, field: str, path: str) -> None:
    assert run_case(BY_ID[case_id], ReferenceDriver).status == "passed"
    result = run_case(BY_ID[case_id], without(field))
    assert result.status == "failed", result.detail
    assert f"the trace lacks {path}, which this case reads" in result.detail
    assert "optional in the trace contract v1" in result.detail
    assert "fault of the suite" not in result.detail


def test_a_null_optional_field_a_check_uses_is_the_drivers_failure() -> None:
    class Null(ReferenceDriver):
        def trace(self) -> list[dict[str, Any]]:
            return [{**e, "rendered": None} if e["kind"] == "model_request" else e
                    for e in super().trace()]

    result = run_case(BY_ID["S6-ARGS-ADJUSTED-SENT"], Null)
    assert result.status == "failed", result.detail
    assert "the trace has null for model_request[business].rendered" in result.detail


def test_a_check_that_breaks_on_its_own_is_still_the_suites_error() -> None:
    case = BY_ID["ROW-02"]

    def broken(trace: list[dict[str, Any]]) -> None:
        {"a": 1}["no such key"]  # a dict of the check's own, not of the trace

    result = run_case(type(case)(**{**case.__dict__, "check": broken}), ReferenceDriver)
    assert result.status == "error"
    assert "a fault of the suite" in result.detail


def raising(failure: Callable[[], BaseException]) -> type[ReferenceDriver]:
    class Raising(ReferenceDriver):
        def advance(self) -> None:
            raise failure()
    return Raising


@pytest.mark.parametrize("failure", [asyncio.CancelledError, GeneratorExit,
                                     type("FrameworkAbort", (BaseException,), {})])
def test_a_base_exception_from_the_driver_is_that_cases_error(
        failure: Callable[[], BaseException]) -> None:
    driver = raising(failure)
    results = list(run_suite([BY_ID["ROW-01"], BY_ID["ROW-02"]], driver))
    assert [r.status for r in results] == ["error", "error"]  # the run went on to ROW-02
    assert all(failure().__class__.__name__ in r.detail for r in results)


@pytest.mark.parametrize("failure", [KeyboardInterrupt, SystemExit])
def test_the_users_stop_still_ends_the_run(failure: Callable[[], BaseException]) -> None:
    with pytest.raises(failure):  # type: ignore[call-overload]
        run_case(BY_ID["ROW-01"], raising(failure))


def test_no_check_crashes_on_an_empty_trace() -> None:
    crashed = []
    for case in CASES:
        for name, judge, traces in (("check", case.check, ([],)),
                                    ("compare", case.compare, ([], []))):
            if judge is None:
                continue
            try:
                judge(*traces)
            except (CaseFailure, IndexError, StopIteration):  # failed, the driver's
                continue
            except Exception as failure:
                crashed.append(f"{case.id} {name}: {failure!r}")
    assert not crashed, "\n".join(crashed)


def test_every_declared_crash_phase_is_probed_and_counted() -> None:
    results = confirm_capabilities(ReferenceDriver)
    for phase in PHASES:
        assert results[f"crash:{phase}"].status == "confirmed", phase
    assert results["commit_failures"].status == "confirmed"


def test_a_crash_phase_whose_probe_needs_more_is_marked_unprobeable() -> None:
    class Few(ReferenceDriver):
        capabilities = frozenset({"root_loop", "crash:raw_answer_saved", "crash:hook_decided",
                                  "commit_failures"})

    results = confirm_capabilities(Few)
    assert set(results) == {"root_loop", "crash:raw_answer_saved", "crash:hook_decided",
                            "commit_failures"}
    assert results["crash:raw_answer_saved"].status == "confirmed"
    assert results["crash:hook_decided"].status == "not_probed"
    assert "needs hooks:" in results["crash:hook_decided"].detail
    # commit_failures is probed at the phase the driver declares, not request_frozen only.
    assert results["commit_failures"].status == "confirmed"


def test_a_crash_phase_the_runtime_does_not_keep_is_not_confirmed() -> None:
    class Forgets(ReferenceDriver):
        capabilities = frozenset({"root_loop", "crash:tool_settled"})

        def trace(self) -> list[dict[str, Any]]:
            return [e for e in super().trace() if e["kind"] != "restarted"]

    assert confirm_capabilities(Forgets)["crash:tool_settled"].status == "not_confirmed"


@pytest.mark.parametrize("phase", PHASES)
def test_the_commit_failures_probe_accepts_any_declared_phase(phase: str) -> None:
    # A runtime that can fail a commit at one phase only (and not request_frozen) is probed
    # there, and confirmed: the probe refuses the commit of the phase it declares.
    declared = frozenset({"root_loop", crash_need(phase), "commit_failures"})
    declared |= crash_probe(phase, declared).needs
    probe = commit_failure_probe(declared)
    chosen = "request_frozen" if "crash:request_frozen" in declared else phase
    assert (probe.scenario["crash"]["phase"], probe.scenario["crash"]["when"]) == (chosen, "fails")
    trace, _ = judged_trace(ReferenceDriver(), probe.scenario)
    assert probe.shows(trace), f"no persistence_failed after a refused {phase} commit"
    [failed] = [e for e in trace if e["kind"] == "persistence_failed"]
    assert failed["phase"] == chosen


def test_each_declared_crash_phase_is_counted_among_the_capabilities() -> None:
    # "15 declared" for 23 (issue #33): every crash:<phase> a driver declares is one line of
    # the probes, confirmed or said why not, and counted in the report's first line.
    class Some(ReferenceDriver):
        capabilities = frozenset({"root_loop", "crash:raw_answer_saved", "crash:tool_settled",
                                  "crash:hook_decided"})

    results = confirm_capabilities(Some)
    assert set(results) == Some.capabilities
    assert {name: r.status for name, r in results.items()} == {
        "root_loop": "confirmed", "crash:raw_answer_saved": "confirmed",
        "crash:tool_settled": "confirmed", "crash:hook_decided": "not_probed"}
