"""The scripted ports: the model, tool, hook and moment ports a driver hands its runtime, answering
from a scenario's scripts (``scripts.py``) and firing its triggers. Scripted model responses are
keyed by purpose and taken in order, so inserting a compaction never shifts the business script;
a script that runs out raises ``ScriptExhausted`` naming the purpose and the request number.
``scenario.py`` re-exports these names.
"""

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any
from uuid import UUID

from ctxspec.conformance.documents import ScenarioError
from ctxspec.conformance.scripts import (
    PATCH_TARGETS,
    HookDoc,
    HookItemDoc,
    ScriptDoc,
    ToolResultDoc,
)
from ctxspec.reference.contracts import PatchOperationKind
from ctxspec.reference.hooks import ContextOp, PayloadOp
from ctxspec.reference.ports import (
    Artifact,
    Complete,
    HookContext,
    HookPoint,
    HookReply,
    ModelCall,
    ModelOutcome,
    Moment,
    ScriptExhausted,
    ToolOutcome,
)
from ctxspec.reference.registry import ABSENT, JSON

if TYPE_CHECKING:  # the trigger documents are part of scenario.py, which imports this module
    from ctxspec.conformance.scenario import TriggerDoc


class Triggers:
    """Fires scenario triggers on events; ``act`` performs a step on the driver."""

    def __init__(self, triggers: Sequence["TriggerDoc"]) -> None:
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
    scopes = {patch.scope for patch in item.context_patch}  # one, checked when read
    scope = scopes.pop() if scopes else "own"
    # A stale item names the revision its chain started from — of the scope it patches: the
    # shared scope has revisions of its own (§3 "共享字段与私有 context 使用各自 revision").
    base = (context.shared_revision if scope == "shared" else context.revision) \
        if item.stale_base else None
    return HookReply(item.decision, payload, tuple(ops), base, item.fails, scope)
