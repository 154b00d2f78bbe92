"""The NodeDriver's tool batch and its Executors (§1, §2, §5, §6, §10, §11): every call of a
model decision settles — its pre-call chain, the execution gate, the handler with the effective
arguments or an Executor execution for a Planner's ``delegate`` call, the post-call chain — and
the results are fed back once, in action order. Members a crashed incarnation settled are
reused, never run again.
"""

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal
from uuid import UUID

from ctxspec.reference.contracts import (
    ContextRecord,
    MessageRole,
    MutationSourceKind,
    NodeCheckpoint,
    NodeStage,
    RunStatus,
)
from ctxspec.reference.effective import (
    ContextState,
    RawRecord,
    Scope,
    append_records,
    effective_records,
    new_context,
)
from ctxspec.reference.errors import ErrorCode
from ctxspec.reference.hooks import (
    ChainOutcome,
    GateChecks,
    denial_feedback,
    execution_gate,
)
from ctxspec.reference.protection import ProtectedInput
from ctxspec.reference.protocol import (
    structured_error,
)
from ctxspec.reference.registry import JSON
from ctxspec.reference.runtime.context_manager import settled_member
from ctxspec.reference.runtime.session import (
    DELEGATE_TOOL,
    RunState,
    SessionState,
)
from ctxspec.reference.runtime.store import (
    Write,
)
from ctxspec.reference.view import EffectiveRecord

if TYPE_CHECKING:
    from ctxspec.reference.runtime.node_driver import NodeDriver


@dataclass
class Position:
    """Where a batch stands, committed with each of its steps so a takeover goes on from it
    (§10): the members settled (call_id → result content), the committed pre-call decisions
    (blocked, hook id, candidate), the Executor executions started (call_id → context) and
    the raw results saved whose post-call chain is not decided."""

    session: SessionState
    run: RunState
    decision_id: UUID
    done: dict[str, JSON]
    decided: dict[str, JSON]
    delegated: dict[str, JSON]
    raws: dict[str, JSON]

    def checkpoint(self, **facts: JSON) -> NodeCheckpoint:
        return self.session.position(
            self.run, NodeStage.BATCH, decision=str(self.decision_id), settled=self.done,
            hooked=self.decided, delegated=self.delegated, raw=self.raws, **facts)

    def writes(self, **facts: JSON) -> list[Write]:
        return [self.session.record_position(self.run, self.checkpoint(**facts))]


def refusal(verdict: str, name: str, blocked: Mapping[str, JSON] | None) -> str:
    """What the model reads for a call the gate did not run: a deny's feedback with its
    candidate, or the gate's reason (§3, §6)."""
    if verdict == "denied" and blocked is not None:
        candidate = blocked.get("candidate")
        return denial_feedback("pre", UUID(str(blocked["hook_invocation_id"])),
                               candidate if isinstance(candidate, dict) else {})
    return structured_error(verdict.upper(), f"{name} was not run")


class ToolBatch:
    """One model decision's tool calls, settled and fed back (§6, §10)."""

    def __init__(self, driver: "NodeDriver") -> None:
        self.driver = driver
        self.s = driver.s
        self.context = driver.context
        self.pipeline = driver.pipeline

    def run(self, run: RunState, answer: EffectiveRecord, at: NodeCheckpoint
            ) -> NodeCheckpoint | None:
        """One step of ``answer``'s batch (§6, §10): its next member not settled settles —
        pre-hook, handler with the effective arguments, post-hook, each commit carrying the
        BATCH position — and the position with that member settled is the next one; once every
        member is settled, or a stop halts the batch, the results are fed back once in action
        order (BATCH_FEEDBACK, the LOOP_DONE position). ``at`` holds what the steps before, or
        a crashed incarnation, got to — members settled (reused, never run again), pre-call
        decisions, Executors started, raw results saved, the call started
        (:class:`Position`). None when the role ended."""
        position = Position(self.s, run, answer.record_id, dict(at.settled), dict(at.hooked),
                            dict(at.delegated), dict(at.raw))
        member = next((c.call_id for c in answer.tool_calls
                       if str(c.call_id) not in position.done), None)
        if member is not None:
            reused = self.reused(run, position, member, at.started)
            result = self.settle(run, position, member) if reused is None else reused
            if result == "ended":
                return None  # the Executor's context error ended the whole invocation
            if result != "stopped":  # the Run stops mid-batch: what ran is fed back
                position.done[str(member)] = result
                return position.checkpoint()
        results = [(c.call_id, settled) for c in answer.tool_calls
                   if isinstance(settled := position.done.get(str(c.call_id)), dict)]
        self.s.put_delta(self.context.prepare_batch_delivery(run, results))
        done = self.s.position(run, NodeStage.LOOP_DONE)
        self.s.commit("BATCH_FEEDBACK", [self.s.record_position(run, done)])
        return done

    def reused(self, run: RunState, position: "Position", call_id: UUID, started: str | None
               ) -> dict[str, JSON] | None:
        """A member a crashed incarnation got to: settled (reused), saved raw (post-processed
        now), or started with no saved result (unknown, §10); None for a fresh member."""
        key = str(call_id)
        reused = position.done.get(key)
        if isinstance(reused, dict):
            return reused
        if key in position.raws:  # ran and saved before a takeover: post-processed now
            return self.pipeline.post_call(run, position.decision_id, call_id, position.raws,
                                           position.done, position.writes)
        if started == key and not self.s.agent.retry_unknown_tools:
            # It started before the crash and its result was never saved: its external
            # effect is unknown; never reported as a success (§10).
            unknown = settled_member({"text": structured_error(
                ErrorCode.UNKNOWN_OUTCOME, "the call started before a takeover and its result "
                "was never saved; whether it took effect is unknown")})
            position.done[key] = unknown
            return unknown
        return None

    def settle(self, run: RunState, position: "Position", call_id: UUID
               ) -> dict[str, JSON] | Literal["stopped", "ended"]:
        """A fresh member: its pre-call chain, the execution gate, then the handler, an
        Executor, or the refusal the model reads (§3, §6, §11)."""
        state = self.s.contexts[run.context_id]
        current = next(r for r in effective_records(state)
                       if r.record_id == position.decision_id)
        call = next(c for c in current.tool_calls if c.call_id == call_id)
        arguments: dict[str, JSON] = json.loads(call.arguments)
        proposed = self.proposed_arguments(state, position.decision_id, call_id, arguments,
                                           isinstance(position.decided.get(str(call_id)), dict))
        asked = self.pre_call(run, position, call_id, call.name, dict(arguments))
        if asked is None:
            return "stopped"  # the call will never run: its pre-call hook is not asked (Q80)
        arguments, blocked = asked
        self.s.moments.at("batch_call")
        verdict = self.gate(run, call.name, blocked)
        if verdict == "stopped":
            return "stopped"  # the Run stops mid-batch: what ran is kept; the rest unanswered
        raw = state.record(position.decision_id)
        malformed = raw is not None and isinstance(
            entry := raw.content.get(f"tool_call:{call_id}"), dict) \
            and entry.get("malformed_arguments") is not None
        problems = self.pipeline.argument_problems(run, call.name, arguments, malformed) \
            if verdict == "execute" else ()
        if problems:  # a format error: the business role's next Loop corrects it (Q82)
            return settled_member({"text": structured_error(
                "INVALID_ARGUMENTS", f"{call.name} was not run: {'; '.join(problems)}")})
        if verdict != "execute":
            return settled_member({"text": refusal(verdict, call.name, blocked)})
        if call.name == DELEGATE_TOOL and run.parent is None and self.s.agent.executor:
            return self.delegated(run, position, call_id, arguments)
        self.pipeline.run_tool(run, call_id, call.name, arguments, proposed,
                               position.raws, position.writes)
        return self.pipeline.post_call(run, position.decision_id, call_id, position.raws,
                                       position.done, position.writes)

    def proposed_arguments(self, state: ContextState, decision_id: UUID, call_id: UUID,
                           arguments: Mapping[str, JSON], decided: bool) -> dict[str, JSON]:
        """The arguments the call is proposed with, before its pre-call chain: the effective
        ones as the chain is about to see them — or, once the chain was decided before a
        takeover (its change now in the effective record), the raw answer's, never the
        hook's (§3: the proposed input stays as proposed, Q163)."""
        raw = state.record(decision_id)
        entry = raw.content.get(f"tool_call:{call_id}") if raw is not None else None
        given = entry.get("arguments") if decided and isinstance(entry, dict) else None
        return dict(given) if isinstance(given, dict) else dict(arguments)

    def pre_call(self, run: RunState, position: "Position", call_id: UUID, name: str,
                 arguments: dict[str, JSON]
                 ) -> tuple[dict[str, JSON], dict[str, JSON] | None] | None:
        """The member's effective arguments and its blocking decision, if any: the committed
        decision of a crashed incarnation reused (its arguments are already in the effective
        record), or the pre-call chain asked and committed with the position; None when no
        hook may be asked any more (a stop, Q80)."""
        key = str(call_id)
        earlier = position.decided.get(key)
        if isinstance(earlier, dict):
            return arguments, earlier if earlier.get("blocked") is True else None
        if not self.driver.asks_pre_call(run):
            return None

        def remember(chain: ChainOutcome | None) -> list[Write]:
            if chain is None:  # no hook answered: nothing blocks, nothing to re-ask
                position.decided[key] = {"blocked": False}
                return position.writes()
            last = chain.items[-1]
            position.decided[key] = {
                "blocked": chain.blocked,
                "hook_invocation_id": str(last.invocation.hook_invocation_id),
                "candidate": dict(last.candidate_payload)}
            return position.writes()

        payload: dict[str, JSON] = {"name": name, "arguments": arguments}
        chain = self.pipeline.run_hooks("tool.pre_call", run, payload, call_id,
                                        position.decision_id, extra=remember)
        if chain is None:
            return arguments, None
        changed = dict(chain.payload).get("arguments")
        entry = position.decided[key]
        blocked = entry if chain.blocked and isinstance(entry, dict) else None
        return (changed if isinstance(changed, dict) else arguments), blocked

    def gate(self, run: RunState, name: str, blocked: dict[str, JSON] | None) -> str:
        """The execution gate (§3, §11): a blocking decision, the role's tools, the Run's
        quota, its deadline and a stop, in that order."""
        owner = run.parent or run
        quota = self.s.agent.tool_quota
        deadline = self.s.agent.run_deadline
        return execution_gate(ChainOutcome((), {}, {}, blocked is not None), GateChecks(
            tool_allowed=any(t.name == name for t in self.context.tools_of(run)),
            quota_left=1 if quota is None else quota - owner.tool_calls_made,
            deadline_passed=deadline is not None
            and self.s.clock.now() - owner.started_at_tick >= deadline,
            stopped=run.stop_requested or owner.stop_requested))

    def delegated(self, run: RunState, position: "Position", call_id: UUID,
                  arguments: Mapping[str, JSON]) -> dict[str, JSON] | Literal["ended"]:
        """A Planner's ``delegate`` call: its Executor execution, started or taken up again,
        its start and its end committed with the batch's position; the Executor's answer is
        the call's raw result, which goes through the post-call chain like any tool's (§3
        "保存 raw_result，再提交 Hook 后有效结果", §10 "每个并行能力调用或 Executor 分别保存原始
        结果及后处理进度")."""
        key = str(call_id)

        def settle(text: str) -> list[Write]:
            position.raws[key] = {"text": text}
            return position.writes()

        def begin(context_id: UUID) -> list[Write]:
            position.delegated[key] = str(context_id)
            return position.writes()
        running = position.delegated.get(key)
        handed = self.delegate(run, call_id, arguments, begin, settle,
                               UUID(running) if isinstance(running, str) else None)
        if handed is None:
            return "ended"
        return self.pipeline.post_call(run, position.decision_id, call_id, position.raws,
                                       position.done, position.writes)

    def delegate(self, planner: RunState, call_id: UUID, arguments: Mapping[str, JSON],
                  begin: Callable[[UUID], Sequence[Write]],
                  settle: Callable[[str], Sequence[Write]], running: UUID | None) -> str | None:
        """One Executor execution for a ``delegate`` call: its own NodeTask and RoleContext,
        its protected inputs exactly the hand-over (task, constraints, material refs), never the
        Planner's messages, prompt or undelivered supplements. Its final answer, or its failure,
        is this batch member's result (§1, §2, §5, §10), settled in the Planner's batch by the
        same commit that ends the execution: a finished execution is fetched after a takeover,
        never re-created; one that was running goes on from its own loop checkpoint.
        CTX-2.4, CTX-5.2, CTX-5.3, CTX-4.11"""
        task = next((t for t in self.s.tasks if t.context_id == running), None)
        if task is None:
            task = self.start_execution(planner, call_id, arguments, begin)
        # Restored after a takeover, it goes on from its own position, in the same loop.
        self.driver.run_role(task, self.s.positions.pop(task.context_id, None))
        if self.driver.ends_invocation(task):
            # §11, §8: a context or compaction error acts on the whole AgentInvocation — the
            # Executor is a NodeTask of it — so the direct Agent Run ends with it (Q77).
            self.driver.end(planner, task.status, ErrorCode(str(task.error_code)), task.message)
            return None
        text = task.final_text if task.status is RunStatus.SUCCEEDED and \
            task.final_text is not None else structured_error(
                task.error_code or task.status.value.upper(),
                task.message or f"the Executor ended {task.status.value}")
        self.s.commit("EXECUTION_ENDED", settle(text))
        return text

    def start_execution(self, planner: RunState, call_id: UUID, arguments: Mapping[str, JSON],
                         begin: Callable[[UUID], Sequence[Write]]) -> RunState:
        """A new Executor NodeTask with its private context holding the hand-over."""
        items: list[tuple[str, str]] = [("task", str(arguments.get("task", "")))]
        constraints = arguments.get("constraints", [])
        materials = arguments.get("materials", [])
        for kind, values in (("constraint", constraints), ("material_ref", materials)):
            if isinstance(values, list):
                items.extend((kind, str(v)) for v in values)
        handover = tuple(ProtectedInput(self.s.new_id(), position, f"{kind}: {text}")
                         for position, (kind, text) in enumerate(items, start=1))
        task = RunState(planner.run_id, planner.run_no, planner.question_input_id, self.s.new_id(),
                        self.s.clock.now(), role="executor", parent=planner, handover=handover)
        self.s.tasks.append(task)
        self.s.put_context(task.context_id, new_context(task.context_id,
                                                       Scope("private", "executor")), new=True)
        state = self.s.contexts[task.context_id]
        records = [RawRecord(ContextRecord(
            record_id=self.s.new_id(), context_id=task.context_id, context_seq=i,
            run_id=planner.run_id, role=MessageRole.USER, message_kind="user_ref",
            payload_ref=self.s.ref(item.text), operation_id=None, call_id=None,
            origin_input_id=item.input_id), {"text": item.text})
            for i, item in enumerate(handover, start=1)]
        self.s.put_context(task.context_id, append_records(
            state, records, mutation_id=self.s.new_id(), source_kind=MutationSourceKind.RUNTIME,
            source_ref=f"delegate:{call_id}").state)
        self.s.commit("EXECUTION_STARTED", begin(task.context_id))
        return task
