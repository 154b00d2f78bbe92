"""Scenarios: a declarative, JSON-serialisable description of an agent, the user's stimuli and
the scripted model, tool and hook responses, plus triggers that fire on events (§12 needs
"when compaction chunk 2 is requested, supplement X" and "when tool T starts, stop").

Scripted model responses are keyed by purpose (business, compaction) and taken in order, so
inserting a compaction never shifts the business script; a script that runs out raises
:class:`ScriptExhausted` naming the purpose and the request number. A malformed document is
refused with the path of the offending field (:class:`ScenarioError`). The JSON Schema of the
format is published as spec/schemas/Scenario.json; docs/scenarios.md documents it.
"""

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ctxspec.conformance.documents import (
    INTEGER,
    DocumentError,
    json_document,
    json_problem,
    validation_problems,
)
from ctxspec.conformance.phases import PHASES
from ctxspec.limits import MAX_DOCUMENT_BYTES, shown
from ctxspec.reference.budget import BudgetConfig
from ctxspec.reference.commits import COMMIT_NAMES
from ctxspec.reference.contracts import PatchOperationKind
from ctxspec.reference.errors import ErrorCode
from ctxspec.reference.hooks import ContextOp, PayloadOp
from ctxspec.reference.ports import (
    Artifact,
    Complete,
    ContextLengthExceeded,
    Failed,
    HookContext,
    HookPoint,
    HookReply,
    ModelCall,
    ModelOutcome,
    Moment,
    PartialThenFailed,
    ProposedCall,
    ScriptExhausted,
    ToolOutcome,
    ToolSpec,
)
from ctxspec.reference.registry import ABSENT, JSON

SCENARIO_VERSION = 1


class _Doc(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ToolDoc(_Doc):
    name: str = Field(min_length=1)
    schema_: dict[str, Any] = Field(default_factory=lambda: {"type": "object"}, alias="schema")

    def spec(self) -> ToolSpec:
        return ToolSpec(self.name, json.dumps({"name": self.name, "parameters": self.schema_},
                                              sort_keys=True))


class SharedFieldDoc(_Doc):
    name: str = Field(min_length=1)
    text: str
    consumers: tuple[str, ...] = Field(min_length=1,
                                       description="roles that read and may write it")


class ExecutorDoc(_Doc):
    system_prompt: str = "You carry out one task the Planner handed over."
    tools: tuple[ToolDoc, ...] = ()


AUDITOR = "auditor"
"""The audit caller a ``read_history`` of kind audit is when it names none; granted by default."""


class AgentDoc(_Doc):
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


class CallDoc(_Doc):
    name: str = Field(min_length=1)
    arguments: dict[str, Any] = Field(default_factory=dict)
    id: str | None = Field(default=None, description=(
        "the provider's own call id (two calls may share one): never a platform key (§2)"))
    arguments_text: str | None = Field(default=None, description=(
        "the provider's raw argument text instead of arguments, e.g. malformed JSON"))

    @model_validator(mode="after")
    def _one_argument_form(self) -> "CallDoc":
        if self.arguments_text is not None and self.arguments:
            raise ValueError("a call gives arguments or arguments_text, not both")
        return self

    def proposed(self) -> ProposedCall:
        if self.arguments_text is None:
            return ProposedCall(self.name, self.arguments, self.id)
        try:
            parsed = json.loads(self.arguments_text)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            return ProposedCall(self.name, parsed, self.id)
        return ProposedCall(self.name, {}, self.id, self.arguments_text)


class UsageDoc(_Doc):
    """The actual usage a provider reports with a complete response (§7): audit data only."""

    input_tokens: int | None = Field(default=None, ge=0)
    output_tokens: int | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _some(self) -> "UsageDoc":
        if self.input_tokens is None and self.output_tokens is None:
            raise ValueError("a usage report gives input_tokens, output_tokens or both")
        return self


class ModelDoc(_Doc):
    """One scripted model response: exactly one of text, fail (optionally after partial), or
    context_length_exceeded; a response with text may report its actual ``usage``."""

    text: str | None = None
    tool_calls: tuple[CallDoc, ...] = ()
    reasoning: str | None = None
    usage: UsageDoc | None = None
    fail: str | None = None
    partial: str | None = None
    context_length_exceeded: bool = False
    run: int | None = Field(default=None, ge=1, description=(
        "with request: answer only this Run's (the n-th question's) request, whatever the "
        "order the runtime asks in"))
    request: int | None = Field(default=None, ge=1, description=(
        "with run: the k-th model Operation of this purpose and role in that Run"))
    attempt: int = Field(default=1, ge=1, description="with run and request: which attempt")

    @property
    def key(self) -> tuple[int, int, int] | None:
        """(run, request, attempt) of a keyed answer, None for one taken in order."""
        return None if self.run is None or self.request is None else (
            self.run, self.request, self.attempt)

    @model_validator(mode="after")
    def _keyed(self) -> "ModelDoc":
        if (self.run is None) != (self.request is None):
            raise ValueError("a keyed answer gives both run and request")
        if self.attempt != 1 and self.run is None:
            raise ValueError("attempt belongs to a keyed answer (run and request)")
        return self

    @model_validator(mode="after")
    def _one_kind(self) -> "ModelDoc":
        kinds = [self.text is not None, self.fail is not None, self.context_length_exceeded]
        if sum(kinds) != 1:
            raise ValueError("a model response is exactly one of: text, fail, "
                             "context_length_exceeded")
        if self.partial is not None and self.fail is None:
            raise ValueError("partial goes with fail: a partial stream then a failure")
        if self.tool_calls and self.text is None:
            raise ValueError("tool_calls belong to a response with text")
        if self.usage is not None and self.text is None:
            raise ValueError("usage belongs to a response with text")
        return self

    def outcome(self) -> ModelOutcome:
        if self.context_length_exceeded:
            return ContextLengthExceeded()
        if self.fail is not None:
            return PartialThenFailed(self.partial, self.fail) if self.partial is not None \
                else Failed(self.fail)
        usage = self.usage
        return Complete(self.text or "", tuple(c.proposed() for c in self.tool_calls),
                        self.reasoning,
                        output_tokens=None if usage is None else usage.output_tokens,
                        input_tokens=None if usage is None else usage.input_tokens)


class ScriptDoc(_Doc):
    """Responses by purpose and role: ``business`` for the root role (or Planner),
    ``executor`` for Executor executions, ``compaction`` for chunks of any role."""

    business: tuple[ModelDoc, ...] = ()
    executor: tuple[ModelDoc, ...] = ()
    compaction: tuple[ModelDoc, ...] = ()
    limit_output: bool = Field(default=False, description=(
        "the scripted provider honours each request's max_output_tokens: an answer whose "
        "output tokens (its usage.output_tokens, else one a character) exceed it is cut to "
        "that many characters, without tool calls, and reported cut (Q68)"))

    @model_validator(mode="after")
    def _keys_once(self) -> "ScriptDoc":
        for name in ("business", "executor", "compaction"):
            keys = [doc.key for doc in getattr(self, name) if doc.key is not None]
            if len(keys) != len(set(keys)):
                raise ValueError(f"{name}: two answers keyed to the same run, request and "
                                 "attempt")
        return self


class ArtifactDoc(_Doc):
    path: str = Field(min_length=1)
    media_type: str = Field(min_length=1)
    size_bytes: int = Field(ge=0)


class ToolResultDoc(_Doc):
    text: str = ""
    error: str | None = None
    artifact: ArtifactDoc | None = None
    workspace_writes: dict[str, str] = Field(default_factory=dict)
    latency: int | None = Field(default=None, ge=1, description=(
        "the logical time the call takes: calls of a batch run concurrently finish in latency "
        "order (ties in call order); the protocol order stays the action order (§2)"))


class PayloadPatchDoc(_Doc):
    path: str = Field(min_length=1)
    value: Any = None
    delete: bool = False


PATCH_TARGETS = ("call", "question", "last", "first_assistant")
"""The names a context_patch target may use besides ``shared:<field>`` and a record uuid."""


class ContextPatchDoc(_Doc):
    target: str = Field(min_length=1, description=(
        "call | question | last | first_assistant | shared:<field> | a record uuid"))
    field: str = Field(min_length=1, description="a field key; {call_id} is replaced")
    operation: Literal["replace_value", "append_annotation"] = "replace_value"
    value: Any = None
    scope: Literal["own", "shared"] = "own"

    @model_validator(mode="after")
    def _target(self) -> "ContextPatchDoc":
        # Checked when the scenario is read, so a bad target never surfaces half-way through a
        # run as an exception of the port (Q107).
        if self.target in PATCH_TARGETS or (self.target.startswith("shared:")
                                            and len(self.target) > len("shared:")):
            return self
        try:
            UUID(self.target)
        except ValueError:
            raise ValueError(f"target {shown(self.target)} is none of {', '.join(PATCH_TARGETS)}"
                             ", shared:<field> or a record uuid") from None
        return self


class HookItemDoc(_Doc):
    decision: str = "allow"
    payload_patch: tuple[PayloadPatchDoc, ...] = ()
    context_patch: tuple[ContextPatchDoc, ...] = ()
    fails: bool = False
    stale_base: bool = Field(default=False, description=(
        "patch against the revision the chain started from, ignoring what earlier items of the "
        "same chain committed"))

    @model_validator(mode="after")
    def _one_scope(self) -> "HookItemDoc":
        if len({patch.scope for patch in self.context_patch}) > 1:
            raise ValueError("one hook item's context_patch addresses one scope")
        return self


class HookDoc(_Doc):
    point: Literal["model.pre_request", "model.post_response", "tool.pre_call",
                   "tool.post_call", "compaction.pre_request", "compaction.post_response",
                   "capability.pre_call"]
    ordinal: int | None = Field(default=None, ge=1,
                                description="the n-th invocation of the point; None: every one")
    items: tuple[HookItemDoc, ...] = Field(min_length=1)


class AgentNodeDoc(_Doc):
    name: str = Field(min_length=1)
    agent: AgentDoc
    model: ScriptDoc = ScriptDoc()
    question_key: str = Field(min_length=1)
    output_key: str = Field(min_length=1)
    on_error: str = "error"


class CapabilityNodeDoc(_Doc):
    name: str = Field(min_length=1)
    tool: str = Field(min_length=1)
    input: dict[str, str] = Field(default_factory=dict,
                                  description="tool argument → graph state key")
    output_key: str = Field(min_length=1)


class NodeDoc(_Doc):
    agent_node: AgentNodeDoc | None = None
    capability_node: CapabilityNodeDoc | None = None

    @model_validator(mode="after")
    def _one(self) -> "NodeDoc":
        if (self.agent_node is None) == (self.capability_node is None):
            raise ValueError("a node is exactly one of: agent_node, capability_node")
        return self


class WorkflowDoc(_Doc):
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


class HistoryReadDoc(_Doc):
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


class WriteDoc(_Doc):
    """An independent writer's correction of a record of the active Run (§9): capability
    ``writer``."""

    target: str = Field(min_length=1, description="a record id, or question, first_assistant, "
                        "last")
    field: str = Field(min_length=1, description="a registered field of the record, e.g. text")
    value: Any


class StepDoc(_Doc):
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


class OnDoc(_Doc):
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


class TriggerDoc(_Doc):
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


class CrashDoc(_Doc):
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


class Scenario(_Doc):
    """A scenario document (JSON)."""

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


class ScenarioError(ValueError):
    """A malformed scenario: every problem with the path of its field, after our code
    SCENARIO_INVALID, so a driver in any language can refuse it the same way."""

    def __init__(self, problems: str) -> None:
        super().__init__(f"{ErrorCode.SCENARIO_INVALID}: {problems}")


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


def load_scenario(path: Path) -> Scenario:
    try:
        with path.open("rb") as file:
            data = file.read(MAX_DOCUMENT_BYTES + 1)
    except OSError as error:
        raise ScenarioError(f"{path}: {error.strerror}") from None
    if len(data) > MAX_DOCUMENT_BYTES:
        raise ScenarioError(f"{path}: larger than {MAX_DOCUMENT_BYTES} bytes")
    return parse_scenario(data)


# --- scripted ports ---------------------------------------------------------------------------


class Triggers:
    """Fires scenario triggers on events; ``act`` performs a step on the driver."""

    def __init__(self, triggers: Sequence[TriggerDoc]) -> None:
        self.triggers = triggers
        self.act: Any = None

    def fire(self, *, purpose: str | None = None, tool: str | None = None,
             moment: str | None = None, ordinal: int) -> None:
        for trigger in self.triggers:
            on = trigger.on
            matches = on.ordinal == ordinal and ((purpose is not None and on.purpose == purpose)
                                                 or (tool is not None and on.tool == tool)
                                                 or (moment is not None and on.moment == moment))
            if matches and self.act is not None:
                self.act(trigger.do)


class ScriptedMoments:
    """The world at the loop's boundaries: counts each moment the runtime reports, over the
    whole scenario (so a restarted runtime's moments go on counting), and fires its triggers."""

    def __init__(self, triggers: Triggers) -> None:
        self.triggers = triggers
        self.seen: dict[str, int] = {}

    def at(self, moment: Moment) -> None:
        ordinal = self.seen[moment] = self.seen.get(moment, 0) + 1
        self.triggers.fire(moment=moment, ordinal=ordinal)


class ScriptedModel:
    """Scripted answers per purpose, in request order. Within one runtime an attempt is never
    asked twice, so the same (purpose_key, attempt) asked again is a restarted runtime asking
    for an answer its dead predecessor received but never saved: the world gives the same answer
    again (and fires no trigger twice) rather than the next line of the script."""

    def __init__(self, script: ScriptDoc, triggers: Triggers,
                 run_no: Callable[[], int] = lambda: 0) -> None:
        every = {"business": script.business, "executor": script.executor,
                 "compaction": script.compaction}
        self.script = {key: [doc for doc in docs if doc.key is None]
                       for key, docs in every.items()}
        self.keyed = {(key, doc.key): doc for key, docs in every.items()
                      for doc in docs if doc.key is not None}
        """Answers keyed by (purpose, (run, request, attempt)): they answer exactly that
        request, so a runtime that asks in another order never shifts them (docs/scenarios.md)."""
        self.run_no = run_no
        self.operations: dict[tuple[str, int], list[str]] = {}
        """(purpose, run) → the purpose_keys of its Operations, in the order first asked."""
        self.limit_output = script.limit_output
        self.used = dict.fromkeys(self.script, 0)
        self.triggers = triggers
        self.answered: dict[tuple[str, int], ModelOutcome] = {}
        self.replays = 0
        """Answers given again: a runtime that re-asks a saved answer shows up here."""
        self.requests: dict[str, int] = {}
        """New requests seen, per purpose over the whole scenario (every role, every Session):
        the world counts them, not the runtime, so a restarted runtime (which counts from
        zero) or a second role reaching its own n-th request never fires a trigger twice."""

    def call(self, request: ModelCall) -> ModelOutcome:
        asked = (request.purpose_key, request.attempt)
        if asked in self.answered:
            self.replays += 1
            return self.answered[asked]
        ordinal = self.requests[request.purpose] = self.requests.get(request.purpose, 0) + 1
        self.triggers.fire(purpose=request.purpose, ordinal=ordinal)
        key = "executor" if request.purpose == "business" and request.role == "executor" \
            else request.purpose
        seen = self.operations.setdefault((key, self.run_no()), [])
        if request.purpose_key not in seen:
            seen.append(request.purpose_key)
        keyed = self.keyed.get((key, (self.run_no(), seen.index(request.purpose_key) + 1,
                                      request.attempt)))
        if keyed is not None:
            self.answered[asked] = self._limited(keyed.outcome(), request.max_output_tokens)
            return self.answered[asked]
        queue = self.script[key]
        index = self.used[key]
        if index >= len(queue):
            raise ScriptExhausted(f"the {key} model script ran out at request #{index + 1} "
                                  f"({request.purpose_key}, attempt {request.attempt})")
        self.used[key] = index + 1
        self.answered[asked] = self._limited(queue[index].outcome(), request.max_output_tokens)
        return self.answered[asked]

    def _limited(self, outcome: ModelOutcome, limit: int) -> ModelOutcome:
        """As a provider does, when the script asks for it: an answer over the request's
        max_output_tokens stops there, its calls never made, and says it was cut."""
        if not self.limit_output or not isinstance(outcome, Complete):
            return outcome
        spent = outcome.output_tokens if outcome.output_tokens is not None \
            else len(outcome.text)
        if spent <= limit:
            return outcome
        return Complete(outcome.text[:limit], (), outcome.reasoning, output_tokens=limit,
                        input_tokens=outcome.input_tokens, cut=True)


class ScriptedTools:
    """Scripted tool results per tool, in call order. The port counts the calls itself, so a
    runtime that runs a tool again after a takeover takes the next result (or runs out)."""

    def __init__(self, script: Mapping[str, Sequence[ToolResultDoc]], triggers: Triggers) -> None:
        self.script = {name: list(results) for name, results in script.items()}
        self.triggers = triggers
        self.calls: dict[str, int] = {}

    def run(self, name: str, arguments: Mapping[str, JSON], ordinal: int) -> ToolOutcome:
        ordinal = self.calls[name] = self.calls.get(name, 0) + 1
        self.triggers.fire(tool=name, ordinal=ordinal)
        results = self.script.get(name, [])
        if ordinal > len(results):
            raise ScriptExhausted(f"the script of tool {name!r} ran out at call #{ordinal}")
        result = results[ordinal - 1]
        artifact = None if result.artifact is None else Artifact(
            result.artifact.path, result.artifact.media_type, result.artifact.size_bytes)
        return ToolOutcome(result.text, result.error, artifact, dict(result.workspace_writes),
                           result.latency)


class ScriptedHooks:
    """Scripted hook items per point; the port counts each point's invocations itself."""

    def __init__(self, hooks: Sequence[HookDoc], triggers: Triggers | None = None) -> None:
        self.hooks = hooks
        self.invocations: dict[str, int] = {}
        self.triggers = triggers
        self.asked = 0
        """Chains asked, every point together: the ``hook`` moment's ordinal."""

    def registered(self, point: HookPoint) -> bool:
        return any(hook.point == point for hook in self.hooks)

    def items(self, context: HookContext) -> tuple[HookReply, ...]:
        ordinal = self.invocations[context.point] = self.invocations.get(context.point, 0) + 1
        self.asked += 1
        if self.triggers is not None:  # while the hook runs: its chain is asked, not answered
            self.triggers.fire(moment="hook", ordinal=self.asked)
        replies: list[HookReply] = []
        for hook in self.hooks:
            if hook.point != context.point or hook.ordinal not in (None, ordinal):
                continue
            replies.extend(_reply(item, context) for item in hook.items)
        return tuple(replies)


def _reply(item: HookItemDoc, context: HookContext) -> HookReply:
    call = str(context.call_id) if context.call_id else ""
    payload = tuple(PayloadOp(p.path, ABSENT if p.delete else p.value)
                    for p in item.payload_patch)
    ops = []
    for patch in item.context_patch:
        if patch.target == "call":
            target = context.record_id
        elif patch.target in context.records:
            target = context.records[patch.target]
        elif patch.target in PATCH_TARGETS or patch.target.startswith("shared:"):
            target = None  # a name with nothing behind it yet at this hook call
        else:
            target = UUID(patch.target)  # read as a uuid when the scenario was read
        if target is None:
            raise ScenarioError(f"context_patch target {patch.target!r} does not exist at "
                                f"this {context.point} call")
        ops.append(ContextOp(target, patch.field.replace("{call_id}", call),
                             PatchOperationKind(patch.operation), patch.value))
    base = context.revision if item.stale_base else None
    scopes = {patch.scope for patch in item.context_patch}  # one, checked when read
    return HookReply(item.decision, payload, tuple(ops), base, item.fails,
                     scopes.pop() if scopes else "own")


def scenario_schema() -> dict[str, Any]:
    return Scenario.model_json_schema(by_alias=True)


__all__ = [
    "SCENARIO_VERSION",
    "HookPoint",
    "Scenario",
    "ScenarioError",
    "ScriptedHooks",
    "ScriptedModel",
    "ScriptedMoments",
    "ScriptedTools",
    "Triggers",
    "load_scenario",
    "parse_scenario",
    "scenario_schema",
]
