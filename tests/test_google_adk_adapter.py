"""The Google ADK driver (ctxspec.adapters.google_adk) on a handful of cases: what ADK keeps,
where it diverges for the reason its report gives, a setting of the best configuration seen
fixing its case, and a crash phase it resumes from. The whole suite runs in the drift test of
its report (test_compat_reports.py). The ``google-adk`` extra is installed by .ci/run; without
it this test errors, never skips.
"""

from functools import partial
from typing import TYPE_CHECKING

import pytest

from ctxspec.conformance.compat import Profile
from ctxspec.conformance.harness import confirm_capabilities
from ctxspec.conformance.probes import ProbeResult
from tests import adapter_checks as checks

if TYPE_CHECKING:
    from ctxspec.adapters.google_adk import GoogleAdkDriver


def make_driver() -> "GoogleAdkDriver":
    """The adapter's factory, imported when a test runs, not when pytest collects this module:
    ADK takes seconds to import, and every test process collects every module."""
    from ctxspec.adapters.google_adk import make_driver as factory
    return factory()


def profile() -> Profile:
    from ctxspec.adapters.google_adk.profile import PROFILE
    return PROFILE


KEPT = ("ROW-07", "S8-STOPPED-CALL-COMPACTS", "HM-TPOST-MODIFY-ROOT-SUCCEEDED",
        "CRASH-TOOLS-BATCH_FED_BACK-1-AFTER")
"""Every tool result kept with its call over several Loops and Runs (the session's events);
a call a stop left unanswered dropped from later requests without blocking the compaction
after it; an after-tool callback's edit of a result fed back; a death just after a batch's
results were saved, resumed by the invocation's id without running the batch again — each
ADK's own doing."""

DIVERGING = {
    "ROW-02": "outcome",  # the session's events replayed whole: no outcome of the ended Run
    "ROW-03": "system prompt",  # the identity sentence appended to every instruction
    "S11-COMPACTION-FAILED": "ran out",  # a failed summary is logged, the Run goes on
    "ROW-04-AT": "below_trigger",  # the threshold reads the previous request's prompt size
}
"""Cases ADK fails, and a word of what the failure shows."""


@pytest.fixture(scope="module")
def probes() -> dict[str, ProbeResult]:
    return confirm_capabilities(make_driver)


def test_every_declared_capability_is_confirmed(probes: dict[str, ProbeResult]) -> None:
    checks.all_confirmed(probes, make_driver)


@pytest.mark.parametrize("case_id", KEPT)
def test_what_adk_keeps_passes(case_id: str, probes: dict[str, ProbeResult]) -> None:
    checks.passes(case_id, make_driver, probes)


@pytest.mark.parametrize("case_id", sorted(DIVERGING))
def test_a_divergence_fails_and_its_report_says_why(case_id: str,
                                                    probes: dict[str, ProbeResult]) -> None:
    checks.diverges(case_id, make_driver, probes, DIVERGING, profile())


def test_the_tool_error_setting_fixes_its_case(probes: dict[str, ProbeResult]) -> None:
    # Without an on_tool_error_callback a tool's exception ends ADK's invocation; with the
    # best configuration's, the error is the call's structured result and the Run goes on
    # (§6). The defaults with only that setting changed pass S6-ITEM-ERROR (Q291).
    from ctxspec.adapters.google_adk.driver import GoogleAdkDriver
    defaults = checks.run("S6-ITEM-ERROR", partial(GoogleAdkDriver, best=frozenset()), probes)
    assert defaults.status == "failed", defaults.detail
    only = checks.run("S6-ITEM-ERROR",
                      partial(GoogleAdkDriver, best=frozenset({"on_tool_error_callback"})), probes)
    assert only.status == "passed", only.detail
