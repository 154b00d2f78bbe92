"""Scenarios: a declarative, JSON-serialisable description of an agent, the user's stimuli and
the scripted model, tool and hook responses, plus triggers that fire on events (§12 needs
"when compaction chunk 2 is requested, supplement X" and "when tool T starts, stop").

This module holds the document's frame (the Agent, the steps, a workflow, the triggers, a crash)
and reads it whole; the scripted world's parts are in ``scripts.py`` and the ports that answer
from them in ``scripted.py``, both re-exported here. A malformed document is refused with the
path of the offending field (:class:`ScenarioError`). The JSON Schema of the format is
published as spec/schemas/Scenario.json; docs/scenarios.md documents it.
"""

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal
from uuid import UUID

from pydantic import Field, ValidationError, model_validator

from ctxspec.conformance.documents import (
    INTEGER,
    Doc,
    DocumentError,
    ScenarioError,
    json_document,
    json_problem,
    read_regular,
    validation_problems,
)
from ctxspec.conformance.phases import PHASES
from ctxspec.conformance.scripted import (
    ScriptedHooks,
    ScriptedModel,
    ScriptedMoments,
    ScriptedTools,
    Triggers,
)
from ctxspec.conformance.scripts import (
    PATCH_TARGETS,
    ArtifactDoc,
    CallDoc,
    ContextPatchDoc,
    HookDoc,
    HookItemDoc,
    ModelDoc,
    PayloadPatchDoc,
    ScriptDoc,
    ToolResultDoc,
    UsageDoc,
)
from ctxspec.limits import MAX_DOCUMENT_BYTES, shown
from ctxspec.reference.budget import BudgetConfig
from ctxspec.reference.commits import COMMIT_NAMES
from ctxspec.reference.ports import HookPoint, ToolSpec

SCENARIO_VERSION = 1


class ToolDoc(Doc):
    name: str = Field(min_length=1)
    schema_: dict[str, Any] = Field(default_factory=lambda: {"type": "object"}, alias="schema")

    def spec(self) -> ToolSpec:
        return ToolSpec(self.name, json.dumps({"name": self.name, "parameters": self.schema_},
                                              sort_keys=True))


class SharedFieldDoc(Doc):
    name: str = Field(min_length=1)
    text: str
    consumers: tuple[str, ...] = Field(min_length=1,
                                       description="roles that read and may write it")


class ExecutorDoc(Doc):
    system_prompt: str = "You carry out one task the Planner handed over."
    tools: tuple[ToolDoc, ...] = ()


AUDITOR = "auditor"
"""The audit caller a ``read_history`` of kind audit is when it names none; granted by default."""


class AgentDoc(Doc):
    """The Agent's resolved configuration (the platform's job is out of scope)."""

    system_prompt: str = "You are a helpful agent."
    window: int = Field(gt=0)
    output_reserve: int | None = Field(default=None, gt=0)
    max_output: int | None = Field(default=None, gt=0)
    safety_margin: int | None = Field(default=None, gt=0)
    trigger_ratio: str = "0.80"
    summary_target: int | None = Field(default=None, gt=0)
    provider_output_limit: int | None = Field(default=None, gt=0)
    recent_runs: int = Field(default=2, ge=0)
    loop_limit: int = Field(default=8, ge=1, description=(
        "business Loops per Run, its root role's and every Executor execution's together"))
    run_deadline: int | None = Field(default=None, ge=1)
    model_attempts: int = Field(default=2, ge=1)
    tool_quota: int | None = Field(default=None, ge=0)
    persistent_sandbox: bool = False
    """Keep the workspace files when a Run ends (without it they are deleted, §1)."""
    custom_compaction_prompt: str | None = None
    tools: tuple[ToolDoc, ...] = ()
    shared: tuple[SharedFieldDoc, ...] = ()
    """Run-level shared fields, each registered for named consumer roles (§3)."""
    executor: "ExecutorDoc | None" = None
    """Set for a Planner: its ``delegate`` calls (task, constraints, materials) run Executors."""
    estimator: Literal["bytes", "chars", "content"] = "bytes"
    audit_readers: tuple[str, ...] = Field(default=(AUDITOR,), description=(
        "the audit callers the Agent grants history reads (§1, §11); a read_history of kind "
        "audit names its caller in role, AUDITOR by default"))

    def budget(self) -> BudgetConfig:
        return BudgetConfig(window=self.window, output_reserve=self.output_reserve,
                            known_max_output=self.max_output, safety_margin=self.safety_margin,
                            trigger_ratio=self.trigger_ratio, summary_target=self.summary_target,
                            provider_output_limit=self.provider_output_limit)


class AgentNodeDoc(Doc):
    name: str = Field(min_length=1)
    agent: AgentDoc
    model: ScriptDoc = ScriptDoc()
    question_key: str = Field(min_length=1)
    output_key: str = Field(min_length=1)
    on_error: str = "error"


class CapabilityNodeDoc(Doc):
    name: str = Field(min_length=1)
    tool: str = Field(min_length=1)
    input: dict[str, str] = Field(default_factory=dict,
                                  description="tool argument → graph state key")
    output_key: str = Field(min_length=1)


class NodeDoc(Doc):
    agent_node: AgentNodeDoc | None = None
    capability_node: CapabilityNodeDoc | None = None

    @model_validator(mode="after")
    def _one(self) -> "NodeDoc":
        if (self.agent_node is None) == (self.capability_node is None):
            raise ValueError("a node is exactly one of: agent_node, capability_node")
        return self


class WorkflowDoc(Doc):
    """A WorkflowSession: its inputs go through the outer input mapping (§2)."""

    input: dict[str, Any] = Field(default_factory=dict)
    input_mapping: dict[str, str] = Field(default_factory=dict,
                                          description="input name → graph state key")
    stages: tuple[tuple[NodeDoc, ...], ...] = Field(min_length=1)
    stop_after: str | None = Field(default=None, description=(
        "the root Run's stop arrives once this node finished"))
    deadline: int | None = Field(default=None, ge=1, description=(
        "the root Run's deadline: logical ticks for the whole tree (one per model call and "
        "tool run of any node)"))
    loop_limit: int | None = Field(default=None, ge=1, description=(
        "the root Run's Loop budget: business Loops of all AgentNode invocations together"))

    @model_validator(mode="after")
    def _names(self) -> "WorkflowDoc":
        names = [n.agent_node.name if n.agent_node is not None else
                 n.capability_node.name if n.capability_node is not None else ""
                 for stage in self.stages for n in stage]
        if len(set(names)) != len(names):
            raise ValueError("node names are unique in a workflow")
        if self.stop_after is not None and self.stop_after not in names:
            raise ValueError(f"stop_after {self.stop_after!r} names no node")
        return self


class HistoryReadDoc(Doc):
    """A call of the history API (§11): who asks, for which Session."""

    kind: Literal["role", "audit", "script"]
    role: str | None = None
    session: Literal["own", "other"] = "own"
    bodies: bool = Field(default=False, description=(
        "trace each served record's text, and the full body behind a bounded preview's "
        "result_ref as the caller reads it, as characters and SHA-256 (§6; needs the driver "
        "capability history_bodies)"))
    content: Literal["raw", "effective"] | None = Field(default=None, description=(
        "what to read: the effective version (a role's default and only choice) or the raw "
        "records (audit's default); Q81"))
    node_task: int | None = Field(default=None, ge=1, description=(
        "read only the n-th Executor execution of the Session (audit; its context is "
        "private)"))


class WriteDoc(Doc):
    """An independent writer's correction of a record of the active Run (§9): capability
    ``writer``."""

    target: str = Field(min_length=1, description="a record id, or question, first_assistant, "
                        "last")
    field: str = Field(min_length=1, description="a registered field of the record, e.g. text")
    value: Any

    @model_validator(mode="after")
    def _known_target(self) -> "WriteDoc":
        if self.target not in WRITE_TARGETS:
            try:
                UUID(self.target)
            except ValueError:
                raise ValueError(f"target: a record id or one of {', '.join(WRITE_TARGETS)} "
                                 f"(got {shown(self.target)})") from None
        return self


WRITE_TARGETS = ("question", "first_assistant", "last")
"""The records a writer step may name instead of an id."""


class StepDoc(Doc):
    ask: str | None = None
    supplement: str | None = None
    advance: bool = False
    stop: bool = False
    read_history: HistoryReadDoc | None = None
    """Needs the driver capability ``history_api``; traced as ``history_read``."""
    observe_retention: bool = False
    """Needs ``retention``; traces the working files left and the records kept."""
    delete_agent: bool = False
    """Needs ``retention``: delete the Agent and all its records (§12 row 24)."""
    new_session: bool = False
    """Needs ``sessions``: open another Session of the same Agent, on the same store and the
    same Agent workspace, ending nothing; the later steps talk to it (traced as
    ``session_opened``)."""
    write: WriteDoc | None = None
    """Needs ``writer``: another part of the application corrects a record of the active Run
    (as a trigger's action, while a compaction runs: §9's concurrent change)."""

    @model_validator(mode="after")
    def _one(self) -> "StepDoc":
        if sum([self.ask is not None, self.supplement is not None, self.advance, self.stop,
                self.read_history is not None, self.observe_retention,
                self.delete_agent, self.new_session, self.write is not None]) != 1:
            raise ValueError("a step is exactly one of: ask, supplement, advance, stop, "
                             "read_history, observe_retention, delete_agent, new_session, "
                             "write")
        return self


class OnDoc(Doc):
    purpose: Literal["business", "compaction"] | None = None
    tool: str | None = None
    moment: Literal["freeze", "first_output", "raw_saved", "batch_call", "hook"] | None = Field(
        default=None, description="a boundary of the loop (docs/scenarios.md)")
    ordinal: int = Field(ge=1)

    @model_validator(mode="after")
    def _one(self) -> "OnDoc":
        if sum(x is not None for x in (self.purpose, self.tool, self.moment)) != 1:
            raise ValueError("a trigger fires on a model request (purpose), a tool (tool) or a "
                             "moment of the loop (moment)")
        return self


class TriggerDoc(Doc):
    on: OnDoc
    do: StepDoc

    @model_validator(mode="after")
    def _in_session(self) -> "TriggerDoc":
        if self.do.new_session:
            raise ValueError("a trigger acts inside the Session it fires in: new_session is a "
                             "step of its own")
        # A trigger fires inside a Run: a question then would meet an active Run, and the Agent
        # cannot be deleted under the Run that is using it (Q106).
        if self.do.ask is not None or self.do.delete_agent:
            raise ValueError("a trigger fires inside a Run: ask and delete_agent are steps of "
                             "their own")
        return self


class CrashDoc(Doc):
    """Kill the runtime just before or after the n-th time it passes a phase the design names
    (conformance/phases.py), then restart it on the same store (§10). ``commit`` names one of
    the reference's own commits instead (docs/recovery.md): for the reference's tests only."""

    phase: str | None = None
    commit: str | None = Field(default=None, min_length=1)
    occurrence: int = Field(default=1, ge=1)
    when: Literal["before", "after", "fails"] = Field(default="after", description=(
        "before or after the commit the process dies; fails: the store refuses the commit "
        "(rolled back whole) and the runtime must stop on it (driver capability "
        "commit_failures)"))

    @model_validator(mode="after")
    def _known(self) -> "CrashDoc":
        if (self.phase is None) == (self.commit is None):
            raise ValueError("a crash names a phase (or, for the reference, a commit)")
        if self.phase is not None and self.phase not in PHASES:
            raise ValueError(f"phase {self.phase!r} is not one of {', '.join(PHASES)}")
        if self.commit is not None and self.commit not in COMMIT_NAMES:
            raise ValueError(f"commit {self.commit!r} is not one of {', '.join(COMMIT_NAMES)}")
        return self


class Scenario(Doc):
    """A scenario document (JSON). Over the stdio protocol (version 2) it arrives with every
    default of this schema filled in: each field present, ``null`` where its default is
    none (docs/stdio-protocol.md)."""

    scenario_version: Annotated[Literal[1], INTEGER]
    name: str = Field(min_length=1)
    description: str = ""
    agent: AgentDoc
    steps: tuple[StepDoc, ...] = ()
    workflow: WorkflowDoc | None = None
    model: ScriptDoc = ScriptDoc()
    tools: dict[str, tuple[ToolResultDoc, ...]] = Field(default_factory=dict)
    hooks: tuple[HookDoc, ...] = ()
    triggers: tuple[TriggerDoc, ...] = ()
    crash: CrashDoc | None = None

    @model_validator(mode="after")
    def _steps_or_workflow(self) -> "Scenario":
        if bool(self.steps) == (self.workflow is not None):
            raise ValueError("a scenario has either steps (one Agent's Session) or a workflow")
        # A workflow's root Run takes the user's stop only: its inputs go through the input
        # mapping, never as questions or supplements (§2).
        if self.workflow is not None and any(not t.do.stop for t in self.triggers):
            raise ValueError("a workflow's triggers do stop only")
        _check_order(self.steps)
        return self


_AFTER_DELETE = ("observe_retention", "read_history")


def _check_order(steps: Sequence[StepDoc]) -> None:
    """Steps the runtime could not take, refused before anything runs (Q106): a question while
    the previous one's Run has not been advanced to its end, and anything but an observation
    once the Agent is deleted."""
    active, deleted = False, False
    for number, step in enumerate(steps):
        if deleted and not (step.observe_retention or step.read_history is not None):
            raise ValueError(f"steps[{number}]: the Agent was deleted by an earlier step; only "
                             f"{' and '.join(_AFTER_DELETE)} may follow")
        if step.ask is not None:
            if active:
                raise ValueError(f"steps[{number}]: ask while the previous question's Run is "
                                 "active; an advance runs it to its end first")
            active = True
        elif step.advance or step.new_session:
            active = False
        elif step.delete_agent:
            deleted = True


def parse_scenario(document: Mapping[str, Any] | str | bytes) -> Scenario:
    """A scenario from JSON text or a JSON-ready mapping, validated whole before anything runs.
    Strict: a number is a JSON integer (never ``true``, ``"128"`` or ``128.0``), every integer
    within ±MAX_TOKENS, text valid Unicode (no lone surrogate), nesting at most MAX_DEPTH."""
    try:
        value = json_document(document, "scenario") if isinstance(document, str | bytes) \
            else document
    except DocumentError as error:
        raise ScenarioError(str(error)) from None
    problem = json_problem(value, "scenario")
    if problem is not None:
        raise ScenarioError(problem)
    try:
        return Scenario.model_validate_json(json.dumps(value), strict=True)
    except ValidationError as error:
        raise ScenarioError(validation_problems(error, "scenario")) from None


def filled_in(document: Mapping[str, Any]) -> dict[str, Any]:
    """The document with every default this schema gives filled in, as the stdio protocol
    sends it (docs/stdio-protocol.md): what it means is unchanged (it parses to the same
    scenario), and a runtime in another language need not know our defaults. A document this
    schema refuses is given back as written, for the runtime to refuse."""
    try:
        return parse_scenario(document).model_dump(mode="json", by_alias=True)
    except ScenarioError:
        return dict(document)


def load_scenario(path: Path) -> Scenario:
    try:
        data = read_regular(path, MAX_DOCUMENT_BYTES)
    except OSError as error:
        raise ScenarioError(f"{path}: {error.strerror}") from None
    except DocumentError as error:
        raise ScenarioError(f"{path}: {error}") from None
    return parse_scenario(data)


def scenario_schema() -> dict[str, Any]:
    return Scenario.model_json_schema(by_alias=True)


__all__ = [
    "AUDITOR",
    "PATCH_TARGETS",
    "SCENARIO_VERSION",
    "AgentDoc",
    "ArtifactDoc",
    "CallDoc",
    "ContextPatchDoc",
    "CrashDoc",
    "ExecutorDoc",
    "HistoryReadDoc",
    "HookDoc",
    "HookItemDoc",
    "HookPoint",
    "ModelDoc",
    "NodeDoc",
    "OnDoc",
    "PayloadPatchDoc",
    "Scenario",
    "ScenarioError",
    "ScriptDoc",
    "ScriptedHooks",
    "ScriptedModel",
    "ScriptedMoments",
    "ScriptedTools",
    "SharedFieldDoc",
    "StepDoc",
    "ToolDoc",
    "ToolResultDoc",
    "TriggerDoc",
    "Triggers",
    "UsageDoc",
    "WorkflowDoc",
    "WriteDoc",
    "filled_in",
    "load_scenario",
    "parse_scenario",
    "scenario_schema",
]
