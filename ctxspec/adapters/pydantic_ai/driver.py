"""A ctxspec Driver over pydantic-ai (docs/compatibility/pydantic-ai.md): each Run is an
``Agent.iter`` of one ``Agent`` with the scenario's system prompt, function tools and a scripted
``FunctionModel``, on a ``Conversation`` loaded from and saved to an
``InMemoryConversationStore`` — the framework's own store of a conversation, which alone carries
history from one Run to the next.

The driver only watches and steers pydantic-ai through its public seams:

- a question starts a run on the stored conversation; supplements given before it are part of
  its first request;
- a supplement arriving while the run works is ``AgentRun.enqueue``d (priority ``asap``): the
  framework's pending-message queue puts it into the next model request;
- the user's stop is ``AgentRun.cancel()``;
- the Loop limit is ``UsageLimits(request_limit=...)``; an Executor's run shares the Planner's
  usage, so its requests count against the same limit;
- every request is read back where the ``FunctionModel`` receives it, and measured there.

pydantic-ai has no token budget: the adapter computes W, O, S, B and the trigger (§7), refuses a
request whose fixed input exceeds B (§8) and, in the best configuration, summarises in a
history processor (compaction.py). That, and the measuring with the injected estimator, is the
adapter's work, counted ``adapter``.
"""

import asyncio
import itertools
from collections.abc import Sequence
from typing import Any

from pydantic_ai import Agent, RunContext, Tool, capture_run_messages
from pydantic_ai.capabilities import AbstractCapability, HandleDeferredToolCalls, ProcessHistory
from pydantic_ai.conversation import Conversation
from pydantic_ai.conversation_store import InMemoryConversationStore
from pydantic_ai.exceptions import (
    ModelAPIError,
    ModelContextWindowExceededError,
    RunCancelled,
    UnexpectedModelBehavior,
    UsageLimitExceeded,
)
from pydantic_ai.messages import ModelMessage, repair_messages
from pydantic_ai.models.function import AgentInfo
from pydantic_ai.settings import ModelSettings
from pydantic_ai.usage import UsageLimits

from ctxspec.adapters.hook_chain import Chain, HookDenied
from ctxspec.adapters.pydantic_ai.compaction import CompactionFailed, Summariser
from ctxspec.adapters.pydantic_ai.executor import DELEGATE, delegate_tool
from ctxspec.adapters.pydantic_ai.hooks import CAPABILITIES as HOOKS
from ctxspec.adapters.pydantic_ai.hooks import DesignHooks
from ctxspec.adapters.pydantic_ai.model import scenario_model
from ctxspec.adapters.pydantic_ai.profile import PROFILE
from ctxspec.adapters.pydantic_ai.retries import Retries
from ctxspec.adapters.pydantic_ai.tools import build
from ctxspec.adapters.pydantic_ai.view import Message, read_view, tool_schema
from ctxspec.adapters.request_trace import (
    budget_of,
    fingerprint,
    model_call,
    request_event,
    tool_event,
    tool_ordinal,
    usage_event,
)
from ctxspec.adapters.run_facts import BudgetRefused, Run, RunBook, refusal_figures, root_cause
from ctxspec.adapters.sent_view import estimation
from ctxspec.conformance.driver import Ports
from ctxspec.conformance.scenario import Scenario
from ctxspec.reference.budget import (
    CompactionEvaluation,
    ResolvedBudget,
    evaluate_compaction,
)
from ctxspec.reference.ports import (
    Complete,
    ModelOutcome,
    PartialThenFailed,
    ScriptExhausted,
    ToolOutcome,
)

FRAMEWORK = frozenset({"root_loop", "final_answers", "usage_reports", "stop", "triggers",
                       "moments", "sessions", "tool_latency", "planner_executor",
                       "stop_mid_batch", *HOOKS})
"""What pydantic-ai itself does: the model loop of a run, its output, the provider's usage on
each ``ModelResponse``, ``AgentRun.cancel()``, ``AgentRun.enqueue`` on a running run, another
conversation in the same store, a batch's function tools run concurrently and returned in call
order, a Planner whose ``delegate`` tool runs an Executor ``Agent`` (agent delegation), the
four hook points of hooks.py, and the loop's moments where pydantic-ai hands the adapter a
request (freeze), an answer (first output), a response or a tool's result to the capabilities
(raw saved) and a call to its tool (batch call)."""
ADAPTER_SUPPLIED = frozenset({"estimator_injection", "error_figures"})
"""What the adapter computes because pydantic-ai has none of it: the request's measure with
the injected estimator, W, O, S, B, the trigger and the §8 refusal with its figures."""
COMPACTION = frozenset({"compaction_summary"})
"""With the best configuration's history processor: pydantic-ai runs it before every request
and keeps what it returns as the run's history; when and how to summarise is the adapter's
(compaction.py), so it counts as adapter-supplied."""
BEST = frozenset({"model_retries", "record_rewrite", "summary", "output_retries"})
"""The settings the best configuration changes from pydantic-ai's defaults (profile.py
``SETTINGS`` names each with the cases it fixes)."""
CALL_IDS = "call"


class PydanticAIDriver:
    capabilities: frozenset[str] = FRAMEWORK | ADAPTER_SUPPLIED
    compat_profile = PROFILE
    """The compatibility report's description of pydantic-ai (``ctxspec compat``)."""

    def __init__(self, best: frozenset[str] = BEST, keep_last: int | None = None) -> None:
        self.best = best
        """The settings of the best configuration applied (``BEST``; none: the defaults)."""
        self.keep_last = keep_last
        """A history processor keeping the last ``keep_last`` messages, the framework's
        documented example (the bug corpus's path, tests/real_bugs/); None: none."""
        if "summary" in best:
            self.capabilities = self.capabilities | COMPACTION

    def configure(self, scenario: Scenario, ports: Ports) -> None:
        doc = scenario.agent
        self.budget: ResolvedBudget = budget_of(doc)
        self.ports, self.doc = ports, doc
        self.call_ids = itertools.count(1)
        self.events: list[Message] = []
        self.book: RunBook[Run] = RunBook("pydantic-ai", self.events)
        """The Runs, their inputs and deliveries, and every input handed to pydantic-ai."""
        self.worded: dict[str, str] = {}
        """The kind of each text the adapter wrote into the messages (the history processor's
        summaries, a hook's annotations), by the text."""
        self.result_facts: dict[str, dict[str, Any]] = {}
        """What each denied call's result stands for, by call_id (Q210)."""
        self.requests = 0
        self.asked: dict[str, int] = {}
        self.last: dict[str, Any] | None = None
        self.agent_run: Any = None
        self.store = InMemoryConversationStore()
        self.conversation_id = "session-1"
        self.sessions = 1
        self.exhausted: ScriptExhausted | None = None
        self._build_agent()

    def _build_agent(self) -> None:
        doc, budget = self.doc, self.budget
        chain = Chain(self.ports.hooks, lambda kind, **fields: self.events.append(
            {**fields, "kind": kind}))
        self.hooks = DesignHooks(chain, self.result_facts, self.worded,
                                 "record_rewrite" in self.best,
                                 tuple(each.name for each in doc.shared),
                                 saved=lambda: self.ports.moments.at("raw_saved"))
        approval = self.ports.hooks.registered("tool.pre_call")
        self.tools = [build(tool, self._run_tool, approval) for tool in doc.tools
                      if doc.executor is None or tool.name != DELEGATE]
        capabilities: list[AbstractCapability[Any]] = [self.hooks]
        if approval:
            capabilities.append(HandleDeferredToolCalls(handler=self.hooks.approve))
        if "model_retries" in self.best:
            capabilities.append(Retries(doc.model_attempts))
        if "summary" in self.best:
            self.summariser = Summariser(self, doc.model_attempts)
            # After the hooks: a pre-request hook's change is part of what is measured (§7).
            capabilities.insert(1, ProcessHistory(self.summariser.process))
        if self.keep_last is not None:
            keep = self.keep_last
            capabilities.insert(0, ProcessHistory(lambda messages: messages[-keep:]))
        self.settings = ModelSettings(max_tokens=budget.output_reserve)
        self.limits = UsageLimits(request_limit=doc.loop_limit, tool_calls_limit=doc.tool_quota)
        executor_tools: list[Tool[Any]] = []
        if doc.executor is not None:
            delegate, executor_tools = delegate_tool(doc, self, self._run_tool, self.settings,
                                                     self.limits, self.call_ids,
                                                     [c for c in capabilities
                                                      if not isinstance(c, ProcessHistory)],
                                                     self.result_facts)
            self.tools.append(delegate)
        self.executor_schemas = [tool_schema(t.name, t.description or "",
                                             t.function_schema.json_schema)
                                 for t in executor_tools]
        self.schemas = [tool_schema(t.name, t.description or "", t.function_schema.json_schema)
                        for t in self.tools]
        # pydantic-ai's default: one retry of a call it could not use, then the run fails; the
        # design corrects such an answer by further Loops within the Loop limit (§11).
        retries = doc.loop_limit if "output_retries" in self.best else None
        self.agent = Agent(scenario_model(self, "root", self.call_ids),
                           system_prompt=doc.system_prompt, tools=self.tools,
                           capabilities=capabilities, model_settings=self.settings,
                           retries=retries)

    # --- the Driver's stimuli -------------------------------------------------------------

    def ask(self, text: str) -> None:
        self.book.open(Run(self.book.next_no(), self.book.new_id()), text)

    def supplement(self, text: str) -> None:
        run, delivery = self.book.active(), self.book.supplement(text)
        if run is not None and delivery is not None and run.started \
                and self.agent_run is not None:
            self.book.sent.append((delivery.input_id, text))
            self.agent_run.enqueue(text)

    def stop(self) -> None:
        run = self.book.active()
        if run is None:
            return
        run.stop_requested = True
        if self.agent_run is not None:
            self.agent_run.cancel()

    def advance(self) -> None:
        run = self.book.active()
        if run is None or run.started:
            return
        if run.stop_requested:  # stopped before pydantic-ai began: nothing is sent
            self.book.end(run, "stopped")
            return
        asyncio.run(self._drive(run))

    def new_session(self) -> None:
        """Another Session of the same Agent: another conversation in the same store."""
        self.sessions += 1
        self.conversation_id = f"session-{self.sessions}"
        self.events.append({"kind": "session_opened", "session": self.sessions})

    def trace(self) -> list[Message]:
        return self.events

    # --- one Run on pydantic-ai ---------------------------------------------------------------

    async def _drive(self, run: Run) -> None:
        run.started = True
        conversation = await self.store.load(self.conversation_id) or Conversation(
            conversation_id=self.conversation_id)
        held = {input_id for input_id, _ in self.book.sent}  # the conversation holds them already
        given = [d for d in run.inputs if d.input_id not in held]
        self.book.sent.extend((d.input_id, d.text) for d in given)
        failure: BaseException | None = None
        result = None
        with capture_run_messages() as captured:
            try:
                async with self.agent.iter([d.text for d in given], conversation=conversation,
                                           usage_limits=self.limits) as agent_run:
                    self.agent_run = agent_run
                    # Iterating is what runs the graph: each node (a model request, the
                    # tool calls) runs as it is reached, the capabilities observing it.
                    async for _ in agent_run:
                        pass
                    result = agent_run.result
            except Exception as error:  # the run's own ending, read below
                failure = error
            finally:
                self.agent_run = None
        if self.exhausted is not None:
            raise self.exhausted
        await self._save(conversation, result, failure, captured)
        self._ended(run, result, failure)

    async def _save(self, conversation: Conversation, result: Any,
                    failure: BaseException | None, captured: list[ModelMessage]) -> None:
        """Save what the run leaves: its result, or the messages a run that raised had made
        (``RunCancelled.all_messages()``; else ``capture_run_messages``, pydantic-ai's way to
        keep a failed run's messages), repaired."""
        if result is not None:
            await self.store.save(result)
            return
        kept = failure.all_messages() if isinstance(failure, RunCancelled) else list(captured)
        # pydantic-ai refuses a new prompt after calls left unanswered; its repair_messages
        # closes them out (its error message and docstring say to call it first).
        conversation.messages = repair_messages(kept)
        await self.store.save(conversation)

    def _ended(self, run: Run, result: Any, failure: BaseException | None) -> None:
        if failure is None and result is not None:
            self.book.end(run, "succeeded", final=str(result.output))
            return
        assert failure is not None
        cause = root_cause(failure, (ScriptExhausted, BudgetRefused, HookDenied,
                                     CompactionFailed, ModelContextWindowExceededError))
        if isinstance(cause, ScriptExhausted):
            raise cause
        if isinstance(failure, RunCancelled):
            self.book.end(run, "stopped")
        elif isinstance(failure, UsageLimitExceeded) and "tool_calls_limit" in str(failure):
            self.book.end(run, "failed", None, f"UsageLimitExceeded: {failure}")
        elif isinstance(failure, UsageLimitExceeded):
            self.book.end(run, "loop_exhausted")
        elif isinstance(cause, BudgetRefused):
            self.book.end(run, "failed", cause.code, str(cause), figures=cause.figures)
        elif isinstance(cause, HookDenied):
            self.book.end(run, "failed", "HOOK_DENIED", str(cause))
        elif isinstance(cause, CompactionFailed):
            self.book.end(run, "failed", "COMPACTION_FAILED", str(cause))
        elif isinstance(cause, ModelContextWindowExceededError):
            self.book.end(run, "failed", "CONTEXT_LENGTH_EXCEEDED", str(cause))
        elif isinstance(cause, ModelAPIError):
            self.book.end(run, "failed", "MODEL_FAILED", str(cause))
        elif isinstance(cause, UnexpectedModelBehavior):  # pydantic-ai gave the run up
            self.book.end(run, "failed", None, f"{type(cause).__name__}: {cause}")
        else:
            raise failure

    # --- what pydantic-ai sends, read where the FunctionModel receives it ---------------------

    def measure(self, messages: Sequence[ModelMessage], role: str = "root"
                ) -> tuple[list[Message], int, CompactionEvaluation]:
        """The request as the view, its I with the injected estimator, and §8's verdict: F is
        the system prompt, the tool schemas and the current Run's inputs with their annotations
        (for an Executor: all it has, its hand-over), the material everything else."""
        view = read_view(None, messages, self.book.sent, self.worded)
        self.book.annotate(view, self.result_facts)
        schemas = self.schemas if role == "root" else self.executor_schemas
        tokens = self.ports.estimator.estimate(estimation(view, schemas)).tokens
        fixed_view = view if role != "root" else fixed_part(view, self.current_inputs())
        fixed = self.ports.estimator.estimate(estimation(fixed_view, schemas)).tokens
        fixed = min(fixed, tokens)
        return view, tokens, evaluate_compaction(self.budget, fixed, tokens - fixed)

    def request(self, messages: Sequence[ModelMessage], info: AgentInfo,
                role: str) -> ModelOutcome:
        """The FunctionModel's observer: refuse what §8 refuses (adapter-supplied), trace the
        request as sent, ask the scripted port."""
        self.ports.moments.at("freeze")  # the request is prepared: what it holds is fixed
        view, tokens, verdict = self.measure(messages, role)
        decision: str = verdict.decision
        budget = self.budget
        # F is B − H where §8 reached H (material present), else the whole input
        fixed = tokens if verdict.summary_space is None else \
            budget.input_budget - verdict.summary_space
        figures = refusal_figures(budget, fixed, tokens)
        if self.summariser_compacted(role):
            decision = "compact"  # the request a compaction was made for: I ≤ B once more
            if tokens > budget.input_budget:
                raise BudgetRefused("CONTEXT_WINDOW_EXCEEDED", figures)
        elif verdict.error_code is not None:
            raise BudgetRefused(verdict.error_code.value, figures)
        max_output = (info.model_settings or {}).get("max_tokens")
        return self.traced("business", role, view, tokens, decision,
                           budget.output_reserve if max_output is None else max_output)

    def summariser_compacted(self, role: str) -> bool:
        """Whether a compaction ran for this root request (its decision is ``compact``)."""
        summariser = getattr(self, "summariser", None)
        if summariser is None or role != "root" or not summariser.compacted:
            return False
        summariser.compacted = False
        return True

    def traced(self, purpose: str, role: str, view: list[Message], tokens: int,
               decision: str | None, max_output: int) -> ModelOutcome:
        identity = fingerprint(purpose, role, view)
        last = self.last
        if last is not None and last["failed"] and last["view"] == identity:
            key, attempt = last["key"], last["attempt"] + 1  # a retry of that request
        else:
            self.requests += 1
            key, attempt = f"pydantic-ai:{self.requests}", 1
        run = self.book.active()
        if role == "root" and purpose == "business":
            self.book.claim(view)
        protected = [d.input_id for d in self.book.active_inputs()
                     if d.state in ("claimed", "delivered")] if role == "root" else []
        self.events.append({**request_event(
            self.budget, purpose, role, key, attempt, view, tokens, max_output, decision,
            None if run is None else run.no),
            "protected_input_ids": protected if purpose == "business" else []})
        outcome = self.ports.model.call(model_call(self.asked, purpose, role, key, attempt,
                                                   view, max_output))
        self.last = {"key": key, "attempt": attempt, "view": identity,
                     "failed": not isinstance(outcome, Complete)}
        self._answered(purpose, outcome, key, attempt, tokens)
        if purpose == "business" and isinstance(outcome, Complete | PartialThenFailed):
            self.ports.moments.at("first_output")
        return outcome

    def _answered(self, purpose: str, outcome: ModelOutcome, key: str, attempt: int,
                  tokens: int) -> None:
        if purpose == "business" and isinstance(outcome, Complete | PartialThenFailed):
            self.book.first_output()  # a first output arrived (§5)
        if isinstance(outcome, Complete) and (outcome.input_tokens is not None
                                              or outcome.output_tokens is not None):
            self.events.append({**usage_event(purpose, key, attempt, tokens,
                                              outcome.input_tokens or 0,
                                              outcome.output_tokens or 0), "cut": outcome.cut})

    def _run_tool(self, ctx: RunContext[Any], name: str, arguments: dict[str, Any]
                  ) -> ToolOutcome:
        self.ports.moments.at("batch_call")
        proposed = self.proposed.get(str(ctx.tool_call_id), arguments)
        try:
            outcome = self.ports.tools.run(name, arguments, tool_ordinal(self.events))
        except ScriptExhausted as exhausted:  # pydantic-ai would make it a failed result
            self.exhausted = exhausted
            raise
        self.events.append(tool_event(ctx.tool_call_id, name, arguments, proposed, outcome))
        return outcome

    def current_inputs(self) -> set[str]:
        """The input ids of the running Run."""
        return {d.input_id for d in self.book.active_inputs()}

    @property
    def proposed(self) -> dict[str, dict[str, Any]]:
        """The arguments each call was proposed with (hooks.py keeps them)."""
        return self.hooks.proposed



def fixed_part(view: list[Message], current: set[str]) -> list[Message]:
    """The messages of F (§7, §8): the system prompt, the current Run's inputs, and each
    annotation a hook put right after one of them."""
    fixed: list[Message] = []
    anchored = False
    for each in view:
        if each["kind"] == "annotation":
            if anchored:
                fixed.append(each)
            continue
        anchored = each.get("input_id") in current
        if anchored or each["kind"] == "system_prompt":
            fixed.append(each)
    return fixed


def make_driver() -> PydanticAIDriver:
    """The factory ``ctxspec conformance --driver`` and ``ctxspec compat`` load: pydantic-ai as
    a careful user following the design configures it (the best configuration)."""
    return PydanticAIDriver()


def make_default_driver() -> PydanticAIDriver:
    """pydantic-ai with its defaults wherever the design names no figure."""
    return PydanticAIDriver(best=frozenset())


def make_keep_last_driver() -> PydanticAIDriver:
    """The defaults with the history processor of pydantic-ai's documentation that keeps the
    last messages (here 2): the bug corpus's path (tests/real_bugs/)."""
    return PydanticAIDriver(best=frozenset(), keep_last=1)
