"""§12 rows 1, 2, 12, 13 and 14 as conformance cases: recent Runs after succeeded, failed and
stopped ones, supplements of one round, and failures around the first output (§2, §4, §5, §11).
Each case stands beside its scenario and check."""

from typing import Any

from ctxspec.conformance.case import (
    Case,
    Trace,
    base,
    delivery_chains,
    endings,
    equal,
    example,
    expect,
    lines,
    of,
    outcome,
    requests,
    the,
)

# --- §12 row 1: recent_runs = 2 with succeeded, failed, stopped -------------------------------


def _row1_check(trace: Trace) -> None:
    # supplements-across-runs: Run 1 succeeds, Run 2 fails, Run 3 is stopped, Run 4 asks for a
    # summary. Run 1 is older than the recent two, so it shows its inputs, final result and
    # status; Runs 2 and 3 show their process and status and no made-up answer; the supplement
    # Run 2 claimed and Run 3 carried is shown once, in the current request, marked elsewhere.
    equal(endings(trace), [(1, "succeeded", None), (2, "failed", "MODEL_FAILED"),
                           (3, "stopped", None), (4, "succeeded", None)], "Run endings",
          cites="CTX-4.12")
    carried = the((e["input_id"] for e in of(trace, "delivery") if e["state"] == "carried"),
                  "no delivery event with state carried (the supplement Run 2 claimed, after "
                  "Run 2 failed)", cites="CTX-5.14")
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


ROW_01 = Case(
    "ROW-01", "recent_runs = 2 after succeeded, failed and stopped Runs", "§12 row 1",
    ("CTX-4.4", "CTX-4.5", "CTX-4.6", "CTX-4.12", "CTX-5.23", "CTX-5.24", "CTX-4.7",
     "CTX-4.13", "CTX-4.14", "CTX-5.14", "CTX-5.25", "CTX-11.10"),
    example("supplements-across-runs"), _row1_check, frozenset({"stop"}))


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
    equal(final[1:8], [("user", "user_ref", t) for t in ("q1", "s1", "s2", "s3", "s4", "s5")]
          + [("assistant", "assistant", "a1")],
          "Run 1's inputs and result as the fourth request shows them", cites="CTX-4.15")
    equal(final[8:9], [outcome(1, "succeeded")],
          "Run 1's end state, after its result, in the fourth request", cites="CTX-4.6")


ROW_02 = Case(
    "ROW-02", "five supplements in one round", "§12 row 2",
    ("CTX-2.2", "CTX-2.3", "CTX-4.15", "CTX-4.17", "CTX-4.6"), _row2_scenario(), _row2_check)


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
    # events only, and the next question's history shows the fragment marked, if at all: §6
    # and §11 allow keeping it, never require it (#32, Q294).
    equal(endings(trace), [(1, "failed", "MODEL_FAILED"), (2, "succeeded", None)],
          "Run endings", cites="CTX-11.7")
    equal([r["attempt"] for r in requests(trace, "business")], [1, 2, 1], "attempts",
          cites="CTX-11.8")
    equal([e["state"] for e in of(trace, "delivery")][:3], ["pending", "claimed", "delivered"],
          "the question's deliveries", cites="CTX-5.17")
    expect({e["event"] for e in of(trace, "client_event")}
           <= {"run_started", "input_received", "progress", "run_ended"},
           "an unknown client event")
    expect(not any("wri" in e["detail"] for e in of(trace, "client_event")),
           "a client event carries the fragment", cites="CTX-2.33")
    history = lines(requests(trace, "business")[-1])
    expect(not any(kind != "fragment" and "I will wri" in text for _, kind, text in history),
           "the fragment is shown, but not marked as a fragment", cites="CTX-6.8")
    expect(outcome(1, "failed", final=False) in history,
           "Run 1's ending is not shown", cites="CTX-11.10")


ROW_12 = Case(
    "ROW-12", "a partial stream then a retry splices nothing", "§12 row 12",
    ("CTX-2.29", "CTX-2.33", "CTX-5.19", "CTX-5.20", "CTX-11.7", "CTX-11.8", "CTX-6.8",
     "CTX-5.17", "CTX-11.10"), _row12_scenario(), _row12_check)


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


ROW_13 = Case(
    "ROW-13", "a claimed supplement without first output goes to the next question",
    "§12 row 13", ("CTX-5.23", "CTX-5.24", "CTX-5.15"), _row13_scenario(), _row13_check)


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
    # the fragment, if at all, marked as incomplete, never as a complete message (keeping it is
    # a "may" of §6 and §11, #32, Q294).
    equal(endings(trace), [(1, "failed", "MODEL_FAILED"), (2, "succeeded", None)],
          "Run endings")
    equal(of(trace, "tool_executed"), [], "tools executed")
    expect(any(e["state"] == "delivered" for e in of(trace, "delivery")),
           "no delivery evidence for the first output")
    expect(all("argum" not in e["detail"] for e in of(trace, "client_event")),
           "a client event carries model text")
    history = lines(requests(trace, "business")[-1])
    expect(not any(kind != "fragment" and "argum" in text for _, kind, text in history),
           "the fragment is shown, but not marked incomplete")


ROW_14 = Case(
    "ROW-14", "a first output then a break runs no tool and fakes no message", "§12 row 14",
    ("CTX-5.19", "CTX-11.7", "CTX-11.8"), _row14_scenario(), _row14_check)
