"""LangChain v1 under the conformance suite: ``make_driver()`` returns a Driver over
``langchain.agents.create_agent`` with its built-in middleware and a LangGraph checkpointer
(install the extra: ``pip install 'ctxspec[langchain]'``).

The agent is what a team following the design would configure with LangChain's own parts:

- the model loop of ``create_agent``, one Session one LangGraph thread (an in-memory
  checkpointer), one Run one stream with its question and earlier supplements;
- ``SummarizationMiddleware`` with ``trigger=("tokens", the §7 trigger)``, the injected
  estimator as its ``token_counter``, the scripted compaction model as its ``summarizer`` and
  ``keep=("messages", 1)`` (the shortest tail: everything before the last message is material);
  its ``trim_tokens_to_summarize`` stays LangChain's default;
- ``ModelRetryMiddleware`` with ``max_retries`` = model_attempts − 1, raising when they are
  spent (``on_failure="error"``; the default would answer with an error text instead);
- ``ModelCallLimitMiddleware(run_limit=loop_limit)`` and ``ToolCallLimitMiddleware(run_limit=
  tool_quota)``;
- the user's stop: the client stops reading the Run's ``stream`` at the next step; a crash:
  the checkpointer dies at its phase's checkpoint (ctxspec/adapters/langchain_crash.py).

The model is :class:`ScriptedChatModel`, a ``BaseChatModel`` answering from the scenario's
script; tools are ``BaseTool``\\s running the scripted tools. The driver only records what
LangChain sent and did; the budget figures W, O, S and B, which LangChain has no notion of, are
computed here (adapter-supplied, reported apart).
"""

import hashlib
import json
import uuid
from collections.abc import Iterable, Sequence
from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import (
    AgentMiddleware,
    ModelCallLimitMiddleware,
    ModelRetryMiddleware,
    SummarizationMiddleware,
    ToolCallLimitMiddleware,
)
from langchain.agents.middleware.model_call_limit import ModelCallLimitExceededError
from langchain_core.exceptions import ContextOverflowError, ModelAPIError
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.types import Command

from ctxspec.adapters.hook_chain import Chain, HookDenied
from ctxspec.adapters.langchain_crash import Crash, Died, Refused, WatchedSaver
from ctxspec.adapters.langchain_executor import Executors
from ctxspec.adapters.langchain_hooks import POINTS as HOOK_POINTS
from ctxspec.adapters.langchain_hooks import DesignHooks, TrimBeforeModel
from ctxspec.adapters.langchain_model import (
    PROVIDER,
    Run,
    ScriptedChatModel,
    after_last_business,
    last_purpose,
    make_tool,
    prompt_view,
    tool_error,
    view_of,
)
from ctxspec.adapters.langchain_profile import (
    BEST,
    CAPABILITIES,
    DEFAULTS,
    PROFILE,
    TRIM,
    Configuration,
)
from ctxspec.adapters.langchain_review import (
    POINT,
    Reviewer,
    rejected_calls,
    review_middleware,
    reviewed_states,
)
from ctxspec.adapters.langchain_summary import summarization
from ctxspec.conformance.driver import Ports
from ctxspec.conformance.scenario import Scenario
from ctxspec.reference.budget import ConfigurationError, resolve_budget
from ctxspec.reference.ports import (
    Complete,
    ContextLengthExceeded,
    Failed,
    ModelCall,
    PartialThenFailed,
    ProposedCall,
    ScriptExhausted,
)
from ctxspec.reference.tokens import EstimationRequest, PromptMessage, Role

Event = dict[str, Any]
ROLES: dict[str, Role] = {"system": "system", "user": "user", "assistant": "assistant",
                          "tool": "tool"}


class LangChainDriver:
    """The Driver over one ``create_agent`` graph per Session, LangChain configured as
    ``configuration`` says (the best configuration unless told otherwise)."""

    capabilities = CAPABILITIES
    compat_profile = PROFILE

    def __init__(self, configuration: Configuration = BEST) -> None:
        self.configuration = configuration

    def configure(self, scenario: Scenario, ports: Ports) -> None:
        agent = scenario.agent
        budget = resolve_budget(agent.budget())
        if isinstance(budget, ConfigurationError):
            raise ValueError(f"{budget.code.value}: {budget.field}: {budget.rule}")
        self.budget, self.ports, self.agent = budget, ports, agent
        self.name, self.minted = scenario.name, 0
        self.events: list[Event] = []
        self.runs: list[Run] = []
        self.texts: dict[str, str] = {}
        self.waiting: list[str] = []
        """Supplements received while no Run runs: the next question's."""
        self.summaries: list[str] = []
        self.rejected: set[str] = set()
        """The calls the reviewer rejected: their results are pre-call denials (Q210)."""
        self.exhausted: ScriptExhausted | None = None
        self.stop_requested = False
        self.retry: tuple[str, str, int] | None = None
        """(fingerprint, purpose_key, attempt) of the last request that failed."""
        self.lost: tuple[str, str, int] | None = None
        """(fingerprint, purpose_key, attempt) of the request whose answer a crash lost."""
        self.ordinal = 0
        self.last_compaction = 0
        self.proposed: dict[str, dict[str, Any]] = {}
        self.deliveries: dict[str, tuple[str, str, str | None]] = {}
        """input id → (delivery id, state, target Run id): what the requests showed of it."""
        self.claimed: list[str] = []
        self.input_runs: dict[str, str | None] = {}
        """The inputs the request in flight carries that no answer has delivered yet."""
        self.business = ScriptedChatModel(purpose="business", answer=self._answer)
        self.executors = None if agent.executor is None else Executors(
            agent, ScriptedChatModel(purpose="executor", answer=self._answer), self._run_tool,
            self._id, self._executor_middleware)
        self.post_denied: set[str] = set()
        """The calls whose result a post-call hook withheld."""
        self.hooks: DesignHooks | None = None
        self.reviewer: Reviewer | None = None
        self.chain = Chain(ports.hooks, self._event, failed_diagnostics=())  # per Session; Q550
        middleware = self._middleware(ports)
        self.middleware = middleware
        self.schemas = tuple(json.dumps(convert_to_openai_tool(tool), sort_keys=True)
                             for tool in self._tools())
        self.crash = Crash(scenario.crash)
        self.checkpointer = WatchedSaver(self.crash)
        self.graph: Any = self._build()
        self.sessions = 1
        self.config: Any = {"configurable": {"thread_id": "session-1"}, "max_concurrency": 1}

    def _middleware(self, ports: Ports) -> list[AgentMiddleware[Any, Any, Any]]:
        """LangChain's own middleware, configured from the scenario's figures and the
        configuration's settings, and the design's hook points where the scenario has hooks."""
        agent = self.agent
        middleware: list[AgentMiddleware[Any, Any, Any]] = [
            TrimBeforeModel(self.budget.trigger_threshold, self._count)
            if self.configuration.trim_before_model
            else self._summarization(self.business, self.agent.system_prompt),
            ModelRetryMiddleware(max_retries=agent.model_attempts - 1, on_failure="error",
                                 initial_delay=0.0, backoff_factor=0.0, jitter=False),
            ModelCallLimitMiddleware(run_limit=agent.loop_limit, exit_behavior="error")]
        if agent.tool_quota:
            middleware.append(ToolCallLimitMiddleware(run_limit=agent.tool_quota))
        if any(ports.hooks.registered(point) for point in HOOK_POINTS):
            # First: its before_model runs before the summary's, its wrap_model_call outside the
            # retries (a request's pre-request chain runs once, not per Attempt).
            hooks = DesignHooks(self.chain, self.post_denied.add)
            self.hooks = hooks
            middleware.insert(0, hooks)
        if ports.hooks.registered(POINT):
            self.reviewer = Reviewer(ports.hooks, self._event)
            middleware.append(review_middleware([tool.name for tool in self._tools()]))
        return middleware

    def _summarization(self, model: ScriptedChatModel, prompt: str
                       ) -> SummarizationMiddleware[Any, Any]:
        """SummarizationMiddleware as the configuration sets it, for a role with ``prompt``
        (ctxspec/adapters/langchain_summary.py, with the compaction hooks)."""
        whole = self.configuration.count_whole_request

        def count(messages: Iterable[Any]) -> int:
            return self._count_request(messages, prompt) if whole else self._count(messages)

        return summarization(
            model, ScriptedChatModel(purpose="compaction", answer=self._answer),
            self.agent.model_attempts, self.configuration, count, self.budget.trigger_threshold,
            self.chain, self.summaries.append)

    def _executor_middleware(self, model: ScriptedChatModel, prompt: str
                             ) -> list[AgentMiddleware[Any, Any, Any]]:
        """An Executor's middleware: the same summary, hooks and retries as the Planner's."""
        middleware: list[AgentMiddleware[Any, Any, Any]] = [
            self._summarization(model, prompt),
            ModelRetryMiddleware(max_retries=self.agent.model_attempts - 1, on_failure="error",
                                 initial_delay=0.0, backoff_factor=0.0, jitter=False)]
        if self.hooks is not None:
            middleware.insert(0, DesignHooks(self.hooks.chain, self.post_denied.add))
        if self.reviewer is not None and self.executors is not None:
            # The Executor's calls are reviewed as the Planner's: its interrupt bubbles up
            # through the delegate call to the thread (a subgraph's interrupt).
            middleware.append(review_middleware([t.name for t in self.executors.doc.tools]))
        return middleware

    def _build(self) -> Any:
        """A graph instance over the Session's checkpointer: a fresh one after a crash, as a
        restarted process builds it (the checkpointer is the store that survives)."""
        return create_agent(
            self.business, self._tools(),
            system_prompt=self.agent.system_prompt, middleware=self.middleware,
            checkpointer=self.checkpointer)

    def _tools(self) -> list[BaseTool]:
        own = [make_tool(t, self._run_tool) for t in self.agent.tools]
        return own if self.executors is None else self.executors.tools(own)

    # --- the Driver's stimuli -------------------------------------------------------------

    def ask(self, text: str) -> None:
        run = Run(len(self.runs) + 1, self._id())
        self.runs.append(run)
        self._client(run, "run_started", f"run {run.no}")
        self.stop_requested = False
        run.inputs.extend(self.waiting)
        self.waiting = []
        run.inputs.append(self._receive(text, run))

    def supplement(self, text: str) -> None:
        run = self._active()
        if run is None:
            self.waiting.append(self._receive(text, None))
            return
        run.inputs.append(self._receive(text, run))
        self._client(run, "input_received", "supplement")

    def stop(self) -> None:
        self.stop_requested = True

    def new_session(self) -> None:
        """Another Session of the same Agent: a new LangGraph thread on the same
        checkpointer (capability ``sessions``)."""
        self.sessions += 1
        self.config = {**self.config, "configurable": {"thread_id": f"session-{self.sessions}"}}
        self._event("session_opened", session=self.sessions)

    def advance(self) -> None:
        run = self._active()
        if run is None:
            return
        try:
            self._drive(run)
        except ScriptExhausted:
            raise
        except HookDenied as denied:
            self._end(run, "failed", denied.code, str(denied))
        except ModelCallLimitExceededError as limit:
            self._end(run, "loop_exhausted", None, str(limit))
        except ContextOverflowError as refused:
            self._end(run, "failed", "CONTEXT_LENGTH_EXCEEDED", str(refused))
        except Exception as failure:
            if self.exhausted is not None:
                raise self.exhausted from failure
            if self.stop_requested:  # the client cancelled the Run whatever the call did
                self._end(run, "stopped", None, "stopped by the user")
                return
            # An exception out of SummarizationMiddleware's node is the summary's failure: the
            # last call made was a summary call (LangChain raises it unchanged, Q292).
            code = "COMPACTION_FAILED" if last_purpose(self.events) == "compaction" \
                else "MODEL_FAILED"
            self._end(run, "failed", code, f"{type(failure).__name__}: {failure}")

    def trace(self) -> list[Event]:
        return self.events

    # --- the Run: one invoke, resumed after each pause before the model ---------------------

    def _drive(self, run: Run) -> None:
        """The Run is one stream of the graph, resumed after each review (``Command(resume=
        ...)``) and, after a crash, on a fresh graph instance from the last checkpoint."""
        new = run.inputs[run.sent:]
        run.sent = len(run.inputs)
        payload: Any = self._inputs(new)
        while True:
            ending = self._stream(payload)
            if ending == "stopped":
                self._end(run, "stopped", None, "stopped by the user")
                return
            if ending == "crashed":  # resume the thread where it stood, on a fresh graph
                self.crash.dead = False
                self.graph, payload = self._build(), self._unsaved(payload)
                continue
            if ending == "input":  # a supplement arrived while the graph ran: send it now
                new, run.sent = run.inputs[run.sent:], len(run.inputs)
                payload = self._inputs(new)
                continue
            pending = self.graph.get_state(self.config).interrupts
            if not pending or self.reviewer is None:
                break
            answer = self.reviewer.answer(pending[0].value)
            for messages in reviewed_states(self.graph, self.checkpointer, self.config):
                self.rejected |= rejected_calls(messages, pending[0].value, answer)
            # One review at a time: an Executor's, bubbled up from its subgraph, or the Planner's.
            payload = Command(resume=answer if len(pending) == 1 else {pending[0].id: answer})
        if self.hooks is not None and self.hooks.denied:
            self.hooks.denied = False
            self._end(run, "failed", "HOOK_DENIED",
                      "a hook denied the model response; it was not delivered")
            return
        messages = self.graph.get_state(self.config).values.get("messages", [])
        last = messages[-1] if messages else None
        self._end(run, "succeeded", None, None,
                  last.text if isinstance(last, AIMessage) else None)

    def _inputs(self, ids: Sequence[str]) -> dict[str, Any]:
        """The inputs as HumanMessages (id: the input's), counted into the input checkpoint."""
        self.crash.inputs += len(ids)
        return {"messages": [HumanMessage(content=self.texts[i], id=i) for i in ids]}

    def _unsaved(self, payload: Any) -> Any:
        """What a restarted client sends again: the inputs the thread lacks, else nothing (the
        thread resumes from its last checkpoint, a pending review asked again)."""
        if not isinstance(payload, dict):
            return None
        stored = {m.id for m in self.graph.get_state(self.config).values.get("messages", [])}
        missing = [str(m.id) for m in payload["messages"] if m.id not in stored]
        return self._inputs(missing) if missing else None

    def _stream(self, payload: Any) -> str:
        """Stream the graph until it ends, pauses for review, is stopped by the user (the
        client stops reading: LangGraph keeps the last checkpoint) or dies at the scenario's
        crash (ctxspec/adapters/langchain_crash.py)."""
        stream = self.graph.stream(payload, self.config, stream_mode=["updates", "checkpoints"],
                                   durability="sync")
        try:
            for mode, chunk in stream:
                self._raise_exhausted()
                if mode == "updates" and self.stop_requested:
                    stream.close()
                    return "stopped"
                if mode == "checkpoints" and self._received() and "model" in chunk.get(
                        "next", ()):
                    # The client stops reading before the next model call and streams again
                    # with the new input: LangGraph appends it to the thread (capability
                    # ``triggers``).
                    stream.close()
                    return "input"
        except Died:
            self._event("restarted", **self.crash.restarted())
            return "crashed"
        except Refused as refused:  # the store refused a commit: stop on it, then restart
            self._event("persistence_failed", phase=self.crash.refused,
                        occurrence=self.crash.plan.occurrence, error=str(refused))
            self._event("restarted", **self.crash.restarted())
            return "crashed"
        self._raise_exhausted()
        return "ended"

    def _received(self) -> bool:
        """Whether the running Run has inputs the graph has not been handed yet."""
        run = self._active()
        return run is not None and run.sent < len(run.inputs)

    def _raise_exhausted(self) -> None:
        if self.exhausted is not None:
            raise self.exhausted

    # --- the scripted model -------------------------------------------------------------------

    def _answer(self, purpose: str, messages: Sequence[BaseMessage],
                tools: Sequence[Any]) -> AIMessage:
        self.crash.alive()
        role = "executor" if purpose == "executor" else "root"
        prompt = self.agent.system_prompt if self.executors is None or role == "root" \
            else self.executors.doc.system_prompt
        view = prompt_view(messages) if purpose == "compaction" else view_of(
            messages, prompt, self.summaries, self.rejected, self.post_denied)
        for message in view:  # the Run that received each input
            if message["kind"] == "user_ref":
                message["source_run_id"] = self.input_runs.get(str(message["input_id"]))
        schemas = tuple(json.dumps(tool, sort_keys=True) for tool in tools)
        tokens = self._estimate(view, schemas)
        fingerprint = hashlib.sha256(json.dumps([purpose, view], sort_keys=True,
                                                default=str).encode()).hexdigest()
        if self.lost is not None and self.lost[0] == fingerprint:
            key, attempt = self.lost[1], self.lost[2]  # asked again after a crash in flight
        elif self.retry is not None and self.retry[0] == fingerprint:
            key, attempt = self.retry[1], self.retry[2] + 1
        else:
            self.ordinal += 1
            key, attempt = f"{purpose}:{self.ordinal}", 1
        self.retry = self.lost = None
        self._request(purpose, key, attempt, view, tokens, role)
        if purpose == "business":
            self._claim(view)
        try:
            outcome = self.ports.model.call(ModelCall(
                "compaction" if purpose == "compaction" else "business", uuid.UUID(self._id()), key,
                attempt, tuple(PromptMessage(role=m["role"], text=m["text"]) for m in view),
                schemas, self.budget.output_reserve, self.ordinal, role))
        except ScriptExhausted as exhausted:
            self.exhausted = exhausted
            raise
        if isinstance(outcome, Complete):
            if purpose != "compaction" and self.crash.on_answer():
                self.lost = (fingerprint, key, attempt)
                raise Died  # the answer arrived; the process dies before LangGraph saves it
            if purpose == "business":
                self._deliver()
            return self._complete(purpose, key, attempt, tokens, outcome)
        self.retry = (fingerprint, key, attempt)
        if isinstance(outcome, ContextLengthExceeded):
            raise ContextOverflowError("the provider refused the request as over its window")
        assert isinstance(outcome, Failed | PartialThenFailed)
        raise ModelAPIError(outcome.code)

    def _complete(self, purpose: str, key: str, attempt: int, tokens: int,
                  outcome: Complete) -> AIMessage:
        if outcome.input_tokens is not None or outcome.output_tokens is not None:
            self._event("model_usage", purpose=purpose, purpose_key=key, attempt=attempt,
                        estimated_input_tokens=tokens, input_tokens=outcome.input_tokens,
                        output_tokens=outcome.output_tokens,
                        input_deviation=None if outcome.input_tokens is None
                        else outcome.input_tokens - tokens)
        if purpose == "compaction":
            self.summaries.append(outcome.text.strip())
            self.last_compaction = len(self.events)
        usage = None
        if outcome.input_tokens is not None or outcome.output_tokens is not None:
            inputs, outputs = outcome.input_tokens or 0, outcome.output_tokens or 0
            usage = {"input_tokens": inputs, "output_tokens": outputs,
                     "total_tokens": inputs + outputs}
        calls = [self._call(call) for call in outcome.tool_calls
                 if call.malformed_arguments is None]
        # Arguments that are no JSON object are what a provider integration reports as an
        # invalid tool call (langchain_core.messages.InvalidToolCall), never a call to run.
        invalid = [{"name": call.name, "args": call.malformed_arguments,
                    "id": call.provider_call_id, "error": "the arguments are not JSON",
                    "type": "invalid_tool_call"}
                   for call in outcome.tool_calls if call.malformed_arguments is not None]
        return AIMessage(content=outcome.text, tool_calls=calls, invalid_tool_calls=invalid,
                         usage_metadata=usage, response_metadata={"model_provider": PROVIDER})

    def _call(self, call: ProposedCall) -> Any:
        call_id = call.provider_call_id or f"call_{self._id()[-12:]}"
        arguments = dict(call.arguments)
        self.proposed[call_id] = arguments
        return {"name": call.name, "args": arguments, "id": call_id, "type": "tool_call"}

    def _request(self, purpose: str, key: str, attempt: int, view: list[Event],
                 tokens: int, role: str = "root") -> None:
        budget = self.budget
        decision = None
        if purpose != "compaction":
            compacted = any(e["kind"] == "model_request" and e["purpose"] == "compaction"
                            for e in self.events[after_last_business(self.events):])
            decision = "compact" if compacted else (
                "below_trigger" if tokens < budget.trigger_threshold
                else "no_compressible_material")
        self._event("model_request", purpose="business" if role == "executor" else purpose,
                    role=role, purpose_key=key,
                    attempt=attempt, view={"messages": view}, estimated_input_tokens=tokens,
                    max_output_tokens=budget.output_reserve, window=budget.window,
                    output_reserve=budget.output_reserve, safety_margin=budget.safety_margin,
                    input_budget=budget.input_budget, compaction=decision,
                    trigger_threshold=budget.trigger_threshold, snapshot_id=None,
                    view_hash=hashlib.sha256(json.dumps(view, sort_keys=True).encode()
                                             ).hexdigest())

    def _estimate(self, view: Sequence[Event], schemas: tuple[str, ...] = ()) -> int:
        messages = []
        for message in view:
            text = message["text"] + "".join(f"\n{c['name']}({c['arguments']})"
                                             for c in message["tool_calls"])
            role: Role = ROLES.get(message["role"], "user")
            messages.append(PromptMessage(role=role, text=text))
        return self.ports.estimator.estimate(EstimationRequest(
            messages=tuple(messages), tool_schemas=schemas)).tokens

    def _count(self, messages: Iterable[Any]) -> int:
        """SummarizationMiddleware's token_counter of the defaults: the injected estimator
        over the messages LangChain hands it (its state's messages: no system prompt, no tool
        schemas)."""
        chosen = [m for m in messages if isinstance(m, BaseMessage)]
        return self._estimate(view_of(chosen, self.agent.system_prompt, self.summaries,
                                      self.rejected, self.post_denied))

    def _count_request(self, messages: Iterable[Any], prompt: str | None = None) -> int:
        """The best configuration's token_counter: what a user writes who counts the request
        the model is sent — the system prompt and the bound tools' schemas with the messages
        LangChain hands it (``token_counter`` is any callable over messages)."""
        prompt = self.agent.system_prompt if prompt is None else prompt
        chosen = [SystemMessage(content=prompt),
                  *(m for m in messages if isinstance(m, BaseMessage))]
        return self._estimate(view_of(chosen, prompt, self.summaries, self.rejected,
                                      self.post_denied), self.schemas)

    # --- the scripted tools -----------------------------------------------------------------

    def _run_tool(self, name: str, call_id: str | None, arguments: dict[str, Any]) -> str:
        self.crash.alive()
        ordinal = 1 + sum(e["kind"] == "tool_executed" for e in self.events)
        try:
            result = self.ports.tools.run(name, arguments, ordinal)
        except ScriptExhausted as exhausted:
            self.exhausted = exhausted
            raise
        self._event("tool_executed", call_id=str(call_id), name=name,
                    effective_arguments=arguments,
                    proposed_arguments=self.proposed.get(str(call_id), arguments),
                    outcome="error" if result.error else "ok")
        if result.error is not None:
            raise tool_error(result.error)
        return result.text

    # --- bookkeeping --------------------------------------------------------------------------

    def _receive(self, text: str, run: Run | None) -> str:
        input_id = self._id()
        self.texts[input_id] = text
        self.input_runs[input_id] = None if run is None else run.run_id
        self._delivery(input_id, self._id(), "pending", None if run is None else run.run_id)
        return input_id

    def _delivery(self, input_id: str, delivery_id: str, state: str,
                  target: str | None) -> None:
        self.deliveries[input_id] = (delivery_id, state, target)
        self._event("delivery", input_id=input_id, delivery_id=delivery_id, state=state,
                    target_run_id=target, previous_delivery_id=None)

    def _claim(self, view: Sequence[Event]) -> None:
        """An input is claimed when a request carries it for the first time (§5)."""
        run = self._active()
        for message in view:
            known = self.deliveries.get(str(message.get("input_id")))
            if message["kind"] == "user_ref" and known is not None and known[1] == "pending":
                self._delivery(message["input_id"], known[0], "claimed",
                               known[2] or (run.run_id if run else None))
                self.claimed.append(message["input_id"])

    def _deliver(self) -> None:
        """A complete answer to a request delivers the inputs it claimed (§5)."""
        for input_id in self.claimed:
            delivery_id, _, target = self.deliveries[input_id]
            self._delivery(input_id, delivery_id, "delivered", target)
        self.claimed = []

    def _end(self, run: Run, status: str, code: str | None, message: str | None,
             final: str | None = None) -> None:
        run.status = status
        # Inputs received while the stream ran never reached it: the client sends them with
        # the next question (LangChain cannot add to a running invoke).
        self.waiting.extend(run.inputs[run.sent:])
        run.sent = len(run.inputs)
        self.claimed = []  # an input no answer delivered stays claimed: LangChain carries nothing
        self._event("run_ended", run_id=run.run_id, run_no=run.no, status=status,
                    error_code=code, message=message,
                    final_answer=final if status == "succeeded" else None)
        self._client(run, "run_ended", status)

    def _active(self) -> Run | None:
        return self.runs[-1] if self.runs and self.runs[-1].status == "running" else None

    def _client(self, run: Run, event: str, detail: str) -> None:
        run.seq += 1
        self._event("client_event", run_id=run.run_id, run_seq=run.seq, event=event,
                    detail=detail)

    def _id(self) -> str:
        """Identities drawn from the scenario's name and a counter, so that a report of the same
        run is the same, byte for byte."""
        self.minted += 1
        return str(uuid.uuid5(uuid.NAMESPACE_URL, f"ctxspec:{self.name}:{self.minted}"))

    def _event(self, kind: str, **fields: Any) -> None:
        if kind == "hook_called" and fields.get("point") == POINT:
            self.crash.reviewed += 1  # the resume write holds the reviewer's answer
        elif kind == "hook_called":
            self.crash.decided += 1  # the next checkpoint holds its decision
        self.events.append({**fields, "kind": kind})


def make_driver() -> LangChainDriver:
    """LangChain as a careful user following the design configures it (the best
    configuration, ctxspec/adapters/langchain_profile.py ``BEST``)."""
    return LangChainDriver(BEST)


def make_trim_driver() -> LangChainDriver:
    """LangChain with a ``trim_messages`` pre-model hook in place of the summary (the bug
    corpus's path, tests/real_bugs/)."""
    return LangChainDriver(TRIM)


def make_default_driver() -> LangChainDriver:
    """LangChain with its defaults wherever the design names no figure."""
    return LangChainDriver(DEFAULTS)
