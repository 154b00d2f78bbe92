"""What the OpenAI Agents SDK driver's compatibility report says of the SDK: the capabilities
the adapter supplies itself, the divergence each failing case shows, and the SDK behaviours
found with the source read (docs/compatibility/openai-agents.md is generated from this and a
fresh run). Sources are files under the installed ``agents`` package."""

from importlib.metadata import version

from ctxspec.conformance.compat import Divergence, Finding, Profile, Setting

PACKAGES = ("openai-agents", "openai")

_WHOLE_SESSION = Divergence(
    "The Runner sends the SQLiteSession's whole item list before the new input: no projection "
    "of the recent_runs last Runs, no marker of an earlier Run's terminal status, tool calls of "
    "older Runs kept (§4).",
    "agents/run_internal/session_persistence.py: prepare_input_with_session")
_NO_PREVIEW = Divergence(
    "A function tool's whole result goes into its function_call_output: no bounded preview "
    "marked truncated with a result_ref, and no result.read (§6); the SDK's ToolOutputTrimmer "
    "trims only older turns, without a reference.",
    "agents/extensions/tool_output_trimmer.py: ToolOutputTrimmer.__call__")
_NO_RETRY_AFTER_OUTPUT = Divergence(
    "A stream that broke after its first output is never retried: the SDK's retry treats "
    "streamed output as an absolute veto, so the Run fails where the design retries the "
    "Attempt without the fragment (§11, §12 row 12).",
    "agents/run_internal/model_retry.py: _evaluate_retry")

_GUARDRAIL_GRAIN = Divergence(
    "A tool guardrail can only allow or reject (ToolGuardrailFunctionOutput: allow, "
    "reject_content, raise_exception): it applies no patch — an edit of the arguments or of "
    "the result is not made — and checks none (no field registry, base revision or rights), "
    "so what the design applies, voids or refuses is neither applied nor diagnosed (§3).",
    "agents/tool_guardrails.py: ToolGuardrailFunctionOutput, ToolInputGuardrail.run, "
    "ToolOutputGuardrail.run")

_FILTER_GRAIN = Divergence(
    "RunConfig.call_model_input_filter, the SDK's one hook before every model call, can let "
    "the request go or raise (the Run ends, nothing sent) or return other input wholesale: it "
    "has no patch of a named record's field on a base revision, no field registry, scope or "
    "fit check, so what the design applies, refuses or re-measures of a pre-request hook's "
    "write is neither applied nor diagnosed (§3, §7).",
    "agents/run_config.py: CallModelData, ModelInputData; agents/run_internal/"
    "turn_preparation.py: maybe_filter_model_input")

_COMPACT_GETS_TOOL_ITEMS = Divergence(
    "The compaction session hands responses.compact the session's items as they are: a tool "
    "call and its result go in as function_call and function_call_output items, provider "
    "tool messages, where the design sends a compaction its material as transcript data "
    "(§8).",
    "agents/memory/openai_responses_compaction_session.py: _run_compaction_locked "
    "(compact_kwargs['input'] = normalize_input_items_for_api(session_items))")
_NO_DEADLINE = Divergence(
    "The SDK has no Run deadline (ModelSettings.timeout bounds one model call), so a Run "
    "goes on, and a retry is sent, after the Run's time is up (§8, §11).",
    "agents/model_settings.py: ModelSettings.timeout")
_AFTER_A_TURN = Divergence(
    "The compaction session is asked to compact only after a turn's items are saved, and "
    "defers while that turn has tool outputs (until the Run's last turn): nothing compacts "
    "before a request inside a Run, so a Run's later request at or over the trigger is sent "
    "as it is (the user can call run_compaction only between Runs) (§7, §8).",
    "agents/run_internal/session_persistence.py: _apply_post_write_compaction; "
    "agents/memory/openai_responses_compaction_session.py: "
    "OpenAIResponsesCompactionSession._defer_compaction")
_USER_MESSAGES_KEPT = Divergence(
    "The compact endpoint answers every user message of the compacted input verbatim, then "
    "one compaction item, and the session's history becomes that output: an earlier Run's "
    "question is never summarised but sent whole after every compaction, before the summary, "
    "so the request after a compaction is larger than the design's (§4, §8).",
    "openai/types/responses/compacted_response.py: CompactedResponse.output; "
    "agents/memory/openai_responses_compaction_session.py: _normalize_compaction_output_items")
_NO_SUMMARY_BUDGET = Divergence(
    "responses.compact takes no output limit and the compaction session computes no summary "
    "budget (H = B − F, T, the chunk's room): the summary is asked with no T, a compaction "
    "whose summary cannot fit is made anyway, and the request after it is sent without B "
    "checked again (§8).",
    "openai/types/responses/response_compact_params.py: ResponseCompactParams; "
    "agents/memory/openai_responses_compaction_session.py: _run_compaction_locked")
_HOOK_AFTER_COMPACTION = Divergence(
    "The input filter, the SDK's only hook before a request, runs inside the Run on the "
    "history the session hands over, after that history was compacted: a request's "
    "pre-request hook is asked after its summary, not before (§5).",
    "agents/run_internal/turn_preparation.py: maybe_filter_model_input; "
    "agents/run_internal/session_persistence.py: prepare_input_with_session")
_RESPONSE_HOOK_GRAIN = Divergence(
    "RunHooks.on_llm_end, the SDK's one hook on every model response, sees the response "
    "before its tool calls run and may raise (the Run ends, the answer withheld), but cannot "
    "replace it: the SDK goes on with the provider's own output, so a post-response hook's "
    "edit of the answer is neither applied nor sent (§2, §3).",
    "agents/lifecycle.py: RunHooksBase.on_llm_end; agents/run_internal/run_loop.py: "
    "run_single_turn_streamed (after_invocation_validation)")
_STOP_RUNS_THE_BATCH_OUT = Divergence(
    "A stop while a batch runs is cancel(mode='after_turn'): the SDK lets the turn finish, "
    "its whole batch included, so the calls after the stop still run and none gets a "
    "'stopped' placeholder (cancel(mode='immediate') drops the model call in flight only) "
    "(§6, §11).",
    "agents/result.py: RunResultStreaming.cancel")
_STOP_MISSES_THE_EXECUTOR = Divergence(
    "A stop cancels the Planner's streamed Run but not the Executor's nested Runner.run "
    "inside Agent.as_tool, which goes on to its end and asks its model again after the stop "
    "(§11).",
    "agents/agent.py: Agent.as_tool (_run_agent_impl); agents/result.py: "
    "RunResultStreaming.cancel")
_NO_ACCESS = Divergence(
    "A session serves its items to whoever holds its id: get_items checks no caller, role, "
    "Session or grant, so another Session's reader, a workspace script, an Executor's role "
    "and an auditor the Agent never granted are all served the conversation (§1, §11).",
    "agents/memory/session.py: SessionABC.get_items; agents/memory/sqlite_session.py: "
    "SQLiteSession.get_items")
_INPUT_AFTER_FILTER = Divergence(
    "A streamed Run saves its input to the session only once call_model_input_filter and the "
    "on_llm_start hooks have run, just before the first model call: a Run that ends before "
    "it (refused in the filter over B, or stopped) leaves its inputs nowhere in the session, "
    "with no write to crash at, where the design keeps the question it ends on (§5, §10, "
    "§11).",
    "agents/run_internal/run_loop.py: run_single_turn_streamed "
    "(_persist_stream_input_if_needed after maybe_filter_model_input)")
_TURN_LOST = Divergence(
    "A turn's answer is saved only with its batch's results, in one session write after the "
    "tools ran: a crash before that write, or the session refusing it, loses the answer and "
    "the results, so the restarted "
    "Run asks the model again from the question, where the design has saved the answer "
    "before any tool ran and settles an unsaved result UNKNOWN_OUTCOME (§10).",
    "agents/run_internal/run_loop.py: start_streaming (NextStepRunAgain: "
    "_save_stream_items_with_count after the turn's tools)")
_BUDGET_RESTARTS = Divergence(
    "The SDK keeps a Run's position only in memory (a RunState the caller may serialise): a "
    "restarted process can only start a new Runner.run on the session, whose max_turns "
    "counts afresh, so a takeover regains the whole Loop budget (§10).",
    "agents/run.py: Runner.run_streamed (max_turns); agents/run_state.py: RunState "
    "(current_turn, written only by to_json)")
_EXECUTOR_UNSTORED = Divergence(
    "An Executor behind Agent.as_tool runs a nested Runner.run whose session, if any, is the "
    "one fixed when the tool is made and shared by every call, which would hand each "
    "execution the others' items (§2); without one nothing of an execution's turns is "
    "stored, so its batches have no write to crash at and a restart runs the delegate call "
    "again from its start (§10).",
    "agents/agent.py: Agent.as_tool (session=..., _run_agent_impl: Runner.run(session="
    "session))")
_HOOK_MATRIX = ("HM-{}-ROOT-SUCCEEDED", "HM-{}-ROOT-SUCCEEDED-DELEGATE",
                "HM-{}-EXECUTOR-SUCCEEDED")

DIVERGENCES = {
    **dict.fromkeys(("ROW-25", "S11-AUDIT-NEEDS-GRANT", "S1-HISTORY-EFFECTIVE",
                     "S4-HISTORY-EXECUTOR-TASK"), _NO_ACCESS),
    "S11-PROTECTED-TOO-LARGE": _INPUT_AFTER_FILTER,
    **dict.fromkeys(("CRASH-RUNS-INPUT_ACCEPTED-7-BEFORE", "CRASH-RUNS-INPUT_ACCEPTED-7-AFTER"),
                    _INPUT_AFTER_FILTER),
    **dict.fromkeys(("CRASH-TOOLS-BATCH_FED_BACK-1-BEFORE", "CRASH-TOOLS-BATCH_FED_BACK-1-FAILS",
                     "CRASH-PLANNER-BATCH_FED_BACK-1-BEFORE"), _TURN_LOST),
    "S10-TAKEOVER-BUDGET": _BUDGET_RESTARTS,
    **dict.fromkeys((f"CRASH-PLANNER-BATCH_FED_BACK-{n}-{when}" for n in (2, 3)
                     for when in ("BEFORE", "AFTER")), _EXECUTOR_UNSTORED),
    "ROW-23": _GUARDRAIL_GRAIN,
    "S1-ORIGINALS-KEPT": _WHOLE_SESSION, "S8-SUMMARY-AT-CAP": _USER_MESSAGES_KEPT,
    "S4-ACTUAL-PROCESS": _GUARDRAIL_GRAIN, "S1-TOOL-EDIT-RAW-KEPT": _GUARDRAIL_GRAIN,
    "S6-AUDIT-FULL-BODY": _NO_PREVIEW,
    "S6-CUT-KEEPS-GROUPS": _COMPACT_GETS_TOOL_ITEMS,
    **dict.fromkeys(("ROW-04-AT", "ROW-05", "ROW-06", "EX8-ROW1", "EX8-ROW2", "S7-USAGE-TINY"),
                    _USER_MESSAGES_KEPT),
    **dict.fromkeys(("EX8-ROW3", "EX8-ROW4", "EX8-ROW6", "S8-TARGET-EXPLICIT",
                     "S8-TARGET-PROVIDER-LIMIT", "S8-SOFT-TARGET", "S8-TARGET-CAP",
                     "S8-SUMMARY-CUT-AT-T", "S8-PROMPTS-LEAVE-NO-ROOM", "S8-CHUNK-FLOOR"),
                    _NO_SUMMARY_BUDGET),
    "S5-FREEZE-LATE": _HOOK_AFTER_COMPACTION,
    "S8-STOPPED-CALL-COMPACTS": _USER_MESSAGES_KEPT,
    "ROW-07-PLACEHOLDERS": _STOP_RUNS_THE_BATCH_OUT,
    **dict.fromkeys((f"HM-{point}-ALLOW-EXECUTOR-STOPPED"
                     for point in ("MPRE", "MPOST", "TPRE", "TPOST")),
                    _STOP_MISSES_THE_EXECUTOR),
    **dict.fromkeys(("S7-HOOK-OVER-BUDGET", "S7-HOOK-FIXED-KEPT", "S8-ABOVE-TRIGGER-AFTER",
                     *(form.format(part) for form in _HOOK_MATRIX
                       for part in ("MPRE-ALLOW", "MPRE-MODIFY", "MPRE-FAIL", "TPRE-ALLOW",
                                    "TPRE-FAIL", "TPOST-ALLOW", "TPOST-FAIL", "MPOST-ALLOW",
                                    "MPOST-MODIFY", "MPOST-FAIL")),
                     "HM-TPRE-MODIFY-ROOT-SUCCEEDED-DELEGATE"), _AFTER_A_TURN),
    **dict.fromkeys(("S2-POST-PROCESSED", "S6-TEXT-MODIFIED-SENT", "S2-FINAL-ANSWER-DELIVERED",
                     "S3-EXECUTOR-ANSWER-EFFECTIVE"), _RESPONSE_HOOK_GRAIN),
    **dict.fromkeys((*(f"HM-{point}-{part}-TIMED_OUT"
                       for point in ("MPRE", "TPRE", "TPOST", "MPOST")
                       for part in ("ALLOW-ROOT", "ALLOW-EXECUTOR")),
                     "S11-DEADLINE-DURING-COMPACTION", "S8-DEADLINE-BETWEEN-ATTEMPTS"),
                    _NO_DEADLINE),
    **dict.fromkeys((f"HM-{part}-ROOT-SUCCEEDED-RESULTREAD" for part in (
        "MPRE-ALLOW", "MPRE-MODIFY", "MPRE-FAIL", "TPRE-ALLOW", "TPRE-MODIFY", "TPRE-FAIL",
        "TPOST-ALLOW", "TPOST-MODIFY", "TPOST-DENY", "TPOST-FAIL", "MPOST-ALLOW",
        "MPOST-MODIFY", "MPOST-FAIL")), _NO_PREVIEW),
    **dict.fromkeys(("ROW-15", "S1-NO-SCOPE", "S3-HOOK-CHANGE-SEEN", "S7-ESTIMATE-WHOLE-REQUEST",
                     "S7-HOOK-FIXED-TOO-BIG"), _FILTER_GRAIN),
    **dict.fromkeys((
        "ROW-16-17", "EX3-WRITE", "EX3-WRITE-CONFLICT", "EX3-DENY-CONFLICT",
        "BAD-UNREGISTERED-FIELD", "BAD-STALE-ALLOW", "BAD-STALE-DENY", "BAD-INVALID-PATCH",
        "BAD-FORBIDDEN-FIELD", "BAD-UNKNOWN-TARGET", "S3-VIEW-INDEX", "S3-OVERLAPPING-WRITES",
        "S3-REBASE", "S3-POST-CALL", "S3-ANNOTATIONS", "S3-ALLOW-NO-GRANT",
        "S6-ARGS-ADJUSTED-SENT", "S6-TOOL-EDIT-MARKED-SENT", "S6-REPLACED-BODY-UNREAD",
        "S3-DELEGATE-POST-MODIFY", "HM-TPRE-MODIFY-ROOT-SUCCEEDED",
        "HM-TPOST-MODIFY-ROOT-SUCCEEDED", "HM-TPOST-MODIFY-ROOT-SUCCEEDED-DELEGATE",
        "HM-TPRE-MODIFY-EXECUTOR-SUCCEEDED", "HM-TPOST-MODIFY-EXECUTOR-SUCCEEDED"),
        _GUARDRAIL_GRAIN),
    "S11-LOOPS-SHARED": Divergence(
        "An Executor behind Agent.as_tool runs a nested Run with its own max_turns, fixed when "
        "the tool is made, and the Planner's Run counts only its own turns: the Loops of the "
        "Planner and of its Executors share no budget, so the Planner is asked again after an "
        "Executor spent the Run's Loops (§11).",
        "agents/agent.py: Agent.as_tool (resolved_max_turns); agents/run.py: Runner.run "
        "(max_turns)"),
    "ROW-01": Divergence(
        _WHOLE_SESSION.sentence + " A question whose Run was stopped before its first model "
        "call never reaches the session at all.",
        _WHOLE_SESSION.source + "; agents/run_internal/run_loop.py: run_single_turn_streamed"),
    "ROW-02": _WHOLE_SESSION, "EX4-OLDER-RUN": _WHOLE_SESSION,
    "S4-CURRENT-RUN": _WHOLE_SESSION, "S4-RECENT-BY-ORDER": _WHOLE_SESSION,
    "ROW-08": _NO_PREVIEW, "S6-PREVIEW-STAYS": _NO_PREVIEW,
    "S6-PREVIEW-MARKED-SENT": _NO_PREVIEW, "S6-RESULT-READ": _NO_PREVIEW,
    "ROW-12": _NO_RETRY_AFTER_OUTPUT, "ROW-12-RETRY": _NO_RETRY_AFTER_OUTPUT,
    "S2-PROVIDER-CALL-IDS": Divergence(
        "A tool call's identity is the provider's call_id: two calls of one response sharing an "
        "id make the SDK raise ModelBehaviorError and end the Run, where the design runs each "
        "under its own call_id (§2).",
        "agents/run_internal/tool_planning.py: _dedupe_processed_response_invocations"),
}
"""Each failing case and the divergence it shows (the sentences of the report)."""

FINDINGS = (
    Finding("Agent.as_tool runs the Executor as a nested Runner.run on the input its "
            "input_builder makes from the call's arguments (by default a preamble and the "
            "arguments as JSON): the Executor sees none of the Planner's items, and its final "
            "output is the call's result.",
            "agents/agent.py: Agent.as_tool; agents/agent_tool_input.py: "
            "default_tool_input_builder"),
    Finding("History is the session's items, all of them, followed by the new input; a "
            "session_input_callback or SessionSettings.limit may cut it, nothing projects it "
            "per Run.",
            "agents/run_internal/session_persistence.py: prepare_input_with_session"),
    Finding("The input of a Run that fails is already in the session (saved before the first "
            "model call), so an input never answered stays in the history where it was.",
            "agents/run_internal/run_loop.py: _persist_stream_input_if_needed"),
    Finding("Once a stream has emitted output the failure is an absolute veto on retrying, "
            "whatever the retry policy says.",
            "agents/run_internal/model_retry.py: _evaluate_retry"),
    Finding("A session's add_items that raises ends the streamed Run with that exception: "
            "the SDK neither retries the write nor goes on without it, and what the write "
            "held (a Run's inputs, or a turn's answer with its batch's results) is not stored.",
            "agents/run_internal/session_persistence.py: save_result_to_session, "
            "_session_add_items"),
    Finding("A tool with needs_approval pauses the Run: the call is a ToolApprovalItem among "
            "the result's interruptions, RunState.approve or RunState.reject answers it, and "
            "the Run resumed from that state runs it or sends the model the rejection; an "
            "approval carries no arguments of its own.",
            "agents/tool.py: FunctionTool.needs_approval; agents/run_state.py: "
            "RunState.approve, RunState.reject"),
    Finding("Two function calls of one response with the same call_id are refused with "
            "ModelBehaviorError before any tool runs.",
            "agents/run_internal/tool_planning.py: _dedupe_processed_response_invocations"),
    Finding("ModelSettings.timeout bounds a single model call; nothing bounds a whole Run but "
            "max_turns.", "agents/model_settings.py: ModelSettings.timeout"),
    Finding("The default failure handler of a function tool answers every error with one fixed "
            "sentence, 'An error occurred while running the tool. Please try again.', no code; "
            "RunConfig.tool_error_formatter may word it (the adapter makes it a structured "
            "error with a code).",
            "agents/tool.py: default_tool_error_function; agents/run_config.py: "
            "RunConfig.tool_error_formatter"),
    Finding("Input staged on a paused Run is admitted immediately before its next model call, "
            "and saved to the session then: the SDK's way to add a supplement to a running Run.",
            "agents/run_state.py: RunState.add_input; agents/run_internal/session_persistence.py:"
            " admit_pending_input"),
    Finding("cancel(mode='after_turn') lets the current turn finish, its whole tool batch "
            "included; cancel(mode='immediate') drops the call in flight. Neither leaves a "
            "placeholder for the calls a stop cut off.",
            "agents/result.py: RunResultStreaming.cancel"),
    Finding("A streamed Run cancelled before its first turn saves nothing: its input never "
            "reaches the session.",
            "agents/run_internal/run_loop.py: run_single_turn_streamed "
            "(_persist_stream_input_if_needed at the start of a turn)"),
    Finding("ToolOutputTrimmer, the SDK's input filter for large results, replaces outputs "
            "of turns older than the last recent_turns user messages with a preview and no "
            "reference; the current turn's results are sent whole.",
            "agents/extensions/tool_output_trimmer.py: ToolOutputTrimmer.__call__"),
    Finding("A function_tool validates a call's arguments against its signature (pydantic) and "
            "drops arguments it does not declare; invalid JSON or a non-object is a "
            "ModelBehaviorError handled as a tool error.",
            "agents/tool.py: function_tool; agents/function_schema.py: function_schema"),
)

NOTES = (
    "Each Run is Runner.run_streamed on one Agent (the scenario's system prompt as "
    "instructions, its tools as function_tools, a scripted Model: a subclass of the SDK's own "
    "agents.testing.ScriptedModel answering from the scenario) over one SQLiteSession.",
    "Retries are the SDK's: ModelSettings.retry with max_retries = model_attempts - 1 and the "
    "SDK's network_error policy; a scripted failure is the APIConnectionError an OpenAI client "
    "raises.",
    "A supplement that arrives while the Run works pauses it after the turn "
    "(cancel(mode='after_turn')), is staged with RunState.add_input and the Run resumed; the "
    "user's stop cancels the call in flight (immediate) or, between calls and while a batch "
    "runs, after the turn (stop_mid_batch, Q384).",
    "Best configuration: tool_not_found_behavior='return_error_to_model', a "
    "tool_error_formatter answering {status: error, error: {code, detail}}, an Agent.as_tool "
    "failure_error_function raising an Executor's context error and answering its other "
    "failures as that structured error, and the compaction session; the defaults "
    "configuration keeps the SDK's (the Run ends on a missing tool, errors answered with a "
    "fixed sentence, a plain SQLiteSession). Each setting is checked alone "
    "(tests/test_openai_agents_adapter.py: the defaults with only it changed pass its cases).",
    "The request the trace shows is the one the SDK hands the Model, read back: the "
    "instructions and the Responses input items; user items are mapped to the inputs handed "
    "over, by text and order (the SDK keeps no input identity).",
    "Loop exhaustion is the SDK's MaxTurnsExceeded with max_turns = loop_limit.",
    "Compaction (best configuration; ctxspec/adapters/openai_agents/compaction.py, Q382): "
    "the session is the SDK's OpenAIResponsesCompactionSession (input mode) over the "
    "SQLiteSession, its client a real AsyncOpenAI whose transport answers POST "
    "/responses/compact from the scenario's compaction script as the endpoint's documented "
    "output (every user message, then one compaction item holding the summary), with "
    "max_retries = model_attempts - 1. Its should_trigger_compaction hook answers no; before "
    "a Run whose first request would reach the trigger the adapter calls run_compaction "
    "(force), and a failed one keeps the Run's inputs in the session. The defaults "
    "configuration keeps the plain SQLiteSession, the SDK's default.",
    "A second mapping of the same API (tests/agents_second_mapping.py: no SQLiteSession, the "
    "caller carrying each Run's RunResultStreaming.to_input_list() into the next; the "
    "hand-over worded by an as_tool input_builder of our own) reaches the same verdict on "
    "every case it judges (tests/test_agents_second_mapping.py; without a session it has no "
    "compaction session, so the compaction cases are judged by this mapping alone): no other "
    "verdict here rests on the session or on the SDK's rendering of the hand-over.",
    "tool.pre_call mapped a second way (ctxspec/adapters/openai_agents/approvals.py, "
    "make_approvals_driver, Q540): each function tool's needs_approval instead of its "
    "ToolInputGuardrail; the Run pauses on a ToolApprovalItem, the chain's allow is "
    "RunState.approve and its deny RunState.reject (the model reads the rejection through "
    "tool_error_formatter), and the Run resumes from that state. Its grain is the guardrail's "
    "(allow or deny, no modify) and it reaches the same verdict on every case with a pre-call "
    "hook this report judges (tests/test_agents_second_mapping.py).",
    "The Planner and its Executors (ctxspec/adapters/openai_agents/executor.py): the root "
    "Agent's delegate tool is the Executor Agent through Agent.as_tool(parameters=Handover) — "
    "task, constraints and materials validated by the SDK and rendered into the Executor's "
    "only input by its own structured-input builder — with max_turns = loop_limit, the "
    "Planner's RunConfig and, in the best configuration, failure_error_function=None. Its "
    "on_invoke_tool is wrapped to run one execution at a time, since the scripted world "
    "answers Executor requests in arrival order (Q380).",
    "A scripted tool latency is real time (2 ms a tick) inside the tool, so the batch's calls, "
    "which the SDK runs concurrently, finish in that order.",
    "Hooks at the SDK's grain (ctxspec/adapters/openai_agents/guardrails.py, Q293): "
    "tool.pre_call is each function tool's ToolInputGuardrail, tool.post_call its "
    "ToolOutputGuardrail, model.pre_request RunConfig.call_model_input_filter (Q381), "
    "model.post_response RunHooks.on_llm_end, given to the Executor's nested Runs too "
    "(Q383); a deny "
    "is reject_content (the call never runs, or its result is withheld) or, before a request, "
    "an exception the SDK ends the Run on (HOOK_DENIED); a write has no place (a guardrail "
    "cannot modify, the filter replaces the input wholesale), a failed item is dropped. The "
    "compaction points are not declared: the compact call has no hook.",
    "The history API (ctxspec/adapters/openai_agents/history.py, Q492) is the session's own "
    "get_items, read through a SQLiteSession of the Session's id without session settings, so "
    "it serves every stored item (a limit bounds what the Runner is handed, not the store); "
    "the SDK checks no caller, so every read is served, and an item is stored whole (with "
    "bodies, no full body behind a preview).",
    "Crashes (ctxspec/adapters/openai_agents/crash.py, restart.py; Q493): two phases are "
    "writes the SDK makes to the session — input_accepted the write of a Run's inputs, just "
    "before its first model call, batch_fed_back the write of a turn whose answer called "
    "tools, made after the batch ran (the answer and its results together). The session's "
    "SQLiteSession dies just before or after such a write, or refuses it (commit_failures: "
    "its add_items raises, as a user's Session subclass on a full disk would; the SDK ends the "
    "Run on the exception, and the driver traces persistence_failed); once dead, nothing more "
    "runs or is stored. The restarted process opens the session anew, sends again the Run's "
    "inputs it does not hold, and starts Runner.run_streamed on it (with no input if it holds them "
    "all): a new Run of the SDK that continues from the stored items. Not mapped, because "
    "the SDK writes nothing there or nothing of its own: a request frozen, a first output, "
    "an answer before its batch ran, a tool's result alone, a hook started or decided, an "
    "Executor's start or end (its nested Run has no session), a compaction's steps, a Run's "
    "end (a failed or stopped Run writes nothing) and a RunState (written only by the caller, "
    "RunState.to_json).",
)

SETTINGS = (
    Setting("RunConfig(tool_not_found_behavior=...)", "'raise_error' (the Run ends on a call "
            "to a tool the Agent does not have)", "'return_error_to_model'",
            "A call to a missing tool ends the Run with ModelBehaviorError, where the design "
            "answers it as a format error a new business Loop corrects (§11).",
            frozenset({"S11-FORMAT-ERROR"})),
    Setting("Agent.as_tool(failure_error_function=...)", "default_tool_error_function (the "
            "Executor's failure answered to the Planner as the tool's error sentence)",
            "None (the Executor's failure raised through the Planner's Run)",
            "An Executor's context error becomes a tool result the Planner reads and answers "
            "on, where the design ends the whole invocation with that error (§11).",
            frozenset({"S11-EXECUTOR-CONTEXT-ERROR", "HM-MPRE-DENY-EXECUTOR-SUCCEEDED",
                       "HM-MPOST-DENY-EXECUTOR-SUCCEEDED"})),
    Setting("RunConfig(tool_error_formatter=...)", "None (the fixed sentence 'An error occurred "
            "while running the tool. Please try again.')",
            "a formatter answering {status: error, error: {code, detail}}",
            "The default failure handler of a function tool answers every error with one fixed "
            "sentence and no code, so the model cannot tell a business error or a format error "
            "from another (§6, §11).",
            frozenset({"S6-ITEM-ERROR", "S11-FORMAT-ERROR", "S11-ARGUMENTS-SCHEMA"})),
)
"""The settings the best configuration changes, each with the cases it fixes."""

DOUBTS = {
    "S7-PROVIDER-REFUSES": "passes on the Run's ending alone: the SDK knows no window and "
                           "traces no figures, so whether the user is told W and I is not "
                           "judged (Q294).",
    "EX3-WRITE": "a guardrail cannot modify, so every case with an edit fails on the grain "
                 "(Q293); a user could instead reject and let the model propose again, which "
                 "the design does not count as an edit.",
    "ROW-04-FLOOR": "passes on a compaction the adapter starts (run_compaction before the "
                    "Run) with a summary the scripted compact endpoint wrote as the API "
                    "documents its output; a real endpoint's summary is encrypted and what "
                    "the model reads of it is not judged (Q382).",
    "S11-PROTECTED-TOO-LARGE": "the Run's question is lost because the SDK saves input only "
                               "after the filter; a user could store the question with "
                               "session.add_items before a Runner.run with no input, which the "
                               "SDK's documentation does not show.",
    "ROW-25": "every read is served because the SDK has no caller to check; an application "
              "would put its own check in front of get_items, which would be its code, not "
              "the SDK's (Q492).",
    "ROW-07": "passes with every session item sent; with SessionSettings(limit=...) it fails "
              "(openai/openai-agents-python#3738, tests/real_bugs/): the verdict holds for the "
              "SDK's default of no limit.",
}
"""The verdicts we are least sure of (issue #32: disagreement is a test)."""

PROFILE = Profile(
    runtime="openai-agents",
    framework="OpenAI Agents SDK (agents.Runner with SQLiteSession)",
    versions={name: version(name) for name in PACKAGES},
    adapter_supplied={
        "estimator_injection": "the SDK has no window, output reserve, safety margin or input "
                               "budget and measures no request: the adapter measures what the "
                               "SDK hands the model with the injected estimator, computes W, "
                               "O, S, B and the trigger, and refuses a fixed input over B in "
                               "RunConfig.call_model_input_filter",
        "compaction_summary": "the SDK's OpenAIResponsesCompactionSession summarises (the "
                              "Responses API's compact endpoint, scripted offline) and "
                              "replaces the history, but asks whether to compact only after "
                              "a turn is saved: the adapter measures the history against the "
                              "trigger in its should_trigger_compaction hook and calls "
                              "run_compaction before a Run whose first request would reach "
                              "it (ctxspec/adapters/openai_agents/compaction.py)",
    },
    divergences=DIVERGENCES, settings=SETTINGS, doubts=DOUBTS, findings=FINDINGS, notes=NOTES,
    defaults="ctxspec.adapters.openai_agents:make_default_driver",
)
