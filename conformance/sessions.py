"""Sessions several conformance cases stage: the §12 row 4 boundary, the §12 row 20 corrected
summary and the §3 write(path) call, as scenario documents (docs/scenarios.md). Each builder
states the arithmetic its cases rely on, so a case that reuses it derives its numbers from here."""

import json
from typing import Any

from ctxspec.conformance.case import Trace, base, requests


def boundary(question_length: int = 1597, **agent: Any) -> dict[str, Any]:
    """§12 row 4 (ROW-04-*): W = 5000, O = 400, S = 100 give B = 4500 and the trigger
    floor(0.8 × 4500) = 3600. Run 1 leaves "a" × 1000 and "b" × 1000 (its outcome message is the
    runtime's wording and counts 0 with the ``content`` estimator); with "sys" (3) Run 2's
    request is I = 2003 + the question's length, so 1596 and 1597 sit on both sides of the
    trigger. At 1597 Run 2 compacts Run 1 (2000 characters, one chunk) into "SUMMARY" and is
    sent at I = 3 + 1597 + 7 = 1607. ``agent`` overrides the Agent's settings."""
    document = base(window=5000, **agent)
    document["steps"] = [{"ask": "a" * 1000}, {"advance": True},
                         {"ask": "Q" * question_length}, {"advance": True}]
    document["model"] = {"business": [{"text": "b" * 1000}, {"text": "done"}],
                         "compaction": [{"text": "SUMMARY"}]}
    return document


def supplement_during_compaction() -> dict[str, Any]:
    """§12 row 6 (ROW-06): :func:`boundary`'s Session at 1597, Run 2 then calls ``look`` and
    answers "done"; the supplement "late words" arrives while Run 2's compaction request is
    answered — after the input cutoff of the business request being prepared (1: the
    question), so it joins Run 2's next request (cutoff 2), after ``look``'s result."""
    document = boundary(1597)
    document["agent"]["tools"] = [{"name": "look"}]
    document["model"]["business"] = [{"text": "b" * 1000},
                                     {"text": "", "tool_calls": [{"name": "look"}]},
                                     {"text": "done"}]
    document["tools"] = {"look": [{"text": "seen"}]}
    document["triggers"] = [{"on": {"purpose": "compaction", "ordinal": 1},
                             "do": {"supplement": "late words"}}]
    return document


def corrected_summary(ordinal: int = 4, correction: str = "A, corrected") -> dict[str, Any]:
    """§12 row 20 (ROW-20): one Run at W = 5000 with a tool t; loop 3 compacts the first two
    loops in two chunks (SUM1, SUM2), and the ``ordinal``-th model.pre_request chain replaces
    the text of the first decision ("A" × 1500) with ``correction`` — by default before loop 4,
    so the summary covers the record it changes.

    Loop 3 is I = "sys" 3 + "go" 2 + 1500 + 1500 + 700 + 500 = 4205 ≥ 3600 (the calls' framing
    and the schema count 0). F = 5, so T = min(8192, floor(4500 / 4), 400) = 400 and a chunk
    carries W − 2T − S = 4100: the first loop's unit (3000) fits, the second's (1200) does not
    — two chunks."""
    document = base(window=5000, tools=[{"name": "t"}])
    document["steps"] = [{"ask": "go"}, {"advance": True}]
    document["model"] = {
        "business": [{"text": "A" * 1500, "tool_calls": [{"name": "t"}]},
                     {"text": "B" * 700, "tool_calls": [{"name": "t"}]},
                     {"text": "C", "tool_calls": [{"name": "t"}]},
                     {"text": "done"}],
        "compaction": [{"text": "SUM1"}, {"text": "SUM2"}]}
    document["tools"] = {"t": [{"text": "r" * 1500}, {"text": "s" * 500}, {"text": "x"}]}
    document["hooks"] = [{"point": "model.pre_request", "ordinal": ordinal, "items": [
        {"context_patch": [{"target": "first_assistant", "field": "text",
                            "value": correction}]}]}]
    return document


def write_path(*items: dict[str, Any]) -> dict[str, Any]:
    """§3's example: the model proposes write(path="a.md"); one pre-call hook chain answers
    ``items``."""
    document = base(tools=[{"name": "write"}])
    document["steps"] = [{"ask": "write it"}, {"advance": True}]
    document["model"] = {"business": [
        {"text": "", "tool_calls": [{"name": "write", "arguments": {"path": "a.md"}}]},
        {"text": "done"}]}
    document["tools"] = {"write": [{"text": "ok"}]}
    document["hooks"] = [{"point": "tool.pre_call", "items": list(items)}]
    return document


def path_seen_by_model(trace: Trace) -> str:
    """In a ``write_path`` session: write's path in the effective call record, as the second
    business request shows it to the model."""
    decision = next(m for m in requests(trace, "business")[1]["view"]["messages"]
                    if m["tool_calls"])
    path: str = json.loads(decision["tool_calls"][0]["arguments"])["path"]
    return path


def hooked_executor_answer() -> dict[str, Any]:
    """A Planner delegates one task; its Executor answers "raw sum 23" and the second
    model.post_response chain (the first is the Planner's delegating answer's) rewrites that
    answer to "checked sum 5": the effective answer the Planner must receive (§3)."""
    document = base(executor={"tools": []})
    document["steps"] = [{"ask": "add them"}, {"advance": True}]
    document["model"] = {
        "business": [{"text": "", "tool_calls": [{"name": "delegate",
                                                  "arguments": {"task": "sum 2 and 3"}}]},
                     {"text": "it is five"}],
        "executor": [{"text": "raw sum 23"}]}
    document["hooks"] = [{"point": "model.post_response", "ordinal": 2, "items": [
        {"payload_patch": [{"path": "text", "value": "checked sum 5"}]}]}]
    return document
