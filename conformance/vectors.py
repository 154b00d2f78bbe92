"""Golden vectors (docs/architecture.md "Layers"): each case in generator mode writes
its scenario, the reference's observations and a manifest into spec/vectors/<case id>.json, so a
runtime in any language can replay them without our predicates.

Observations keep what the design makes observable and drop identifiers a runtime chooses
freely (UUIDs, purpose keys, hashes): per model request its purpose, role, attempt, messages
(role, kind, text), estimated input tokens, max output tokens and compaction decision; the
usage a provider reported, beside the estimate, where a scenario scripts it; tools executed with
their effective arguments; hook calls and decisions; Run endings; restarts; what a Session
retains and what the history API served (with the bodies' digests when a read asked for them);
where each further Session opened; for a workflow, its node endings, capability
Operations, graph state writes and ending. A message text longer than ``LONG_TEXT``
characters is kept as its length and SHA-256 (the §8 table's requests carry texts of up to
100000 characters; the scenario beside them holds them in full).
"""

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ctxspec.conformance.capabilities import declared
from ctxspec.conformance.cases import CASES, Case, Trace
from ctxspec.conformance.documents import (
    INTEGER,
    DocumentError,
    json_document,
    json_problem,
    read_regular,
    validation_problems,
)
from ctxspec.conformance.harness import SUITE_VERSION, DriverFactory, scenario_trace
from ctxspec.limits import MAX_DOCUMENT_BYTES
from ctxspec.reference.errors import ErrorCode

VECTOR_FORMAT = 2
LONG_TEXT = 256


def _text(text: str) -> str | dict[str, Any]:
    if len(text) <= LONG_TEXT:
        return text
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    return {"chars": len(text), "sha256": digest}


VECTORS = Path(__file__).resolve().parent.parent / "spec" / "vectors"


def _read(event: dict[str, Any]) -> list[Any]:
    read = [event["caller"], event["session"], event["allowed"], event["message_kinds"]]
    if event.get("records") is not None:  # a read that asked for bodies (digests already)
        read.append([[r["message_kind"], r["text"], r["full_body"]] for r in event["records"]])
    if event.get("content") is not None or event.get("node_task") is not None:
        read.append({"content": event.get("content"), "node_task": event.get("node_task")})
    return read


def observations(trace: Trace) -> dict[str, Any]:
    """The identifier-free projection of a trace that vectors compare. The usage a provider
    reported (``model_usage``) is observed only where a scenario scripts some, and
    ``sessions_opened`` (each new Session's number and how many model requests came before it,
    which places the Session boundaries in ``model_requests``) only in a scenario of several
    Sessions, and ``workflow`` only for a workflow, so the vectors of every other case stay as
    they were."""
    seen = _observations(trace)
    usage = [[e["purpose"], e["attempt"], e["estimated_input_tokens"], e["input_tokens"],
              e["output_tokens"], e["input_deviation"]]
             for e in trace if e["kind"] == "model_usage"]
    if usage:
        seen["model_usage"] = usage
    opened, sent = [], 0
    for event in trace:
        if event["kind"] == "model_request":
            sent += 1
        elif event["kind"] == "session_opened":
            opened.append([event["session"], sent])
    if opened:
        seen["sessions_opened"] = opened
    if any(e["kind"] == "workflow_ended" for e in trace):
        seen["workflow"] = _workflow(trace)
    return seen


def _observations(trace: Trace) -> dict[str, Any]:
    return {
        "model_requests": [
            {"purpose": e["purpose"], "role": e["role"], "attempt": e["attempt"],
             "messages": [[m["role"], m["kind"], _text(m["text"])]
                          for m in e["view"]["messages"]],
             "estimated_input_tokens": e["estimated_input_tokens"],
             "max_output_tokens": e["max_output_tokens"], "compaction": e["compaction"]}
            for e in trace if e["kind"] == "model_request"],
        "tools_executed": [[e["name"], e["effective_arguments"]]
                           for e in trace if e["kind"] == "tool_executed"],
        "hook_calls": [[e["point"], e["stage"]] for e in trace if e["kind"] == "hook_called"],
        "hook_decisions": [[e["point"], e["decision"], e["patch_valid"], e["diagnostics"]]
                           for e in trace if e["kind"] == "hook_decided"],
        "run_endings": [[e["run_no"], e["status"], e["error_code"]]
                        for e in trace if e["kind"] == "run_ended"],
        "restarts": [[e["phase"], e["occurrence"], e["when"]]
                     for e in trace if e["kind"] == "restarted"],
        # How many blobs a runtime writes is its own business; whether any are kept is not.
        "retained": [[e["workspace_files"], e["records"], e["blobs"] > 0]
                     for e in trace if e["kind"] == "retained"],
        "history_reads": [_read(e) for e in trace if e["kind"] == "history_read"],
    }


def _workflow(trace: Trace) -> dict[str, Any]:
    """A workflow's node endings, capability Operations, graph state writes (key and writer:
    a routed failure's value carries the runtime's own message) and the tree's ending."""
    return {
        "node_endings": [[e["node"], e["status"], e["route"], e["error_code"]]
                         for e in trace if e["kind"] == "node_ended"],
        "capability_calls": [[e["node"], e["tool"], e["proposed_input"], e["effective_input"],
                              e["modified_by"]]
                             for e in trace if e["kind"] == "capability_called"],
        "graph_state_writes": [[e["key"], e["source"]]
                               for e in trace if e["kind"] == "graph_state_written"],
        "endings": [e["status"] for e in trace if e["kind"] == "workflow_ended"],
    }


def vector(case: Case, factory: DriverFactory) -> dict[str, Any]:
    return {"manifest": {"format": VECTOR_FORMAT, "case": case.id, "title": case.title,
                         "source": case.source, "suite_version": SUITE_VERSION,
                         "requirements": list(case.requirements),
                         "needs": sorted(case.needs)},
            "scenario": case.scenario,
            "expected": {"refusal": case.refusal} if case.refusal is not None
            else observations(scenario_trace(factory(), case.scenario))}


def render(document: dict[str, Any]) -> str:
    return json.dumps(document, indent=1, ensure_ascii=False, sort_keys=True) + "\n"


def generate(factory: DriverFactory, cases: Sequence[Case] = CASES) -> dict[str, str]:
    """File name → text of every case's vector. A relational case (the crash matrix) has none:
    its expectation is the same driver's uncrashed run, not the reference's observations."""
    return {f"{case.id}.json": render(vector(case, factory)) for case in cases
            if case.baseline is None}


def drifted(directory: Path, factory: DriverFactory) -> list[str]:
    """Vector files missing, different from what the cases generate, or no longer generated."""
    expected = generate(factory)
    present = {path.name for path in directory.glob("*.json")}
    stale = [name for name, text in expected.items()
             if not (directory / name).is_file() or (directory / name).read_text("utf-8") != text]
    return sorted(stale + sorted(present - expected.keys()))


class VectorManifest(BaseModel):
    """What a vector says about itself (spec/schemas/Vector.json)."""

    model_config = ConfigDict(extra="allow")

    format: Annotated[Literal[2], INTEGER]
    case: str = Field(min_length=1)
    title: str = ""
    source: str = ""
    suite_version: str = ""
    requirements: list[str] = Field(default_factory=list)
    needs: list[str] = Field(default_factory=list, description=(
        "the driver capabilities the scenario needs; a driver without one reports the vector "
        "unsupported"))


OBSERVED = ("model_requests", "tools_executed", "hook_calls", "hook_decisions", "run_endings",
            "restarts", "retained", "history_reads")
"""The observations every vector of a scenario that runs carries (``_observations``)."""


class Expected(BaseModel):
    """A vector's expectation: the refusal code of a scenario a driver must refuse, or every
    observation of one it must run — never empty, never partial, so a vector cut short cannot
    pass against anything (it is reported unread)."""

    model_config = ConfigDict(extra="forbid")

    refusal: ErrorCode | None = Field(default=None, description=(
        "the code of the closed set a driver refuses the scenario with"))
    model_requests: list[dict[str, Any]] | None = None
    tools_executed: list[list[Any]] | None = None
    hook_calls: list[list[Any]] | None = None
    hook_decisions: list[list[Any]] | None = None
    run_endings: list[list[Any]] | None = None
    restarts: list[list[Any]] | None = None
    retained: list[list[Any]] | None = None
    history_reads: list[list[Any]] | None = None
    model_usage: list[list[Any]] | None = None
    sessions_opened: list[list[Any]] | None = None
    workflow: dict[str, list[Any]] | None = None

    @model_validator(mode="after")
    def _whole(self) -> "Expected":
        given = {key for key in OBSERVED if getattr(self, key) is not None}
        if self.refusal is not None:
            if given or self.model_usage or self.sessions_opened or self.workflow:
                raise ValueError("a refusal is expected alone, without observations")
        elif len(given) < len(OBSERVED):
            missing = ", ".join(key for key in OBSERVED if key not in given)
            raise ValueError(f"observations missing: {missing} (an expectation is a refusal "
                             "or every observation)")
        return self


class Vector(BaseModel):
    """A golden vector file (spec/schemas/Vector.json): manifest, scenario, expected."""

    model_config = ConfigDict(extra="forbid")

    manifest: VectorManifest
    scenario: dict[str, Any] = Field(description="a scenario document (Scenario.json)")
    expected: Expected


def vector_schema() -> dict[str, Any]:
    return Vector.model_json_schema()


def read_vector(data: bytes) -> Vector:
    """A vector file's document, validated whole, or :class:`DocumentError` with the reason
    (the field, the rule and the value)."""
    document = json_document(data, "vector")
    problem = json_problem(document, "vector")
    if problem is not None:
        raise DocumentError(problem)
    if isinstance(document, dict) and isinstance(document.get("manifest"), dict):
        version = document["manifest"].get("format")
        if isinstance(version, int) and not isinstance(version, bool) \
                and version != VECTOR_FORMAT:
            raise DocumentError(f"vector format {version!r}, this runner reads {VECTOR_FORMAT}")
    try:
        return Vector.model_validate_json(json.dumps(document), strict=True)
    except ValidationError as error:
        raise DocumentError(validation_problems(error, "vector")) from None


@dataclass(frozen=True)
class Replayed:
    name: str
    status: str
    """passed, failed, unsupported, error — or unread (the file was not a vector we can read)."""
    detail: str


def replay(directory: Path, factory: DriverFactory,
           progress: Callable[[Replayed], None] | None = None) -> list[Replayed]:
    """Run every vector file of ``directory`` against a driver and compare its observations;
    a file that is not a readable vector of this format is reported ``unread``, never skipped
    silently."""
    results: list[Replayed] = []
    for path in sorted(directory.glob("*.json")):
        result = _replay_one(path, factory)
        results.append(result)
        if progress is not None:
            progress(result)
    return results


def _replay_one(path: Path, factory: DriverFactory) -> Replayed:
    try:
        document = read_vector(read_regular(path, MAX_DOCUMENT_BYTES))
    except OSError as failure:
        return Replayed(path.name, "unread", f"not readable: {failure.strerror}")
    except DocumentError as failure:
        return Replayed(path.name, "unread", str(failure))
    scenario = document.scenario
    expected = document.expected.model_dump(mode="json", exclude_none=True)
    driver = factory()
    missing = sorted(set(document.manifest.needs) - declared(driver.capabilities))
    if missing:
        return Replayed(path.name, "unsupported", f"the driver lacks {', '.join(missing)}")
    refusal = None if document.expected.refusal is None else document.expected.refusal.value
    try:
        seen = observations(scenario_trace(driver, scenario))
    except Exception as failure:
        if isinstance(refusal, str) and refusal in str(failure):
            return Replayed(path.name, "passed", "")
        return Replayed(path.name, "error", repr(failure))
    if refusal is not None:
        return Replayed(path.name, "failed", f"accepted a scenario it must refuse with {refusal}")
    for key, value in expected.items():
        if seen.get(key) != value:
            return Replayed(path.name, "failed", f"{key} differ: first difference at "
                            f"{_first_difference(seen.get(key), value)}")
    return Replayed(path.name, "passed", "")


def _first_difference(seen: Any, expected: Any) -> str:
    if isinstance(seen, list) and isinstance(expected, list):
        for index, (a, b) in enumerate(zip(seen, expected, strict=False)):
            if a != b:
                return f"item {index}: expected {b!r}, saw {a!r}"
        return f"length: expected {len(expected)}, saw {len(seen)}"
    return f"expected {expected!r}, saw {seen!r}"


__all__ = ["OBSERVED", "VECTORS", "Expected", "Replayed", "Vector", "VectorManifest", "drifted",
           "generate", "observations", "read_vector", "replay", "vector_schema"]
