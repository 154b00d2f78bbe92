"""The design's crash phases that map onto LangGraph checkpoints (the LangChain driver,
ctxspec/adapters/langchain.py).

A LangGraph thread is saved by its checkpointer after every step (a super-step: the nodes that
ran together). Two of the design's phases are such a step of ``create_agent``'s graph:

- ``raw_answer_saved`` (§10): the ``model`` node's step, whose checkpoint holds the model's
  answer (the AIMessage with its tool calls);
- ``batch_fed_back`` (§2): the ``tools`` node's step, whose checkpoint holds every result of
  the batch appended to the thread.

A crash *after* the phase abandons the stream once that checkpoint is reported (the graph
streams with ``durability="sync"``, so it is saved by then). A crash *before* ``raw_answer_saved``
dies inside the model node once the answer has arrived (:class:`Died` raised from the model), so
LangGraph never writes it; before ``batch_fed_back`` the stream is abandoned once the tools'
update is reported, before the step's checkpoint (each tool's writes are saved as it ends:
LangGraph's pending writes). The driver then resumes the thread on a fresh
graph instance over the same checkpointer, as a restarted process would; what LangGraph
re-runs then is what the suite judges. No other phase is a step of its own: a summary is made
inside the ``model`` node's ``before_model`` step, a tool's start and result inside the
``tools`` step, so no crash is declared there.
"""

from collections.abc import Set
from dataclasses import dataclass, field
from typing import Any

NODES = {"raw_answer_saved": "model", "batch_fed_back": "tools"}
"""Each phase that maps onto a checkpoint, and the node whose step commits it."""
CAPABILITIES = frozenset(f"crash:{phase}" for phase in NODES)


class Died(BaseException):
    """The process dies (a BaseException, so no middleware's retry or LangGraph's error
    handling takes it for a failure of the node)."""


@dataclass
class Crash:
    """The scenario's crash, counted over the steps of its phase's node."""

    plan: Any
    passed: int = 0
    done: bool = field(default=False)

    def _node(self) -> str | None:
        if self.plan is None or self.done or self.plan.when not in ("before", "after"):
            return None
        return NODES.get(str(self.plan.phase))

    def on_answer(self) -> bool:
        """A business answer has arrived in the model node: a crash before it is saved."""
        return self.plan is not None and self.plan.phase == "raw_answer_saved" and self._due(
            {"model"}, "before")

    def on_update(self, nodes: Set[str]) -> bool:
        """A node's update was reported, its checkpoint not yet: a crash before the tools'
        step is saved (the model's is :meth:`on_answer`)."""
        return "model" not in nodes and self._due(nodes, "before")

    def on_checkpoint(self, nodes: Set[str]) -> bool:
        """The checkpoint of the step in which ``nodes`` ran is saved: a crash after it."""
        return self._due(nodes, "after")

    def _due(self, nodes: Set[str], when: str) -> bool:
        node = self._node()
        if node is None or node not in nodes or self.plan.when != when:
            return False
        self.passed += 1
        if self.passed < self.plan.occurrence:
            return False
        self.done = True
        return True

    def restarted(self) -> dict[str, Any]:
        return {"phase": self.plan.phase, "occurrence": self.plan.occurrence,
                "when": self.plan.when}


__all__ = ["CAPABILITIES", "NODES", "Crash", "Died"]
