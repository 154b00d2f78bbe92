"""Capability probes (conformance/probes.py): every capability the reference declares is
confirmed; a claim a driver does not keep is caught by its probe, and the cases that need it
fail naming the probe instead of passing as unsupported or failing obscurely."""

import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ctxspec.cli import main
from ctxspec.conformance.capabilities import COARSE, declared
from ctxspec.conformance.cases import by_id
from ctxspec.conformance.driver import CAPABILITIES, Ports, ReferenceDriver
from ctxspec.conformance.harness import confirm_capabilities, run_case
from ctxspec.conformance.phases import CRASH_CAPABILITIES
from ctxspec.conformance.probes import PROBES
from ctxspec.conformance.scenario import Scenario
from ctxspec.reference.tokens import ByteEstimator

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "docs" / "driver-example"))

from toy_driver import ToyDriver


class ClaimsEverything(ToyDriver):
    """The toy runtime declaring every capability it does not have."""

    capabilities = CAPABILITIES


class DropsRequests(ReferenceDriver):
    """Its trace leaves the model requests out."""

    def trace(self) -> list[dict[str, Any]]:
        return [e for e in super().trace() if e["kind"] != "model_request"]


class OwnEstimator(ReferenceDriver):
    """Measures with its own byte estimator whatever the scenario injects."""

    def configure(self, scenario: Scenario, ports: Ports) -> None:
        super().configure(scenario, Ports(ports.model, ports.tools, ports.hooks,
                                          ByteEstimator()))


class DropsMidCallSupplements(ReferenceDriver):
    """Loses a supplement that arrives while a tool runs (a step mid-call)."""

    def supplement(self, text: str) -> None:
        if self.depth == 0:
            super().supplement(text)


FINE = declared(CAPABILITIES) - set(COARSE) - CRASH_CAPABILITIES
"""What the reference declares, its coarse names (compaction, hooks) by their parts."""


def test_every_capability_the_reference_declares_has_a_probe_and_is_confirmed() -> None:
    # commit_failures' probe is built for the phases a driver declares (probes_for).
    assert {each.capability for each in PROBES} | {"commit_failures"} == FINE
    probes = confirm_capabilities(ReferenceDriver)
    # Each crash phase the reference declares (crash_points: all of them) has its own probe.
    assert {name: result.status for name, result in probes.items()} == \
        dict.fromkeys(FINE | CRASH_CAPABILITIES, "confirmed")


def test_a_claim_the_driver_does_not_keep_is_not_confirmed() -> None:
    probes = confirm_capabilities(ClaimsEverything)
    # The toy runs a root loop, takes the injected estimator and tolerates a step mid-call:
    # those claims hold. Every other one is caught by its probe.
    assert {name for name, r in probes.items() if r.status == "confirmed"} == \
        {"root_loop", "estimator_injection", "triggers"}
    assert probes["hooks:tool.pre_call"].detail == \
        "its probe's trace lacks a hook_decided event at tool.pre_call"
    assert probes["crash_points"].detail == "its probe's trace lacks a restarted event"
    assert probes["stop"].detail.startswith("its probe scenario failed: NotImplementedError")


@pytest.mark.parametrize(("driver", "capability"), [
    (DropsRequests, "root_loop"), (OwnEstimator, "estimator_injection"),
    (DropsMidCallSupplements, "triggers")])
def test_the_probes_the_toy_passes_can_fail_too(driver: type[ReferenceDriver],
                                                capability: str) -> None:
    assert confirm_capabilities(driver)[capability].status == "not_confirmed"


def test_a_case_needing_an_unconfirmed_capability_still_shows_what_it_saw() -> None:
    [case] = by_id(["ROW-21"])  # needs crash_points and hooks at tool.pre_call
    probes = confirm_capabilities(ClaimsEverything)
    result = run_case(case, ClaimsEverything, probes)
    assert result.status in ("failed", "error")
    *seen, note = result.detail.splitlines()
    assert seen  # what the case itself saw, not only the probe's verdict
    assert note == ("(the driver declares crash:raw_answer_saved, hooks:tool.pre_call, which "
                    "its probe did not confirm: see the report's first lines)")
    # Without the probes the same claim ends up elsewhere: never as unsupported.
    assert run_case(case, ClaimsEverything).status != "unsupported"


def test_a_probe_needing_an_undeclared_capability_is_not_run() -> None:
    class CompactsWithoutInjection(ReferenceDriver):
        capabilities = CAPABILITIES - {"estimator_injection"}

    probes = confirm_capabilities(CompactsWithoutInjection)
    assert (probes["compaction_summary"].status, probes["compaction_summary"].detail) == \
        ("not_probed", "its probe needs estimator_injection")
    assert "estimator_injection" not in probes


def test_the_terminal_report_opens_with_the_probes() -> None:
    shown = CliRunner().invoke(main, ["conformance", "--case", "ROW-01"])
    assert shown.exit_code == 0, shown.output
    assert shown.output.splitlines()[0] == \
        f"capabilities: {len(FINE | CRASH_CAPABILITIES)} declared, " \
        f"{len(FINE | CRASH_CAPABILITIES)} confirmed by probing"
