"""The InvocationPipeline of §3: every call the runtime makes to the outside — a model attempt
(through the ModelGateway, the ``ModelPort``), a hook chain, a tool call — with what each
commits around it (§3 "InvocationPipeline --> CommitCoordinator : 调用及Hook命令", §6, §7,
§10).

- :meth:`InvocationPipeline.call_model` — one attempt of a frozen request, traced as sent; the
  provider's usage is traced beside the estimate and never read back (§7);
- :meth:`InvocationPipeline.run_hooks` — a hook chain marked running (HOOK_STARTED), its items
  normalised, validated and applied on the head revision by the core, committed with the
  decision (HOOK_DECISION) (§3, §10);
- :meth:`InvocationPipeline.run_tool` — a tool call (TOOL_STARTED, the handler with the
  effective arguments, TOOL_SETTLED) and :meth:`post_call`, its post-call chain (§3, §6, §10).
"""

import copy
import json
from collections.abc import Callable, Mapping, Sequence
from uuid import UUID

from ctxspec.reference.contracts import (
    HookStarted,
    OperationPurpose,
    OperationState,
)
from ctxspec.reference.effective import effective_records
from ctxspec.reference.hooks import (
    BudgetRoom,
    ChainOutcome,
    ChangeSet,
    HookCall,
    denial_feedback,
)
from ctxspec.reference.ports import (
    Artifact,
    Complete,
    HookContext,
    HookPoint,
    HookReply,
    ModelCall,
    ModelOutcome,
    Purpose,
    ToolOutcome,
)
from ctxspec.reference.protection import ProtectedInput
from ctxspec.reference.protocol import (
    argument_problems,
    read_range,
    structured_error,
)
from ctxspec.reference.registry import JSON
from ctxspec.reference.runtime import trace as tr
from ctxspec.reference.runtime.context_manager import ContextManager, settled_member
from ctxspec.reference.runtime.session import (
    READ_TOOL,
    RunState,
    SessionState,
    loop_key,
)
from ctxspec.reference.runtime.store import (
    Write,
    checkpoint_write,
    insert_doc,
)
from ctxspec.reference.snapshots import (
    view_hash,
)
from ctxspec.reference.tokens import PromptMessage
from ctxspec.reference.view import (
    ModelView,
    RenderedRequest,
)


class ModelGateway:
    """The model egress (§3 "进入 call_model 后，ModelManager / ModelGateway 使用已冻结有效请求，
    不自行选择最近几轮或删工具结果"): hands the request it is given — frozen, rendered and
    measured before — to the Session's ModelPort as it is. It selects no history, drops no
    result and renders nothing again; a retry sends the same request (§5)."""

    def __init__(self, session: SessionState) -> None:
        self.s = session

    def send(self, request: ModelCall) -> ModelOutcome:
        # The port is read at each call: a scenario may hand the Session another one.
        return self.s.model.call(request)


class InvocationPipeline:
    """Model, hook and tool calls with their commits (§3)."""

    def __init__(self, session: SessionState, context: ContextManager) -> None:
        self.s = session
        self.context = context
        self.gateway = ModelGateway(session)
        """Where every model attempt leaves the runtime (§3 "模型出网属于 Pipeline")."""

    def call_model(self, run: RunState, purpose: Purpose, operation_id: UUID, purpose_key: str,
               attempt: int, messages: tuple[PromptMessage, ...], schemas: tuple[str, ...],
               max_output: int, view: ModelView, *, compaction: str | None,
               snapshot_id: UUID | None, protected: Sequence[ProtectedInput],
               cutoff: int | None, estimation: int, rendered: RenderedRequest) -> ModelOutcome:
        """Send one attempt: the request is traced as sent, then asked. An answer's reported
        usage is traced beside the estimate for audit and deviation monitoring; nothing reads
        it back — not this request's figures, not a later budget (§7; Q57 "Reported usage").
        CTX-7.21"""
        ordinal = self.s.ordinal(f"{purpose}:{run.role}")
        self.s.trace.add(tr.ModelRequestSent(
            purpose=purpose, operation_id=operation_id, purpose_key=purpose_key,
            attempt=attempt, view=view,
            estimated_input_tokens=estimation, max_output_tokens=max_output,
            window=self.s.budget.window, output_reserve=self.s.budget.output_reserve,
            safety_margin=self.s.budget.safety_margin, input_budget=self.s.budget.input_budget,
            trigger_threshold=self.s.budget.trigger_threshold,
            frozen_revisions={str(run.context_id):
                              self.s.contexts[run.context_id].head.revision},
            snapshot_id=snapshot_id, protected_input_ids=tuple(p.input_id for p in protected),
            input_cutoff=cutoff, view_hash=view_hash(view), compaction=compaction,
            role=run.role, rendered=rendered))
        self.s.clock.tick()
        outcome = self.gateway.send(ModelCall(purpose, operation_id, purpose_key, attempt,
                                              messages, schemas, max_output, ordinal, run.role))
        if isinstance(outcome, Complete) and (outcome.input_tokens is not None
                                              or outcome.output_tokens is not None
                                              or outcome.cut):
            self.s.trace.add(tr.ModelUsage(
                purpose=purpose, operation_id=operation_id, purpose_key=purpose_key,
                attempt=attempt, estimated_input_tokens=estimation,
                input_tokens=outcome.input_tokens, output_tokens=outcome.output_tokens,
                input_deviation=None if outcome.input_tokens is None
                else outcome.input_tokens - estimation, role=run.role, cut=outcome.cut))
        return outcome

    def argument_problems(self, run: RunState, name: str, arguments: Mapping[str, JSON],
                           malformed: bool = False) -> tuple[str, ...]:
        """The effective arguments (after the pre-call hooks) against the tool's declared
        parameters schema (§11 "输出格式错误": never run, answered for a new Loop; Q82); the
        provider's argument text that was no JSON object is such an error too."""
        if malformed:
            return ("the arguments are not a JSON object",)
        spec = next((tool for tool in self.context.tools_of(run) if tool.name == name), None)
        declared = json.loads(spec.schema).get("parameters") if spec is not None else None
        return argument_problems(declared, arguments) if isinstance(declared, dict) else ()

    def read_result(self, run: RunState, arguments: Mapping[str, JSON]) -> ToolOutcome:
        """``result.read``: characters [from, to) of a body whose preview this role was shown,
        read from its blob; it becomes a new tool result by the same rules as any (§6 "模型后续
        通过 result.read 读取的内容成为新的工具结果"). A reference the role's effective records do
        not carry is refused, never guessed: a body a post-call hook replaced or denied stays
        for audit, never for the model (§1, §3).  CTX-6.18"""
        digest, start, end = (arguments.get(k) for k in ("result_ref", "from", "to"))
        refs = [record.truncation.result_ref
                for record in effective_records(self.s.contexts[run.context_id])
                if record.truncation is not None and record.truncation.result_ref.digest == digest]
        if not refs or not isinstance(start, int) or not isinstance(end, int) \
                or not 0 <= start <= end:
            return ToolOutcome("", "no stored result with that result_ref and range 0 <= from "
                               "<= to for this role")
        body = self.s.store.text(refs[0])
        return ToolOutcome(read_range(body, start, min(end, len(body))))

    def post_call(self, run: RunState, decision_id: UUID, call_id: UUID,
                   raws: dict[str, JSON], done: dict[str, JSON],
                   position: Callable[..., list[Write]]) -> dict[str, JSON]:
        """The post-call chain on a settled call's raw result — a tool's, or the answer of the
        Executor a ``delegate`` call ran (§3 "保存 raw_result，再提交 Hook 后有效结果", §10
        "每个并行能力调用或 Executor 分别保存原始结果及后处理进度") —, its outcome committed with
        the decision (HOOK_DECISION) as the member's settled result: the raw content and, as
        changes of its record, each hook's edit or — on a deny — the runtime's mark that the
        call ran and its result is withheld (§1, §3, §6; :func:`settled_member`). A takeover
        after the raw save comes here too, so neither a change nor a deny is bypassed (§10).
        CTX-10.9, CTX-1.9"""
        key = str(call_id)
        saved = raws[key]
        if not isinstance(saved, dict) or not isinstance(saved.get("text"), str):
            raise AssertionError("a saved raw result has its text")
        raw_text = str(saved["text"])

        def after_post(chain: ChainOutcome | None) -> list[Write]:
            changes, final = result_changes(chain, raw_text, self.context.result_content)
            done[key] = settled_member(self.context.result_content(raw_text), changes)
            for text in {raw_text, final}:
                self.s.keep_body(text)
            raws.pop(key, None)
            operation_id = saved.get("operation_id")
            operation = self.s.operations.get(UUID(operation_id)) \
                if isinstance(operation_id, str) else None
            if operation is not None:  # the tool Operation gets its effective result
                settled = operation.model_copy(
                    update={"effective_result_ref": self.s.ref(final)})
                self.s.pending.put_doc(settled, new=False)
                self.s.operations[operation.operation_id] = settled
            return position()

        self.run_hooks("tool.post_call", run, {"result": raw_text}, call_id, decision_id,
                    stage="post", extra=after_post)
        if key in raws:  # no post-call hook is registered: the raw result is the effective one
            after_post(None)
        content = done[key]
        if not isinstance(content, dict):
            raise AssertionError("a settled member has its result")
        return content

    def ask_hooks(self, point: HookPoint, run: RunState, payload: Mapping[str, JSON],
                  call_id: UUID | None, record_id: UUID | None, stage: str
                  ) -> tuple[HookReply, ...]:
        """The chain's replies. It is marked running first (HOOK_STARTED): finding the same mark
        at a takeover means the process died while the hook ran, so its outcome is unknown and
        it follows the hook failure rule — dropped, never asked again (§10, CTX-3.59)."""
        state = self.s.contexts[run.context_id]
        named = self.s.named_records(run, state)
        # The hook reads a copy: it changes a call only by a validated patch, never by writing
        # into the payload the runtime goes on with (§3; CTX-3.7).
        context = HookContext(point, copy.deepcopy(payload), run.context_id,
                              state.head.revision, call_id, record_id,
                              self.s.ordinal(f"hook:{point}"), named,
                              self.context.shared_revision(run))
        marker = HookStarted(point=point, call_id=None if call_id is None else str(call_id),
                             stage=stage, loops=run.loops).model_dump(mode="json")
        stored = self.stored_position(run)
        if stored.get("hook") == marker:
            return (HookReply(failed=True),)
        self.s.commit("HOOK_STARTED", [self.marked(run, {**stored, "hook": marker})])
        self.s.trace.add(tr.HookCalled(point, stage))
        return self.s.hooks.items(context)

    def stored_position(self, run: RunState) -> dict[str, JSON]:
        """The role's position as its last commit left it — what a takeover would load — or,
        before the role committed one, the position its step in flight was given."""
        stored = self.s.store.checkpoint(run.run_id, loop_key(run, "loop"))
        if isinstance(stored, dict):
            return stored
        if run.at is None:
            raise AssertionError("a hook chain runs inside a step of the role's loop")
        return dict(run.at.document())

    def marked(self, run: RunState, position: dict[str, JSON]) -> Write:
        return checkpoint_write(run.run_id, loop_key(run, "loop"), position)

    def run_hooks(self, point: HookPoint, run: RunState, payload: Mapping[str, JSON],
               call_id: UUID | None, record_id: UUID | None, stage: str = "pre",
               extra: Callable[[ChainOutcome | None], Sequence[Write]] | None = None,
               always: Sequence[Write] = (), budget: BudgetRoom | None = None
               ) -> ChainOutcome | None:
        """Run a hook chain and commit its decisions (HOOK_DECISION) together with ``extra``
        writes made from the outcome and the ``always`` writes — the loop checkpoint that
        records the chain as done (§10: a committed decision is reused, never re-run)."""
        if not self.s.hooks.registered(point):
            return None
        replies = self.ask_hooks(point, run, payload, call_id, record_id, stage)
        # The chain's mark cleared from the position; a position the decision commits with it
        # (a later write of the same row) replaces it.
        stored = self.stored_position(run)
        settled = [self.marked(run, {k: v for k, v in stored.items() if k != "hook"})] \
            if "hook" in stored else []
        if not replies:
            # Saved like any decision, so a takeover does not ask the hooks again.
            self.s.commit("HOOK_DECISION", [*settled, *(extra(None) if extra else ()), *always])
            return None
        call = HookCall(operation_id=UUID(int=0), hook_point=point,
                        stage="post" if stage == "post" else "pre", actor_role=run.role,
                        actor_context_id=run.context_id, call_id=call_id,
                        call_record_id=record_id)
        chain = self.s.put_context_writes(
            self.context.stage_patch(run, point, call, replies, payload, budget))
        self.s.commit("HOOK_DECISION", [*settled,
                                        *(insert_doc(item.invocation) for item in chain.items),
                                        *(extra(chain) if extra is not None else ()), *always])
        for item in chain.items:
            inv = item.invocation
            self.s.trace.add(tr.HookDecided(
                point, inv.chain_position, inv.decision.value, inv.patch_valid,
                tuple(d.code for d in inv.diagnostics),
                changes_shown(item.changes)))
        return chain


    def run_tool(self, run: RunState, call_id: UUID, name: str, arguments: dict[str, JSON],
                 proposed: Mapping[str, JSON], raws: dict[str, JSON],
                 position: Callable[..., list[Write]]) -> None:
        """A tool call: marked started (TOOL_STARTED), the handler with the effective
        arguments (``result.read`` answered from the stored body), its raw result saved as
        the tool Operation's (TOOL_SETTLED). Only the raw result is settled here; the post-call
        chain makes the effective one (§3 "保存 raw_result，再提交 Hook 后有效结果"), so a
        takeover after this commit goes on with that chain, never with the raw result (§10,
        §12 "原始结果保存后宕机")."""
        # The Run's tool quota is spent when the call starts, in the commit that says it
        # started: a takeover after it never regains the call (§10 "剩余额度…一起参与恢复").
        owner = run.parent or run
        owner.tool_calls_made += 1
        try:
            self.s.commit("TOOL_STARTED", position(started=str(call_id)))
        except BaseException:
            owner.tool_calls_made -= 1  # not started: nothing of it is stored
            raise
        self.s.clock.tick()
        outcome = self.read_result(run, arguments) if name == READ_TOOL else \
            self.s.tools.run(name, arguments, self.s.ordinal(f"tool:{name}"))
        self.s.trace.add(tr.ToolExecuted(call_id, name, arguments, dict(proposed),
                                         "error" if outcome.error else "ok", outcome.latency))
        text = structured_error("TOOL_ERROR", outcome.error) if outcome.error \
            else outcome.text
        self.s.workspace.update(outcome.workspace_writes)
        if outcome.artifact is not None and not outcome.error:
            text = artifact_text(outcome.artifact)
        tool_operation = self.s.new_id()
        self.s.put_operation(tool_operation, run, OperationPurpose.TOOL, f"tool:{call_id}",
                             OperationState.FAILED if outcome.error
                             else OperationState.SUCCEEDED, self.s.ref(text))
        raws[str(call_id)] = {"text": text, "operation_id": str(tool_operation)}
        self.s.commit("TOOL_SETTLED", position())
        self.s.moments.at("raw_saved")


def changes_shown(changes: ChangeSet) -> tuple[str, ...]:
    """An item's changes as the trace lists them, ``field=value``: the context fields it
    writes, then the payload fields no context field expresses (a request parameter, a tool's
    result before its record exists), so no change a hook made goes unlisted (§3, §6)."""
    return (*(f"{c.field_key}={json.dumps(c.value, ensure_ascii=False, default=str)}"
              for _, c in changes.context_changes),
            *(f"{path}={json.dumps(value, ensure_ascii=False, default=str)}"
              for path, value, _ in changes.payload_only))


def result_changes(chain: ChainOutcome | None, raw_text: str,
                   content: Callable[[str], dict[str, JSON]]) -> tuple[list[JSON], str]:
    """What a post-call chain decided on a raw result, as changes of its record in the order
    its items committed them, and the effective text: each item whose edit changed the
    result, then a deny's mark (§3 "合法 deny … 必须阻止执行或交付")."""
    changes: list[JSON] = []
    current = raw_text
    for item in chain.items if chain is not None else ():
        edited = item.payload.get("result")
        if isinstance(edited, str) and edited != current:
            current = edited
            changes.append({"source": "hook", "ref": str(item.invocation.hook_invocation_id),
                            "content": content(edited)})
    if chain is not None and chain.blocked:
        hook_id = chain.items[-1].invocation.hook_invocation_id
        denial = denial_feedback("post", hook_id, {})
        changes.append({"source": "runtime", "ref": f"denied:{hook_id}",
                        "denied": json.loads(denial)})
        return changes, denial
    return changes, current


def artifact_text(artifact: Artifact) -> str:
    """How a non-text result enters the view: its metadata and accessible path (§6)."""
    return json.dumps({"artifact": {"path": artifact.path, "media_type": artifact.media_type,
                                    "size_bytes": artifact.size_bytes}}, sort_keys=True)


