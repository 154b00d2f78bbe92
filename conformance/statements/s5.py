"""Conformance cases for normative statements of §5 outside the §12 table and the worked
examples (IDs ``S5-<name>``): each a scenario and a predicate over the neutral trace, its
expected values derived by hand from the design (see conformance/case.py)."""

from typing import Any

from ctxspec.conformance.case import (
    Case,
    Trace,
    base,
    delivery_chains,
    endings,
    equal,
    exactly,
    expect,
    lines,
    of,
    requests,
)
from ctxspec.conformance.sessions import boundary

# --- §5 statement: a retry sends the frozen request ----------------------------------------------


def _retry_scenario() -> dict[str, Any]:
    document = base()
    document["steps"] = [{"ask": "q1"}, {"advance": True}]
    document["model"] = {"business": [{"fail": "reset"}, {"text": "done"}]}
    document["triggers"] = [{"on": {"purpose": "business", "ordinal": 1},
                             "do": {"supplement": "late words"}}]
    return document


def _retry_check(trace: Trace) -> None:
    # The supplement arrives while attempt 1 is in flight, after the request was frozen. §5:
    # a retry uses the same frozen version and input list — attempt 2 sends exactly what
    # attempt 1 did; the late supplement waits (there is no next loop: it is carried).
    attempt1, attempt2 = exactly(2, requests(trace, "business"), "business requests")
    equal((attempt1["attempt"], attempt2["attempt"]), (1, 2), "attempts")
    equal(lines(attempt2), lines(attempt1), "attempt 2's messages")
    equal(endings(trace), [(1, "succeeded", None)], "Run endings")
    chains = delivery_chains(trace, of(trace, "delivery")[-1]["input_id"])
    equal([states for _, states, _ in chains], [["pending", "carried"], ["pending"]],
          "the late supplement's deliveries: never claimed, carried to the next question")
    equal(chains[1][2], chains[0][0], "the carried delivery's successor points back")


# --- §5 statements: receipt, ownership and receive order ----------------------------------------


def _receipt_scenario() -> dict[str, Any]:
    document = base()
    document["steps"] = [{"supplement": "early"}, {"ask": "q1"}, {"supplement": "s1"},
                         {"supplement": "s2"}, {"advance": True}, {"supplement": "after"}]
    document["model"] = {"business": [{"text": "a1"}]}
    return document


def _first_state(trace: Trace, text_of: dict[str, str], text: str) -> dict[str, Any]:
    return next(e for e in of(trace, "delivery") if e["input_id"] == text_of[text])


def _receipt_check(trace: Trace) -> None:
    [request] = exactly(1, requests(trace, "business"), "business requests")
    users = [m for m in request["view"]["messages"] if m["kind"] == "user_ref"]
    # §1/§5: every input, each supplement included, is its own UserInput with its original
    # text, in receive order — "early" came before the question and keeps that place.
    equal([m["text"] for m in users], ["early", "q1", "s1", "s2"], "the inputs Run 1 is sent")
    equal(len({m["input_id"] for m in users}), 4, "distinct inputs among the four")
    text_of = {m["text"]: m["input_id"] for m in users}
    # §5: pending supplements never start a Run: "early" waits (no target Run) for the
    # question, "after" — received once Run 1 ended — stays pending with no target, and no
    # second Run or request follows.
    equal(_first_state(trace, text_of, "early")["target_run_id"], None,
          "the target Run of the supplement received before any question")
    after = [e for e in of(trace, "delivery") if e["input_id"] not in text_of.values()]
    equal([(e["state"], e["target_run_id"]) for e in after], [("pending", None)],
          "the deliveries of the supplement received after Run 1 ended")
    started = [e for e in of(trace, "client_event") if e["event"] == "run_started"]
    equal(len(started), 1, "Runs started")
    run_id = started[0]["run_id"]
    # §5: each supplement of the active Run is acknowledged as received (stored) with the Run
    # that owns it — before any request carries it, so never as "understood".
    received = [e for e in of(trace, "client_event") if e["event"] == "input_received"]
    equal([(e["run_id"], e["detail"]) for e in received],
          [(run_id, "supplement"), (run_id, "supplement")], "the receipts of s1 and s2")
    expect(all(trace.index(e) < trace.index(request) for e in received),
           "a receipt came after the request that carries its input")
    equal({e["target_run_id"] for e in of(trace, "delivery")
           if e["input_id"] in (text_of["s1"], text_of["s2"])}, {run_id},
          "the Run s1 and s2 are delivered to")


# --- §5 statements: a request is frozen after its hooks and compaction -------------------------


def _freeze_scenario() -> dict[str, Any]:
    """The §12 row 4 boundary (sessions.boundary): B = 4500, trigger 3600; Run 2's request is
    I = 2003 + 1597 = 3600 and is compacted."""
    document = boundary()
    document["hooks"] = [{"point": "model.pre_request", "ordinal": 2, "items": [{}]}]
    return document


def _freeze_check(trace: Trace) -> None:
    # §5: a request is frozen (T_FREEZE, which claims its inputs) only after the pre-request
    # hooks, any compaction and the hard window check. For Run 2: the hook decides, the episode
    # summarises, then the question is claimed, then the request is sent.
    question = next(m["input_id"] for m in requests(trace, "business")[-1]["view"]["messages"]
                    if m["kind"] == "user_ref")

    def first(kind: str, **fields: object) -> int:
        return next(i for i, e in enumerate(trace) if e["kind"] == kind
                    and all(e.get(k) == v for k, v in fields.items()))

    hook = first("hook_decided", point="model.pre_request")
    chunk = first("model_request", purpose="compaction")
    claim = first("delivery", input_id=question, state="claimed")
    sent = trace.index(requests(trace, "business")[-1])
    expect(hook < chunk < claim < sent,
           f"hook decided at {hook}, summary asked at {chunk}, question claimed at {claim}, "
           f"request sent at {sent}: expected them in that order")
    equal([e["state"] for e in of(trace, "delivery") if e["input_id"] == question][:2],
          ["pending", "claimed"], "the question's first states")


# --- §5 statements: delivered at the first output, once; a carry is a new delivery --------------


def _delivery_scenario() -> dict[str, Any]:
    document = base(tools=[{"name": "t"}])  # model_attempts defaults to 2
    document["steps"] = [{"ask": "q1"}, {"supplement": "s1"}, {"advance": True},
                         {"ask": "q2"}, {"advance": True}]
    document["model"] = {"business": [
        {"fail": "reset"}, {"fail": "reset"},  # Run 1: both attempts fail before any output
        {"fail": "reset"}, {"text": "", "tool_calls": [{"name": "t"}]}, {"text": "a2"}]}
    document["tools"] = {"t": [{"text": "ok"}]}
    return document


def _delivery_check(trace: Trace) -> None:
    equal(endings(trace), [(1, "failed", "MODEL_FAILED"), (2, "succeeded", None)],
          "Run endings")
    states = {e["state"] for e in of(trace, "delivery")}
    expect(states <= {"pending", "claimed", "delivered", "carried"},
           f"delivery states outside the design's four: {sorted(states)}")
    run2 = requests(trace, "business")[2:]
    s1 = next(m["input_id"] for m in run2[0]["view"]["messages"] if m["text"] == "s1")
    q2 = next(m["input_id"] for m in run2[0]["view"]["messages"] if m["text"] == "q2")
    # §2/§5: Run 1 claimed s1 but failed before any output, so s1 was never delivered and is
    # carried: its first delivery ends "carried" (kept, never rewritten), and a new delivery,
    # pointing back to it, takes it to Run 2 where it is delivered.
    chains = delivery_chains(trace, s1)
    equal([(states, previous is None) for _, states, previous in chains],
          [(["pending", "claimed", "carried"], True), (["pending", "claimed", "delivered"], False)],
          "s1's deliveries")
    equal(chains[1][2], chains[0][0], "the carried delivery's previous_delivery_id")
    # §5: delivered is reached only with the first valid output: Run 2's attempt 1 fails before
    # any, so nothing is delivered until attempt 2 answers — and that evidence is saved once,
    # the next loop delivers nothing again.
    attempt1, attempt2, loop2 = run2
    equal((attempt1["attempt"], attempt2["attempt"], loop2["attempt"]), (1, 2, 1), "attempts")
    for input_id, name in ((s1, "s1"), (q2, "q2")):
        delivered = [i for i, e in enumerate(trace) if e["kind"] == "delivery"
                     and e["input_id"] == input_id and e["state"] == "delivered"]
        equal(len(delivered), 1, f"{name}'s delivered events")
        expect(trace.index(attempt2) < delivered[0] < trace.index(loop2),
               f"{name} was not delivered between attempt 2 and the next loop")


CASES: tuple[Case, ...] = (
    Case("S5-RETRY-FROZEN", "a retry sends the frozen request, not a supplement that came later",
         "§5", ("CTX-5.31", "CTX-5.32"), _retry_scenario(), _retry_check,
         frozenset({"triggers"})),
    Case("S5-RECEIPT", "each input is its own, acknowledged as received with its Run, in "
         "receive order; pending inputs start nothing", "§5",
         ("CTX-1.3", "CTX-2.20", "CTX-5.10", "CTX-5.22", "CTX-5.26", "CTX-5.27"),
         _receipt_scenario(), _receipt_check),
    Case("S5-FREEZE-LATE", "a request is frozen after its hooks and compaction", "§5",
         ("CTX-5.11",), _freeze_scenario(), _freeze_check,
         frozenset({"hooks", "compaction", "estimator_injection"})),
    Case("S5-DELIVERED-ON-OUTPUT", "an input is delivered at the first output, once; a carry "
         "is a new delivery", "§5", ("CTX-2.9", "CTX-2.19", "CTX-2.22", "CTX-5.17", "CTX-5.18"),
         _delivery_scenario(), _delivery_check),
)
