"""JSON Schemas of the data contracts, published into spec/schemas/ (one file per contract).

The published schemas are a projection of the core fields (design §9): they describe every
field the reference knows but never forbid additional properties, so another implementation's
extra fields never read as non-conformance. The reference's own models stay closed
(``extra="forbid"``); only the published text is opened here.
"""

import json
from pathlib import Path
from typing import Any

from ctxspec.reference.contracts import CONTRACTS
from ctxspec.reference.errors import ErrorCode

JSON_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"


def _open_to_additional_properties(node: Any) -> Any:
    if isinstance(node, dict):
        return {key: _open_to_additional_properties(value) for key, value in node.items()
                if not (key == "additionalProperties" and value is False)}
    if isinstance(node, list):
        return [_open_to_additional_properties(item) for item in node]
    return node


def published_schemas() -> dict[str, dict[str, Any]]:
    """File name -> schema, for every contract and the closed set of error codes."""
    schemas: dict[str, dict[str, Any]] = {}
    for contract in CONTRACTS:
        schema = _open_to_additional_properties(contract.model_json_schema())
        schemas[f"{contract.__name__}.json"] = {"$schema": JSON_SCHEMA_DIALECT, **schema}
    from ctxspec.conformance.scenario import scenario_schema

    schemas["Scenario.json"] = {"$schema": JSON_SCHEMA_DIALECT, **scenario_schema()}
    from ctxspec.conformance.harness import ReportLine

    schemas["ConformanceReportLine.json"] = {"$schema": JSON_SCHEMA_DIALECT,
                                             **ReportLine.model_json_schema()}
    from ctxspec.conformance.stdio import StdioAnswer, StdioRequest

    for message in (StdioRequest, StdioAnswer):
        schemas[f"{message.__name__}.json"] = {"$schema": JSON_SCHEMA_DIALECT,
                                               **message.model_json_schema()}
    from ctxspec.conformance.vectors import vector_schema

    schemas["Vector.json"] = {"$schema": JSON_SCHEMA_DIALECT, **vector_schema()}
    from ctxspec.conformance.trace_contract import trace_schema

    schemas["Trace.json"] = {"$schema": JSON_SCHEMA_DIALECT, **trace_schema()}
    from ctxspec.conformance.estimator_vectors import EstimatorVectors
    from ctxspec.conformance.trace_fields import TraceFields
    from ctxspec.contracts import HookRegistry

    for document in (HookRegistry, TraceFields, EstimatorVectors):
        schemas[f"{document.__name__}.json"] = {"$schema": JSON_SCHEMA_DIALECT,
                                                **document.model_json_schema()}
    schemas["ErrorCode.json"] = {
        "$schema": JSON_SCHEMA_DIALECT,
        "title": "ErrorCode",
        "description": ErrorCode.__doc__.split("\n\n")[0] if ErrorCode.__doc__ else "",
        "type": "string",
        "enum": [code.value for code in ErrorCode],
    }
    return schemas


def render(schema: dict[str, Any]) -> str:
    return json.dumps(schema, indent=2, ensure_ascii=False, sort_keys=True) + "\n"


def drifted(directory: Path) -> list[str]:
    """Names of published schema files that are missing, stale or no longer generated."""
    expected = {name: render(schema) for name, schema in published_schemas().items()}
    present = {path.name for path in directory.glob("*.json")}
    stale = [name for name, text in expected.items()
             if not (directory / name).is_file() or (directory / name).read_text("utf-8") != text]
    return sorted(stale + sorted(present - expected.keys()))


def write(directory: Path) -> list[str]:
    """Write every schema into ``directory``; remove files no contract produces. Returns names."""
    directory.mkdir(parents=True, exist_ok=True)
    schemas = published_schemas()
    for path in directory.glob("*.json"):
        if path.name not in schemas:
            path.unlink()
    for name, schema in schemas.items():
        (directory / name).write_text(render(schema), "utf-8")
    return sorted(schemas)
