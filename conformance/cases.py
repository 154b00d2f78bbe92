"""The conformance cases: §12 rows and the worked examples of §3, §4, §7 and §8 as a declarative
scenario plus a predicate over the neutral trace (docs/architecture.md "Layers"), and
the crash matrix of ``crash_matrix.py``.

A case asserts only what the design makes observable — requests as sent, tools executed, run
endings and their codes, deliveries, client events, restarts — read from the trace as plain JSON,
so a runtime in any language can pass it. Expected values are derived by hand from the design;
each case says how in its ``check``. IDs are permanent: ``ROW-<n>[-<variant>]`` for a §12 row,
``EX<section>-<name>`` for a worked example, ``S<section>-<name>`` for another normative
statement of a section, ``BAD-<name>`` for bad input, ``CRASH-…`` for a crash point.
"""

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ctxspec.conformance.capabilities import refine
from ctxspec.conformance.case import (
    COMPACTING,
    Case,
    CaseFailure,
    Trace,
    base,
    delivery_chains,
    endings,
    equal,
    example,
    expect,
    lines,
    no_check,
    of,
    outcome,
    requests,
    result_facts,
    the,
)
from ctxspec.conformance.crash_matrix import CRASH_MATRIX
from ctxspec.conformance.hook_crashes import HOOK_CRASHES
from ctxspec.conformance.matrix import HOOK_MATRIX
from ctxspec.conformance.sessions import boundary, corrected_summary, write_path
from ctxspec.conformance.statements import STATEMENTS

# --- §12 row 2: five supplements in one round -------------------------------------------------


def _row2_scenario() -> dict[str, Any]:
    document = base()
    document["steps"] = [{"ask": "q1"}, *({"supplement": f"s{n}"} for n in range(1, 6)),
                         {"advance": True}, {"ask": "q2"}, {"advance": True}, {"ask": "q3"},
                         {"advance": True}, {"ask": "q4"}, {"advance": True}]
    document["model"] = {"business": [{"text": f"a{n}"} for n in range(1, 5)]}
    return document


def _row2_check(trace: Trace) -> None:
    # Five supplements are five UserInputs of one Run: four questions, four Runs. With the
    # default recent_runs = 2, Run 1 is trimmed to its inputs and result, and all five
    # supplements are still there, in receive order, after its question.
    equal([e["detail"] for e in of(trace, "client_event") if e["event"] == "run_started"],
          ["run 1", "run 2", "run 3", "run 4"], "Runs started")
    final = lines(requests(trace, "business")[-1])
    equal(final[1:9], [("user", "user_ref", t) for t in ("q1", "s1", "s2", "s3", "s4", "s5")]
          + [("assistant", "assistant", "a1"), outcome(1, "succeeded")],
          "Run 1 as the fourth request shows it")


# --- §12 row 4: the 80% boundary, both sides ----------------------------------------------------


def _below_check(trace: Trace) -> None:
    seen = [(r["purpose"], r["estimated_input_tokens"], r["compaction"])
            for r in requests(trace)]
    # Run 1: "sys" 3 + "a" × 1000; Run 2: 3 + 1000 + 1000 + 1596 = 3599 (sessions.boundary).
    equal(seen, [("business", 1003, "below_trigger"), ("business", 3599, "below_trigger")],
          "requests at I = threshold − 1")
    _within_window(trace)


def _at_check(trace: Trace) -> None:
    seen = [(r["purpose"], r["compaction"]) for r in requests(trace)]
    equal(seen, [("business", "below_trigger"), ("compaction", None), ("business", "compact")],
          "requests at I = threshold")
    # After the summary: "sys" + "SUMMARY" + the question (the summary's envelope is the
    # runtime's wording and counts 0).
    equal(requests(trace)[-1]["estimated_input_tokens"], 3 + 7 + 1597,
          "I of the request after compaction")
    _within_window(trace)


def _floor_check(trace: Trace) -> None:
    # W = 5001: B = 4501 and the trigger is floor(0.8 × 4501) = floor(3600.8) = 3600, not the
    # 3601 a rounded floating-point product gives; I = 2003 + 1597 = 3600 compacts.
    business = requests(trace, "business")
    equal([r["trigger_threshold"] for r in business], [3600, 3600], "the trigger")
    equal([(r["purpose"], r["compaction"]) for r in requests(trace)],
          [("business", "below_trigger"), ("compaction", None), ("business", "compact")],
          "requests at I = floor(r × B)")


def _within_window(trace: Trace) -> None:
    for request in requests(trace):
        expect(request["estimated_input_tokens"] + request["max_output_tokens"]
               + request["safety_margin"] <= request["window"],
               f"request {request['purpose_key']} exceeds the hard window")


# --- §12 row 5: a new question that triggers compaction -------------------------------------


def _row5_check(trace: Trace) -> None:
    business = requests(trace, "business")[-1]
    expect(business["snapshot_id"] is not None, "the request after compaction names no snapshot")
    equal(lines(business), [("system", "system_prompt", "sys"),
                            ("system", "summary", "SUMMARY"),
                            ("user", "user_ref", "Q" * 1597)], "the request after compaction")
    material = "\n".join(m["text"] for m in requests(trace, "compaction")[0]["view"]["messages"])
    expect("a" * 1000 in material and "b" * 1000 in material,
           "the summary request lacks Run 1's material")
    expect("Q" * 1597 not in material, "the new question was sent to be summarised")


# --- §12 rows 9, 21-23: crashes --------------------------------------------------------------


def _crash(name: str, phase: str, occurrence: int, when: str) -> dict[str, Any]:
    return {**example(name), "crash": {"phase": phase, "occurrence": occurrence,
                                       "when": when}}


def _row9_check(trace: Trace) -> None:
    # The example's episode summarises three chunks; dying after the second leaves one to do.
    chunks = requests(trace, "compaction")
    equal(len(chunks), 3, "compaction requests")
    equal(len({r["purpose_key"] for r in chunks}), 3, "distinct chunk purpose keys")
    restart = next(i for i, e in enumerate(trace) if e["kind"] == "restarted")
    expect(trace.index(chunks[1]) < restart < trace.index(chunks[2]),
           "the third chunk is not the only one asked after the restart")
    equal(len({e["episode_id"] for e in of(trace, "compaction")}), 1, "episodes")
    equal(endings(trace), [(1, "succeeded", None), (2, "failed", "CONTEXT_WINDOW_EXCEEDED")],
          "Run endings")


def _saved_step_check(trace: Trace) -> None:
    # tool-batch-hook: one decision with two calls, a pre-call hook moving write's path to
    # reports/a.md, then the final answer — two business requests, each tool once, and the
    # moved path is the one that ran.
    business = {r["purpose_key"] for r in requests(trace, "business")}
    equal(len(business), 2, "business Operations")
    # Every answer was saved before the crash: no request is sent a second time.
    asked = [(r["purpose_key"], r["attempt"]) for r in requests(trace)]
    equal(len(asked), len(set(asked)), "requests sent (each once)")
    equal(sorted(e["name"] for e in of(trace, "tool_executed")), ["read", "write"],
          "tools executed")
    equal([e["effective_arguments"].get("path") for e in of(trace, "tool_executed")
           if e["name"] == "write"], ["reports/a.md"], "write's effective path")
    final = lines(requests(trace, "business")[-1])
    equal([kind for _, kind, _ in final],
          ["system_prompt", "user_ref", "assistant", "tool_result", "tool_result"],
          "the second request: the question, the decision and its two results, once")
    equal(endings(trace), [(1, "succeeded", None)], "Run endings")


# --- §12 row 6: a supplement during compaction ------------------------------------------------


def _row6_scenario() -> dict[str, Any]:
    document = boundary(1597)
    document["agent"]["tools"] = [{"name": "look"}]
    document["model"]["business"] = [{"text": "b" * 1000},
                                     {"text": "", "tool_calls": [{"name": "look"}]},
                                     {"text": "done"}]
    document["tools"] = {"look": [{"text": "seen"}]}
    document["triggers"] = [{"on": {"purpose": "compaction", "ordinal": 1},
                             "do": {"supplement": "late words"}}]
    return document


def _row6_check(trace: Trace) -> None:
    # The supplement arrives while the first chunk is summarised: after the input cutoff of the
    # request being prepared, so not in it, and verbatim in the next request, one input later.
    business = requests(trace, "business")
    after_summary, next_loop = business[1], business[2]
    expect("late words" not in [m["text"] for m in after_summary["view"]["messages"]],
           "the supplement joined the request it arrived after")
    equal([m["text"] for m in next_loop["view"]["messages"] if m["kind"] == "user_ref"],
          ["Q" * 1597, "late words"], "user inputs of the next request")
    equal(next_loop["input_cutoff"], after_summary["input_cutoff"] + 1, "input cutoff")


# --- §12 row 7: tool protocol, a Run stopped mid-batch ----------------------------------------


def _row7_scenario() -> dict[str, Any]:
    document = base(tools=[{"name": "a"}, {"name": "b"}])
    document["steps"] = [{"ask": "do a and b"}, {"advance": True}, {"ask": "what happened?"},
                         {"advance": True}]
    document["model"] = {"business": [
        {"text": "", "tool_calls": [{"name": "a"}, {"name": "b"}]},
        {"text": "a ran, b did not"}]}
    document["tools"] = {"a": [{"text": "a done"}]}
    document["triggers"] = [{"on": {"tool": "a", "ordinal": 1}, "do": {"stop": True}}]
    return document


def _row7_check(trace: Trace) -> None:
    # A stop while a runs: a finishes, b never starts; the next question's history keeps the
    # pair protocol — a's result, then a placeholder for b that does not claim it ran.
    equal(endings(trace), [(1, "stopped", None), (2, "succeeded", None)], "Run endings")
    equal([e["name"] for e in of(trace, "tool_executed")], ["a"], "tools executed")
    messages = requests(trace, "business")[-1]["view"]["messages"]
    group = [m for m in messages if m["tool_calls"] or m["kind"] in ("tool_result",
                                                                    "placeholder")]
    calls = [(c["call_id"], c["name"]) for c in group[0]["tool_calls"]]
    equal([c[1] for c in calls], ["a", "b"], "the calls of the stopped batch")
    equal([(m["kind"], m["call_id"]) for m in group[1:]],
          [("tool_result", calls[0][0]), ("placeholder", calls[1][0])],
          "results after the call (b's a placeholder: not a tool output, §6)")


# --- §12 row 8: a huge tool result ------------------------------------------------------------

_BODY = "".join(f"row {n:05d}\n" for n in range(2000))  # 20000 characters


def _row8_scenario() -> dict[str, Any]:
    document = base(window=40_000, output_reserve=2000, safety_margin=500,
                    tools=[{"name": "dump"}, {"name": "result.read"}])
    document["steps"] = [{"ask": "dump the table"}, {"advance": True}]
    document["model"] = {"business": [
        {"text": "", "tool_calls": [{"name": "dump"}]},
        {"text": "", "tool_calls": [{"name": "result.read", "arguments": {
            "result_ref": _digest_of(_BODY), "from": 4000, "to": 4020}}]},
        {"text": "row 00400 is there"}]}
    document["tools"] = {"dump": [{"text": _BODY}],
                         "result.read": [{"text": _BODY[4000:4020]}]}
    return document


def _digest_of(text: str) -> str:
    """A result_ref's digest as the model names it: sha256 of the body's UTF-8 bytes."""
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def _row8_check(trace: Trace) -> None:
    # The 20000-character result reaches the model as its first 4000 characters, marked with
    # the range and the full size; the read of 20 more characters is a new record of its own.
    results = [m for m in requests(trace, "business")[-1]["view"]["messages"]
               if m["kind"] == "tool_result"]
    equal(results[0]["text"], _BODY[:4000], "the preview")
    cut = results[0]["truncation"]
    expect(cut is not None, "the preview is not marked truncated")
    equal((cut["from_char"], cut["through_char"], cut["total_chars"]), (0, 4000, 20_000),
          "the preview's range")
    equal(cut["result_ref"]["size_bytes"], 20_000, "the full result's size")
    equal((results[1]["text"], results[1]["truncation"]), ("row 00400\nrow 00401\n", None),
          "the read")


# --- §12 row 11: still over the window after the summary --------------------------------------


def _row11_check(trace: Trace) -> None:
    # The example: three chunks summarised, the last summary still too long; Run 2 fails with
    # CONTEXT_WINDOW_EXCEEDED, no second compaction and nothing over the window is sent.
    equal([r["purpose"] for r in requests(trace)], ["business"] * 4 + ["compaction"] * 3,
          "requests")
    equal(endings(trace)[-1], (2, "failed", "CONTEXT_WINDOW_EXCEEDED"), "Run 2's ending")
    message = of(trace, "run_ended")[-1]["message"]
    expect(message is not None and "window is 4000" in message,
           "the message does not give the window")
    expect("You are" not in message, "the message shows the system prompt")
    _within_window(trace)


# --- §12 row 1: recent_runs = 2 with succeeded, failed, stopped -------------------------------


def _row1_check(trace: Trace) -> None:
    # supplements-across-runs: Run 1 succeeds, Run 2 fails, Run 3 is stopped, Run 4 asks for a
    # summary. Run 1 is older than the recent two, so it shows its inputs, final result and
    # status; Runs 2 and 3 show their process and status and no made-up answer; the supplement
    # Run 2 claimed and Run 3 carried is shown once, in the current request, marked elsewhere.
    equal(endings(trace), [(1, "succeeded", None), (2, "failed", "MODEL_FAILED"),
                           (3, "stopped", None), (4, "succeeded", None)], "Run endings")
    carried = the((e["input_id"] for e in of(trace, "delivery") if e["state"] == "carried"),
                  "no delivery event with state carried (the supplement Run 2 claimed, after "
                  "Run 2 failed)")
    marker = f"input {carried}"  # a marker standing for the input shown elsewhere (§5)
    equal(lines(requests(trace, "business")[-1]), [
        ("system", "system_prompt", "You are a deployment assistant."),
        ("user", "user_ref", "写部署方案"), ("user", "user_ref", "只用 Docker"),
        ("user", "user_ref", "不开放公网端口"),
        ("assistant", "assistant", "方案见下：一个 compose 文件，只暴露内网端口。"),
        outcome(1, "succeeded"),
        ("user", "user_ref", "检查镜像大小"), ("system", "marker", marker),
        outcome(2, "failed", final=False),
        ("system", "marker", marker), ("user", "user_ref", "再试一次"),
        outcome(3, "stopped", final=False),
        ("user", "user_ref", "包括构建缓存"), ("user", "user_ref", "总结一下")],
        "the fourth Run's request")


# --- §12 row 10: a crash before the summary commit --------------------------------------------


def _row10_check(trace: Trace) -> None:
    # Dying just before the snapshot is committed loses no history: the three committed chunks
    # are not asked again and the Session ends as without the crash.
    equal(len(requests(trace, "compaction")), 3, "compaction requests")
    equal(len(of(trace, "restarted")), 1, "restarts")
    equal(endings(trace), [(1, "succeeded", None), (2, "failed", "CONTEXT_WINDOW_EXCEEDED")],
          "Run endings")


# --- §12 rows 13 and 14: failures around the first output ---------------------------------------


def _row13_scenario() -> dict[str, Any]:
    document = base(window=4000, model_attempts=2)
    document["steps"] = [{"ask": "q1"}, {"supplement": "use metric units"}, {"advance": True},
                         {"ask": "q2"}, {"advance": True}]
    document["model"] = {"business": [{"fail": "reset"}, {"fail": "reset"}, {"text": "done"}]}
    return document


def _row13_check(trace: Trace) -> None:
    # Claimed by Run 1's request, which fails before any output: the claim is carried and the
    # same UserInput waits again, is bound to Run 2's question, claimed, and delivered once.
    equal(endings(trace), [(1, "failed", "MODEL_FAILED"), (2, "succeeded", None)],
          "Run endings")
    # Per delivery (the order of events inside one commit is not the design's concern): the
    # first goes pending → claimed → carried, the second points back to it and goes
    # pending → claimed → delivered.
    chains = delivery_chains(trace, of(trace, "delivery")[1]["input_id"])
    equal([states for _, states, _ in chains], [["pending", "claimed", "carried"],
                                                ["pending", "claimed", "delivered"]],
          "the supplement's deliveries")
    equal(chains[1][2], chains[0][0], "the second delivery's previous_delivery_id")
    sent = [m["text"] for m in requests(trace, "business")[-1]["view"]["messages"]]
    equal(sum("use metric units" in text for text in sent), 1, "copies of the supplement sent")


def _row14_scenario() -> dict[str, Any]:
    document = base(window=4000, model_attempts=1, tools=[{"name": "deploy"}])
    document["steps"] = [{"ask": "deploy it"}, {"advance": True}, {"ask": "status?"},
                         {"advance": True}]
    document["model"] = {"business": [{"partial": '{"name": "deploy", "argum', "fail": "reset"},
                                      {"text": "nothing was deployed"}]}
    document["tools"] = {"deploy": []}
    return document


def _row14_check(trace: Trace) -> None:
    # A first output then a broken stream: the delivery evidence is recorded, no client event
    # carries model text, no tool runs from a fragment of arguments, and the next question sees
    # the fragment marked as incomplete, never as a complete message.
    equal(endings(trace), [(1, "failed", "MODEL_FAILED"), (2, "succeeded", None)],
          "Run endings")
    equal(of(trace, "tool_executed"), [], "tools executed")
    expect(any(e["state"] == "delivered" for e in of(trace, "delivery")),
           "no delivery evidence for the first output")
    expect(all("argum" not in e["detail"] for e in of(trace, "client_event")),
           "a client event carries model text")
    history = lines(requests(trace, "business")[-1])
    expect(("system", "fragment",
            '{"name": "deploy", "argum') in history,
           "the fragment is not shown marked incomplete")
    expect(not any(kind == "assistant" and "argum" in text for _, kind, text in history),
           "the fragment is shown as a complete assistant message")


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
           ("allow", False, ["PROTECTED_INPUT"])], "hook decisions")
    second = requests(trace, "business")[1]
    texts = [m["text"] for m in second["view"]["messages"]]
    expect("first (as corrected by a hook)" in texts and "go" in texts,
           "the corrected text or the question is missing")
    equal(second["estimated_input_tokens"], 3 + 2 + len("first (as corrected by a hook)") + 2,
          "I of the request after the hook")


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
          "the path the model sees")


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
          ("denied", "pre", False), "rm's result")
    equal(results[1]["text"], "a b c", "ls's result")


# --- §12 row 20: an old summary over a modified record ----------------------------------------


def _row20_check(trace: Trace) -> None:
    # Loop 3 crosses the trigger (I = 4205 ≥ 3600, sessions.corrected_summary) and compacts in
    # two chunks. Before loop 4 a hook corrects the first decision, which the summary covers:
    # the snapshot no longer applies and the covered records come back as they are now —
    # I = 3 + 2 + 12 ("A, corrected") + 1500 + 700 + 500 + 1 ("C") + 1 ("x") = 2719.
    equal([r["purpose"] for r in requests(trace)],
          ["business", "business", "compaction", "compaction", "business", "business"],
          "requests")
    third, fourth = requests(trace)[4], requests(trace)[5]
    expect(third["snapshot_id"] is not None, "loop 3 uses no snapshot")
    expect(("system", "summary", "SUM2") in lines(third), "loop 3 lacks the summary")
    equal((fourth["snapshot_id"], fourth["compaction"], fourth["estimated_input_tokens"]),
          (None, "below_trigger", 2719), "loop 4")
    texts = [m["text"] for m in fourth["view"]["messages"]]
    expect("A, corrected" in texts and "r" * 1500 in texts and "B" * 700 in texts,
           "loop 4 lacks the covered records as they are now")
    expect(not any(kind == "summary" or "SUM" in text for _, kind, text in lines(fourth)),
           "loop 4 still shows the old summary")


# --- §12 rows 3 and 19: roles and scopes ------------------------------------------------------


def _texts(request: Mapping[str, Any]) -> list[str]:
    return [m["text"] for m in request["view"]["messages"]]


def _by_role(trace: Trace, role: str) -> list[dict[str, Any]]:
    return [r for r in requests(trace, "business") if r["role"] == role]


def _row3_check(trace: Trace) -> None:
    # planner-two-executors: each Executor's request holds its prompt and exactly its hand-over
    # (task, constraint, material ref) — none of the Planner's words, prompt or the supplement
    # the user sent meanwhile; the executions share no record; the Planner gets one feedback
    # with both answers in action order; later history never shows an Executor's own log.
    executor = _by_role(trace, "executor")
    equal(len(executor), 4, "Executor requests (two executions of two loops)")
    equal(_texts(executor[0]), ["You carry out one task the Planner handed over.",
                                "task: list TODO lines", "constraint: only src/",
                                "material_ref: repo://main"], "the first Executor request")
    planner_words = ("Find every TODO", "You are a Planner", "Two searches",
                     "also look in tests/")
    for request in executor:
        expect(not any(w in t for w in planner_words for t in _texts(request)),
               "an Executor saw the Planner's context")
    records = [{m["record_id"] for m in r["view"]["messages"] if m["record_id"]}
               for r in (executor[0], executor[2])]
    equal(records[0] & records[1], set(), "records shared by the two executions")
    planner = _by_role(trace, "root")
    feedback = [m["text"] for m in planner[1]["view"]["messages"] if m["kind"] == "tool_result"]
    equal(feedback, ["TODO: src/a.py:3, src/b.py:9, src/c.py:1", "FIXME: src/db.py:42"],
          "the Planner's feedback")
    history = _texts(planner[-1])
    expect("FIXME: src/db.py:42" in history, "the next question lost a delegation's answer")
    expect(not any("src/db.py:42 FIXME" in t for t in history),
           "the next question shows an Executor's own tool result")


def _row19_scenario() -> dict[str, Any]:
    return {
        "scenario_version": 1, "name": "scopes",
        "agent": {"system_prompt": "plan", "window": 16384, "estimator": "chars",
                  "executor": {"system_prompt": "execute"},
                  "shared": [{"name": "budget", "text": "budget: 5", "consumers": ["root"]}]},
        "steps": [{"ask": "go"}, {"advance": True}],
        "model": {"business": [{"text": "plan v1", "tool_calls": [
                                   {"name": "delegate", "arguments": {"task": "t"}}]},
                               {"text": "done"}],
                  "executor": [{"text": "executed"}]},
        "hooks": [
            {"point": "model.pre_request", "ordinal": 2, "items": [{"context_patch": [
                {"target": "shared:budget", "field": "text", "value": "budget: 99",
                 "scope": "shared"}]}]},
            {"point": "model.pre_request", "ordinal": 3, "items": [
                {"context_patch": [{"target": "shared:budget", "field": "text",
                                    "value": "budget: 3", "scope": "shared"}]},
                {"context_patch": [{"target": "first_assistant", "field": "text",
                                    "value": "plan v1 (private note)"}]}]}]}


def _row19_check(trace: Trace) -> None:
    # The Executor (2nd pre-request hook) is no consumer of the shared budget: its patch is
    # UNAUTHORISED_SCOPE. The Planner's next request reads the updated field and its private
    # note; its first request, already sent, keeps budget 5; the Executor sees neither.
    equal([(d["decision"], d["patch_valid"], d["diagnostics"])
           for d in of(trace, "hook_decided")],
          [("allow", False, ["UNAUTHORISED_SCOPE"]), ("allow", True, []), ("allow", True, [])],
          "hook decisions")
    planner = _by_role(trace, "root")
    def shared(request: Mapping[str, Any]) -> list[str]:
        return [text for _, kind, text in lines(request) if kind == "shared"]
    equal(shared(planner[0]), ["budget: 5"], "the shared field in the first request (as sent)")
    equal(shared(planner[1]), ["budget: 3"], "the shared field the Planner reads next")
    expect("plan v1 (private note)" in _texts(planner[1]), "the private note is missing")
    for request in _by_role(trace, "executor"):
        expect(not any("budget" in t or "plan v1" in t for t in _texts(request)),
               "the Executor saw the shared field or the Planner's context")


# --- §12 row 12: a partial stream, then a retry -------------------------------------------------


def _row12_scenario() -> dict[str, Any]:
    document = base()
    document["steps"] = [{"ask": "write it"}, {"advance": True}, {"ask": "again"},
                         {"advance": True}]
    document["model"] = {"business": [{"partial": "I will wri", "fail": "reset"},
                                      {"fail": "reset"}, {"text": "ok"}]}
    return document


def _row12_check(trace: Trace) -> None:
    # Attempt 1 streams a fragment then breaks; attempt 2 fails before any output. No attempt
    # is spliced onto another, the first output is delivered once, the client sees lifecycle
    # events only, and the next question's history shows the fragment marked.
    equal(endings(trace), [(1, "failed", "MODEL_FAILED"), (2, "succeeded", None)],
          "Run endings")
    equal([r["attempt"] for r in requests(trace, "business")], [1, 2, 1], "attempts")
    equal([e["state"] for e in of(trace, "delivery")][:3], ["pending", "claimed", "delivered"],
          "the question's deliveries")
    expect({e["event"] for e in of(trace, "client_event")}
           <= {"run_started", "input_received", "progress", "run_ended"},
           "an unknown client event")
    expect(not any("wri" in e["detail"] for e in of(trace, "client_event")),
           "a client event carries the fragment")
    history = lines(requests(trace, "business")[-1])
    expect(("system", "fragment", "I will wri")
           in history, "the fragment is not shown marked")
    expect(outcome(1, "failed", final=False) in history,
           "Run 1's ending is not shown")


# --- §12 rows 24 and 25: retention and the history API ----------------------------------------


def _row24_scenario() -> dict[str, Any]:
    document = example("tool-batch-hook")
    document["tools"]["write"][0]["workspace_writes"] = {"reports/a.md": "report"}
    document["steps"] = [*document["steps"], {"observe_retention": True},
                         {"read_history": {"kind": "role", "role": "root"}},
                         {"delete_agent": True}, {"observe_retention": True}]
    return document


def _row24_check(trace: Trace) -> None:
    # The write tool left reports/a.md; without a persistent sandbox it is gone when the Run
    # ends, while the five records (question, decision, two results, answer) and their blobs
    # stay. Deleting the Agent leaves no record and no blob.
    before, after = of(trace, "retained")
    equal(before["workspace_files"], [], "working files after the Run")
    equal(before["records"], 5, "records kept after the Run")
    expect(before["blobs"] > 0, "no blob kept after the Run")
    [read] = of(trace, "history_read")
    equal(read["message_kinds"], ["user_ref", "assistant", "tool_result", "tool_result",
                                  "assistant"], "history after the Run")
    equal((after["records"], after["blobs"]), (0, 0), "records and blobs after deletion")


def _row25_scenario() -> dict[str, Any]:
    document = example("tool-batch-hook")
    callers = [{"kind": "role", "role": "root"}, {"kind": "role", "role": "executor"},
               {"kind": "script"}, {"kind": "script", "role": "root"},
               {"kind": "role", "role": "root", "session": "other"}]
    document["steps"] = [*document["steps"], *({"read_history": c} for c in callers)]
    return document


def _row25_check(trace: Trace) -> None:
    # The root role reads its own Session's records; an unauthorised role, a workspace script
    # (even naming the root role) and a caller of another Session are refused, all with the
    # same words, which name nothing of the Session.
    reads = of(trace, "history_read")
    equal([(r["caller"], r["session"], r["allowed"]) for r in reads],
          [("role:root", "own", True), ("role:executor", "own", False), ("script", "own", False),
           ("script:root", "own", False), ("role:root", "other", False)], "history reads")
    refusals = {r["refusal"] for r in reads if not r["allowed"]}
    equal(len(refusals), 1, "distinct refusal messages")
    refusal = refusals.pop()
    expect(not any(word in refusal for word in ("report", "notes", "sha256", "-")),
           f"the refusal names something of the Session: {refusal!r}")
    equal(reads[0]["message_kinds"], ["user_ref", "assistant", "tool_result", "tool_result",
                                      "assistant"], "what the root role reads")


# --- §3 worked example: write(path), and its conflicting variants ------------------------------

_MOVE = {"path": "arguments.path", "value": "reports/a.md"}
_ELSEWHERE = {"target": "call", "field": "tool_call:{call_id}.arguments.path",
              "value": "other/a.md"}


def _path_seen_by_model(trace: Trace) -> str:
    decision = next(m for m in requests(trace, "business")[1]["view"]["messages"]
                    if m["tool_calls"])
    path: str = json.loads(decision["tool_calls"][0]["arguments"])["path"]
    return path


def _write_check(trace: Trace) -> None:
    # The hook moves only the payload path: the handler and the effective call record both use
    # reports/a.md, while the proposal (the raw model response) keeps a.md.
    equal([(e["proposed_arguments"], e["effective_arguments"])
           for e in of(trace, "tool_executed")],
          [({"path": "a.md"}, {"path": "reports/a.md"})], "write's arguments")
    equal(_path_seen_by_model(trace), "reports/a.md", "the path in the effective call record")


def _write_conflict_check(trace: Trace) -> None:
    # The same item also sets the call's path in the context to other/a.md: every patch of the
    # item is invalid (HOOK_PATCH_CONFLICT); the allow goes on fail-open with the effective path
    # from before the item, a.md — never one path executed and another recorded.
    equal([(d["decision"], d["patch_valid"], d["diagnostics"]) for d in of(trace, "hook_decided")],
          [("allow", False, ["HOOK_PATCH_CONFLICT"])], "the hook's decision")
    equal([e["effective_arguments"] for e in of(trace, "tool_executed")], [{"path": "a.md"}],
          "write's effective arguments")
    equal(_path_seen_by_model(trace), "a.md", "the path in the effective call record")
    equal(endings(trace), [(1, "succeeded", None)], "Run endings")


def _deny_conflict_check(trace: Trace) -> None:
    # A legitimate deny with an invalid patch still blocks: nothing runs, the refusal and the
    # patch diagnostics are kept — a conflicting patch never turns a deny into an allow.
    equal([(d["decision"], d["patch_valid"], d["diagnostics"]) for d in of(trace, "hook_decided")],
          [("deny", False, ["HOOK_PATCH_CONFLICT"])], "the hook's decision")
    equal(of(trace, "tool_executed"), [], "tools executed")
    result = next(m for m in requests(trace, "business")[1]["view"]["messages"]
                  if m["kind"] == "tool_result")
    equal(result_facts(result, "write's result").get("status"), "denied", "write's result")


def _unregistered_check(trace: Trace) -> None:
    # A patch of a field the hook point does not register (the tool's name) is refused with the
    # item's diagnostic; the allow goes on with the call as it was.
    equal([(d["decision"], d["patch_valid"], d["diagnostics"]) for d in of(trace, "hook_decided")],
          [("allow", False, ["FIELD_NOT_REGISTERED"])], "the hook's decision")
    equal([(e["name"], e["effective_arguments"]) for e in of(trace, "tool_executed")],
          [("write", {"path": "a.md"})], "tools executed")


# --- bad input: stale revisions and invalid patches ------------------------------------------

_CALL_ARGUMENTS = {"target": "call", "field": "tool_call:{call_id}.arguments"}


def _stale(decision: str) -> dict[str, Any]:
    """Two items on write's pre-call chain: the first moves the call to b.md; the second claims
    the revision the chain started from and moves it to c.md — the field it writes has changed
    since that revision."""
    return write_path(
        {"decision": "allow", "context_patch": [{**_CALL_ARGUMENTS, "value": {"path": "b.md"}}]},
        {"decision": decision, "stale_base": True,
         "context_patch": [{**_CALL_ARGUMENTS, "value": {"path": "c.md"}}]})


def _stale_allow_check(trace: Trace) -> None:
    # §3: the target field changed after base_revision → CONTEXT_REVISION_CONFLICT, no winner
    # chosen anew; the item's patch is invalid and the previous value b.md stays; the allow goes
    # on, and the first item's committed change is not rolled back.
    equal([(d["decision"], d["patch_valid"], d["diagnostics"]) for d in of(trace, "hook_decided")],
          [("allow", True, []), ("allow", False, ["CONTEXT_REVISION_CONFLICT"])],
          "the chain's decisions")
    equal([e["effective_arguments"] for e in of(trace, "tool_executed")], [{"path": "b.md"}],
          "write's effective arguments")
    equal(_path_seen_by_model(trace), "b.md", "the path in the effective call record")


def _stale_deny_check(trace: Trace) -> None:
    # A legitimate deny with a stale patch still blocks: nothing runs, and the recorded
    # candidate is the call as it stood (b.md), never the invalid c.md.
    equal([(d["decision"], d["patch_valid"], d["diagnostics"]) for d in of(trace, "hook_decided")],
          [("allow", True, []), ("deny", False, ["CONTEXT_REVISION_CONFLICT"])],
          "the chain's decisions")
    equal(of(trace, "tool_executed"), [], "tools executed")
    messages = requests(trace, "business")[1]["view"]["messages"]
    result = next(m for m in messages if m["kind"] == "tool_result")
    facts = result_facts(result, "write's result")
    call = next(c for m in messages for c in m["tool_calls"] if c["call_id"] == result["call_id"])
    equal((facts.get("status"), facts.get("executed"), json.loads(call["arguments"])),
          ("denied", False, {"path": "b.md"}), "write's result and the call it answers")


def _invalid_patch_check(code: str) -> Callable[[Trace], None]:
    def check(trace: Trace) -> None:
        # An allow whose patch fails validation goes on fail-open with the call as it was.
        equal([(d["decision"], d["patch_valid"], d["diagnostics"])
               for d in of(trace, "hook_decided")], [("allow", False, [code])],
              "the hook's decision")
        equal([e["effective_arguments"] for e in of(trace, "tool_executed")], [{"path": "a.md"}],
              "write's effective arguments")
        equal(endings(trace), [(1, "succeeded", None)], "Run endings")
    return check


OUR_DOCUMENTS = "our documents"
"""The source of a case about a ctxspec document (a scenario), which the design does not
describe: it names no requirement."""


# --- bad input: malformed scenarios --------------------------------------------------------------


def _malformed(**change: Any) -> dict[str, Any]:
    document = base()
    document["steps"] = [{"ask": "hello"}, {"advance": True}]
    document["model"] = {"business": [{"text": "never asked"}]}
    document.update(change)
    return document


# --- §7 worked example: W = 128K, O = 8K, S = 1280 ------------------------------------------------


def _ex7_scenario() -> dict[str, Any]:
    document = base(window=128 * 1024, output_reserve=8 * 1024, safety_margin=1280)
    document["steps"] = [{"ask": "hello"}, {"advance": True}]
    document["model"] = {"business": [{"text": "hi"}]}
    return document


def _ex7_check(trace: Trace) -> None:
    # B = W − O − S = 131072 − 8192 − 1280 = 121600; the trigger is floor(0.8 × B) = 97280
    # (the design's "about 95K", 1K = 1024); the request reserves O for the output.
    [request] = requests(trace)
    equal((request["window"], request["output_reserve"], request["safety_margin"],
           request["input_budget"], request["trigger_threshold"], request["max_output_tokens"]),
          (131072, 8192, 1280, 121600, 97280, 8192), "the request's budget")


# --- §4 worked example: an older Run keeps its question, supplements, result and status ------


def _ex4_scenario() -> dict[str, Any]:
    document = base(tools=[{"name": "search"}])
    document["steps"] = [{"ask": "写部署方案"}, {"supplement": "只用 Docker"},
                         {"supplement": "不开放公网端口"}, {"advance": True},
                         {"ask": "q2"}, {"advance": True}, {"ask": "q3"}, {"advance": True},
                         {"ask": "q4"}, {"advance": True}]
    document["model"] = {"business": [{"text": "", "tool_calls": [{"name": "search"}]},
                                      {"text": "方案见……"}, {"text": "a2"}, {"text": "a3"},
                                      {"text": "a4"}]}
    document["tools"] = {"search": [{"text": "docker docs"}]}
    return document


def _ex4_check(trace: Trace) -> None:
    # Four questions, recent_runs = 2: Run 1 is older than Runs 2 and 3, so the fourth request
    # shows its question, both supplements, its final result and its end state — the four kinds
    # of §4's text — and none of its tool process; Runs 2 and 3 show their process and status.
    equal(lines(requests(trace, "business")[-1]), [
        ("system", "system_prompt", "sys"),
        ("user", "user_ref", "写部署方案"), ("user", "user_ref", "只用 Docker"),
        ("user", "user_ref", "不开放公网端口"), ("assistant", "assistant", "方案见……"),
        outcome(1, "succeeded"),
        ("user", "user_ref", "q2"), ("assistant", "assistant", "a2"),
        outcome(2, "succeeded"),
        ("user", "user_ref", "q3"), ("assistant", "assistant", "a3"),
        outcome(3, "succeeded"),
        ("user", "user_ref", "q4")], "the fourth Run's request")
    equal([e["name"] for e in of(trace, "tool_executed")], ["search"], "tools executed")


# --- §8 worked table: B = 100000, O = 8192 -------------------------------------------------------
#
# The table gives B and O only; W = 110000 and S = 1808 make B = 110000 − 8192 − 1808 = 100000
# (Q5), and no provider output limit is known. With the content estimator (one token per
# character of the scenario's text, the runtime's markers and envelopes 0), F counts "sys" (3),
# the current question and supplements; M = I − F is Run 1's question and answer. Run 1 stays
# below the trigger floor(0.8 × 100000) = 80000 on its own.


def _table(fixed: int, material: int, summary: int = 0, supplement: int = 0) -> dict[str, Any]:
    document = base(window=110_000, output_reserve=8192, safety_margin=1808)
    current = [{"ask": "Q" * (fixed - 3 - supplement)}]
    if supplement:
        current.append({"supplement": "S" * supplement})
    if material:
        asked = material // 2
        document["steps"] = [{"ask": "m" * asked}, {"advance": True}, *current,
                             {"advance": True}]
        document["model"] = {"business": [{"text": "n" * (material - asked)},
                                          {"text": "done"}],
                             "compaction": [{"text": "s" * summary}]}
    else:  # no material: the question alone is the whole request (F = I)
        document["steps"] = [{"ask": "Q" * (fixed - 3)}, {"advance": True}]
        document["model"] = {"business": [{"text": "done"}]}
    return document


def _sent(trace: Trace) -> list[tuple[str, int | None, int, str | None]]:
    """Purpose, I, max_output_tokens and §8 decision of each request. A compaction request's
    own I is left out (None): it depends on the prompt a runtime writes for its summariser."""
    return [(r["purpose"], r["estimated_input_tokens"] if r["purpose"] == "business" else None,
             r["max_output_tokens"], r["compaction"]) for r in requests(trace)]


def _table_row1(trace: Trace) -> None:
    # F=65000, M=20000, I=85000 ≥ 80000: H = 35000, P = min(8192, 35000) = 8192,
    # C = min(8192, 25000, 8192) = 8192, D = 60000 − 65000 = −5000 ≤ 0 → T = C = 8192.
    # A summary of 8192 gives 65000 + 8192 = 73192 ≤ B: the business request goes.
    equal(_sent(trace)[1:], [("compaction", None, 8192, None),
                             ("business", 73_192, 8192, "compact")], "Run 2's requests")
    equal(endings(trace), [(1, "succeeded", None), (2, "succeeded", None)], "Run endings")


def _table_row2(trace: Trace) -> None:
    # F=79000, M=6000: H = 21000, T = 8192; 79000 + 8192 = 87192 is still ≥ 80000 but ≤ B, so the
    # business request goes and no second episode is started for it.
    equal(_sent(trace)[1:], [("compaction", None, 8192, None),
                             ("business", 87_192, 8192, "compact")], "Run 2's requests")
    equal(endings(trace)[-1], (2, "succeeded", None), "Run 2's ending")


def _table_row3(trace: Trace) -> None:
    # F=96000, M=6000, I=102000 > B: H = 4000, P = min(8192, 4000) = 4000, C = 4000, D < 0 →
    # T = 4000. An over-window source still compacts; 96000 + 4000 = 100000 = B fits
    # (I + O + S = 110000 = W).
    equal(_sent(trace)[1:], [("compaction", None, 4000, None),
                             ("business", 100_000, 8192, "compact")], "Run 2's requests")
    equal(endings(trace)[-1], (2, "succeeded", None), "Run 2's ending")


def _table_row4(trace: Trace) -> None:
    # F=100000 with material: H = 0, no room for any summary → CONTEXT_PROTECTED_INPUT_TOO_LARGE;
    # nothing is summarised and no request leaves without the question.
    equal([r["purpose"] for r in requests(trace)], ["business"], "requests (Run 1's only)")
    equal(endings(trace)[-1], (2, "failed", "CONTEXT_PROTECTED_INPUT_TOO_LARGE"), "Run 2's ending")
    message = of(trace, "run_ended")[-1]["message"]
    expect(message is not None and "106000" in message and "100000" in message,
           f"the message does not give the request's size and the budget: {message!r}")


def _table_row5(trace: Trace) -> None:
    # No material, I = 85000 ≥ 80000 but ≤ B: the evaluation records no_compressible_material
    # and the request goes; the 60% soft target fails nothing.
    equal(_sent(trace), [("business", 85_000, 8192, "no_compressible_material")], "requests")
    equal(endings(trace), [(1, "succeeded", None)], "Run endings")


def _table_row6_scenario() -> dict[str, Any]:
    """Row 6 with a provider that cuts at max_output_tokens (Q68): it counts the summary as
    T = 8191 tokens and reports so; the runtime's estimator counts its 8192 characters."""
    document = _table(91_809, 6000, summary=8192, supplement=31_776)
    document["model"]["limit_output"] = True
    document["model"]["compaction"][0]["usage"] = {"output_tokens": 8191}
    return document


def _table_row6(trace: Trace) -> None:
    # F = 91809 with a supplement of Run 2 (within its input cutoff, Q52): H = 8191 → T = 8191.
    # The provider counts its summary as T tokens (it is not cut, Q68), the estimator as one
    # more — estimates are not the provider's count (§7); re-assembled
    # with the question and the supplement, I = 91809 + 8192 = 100001 > B: the Run ends,
    # no business request is sent, no second compaction, and the supplement is kept — carried
    # to the next question, not dropped.
    equal(_sent(trace)[1:], [("compaction", None, 8191, None)], "Run 2's requests")
    equal(endings(trace)[-1], (2, "failed", "CONTEXT_WINDOW_EXCEEDED"), "Run 2's ending")
    message = of(trace, "run_ended")[-1]["message"]
    expect(message is not None and "100001" in message,
           f"the message does not give the re-assembled size: {message!r}")
    states = [e["state"] for e in of(trace, "delivery")]
    equal(states[-1], "carried", "the supplement's delivery after Run 2")




# --- bad input: our own documents ---------------------------------------------------------------


def _bad_budget_scenario() -> dict[str, Any]:
    # O = 2000 on a window of 1000: B = 1000 − 2000 − 100 < 0, a budget that cannot be resolved.
    document = base(window=1000, output_reserve=2000)
    document["steps"] = [{"ask": "hello"}, {"advance": True}]
    document["model"] = {"business": [{"text": "never asked"}]}
    return document


_CASES: tuple[Case, ...] = (
    Case("ROW-01", "recent_runs = 2 after succeeded, failed and stopped Runs", "§12 row 1",
         ("CTX-4.4", "CTX-4.5", "CTX-4.6", "CTX-4.12", "CTX-5.23", "CTX-5.24", "CTX-4.7",
          "CTX-4.13", "CTX-4.14", "CTX-5.14", "CTX-5.25", "CTX-11.10"),
         example("supplements-across-runs"), _row1_check, frozenset({"stop"})),
    Case("ROW-02", "five supplements in one round", "§12 row 2",
         ("CTX-2.2", "CTX-2.3", "CTX-4.15", "CTX-4.17"), _row2_scenario(), _row2_check),
    Case("ROW-03", "an Executor sees only its hand-over", "§12 row 3",
         ("CTX-2.4", "CTX-5.2", "CTX-5.3", "CTX-3.73", "CTX-4.11", "CTX-6.1", "CTX-10.16",
          "CTX-4.9", "CTX-10.18"),
         example("planner-two-executors"), _row3_check,
         frozenset({"planner_executor", "triggers"})),
    Case("ROW-04-BELOW", "80% boundary: I = threshold − 1 does not compact", "§12 row 4",
         ("CTX-7.12", "CTX-7.13", "CTX-8.28", "CTX-6.21"), boundary(1596), _below_check,
         frozenset({"estimator_injection"})),
    Case("ROW-04-AT", "80% boundary: I = threshold compacts", "§12 row 4",
         ("CTX-7.12", "CTX-7.13", "CTX-8.28", "CTX-8.46", "CTX-6.21", "CTX-8.11"),
         boundary(1597), _at_check,
         frozenset({"estimator_injection", "compaction"})),
    Case("ROW-04-FLOOR", "80% boundary: the trigger is floor(r × B), exactly", "§12 row 4",
         ("CTX-7.12", "CTX-7.18"), {**boundary(1597), "agent": {
             **boundary(1597)["agent"], "window": 5001}}, _floor_check,
         frozenset({"estimator_injection", "compaction"})),
    Case("ROW-05", "a new question that triggers compaction stays verbatim", "§12 row 5",
         ("CTX-4.18", "CTX-5.5", "CTX-5.7", "CTX-8.64", "CTX-9.25", "CTX-1.7", "CTX-5.8",
          "CTX-8.11"), boundary(1597), _row5_check,
         frozenset({"estimator_injection", "compaction"})),
    Case("ROW-06", "a supplement during compaction joins the next request", "§12 row 6",
         ("CTX-5.28", "CTX-5.29", "CTX-9.44", "CTX-8.72"), _row6_scenario(), _row6_check,
         frozenset({"estimator_injection", "compaction", "triggers"})),
    Case("ROW-07", "every result has its call; a stopped batch gets placeholders", "§12 row 7",
         ("CTX-6.1", "CTX-6.2", "CTX-6.3", "CTX-6.6", "CTX-6.10", "CTX-6.12", "CTX-10.18",
          "CTX-10.22"), _row7_scenario(),
         _row7_check, frozenset({"triggers", "stop"})),
    Case("ROW-08", "a huge result is a preview; a read is a new record", "§12 row 8",
         ("CTX-6.13", "CTX-6.14", "CTX-6.15", "CTX-6.17", "CTX-6.18"), _row8_scenario(),
         _row8_check,
         frozenset({"estimator_injection"})),
    Case("ROW-09", "a crash after the second chunk resumes at the third", "§12 row 9",
         ("CTX-10.9", "CTX-8.74", "CTX-8.10"),
         _crash("compaction-three-chunks-window-exceeded", "chunk_committed", 2, "after"),
         _row9_check, frozenset({"compaction", "crash_points", "estimator_injection"})),
    Case("ROW-10", "a crash before the summary commit loses no history", "§12 row 10",
         ("CTX-10.10",),
         _crash("compaction-three-chunks-window-exceeded", "snapshot_published", 1, "before"),
         _row10_check, frozenset({"compaction", "crash_points", "estimator_injection"})),
    Case("ROW-11", "still over the window after the summary ends the Run", "§12 row 11",
         ("CTX-8.53", "CTX-8.77", "CTX-11.4", "CTX-11.14", "CTX-8.15", "CTX-11.11", "CTX-7.17",
          "CTX-8.45"),
         example("compaction-three-chunks-window-exceeded"), _row11_check,
         frozenset({"compaction", "estimator_injection"})),
    Case("ROW-12", "a partial stream then a retry splices nothing", "§12 row 12",
         ("CTX-2.29", "CTX-2.33", "CTX-5.19", "CTX-5.20", "CTX-11.7", "CTX-11.8", "CTX-6.8"),
         _row12_scenario(), _row12_check),
    Case("ROW-13", "a claimed supplement without first output goes to the next question",
         "§12 row 13", ("CTX-5.23", "CTX-5.24", "CTX-5.15"), _row13_scenario(), _row13_check),
    Case("ROW-14", "a first output then a break runs no tool and fakes no message", "§12 row 14",
         ("CTX-5.19", "CTX-11.7", "CTX-11.8"), _row14_scenario(), _row14_check),
    Case("ROW-15", "hooks change the model input in chain order", "§12 row 15",
         ("CTX-7.25", "CTX-3.61", "CTX-5.6", "CTX-3.78"), _row15_scenario(), _row15_check,
         frozenset({"hooks", "estimator_injection"})),
    Case("ROW-16-17", "the changed argument is what runs and what the model sees",
         "§12 rows 16-17", ("CTX-3.57", "CTX-3.69", "CTX-3.15", "CTX-6.16", "CTX-1.5",
                            "CTX-3.68"),
         example("tool-batch-hook"),
         _rows16_17_check, frozenset({"hooks"})),
    Case("ROW-18", "a deny blocks; a failed hook drops only itself", "§12 row 18",
         ("CTX-3.70", "CTX-6.11", "CTX-3.59", "CTX-3.61"), _row18_scenario(), _row18_check,
         frozenset({"hooks"})),
    Case("ROW-19", "private and shared scopes", "§12 row 19",
         ("CTX-3.72", "CTX-3.74", "CTX-3.75", "CTX-3.80", "CTX-3.87", "CTX-3.39", "CTX-3.32",
          "CTX-3.17", "CTX-3.53", "CTX-3.78"),
         _row19_scenario(), _row19_check,
         frozenset({"planner_executor", "hooks", "shared_scopes"})),
    Case("ROW-20", "a modified covered record retires the old summary", "§12 row 20",
         ("CTX-9.26", "CTX-9.27", "CTX-9.28", "CTX-9.32", "CTX-6.16"), corrected_summary(),
         _row20_check,
         frozenset({"hooks", "compaction", "estimator_injection"})),
    Case("ROW-21", "a crash after the raw result is saved repeats no call", "§12 row 21",
         ("CTX-10.6", "CTX-10.7"), _crash("tool-batch-hook", "raw_answer_saved", 1, "after"),
         _saved_step_check, frozenset({"crash_points", "hooks"})),
    Case("ROW-22", "a crash after one batch member settled reuses it", "§12 row 22",
         ("CTX-10.12", "CTX-10.15", "CTX-10.18"),
         _crash("tool-batch-hook", "tool_settled", 1, "after"),
         _saved_step_check, frozenset({"crash_points", "hooks"})),
    Case("ROW-23", "a crash after the feedback commit appends nothing twice", "§12 row 23",
         ("CTX-10.12", "CTX-3.5", "CTX-10.20"),
         _crash("tool-batch-hook", "batch_fed_back", 1, "after"),
         _saved_step_check, frozenset({"crash_points", "hooks"})),
    Case("ROW-24", "working files go at Run end; deleting the Agent removes its records",
         "§12 row 24", ("CTX-1.14", "CTX-1.15"), _row24_scenario(), _row24_check,
         frozenset({"retention", "history_api", "hooks"})),
    Case("ROW-25", "the history API refuses other Sessions, roles and scripts", "§12 row 25",
         ("CTX-11.15", "CTX-4.11"), _row25_scenario(), _row25_check,
         frozenset({"history_api", "hooks"})),
    Case("EX3-WRITE", "write(path): the hook's path is what runs and what is recorded",
         "§3 example", ("CTX-3.57", "CTX-3.69", "CTX-3.42"), write_path(
             {"decision": "allow", "payload_patch": [_MOVE]}), _write_check,
         frozenset({"hooks"})),
    Case("EX3-WRITE-CONFLICT", "write(path) with a conflicting context path keeps a.md",
         "§3 example", ("CTX-3.59", "CTX-3.41", "CTX-3.42"), write_path(
             {"decision": "allow", "payload_patch": [_MOVE], "context_patch": [_ELSEWHERE]}),
         _write_conflict_check, frozenset({"hooks"})),
    Case("EX3-DENY-CONFLICT", "a deny with a conflicting patch still blocks", "§3 example",
         ("CTX-3.59", "CTX-3.70", "CTX-3.41"), write_path(
             {"decision": "deny", "payload_patch": [_MOVE], "context_patch": [_ELSEWHERE]}),
         _deny_conflict_check, frozenset({"hooks"})),
    Case("EX7-BUDGET", "W=128K, O=8K, S=1280 gives B=121600 and a trigger near 95K",
         "§7 example", ("CTX-7.12", "CTX-7.15", "CTX-7.16", "CTX-7.3"), _ex7_scenario(),
         _ex7_check,
         frozenset({"estimator_injection"})),
    Case("EX4-OLDER-RUN", "an older Run keeps question, supplements, result and status",
         "§4 example", ("CTX-4.4", "CTX-4.5", "CTX-4.6", "CTX-4.8", "CTX-4.15", "CTX-4.16"),
         _ex4_scenario(), _ex4_check),
    Case("EX8-ROW1", "F=65000, M=20000: T=8192, the request goes at 73192", "§8 table row 1",
         ("CTX-8.34", "CTX-8.35", "CTX-8.36", "CTX-8.37", "CTX-8.38", "CTX-8.56", "CTX-8.14"),
         _table(65_000, 20_000, summary=8192), _table_row1, COMPACTING),
    Case("EX8-ROW2", "F=79000, M=6000: still above 80% after the summary, sent once",
         "§8 table row 2", ("CTX-8.30", "CTX-8.52", "CTX-8.55", "CTX-8.57", "CTX-9.37"),
         _table(79_000, 6000, summary=8192), _table_row2, COMPACTING),
    Case("EX8-ROW3", "F=96000, M=6000: an over-window source compacts with T=4000",
         "§8 table row 3", ("CTX-8.46", "CTX-8.58"), _table(96_000, 6000, summary=4000),
         _table_row3, COMPACTING),
    Case("EX8-ROW4", "F=100000 with material: no room for a summary", "§8 table row 4",
         ("CTX-8.50", "CTX-8.59", "CTX-7.32"), _table(100_000, 6000), _table_row4,
         COMPACTING),
    Case("EX8-ROW5", "no compressible material at I=85000: recorded, and the request goes",
         "§8 table row 5", ("CTX-8.30", "CTX-8.47", "CTX-8.48", "CTX-8.60"),
         _table(85_000, 0), _table_row5, frozenset({"estimator_injection"})),
    Case("EX8-ROW6", "re-assembled at 100001 after the summary: ended, supplement kept",
         "§8 table row 6", ("CTX-8.53", "CTX-8.61", "CTX-8.81", "CTX-9.37", "CTX-7.32"),
         _table_row6_scenario(), _table_row6, COMPACTING | {"usage_reports"}),
    Case("BAD-UNREGISTERED-FIELD", "a patch of an unregistered field is refused, allow goes on",
         "bad input", ("CTX-3.59",), write_path(
             {"decision": "allow", "payload_patch": [{"path": "name", "value": "rm"}]}),
         _unregistered_check, frozenset({"hooks"})),
    Case("BAD-STALE-ALLOW", "an allow patching a field changed since its base keeps the old value",
         "bad input", ("CTX-3.83", "CTX-3.84", "CTX-3.85", "CTX-3.62", "CTX-3.63", "CTX-3.54"),
         _stale("allow"), _stale_allow_check, frozenset({"hooks"})),
    Case("BAD-STALE-DENY", "a deny with a stale patch still blocks and records the old call",
         "bad input", ("CTX-3.83", "CTX-3.84", "CTX-3.60", "CTX-3.70"), _stale("deny"),
         _stale_deny_check, frozenset({"hooks"})),
    Case("BAD-INVALID-PATCH", "deleting a required field is refused, allow goes on",
         "bad input", ("CTX-3.51", "CTX-3.59", "CTX-3.78"), write_path(
             {"decision": "allow", "payload_patch": [{"path": "arguments", "delete": True}]}),
         _invalid_patch_check("SCHEMA_MISMATCH"), frozenset({"hooks"})),
    Case("BAD-FORBIDDEN-FIELD", "a patch of the call's identity is refused, allow goes on",
         "bad input", ("CTX-3.46", "CTX-3.59"), write_path(
             {"decision": "allow", "context_patch": [
                 {"target": "call", "field": "tool_call:{call_id}.call_id", "value": "x"}]}),
         _invalid_patch_check("FORBIDDEN_FIELD"), frozenset({"hooks"})),
    Case("BAD-UNKNOWN-TARGET", "a patch of a record that is not there is refused, allow goes on",
         "bad input", ("CTX-3.45", "CTX-3.59", "CTX-3.78"), write_path(
             {"decision": "allow", "context_patch": [
                 {"target": "00000000-0000-0000-0000-000000000001", "field": "text",
                  "value": "x"}]}),
         _invalid_patch_check("UNKNOWN_TARGET"), frozenset({"hooks"})),
    Case("BAD-BUDGET", "an unresolvable budget is refused before anything runs", "bad input",
         ("CTX-7.7",), _bad_budget_scenario(), no_check, refusal="BUDGET_CONFIGURATION_INVALID"),
    # Our own document, not the design's: these cases name no requirement of it.
    Case("BAD-SCENARIO-FIELD", "a scenario with a field it does not define is refused",
         OUR_DOCUMENTS, (), _malformed(surprise=1), no_check, refusal="SCENARIO_INVALID"),
    Case("BAD-SCENARIO-VERSION", "a scenario of an unknown version is refused", OUR_DOCUMENTS,
         (), _malformed(scenario_version=2), no_check, refusal="SCENARIO_INVALID"),
    Case("BAD-SCENARIO-CRASH", "a crash at a phase the design does not name is refused",
         OUR_DOCUMENTS, (), _malformed(crash={"phase": "request_froze"}), no_check,
         refusal="SCENARIO_INVALID", needs=frozenset({"crash_points"})),
    *STATEMENTS,
    *HOOK_MATRIX,
    *CRASH_MATRIX,
    *HOOK_CRASHES,
)
CASES: tuple[Case, ...] = tuple(refine(case) for case in _CASES)
"""Every case, its needs at the finest grain its scenario uses (conformance/capabilities.py)."""


def by_id(ids: Sequence[str] | None = None) -> tuple[Case, ...]:
    """The cases with these IDs (all when None); an unknown ID is an error naming it."""
    if ids is None:
        return CASES
    known = {case.id: case for case in CASES}
    unknown = [i for i in ids if i not in known]
    if unknown:
        raise KeyError(f"no conformance case {', '.join(unknown)}")
    return tuple(known[i] for i in ids)


__all__ = ["CASES", "Case", "CaseFailure", "Trace", "by_id"]
