"""A small world for the ownership tests and the takeover hunt (tests/takeover_hunt.py): an
Agent whose Run asks for two tool calls under a quota of one and then answers, a model that
answers the same Operation the same way in every process, and a tool whose every execution is
appended to a log file shared by the processes (the side effect a double execution would
repeat)."""

import json
import os
from pathlib import Path
from typing import Any

from ctxspec.conformance.estimator import CharEstimator
from ctxspec.reference.budget import BudgetConfig
from ctxspec.reference.ports import (
    Complete,
    HookContext,
    HookPoint,
    HookReply,
    ModelCall,
    ModelOutcome,
    ProposedCall,
    ToolOutcome,
    ToolSpec,
)
from ctxspec.reference.runtime.runtime import AgentConfig

AGENT = AgentConfig(
    system_prompt="You write and read.", budget=BudgetConfig(
        window=100_000, output_reserve=1000, safety_margin=100),
    tools=(ToolSpec("write", json.dumps({"name": "write"})),
           ToolSpec("read", json.dumps({"name": "read"}))),
    tool_quota=1)
"""A Run's first answer asks for write and read; the quota lets only one of them run."""


class World:
    """The model, the tools and no hooks; ``log`` receives one JSON line per tool execution."""

    def __init__(self, log: Path) -> None:
        self.log = log

    def call(self, request: ModelCall) -> ModelOutcome:
        if any(m.role == "tool" for m in request.messages):
            return Complete("done")
        # write's argument names the question, so each Run's write is told apart in the log.
        question = [m.text for m in request.messages if m.role == "user"][-1]
        return Complete("", (ProposedCall("write", {"path": question}),
                             ProposedCall("read", {})))

    def run(self, name: str, arguments: Any, ordinal: int) -> ToolOutcome:
        # O_APPEND: each line lands whole, whichever process writes it.
        line = json.dumps({"tool": name, "pid": os.getpid(), "arguments": arguments}) + "\n"
        with self.log.open("a", encoding="utf-8") as out:
            out.write(line)
        return ToolOutcome(f"{name} ok")

    def registered(self, point: HookPoint) -> bool:
        return False

    def items(self, context: HookContext) -> tuple[HookReply, ...]:
        return ()


def ports(world: World) -> dict[str, Any]:
    return {"model": world, "tools": world, "hooks": world, "estimator": CharEstimator()}
