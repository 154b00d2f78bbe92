"""What the LangChain driver declares and what its compatibility report says of LangChain: the
capabilities, those the adapter supplies itself, and the divergences, behaviours and source
read (docs/compatibility/langchain.md is generated from this and a fresh run)."""

from dataclasses import dataclass
from importlib.metadata import version

from ctxspec.adapters.langchain_crash import CAPABILITIES as CRASHES
from ctxspec.adapters.langchain_hooks import CAPABILITIES as HOOKS
from ctxspec.conformance.compat import Divergence, Finding, Profile, Setting


@dataclass(frozen=True)
class Configuration:
    """The settings of LangChain's own API in which the two configurations of the report
    differ; every other setting is the same in both (the figures the scenario gives)."""

    name: str
    trim_tokens_to_summarize: int | None
    """SummarizationMiddleware's cap on the material it summarises (LangChain's default
    4000; ``None``: no cap)."""
    count_whole_request: bool
    """Whether SummarizationMiddleware's ``token_counter`` counts the request the model is
    sent (system prompt and tool schemas too) or only the messages it is handed."""
    summary_attempts: bool = False
    """Whether the summariser is a Runnable retried ``model_attempts`` times (``summarizer=
    model.with_retry(stop_after_attempt=...) | StrOutputParser()``) rather than a chat model,
    which SummarizationMiddleware retries three times."""
    trim_before_model: bool = False
    """A ``trim_messages`` pre-model hook in place of SummarizationMiddleware: the path of
    LangChain's short-term memory guide, run for the bug corpus (tests/real_bugs/)."""


DEFAULTS = Configuration("defaults", trim_tokens_to_summarize=4000, count_whole_request=False)
BEST = Configuration("best", trim_tokens_to_summarize=None, count_whole_request=True,
                     summary_attempts=True)
TRIM = Configuration("trim", trim_tokens_to_summarize=None, count_whole_request=True,
                     trim_before_model=True)

CAPABILITIES = frozenset({"root_loop", "estimator_injection", "compaction_summary", "stop",
                          "usage_reports", "hooks:tool.pre_call", "final_answers", "triggers",
                          "sessions", "planner_executor", *HOOKS, *CRASHES})
"""``root_loop``: create_agent's model/tools loop. ``compaction_summary``:
SummarizationMiddleware. ``stop``: the client stops reading the Run's stream at the next step.
``usage_reports``: the scripted answer's usage is the AIMessage's ``usage_metadata``, as a
provider integration reports it. ``hooks:tool.pre_call``: HumanInTheLoopMiddleware's review, of
the Planner's calls and of an Executor's (ctxspec/adapters/langchain_review.py). ``crash:*``
(ten phases) and ``commit_failures``: LangGraph's checkpoint and pending writes, the Executor's
in its subgraph's namespace, through the Session's checkpointer
(ctxspec/adapters/langchain_crash.py).
``triggers``: a supplement is streamed into the thread at the next checkpoint before a model
call."""

PACKAGES = ("langchain", "langchain-core", "langgraph", "langgraph-checkpoint")


_SUMMARY = "langchain/agents/middleware/summarization.py"
_HITL = "langchain/agents/middleware/human_in_the_loop.py"
_AGENT = "langchain/agents/factory.py"
_NO_DELIVERY = Divergence(
    "LangChain has no delivery of inputs: a supplement a Run claimed and never got an answer "
    "to stays a message of the thread, never carried once to the next question as a new "
    "delivery (§5).", "langchain/agents/middleware/types.py: AgentState (messages only, no "
    "input or delivery channel)")
_WHOLE_THREAD = Divergence(
    "create_agent sends the thread's whole message list: no projection of the recent_runs "
    "last Runs and no marker of an earlier Run's terminal status (§4).",
    f"{_AGENT}: create_agent, model_node (request.messages = state['messages'])")
_NO_TARGET = Divergence(
    "SummarizationMiddleware gives its summary call no output limit: the summariser is "
    "invoked with the prompt alone, so the summary target T the design derives per episode "
    "(§8) has no place; a summariser's max_tokens is fixed when the model is built.",
    f"{_SUMMARY}: _create_summary (self._summary_model.invoke(prompt))")
_NO_PREVIEW = Divergence(
    "A tool's whole result goes into its ToolMessage: no bounded preview marked truncated "
    "with a result_ref, and no result.read (§6).",
    "langgraph/prebuilt/tool_node.py: ToolNode._execute_tool_sync (the result becomes "
    "ToolMessage.content)")
_NO_BUDGET = Divergence(
    "LangChain checks no input budget B: a request whose fixed input exceeds it is sent "
    "anyway instead of failing with CONTEXT_PROTECTED_INPUT_TOO_LARGE (§8).",
    f"{_AGENT}: model_node (no budget check before the call)")
_NO_DEADLINE = Divergence(
    "LangChain has no Run deadline: ModelRetryMiddleware retries and SummarizationMiddleware "
    "summarises whatever time the Run has left (§8, §11).",
    "langchain/agents/middleware/model_retry.py: ModelRetryMiddleware.wrap_model_call")
_WHOLE_ANSWER = Divergence(
    "create_agent's model node takes an answer whole: a stream broken after its first output "
    "is an exception like a failure before output, with no first-output receipt and no "
    "fragment kept marked (§5, §11).",
    f"{_AGENT}: model_node (model.invoke, an exception propagates)")
_EDIT_KEPT = Divergence(
    "HumanInTheLoopMiddleware runs an edited call with the reviewer's arguments but keeps the "
    "model's own call in the AIMessage the model reads next; the edit shows only as a notice "
    "prepended to the tool's result text (§3, §6).",
    f"{_HITL}: _process_decision, wrap_tool_call, _apply_edit, _prepend_notice")
_UNCHECKED = Divergence(
    "HumanInTheLoopMiddleware applies a reviewer's decision as sent and checks nothing: an "
    "edit replaces only the call's name and arguments (no context patch, no field registry or "
    "rights, no base revision), so nothing is diagnosed where the design voids the patch (§3).",
    f"{_HITL}: EditDecision, _process_decision, _apply_edit")

_NO_FREEZE = Divergence(
    "LangChain freezes no request: a supplement handed to the thread while the Run works "
    "joins the very next model call (a retry, or the call after a summary, included), where "
    "the design fixes the input cutoff once per request (§5).",
    f"{_AGENT}: model_node (the request is built from state['messages'] at each call)")
_MIDDLEWARE_UNCHECKED = Divergence(
    "A middleware's state update is applied as returned: no field registry, scope, "
    "protected-input, diagnostic or budget check on a hook's change, so an item the design "
    "voids or refuses is kept and no diagnostic names it (§3, §7).",
    "langgraph/graph/message.py: add_messages; langchain/agents/middleware/types.py: "
    "AgentMiddleware.before_model, after_model, wrap_tool_call")
_NO_READ = Divergence(
    "LangChain has no result.read of its own: a model's call of it goes to the tools like any "
    "other (here: none of the Agent's), so the full body behind a preview is never read back "
    "and the Run goes on without it (§6).",
    "langgraph/prebuilt/tool_node.py: ToolNode._func (only the bound tools run)")
_NO_MARK = Divergence(
    "An edit leaves no mark in what LangChain sends: a message replaced by id is "
    "indistinguishable from the original, so no rendered request marks the change (§6).",
    "langgraph/graph/message.py: add_messages (a message with the same id replaces the old)")
_QUESTION_SUMMARISED = Divergence(
    "SummarizationMiddleware keeps a number of messages, not the protected inputs: the current "
    "question is summarised away with the history (§5, §8).",
    f"{_SUMMARY}: _determine_cutoff_index, _partition_messages")

_LOOPS_PER_AGENT = Divergence(
    "ModelCallLimitMiddleware counts the model calls of one agent's invocation: an Executor, a "
    "sub-agent, counts its own, so the Run's Loop budget is not shared by the Planner and its "
    "Executors (§11).",
    "langchain/agents/middleware/model_call_limit.py: ModelCallLimitMiddleware.before_model")
_ERROR_NO_CODE = Divergence(
    "A tool's failure reaches the model as the exception's text with status 'error' and no "
    "code: an Executor denied by a hook is a failed delegate call whose code (HOOK_DENIED) no "
    "message carries (§3, §11).",
    "langchain_core/tools/base.py: BaseTool.run (_handle_tool_error, ToolMessage(status="
    "'error'))")

_NO_SHARED = Divergence(
    "LangChain has no Run-level shared field: a hook's patch of one names nothing in the "
    "agent's state, and the chain's deny is lost with it (§3 scopes).",
    "langchain/agents/middleware/types.py: AgentState (messages only)")

_BUDGET_UNTRACKED = Divergence(
    "ModelCallLimitMiddleware's run count is an UntrackedValue, never checkpointed: a "
    "thread resumed after a crash starts the Run's loop budget afresh (§10).",
    "langchain/agents/middleware/model_call_limit.py: ModelCallLimitState; "
    "langgraph/pregel/_loop.py: PregelLoop.put_writes (UntrackedValue writes not saved)")
_NO_TERMINAL = Divergence(
    "A Run that raised or that the client stopped leaves no terminal state in the thread: "
    "LangGraph writes no checkpoint after an exception or a closed stream (a raised error is "
    "only its task's pending write, the failed node still next), so such an ending has no "
    "commit to crash at and a restarted process would resume the Run rather than know it "
    "ended (§10, §11). The RUNS example's third and fourth endings (a failed and a stopped "
    "Run come first) are never passed.",
    "langgraph/pregel/_runner.py: PregelRunner.tick, commit (the ERROR write); "
    "langgraph/pregel/main.py: Pregel.stream (no checkpoint after the loop raised)")

_SUMMARISER_COPY = Divergence(
    "SummarizationMiddleware hands its summarizer the messages to summarise and builds the "
    "thread from its own list: a compaction pre-request change of the material reaches the "
    "summary call only, while the kept tail the next request carries keeps the text the hook "
    "replaced (§3, §8).", f"{_SUMMARY}: before_model (preserved_messages returned unchanged), "
    "_create_summary (self.summarizer.invoke(trimmed_messages))")
_SUMMARY_AS_USER = Divergence(
    "SummarizationMiddleware puts the summary into the thread as a HumanMessage: the model "
    "reads it as a user turn, not as the system's summary of earlier material (§8).",
    f"{_SUMMARY}: _build_new_messages (HumanMessage(content=..., additional_kwargs="
    "{'lc_source': 'summarization'}))")
_SUMMARISER_UNCHECKED = Divergence(
    "A Runnable composed around the summarizer changes the material or the summary as it "
    "returns them: no field registry or coverage check, so a compaction hook's write of an "
    "unregistered field is applied and no diagnostic names it (§3, §8).",
    "langchain_core/runnables/base.py: RunnableSequence.invoke; "
    f"{_SUMMARY}: _check_summary (only that the summary is a str)")
_BELOW_TRIGGER_UNMARKED = Divergence(
    "create_agent sends the thread's messages with no marker of the earlier Run's terminal "
    "status, so Run 2's request counts 3576 where the design's crosses the trigger 3600: "
    "SummarizationMiddleware does not summarise, no compaction hook decides and there is no "
    "decision to crash after (§4, §10).",
    f"{_AGENT}: model_node (request.messages = state['messages']); {_SUMMARY}: "
    "_should_summarize")

_STOP_AFTER_RETRIES = Divergence(
    "The user's stop is read only between the graph's steps (the client stops reading the "
    "Run's stream): ModelRetryMiddleware retries a failed model call inside the model node, "
    "so a retry left is sent after the stop (§11: a stop starts no new business attempt).",
    "langchain/agents/middleware/model_retry.py: ModelRetryMiddleware.wrap_model_call "
    "(the retry loop checks no cancellation)")

_RERUN_UNSAVED = Divergence(
    "LangGraph knows a tool call only by its saved writes: nothing marks a call started, and a "
    "call's result is stored after it returned, behind the calls of its batch still queued "
    "(with max_concurrency=1 the next call runs first), so a call that ran but whose result "
    "was not saved is run again when the thread resumes, where the design settles it "
    "UNKNOWN_OUTCOME and never runs it again blindly (§10). No setting adds a started mark: "
    "durability only moves the step's checkpoint, and create_agent's tools node takes no "
    "cache policy.",
    "langgraph/pregel/_runner.py: PregelRunner.commit; langgraph/pregel/_loop.py: "
    "PregelLoop.put_writes (the saver's put_writes submitted to the step's executor), "
    "_reapply_writes_to_succeeded_nodes; langgraph/pregel/main.py: Pregel.stream (runner.tick "
    "runs the tasks without writes)")
_ASKED_AGAIN = Divergence(
    "A review's answer is stored only as the resume write of the client's Command(resume=...): "
    "after a crash before it is stored, the thread still holds the interrupt, the review node "
    "runs again from its start and the reviewer is asked again, where the design drops a hook "
    "whose decision was not committed and never asks it again (§3, §10; Q50).",
    "langgraph/types.py: interrupt (no resume value: GraphInterrupt again); "
    "langgraph/pregel/_loop.py: PregelLoop._first, langgraph/pregel/_io.py: map_command (the "
    "resume is a null-task pending write); "
    f"{_HITL}: HumanInTheLoopMiddleware.after_model")
_WRITE_NOT_AWAITED = Divergence(
    "LangGraph does not wait for a task's pending writes to be stored: a refused write (here "
    "the reviewer's answer) is kept in its future while the graph goes on with the value in "
    "memory, so the edited call runs before the failure surfaces as the stream ends, where the "
    "design stops on a refused required commit (§10). durability='sync' awaits the step's "
    "checkpoint only.",
    "langgraph/pregel/_loop.py: PregelLoop.put_writes (the future is not awaited), "
    "_checkpointer_put_after_previous; langgraph/pregel/_executor.py: "
    "BackgroundExecutor.__exit__ (re-raises at the end)")

DIVERGENCES = {
    **dict.fromkeys(("ROW-22", "S2-ONE-CONTEXT", "S10-UNKNOWN-OUTCOME",
                     "CRASH-TOOLS-TOOL_SETTLED-1-BEFORE", "CRASH-TOOLS-TOOL_SETTLED-1-AFTER",
                     "CRASH-TOOLS-TOOL_SETTLED-2-BEFORE", "CRASH-PLANNER-TOOL_SETTLED-1-BEFORE",
                     "CRASH-PLANNER-TOOL_SETTLED-2-BEFORE"), _RERUN_UNSAVED),
    **dict.fromkeys(("CRASH-TOOLS-HOOK_DECIDED-1-BEFORE", "CRASH-TOOLS-HOOK_DECIDED-2-BEFORE"),
                    _ASKED_AGAIN),
    "S10-COMMIT-REFUSED": _WRITE_NOT_AWAITED,
    "S11-STOP-BEFORE-RETRY": _STOP_AFTER_RETRIES,
    "S11-LOOPS-SHARED": _LOOPS_PER_AGENT,
    **{f"HM-MPRE-DENY-ROOT-FAILED{call}-SHARED": _NO_SHARED
       for call in ("", "-DELEGATE", "-RESULTREAD")},
    "HM-MPRE-DENY-EXECUTOR-SUCCEEDED": _ERROR_NO_CODE,
    "HM-MPOST-DENY-EXECUTOR-SUCCEEDED": _ERROR_NO_CODE,
    "ROW-06": _NO_FREEZE, "S5-RETRY-FROZEN": _NO_FREEZE, "S5-FREEZE-LATE": _NO_FREEZE,
    "S11-STOP-DURING-COMPACTION": _NO_DELIVERY, "S3-REQUEST-DENIED": _NO_DELIVERY,
    "S2-POST-PROCESSED": _WHOLE_THREAD,
    "ROW-15": _MIDDLEWARE_UNCHECKED, "S1-NO-SCOPE": _MIDDLEWARE_UNCHECKED,
    "S3-POST-CALL": _MIDDLEWARE_UNCHECKED, "S3-ANNOTATIONS": _MIDDLEWARE_UNCHECKED,
    "S7-HOOK-OVER-BUDGET": _MIDDLEWARE_UNCHECKED, "S7-HOOK-FIXED-TOO-BIG": _MIDDLEWARE_UNCHECKED,
    "S7-HOOK-FIXED-KEPT": _QUESTION_SUMMARISED,
    "S6-TEXT-MODIFIED-SENT": _NO_MARK, "S6-TOOL-EDIT-MARKED-SENT": _NO_MARK,
    "S6-REPLACED-BODY-UNREAD": _NO_READ,
    **{f"HM-{point}-{decision}-ROOT-{end}-RESULTREAD": _NO_READ
       for point in ("MPRE", "MPOST", "TPRE", "TPOST", "CPRE", "CPOST")
       for decision, end in (("ALLOW", "SUCCEEDED"), ("MODIFY", "SUCCEEDED"),
                             ("FAIL", "SUCCEEDED"), ("DENY", "SUCCEEDED"), ("DENY", "FAILED"))},
    **{f"HM-{point}-ALLOW-{role}-TIMED_OUT": _NO_DEADLINE
       for point in ("MPRE", "MPOST", "TPRE", "TPOST", "CPRE", "CPOST")
       for role in ("ROOT", "EXECUTOR")},
    "ROW-01": _NO_DELIVERY, "ROW-13": _NO_DELIVERY, "S5-DELIVERED-ON-OUTPUT": _NO_DELIVERY,
    "ROW-02": _WHOLE_THREAD, "EX4-OLDER-RUN": _WHOLE_THREAD, "S4-CURRENT-RUN": _WHOLE_THREAD,
    "S4-RECENT-BY-ORDER": _WHOLE_THREAD,
    "S7-USAGE-HUGE": Divergence(
        "The provider's reported usage (usage_metadata.total_tokens) triggers "
        "SummarizationMiddleware below the configured trigger, whatever token_counter "
        "counts, where the design keeps reported usage for audit only (§7).",
        f"{_SUMMARY}: _should_summarize, _should_summarize_based_on_reported_tokens"),
    "ROW-08": _NO_PREVIEW, "S6-PREVIEW-STAYS": _NO_PREVIEW, "S6-PREVIEW-MARKED-SENT": _NO_PREVIEW,
    "S6-RESULT-READ": _NO_PREVIEW,
    "ROW-12": _WHOLE_ANSWER,
    "EX8-ROW3": _NO_TARGET, "EX8-ROW6": _NO_TARGET, "S8-TARGET-EXPLICIT": _NO_TARGET,
    "S8-TARGET-PROVIDER-LIMIT": _NO_TARGET, "S8-SOFT-TARGET": _NO_TARGET,
    "S8-TARGET-CAP": _NO_TARGET, "S8-SUMMARY-CUT-AT-T": _NO_TARGET,
    "EX8-ROW4": _NO_BUDGET, "S8-PROTECTED-TOO-LARGE": _NO_BUDGET,
    "S8-PROMPTS-LEAVE-NO-ROOM": Divergence(
        "SummarizationMiddleware summarises even when the summary request itself leaves no "
        "room in the window, where the design refuses before any call (§8).",
        f"{_SUMMARY}: before_model, _create_summary"),
    "S8-ABOVE-TRIGGER-AFTER": _QUESTION_SUMMARISED,
    "S8-STOPPED-CALL-COMPACTS": Divergence(
        "A Run the client stops after an answer that proposed tool calls leaves those calls in "
        "the thread with no ToolMessage: nothing gives them a result or a placeholder, so the "
        "next Run's request carries a call with no result (§6, §11: a call that never ran is "
        "shown with its placeholder).",
        f"{_AGENT}: model_node, the tools node (a call is answered only when the tools node "
        "runs it)"),
    "S8-CHUNK-FLOOR": Divergence(
        "SummarizationMiddleware summarises whatever lies before its kept tail, however "
        "little, where the design's floor sends the request as it is (§8).",
        f"{_SUMMARY}: before_model (any cutoff_index > 0 is summarised)"),
    "S8-DEADLINE-BETWEEN-ATTEMPTS": _NO_DEADLINE, "S11-DEADLINE-DURING-COMPACTION": _NO_DEADLINE,
    "S2-PROVIDER-CALL-IDS": Divergence(
        "A tool call's identity is the provider's id: two calls sharing one are one call to "
        "LangChain (ToolMessage.tool_call_id), where the design gives each its own call_id "
        "(§2).", "langgraph/prebuilt/tool_node.py: ToolNode._func (results keyed by call id)"),
    "ROW-16-17": _EDIT_KEPT, "EX3-WRITE": _EDIT_KEPT,
    "S6-ARGS-ADJUSTED-SENT": _EDIT_KEPT,
    "EX3-WRITE-CONFLICT": _UNCHECKED, "EX3-DENY-CONFLICT": _UNCHECKED,
    "BAD-INVALID-PATCH": _UNCHECKED, "BAD-FORBIDDEN-FIELD": _UNCHECKED,
    "BAD-UNKNOWN-TARGET": _UNCHECKED, "BAD-STALE-ALLOW": _UNCHECKED,
    "BAD-STALE-DENY": _UNCHECKED, "S3-OVERLAPPING-WRITES": _UNCHECKED,
    "S3-ALLOW-NO-GRANT": _UNCHECKED, "S3-VIEW-INDEX": _UNCHECKED,
    "BAD-UNREGISTERED-FIELD": Divergence(
        "A reviewer's edit may name another tool: it is not diagnosed as a write to an "
        "unregistered field, and a tool the agent lacks fails the whole Run with a ValueError "
        "(§3).", f"{_HITL}: _apply_edit"),
    "S10-TAKEOVER-BUDGET": _BUDGET_UNTRACKED, "S11-LOOPS-SHARED-TAKEOVER": _BUDGET_UNTRACKED,
    **{f"CRASH-RUNS-RUN_FINALISED-{n}-{when}": _NO_TERMINAL
       for n in (3, 4) for when in ("BEFORE", "AFTER")},
    "S8-CHUNK-REDACTION-SENT": _SUMMARISER_COPY, "S8-COMPACTION-HOOK-FAILS": _SUMMARY_AS_USER,
    "S8-COMPACTION-PATCH": _SUMMARISER_UNCHECKED,
    **{f"CRASH-HOOK-COMPACTION-POST-{decision}-HOOK_DECIDED": _BELOW_TRIGGER_UNMARKED
       for decision in ("ALLOW", "MODIFY", "DENY")},
    "S11-ARGUMENTS-SCHEMA": Divergence(
        "A tool whose args_schema is a JSON Schema runs with arguments that break it: "
        "LangChain validates only pydantic schemas, where the design answers a format error "
        "without running the tool (§11).",
        "langchain_core/tools/base.py: BaseTool._parse_input"),
}
"""Each failing case and the divergence it shows (the sentences of the report)."""

FINDINGS: tuple[Finding, ...] = (
    Finding("The trigger counts the state's messages with token_counter, without the system "
            "prompt, and fires at total ≥ threshold",
            f"{_SUMMARY}: SummarizationMiddleware.before_model, _should_summarize"),
    Finding("The provider's reported total_tokens of the last AIMessage also fires the trigger "
            "when its model_provider matches the model's ls_provider",
            f"{_SUMMARY}: _should_summarize_based_on_reported_tokens"),
    Finding("Material is trimmed to trim_tokens_to_summarize with trim_messages(strategy="
            "'last', start_on='human'); when nothing is left no summary call is made and the "
            "summary is a fixed sentence",
            f"{_SUMMARY}: _create_summary, _trim_messages_for_summary"),
    Finding("The summary replaces the whole history (RemoveMessage(REMOVE_ALL_MESSAGES)) as one "
            "HumanMessage marked lc_source=summarization, followed by the kept tail; the cut "
            "moves back so a ToolMessage keeps its AIMessage",
            f"{_SUMMARY}: before_model, _build_new_messages, _find_safe_cutoff_point"),
    Finding("A summary call is retried (3 attempts) through Runnable.with_retry; on a "
            "ContextOverflowError once more with the middle of the history cut out",
            f"{_SUMMARY}: SummarizationMiddleware.__init__, _create_summary, "
            "_overflow_retry_prompt"),
    Finding("Retries call the handler again with the same request; spent retries answer with "
            "an AIMessage describing the error unless on_failure='error'",
            "langchain/agents/middleware/model_retry.py: ModelRetryMiddleware.wrap_model_call, "
            "_handle_failure"),
    Finding("ModelError subclasses are retried only if is_retryable (ContextOverflowError is "
            "not); any other exception is retried",
            "langchain/agents/middleware/_retry.py: default_retry_on"),
    Finding("The run limit counts model calls of one invocation; at the limit before_model "
            "raises (exit_behavior='error') or jumps to the end with an AIMessage",
            "langchain/agents/middleware/model_call_limit.py: ModelCallLimitMiddleware."
            "before_model, after_model"),
)

FINDINGS += (
    Finding("Batched review: one interrupt after the model's answer lists every reviewed call; "
            "a reject is answered at once with an error ToolMessage appended before the "
            "approved calls' results, so a batch with a rejected call is fed back out of "
            "action order", f"{_HITL}: HumanInTheLoopMiddleware.after_model, _answer_message"),
    Finding("An edit keeps the model's call in the AIMessage and substitutes the reviewer's at "
            "execution, prepending a notice with the executed arguments to the result",
            f"{_HITL}: _process_decision, wrap_tool_call, _apply_edit, _prepend_notice"),
    Finding("An answer whose type is not allowed raises ValueError('Unexpected human "
            "decision'); an edit naming a tool the agent lacks raises ValueError",
            f"{_HITL}: _process_decision, _apply_edit"),
    Finding("Each node's writes are saved as the node ends (pending writes) and the step's "
            "checkpoint after it; a thread resumed with input None re-runs only the steps "
            "not written, so neither a saved answer nor a saved batch is asked or run again",
            "langgraph/pregel/_loop.py: PregelLoop.put_writes, _put_checkpoint"),
    Finding("The run's model-call count is an UntrackedValue channel, not in the checkpoint",
            "langchain/agents/middleware/model_call_limit.py: ModelCallLimitState"),
    Finding("With durability='sync' each step's checkpoint is saved before the next step "
            "starts, and a failed put surfaces from the stream before any later node runs",
            "langgraph/pregel/main.py: Pregel.stream (loop._put_checkpoint_fut.result())"),
    Finding("A graph invoked inside a tool without a checkpointer of its own is a subgraph: it "
            "saves its checkpoints in the thread under the tool task's namespace and, when the "
            "parent resumes, continues from them instead of taking its input again",
            "langgraph/pregel/_loop.py: PregelLoop._first (CONFIG_KEY_RESUMING)"),
    Finding("An interrupt inside such a subgraph (an Executor's review) pauses the whole "
            "thread; Command(resume=...) re-runs the tool call, whose subgraph resumes at its "
            "interrupt", "langgraph/types.py: interrupt; langgraph/errors.py: GraphBubbleUp"),
)

NOTES = (
    "One Session is one LangGraph thread (InMemorySaver); one Run is one stream of the graph "
    "with the question and the supplements received before it as HumanMessages whose id is "
    "the input's id.",
    "SummarizationMiddleware: trigger ('tokens', the §7 trigger), the compaction script as "
    "summarizer, keep ('messages', 1); its token_counter is the injected estimator, over the "
    "whole request (best) or over the messages it is handed (defaults), and "
    "trim_tokens_to_summarize None (best) or 4000 (defaults).",
    "ModelRetryMiddleware(max_retries = model_attempts − 1, on_failure='error', no delay); "
    "ModelCallLimitMiddleware(run_limit = loop_limit, exit_behavior='error') ends the Run "
    "loop_exhausted; ToolCallLimitMiddleware(run_limit = tool_quota).",
    "A delivery is claimed when a request first carries the input and delivered when that "
    "request is answered: read from the requests, since LangChain records no delivery.",
    "A failed tool call's result is the ToolMessage's text with status 'error' (what the "
    "provider integration sends as an error flag), traced as one JSON object.",
    "tool.pre_call is HumanInTheLoopMiddleware (batched): the scenario's chain for a call is "
    "the reviewer; deny → reject (LangChain's own words), argument or name writes → edit, "
    "otherwise approve; a failed item is dropped (Q290); context patches and other paths "
    "have no place in an edit and are not sent (Q190-Q192).",
    "Crashes (ctxspec/adapters/langchain_crash.py): each phase is a checkpoint LangGraph writes "
    "(durability='sync', max_concurrency=1) — input_accepted the stream's input checkpoint, "
    "request_frozen the one whose next node is model, raw_answer_saved the model step's, "
    "effective_result_committed the first after the after_model middleware, hook_decided the "
    "first after a middleware chain decided, batch_fed_back the tools step's, run_finalised "
    "the one with no next node, execution_started and execution_ended an Executor subgraph's "
    "input and final checkpoints; two phases are pending writes, which the step's one worker "
    "stores in a fixed order: tool_settled a tool call's result (its Send task's write) and a "
    "review's hook_decided the reviewer's answer (the resume write of Command(resume=...)). "
    "The Session's checkpointer (an InMemorySaver) dies just before or after storing the write "
    "or refuses it (commit_failures); once dead, nothing more runs or is stored. The driver "
    "resumes the thread on a fresh create_agent graph over the same checkpointer, sending "
    "again only an input the thread does not hold (Q193, Q194, Q371, Q490).",
    "Hooks (ctxspec/adapters/langchain_hooks.py): model.pre_request is a middleware's "
    "before_model (its context patches a state update of the thread, its params writes the "
    "request's model_settings through wrap_model_call), model.post_response its after_model "
    "(an edit replaces the answer by id; a deny removes it and jumps to the end), "
    "tool.post_call its wrap_tool_call (an edit or a deny replaces the ToolMessage's "
    "content); a failed item is dropped (Q290).",
    "A supplement received while the graph runs is handed to the thread at the next "
    "checkpoint before a model call: the client stops reading the stream and streams again "
    "with it (triggers); another Session is another thread_id on the same checkpointer "
    "(sessions); run_ended carries the last AIMessage's text (final_answers).",
    "Planner/Executor (ctxspec/adapters/langchain_executor.py): the Planner's delegate tool "
    "runs an Executor, a second create_agent with the Executor's prompt, tools, summary, hooks "
    "and retries, invoked on a fresh state holding only the hand-over (the task, each "
    "constraint and material on a line of its own); its last answer is the call's result.",
    "Compaction hooks (ctxspec/adapters/langchain_summary.py): SummarizationMiddleware's "
    "summarizer is a Runnable composed as RunnableLambda(compaction.pre_request) | the "
    "summary model (its retries) | StrOutputParser() | RunnableLambda(compaction."
    "post_response): the pre-request chain runs once per summary request and may change or "
    "annotate a message of the material, the post-response chain may write the summary; a "
    "deny at either raises out of before_model and the Run ends COMPACTION_FAILED.",
    "Not declared, because LangChain lacks them: chunked folds, snapshots, shared "
    "scopes, retention, the history API, a stop inside a batch; and the crash phases LangGraph "
    "writes nothing at (Q491), each with what it does write instead: session_opened (a new "
    "thread_id is written first by its first stream's input checkpoint, input_accepted's; "
    "langgraph/pregel/_loop.py: PregelLoop._first), attempt_failed (ModelRetryMiddleware "
    "retries inside the model node's wrap_model_call, so a failed attempt writes nothing; only "
    "the node's last failure is written, as its task's error write; langgraph/pregel/_loop.py: "
    "PregelLoop.put_writes), first_output (the model node takes the answer whole and writes "
    "it with the step's checkpoint, raw_answer_saved's; nothing marks a first token), "
    "tool_started (no write marks a task started: a tool call's Send task is known by its "
    "result's pending write alone, tool_settled's), hook_started (a middleware hook runs "
    "inside its node and writes nothing as it starts; its decision is written with the node's "
    "checkpoint, hook_decided's; only a review's interrupt marks one, and it is written with "
    "the review's answer) and the compaction phases — episode_started, chunk_answer_saved, "
    "chunk_committed, snapshot_published (SummarizationMiddleware summarises inside its "
    "before_model node and returns one update, every message removed and the summary with the "
    "kept tail, written with that node's checkpoint; no write marks an episode begun or a "
    "chunk, and there is no snapshot; langchain/agents/middleware/summarization.py: "
    "SummarizationMiddleware.before_model).",
    "A second mapping of the same API (tests/langchain_second_mapping.py: the design's hook "
    "points written as LangChain's decorator middleware, @before_model, @wrap_model_call, "
    "@after_model(can_jump_to=['end']) and @wrap_tool_call, instead of one AgentMiddleware "
    "class) reaches the same verdict on every failure through those points "
    "(tests/test_langchain_second_mapping.py, Q541).",
)

SUITE_FLAWS = {
    "S11-EXECUTOR-CONTEXT-ERROR": "The adapter's gap, not LangChain's: the delegate tool turns "
                                  "every failure of the Executor into an error result for the "
                                  "Planner, a context error included, where the design ends the "
                                  "whole invocation (§11); a delegate tool could re-raise it.",
    **{f"HM-{point}-DENY-EXECUTOR-FAILED": "The adapter's gap, as S11-EXECUTOR-CONTEXT-ERROR: "
       "the delegate tool turns the Executor's failed compaction (its compaction hook's deny) "
       "into an error result the Planner reads and answers, where the design ends the whole "
       "invocation COMPACTION_FAILED (§8, §11); a delegate tool could re-raise it."
       for point in ("CPRE", "CPOST")},
}
"""Failures that are our adapter's, not LangChain's (reported apart, to be fixed here)."""

SETTINGS: tuple[Setting, ...] = (
    Setting("SummarizationMiddleware(trim_tokens_to_summarize=...)", "4000", "None",
            "With more material than trim_tokens_to_summarize, SummarizationMiddleware makes "
            "no summary call and puts the fixed sentence \"Previous conversation was too long "
            "to summarize.\" in place of the whole history (§8).",
            frozenset({"EX8-ROW1", "EX8-ROW2"})),
    Setting("SummarizationMiddleware(token_counter=...)",
            "a counter of the messages handed to it",
            "a counter of the whole request: the system prompt and the bound tools' schemas "
            "with the messages",
            "SummarizationMiddleware hands its token_counter the state's messages only (no "
            "system prompt, no tool schemas), so at I = threshold a counter of those sees less "
            "than the request and does not summarise (§7).",
            frozenset({"ROW-04-AT", "ROW-04-FLOOR", "S7-USAGE-TINY", "S8-STOP-DURING-COMPACTION",
                       "ROW-05", "S8-SUMMARY-RETRIED", "S8-SUMMARY-FAILS",
                       "S11-COMPACTION-FAILED", "S11-STOP-IN-FLIGHT-CHUNK"})),
)
SETTINGS += (
    Setting("SummarizationMiddleware(summarizer=...)", "a chat model (retried three times by "
            "Runnable.with_retry's default)", "model.with_retry(stop_after_attempt="
            "model_attempts) | StrOutputParser()",
            "A chat model as summarizer is retried as Runnable.with_retry's default does, three "
            "attempts, whatever the Agent's model_attempts say: a compaction the design has "
            "failed after its last attempt is asked once more (§8, §11).",
            frozenset({"S8-SUMMARY-FAILS", "S11-COMPACTION-FAILED",
                       "S11-STOP-IN-FLIGHT-CHUNK"})),
)
"""The settings the best configuration changes (``BEST``), each with the cases it fixes."""

DOUBTS = {
    "S7-PROVIDER-REFUSES": "passes on the Run's ending alone: LangChain knows no window and "
                           "traces no figures, so whether the user is told W and I is not "
                           "judged (Q294).",
    "S11-COMPACTION-FAILED": "COMPACTION_FAILED is the adapter's reading of an exception out of "
                             "SummarizationMiddleware's node (Q292); LangChain itself raises "
                             "the summariser's error unchanged.",
    "CRASH-TOOLS-HOOK_DECIDED-1-BEFORE": "asking a person again after a crash is arguably the "
                                         "safer choice for an approval; the design's hook "
                                         "failure rule drops the item instead (Q50), and this "
                                         "case judges by it (Q490).",
    "CRASH-PLANNER-EXECUTION_STARTED-1-BEFORE": "the Executor is a subgraph whose input "
                                                "checkpoint is execution_started; another "
                                                "mapping (the delegate call's own start) would "
                                                "move the crash (Q371).",
    "ROW-03": "the Executor is a sub-agent behind a tool, one of two mappings LangChain offers; "
              "it runs as a subgraph checkpointed in the tool task's namespace, so the "
              "CRASH-PLANNER verdicts rest on LangGraph resuming that subgraph (Q371).",
    "ROW-15": "model.pre_request is a middleware the adapter writes with LangChain's API; that "
              "it checks no patch is LangChain's lack of a patch protocol, but a user could "
              "write the checks into the middleware — then they would be the adapter's, not "
              "LangChain's (issue #32 item 1).",
    "ROW-06": "a supplement is streamed in at the next checkpoint, which starts a new "
              "invocation of the graph: its loop budget restarts (S10-TAKEOVER-BUDGET) and "
              "the freeze the design asks for has no LangChain counterpart to compare with.",
}
"""The verdicts we are least sure of (issue #32: disagreement is a test)."""

PROFILE = Profile(
    runtime="langchain",
    framework="LangChain v1 (langchain.agents.create_agent)",
    versions={name: version(name) for name in PACKAGES},
    adapter_supplied={
        "estimator_injection": "LangChain has no window, output reserve, safety margin or input "
                               "budget; the adapter computes W, O, S, B and the §7 trigger and "
                               "passes the trigger to SummarizationMiddleware",
    },
    divergences=DIVERGENCES, suite_flaws=SUITE_FLAWS, settings=SETTINGS, doubts=DOUBTS,
    findings=FINDINGS,
    notes=NOTES,
    defaults="ctxspec.adapters.langchain:make_default_driver",
)
