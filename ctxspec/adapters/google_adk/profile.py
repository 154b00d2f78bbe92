"""What the Google ADK driver's compatibility report says of ADK: the capabilities the adapter
supplies itself, the divergence each failing case shows, and the ADK behaviours found with
the source read (docs/compatibility/google-adk.md is generated from this and a fresh run).
Sources are files under the installed ``google/adk`` package."""

from importlib.metadata import version

from ctxspec.conformance.compat import Divergence, Finding, Profile, Setting

PACKAGES = ("google-adk", "google-genai", "sqlalchemy", "aiosqlite")

_WHOLE_SESSION = Divergence(
    "Every request carries the session's events whole, and the instruction with ADK's "
    "identity sentence appended: no projection of the recent_runs last Runs, no marker of an "
    "earlier Run's terminal status, tool calls of older Runs kept (§4).",
    "google/adk/flows/llm_flows/context/_contents.py: _get_contents; "
    "google/adk/flows/llm_flows/prompt/_identity.py: _IdentityLlmRequestProcessor")
_IDENTITY = Divergence(
    "ADK appends 'You are an agent. Your internal name is \"…\".' (and the agent's "
    "description) to every agent's instruction, so the system prompt sent is never the "
    "Agent's own, and the estimators count the sentence; only the single-turn agent mode "
    "leaves it out (§3, §7).",
    "google/adk/flows/llm_flows/prompt/_identity.py: _IdentityLlmRequestProcessor.run_async")
_LAGGING_THRESHOLD = Divergence(
    "EventsCompactionConfig's token threshold is read against the prompt size the provider "
    "reported for the previous request (or, without one, the events' characters / 4), before "
    "a request is built and after an invocation: the request that first reaches the trigger "
    "is sent as it is, and the summary comes after it (§7, §8).",
    "google/adk/apps/compaction.py: _latest_prompt_token_count, "
    "_run_compaction_for_token_threshold_config; google/adk/flows/llm_flows/context/"
    "_compaction.py: CompactionRequestProcessor; google/adk/runners.py: "
    "Runner._run_post_invocation_compaction")
_SUMMARY_FAILURE_SWALLOWED = Divergence(
    "A summarizer call that fails is logged and the invocation goes on with the uncompacted "
    "history ('The full history is still usable, so a failure must not end the turn'): the "
    "Run is never ended COMPACTION_FAILED, and a summary call is never retried (§8, §11).",
    "google/adk/apps/compaction.py: _summarize_events_with_trace")
_NO_SUMMARY_BUDGET = Divergence(
    "LlmEventSummarizer sends one request of every event in the range, with no output limit "
    "and no summary budget (H = B − F, T, the chunk's room): no chunks, a summary whose room "
    "is gone is asked anyway, and the request after it is not measured against B again (§8).",
    "google/adk/apps/llm_event_summarizer.py: LlmEventSummarizer.maybe_summarize_events")
_NO_PREVIEW = Divergence(
    "A tool's whole result goes into its function_response: no bounded preview marked "
    "truncated with a result_ref, and no result.read (§6).",
    "google/adk/flows/llm_flows/tools/_caller.py: _build_response_event")
_CALLBACK_GRAIN = Divergence(
    "A callback changes the request, the response, the arguments or the result it is given "
    "in place, or replaces it: it has no patch of a named record's field on a base revision, "
    "no field registry, scope, protected-input or fit check, so what the design refuses or "
    "diagnoses of a write is applied as written, and a request's change lives in that request "
    "only (§3, §7).",
    "google/adk/agents/llm_agent.py: before_model_callback, after_model_callback, "
    "before_tool_callback, after_tool_callback")
_PROPOSAL_KEPT = Divergence(
    "A before-tool callback's change of the arguments runs the tool with them, but the "
    "session keeps the model's function_call as proposed: later requests and the history "
    "show the old arguments, not the effective call (§3, §6).",
    "google/adk/flows/llm_flows/tools/_caller.py: _prepare_function_call (the arguments a "
    "deep copy of function_call.args)")
_NO_DEADLINE = Divergence(
    "ADK has no Run deadline (RunConfig bounds the model calls of an invocation, "
    "max_llm_calls, not its time), so a Run goes on, and a retry is sent, after the Run's time "
    "is up (§8, §11).",
    "google/adk/agents/run_config.py: RunConfig")
_NO_INPUT_INTO_INVOCATION = Divergence(
    "An invocation takes the user's input only as its new_message: a supplement that arrives "
    "while the model or a tool works reaches the model at the next invocation, after the "
    "batch's results, not at the request being prepared (§5).",
    "google/adk/runners.py: Runner.run_async (new_message)")
_NO_RETRY_AFTER_OUTPUT = Divergence(
    "A model's retries are its client's (Gemini's HttpRetryOptions retries a failed HTTP "
    "request): a stream that broke after its first output is never asked again, so the Run "
    "fails where the design retries the Attempt without the fragment (§11, §12 row 12).",
    "google/adk/models/google_llm.py: Gemini.retry_options")
_STOP_OUTSIDE_THE_CALL = Divergence(
    "ADK has no stop: the client ends an invocation by reading no further events, which "
    "cannot reach into a model call in flight, so the provider client's retry of a failed "
    "attempt is still sent after the user's stop (§11).",
    "google/adk/runners.py: Runner.run_async; google/adk/models/google_llm.py: "
    "Gemini.retry_options")
_USAGE_DRIVES_THRESHOLD = Divergence(
    "The compaction threshold reads the provider's reported prompt_token_count: a reported "
    "usage far from the request's size compacts too early or too late, where the design uses "
    "usage for audit only (§7).",
    "google/adk/apps/compaction.py: _latest_prompt_token_count")
_ANSWER_LOST_IN_A_CRASH = Divergence(
    "ADK stores a model answer only as the event it appends after the after-model callbacks: "
    "a death before that write loses the answer, and the resumed invocation asks the model "
    "again, where the design saved the raw answer first (§10).",
    "google/adk/runners.py: Runner.run_async (each event appended as it is yielded); "
    "google/adk/sessions/database_session_service.py: DatabaseSessionService.append_event")
_BATCH_LOST_IN_A_CRASH = Divergence(
    "A batch's results are stored together as one function_response event after every call "
    "of the batch has run: a death before that write loses the results, and the resumed "
    "invocation runs the calls again (§10: a tool whose result was produced is not run "
    "again).",
    "google/adk/flows/llm_flows/tools/_rearranger.py: merge_function_response_events; "
    "google/adk/sessions/database_session_service.py: DatabaseSessionService.append_event")
_EXECUTOR_IN_MEMORY = Divergence(
    "AgentTool runs the Executor on a Runner of its own over an InMemorySessionService: its "
    "answers and results never reach the Planner's session service, so a death inside an "
    "execution loses it and the resumed Planner's call runs the Executor from its start "
    "(§10).",
    "google/adk/tools/agent_tool.py: AgentTool.run_async")
_BUDGET_PER_INVOCATION = Divergence(
    "RunConfig.max_llm_calls counts the model calls of one invocation in memory: a resumed "
    "invocation after a restart, and the Executor's own Runner behind AgentTool, start "
    "counting afresh, so the Loop budget is regained (§10, §11).",
    "google/adk/agents/invocation_context.py: InvocationContext.increment_llm_call_count")
_POST_RESPONSE_NOT_KEPT = Divergence(
    "A crash right after an after-model callback's denial leaves nothing of the answer or the "
    "decision in the session (the denied event is never appended), so no write of that phase "
    "exists to die at (§3, §10).",
    "google/adk/flows/llm_flows/core/_finalizer.py: handle_after_model_callback")
_NO_END_OF_A_FAILED_RUN = Divergence(
    "A resumable agent's end_of_agent event is appended only when the agent finishes: an "
    "invocation that failed, and a Run stopped before or during its invocation, leave none, "
    "so the terminal state of such a Run is never stored and a later Run's finalisation is "
    "an earlier occurrence of that write (§10, §11).",
    "google/adk/agents/llm_agent.py: LlmAgent._run_async_impl (set_agent_state(..., "
    "end_of_agent=True) after its last event)")
_IDS_BY_PROVIDER = Divergence(
    "A function call's identity is the provider's id, by which ADK pairs a call with its "
    "response: with two calls of one response sharing one, a tool is run again beyond the "
    "calls the model made, where the design runs each under its own call_id (§2).",
    "google/adk/flows/llm_flows/tools/_caller.py: _prepare_function_call; google/adk/flows/"
    "llm_flows/tools/_rearranger.py: merge_function_response_events")
_NO_SCHEMA_CHECK = Divergence(
    "ADK runs a call whose arguments break the tool's declared schema: a tool's "
    "FunctionDeclaration is given to the model, and nothing validates the arguments against "
    "it before the tool runs (§11).",
    "google/adk/tools/base_tool.py: BaseTool._get_declaration, BaseTool.run_async")
_RESULT_READ = tuple(f"HM-{part}-ROOT-SUCCEEDED-RESULTREAD" for part in (
    "MPRE-ALLOW", "MPRE-MODIFY", "MPRE-FAIL", "MPOST-ALLOW", "MPOST-MODIFY", "MPOST-FAIL",
    "TPRE-ALLOW", "TPRE-MODIFY", "TPRE-FAIL", "TPOST-ALLOW", "TPOST-MODIFY", "TPOST-DENY",
    "TPOST-FAIL"))
_TIMED_OUT = tuple(f"HM-{point}-ALLOW-{role}-TIMED_OUT" for point in ("MPRE", "MPOST", "TPRE",
                                                                        "TPOST")
                   for role in ("ROOT", "EXECUTOR"))

DIVERGENCES = {
    **dict.fromkeys(("ROW-01", "ROW-02", "EX4-OLDER-RUN", "S4-CURRENT-RUN",
                     "S4-RECENT-BY-ORDER", "S2-POST-PROCESSED"), _WHOLE_SESSION),
    **dict.fromkeys(("ROW-03", "S7-BYTES-CJK"), _IDENTITY),
    **dict.fromkeys(("ROW-04-AT", "ROW-04-FLOOR", "ROW-05", "S5-FREEZE-LATE", "EX8-ROW1",
                     "EX8-ROW2", "EX8-ROW5",
                     "S7-HOOK-OVER-BUDGET", "S7-HOOK-FIXED-KEPT", "S8-ABOVE-TRIGGER-AFTER",
                     "S8-STOP-DURING-COMPACTION", "S11-STOP-DURING-COMPACTION",
                     "S11-STOP-IN-FLIGHT-CHUNK", "S11-DEADLINE-DURING-COMPACTION"),
                    _LAGGING_THRESHOLD),
    **dict.fromkeys(("S11-COMPACTION-FAILED", "S8-SUMMARY-FAILS", "S8-SUMMARY-RETRIED"),
                    _SUMMARY_FAILURE_SWALLOWED),
    **dict.fromkeys(("EX8-ROW3", "EX8-ROW4", "EX8-ROW6", "S8-TARGET-EXPLICIT",
                     "S8-TARGET-PROVIDER-LIMIT", "S8-SOFT-TARGET", "S8-TARGET-CAP",
                     "S8-SUMMARY-CUT-AT-T", "S8-PROMPTS-LEAVE-NO-ROOM", "S8-CHUNK-FLOOR"),
                    _NO_SUMMARY_BUDGET),
    **dict.fromkeys(("ROW-08", "S6-PREVIEW-STAYS", "S6-PREVIEW-MARKED-SENT", "S6-RESULT-READ",
                     "S6-ARGS-ADJUSTED-SENT", "S6-TEXT-MODIFIED-SENT", "S6-TOOL-EDIT-MARKED-SENT",
                     "S6-REPLACED-BODY-UNREAD", *_RESULT_READ), _NO_PREVIEW),
    **dict.fromkeys(("ROW-15", "EX3-WRITE-CONFLICT", "EX3-DENY-CONFLICT",
                     "BAD-UNREGISTERED-FIELD", "BAD-STALE-ALLOW", "BAD-STALE-DENY",
                     "BAD-INVALID-PATCH", "BAD-FORBIDDEN-FIELD", "BAD-UNKNOWN-TARGET",
                     "S1-NO-SCOPE", "S3-HOOK-CHANGE-SEEN", "S3-VIEW-INDEX",
                     "S3-OVERLAPPING-WRITES", "S3-POST-CALL", "S3-ANNOTATIONS",
                     "S3-ALLOW-NO-GRANT", "S7-HOOK-FIXED-TOO-BIG", "S7-ESTIMATE-WHOLE-REQUEST"),
                    _CALLBACK_GRAIN),
    **dict.fromkeys(("ROW-16-17", "EX3-WRITE"), _PROPOSAL_KEPT),
    **dict.fromkeys((*_TIMED_OUT, "S8-DEADLINE-BETWEEN-ATTEMPTS"), _NO_DEADLINE),
    **dict.fromkeys(("ROW-06", "SCENARIO-TRIGGER-ONCE"), _NO_INPUT_INTO_INVOCATION),
    **dict.fromkeys(("ROW-12", "ROW-12-RETRY"), _NO_RETRY_AFTER_OUTPUT),
    "S11-STOP-BEFORE-RETRY": _STOP_OUTSIDE_THE_CALL,
    **dict.fromkeys(("S7-USAGE-HUGE", "S7-USAGE-TINY"), _USAGE_DRIVES_THRESHOLD),
    "S2-PROVIDER-CALL-IDS": _IDS_BY_PROVIDER,
    "S11-ARGUMENTS-SCHEMA": _NO_SCHEMA_CHECK,
    **dict.fromkeys(("S11-LOOPS-SHARED", "S10-TAKEOVER-BUDGET"), _BUDGET_PER_INVOCATION),
    **dict.fromkeys(("CRASH-TOOLS-EFFECTIVE_RESULT_COMMITTED-1-BEFORE",
                     "CRASH-TOOLS-EFFECTIVE_RESULT_COMMITTED-2-BEFORE",
                     "CRASH-RUNS-EFFECTIVE_RESULT_COMMITTED-1-BEFORE",
                     "CRASH-RUNS-EFFECTIVE_RESULT_COMMITTED-2-BEFORE",
                     "CRASH-PLANNER-EFFECTIVE_RESULT_COMMITTED-1-BEFORE",
                     "CRASH-PLANNER-EFFECTIVE_RESULT_COMMITTED-2-BEFORE",
                     "CRASH-PLANNER-EFFECTIVE_RESULT_COMMITTED-3-BEFORE",
                     "CRASH-HOOKED-EFFECTIVE_RESULT_COMMITTED-2-BEFORE"),
                    _ANSWER_LOST_IN_A_CRASH),
    "CRASH-TOOLS-BATCH_FED_BACK-1-BEFORE": _BATCH_LOST_IN_A_CRASH,
    **dict.fromkeys((*(f"CRASH-PLANNER-EFFECTIVE_RESULT_COMMITTED-{n}-{when}"
                       for n in range(4, 8) for when in ("BEFORE", "AFTER")),
                     *(f"CRASH-PLANNER-BATCH_FED_BACK-{n}-{when}"
                       for n in (1, 2, 3) for when in ("BEFORE", "AFTER"))),
                    _EXECUTOR_IN_MEMORY),
    "CRASH-HOOK-POST-RESPONSE-DENY-EFFECTIVE_RESULT_COMMITTED": _POST_RESPONSE_NOT_KEPT,
    **dict.fromkeys((f"CRASH-RUNS-RUN_FINALISED-{n}-{when}" for n in (3, 4)
                     for when in ("BEFORE", "AFTER")), _NO_END_OF_A_FAILED_RUN),
}
"""Each failing case and the divergence it shows (the sentences of the report)."""

FINDINGS = (
    Finding("The Runner appends every non-partial event to the session service as the flow "
            "yields it: the user's message, each model answer (after the after-model "
            "callbacks), each batch's merged function responses, a compaction's summary.",
            "google/adk/runners.py: Runner.run_async; google/adk/sessions/"
            "database_session_service.py: DatabaseSessionService.append_event"),
    Finding("A request's contents are the session's events, rearranged so each function "
            "response follows its call; a function call with no response anywhere is dropped "
            "from the request with a warning, so a call a stop cut off simply disappears.",
            "google/adk/flows/llm_flows/tools/_rearranger.py: drop_orphaned_function_calls"),
    Finding("Token-threshold compaction runs as a request processor before the contents are "
            "built and again after each invocation; the threshold compares the last reported "
            "prompt_token_count of the agent's events (or characters / 4) with "
            "token_threshold; the summary covers the events before the last "
            "event_retention_size, moved back so no retained response loses its call, and "
            "cut at the longest prefix with no open call — since 2.13.0 skipping calls that "
            "provably never get a response (google/adk-python#7236 fixed).",
            "google/adk/apps/compaction.py: _run_compaction_for_token_threshold_config, "
            "_safe_token_compaction_split_index, _longest_self_contained_prefix, "
            "_provably_dead_call_ids"),
    Finding("A compaction is kept as an event whose EventCompaction holds the summary and the "
            "start and end timestamps of what it covers; a request replaces the raw events in "
            "that time interval by the summary, materialised as a model turn.",
            "google/adk/flows/llm_flows/context/_compaction.py: _process_compaction_events"),
    Finding("A summary call that raises is caught and logged; the turn goes on with the "
            "history uncompacted.",
            "google/adk/apps/compaction.py: _summarize_events_with_trace"),
    Finding("A before-tool callback that returns a dict skips the tool, and the dict is its "
            "result; an after-tool callback's dict replaces the result; a call to a tool the "
            "agent does not have is answered by an error response to the model unless an "
            "on_tool_error_callback answers it; a tool's exception ends the invocation unless "
            "an on_tool_error_callback returns a response.",
            "google/adk/flows/llm_flows/tools/_caller.py: _execute_single_prepared_call"),
    Finding("ADK strips function-call ids it generated itself (prefix 'adk-') from what the "
            "model is sent; a provider's own ids are kept.",
            "google/adk/flows/llm_flows/functions.py: remove_client_function_call_id"),
    Finding("With ResumabilityConfig(is_resumable=True) Runner.run_async(invocation_id=...) "
            "resumes an invocation from its stored events; ADK documents it as at-least-once "
            "for tools ('Tool call to resume needs to be idempotent').",
            "google/adk/apps/_configs.py: ResumabilityConfig"),
    Finding("RunConfig.max_llm_calls bounds the model calls of one invocation "
            "(LlmCallsLimitExceededError); nothing bounds a Run's time.",
            "google/adk/agents/invocation_context.py: LlmCallsLimitExceededError; "
            "google/adk/agents/run_config.py: RunConfig"),
)

NOTES = (
    "Each Run is Runner.run_async on an App whose root is an LlmAgent (the scenario's system "
    "prompt as its instruction, its tools as BaseTool subclasses declaring the scenario's "
    "schema, GenerateContentConfig(max_output_tokens=O), a scripted BaseLlm answering from the "
    "scenario) over a DatabaseSessionService on a temporary SQLite file "
    "(sqlite+aiosqlite), one ADK session per Session; RunConfig(max_llm_calls=loop_limit).",
    "The request the trace shows is the LlmRequest ADK hands the model, read back: the system "
    "instruction and the contents; user parts are mapped to the inputs handed over, by text "
    "and order (ADK keeps no input identity). The §8 decision on a business request is the "
    "design's, computed on the request as sent, and 'compact' when a summary was made for it.",
    "Retries are the model client's, as Gemini's retry_options leaves them to google-genai: a "
    "failure before any output is asked again up to model_attempts attempts in all; a stream "
    "broken after output is not.",
    "A supplement given while a Run works waits until the invocation's batch results are "
    "saved (the client stops reading there) and is the next invocation's new message; one "
    "that arrives after the Run's final answer waits for the next question. The user's stop "
    "is the client reading no further events; a Run stopped before it starts has its question "
    "appended to the session as the user's event, with no invocation.",
    "Compaction: EventsCompactionConfig(token_threshold = the trigger floor(r × B), "
    "event_retention_size = 1, summarizer = LlmEventSummarizer over a scripted model "
    "answering from the scenario's compaction script) — the design's trigger, and the "
    "fewest raw events kept; the scripted model reports each request's measure as its "
    "prompt_token_count, as a provider reports the prompt it was sent (a scripted usage is "
    "reported as given). The summarizer sets no output limit; its request is traced with the "
    "Agent's output reserve O as its max output (Q450).",
    "Hooks (ctxspec/adapters/google_adk/callbacks.py): model.pre_request is "
    "before_model_callback (a write of params.<name> sets that field of the request's config, "
    "a context patch of a record's text changes or annotates it in that request, a deny "
    "raises), model.post_response after_model_callback (a write of text returns the edited "
    "response, a deny raises), tool.pre_call before_tool_callback (a write of arguments "
    "changes the arguments the tool runs with, a deny returns the denial as the result), "
    "tool.post_call after_tool_callback (a write of result or a deny replaces the result); the "
    "Executor's agent has the same callbacks. The compaction points are not declared: the "
    "summarizer's call has no callback.",
    "The Planner and its Executors (ctxspec/adapters/google_adk/executor.py): the delegate "
    "tool is ADK's AgentTool over the Executor LlmAgent, whose input_schema is the hand-over "
    "(task, constraints, materials).",
    "Crash phases (ctxspec/adapters/google_adk/crash.py, best configuration): the session "
    "service dies before or after appending the user's event (input_accepted, one occurrence "
    "per input it carries), a model answer's event (effective_result_committed), a batch's "
    "function responses (batch_fed_back) or the root agent's end_of_agent event "
    "(run_finalised); a new session service and Runner on the same file resume the "
    "invocation by its id (ResumabilityConfig), send the message again when the store lacks "
    "it, or read the Run's final answer when the store holds it.",
    "Best configuration: an on_tool_error_callback answering a tool's error as "
    "{status: error, error: {code, detail}} (an Executor's context error raised on), and "
    "ResumabilityConfig(is_resumable=True); the defaults configuration keeps ADK's (a tool's "
    "exception ends the invocation, no resumption, so no crash phase is declared).",
)

SETTINGS = (
    Setting("LlmAgent(on_tool_error_callback=...)", "None (a tool's exception ends the "
            "invocation; an AgentTool's failure ends the Planner's)",
            "a callback answering {status: error, error: {code, detail}}",
            "Without it a tool's business error or an Executor's denied request is no result "
            "the model can read: the whole Run fails, where the design answers the call with a "
            "structured error and goes on (§6, §11).",
            frozenset({"S6-ITEM-ERROR", "S11-FORMAT-ERROR", "HM-MPRE-DENY-EXECUTOR-SUCCEEDED",
                       "HM-MPOST-DENY-EXECUTOR-SUCCEEDED"})),
)
"""The settings the best configuration changes, each with the cases it fixes."""

DOUBTS = {
    "ROW-04-BELOW": "passes on the adapter's measure: ADK's own threshold is read against the "
                    "scripted model's reported prompt size, which is that measure (Q450).",
    "S8-STOPPED-CALL-COMPACTS": "passes because ADK drops a call with no response from every "
                                "request and compacts past it; the design shows the call with "
                                "a placeholder, which no case here requires of ADK.",
    "S11-FORMAT-ERROR": "a missing tool is answered by ADK's own error response either way; "
                        "the defaults fail only on the result_facts the adapter's "
                        "on_tool_error_callback adds.",
}
"""The verdicts we are least sure of (issue #32: disagreement is a test)."""

PROFILE = Profile(
    runtime="google-adk",
    framework="Google ADK (Runner over DatabaseSessionService)",
    versions={name: version(name) for name in PACKAGES},
    adapter_supplied={
        "estimator_injection": "ADK has no window, output reserve, safety margin or input "
                               "budget: the adapter measures what ADK hands the model with "
                               "the injected estimator, computes W, O, S, B and the trigger, "
                               "and refuses a fixed input over B before it is sent",
    },
    divergences=DIVERGENCES, settings=SETTINGS, doubts=DOUBTS, findings=FINDINGS, notes=NOTES,
    defaults="ctxspec.adapters.google_adk:make_default_driver",
)
