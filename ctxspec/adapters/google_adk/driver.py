"""A ctxspec Driver over Google ADK (docs/compatibility/google-adk.md): ADK's ``Runner`` runs
each Run as one invocation (``run_async`` with the question as its new message) of an ``App``
whose root is an ``LlmAgent`` with the scenario's system prompt as its instruction, its tools
and a scripted ``BaseLlm`` (model.py), over a ``DatabaseSessionService`` on a temporary SQLite
file (``sqlite+aiosqlite``) — ADK's own store of the Session's events, which alone carries
history from one Run to the next.

The driver only watches and steers ADK through its public seams:

- a question is a new invocation on the session; supplements given before it starts are part
  of its new message; ADK takes no input into a running invocation, so a supplement arriving
  while the Run works waits for the next question (§5);
- the user's stop is the client ceasing to read the invocation's events (``aclose`` of the
  generator) at the next event, which ADK documents as the way to end one;
- every request is read back where ADK hands it to the model, and measured there;
- compaction is the App's ``EventsCompactionConfig`` (token threshold at the design's trigger,
  the summarizer ADK's ``LlmEventSummarizer`` over a scripted model answering from the
  scenario's compaction script); ADK reads the threshold against the prompt size the provider
  reported for the previous request, which the scripted model reports as the request's measure;
- a crash is a death of the session service at its phase (crash.py) and a new Runner that
  resumes the invocation (``ResumabilityConfig``).

ADK has no token budget: the adapter computes W, O, S, B and the trigger (§7) and refuses a
request whose fixed input exceeds B before it is sent (§8), counted as adapter-supplied.
"""

import asyncio
import itertools
import tempfile
from pathlib import Path
from typing import Any

from google.adk.agents.invocation_context import LlmCallsLimitExceededError
from google.adk.agents.llm_agent import LlmAgent
from google.adk.agents.run_config import RunConfig
from google.adk.apps.app import App, EventsCompactionConfig, ResumabilityConfig
from google.adk.apps.llm_event_summarizer import LlmEventSummarizer
from google.adk.events.event import Event
from google.adk.models.llm_request import LlmRequest
from google.adk.runners import Runner
from google.adk.tools.base_tool import BaseTool
from google.adk.tools.tool_context import ToolContext
from google.genai import types

from ctxspec.adapters.google_adk.callbacks import CAPABILITIES as CALLBACKS
from ctxspec.adapters.google_adk.callbacks import Callbacks
from ctxspec.adapters.google_adk.crash import CAPABILITIES as CRASHES
from ctxspec.adapters.google_adk.crash import Crash, Died, WatchedSessions
from ctxspec.adapters.google_adk.executor import DELEGATE, delegate_tool
from ctxspec.adapters.google_adk.model import ModelFailed, ScriptedLlm, WindowRefused
from ctxspec.adapters.google_adk.profile import PROFILE
from ctxspec.adapters.google_adk.runs import Run
from ctxspec.adapters.google_adk.tools import ScenarioTool
from ctxspec.adapters.google_adk.view import Message, read_view, tool_schemas
from ctxspec.adapters.hook_chain import HookDenied
from ctxspec.adapters.request_trace import (
    budget_of,
    model_call,
    request_event,
    tool_event,
    tool_ordinal,
    usage_event,
    whole_input_decision,
)
from ctxspec.adapters.run_facts import (
    BudgetRefused,
    Delivery,
    RunBook,
    refusal_figures,
    root_cause,
)
from ctxspec.adapters.scripted_tools import ToolFailed
from ctxspec.adapters.sent_view import estimation
from ctxspec.conformance.documents import ScenarioError
from ctxspec.conformance.driver import Ports
from ctxspec.conformance.scenario import Scenario
from ctxspec.reference.budget import ResolvedBudget
from ctxspec.reference.ports import (
    Complete,
    ModelOutcome,
    PartialThenFailed,
    ScriptExhausted,
    ToolOutcome,
)

APP, USER = "ctxspec", "user"
FRAMEWORK = frozenset({"root_loop", "final_answers", "usage_reports", "stop", "triggers",
                       "sessions", "tool_latency", "compaction_summary", "planner_executor",
                       *CALLBACKS})
"""What ADK itself does: the model loop of an invocation, its final response, the provider's
usage kept on each event, a stop (the client stops reading the invocation), another session in
the same session service, a batch's function calls run concurrently and fed back in call
order, a Planner whose ``delegate`` tool is an Executor agent behind ``AgentTool``, a
token-threshold summary of older events (``EventsCompactionConfig``), and callbacks
before and after every model and tool call."""
BEST = frozenset({"on_tool_error_callback", "resumability"})
"""The settings the best configuration changes from ADK's defaults (profile.py ``SETTINGS``)."""
ADAPTER_SUPPLIED = frozenset({"estimator_injection"})
"""What the adapter computes because ADK has none of it: the request's measure with the
injected estimator, W, O, S, B and the §8 refusal."""


class GoogleAdkDriver:
    capabilities: frozenset[str] = FRAMEWORK | ADAPTER_SUPPLIED
    compat_profile = PROFILE

    def __init__(self, adk_defaults: bool = False, best: frozenset[str] = BEST) -> None:
        self.best = frozenset() if adk_defaults else best
        if "resumability" in self.best:
            self.capabilities = self.capabilities | CRASHES

    def configure(self, scenario: Scenario, ports: Ports) -> None:
        doc = scenario.agent
        self.budget: ResolvedBudget = budget_of(doc)
        self.ports, self.doc = ports, doc
        self.folder = tempfile.TemporaryDirectory(prefix="ctxspec-google-adk-")
        self.url = f"sqlite+aiosqlite:///{Path(self.folder.name) / 'sessions.sqlite'}"
        self.crash = Crash(scenario.crash)
        self.loop = asyncio.new_event_loop()
        self.call_ids = itertools.count(1)
        self.events: list[Message] = []
        self.book: RunBook[Run] = RunBook("google-adk", self.events)
        """The Runs, their inputs and deliveries, and every input handed to ADK."""
        self.summaries: list[str] = []
        """The texts the summarizer wrote (a summary in a request is one of them)."""
        self.compacted = False
        self.requests = 0
        self.asked: dict[str, int] = {}
        self.last: dict[str, Any] | None = None
        self.measure = 0
        self.facts: dict[str, dict[str, Any]] = {}
        """What each call's structured error or denial stands for, by call_id (Q210)."""
        self.proposals: dict[str, dict[str, Any]] = {}
        self.exhausted: ScriptExhausted | None = None
        self.callbacks = Callbacks(ports.hooks, lambda kind, **fields: self.events.append(
            {**fields, "kind": kind}), self.facts, shared=tuple(f.name for f in doc.shared))
        self._build()
        self.session_id = self._await(self._open_session())
        self.sessions = 1

    def _build(self) -> None:
        """ADK's parts on the store: the session service, the root agent, the App, the Runner
        (after a crash a new set on the same file, as a restarted process builds it)."""
        doc = self.doc
        self.service = WatchedSessions(self.url, self.crash)
        extra: dict[str, Any] = dict(self.callbacks.agent_callbacks())
        if "on_tool_error_callback" in self.best:
            extra["on_tool_error_callback"] = self._tool_error
        self.tools: list[BaseTool] = [ScenarioTool(tool, self._run_tool) for tool in doc.tools
                                      if doc.executor is None or tool.name != DELEGATE]
        if doc.executor is not None:
            self.tools.append(delegate_tool(
                doc.executor.system_prompt,
                [ScenarioTool(tool, self._run_tool) for tool in doc.executor.tools], self,
                self.budget.output_reserve, extra))
        agent = LlmAgent(
            name="root", model=ScriptedLlm(model="scripted", observer=self),
            instruction=doc.system_prompt, tools=list(self.tools),
            generate_content_config=types.GenerateContentConfig(
                max_output_tokens=self.budget.output_reserve), **extra)
        summarizer = LlmEventSummarizer(llm=ScriptedLlm(model="scripted-summary",
                                                        observer=self, purpose="compaction"))
        compaction = EventsCompactionConfig(
            summarizer=summarizer, token_threshold=self.budget.trigger_threshold,
            event_retention_size=1)
        app = App(name=APP, root_agent=agent, events_compaction_config=compaction,
                  resumability_config=ResumabilityConfig(is_resumable=True)
                  if "resumability" in self.best else None)
        self.runner = Runner(app=app, session_service=self.service)
        self.run_config = RunConfig(max_llm_calls=doc.loop_limit)

    async def _open_session(self) -> str:
        session = await self.service.create_session(app_name=APP, user_id=USER)
        return session.id

    def _await(self, work: Any) -> Any:
        return self.loop.run_until_complete(work)

    # --- the Driver's stimuli -------------------------------------------------------------

    def ask(self, text: str) -> None:
        self.book.open(Run(self.book.next_no(), self.book.new_id()), text)

    def supplement(self, text: str) -> None:
        self.book.supplement(text)  # ADK takes no input into a running invocation (§5)

    def stop(self) -> None:
        run = self.book.active()
        if run is not None:
            run.stop_requested = True

    def advance(self) -> None:
        run = self.book.active()
        if run is not None and not run.started:
            self._await(self._drive(run))

    def new_session(self) -> None:
        """Another Session of the same Agent: a new session in the same session service."""
        self.sessions += 1
        self.session_id = self._await(self._open_session())
        self.events.append({"kind": "session_opened", "session": self.sessions})

    def trace(self) -> list[Message]:
        return self.events

    # --- one Run on ADK -------------------------------------------------------------------

    async def _drive(self, run: Run) -> None:
        run.started = True
        if run.stop_requested:  # stopped before ADK began: the question is stored, not run
            await self._store_only(run)
            self.book.end(run, "stopped")
            return
        message: types.Content | None = self._hand_over(run)
        resume: str | None = None
        while message is not None or resume is not None:
            try:
                await self._invocation(run, message, resume)
            except Died:
                self.events.append({"kind": "restarted", **self.crash.restarted()})
                self.crash.dead = False
                self._build()
                message, resume = await self._after_restart(run, message)
                continue
            except Exception as failure:  # ADK ended the invocation on it
                self._failed(run, failure)
                return
            resume = None
            # Input that arrived while ADK worked is the next invocation's new message,
            # unless the Run has its final answer or was stopped (it waits, §5).
            waiting = run.final is None and not run.stop_requested and self._unsent(run)
            message = self._hand_over(run) if waiting else None
        if self.exhausted is not None:
            raise self.exhausted
        if run.final is not None and not run.stop_requested:
            self.book.end(run, "succeeded", final=run.final)
        else:
            self.book.end(run, "stopped")

    async def _store_only(self, run: Run) -> None:
        """A Run stopped before its invocation: its inputs appended to the session as the
        user's event (``BaseSessionService.append_event``), so later Runs see the question,
        and no invocation is started."""
        session = await self.service.get_session(app_name=APP, user_id=USER,
                                                 session_id=self.session_id)
        assert session is not None
        event = Event(author="user", invocation_id=Event.new_id(),
                      content=self._hand_over(run))
        try:
            await self.service.append_event(session, event)
        except Died:  # the process died at that write: the restarted client stores it again
            self.events.append({"kind": "restarted", **self.crash.restarted()})
            self.crash.dead = False
            self._build()
            if self.crash.plan.when == "before":
                await self._store_again(event)

    async def _store_again(self, event: Event) -> None:
        session = await self.service.get_session(app_name=APP, user_id=USER,
                                                 session_id=self.session_id)
        assert session is not None
        await self.service.append_event(session, event)

    async def _invocation(self, run: Run, message: types.Content | None,
                          resume: str | None) -> None:
        """One invocation, read event by event; the client stops reading at a stop, or once
        a batch's results are saved when input is waiting for the next invocation."""
        run.final = None
        events = self.runner.run_async(user_id=USER, session_id=self.session_id,
                                       new_message=message, invocation_id=resume,
                                       run_config=self.run_config)
        try:
            async for event in events:
                if event.author != "user" and event.is_final_response() and event.content:
                    run.final = "".join(p.text or "" for p in event.content.parts or []
                                        if not p.thought)
                if run.stop_requested or (self._unsent(run) and event.get_function_responses()):
                    break
        finally:
            await events.aclose()

    async def _after_restart(self, run: Run, message: types.Content | None
                             ) -> tuple[types.Content | None, str | None]:
        """What a restarted client sends: its message again when the store lacks it, nothing
        when the store holds the Run's final answer (the client reads it there), else a
        resumption of the invocation the store holds."""
        session = await self.service.get_session(app_name=APP, user_id=USER,
                                                 session_id=self.session_id)
        assert session is not None
        texts = [p.text for e in session.events if e.author == "user" and e.content
                 for p in e.content.parts or [] if p.text]
        wanted = [p.text for p in (message.parts if message else []) or [] if p.text]
        if message is not None and (not session.events or texts[-len(wanted):] != wanted):
            return message, None
        said = [e for e in session.events if e.content is not None]
        last = said[-1] if said else None
        if last is not None and last.author != "user" and last.is_final_response():
            assert last.content is not None
            run.final = "".join(p.text or "" for p in last.content.parts or [] if not p.thought)
            return None, None
        return None, session.events[-1].invocation_id if session.events else None

    def _unsent(self, run: Run) -> list[Delivery]:
        """The Run's inputs not handed to ADK yet."""
        handed = {input_id for input_id, _ in self.book.sent}
        return [d for d in run.inputs if d.state == "pending" and d.input_id not in handed]

    def _hand_over(self, run: Run) -> types.Content:
        given = self._unsent(run)
        for delivery in given:
            self.book.sent.append((delivery.input_id, delivery.text))
        return types.Content(role="user", parts=[types.Part(text=d.text) for d in given])

    def _failed(self, run: Run, failure: BaseException) -> None:
        cause = _root(failure)
        if isinstance(cause, ScriptExhausted | ScenarioError):
            raise cause
        if isinstance(cause, LlmCallsLimitExceededError):
            self.book.end(run, "loop_exhausted")
        elif isinstance(cause, BudgetRefused):
            self.book.end(run, "failed", cause.code, str(cause), figures=cause.figures)
        elif isinstance(cause, HookDenied):
            self.book.end(run, "failed", "HOOK_DENIED", str(cause))
        elif isinstance(cause, WindowRefused):
            self.book.end(run, "failed", "CONTEXT_LENGTH_EXCEEDED", str(cause))
        elif isinstance(cause, ModelFailed):
            self.book.end(run, "failed", "MODEL_FAILED", str(cause))
        elif isinstance(cause, ToolFailed):
            self.book.end(run, "failed", "TOOL_ERROR", str(cause))
        else:
            self.book.end(run, "failed", None, f"{type(cause).__name__}: {cause}")

    def _tool_error(self, tool: BaseTool, args: dict[str, Any], context: ToolContext,
                    error: Exception) -> dict[str, Any] | None:
        """The best configuration's ``on_tool_error_callback``: a tool's error as a structured
        result the model reads (§6, §11); an Executor's context error is raised on, ending
        the whole invocation (§11), and so is a script that ran out."""
        cause = _root(error)
        if isinstance(cause, ScriptExhausted | ScenarioError):
            self.exhausted = cause if isinstance(cause, ScriptExhausted) else None
            return None
        if isinstance(cause, BudgetRefused):
            return None
        code = ("TOOL_ERROR" if isinstance(cause, ToolFailed) else "HOOK_DENIED"
                if isinstance(cause, HookDenied) else "EXECUTOR_FAILED"
                if tool.name == DELEGATE else "TOOL_NOT_AVAILABLE")
        self.facts[str(context.function_call_id)] = {"status": "error", "code": code}
        return {"status": "error", "error": {"code": code, "detail": str(error)}}

    # --- what ADK sends, read where it hands it to the model --------------------------------

    def _measure(self, request: LlmRequest, purpose: str, role: str
                 ) -> tuple[list[Message], int, str]:
        instruction = request.config.system_instruction if purpose == "business" else None
        view = read_view(instruction if isinstance(instruction, str) else None,
                         request.contents, self.book.sent, self.summaries,
                         self.callbacks.annotations)
        self.book.annotate(view, self.facts)
        schemas = tool_schemas(request)
        tokens = self.ports.estimator.estimate(estimation(view, schemas)).tokens
        current = {d.input_id for d in self.book.active_inputs()}
        return view, tokens, whole_input_decision(self.budget, view, tokens, current, role)

    def answer(self, purpose: str, role: str, request: LlmRequest, attempt: int
               ) -> ModelOutcome:
        """The scripted model's observer: refuse a request over B, trace it as sent, ask the
        scripted port."""
        self.crash.alive()
        view, tokens, measured = self._measure(request, purpose, role)
        if purpose == "business" and measured == "error":
            raise BudgetRefused("CONTEXT_PROTECTED_INPUT_TOO_LARGE",
                                refusal_figures(self.budget, tokens, tokens))
        decision: str | None = measured
        if purpose == "compaction":
            decision = None
        elif self.compacted:
            decision, self.compacted = "compact", False
        if attempt == 1:
            self.requests += 1
        key = f"google-adk:{self.requests}"
        self.measure = tokens
        run = self.book.active()
        if purpose == "business":
            self.book.claim(view)
        budget = self.budget
        cap = request.config.max_output_tokens
        # No cap set on the request (ADK's summarizer sets none): the model's own output
        # limit bounds it, the Agent's output reserve (Q450).
        sent = request_event(budget, purpose, role, key, attempt, view, tokens,
                             budget.output_reserve if cap is None else cap, decision,
                             None if run is None else run.no)
        self.events.append({**sent, "rendered": {"tool_schemas": tool_schemas(request)}})
        outcome = self.ports.model.call(model_call(self.asked, purpose, role, key, attempt,
                                                   view, budget.output_reserve))
        self.last = {"key": key, "attempt": attempt, "tokens": tokens}
        if purpose == "compaction":
            if isinstance(outcome, Complete):
                self.summaries.append(outcome.text)
                self.compacted = True
        else:
            self._answered(outcome, key, attempt, tokens)
        return outcome

    def attempts(self) -> int:
        return self.doc.model_attempts

    def last_measure(self) -> int:
        return self.measure

    def call_id(self) -> str:
        return f"call_{next(self.call_ids)}"

    def proposed(self, call_id: str, malformed: str | None, arguments: dict[str, Any]) -> None:
        self.proposals[call_id] = arguments

    def _answered(self, outcome: ModelOutcome, key: str, attempt: int, tokens: int) -> None:
        if isinstance(outcome, Complete | PartialThenFailed):  # a first output arrived (§5)
            self.book.first_output()
        if isinstance(outcome, Complete) and outcome.input_tokens is not None:
            self.events.append(usage_event("business", key, attempt, tokens,
                                           outcome.input_tokens, outcome.output_tokens))

    def _run_tool(self, context: ToolContext, name: str, arguments: dict[str, Any]
                  ) -> ToolOutcome:
        self.crash.alive()
        call_id = str(context.function_call_id)
        outcome = self.ports.tools.run(name, arguments, tool_ordinal(self.events))
        self.events.append(tool_event(call_id, name, arguments,
                                      self.proposals.get(call_id, arguments), outcome))
        return outcome



def _root(failure: BaseException) -> BaseException:
    """The first cause in the chain the adapter knows (ADK may wrap an error)."""
    return root_cause(failure, (BudgetRefused, HookDenied, ModelFailed, WindowRefused,
                                ToolFailed, ScriptExhausted, ScenarioError,
                                LlmCallsLimitExceededError))


def make_driver() -> GoogleAdkDriver:
    """The factory ``ctxspec conformance --driver`` and ``ctxspec compat`` load: ADK as a
    careful user following the design configures it (the best configuration)."""
    return GoogleAdkDriver()


def make_default_driver() -> GoogleAdkDriver:
    """ADK with its defaults wherever the design names no figure."""
    return GoogleAdkDriver(adk_defaults=True)
