"""§12 rows 15 to 18 as conformance cases: hooks change the model input in chain order, the
changed argument is what runs and what the model sees, a deny blocks and a failed hook drops only
itself (§3, §6). Each case stands beside its scenario and check."""

import json
from typing import Any

from ctxspec.conformance.case import (
    Case,
    Trace,
    base,
    equal,
    example,
    expect,
    of,
    requests,
    result_facts,
)

# --- §12 rows 15-18: hooks --------------------------------------------------------------------


def _row15_scenario() -> dict[str, Any]:
    document = base(tools=[{"name": "t"}])
    document["steps"] = [{"ask": "go"}, {"advance": True}]
    document["model"] = {"business": [{"text": "first", "tool_calls": [{"name": "t"}]},
                                      {"text": "done"}]}
    document["tools"] = {"t": [{"text": "ok"}]}
    document["hooks"] = [{"point": "model.pre_request", "ordinal": 2, "items": [
        {"context_patch": [{"target": "first_assistant", "field": "text",
                            "value": "first (as corrected by a hook)"}]},
        {"fails": True},
        {"context_patch": [{"target": "question", "field": "text", "value": "tampered"}]}]}]
    return document


def _row15_check(trace: Trace) -> None:
    # Three items in chain order: a valid correction, a failing handler (dropped alone), and a
    # patch of the protected question (refused). The request keeps the question and is measured
    # again: "sys" + "go" + the corrected text + "ok" (the call's framing and the tool schema
    # are the runtime's serialisation and count 0 with the content estimator).
    equal([(d["decision"], d["patch_valid"], d["diagnostics"]) for d in of(trace, "hook_decided")],
          [("allow", True, []), ("failed", False, ["HOOK_FAILED"]),
           ("allow", False, ["PROTECTED_INPUT"])], "hook decisions", cites="CTX-3.61")
    second = requests(trace, "business")[1]
    texts = [m["text"] for m in second["view"]["messages"]]
    expect("first (as corrected by a hook)" in texts and "go" in texts,
           "the corrected text or the question is missing", cites="CTX-5.6")
    equal(second["estimated_input_tokens"], 3 + 2 + len("first (as corrected by a hook)") + 2,
          "I of the request after the hook")


ROW_15 = Case(
    "ROW-15", "hooks change the model input in chain order", "§12 row 15",
    ("CTX-7.25", "CTX-3.61", "CTX-5.6", "CTX-3.78"), _row15_scenario(), _row15_check,
    frozenset({"hooks", "estimator_injection"}))


def _rows16_17_check(trace: Trace) -> None:
    # tool-batch-hook: the model proposes write(path a.md); a pre-call hook sets reports/a.md.
    # The handler runs with B, and the next request shows the decision with B.
    executed = {e["name"]: (e["proposed_arguments"], e["effective_arguments"])
                for e in of(trace, "tool_executed")}
    equal(executed.get("write"), ({"path": "a.md", "body": "report"},
                                  {"path": "reports/a.md", "body": "report"}),
          "write's proposed and effective arguments")
    decision = next(m for m in requests(trace, "business")[1]["view"]["messages"]
                    if m["tool_calls"])
    equal(json.loads(decision["tool_calls"][0]["arguments"])["path"], "reports/a.md",
          "the path the model sees", cites="CTX-3.69")


ROW_16_17 = Case(
    "ROW-16-17", "the changed argument is what runs and what the model sees",
    "§12 rows 16-17", ("CTX-3.57", "CTX-3.69", "CTX-3.15", "CTX-6.16", "CTX-1.5",
                       "CTX-3.68"),
    example("tool-batch-hook"),
    _rows16_17_check, frozenset({"hooks"}))


def _row18_scenario() -> dict[str, Any]:
    document = base(tools=[{"name": "rm"}, {"name": "ls"}])
    document["steps"] = [{"ask": "clean up"}, {"advance": True}]
    document["model"] = {"business": [
        {"text": "", "tool_calls": [{"name": "rm", "arguments": {"path": "/"}},
                                    {"name": "ls", "arguments": {"path": "."}}]},
        {"text": "done"}]}
    document["tools"] = {"ls": [{"text": "a b c"}]}
    document["hooks"] = [
        {"point": "tool.pre_call", "ordinal": 1, "items": [{"decision": "deny"}]},
        {"point": "tool.pre_call", "ordinal": 2, "items": [
            {"fails": True, "payload_patch": [{"path": "arguments.path", "value": "/etc"}]}]}]
    return document


def _row18_check(trace: Trace) -> None:
    # A pre-call deny blocks rm (a structured "denied" result); a failing hook on ls drops only
    # itself, so ls runs with its own argument.
    equal([(e["name"], e["effective_arguments"]) for e in of(trace, "tool_executed")],
          [("ls", {"path": "."})], "tools executed")
    results = [m for m in requests(trace, "business")[1]["view"]["messages"]
               if m["kind"] == "tool_result"]
    denied = result_facts(results[0], "rm's result")
    equal((denied.get("status"), denied.get("stage"), denied.get("executed")),
          ("denied", "pre", False), "rm's result", cites="CTX-6.11")
    equal(results[1]["text"], "a b c", "ls's result", cites="CTX-3.61")


ROW_18 = Case(
    "ROW-18", "a deny blocks; a failed hook drops only itself", "§12 row 18",
    ("CTX-3.70", "CTX-6.11", "CTX-3.59", "CTX-3.61"), _row18_scenario(), _row18_check,
    frozenset({"hooks"}))
