"""langchain-ai/langchain#38352 on the pinned framework itself (issue #31, Q373; the design's
§6: every tool result in a request has its call). SummarizationMiddleware's cut, landing on a
run of ToolMessages, stops at the first AIMessage whose calls meet the run's, so a run holding
results of two answers keeps the older answer's result without its call.

The corpus leaves the report in ``UNREACHED``: the bug is present, but no history
``create_agent`` builds has that run. Both halves are pinned here. If a release fixes the cut,
the first test fails: drop the report from ``UNREACHED``. If a path below starts making the
run, the second fails: that path is the adapter configuration to add, and the report moves
into ``CORPUS``. Each path is one a user takes with LangChain's own parts, run offline with a
scripted model, always with a SummarizationMiddleware that keeps a few messages (a cut that
keeps one message meets a run of one result, where a meeting is a covering). Slow: about 0.2 s
a path, with LangChain imported."""

import itertools
from collections.abc import Callable, Sequence
from typing import Any, Literal

import pytest

Messages = Sequence[Any]


def _calls_of(message: Any) -> set[str]:
    """The call ids an AIMessage proposes, the malformed ones too (their results answer them)."""
    return {str(call["id"]) for call in [*message.tool_calls, *message.invalid_tool_calls]
            if call.get("id")}


def mixed_runs(messages: Messages) -> list[int]:
    """Where a run of consecutive ToolMessages starts that answers two answers, or an answer
    and none: the history #38352 needs."""
    from langchain_core.messages import AIMessage, ToolMessage

    def answer_of(at: int) -> int | None:
        wanted = messages[at].tool_call_id
        return next((k for k in range(at - 1, -1, -1) if isinstance(messages[k], AIMessage)
                     and wanted in _calls_of(messages[k])), None)

    starts, at = [], 0
    while at < len(messages):
        end = at
        while end < len(messages) and isinstance(messages[end], ToolMessage):
            end += 1
        if len({answer_of(k) for k in range(at, end)}) > 1:
            starts.append(at)
        at = max(end, at + 1)
    return starts


def _shape(messages: Messages) -> str:
    """H, A(its calls), T<call>: the history in one line."""
    from langchain_core.messages import AIMessage, ToolMessage
    return " ".join(
        f"A({','.join(str(c['id']) for c in m.tool_calls)})" if isinstance(m, AIMessage)
        and m.tool_calls else f"T{m.tool_call_id}" if isinstance(m, ToolMessage)
        else m.type[0].upper() for m in messages)


@pytest.mark.slow
def test_the_cut_keeps_an_orphan_where_two_answers_results_meet() -> None:
    from langchain.agents.middleware import SummarizationMiddleware
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    def answer(call: str) -> AIMessage:
        return AIMessage("", tool_calls=[{"name": "look", "args": {}, "id": call}])

    history: list[Any] = [HumanMessage("q"), answer("a1"), answer("b1"),
               ToolMessage("ra", tool_call_id="a1"), ToolMessage("rb", tool_call_id="b1")]
    assert mixed_runs(history) == [3]
    cut = SummarizationMiddleware._find_safe_cutoff_point(history, 3)
    # By hand: the run at 3 answers a1 and b1; walking back, the answer at 2 meets it first,
    # so the kept messages start there and keep a1's result without a1's call (at 1).
    assert cut == 2, (
        f"langchain-ai/langchain#38352 seems fixed: the cut moved to {cut}, not 2, on "
        f"{_shape(history)}; drop it from tests/real_bugs/corpus.py's UNREACHED")


class _World:
    """A scripted business model (the adapter's ScriptedChatModel) answering a list of answers
    in order, 'done' after it, with call ids unique in the thread."""

    def __init__(self) -> None:
        self.ids = itertools.count(1)
        self.script: list[Any] = []

    def answer(self, *tools: str, structured: str = "") -> Any:
        from langchain_core.messages import AIMessage
        names = [*tools, *([structured] if structured else [])]
        return AIMessage("", tool_calls=[{"name": n, "args": {"q": "x"}, "id": f"c{next(self.ids)}"}
                                         for n in names])

    def turns(self, *batches: tuple[str, ...], times: int = 2) -> None:
        from langchain_core.messages import AIMessage
        for _ in range(times):
            self.script += [self.answer(*batch) for batch in batches] + [AIMessage("answer")]

    def model(self, purpose: str = "business") -> Any:
        from langchain_core.messages import AIMessage

        from ctxspec.adapters.langchain_model import ScriptedChatModel

        def reply(purpose: str, messages: Messages, tools: Any) -> AIMessage:
            if purpose == "compaction":
                return AIMessage("summary")
            return self.script.pop(0) if self.script else AIMessage("done")

        return ScriptedChatModel(purpose=purpose, answer=reply)


PathRun = Callable[[_World], list[Messages]]
"""A path a user takes: it runs an agent in the world and returns the thread's states."""


def _tools() -> list[Any]:
    from langchain.tools import ToolRuntime, tool
    from langchain_core.messages import ToolMessage
    from langgraph.types import Command

    @tool
    def look(q: str) -> str:
        """Look something up."""
        return "looked up " + q

    @tool
    def act(q: str) -> str:
        """Do something."""
        return "done " + q

    @tool
    def note(q: str, runtime: ToolRuntime) -> Command[Any]:
        """Write a note into the state, as LangChain's short-term memory guide writes one."""
        noted = ToolMessage("noted", tool_call_id=runtime.tool_call_id)
        return Command(update={"messages": [noted]})

    @tool
    def boom(q: str) -> str:
        """A tool that fails with no handler."""
        raise RuntimeError("the tool broke")

    return [look, act, note, boom]


def _agent(world: _World, middleware: Sequence[Any], model: Any = None, **options: Any
           ) -> tuple[Any, Any]:
    from langchain.agents import create_agent
    from langchain.agents.middleware import SummarizationMiddleware
    from langgraph.checkpoint.memory import InMemorySaver

    summary = SummarizationMiddleware(world.model("compaction"), trigger=("messages", 6),
                                      keep=("messages", 3))
    agent = create_agent(model or world.model(), _tools(), middleware=[*middleware, summary],
                         checkpointer=InMemorySaver(), **options)
    return agent, {"configurable": {"thread_id": "t"}, "max_concurrency": 1}


def _ask(agent: Any, config: Any, text: str, review: Callable[[Any], Any] | None = None) -> None:
    """One question; each review the Run pauses for answered by ``review``."""
    from langchain_core.messages import HumanMessage
    from langgraph.types import Command
    payload: Any = {"messages": [HumanMessage(text)]}
    while True:
        agent.invoke(payload, config)
        pending = agent.get_state(config).interrupts
        if not pending or review is None:
            return
        payload = Command(resume={p.id: review(p.value) for p in pending})


def _states(agent: Any, config: Any) -> list[Messages]:
    return [list(s.values.get("messages", [])) for s in agent.get_state_history(config)]


def _documented_trim(world: _World) -> list[Messages]:
    """The short-term memory guide's before_model trim (the first message and the last three
    or four, by RemoveMessage(REMOVE_ALL_MESSAGES)), before the summary."""
    from langchain.agents.middleware import before_model
    from langchain_core.messages import RemoveMessage
    from langgraph.graph.message import REMOVE_ALL_MESSAGES

    @before_model
    def trim(state: Any, runtime: Any) -> dict[str, Any] | None:
        messages = state["messages"]
        if len(messages) <= 3:
            return None
        recent = messages[-3:] if len(messages) % 2 == 0 else messages[-4:]
        return {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), messages[0], *recent]}

    world.turns(("look", "act"), ("look",), ("act", "look", "act"), times=3)
    agent, config = _agent(world, [trim])
    for n in range(3):
        _ask(agent, config, f"q{n}")
    return _states(agent, config)


def _reviewed(kind: str, mode: Literal["batched", "per_call"]) -> PathRun:
    def path(world: _World) -> list[Messages]:
        from langchain.agents.middleware import HumanInTheLoopMiddleware

        def review(value: Any) -> Any:
            name = value.get("name", "act")
            one = ({"type": "edit", "edited_action": {"name": name, "args": {"q": "z"}}}
                   if kind == "edit" else {"type": kind, "message": "the reviewer says no"})
            if value.get("type") == "tool_approval":  # per_call: one decision a call
                return one
            return {"decisions": [one] * len(value["action_requests"])}

        world.turns(("act", "look"), ("look", "act", "act"))
        agent, config = _agent(world, [HumanInTheLoopMiddleware({"act": True},
                                                                interrupt_mode=mode)])
        for n in range(2):
            _ask(agent, config, f"q{n}", review)
        return _states(agent, config)
    return path


def _review_abandoned(world: _World) -> list[Messages]:
    """A review left unanswered: the user asks a new question instead of resuming."""
    from langchain.agents.middleware import HumanInTheLoopMiddleware
    world.turns(("act", "look"), ("look",), times=1)
    world.turns(("look", "look"), ("look",), times=2)
    agent, config = _agent(world, [HumanInTheLoopMiddleware({"act": True})])
    for n in range(3):
        _ask(agent, config, f"q{n}")
    return _states(agent, config)


def _tool_limit(behaviour: Literal["continue", "end"]) -> PathRun:
    def path(world: _World) -> list[Messages]:
        from langchain.agents.middleware import ToolCallLimitMiddleware
        world.turns(("look", "act"), ("look",), ("act", "look", "act"))
        agent, config = _agent(world, [ToolCallLimitMiddleware(run_limit=2,
                                                               exit_behavior=behaviour)])
        for n in range(2):
            _ask(agent, config, f"q{n}")
        return _states(agent, config)
    return path


def _stopped_mid_batch(world: _World) -> list[Messages]:
    """The client stops reading the stream after the first result of a batch of three, then
    asks again (LangGraph drops the batch's unsaved results)."""
    from langchain_core.messages import HumanMessage
    world.turns(("look", "act", "look"), ("act", "look"), times=3)
    agent, config = _agent(world, [])
    stream = agent.stream({"messages": [HumanMessage("q0")]}, config, stream_mode="updates")
    for update in stream:
        if "tools" in update:
            stream.close()
    for n in (1, 2):
        _ask(agent, config, f"q{n}")
    return _states(agent, config)


def _tool_raises_mid_batch(world: _World) -> list[Messages]:
    world.turns(("look", "boom", "act"), ("look",), times=1)
    world.turns(("act", "look"), ("look",), times=2)
    agent, config = _agent(world, [])
    with pytest.raises(RuntimeError, match="the tool broke"):
        _ask(agent, config, "q0")
    for n in (1, 2):
        _ask(agent, config, f"q{n}")
    return _states(agent, config)


def _command_results(world: _World) -> list[Messages]:
    world.turns(("note", "look"), ("look", "note", "note"), times=3)
    agent, config = _agent(world, [])
    for n in range(3):
        _ask(agent, config, f"q{n}")
    return _states(agent, config)


def _fallback(world: _World) -> list[Messages]:
    """ModelFallbackMiddleware: the primary model always fails, the scripted one answers."""
    from langchain.agents.middleware import ModelFallbackMiddleware
    from langchain_core.messages import AIMessage

    from ctxspec.adapters.langchain_model import ScriptedChatModel

    def down(purpose: str, messages: Messages, tools: Any) -> AIMessage:
        raise RuntimeError("the primary provider is down")

    world.turns(("look", "act"), ("act", "look", "look"))
    agent, config = _agent(world, [ModelFallbackMiddleware(world.model())],
                           model=ScriptedChatModel(purpose="business", answer=down))
    for n in range(2):
        _ask(agent, config, f"q{n}")
    return _states(agent, config)


def _structured_beside_a_call(world: _World) -> list[Messages]:
    """ToolStrategy: the structured answer proposed in the same answer as a tool call."""
    from langchain.agents.structured_output import ToolStrategy
    from pydantic import BaseModel

    class Verdict(BaseModel):
        q: str

    for _ in range(2):
        world.script += [world.answer("look", "act"), world.answer("look", structured="Verdict")]
    agent, config = _agent(world, [], response_format=ToolStrategy(Verdict))
    for n in range(2):
        _ask(agent, config, f"q{n}")
    return _states(agent, config)


def _result_says(text: str) -> Callable[[list[Messages]], bool]:
    def seen(states: list[Messages]) -> bool:
        from langchain_core.messages import ToolMessage
        return any(isinstance(m, ToolMessage) and text in m.text for s in states for m in s)
    return seen


def _calls_left_unanswered(states: list[Messages]) -> bool:
    """An answer's calls followed by the next question: a batch whose results were dropped."""
    from langchain_core.messages import AIMessage, HumanMessage
    return any(isinstance(a, AIMessage) and a.tool_calls and isinstance(b, HumanMessage)
               for s in states for a, b in itertools.pairwise(s))


def _cut_mid_history(states: list[Messages]) -> bool:
    """The trim kept the first message and a tail starting with a result."""
    from langchain_core.messages import ToolMessage
    return any(len(s) > 1 and isinstance(s[1], ToolMessage) for s in states)


def _answered(states: list[Messages]) -> bool:
    from langchain_core.messages import AIMessage
    return any(isinstance(m, AIMessage) and m.tool_calls for s in states for m in s)


Witness = Callable[[list[Messages]], bool]

PATHS: dict[str, tuple[PathRun, Witness]] = {
    "documented trim before the summary": (_documented_trim, _cut_mid_history),
    "review rejects (batched)": (_reviewed("reject", "batched"), _result_says("rejected")),
    "review edits (per call)": (_reviewed("edit", "per_call"), _result_says("reviewer")),
    "review answers for the tool (per call)": (_reviewed("respond", "per_call"),
                                               _result_says("the reviewer says no")),
    "review abandoned for a new question": (_review_abandoned, _calls_left_unanswered),
    "ToolCallLimitMiddleware continue": (_tool_limit("continue"), _result_says("limit")),
    "ToolCallLimitMiddleware end": (_tool_limit("end"), _result_says("limit")),
    "stopped mid-batch, then a new question": (_stopped_mid_batch, _calls_left_unanswered),
    "a tool raising mid-batch, then a new question": (_tool_raises_mid_batch,
                                                      _calls_left_unanswered),
    "tools returning Command in parallel": (_command_results, _result_says("noted")),
    "ModelFallbackMiddleware": (_fallback, _answered),
    "structured output beside a tool call": (_structured_beside_a_call,
                                             _result_says("structured response")),
}
"""Each path, and what shows it took place in the thread (else the test judges nothing)."""


@pytest.mark.slow
@pytest.mark.parametrize("path", sorted(PATHS))
def test_no_path_puts_two_answers_results_side_by_side(path: str) -> None:
    run, witness = PATHS[path]
    states = run(_World())
    assert witness(states), f"'{path}' did not happen in the thread: {_shape(states[0])}"
    for messages in states:
        starts = mixed_runs(messages)
        assert not starts, (
            f"langchain-ai/langchain#38352 is reachable: '{path}' makes {_shape(messages)} (a run "
            f"of results of two answers at {starts}); add it as a LangChain adapter "
            "configuration and move the report from UNREACHED into CORPUS (Q373)")
