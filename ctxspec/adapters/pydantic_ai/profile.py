"""What the pydantic-ai driver's compatibility report says of pydantic-ai: the capabilities
the adapter supplies itself, the divergence each failing case shows, the settings of the best
configuration, and the framework behaviours found with the source read
(docs/compatibility/pydantic-ai.md is generated from this and a fresh run). Sources are files
under the installed ``pydantic_ai`` package."""

from importlib.metadata import version

from ctxspec.conformance.compat import Divergence, Finding, Profile, Setting

PACKAGES = ("pydantic-ai-slim", "pydantic-graph")

_WHOLE_HISTORY = Divergence(
    "Agent.iter sends the conversation's whole message list before the new prompt: no "
    "projection of the recent_runs last Runs, no marker of an ended Run's terminal status, "
    "the tool calls of older Runs kept (§4).",
    "pydantic_ai/agent/__init__.py: Agent.iter (conversation=, message_history=); "
    "pydantic_ai/_agent_graph.py: UserPromptNode")
_NO_PREVIEW = Divergence(
    "A function tool's whole return goes into its ToolReturnPart: no bounded preview marked "
    "truncated with a result_ref, and no result.read to read the rest (§6).",
    "pydantic_ai/messages.py: ToolReturnPart; pydantic_ai/_tool_execution.py")
_NO_MARK = Divergence(
    "A hook's change (an approval's override_args, a capability's new result or text) is sent "
    "as the new value with no mark that it was changed or by whom, so the adapter has no "
    "rendering with marks to trace (§6: the view shows a mutation with its source marker).",
    "pydantic_ai/_deferred.py: ToolApproved.override_args; pydantic_ai/capabilities/"
    "abstract.py: after_tool_execute, after_model_request")
_PATCH_GRAIN = Divergence(
    "A capability hook changes the request, the arguments or the result by returning another "
    "value (or editing RunContext.messages): there is no patch of a named field on a base "
    "revision, no field registry, scope, or protected input, so what the design voids or "
    "refuses — a conflict, a stale base, an unregistered or forbidden field, an unknown "
    "target, a rewrite of the user's question — is applied or dropped with no diagnosis (§3).",
    "pydantic_ai/capabilities/abstract.py: before_model_request, after_model_request, "
    "after_tool_execute; pydantic_ai/_deferred.py: ToolApproved")
_CUTOFF = Divergence(
    "The pending-message queue drains 'asap' input in before_model_request of every request "
    "step: a supplement enqueued while a request is being prepared (during a hook or a history "
    "processor) joins that request instead of the next Loop's (§5: the input cutoff).",
    "pydantic_ai/capabilities/_pending_messages.py: PendingMessageDrainCapability."
    "before_model_request")
_QUEUE_REDIRECT = Divergence(
    "A supplement still queued when the model gives its final answer is not carried to the "
    "next question: the queue redirects the run into one more model request at its end, for "
    "'asap' and 'when_idle' alike (§5: a supplement after the last request waits for the next "
    "question).",
    "pydantic_ai/capabilities/_pending_messages.py: PendingMessageDrainCapability; "
    "pydantic_ai/_enqueue.py: PendingMessagePriority")
_STOP_SHIELDED = Divergence(
    "AgentRun.cancel() cancels the task that drives the run, but a model request step runs its "
    "before_model_request hooks (history processors included), its attempts and the model "
    "call in a task of its own, shielded from that cancellation: a stop during preparation, "
    "compaction, a hook, at the freeze or between attempts still sends the request, and takes "
    "effect only after its answer (§11: a stop starts no new Attempt).",
    "pydantic_ai/_agent_graph.py: ModelRequestNode (ScopedTask, _wrap_response's "
    "asyncio.shield(wrap.task)); pydantic_ai/_cancel.py: RunCancellation")
_STOP_IN_APPROVAL = Divergence(
    "A stop while the approval handler of a deferred call answers is honoured only after the "
    "approved calls ran: HandleDeferredToolCalls resolves and runs them in the same tool step "
    "(§11: nothing starts after a stop).",
    "pydantic_ai/capabilities/deferred_tool_handler.py: HandleDeferredToolCalls; "
    "pydantic_ai/_tool_execution.py")
_STOP_DROPS_RESULT = Divergence(
    "A stop while a batch runs cancels its tool tasks, and RunCancelled.all_messages() keeps no "
    "return of a call that had already finished: repair_messages, which pydantic-ai requires "
    "before the next prompt, then writes 'The tool call was interrupted before a result was "
    "produced.' for it as for the calls that never ran (§6: the facts that happened are kept).",
    "pydantic_ai/_tool_execution.py: the parallel strategy's _run_strategy; pydantic_ai/"
    "messages.py: repair_messages, _repair_dangling_tool_calls, "
    "INTERRUPTED_TOOL_RETURN_CONTENT")
_BATCH_STARTS_ALL = Divergence(
    "pydantic-ai starts every call of a batch at once ('parallel', the default), and in "
    "'sequential' mode (Agent.parallel_tool_call_execution_mode) a stop during a call lets the "
    "rest of the batch run: in neither does a stop leave a call not yet started unstarted "
    "with a placeholder (§6, §11).",
    "pydantic_ai/tool_manager.py: ParallelExecutionMode; pydantic_ai/agent/abstract.py: "
    "parallel_tool_call_execution_mode")
_NO_DEADLINE = Divergence(
    "The run's deadline (Agent.iter(timeout=...)) is a timer in seconds on the event loop "
    "(loop.call_later, RunTimedOut); the scenario's deadline counts the Run's model and tool "
    "calls, and no setting measures a deadline in calls, so none is set and the Run goes on "
    "past it (§8, §11).",
    "pydantic_ai/agent/__init__.py: Agent.iter (timeout=, the expiry timer); "
    "pydantic_ai/capabilities/abstract.py: get_run_clock")
_QUOTA_WHOLE_BATCH = Divergence(
    "UsageLimits(tool_calls_limit=...) is checked on the whole batch before any call runs: a "
    "batch over the quota ends the run with UsageLimitExceeded, where the design runs the calls "
    "within it and answers the others with an error (§3, §11).",
    "pydantic_ai/_tool_execution.py: run (check_before_tool_call on the projected usage)")
_SHARED_CALL_ID = Divergence(
    "Two calls of one answer sharing a provider tool_call_id end the run "
    "(UnexpectedModelBehavior) before either runs: pydantic-ai binds calls and results by "
    "that id (§2: a provider's id is never the platform's key).",
    "pydantic_ai/_tool_execution.py: _validate_function_calls (_duplicate_tool_call_ids)")
_ADAPTER_FOLD = Divergence(
    "pydantic-ai has no summarisation of its own for a model it is given (its compaction "
    "capabilities are provider-native), so the §8 fold is the adapter's history processor, "
    "which summarises the material in one request, ignores the Agent's custom compaction "
    "prompt and re-measures no chunk: what needs chunks or that prompt is not done (§8).",
    "pydantic_ai/capabilities/process_history.py: ProcessHistory; pydantic_ai/models/openai/"
    "_compaction.py: OpenAICompaction (provider-native only)")

DIVERGENCES: dict[str, Divergence] = {
    **dict.fromkeys(("ROW-01", "ROW-02", "ROW-12", "EX4-OLDER-RUN", "S2-POST-PROCESSED",
                     "S4-CURRENT-RUN", "S4-RECENT-BY-ORDER"), _WHOLE_HISTORY),
    **dict.fromkeys(("ROW-08", "S6-PREVIEW-STAYS", "S6-PREVIEW-MARKED-SENT", "S6-RESULT-READ",
                     "S6-REPLACED-BODY-UNREAD", *(
                         f"HM-{point}-{decision}-ROOT-SUCCEEDED-RESULTREAD"
                         for point in ("MPRE", "MPOST", "TPRE", "TPOST")
                         for decision in ("ALLOW", "MODIFY", "FAIL")),
                     "HM-TPOST-DENY-ROOT-SUCCEEDED-RESULTREAD"), _NO_PREVIEW),
    **dict.fromkeys(("S6-ARGS-ADJUSTED-SENT", "S6-TEXT-MODIFIED-SENT",
                     "S6-TOOL-EDIT-MARKED-SENT"), _NO_MARK),
    **dict.fromkeys(("ROW-15", "EX3-WRITE-CONFLICT", "EX3-DENY-CONFLICT",
                     "BAD-UNREGISTERED-FIELD", "BAD-STALE-ALLOW", "BAD-STALE-DENY",
                     "BAD-INVALID-PATCH", "BAD-FORBIDDEN-FIELD", "BAD-UNKNOWN-TARGET",
                     "S1-NO-SCOPE", "S3-VIEW-INDEX", "S3-OVERLAPPING-WRITES", "S3-POST-CALL",
                     "S3-ANNOTATIONS", "S7-HOOK-FIXED-TOO-BIG"),
                    _PATCH_GRAIN),
    "ROW-06": _CUTOFF,
    "S5-RETRY-FROZEN": _QUEUE_REDIRECT,
    **dict.fromkeys(("S8-STOP-DURING-COMPACTION", "S11-STOP-DURING-COMPACTION",
                     "S11-STOP-DURING-PREPARATION", "S11-STOP-DURING-PREPARATION-EXECUTOR",
                     "S11-STOP-BEFORE-RETRY", "S11-STOP-AT-FREEZE",
                     *(f"HM-{point}-ALLOW-EXECUTOR-STOPPED"
                       for point in ("MPRE", "MPOST", "TPRE", "TPOST"))), _STOP_SHIELDED),
    "S3-STOP-DURING-HOOK": _STOP_IN_APPROVAL,
    **dict.fromkeys(("S11-STOP-BETWEEN-CALLS", "S10-STOP-AFTER-RAW-SAVE"), _STOP_DROPS_RESULT),
    "ROW-07-PLACEHOLDERS": _BATCH_STARTS_ALL,
    **dict.fromkeys(("S11-DEADLINE-DURING-COMPACTION", "S8-DEADLINE-BETWEEN-ATTEMPTS", *(
        f"HM-{point}-ALLOW-{role}-TIMED_OUT" for point in ("MPRE", "MPOST", "TPRE", "TPOST")
        for role in ("ROOT", "EXECUTOR"))), _NO_DEADLINE),
    "S3-ALLOW-NO-GRANT": _QUOTA_WHOLE_BATCH,
    "S2-PROVIDER-CALL-IDS": _SHARED_CALL_ID,
    **dict.fromkeys(("S8-CHUNK-FLOOR", "S8-PROMPTS-LEAVE-NO-ROOM"), _ADAPTER_FOLD),
}
"""The divergence each failing case shows (inherent: no setting of the public API fixes it)."""

SETTINGS = (
    Setting("a capability's on_model_request_error raising RetryModelRequest", "none (the "
            "first provider failure ends the run: pydantic-ai retries no failure of a model it "
            "is given)", "up to the Agent's model_attempts, on a server or connection error",
            "A failed Attempt ends the Run where the design retries the frozen request (§11).",
            frozenset({"ROW-12-RETRY", "ROW-13", "S3-FROZEN-RETRY",
                       "S5-DELIVERED-ON-OUTPUT"})),
    Setting("the approval handler's changed arguments written to the history's ToolCallPart "
            "(call.args)", "ToolApproved(override_args=...) alone (the tool runs with the "
            "hook's arguments, the history keeps the model's)", "override_args and call.args, "
            "as before_tool_validate's docstring asks for a rewrite the history should show",
            "The call record and the next request keep the model's proposal while the tool ran "
            "with the hook's arguments (§3: the effective call record is the one every later "
            "step uses).", frozenset({"ROW-16-17", "EX3-WRITE"})),
    Setting("Agent(retries=...)", "1 (a second unusable answer ends the run with "
            "UnexpectedModelBehavior)", "the Agent's loop_limit",
            "A call to a missing tool, arguments that break the tool's signature or an answer "
            "it cannot use end the Run after one retry (\"exceeded max retries\"), "
            "where the design corrects it by further Loops within the Loop limit (§11).",
            frozenset({"S11-FORMAT-ERROR", "S11-ARGUMENTS-SCHEMA"})),
)
"""The settings the best configuration changes, each with the cases it fixes."""

FINDINGS = (
    Finding("A history processor's result becomes the run's history (ctx.messages[:] = "
            "messages), so a summary replaces the raw messages of the run, and saving that run "
            "branches the stored conversation off the compacted history.",
            "pydantic_ai/capabilities/process_history.py: ProcessHistory.before_model_request; "
            "pydantic_ai/conversation_store.py: ConversationStore.save"),
    Finding("History processors are still handed the current run's own messages (the "
            "complaint of pydantic/pydantic-ai#2050); 2.68 no longer sends the orphaned tool "
            "result that a cut between a call and its return leaves — it drops it before every "
            "request — but a processor that keeps only the last message then sends the request "
            "without the user's question.",
            "pydantic_ai/messages.py: _drop_orphaned_tool_results, repair_messages"),
    Finding("A supplement enqueued on a running run is drained into whichever request is being "
            "prepared, and one still queued at the final answer forces one more request.",
            "pydantic_ai/capabilities/_pending_messages.py: PendingMessageDrainCapability"),
    Finding("A cancelled run's messages lose the return of a call that had finished, and the "
            "repair pydantic-ai asks for before the next prompt answers it with its interrupted "
            "placeholder text.",
            "pydantic_ai/messages.py: INTERRUPTED_TOOL_RETURN_CONTENT, repair_messages"),
    Finding("A stop does not reach a model request step in progress: its hooks, attempts and "
            "model call run in a shielded task.",
            "pydantic_ai/_agent_graph.py: ModelRequestNode (_wrap_response)"),
    Finding("Durable execution (Temporal, DBOS, Prefect) needs the engine's own package and, for "
            "Temporal and Prefect, a server; pydantic-ai-slim alone has no crash recovery of a "
            "run, so no crash phase is declared.",
            "pydantic_ai/durable_exec/temporal, dbos, prefect"),
)

NOTES = (
    "Each Run is Agent.iter on a Conversation loaded from an InMemoryConversationStore and "
    "saved after it (a failed run's messages kept with capture_run_messages, a cancelled one's "
    "with RunCancelled.all_messages(), both closed out with repair_messages); another Session "
    "is another conversation in the same store.",
    "The model is pydantic-ai's FunctionModel answering from the scenario's script; each "
    "request is traced and measured where it receives the messages, after every capability.",
    "Supplements on a running run are AgentRun.enqueue(text) (priority 'asap'); the user's stop "
    "is AgentRun.cancel().",
    "Hooks: model.pre_request and model.post_response are a capability's before_model_request "
    "and after_model_request; tool.pre_call is pydantic-ai's approval of deferred calls "
    "(requires_approval, HandleDeferredToolCalls, ToolApproved / ToolDenied); tool.post_call "
    "is after_tool_execute.",
    "The Loop limit is UsageLimits(request_limit=loop_limit) and the tool quota "
    "UsageLimits(tool_calls_limit=...); an Executor is an Agent run inside the delegate tool "
    "with usage=ctx.usage, so its requests count against the Planner's limit.",
    "The best configuration's compaction is a history processor (ProcessHistory) of the "
    "adapter's: at the trigger it summarises what precedes the current Run's inputs with the "
    "compaction script, sent as one transcript message, and puts the summary in its place.",
)

DOUBTS = {
    "HM-MPRE-ALLOW-ROOT-TIMED_OUT": "pydantic-ai has a run deadline, in seconds; a mapping of "
    "the scenario's ticks onto seconds (each call taking real time) could judge it, at the "
    "cost of timing-dependent verdicts, so every deadline case fails on the missing mapping.",
    "S11-ARGUMENTS-SCHEMA": "passes with tools written as typed functions, which pydantic "
    "validates; a tool declared by its JSON schema alone (Tool.from_schema, which validates "
    "nothing) would run the call that breaks it.",
    "S11-STOP-BEFORE-RETRY": "passes with the defaults (no retry at all) and fails with the "
    "best configuration's retries: the retry is sent though the stop came first.",
    "ROW-07": "passes with no history processor; with the documentation's keep-the-last-"
    "messages processor the current Run's question can be cut away (tests/real_bugs/, "
    "pydantic/pydantic-ai#2050).",
}
"""The verdicts we are least sure of (issue #32: disagreement is a test)."""

PROFILE = Profile(
    runtime="pydantic-ai",
    framework="pydantic-ai (Agent.iter with a FunctionModel and a ConversationStore)",
    versions={name: version(name) for name in PACKAGES},
    adapter_supplied={
        "estimator_injection": "pydantic-ai has no window, output reserve, safety margin or "
        "input budget and measures no request: the adapter measures every request with the "
        "injected estimator where the FunctionModel receives it, computes W, O, S, B and the "
        "trigger, and refuses what §8 refuses there",
        "error_figures": "pydantic-ai knows no window or budget, so a refusal's figures (the "
        "fixed input, the input, B, W, O, S) are the adapter's own §8 refusal's, carried on "
        "its run_ended and its client event",
        "compaction_summary": "pydantic-ai has no summarisation for a model it is given (its "
        "compaction capabilities are provider-native): the adapter's history processor "
        "decides when, summarises with the compaction script and puts the summary in "
        "(ctxspec/adapters/pydantic_ai/compaction.py)",
    },
    divergences=DIVERGENCES, settings=SETTINGS, doubts=DOUBTS, findings=FINDINGS, notes=NOTES,
    defaults="ctxspec.adapters.pydantic_ai:make_default_driver",
)
