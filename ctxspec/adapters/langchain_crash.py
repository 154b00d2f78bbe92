"""The design's crash phases (§10, conformance/phases.py) mapped onto LangGraph's own checkpoint
writes (the LangChain driver, ctxspec/adapters/langchain.py).

A LangGraph thread is saved by its checkpointer: each node's writes as the node ends
(``put_writes``, its pending writes) and a checkpoint after every step, a super-step of the
nodes that ran together (``put``; langgraph/pregel/_loop.py: ``PregelLoop.put_writes``,
``_put_checkpoint``). The graph streams with ``durability="sync"``, so a checkpoint is saved
before the next step starts and a failure of its ``put`` surfaces before any later node runs
(langgraph/pregel/main.py: ``Pregel.stream``, ``loop._put_checkpoint_fut.result()``), and with
``max_concurrency=1``, so a step's nodes run one after another. The Session's checkpointer is
a :class:`WatchedSaver`: it reads from each checkpoint or write it is handed which of the
design's phases that commits, and dies just before or just after storing it, or refuses it, as the
scenario's crash says. The phases and the checkpoint of each (the root graph's, namespace ""):

- ``input_accepted`` (§5): the ``input`` checkpoint of a stream, holding the inputs handed to
  it (the question and the supplements sent with it: one occurrence each);
- ``request_frozen`` (§3, §7): the checkpoint whose next node is ``model`` — the state the
  model node builds its request from, after every ``before_model`` middleware;
- ``raw_answer_saved`` (§10): the checkpoint of the ``model`` node's step, holding its
  AIMessage; *before* it, the process dies inside the model node once the answer arrived, so
  LangGraph never writes it (the node's own writes would otherwise be saved first);
- ``effective_result_committed`` (§3): the first checkpoint after the answer whose next node is
  no ``after_model`` middleware — the answer as the after-model middleware left it (the review,
  a post-response hook);
- ``hook_decided`` (§3): the first checkpoint after a middleware hook chain decided (the node
  that asked it has ended): one occurrence per chain (a review's, below, is a pending write);
- ``batch_fed_back`` (§2): the checkpoint of the ``tools`` step, holding every result of the
  batch;
- ``run_finalised`` (§11): the checkpoint after which the graph has no next node, the thread's
  final state of a Run that ended in the graph.

Two phases are pending writes (``put_writes``), a task's writes stored as it ends.
``PregelLoop.put_writes`` submits the saver's ``put_writes`` to the step's executor, which with
``max_concurrency=1`` is one worker running in order what was queued: the step's tasks first,
then each task's write, queued as that task ended, then the step's checkpoint (the runner waits
for every task's done callback before it; langgraph/pregel/_runner.py: ``PregelRunner.tick``,
``commit``). So the points are reproducible, and a batch's calls all run before the first
result is stored:

- ``tool_settled`` (§10): the write of a ``tools`` task a Send started, holding one call's
  ToolMessage (a ``delegate`` call's result is its Executor's, not a tool's);
- ``hook_decided`` of a review (HumanInTheLoopMiddleware, ``tool.pre_call``): the null task's
  ``__resume__`` write, which the client's ``Command(resume=...)`` stores before the paused node
  runs again — the reviewer's answer, one occurrence per reviewed call. A middleware hook's
  decision is in its node's state update, so its ``hook_decided`` is the checkpoint as above.

A death raised in the worker is kept in that write's future; the process's next act (a model
call, a tool run, a write, the step's checkpoint, which the stream awaits) checks and dies.

An Executor is a ``create_agent`` graph invoked inside the Planner's ``delegate`` tool
(ctxspec/adapters/langchain_executor.py) without a checkpointer of its own, so LangGraph runs
it as a subgraph that inherits the thread's checkpointer under a namespace of its own
(``tools:<task id>``; langgraph/pregel/main.py: ``Pregel.stream`` takes the parent's
``CONFIG_KEY_CHECKPOINTER``). Its checkpoints map the same phases, and two more:
``execution_started`` (§10) is its ``input`` checkpoint, holding the hand-over, and
``execution_ended`` its final checkpoint, holding its last answer. A re-run ``delegate`` call
resumes its subgraph from that namespace's last checkpoint (langgraph/pregel/_loop.py:
``PregelLoop._first``, a subgraph resumes when its parent does).

After a death the driver resumes the thread on a fresh graph instance over the same
checkpointer, as a restarted process would; what LangGraph re-runs then is what the suite judges.
Not mapped, because LangGraph writes nothing there: a first output (the model node takes an
answer whole), a hook marked started (a middleware hook writes nothing as it starts; a review's
interrupt would be the one such mark), a tool started (nothing marks a task started: it is
known by its writes alone), the Session's creation (a thread exists from its first checkpoint)
and every compaction phase (SummarizationMiddleware summarises inside one ``before_model``
node).
"""

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from ctxspec.adapters.langchain_executor import DELEGATE

PHASES = ("input_accepted", "request_frozen", "raw_answer_saved", "effective_result_committed",
          "hook_decided", "tool_settled", "batch_fed_back", "run_finalised",
          "execution_started", "execution_ended")
"""The phases that map onto a checkpoint."""
CAPABILITIES = frozenset({*(f"crash:{phase}" for phase in PHASES), "commit_failures"})

_BRANCH = "branch:to:"
_TASKS = "__pregel_tasks"
_RESUME = "__resume__"
_NULL_TASK = "00000000-0000-0000-0000-000000000000"
"""The channel and the task id of a ``Command(resume=...)``'s write: private names of LangGraph
(langgraph/_internal/_constants.py: RESUME, NULL_TASK_ID), read here as data."""
_PUSH = "~__pregel_push"
"""The path of a task a Send started (create_agent sends each tool call to ``tools``)."""


class Died(BaseException):
    """The process dies (a BaseException, so no middleware's retry or LangGraph's error
    handling takes it for a failure of the node)."""


class Refused(Exception):
    """The store refused the commit (``"when": "fails"``, capability ``commit_failures``)."""


def _next(checkpoint: Mapping[str, Any]) -> set[str]:
    """The nodes a checkpoint's next step runs: those its branch channels hold a trigger for,
    and those a Send addressed (create_agent sends each tool call to ``tools``)."""
    values = checkpoint["channel_values"]
    nodes = {name.removeprefix(_BRANCH) for name in values if name.startswith(_BRANCH)}
    return nodes | {getattr(send, "node", "") for send in values.get(_TASKS) or ()}


@dataclass
class Crash:
    """The scenario's crash, counted over the checkpoints that commit its phase."""

    plan: Any
    passed: int = 0
    done: bool = False
    inputs: int = 0
    """Inputs handed to the stream that no checkpoint holds yet."""
    decided: int = 0
    """Middleware hook chains decided since the last checkpoint."""
    reviewed: int = 0
    """Review chains (HumanInTheLoopMiddleware) answered and not yet sent back to the thread."""
    answered: set[str] = field(default_factory=set)
    """The graphs (by namespace) with a model answer whose effective checkpoint is not
    written yet."""
    seen: dict[str, Any] = field(default_factory=dict)
    """Each graph's ``versions_seen`` in its last checkpoint: which nodes ran since."""
    refused: str | None = None
    """The phase of the commit the store refused, once it did."""
    dead: bool = False
    """The process has died and not restarted yet: nothing more runs or is stored (a batch's
    other calls, run one after another, die at their first step)."""

    def alive(self) -> None:
        """Called at each model call, tool run and store write: a dead process does none."""
        if self.dead:
            raise Died

    def phases_of(self, namespace: str, checkpoint: Mapping[str, Any],
                  metadata: Mapping[str, Any]) -> Counter[str]:
        """The phases (and how many occurrences of each) a checkpoint commits: of the root
        graph (``namespace`` "") or of an Executor's, a graph nested in the ``tools`` node."""
        seen = checkpoint["versions_seen"]
        before = self.seen.get(namespace, {})
        ran = {node for node, versions in seen.items() if versions != before.get(node)}
        self.seen[namespace] = {node: dict(versions) for node, versions in seen.items()}
        following = _next(checkpoint)
        phases: Counter[str] = Counter()
        if metadata.get("source") == "input":
            if namespace:
                phases["execution_started"] = 1
            else:
                phases["input_accepted"], self.inputs = self.inputs, 0
            return +phases
        if "model" in following:
            phases["request_frozen"] = 1
        if "model" in ran:
            phases["raw_answer_saved"] = 1
            self.answered.add(namespace)
        if namespace in self.answered and not any(
                node.endswith(".after_model") for node in following):
            phases["effective_result_committed"] = 1
            self.answered.discard(namespace)
        if self.decided:
            phases["hook_decided"], self.decided = self.decided, 0
        if "tools" in ran:
            phases["batch_fed_back"] = 1
        if ran and not following:
            phases["execution_ended" if namespace else "run_finalised"] = 1
        return +phases

    def written(self, writes: Any, task_id: str, task_path: str) -> Counter[str]:
        """The phases a task's pending writes commit: the reviewer's answer, which the client's
        ``Command(resume=...)`` stores as the null task's ``__resume__`` write before the
        paused node runs again (``hook_decided``, one occurrence per reviewed call), and each
        tool call's result."""
        if task_id == _NULL_TASK and self.reviewed and any(
                channel == _RESUME for channel, _ in writes):
            phases, self.reviewed = Counter({"hook_decided": self.reviewed}), 0
            return phases
        return self.settled(writes, task_path)

    def settled(self, writes: Any, task_path: str) -> Counter[str]:
        """The ``tool_settled`` occurrences a task's pending writes commit: one per result of
        a tool call the ``tools`` node ran for a Send (a ``delegate`` call's result is its
        Executor's ``execution_ended``, no tool of the design)."""
        if not task_path.startswith(_PUSH):
            return Counter()
        results = [m for channel, value in writes if channel == "messages"
                   for m in (value if isinstance(value, list) else [value])
                   if isinstance(m, ToolMessage) and m.name != DELEGATE]
        return Counter({"tool_settled": len(results)}) if results else Counter()

    def on_answer(self) -> bool:
        """A business answer has arrived in the model node: a crash before it is saved."""
        return self.plan is not None and self.plan.phase == "raw_answer_saved" and self._due(
            Counter({"raw_answer_saved": 1}), "before")

    def at_commit(self, phases: Counter[str], when: str) -> None:
        """Die (or refuse the commit) if the scenario's crash falls ``when`` this commit."""
        if self.plan is None or self.done or self.plan.phase not in phases:
            return
        if self.plan.phase == "raw_answer_saved" and self.plan.when == "before":
            return  # counted where the answer arrives (on_answer)
        if when == "before" and self.plan.when == "fails" and self._due(phases, "fails"):
            self.refused = str(self.plan.phase)
            raise Refused(f"the checkpointer refused the checkpoint of {self.plan.phase}")
        if self._due(phases, when):
            raise Died

    def _due(self, phases: Counter[str], when: str) -> bool:
        """Whether this commit holds the crash's occurrence, counted once per commit."""
        if self.plan is None or self.done or self.plan.when != when:
            return False
        count = phases[str(self.plan.phase)]
        if count == 0:
            return False
        self.passed += count
        if self.passed < self.plan.occurrence:
            return False
        self.done = True
        self.dead = when != "fails"
        return True

    def restarted(self) -> dict[str, Any]:
        return {"phase": self.plan.phase, "occurrence": self.plan.occurrence,
                "when": self.plan.when}


class WatchedSaver(InMemorySaver):
    """The Session's checkpointer: LangGraph's in-memory saver, which dies or refuses at the
    scenario's crash."""

    def __init__(self, crash: Crash) -> None:
        super().__init__()
        self.crash = crash

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        self.crash.alive()
        namespace = str(config["configurable"].get("checkpoint_ns", ""))
        phases = self.crash.phases_of(namespace, checkpoint, metadata)
        self.crash.at_commit(phases, "before")
        stored = super().put(config, checkpoint, metadata, new_versions)
        self.crash.at_commit(phases, "after")
        return stored

    def put_writes(self, config: Any, writes: Any, task_id: str, task_path: str = "") -> None:
        # Runs on the step's worker thread (PregelLoop.put_writes submits it): a death raised
        # here is kept in its future and seen at the process's next act, all of which check.
        self.crash.alive()
        phases = self.crash.written(writes, task_id, task_path)
        self.crash.at_commit(phases, "before")
        super().put_writes(config, writes, task_id, task_path)
        self.crash.at_commit(phases, "after")


__all__ = ["CAPABILITIES", "PHASES", "Crash", "Died", "Refused", "WatchedSaver"]
