"""The hook contract as data (issue #33): spec/hooks.json is generated from the reference's
field registries (``ctxspec contracts --check`` fails on drift) and holds its published
schema; the payload each point documents is what the reference hands its hooks; the
diagnostics it lists are the codes the reference core records."""

import json
import re
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from click.testing import CliRunner

from ctxspec.cli import main
from ctxspec.conformance.driver import Ports, ReferenceDriver, WorkflowPorts
from ctxspec.conformance.harness import scenario_trace
from ctxspec.conformance.probes import PROBES
from ctxspec.conformance.scenario import Scenario
from ctxspec.contracts import PAYLOADS, drifted, hook_registry, render
from ctxspec.reference.ports import HookContext, HookPoint, HookPort, HookReply
from ctxspec.reference.runtime.session import REGISTRIES
from ctxspec.schemas import published_schemas

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "spec"


def test_the_published_registry_is_the_references() -> None:
    assert (SPEC / "hooks.json").read_text("utf-8") == render(hook_registry())
    document = json.loads((SPEC / "hooks.json").read_text("utf-8"))
    jsonschema.validate(document, published_schemas()["HookRegistry.json"])
    points = {p["point"]: p for p in document["points"]}
    assert set(points) == set(PAYLOADS)  # every hook point, capability.pre_call included
    for point, registry in REGISTRIES.items():
        assert points[point]["registry_version"] == registry.version
        assert [(f["context_key"], f["payload_path"], f["kind"], f["required"])
                for f in points[point]["fields"]] == [
            (f.context_key, f.payload_path, f.kind, f.required) for f in registry.fields]


def test_the_check_catches_a_drifted_registry(tmp_path: Path) -> None:
    shutil.copy(SPEC / "hooks.json", tmp_path / "hooks.json")
    assert drifted(tmp_path, ("hooks.json",)) == []
    edited = json.loads((tmp_path / "hooks.json").read_text("utf-8"))
    edited["points"][2]["fields"][0]["required"] = False  # tool.pre_call's arguments
    (tmp_path / "hooks.json").write_text(json.dumps(edited, indent=2) + "\n", "utf-8")
    assert drifted(tmp_path, ("hooks.json",)) == ["hooks.json"]


@pytest.mark.slow
def test_ctxspec_contracts_check_passes() -> None:
    result = CliRunner().invoke(main, ["contracts", "--check"])
    assert result.exit_code == 0, result.output


class Recording:
    """A hook port that notes each payload it is handed, then answers as the scripted one."""

    def __init__(self, hooks: HookPort, seen: dict[str, list[Any]]) -> None:
        self.hooks, self.seen = hooks, seen

    def registered(self, point: HookPoint) -> bool:
        return self.hooks.registered(point)

    def items(self, context: HookContext) -> tuple[HookReply, ...]:
        self.seen.setdefault(context.point, []).append(dict(context.payload))
        return self.hooks.items(context)


SEEN: dict[str, list[Any]] = {}


class Noting(ReferenceDriver):
    def configure(self, scenario: Scenario, ports: Ports) -> None:
        super().configure(scenario, replace(ports, hooks=Recording(ports.hooks, SEEN)))

    def run_workflow(self, scenario: Scenario, ports: WorkflowPorts) -> None:
        super().run_workflow(scenario, replace(ports, hooks=Recording(ports.hooks, SEEN)))


@pytest.mark.parametrize("point", sorted(PAYLOADS))
def test_the_documented_payload_is_what_the_reference_hands_its_hooks(point: str) -> None:
    [probe] = [p for p in PROBES if p.capability == f"hooks:{point}"]
    SEEN.clear()
    scenario_trace(Noting(), probe.scenario)
    assert SEEN.get(point), f"the probe of {point} asked no hook there"
    for payload in SEEN[point]:
        jsonschema.validate(payload, PAYLOADS[point])
        assert set(payload) == set(PAYLOADS[point]["properties"])


def test_the_diagnostics_are_the_codes_the_core_records() -> None:
    source = "\n".join(path.read_text("utf-8") for path in (ROOT / "reference").glob("*.py"))
    emitted = set(re.findall(r'_diag\("([A-Z_]+)"', source))
    emitted |= set(re.findall(r"_diag\(ErrorCode\.([A-Z_]+)\.value", source))
    listed = {d.code for d in hook_registry().diagnostics}
    assert listed == emitted
