"""The pydantic-ai driver (ctxspec.adapters.pydantic_ai) on a handful of cases: what pydantic-ai
keeps, where it diverges for the reason its report gives, and a setting of the best
configuration seen fixing a default. The whole suite runs in the drift test of its report
(test_compat_reports.py). The ``pydantic-ai`` extra is installed by .ci/run; without it this
test errors, never skips."""

from typing import TYPE_CHECKING

import pytest

from ctxspec.conformance.compat import Profile
from ctxspec.conformance.harness import confirm_capabilities
from ctxspec.conformance.probes import ProbeResult
from tests import adapter_checks as checks

if TYPE_CHECKING:
    from ctxspec.adapters.pydantic_ai import PydanticAIDriver


def make_driver() -> "PydanticAIDriver":
    """The adapter's factory, imported when a test runs, not when pytest collects this module:
    pydantic-ai takes a second to import, and every test process collects every module."""
    from ctxspec.adapters.pydantic_ai import make_driver as factory
    return factory()


def make_default_driver() -> "PydanticAIDriver":
    from ctxspec.adapters.pydantic_ai import make_default_driver as factory
    return factory()


def profile() -> Profile:
    from ctxspec.adapters.pydantic_ai.profile import PROFILE
    return PROFILE


KEPT = ("ROW-03", "ROW-13", "S11-STOP-IN-FLIGHT-FINAL", "S3-REQUEST-DENIED",
        "S2-RESPONSE-DENIED-CALLS", "S3-DELEGATE-POST-DENY")
"""Two Executors run inside the delegate tool, each seeing only its hand-over; a claimed
supplement carried once to the next question after a retried failure; a stop that wins over an
answer in flight (AgentRun.cancel); a pre-request deny from before_model_request sending
nothing; a post-response deny from after_model_request whose calls never run; a post-call deny
of the delegate call withholding the Executor's answer — each pydantic-ai's own doing."""

DIVERGING = {
    "ROW-06": "joined the request it arrived after",  # the queue drains into every request
    "S5-RETRY-FROZEN": "model script ran out",  # a queued supplement forces one more request
    "S11-STOP-BETWEEN-CALLS": "The tool call was interr",  # a's finished result replaced
    "S11-STOP-DURING-COMPACTION": "U-AFTER-STOP",  # the request step is shielded from a stop
    "ROW-01": "the fourth Run's request",  # the whole conversation sent, no projection
}
"""Cases pydantic-ai fails, and a word of what the failure shows."""


@pytest.fixture(scope="module")
def probes() -> dict[str, ProbeResult]:
    return confirm_capabilities(make_driver)


def test_every_declared_capability_is_confirmed(probes: dict[str, ProbeResult]) -> None:
    checks.all_confirmed(probes, make_driver)


@pytest.mark.parametrize("case_id", KEPT)
def test_what_pydantic_ai_keeps_passes(case_id: str, probes: dict[str, ProbeResult]) -> None:
    checks.passes(case_id, make_driver, probes)


@pytest.mark.parametrize("case_id", sorted(DIVERGING))
def test_a_divergence_fails_and_its_report_says_why(case_id: str,
                                                    probes: dict[str, ProbeResult]) -> None:
    checks.diverges(case_id, make_driver, probes, DIVERGING, profile())


def test_a_changed_argument_reaches_the_history_only_with_the_best_setting(
        probes: dict[str, ProbeResult]) -> None:
    # pydantic-ai runs an approved call with ToolApproved(override_args=...) but keeps the
    # model's arguments in the history's ToolCallPart unless the handler writes call.args too.
    default = checks.run("EX3-WRITE", make_default_driver, probes)
    assert default.status == "failed", default.detail
    assert "expected 'reports/a.md', saw 'a.md'" in default.detail
    assert checks.run("EX3-WRITE", make_driver, probes).status == "passed"
    [setting] = [s for s in profile().settings if "EX3-WRITE" in s.cases]
    assert "call.args" in setting.name


def test_the_summary_is_the_adapters() -> None:
    # pydantic-ai has no summarisation of its own: a pass that needs it is counted adapter.
    assert "compaction_summary" in profile().adapter_supplied
    assert "compaction_summary" in make_driver().capabilities
    assert "compaction_summary" not in make_default_driver().capabilities
