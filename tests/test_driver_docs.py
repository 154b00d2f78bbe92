"""A driver from the docs alone (issue #33): every contract a driver meets is written in
docs/implementing-a-driver.md, docs/stdio-protocol.md or spec/ — every hook point, every trace
event and field a case reads, every capability a case needs, every estimator, every stdio op.
Each check reads the suite's own vocabulary (the cases, the probes, the contract models) and
fails naming what the documents leave out."""

import json
import re
from pathlib import Path
from typing import Any, get_args

from ctxspec.conformance.capabilities import COARSE, HOOK_POINTS
from ctxspec.conformance.cases import CASES
from ctxspec.conformance.estimator import FREE, OPAQUE
from ctxspec.conformance.phases import PHASES
from ctxspec.conformance.scenario import AgentDoc
from ctxspec.conformance.stdio import VERSION, StdioAnswer, StdioRequest

ROOT = Path(__file__).resolve().parent.parent
GUIDE = (ROOT / "docs" / "implementing-a-driver.md").read_text("utf-8")
STDIO = (ROOT / "docs" / "stdio-protocol.md").read_text("utf-8")
SPEC = ROOT / "spec"


def named(text: str) -> set[str]:
    """Every backticked name of a document."""
    return set(re.findall(r"`([^`\n]+)`", text))


def spec(name: str) -> Any:
    return json.loads((SPEC / name).read_text("utf-8"))


def capability_rows(text: str) -> set[str]:
    """The names of the capability table's rows (``| `name` | …``)."""
    return set(re.findall(r"^\| `([a-z_:<>]+)` \|", text, re.M))


def test_every_hook_point_is_in_the_guide_and_in_spec() -> None:
    points = {p["point"]: p for p in spec("hooks.json")["points"]}
    missing = [p for p in HOOK_POINTS if p not in named(GUIDE) or p not in points]
    assert not missing, f"hook points the guide or spec/hooks.json leaves out: {missing}"
    for point in HOOK_POINTS:  # each with its payload, fields and decisions
        assert points[point]["payload"]["properties"] and points[point]["decisions"], point
    codes = {d["code"] for d in spec("hooks.json")["diagnostics"]}
    assert {"HOOK_PATCH_CONFLICT", "CONTEXT_REVISION_CONFLICT", "HOOK_FAILED"} <= codes
    assert "spec/hooks.json" in GUIDE


def test_every_trace_event_and_field_a_case_reads_is_written_down() -> None:
    # spec/trace-fields.json is what the cases read (tests/test_trace_fields.py holds it to
    # that); here every event read, and every optional field read, must be named by the guide
    # and typed by the published schema.
    schema = spec("schemas/Trace.json")["$defs"]
    guide = named(GUIDE)
    missing = []
    for event in spec("trace-fields.json")["events"]:
        if not event["read_by"]:
            continue
        if event["kind"] not in guide:
            missing.append(f"event {event['kind']}")
        for field in event["fields"]:
            top = field["path"].split(".")[0]
            if field["status"] == "optional" and field["read_by"] and top not in guide:
                missing.append(f"{event['kind']}.{field['path']} (read by "
                               f"{', '.join(field['read_by'][:3])})")
        definition = next(d for d in schema.values()
                          if d.get("properties", {}).get("kind", {}).get("const")
                          == event["kind"])
        missing += [f"{event['kind']}.{f['path']} not in Trace.json" for f in event["fields"]
                    if f["path"].split(".")[0] not in definition["properties"]]
    assert not missing, "trace the docs do not name:\n" + "\n".join(missing)
    assert "spec/trace-fields.json" in GUIDE


def test_every_capability_a_case_needs_is_in_the_guide() -> None:
    rows = capability_rows(GUIDE)
    phases = named(GUIDE)
    missing = set()
    for case in CASES:
        for need in case.needs:
            if need.startswith("crash:"):
                if "crash:<phase>" not in rows or need.removeprefix("crash:") not in phases:
                    missing.add(need)
            elif need.startswith("hooks:"):
                if "hooks:<point>" not in rows or need.removeprefix("hooks:") not in phases:
                    missing.add(need)
            elif need == "crash_points":  # every phase: named in the crash:<phase> row
                if "crash:<phase>" not in rows or need not in phases:
                    missing.add(need)
            elif need not in rows and need not in COARSE:
                missing.add(need)
    assert not missing, f"capabilities cases need that the guide's table leaves out: {missing}"
    assert set(PHASES) <= phases


def test_every_estimator_is_specified_with_vectors() -> None:
    estimators = set(get_args(AgentDoc.model_fields["estimator"].annotation))
    vectors = {v["estimator"] for v in spec("estimators.json")["vectors"]}
    guide = named(GUIDE)
    assert estimators <= guide, estimators - guide
    assert estimators <= vectors, estimators - vectors
    # The content rule's keys are spelled out, not left to conformance/estimator.py.
    assert guide >= OPAQUE | FREE, sorted((OPAQUE | FREE) - guide)
    assert "spec/estimators.json" in GUIDE


def test_every_stdio_op_is_in_the_protocol_document() -> None:
    ops = set(get_args(StdioRequest.model_fields["op"].annotation))
    table = set(re.findall(r"^\| `([a-z_]+)` \|", STDIO, re.M))
    assert ops <= table, ops - table


def test_every_stdio_field_and_the_version_are_in_the_protocol_document() -> None:
    # Version 2's operations: each request field (case, store, world on restart) and each
    # answer field (died, world, exhausted, code) is named, and the version is the harness's.
    fields = {*StdioRequest.model_fields, *StdioAnswer.model_fields}
    assert fields <= named(STDIO), sorted(fields - named(STDIO))
    assert f"# The stdio protocol, version {VERSION}" in STDIO
    assert f'"version": {VERSION}' in STDIO
    for section in ("## Crash and restart", "## Log", "## Versions"):
        assert section in STDIO, section


def test_a_contract_left_out_is_caught() -> None:
    # Not vacuous: the same reading of a guide without the tool.pre_call point, the stop
    # capability and the bytes estimator finds each missing.
    cut = GUIDE.replace("`tool.pre_call`", "tool.pre_call").replace("| `stop` |", "| stop |") \
        .replace("`bytes`", "bytes")
    assert "tool.pre_call" not in named(cut)
    assert "stop" not in capability_rows(cut)
    assert "bytes" not in named(cut)
    assert "died" not in named(STDIO.replace("`died`", "died").replace('"died"', "died"))
