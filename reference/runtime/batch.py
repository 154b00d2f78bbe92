"""The NodeDriver's tool batch and its Executors (§1, §2, §5, §6, §10, §11): every call of a
model decision settles — its pre-call chain, the execution gate, the handler with the effective
arguments or an Executor execution for a Planner's ``delegate`` call, the post-call chain — and
the results are fed back once, in action order. Members a crashed incarnation settled are
reused, never run again.
"""

import json
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING
from uuid import UUID

from ctxspec.reference.contracts import (
    ContextRecord,
    MessageRole,
    MutationSourceKind,
    OperationPurpose,
    OperationState,
    RunStatus,
)
from ctxspec.reference.effective import (
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
from ctxspec.reference.runtime import trace as tr
from ctxspec.reference.runtime.pipeline import artifact_text
from ctxspec.reference.runtime.session import (
    DELEGATE_TOOL,
    READ_TOOL,
    RunState,
)
from ctxspec.reference.runtime.store import (
    Write,
)

if TYPE_CHECKING:
    from ctxspec.reference.runtime.node_driver import NodeDriver


class ToolBatch:
    """One model decision's tool calls, settled and fed back (§6, §10)."""

    def __init__(self, driver: "NodeDriver") -> None:
        self.driver = driver
        self.s = driver.s
        self.context = driver.context
        self.pipeline = driver.pipeline

    def run(self, run: RunState, decision_id: UUID, call_ids: Sequence[UUID],
               settled: Mapping[str, JSON] | None = None, started: str | None = None,
               hooked: Mapping[str, JSON] | None = None,
               delegations: Mapping[str, JSON] | None = None,
               unprocessed: Mapping[str, JSON] | None = None) -> None:
        """§6, §10: every call settles (pre-hook, handler with the effective arguments,
        post-hook); the results are fed back once, in action order. ``settled`` holds the
        members a crashed incarnation settled already: they are reused, never run again."""
        results: list[tuple[UUID, dict[str, JSON]]] = []
        done: dict[str, JSON] = dict(settled or {})
        decided: dict[str, JSON] = dict(hooked or {})
        delegated: dict[str, JSON] = dict(delegations or {})
        """call_id → the context of the Executor execution started for it."""
        """call_id → its committed pre-call decision (blocked, hook id, candidate)."""
        raws: dict[str, JSON] = dict(unprocessed or {})
        """call_id → the saved raw result of a call whose post-call chain is not decided."""

        def position(**facts: JSON) -> list[Write]:
            return [self.s.checkpoint(run, "batch", decision=str(decision_id), settled=done,
                                     hooked=decided, delegated=delegated, raw=raws, **facts)]

        for call_id in call_ids:
            reused = done.get(str(call_id))
            if isinstance(reused, dict):
                results.append((call_id, reused))
                continue
            if str(call_id) in raws:  # ran and saved before a takeover: post-processed now
                results.append((call_id, self.pipeline.post_call(
                    run, decision_id, call_id, raws, done, position)))
                continue
            if started == str(call_id) and not self.s.agent.retry_unknown_tools:
                # It started before the crash and its result was never saved: its external
                # effect is unknown; never reported as a success (§10).
                unknown: dict[str, JSON] = {"text": structured_error(
                    ErrorCode.UNKNOWN_OUTCOME, "the call started before a takeover and its result "
                    "was never saved; whether it took effect is unknown")}
                results.append((call_id, unknown))
                done[str(call_id)] = unknown
                continue
            state = self.s.contexts[run.context_id]
            current = next(r for r in effective_records(state) if r.record_id == decision_id)
            call = next(c for c in current.tool_calls if c.call_id == call_id)
            arguments: dict[str, JSON] = json.loads(call.arguments)
            proposed = dict(arguments)
            payload: dict[str, JSON] = {"name": call.name, "arguments": arguments}
            earlier = decided.get(str(call_id))
            blocked: dict[str, JSON] | None = None
            if isinstance(earlier, dict):
                # Decided before a takeover: reuse the committed decision; the effective
                # arguments are already in the effective record.
                if earlier.get("blocked") is True:
                    blocked = earlier
            elif not self.driver.asks_pre_call(run):
                break  # the call will never run: its pre-call hook is not asked (Q80)
            else:
                def remember(chain: ChainOutcome | None, key: str = str(call_id)) -> list[Write]:
                    if chain is None:  # no hook answered: nothing blocks, nothing to re-ask
                        decided[key] = {"blocked": False}
                        return position()
                    last = chain.items[-1]
                    decided[key] = {"blocked": chain.blocked,
                                    "hook_invocation_id": str(last.invocation.hook_invocation_id),
                                    "candidate": dict(last.candidate_payload)}
                    return position()

                chain = self.pipeline.run_hooks("tool.pre_call", run, payload, call_id, decision_id,
                                    extra=remember)
                if chain is not None:
                    raw_arguments = dict(chain.payload).get("arguments")
                    arguments = raw_arguments if isinstance(raw_arguments, dict) else arguments
                    entry = decided[str(call_id)]
                    if chain.blocked and isinstance(entry, dict):
                        blocked = entry
            self.s.moments.at("batch_call")
            owner = run.parent or run
            quota = self.s.agent.tool_quota
            deadline = self.s.agent.run_deadline
            verdict = execution_gate(ChainOutcome((), {}, {}, blocked is not None), GateChecks(
                tool_allowed=any(t.name == call.name for t in self.context.tools_of(run)),
                quota_left=1 if quota is None else quota - owner.tool_calls_made,
                deadline_passed=deadline is not None
                and self.s.clock.now() - owner.started_at_tick >= deadline,
                stopped=run.stop_requested or owner.stop_requested))
            if verdict == "stopped":
                break  # the Run stops mid-batch: what ran is kept; the rest stays unanswered
            raw_call = state.record(decision_id)
            malformed = raw_call is not None and isinstance(
                entry := raw_call.content.get(f"tool_call:{call_id}"), dict) \
                and entry.get("malformed_arguments") is not None
            problems = self.pipeline.argument_problems(run, call.name, arguments, malformed) \
                if verdict == "execute" else ()
            if problems:  # a format error: the business role's next Loop corrects it (Q82)
                results.append((call_id, {"text": structured_error(
                    "INVALID_ARGUMENTS", f"{call.name} was not run: {'; '.join(problems)}")}))
                continue
            if verdict != "execute":
                if verdict == "denied" and blocked is not None:
                    candidate = blocked.get("candidate")
                    text = denial_feedback("pre", UUID(str(blocked["hook_invocation_id"])),
                                           candidate if isinstance(candidate, dict) else {})
                else:
                    text = structured_error(verdict.upper(), f"{call.name} was not run")
                results.append((call_id, {"text": text}))
                continue
            if call.name == DELEGATE_TOOL and run.parent is None and self.s.agent.executor:
                def settle(text: str, key: str = str(call_id)) -> list[Write]:
                    done[key] = {"text": text}
                    return position()

                def begin(context_id: UUID, key: str = str(call_id)) -> list[Write]:
                    delegated[key] = str(context_id)
                    return position()
                running = delegated.get(str(call_id))
                handed = self.delegate(run, call_id, arguments, begin, settle,
                                        UUID(running) if isinstance(running, str) else None)
                if handed is None:
                    return  # the Executor's context error ended the whole invocation
                results.append((call_id, {"text": handed}))
                continue
            self.s.commit("TOOL_STARTED", position(started=str(call_id)))
            self.s.clock.tick()
            owner.tool_calls_made += 1
            outcome = self.pipeline.read_result(run, arguments) if call.name == READ_TOOL else \
                self.s.tools.run(call.name, arguments, self.s.ordinal(f"tool:{call.name}"))
            self.s.trace.add(tr.ToolExecuted(call_id, call.name, arguments, proposed,
                                           "error" if outcome.error else "ok",
                                           outcome.latency))
            text = structured_error("TOOL_ERROR", outcome.error) if outcome.error \
                else outcome.text
            self.s.workspace.update(outcome.workspace_writes)
            if outcome.artifact is not None and not outcome.error:
                text = artifact_text(outcome.artifact)
            tool_operation = self.s.new_id()
            self.s.put_operation(tool_operation, run, OperationPurpose.TOOL, f"tool:{call_id}",
                            OperationState.FAILED if outcome.error else OperationState.SUCCEEDED,
                            self.s.ref(text))
            # Only the raw result is settled here; the post-call chain makes the effective one
            # (§3 "保存 raw_result，再提交 Hook 后有效结果"), so a takeover after this commit goes
            # on with that chain, never with the raw result (§10, §12 "原始结果保存后宕机").
            raws[str(call_id)] = {"text": text, "operation_id": str(tool_operation)}
            self.s.commit("TOOL_SETTLED", position())
            self.s.moments.at("raw_saved")
            results.append((call_id, self.pipeline.post_call(run, decision_id, call_id, raws, done,
                                                     position)))
        self.context.prepare_batch_delivery(run, results)
        self.s.commit("BATCH_FEEDBACK", [self.s.checkpoint(run, "loop_done")])
        if run.stop_requested:
            self.driver.end(run, RunStatus.STOPPED)

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
        if task is not None:  # restored after a takeover: continue where it stood
            checkpoint = self.s.resume.pop(task.context_id, None)
            if checkpoint is not None:
                self.driver.resume(task, checkpoint)
        else:
            task = self.start_execution(planner, call_id, arguments, begin)
        while task.status is RunStatus.RUNNING:
            self.driver.loop(task)
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
