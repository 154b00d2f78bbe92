"""A ctxspec Driver over the OpenAI Agents SDK (docs/compatibility/openai-agents.md): the SDK's
``Runner`` runs each Run, streamed, on an ``Agent`` with the scenario's system prompt, function
tools and scripted ``Model``, over one ``SQLiteSession`` — the SDK's own store of the
conversation, which alone carries history from one Run to the next.

The driver only watches and steers the SDK through its public seams:

- a question is a new ``Runner.run_streamed`` on the session; supplements given before it starts
  are part of its input;
- a supplement arriving while the Run works pauses it after the turn
  (``RunResultStreaming.cancel(mode="after_turn")``), stages the input on the run's state
  (``RunState.add_input``, admitted before the next model call) and resumes it;
- the user's stop is ``cancel(mode="after_turn")`` without a resume;
- every request is read back where the SDK hands it to the model, and measured there.

The SDK has no token budget: the adapter computes W, O, S, B and the trigger (§7) and refuses in
``RunConfig.call_model_input_filter`` a request whose fixed input exceeds B (§8). That, and the
measuring with the injected estimator, is the adapter's work, not the framework's: the
capability ``estimator_injection`` is declared as adapter-supplied.
"""

import asyncio
import json
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agents import (
    Agent,
    AgentsException,
    FunctionTool,
    MaxTurnsExceeded,
    ModelBehaviorError,
    ModelSettings,
    RunConfig,
    Runner,
    RunResultStreaming,
    SQLiteSession,
)
from agents.agent_tool_input import StructuredToolInputBuilder
from agents.items import ModelResponse, TResponseInputItem
from agents.memory import OpenAIResponsesCompactionSession, Session, SessionSettings
from agents.retry import ModelRetryBackoffSettings, ModelRetrySettings, retry_policies
from agents.run_config import CallModelData, ModelInputData, ToolErrorFormatterArgs
from agents.run_context import RunContextWrapper
from agents.run_state import RunState
from agents.testing import ModelCall as SdkCall
from agents.tool_context import ToolContext
from openai import APIConnectionError, APIError, BadRequestError, InternalServerError

from ctxspec.adapters.hook_chain import HookDenied
from ctxspec.adapters.openai_agents.compaction import compacting
from ctxspec.adapters.openai_agents.executor import DELEGATE, delegate_tool
from ctxspec.adapters.openai_agents.guardrails import CAPABILITIES as GUARDRAILS
from ctxspec.adapters.openai_agents.guardrails import Guardrails, ResponseHooks
from ctxspec.adapters.openai_agents.history import history_read
from ctxspec.adapters.openai_agents.model import ScenarioModel, sdk_call_texts
from ctxspec.adapters.openai_agents.profile import PROFILE
from ctxspec.adapters.openai_agents.runs import Run, consume, root_cause
from ctxspec.adapters.openai_agents.tools import build
from ctxspec.adapters.openai_agents.view import Message, read_view, tool_schema
from ctxspec.adapters.request_trace import (
    budget_of,
    fingerprint,
    model_call,
    request_event,
    tool_event,
    tool_ordinal,
    usage_event,
    whole_input_decision,
)
from ctxspec.adapters.run_facts import BudgetRefused, Delivery, RunBook, refusal_figures
from ctxspec.adapters.scripted_tools import ToolFailed
from ctxspec.adapters.sent_view import estimation
from ctxspec.conformance.driver import Ports
from ctxspec.conformance.scenario import AgentDoc, HistoryReadDoc, Scenario
from ctxspec.reference.budget import ResolvedBudget
from ctxspec.reference.ports import (
    Complete,
    ModelOutcome,
    PartialThenFailed,
    ScriptExhausted,
    ToolOutcome,
)

FRAMEWORK = frozenset({"root_loop", "final_answers", "usage_reports", "stop", "triggers",
                       "sessions", "tool_latency", "planner_executor", "stop_mid_batch",
                       "history_api", "history_bodies", *GUARDRAILS})
"""What the SDK itself does: the model loop of a Run, its final output, the provider's usage
carried through ``RunHooks.on_llm_end``, a stop (the call in flight cancelled, else after the
turn, a running batch's included), input staged on a running Run (``RunState.add_input``),
another session on the same SQLite file, the session's stored items read back
(``get_items``, history.py), a batch's function tools run concurrently and fed
back in call order, a Planner whose ``delegate`` tool is an Executor ``Agent`` through
``Agent.as_tool``."""
BEST = frozenset({"tool_error_formatter", "tool_not_found_behavior", "executor_failure"})
"""The settings the best configuration changes from the SDK's defaults (profile.py
``SETTINGS`` names each with the cases it fixes)."""
ADAPTER_SUPPLIED = frozenset({"estimator_injection"})
COMPACTION = frozenset({"compaction_summary"})
"""With the SDK's compaction session: the SDK summarises and replaces the history, the
adapter decides when (compaction.py), so it counts as adapter-supplied."""
"""What the adapter computes because the SDK has none of it: the request's measure with the
injected estimator, W, O, S, B, the trigger and the §8 refusal."""


class OpenAIAgentsDriver:
    capabilities: frozenset[str] = FRAMEWORK | ADAPTER_SUPPLIED
    compat_profile = PROFILE
    """The compatibility report's description of the SDK (``ctxspec compat``)."""

    handover_builder: StructuredToolInputBuilder | None = None
    """``Agent.as_tool(input_builder=...)``: None, the SDK's own rendering of the hand-over."""

    def __init__(self, sdk_defaults: bool = False, session_limit: int | None = None,
                 compaction: bool = False, best: frozenset[str] = BEST) -> None:
        self.best = frozenset() if sdk_defaults else best
        """The settings of the best configuration applied (``BEST``; none: the SDK's
        defaults, its fixed error sentence, a Run ended on a missing tool, an Executor's
        failure answered by that sentence)."""
        self.compaction = compaction
        """The session wrapped in the SDK's ``OpenAIResponsesCompactionSession`` (compaction.py)."""
        if compaction:
            self.capabilities = self.capabilities | COMPACTION
        self.session_limit = session_limit
        """``SessionSettings(limit=...)``: the session hands the Runner only its last items
        (the bug corpus's path, tests/real_bugs/); None, every item."""

    def configure(self, scenario: Scenario, ports: Ports) -> None:
        doc = scenario.agent
        self.budget: ResolvedBudget = budget_of(doc)
        self.ports, self.doc = ports, doc
        self.folder = tempfile.TemporaryDirectory(prefix="ctxspec-openai-agents-")
        self.database = str(Path(self.folder.name) / "sessions.sqlite")
        self.session = self._session("session-1")
        self.sessions = 1
        self._build_agent(doc, ports)
        self.events: list[Message] = []
        self.book: RunBook[Run] = RunBook("openai-agents", self.events)
        """The Runs, their inputs and deliveries, and every input handed to the SDK."""
        self.streaming: RunResultStreaming | None = None
        self.requests = 0
        self.compacted = False
        """A compaction ran for the next root request (its decision is ``compact``)."""
        self.asked: dict[str, int] = {}
        """The requests each role made (the port's ordinal, per purpose and role)."""
        self.last: dict[str, Any] | None = None
        """The last request traced: its key, attempt, view and whether its answer failed."""
        self.reported = False
        self.in_model = False
        """True while the SDK waits for a model answer: a stop then cancels the call."""
        self.exhausted: ScriptExhausted | None = None
        """A scripted port that ran out inside a tool, which the SDK turned into a result."""

    def _build_agent(self, doc: AgentDoc, ports: Ports) -> None:
        """The SDK's parts: the scripted Model, the tools (the Executor behind ``delegate``),
        the guardrails, the RunConfig and the root Agent."""
        budget = self.budget
        self.model = ScenarioModel(self)
        retry = ModelRetrySettings(
            max_retries=doc.model_attempts - 1, policy=retry_policies.network_error(),
            backoff=ModelRetryBackoffSettings(initial_delay=0, max_delay=0, jitter=False))
        settings = ModelSettings(max_tokens=budget.output_reserve, retry=retry)
        self.tools = [build(tool, self._run_tool) for tool in doc.tools
                      if doc.executor is None or tool.name != DELEGATE]
        self.executor_tools: list[FunctionTool] = []
        """The Executor's own tools, when the scenario has a Planner (``Agent.as_tool``)."""
        self.result_facts: dict[str, dict[str, Any]] = {}
        """What each call's formatted error result stands for, by call_id (Q210)."""
        self.guardrails = Guardrails(ports.hooks, lambda kind, **fields: self.events.append(
            {**fields, "kind": kind}), self.result_facts)
        self.hooks = ResponseHooks(self.usage_reported, self.guardrails)
        self.config = RunConfig(
            tracing_disabled=True, call_model_input_filter=self._filter,
            tool_not_found_behavior="return_error_to_model"
            if "tool_not_found_behavior" in self.best else "raise_error",
            tool_error_formatter=self._tool_error)
        if doc.executor is not None:
            delegate, self.executor_tools = delegate_tool(
                doc, self, self._run_tool, settings, self.config,
                "executor_failure" not in self.best,
                self.model.ids, self.handover_builder, self._executor_failed, self.hooks)
            self.tools.append(delegate)
        self.guardrails.attach([*self.tools, *self.executor_tools])
        self.guardrails.shared = tuple(each.name for each in doc.shared)
        self.agent = Agent[Any](name="root", instructions=doc.system_prompt, tools=[*self.tools],
                                model=self.model, model_settings=settings)

    # --- the Driver's stimuli -------------------------------------------------------------

    def ask(self, text: str) -> None:
        self.book.open(Run(self.book.next_no(), self.book.new_id()), text)

    def supplement(self, text: str) -> None:
        run, delivery = self.book.active(), self.book.supplement(text)
        if run is None or delivery is None or not run.started:
            return
        run.staged.append(delivery)
        if self.streaming is not None:
            self.streaming.cancel(mode="after_turn")

    def stop(self) -> None:
        run = self.book.active()
        if run is None:
            return
        run.stop_requested = True
        if self.streaming is not None:  # an answer in flight is dropped; a batch runs out
            self.streaming.cancel(mode="immediate" if self.in_model else "after_turn")

    def advance(self) -> None:
        run = self.book.active()
        if run is not None and not run.started:
            asyncio.run(self._drive(run))

    def new_session(self) -> None:
        """Another Session of the same Agent: a new SDK session on the same SQLite file."""
        self.sessions += 1
        self.session = self._session(f"session-{self.sessions}")
        self.events.append({"kind": "session_opened", "session": self.sessions})

    def history_step(self, read: HistoryReadDoc) -> None:
        """A read of the history API: the session's stored items (history.py)."""
        self.events.append(history_read(self.database, f"session-{self.sessions}", read,
                                        self.book.sent))

    def _session(self, name: str) -> Session:
        settings = None if self.session_limit is None else SessionSettings(
            limit=self.session_limit)
        stored = self._store(name, settings)
        if not self.compaction:
            return stored
        return compacting(name, stored, self, self.doc.model_attempts)

    def _store(self, name: str, settings: SessionSettings | None) -> SQLiteSession:
        """The Session's SQLite store (restart.py watches its writes)."""
        return SQLiteSession(name, self.database, session_settings=settings)

    def trace(self) -> list[Message]:
        return self.events

    # --- one Run on the SDK -----------------------------------------------------------------

    async def _drive(self, run: Run) -> None:
        run.started = True
        stored = {input_id for input_id, _ in self.book.sent}  # the session holds them already
        start: Any = [self._hand_over(d) for d in run.inputs if d.input_id not in stored]
        if self.compaction and not await self._compacted_before(run, start):
            return
        while True:
            result = self._streamed(start)
            self.streaming = result
            if run.stop_requested:  # stopped before the SDK began: cancelled at once
                result.cancel(mode="immediate")
            failure = await consume(result)
            self.streaming = None
            if self.exhausted is not None:
                raise self.exhausted
            self._settled(result)
            if failure is not None:
                self._failed(run, failure)
                return
            if result.interruptions:  # paused for approvals (approvals.py): answered, resumed
                start = self._answer_approvals(result)
                continue
            if result.is_complete and result.final_output is not None:
                self.book.end(run, "succeeded", final=str(result.final_output))
                return
            if run.stop_requested or not run.staged:
                self.book.end(run, "stopped")
                return
            start = self._resume(run, result.to_state())

    async def _compacted_before(self, run: Run, start: list[Any]) -> bool:
        """The SDK asks whether to compact only after a turn: before a Run whose first
        request would reach the trigger, the adapter calls the session's ``run_compaction``
        itself. False when that compaction failed and ended the Run."""
        assert isinstance(self.session, OpenAIResponsesCompactionSession)
        stored = await self.session.get_items()
        if not stored or not self._reaches_trigger([*stored, *start]):
            return True
        try:
            await self.session.run_compaction({"force": True, "compaction_mode": "input"})
        except APIError as failure:
            # The Run's inputs are kept, as the SDK keeps a failed Run's (saved before its
            # first model call): the context stays whole for the next question (§8, §11).
            await self.session.add_items(start)
            if run.stop_requested:  # the user's stop wins over the failure it cut short
                self.book.end(run, "stopped")
            else:
                self.book.end(run, "failed", "COMPACTION_FAILED", str(failure))
            return False
        self.compacted = True
        return True

    def _streamed(self, start: Any) -> RunResultStreaming:
        """One streamed Run of the SDK on the session, which carries the history."""
        return Runner.run_streamed(self.agent, start, session=self.session,
                                   run_config=self.config, hooks=self.hooks,
                                   max_turns=self.doc.loop_limit)

    def _settled(self, result: RunResultStreaming) -> None:
        """After each streamed Run: nothing to keep, the session saved it (a mapping that
        carries the history itself keeps it here)."""

    def _answer_approvals(self, result: RunResultStreaming) -> RunState[Any]:
        """The mapping with approvals answers them (approvals.py); this one asks for none."""
        raise AssertionError(f"no approval was asked for, yet {result.interruptions}")

    def _resume(self, run: Run, state: RunState[Any]) -> RunState[Any]:
        """Stage the supplements that arrived on the paused Run (``RunState.add_input``)."""
        staged, run.staged = run.staged, []
        state.add_input([self._hand_over(d) for d in staged])
        return state

    def _hand_over(self, delivery: Delivery) -> TResponseInputItem:
        self.book.sent.append((delivery.input_id, delivery.text))
        return {"role": "user", "content": delivery.text}

    def _failed(self, run: Run, failure: BaseException) -> None:
        if isinstance(failure, MaxTurnsExceeded):
            self.book.end(run, "loop_exhausted")
            return
        cause = root_cause(failure)
        if isinstance(cause, ScriptExhausted):
            raise cause
        if isinstance(cause, BudgetRefused):
            self.book.end(run, "failed", cause.code, str(cause), figures=cause.figures)
        elif isinstance(cause, InternalServerError):  # the compact endpoint, finally failed
            self.book.end(run, "failed", "COMPACTION_FAILED", str(cause))
        elif isinstance(cause, HookDenied):
            self.book.end(run, "failed", "HOOK_DENIED", str(cause))
        elif isinstance(cause, BadRequestError) and "context_length_exceeded" in str(cause):
            self.book.end(run, "failed", "CONTEXT_LENGTH_EXCEEDED", str(cause))
        elif isinstance(cause, APIConnectionError):
            self.book.end(run, "failed", "MODEL_FAILED", str(cause))
        elif isinstance(failure, AgentsException):  # the SDK gave up the Run on its own
            self.book.end(run, "failed", None, f"{type(failure).__name__}: {failure}")
        else:
            raise failure

    def _tool_error(self, args: ToolErrorFormatterArgs[Any]) -> str:
        """Tool errors as structured results (§6, §11), through the SDK's formatter hook."""
        error = args.error
        if isinstance(error, ScriptExhausted):
            self.exhausted = error
        if args.kind == "tool_not_found":
            code = "TOOL_NOT_AVAILABLE"
        elif isinstance(error, ToolFailed):
            code = "TOOL_ERROR"
        elif isinstance(error, ModelBehaviorError):
            code = "INVALID_ARGUMENTS"
        else:
            code = args.kind.upper()
        if "tool_error_formatter" not in self.best:  # the SDK's sentence, as with none
            return args.default_message
        detail = str(error) if error is not None else args.default_message
        self.result_facts[args.call_id] = {"status": "error", "code": code} \
            if args.kind != "approval_rejected" else {
                "status": "denied", "stage": "pre", "executed": False, "result_delivered": False}
        return json.dumps({"status": "error", "error": {"code": code, "detail": detail}})

    def _executor_failed(self, context: RunContextWrapper[Any], error: Exception) -> str:
        """An Executor's failure as the ``delegate`` call's structured error (§11)."""
        code = "HOOK_DENIED" if isinstance(root_cause(error), HookDenied) else "EXECUTOR_FAILED"
        call_id = getattr(context, "tool_call_id", None)
        if call_id is not None:
            self.result_facts[call_id] = {"status": "error", "code": code}
        return json.dumps({"status": "error", "error": {"code": code, "detail": str(error)}})

    # --- what the SDK sends, read where it hands it to the model -----------------------------

    def _measure(self, instructions: str | None, items: Sequence[Any],
                 role: str = "root") -> tuple[list[Message], int, str]:
        view = read_view(instructions, items, self.book.sent)
        self.book.annotate(view, self.result_facts)
        schemas = [tool_schema(t.name, t.description, t.params_json_schema)
                   for t in (self.tools if role == "root" else self.executor_tools)]
        tokens = self.ports.estimator.estimate(estimation(view, schemas)).tokens
        current = {d.input_id for d in self.book.active_inputs()}
        return view, tokens, whole_input_decision(self.budget, view, tokens, current, role)

    def _filter(self, data: CallModelData[Any]) -> ModelInputData:
        """§8 before the request leaves: a fixed input over B is refused (adapter-supplied)."""
        given = data.model_data
        role = "executor" if data.agent.name == "executor" else "root"
        view, tokens, decision = self._measure(given.instructions, given.input, role)
        run = self.book.active()
        if self.guardrails.request_denied(view, None if run is None else run.question_id):
            raise HookDenied("HOOK_DENIED: a model.pre_request hook denied the request")
        if decision == "error":
            raise BudgetRefused("CONTEXT_PROTECTED_INPUT_TOO_LARGE",
                                refusal_figures(self.budget, tokens, tokens))
        return given

    def request(self, call: SdkCall, role: str = "root") -> ModelOutcome:
        """The Model's observer: trace the request as sent, ask the scripted port."""
        return self._traced("business", role, call.system_instructions, sdk_call_texts(call),
                            call.model_settings.max_tokens)

    def compaction_request(self, items: list[Any]) -> ModelOutcome:
        """The scripted compact endpoint's observer (compaction.py): the same, for §8."""
        return self._traced("compaction", "root", None, items, None)

    def _reaches_trigger(self, items: list[Any]) -> bool:
        """Whether a request of these items, with the prompt and the tool schemas, reaches
        the trigger (the adapter's measure)."""
        return self._measure(self.doc.system_prompt, items)[1] >= self.budget.trigger_threshold

    def _traced(self, purpose: str, role: str, instructions: str | None, items: Sequence[Any],
                max_output: int | None) -> ModelOutcome:
        if purpose == "business":
            view, tokens, decision = self._measure(instructions, items, role)
            if self.compacted and role == "root":  # the request a compaction was made for
                decision, self.compacted = "compact", False
        else:  # what is summarised, measured alone: a compaction request carries no tools
            view, decision = read_view(None, items, self.book.sent), None
            tokens = self.ports.estimator.estimate(estimation(view, [])).tokens
        identity = fingerprint(purpose, role, view)
        last = self.last
        if last is not None and last["failed"] and last["view"] == identity:
            key, attempt = last["key"], last["attempt"] + 1  # the SDK's retry of that request
        else:
            self.requests += 1
            key, attempt = f"openai-agents:{self.requests}", 1
        run = self.book.active()
        if role == "root" and purpose == "business":
            self.book.claim(view)
        budget = self.budget
        self.events.append(request_event(
            budget, purpose, role, key, attempt, view, tokens,
            budget.output_reserve if max_output is None else max_output, decision,
            None if run is None else run.no))
        self.in_model = purpose == "business"
        try:
            outcome = self.ports.model.call(model_call(self.asked, purpose, role, key, attempt,
                                                       view, budget.output_reserve))
        finally:
            self.in_model = False
        self.last = {"key": key, "attempt": attempt, "view": identity,
                     "failed": not isinstance(outcome, Complete), "tokens": tokens}
        if purpose == "business":
            self._answered(outcome)
        return outcome

    def _answered(self, outcome: ModelOutcome) -> None:
        if isinstance(outcome, Complete | PartialThenFailed):  # a first output arrived (§5)
            self.book.first_output()
        self.reported = isinstance(outcome, Complete) and (
            outcome.input_tokens is not None or outcome.output_tokens is not None)

    def usage_reported(self, response: ModelResponse) -> None:
        last = self.last
        if not self.reported or last is None:
            return
        usage = response.usage
        self.events.append(usage_event("business", last["key"], last["attempt"], last["tokens"],
                                       usage.input_tokens, usage.output_tokens))

    def _run_tool(self, ctx: ToolContext[Any], name: str, arguments: dict[str, Any]
                  ) -> ToolOutcome:
        proposed = json.loads(ctx.tool_arguments or "{}")
        outcome = self.ports.tools.run(name, arguments, tool_ordinal(self.events))
        self.events.append(tool_event(ctx.tool_call_id, name, arguments,
                                      proposed if isinstance(proposed, dict) else {}, outcome))
        return outcome



def make_limited_driver() -> OpenAIAgentsDriver:
    """The best configuration with a session item limit of 4 (``SessionSettings(limit=4)``):
    the bug corpus's path (tests/real_bugs/)."""
    return OpenAIAgentsDriver(session_limit=4, compaction=True)
