"""Conformance cases for normative statements of §9 outside the §12 table and the worked
examples (IDs ``S9-<name>``): each a scenario and a predicate over the neutral trace, its
expected values derived by hand from the design (see conformance/case.py)."""

from typing import Any

from ctxspec.conformance.case import (
    COMPACTING,
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
    requests,
)
from ctxspec.conformance.sessions import boundary, corrected_summary

# --- later loops: the summary once, uncovered increments appended, protected inputs kept -------


def _increments_scenario() -> dict[str, Any]:
    document = boundary(tools=[{"name": "t"}])
    document["model"]["business"] = [{"text": "b" * 1000},
                                     {"text": "c", "tool_calls": [{"name": "t"}]},
                                     {"text": "done"}]
    document["tools"] = {"t": [{"text": "r"}]}
    return document


def _increments_check(trace: Trace) -> None:
    # Run 2's first loop: I = "sys" 3 + Run 1's 2000 + the question 1597 = 3600 ≥ 3600 (the
    # outcome and the tool schema count 0): Run 1 is summarised (the question is not: it is a
    # current protected input). The second loop reuses the snapshot — still applicable, nothing
    # covered changed — and appends only what came after it: the decision "c" with its call and
    # the result "r". I = 3 + "SUMMARY" 7 + 1597 + 1 + 1 = 1609 < 3600: no new episode, and
    # none of Run 1's covered text comes back.
    equal([r["purpose"] for r in requests(trace)],
          ["business", "compaction", "business", "business"], "requests")
    material = "\n".join(m["text"] for m in requests(trace, "compaction")[0]["view"]["messages"])
    expect("a" * 1000 in material and "b" * 1000 in material, "the material lacks Run 1")
    expect("Q" * 1597 not in material, "the current question was sent to be summarised")
    first, second = requests(trace, "business")[1:]
    expect(first["snapshot_id"] is not None, "Run 2's first loop names no snapshot")
    equal(second["snapshot_id"], first["snapshot_id"], "the snapshot of Run 2's second loop")
    summary = ("system", "summary", "SUMMARY")
    equal([line for line in lines(second) if line[1] not in ("assistant", "tool_result")],
          [("system", "system_prompt", "sys"), summary, ("user", "user_ref", "Q" * 1597)],
          "Run 2's second loop without its own increments")
    equal([(role, kind) for role, kind, _ in lines(second)][3:],
          [("assistant", "assistant"), ("tool", "tool_result")],
          "the increments appended after the question")
    equal(lines(second)[4][2], "r", "the tool result appended")
    texts = "\n".join(text for _, _, text in lines(second))
    expect("a" * 1000 not in texts and "b" * 1000 not in texts,
           "Run 2's second loop shows covered material again")
    equal((second["compaction"], second["estimated_input_tokens"]), ("below_trigger", 1609),
          "Run 2's second loop (§8 decision, I)")
    equal(endings(trace), [(1, "succeeded", None), (2, "succeeded", None)], "Run endings")


# --- recovery: the same episode, the same chunk Operations --------------------------------------


def _chunk_resume_scenario() -> dict[str, Any]:
    return {**example("compaction-three-chunks-window-exceeded"),
            "crash": {"phase": "chunk_committed", "occurrence": 2, "when": "after"}}


def _chunk_resume_check(trace: Trace) -> None:
    # The runtime dies right after chunk 2's commit. The takeover reads the episode's cursor (2)
    # and goes on with chunk 3 of the same episode: the three chunk requests are
    # compaction:<one episode id>:chunk:1, 2, 3, each asked once at attempt 1, chunk 3 after the
    # restart and folding S2.
    equal(len(of(trace, "restarted")), 1, "restarts")
    chunks = requests(trace, "compaction")
    keys = [r["purpose_key"].split(":") for r in chunks]
    equal([(k[0], k[2], k[3], r["attempt"]) for k, r in zip(keys, chunks, strict=True)],
          [("compaction", "chunk", str(n), 1) for n in (1, 2, 3)],
          "(prefix, 'chunk', ordinal, attempt) of the chunk requests")
    equal(len({k[1] for k in keys}), 1, "episode ids in the chunk purpose keys")
    episodes = {e["episode_id"] for e in of(trace, "compaction")}
    equal(episodes, {keys[0][1]}, "episodes traced (the chunk keys' episode)")
    restart = next(i for i, e in enumerate(trace) if e["kind"] == "restarted")
    expect(trace.index(chunks[1]) < restart < trace.index(chunks[2]),
           "chunk 3 is not the only chunk asked after the restart")
    expect("S2: reports 1-2: revenue grew, costs fell." in
           "\n".join(m["text"] for m in chunks[2]["view"]["messages"]), "chunk 3 lacks S2")
    equal(endings(trace), [(1, "succeeded", None), (2, "failed", "CONTEXT_WINDOW_EXCEEDED")],
          "Run endings")


def _snapshot_takeover_scenario() -> dict[str, Any]:
    document = boundary()
    document["hooks"] = [{"point": "model.pre_request", "items": [{}]}]
    document["crash"] = {"phase": "snapshot_published", "occurrence": 1, "when": "after"}
    return document


def _snapshot_takeover_check(trace: Trace) -> None:
    # The runtime dies right after the summary's commit, before Run 2's business request is
    # sent. The takeover goes on with the prepared request: the chunk is not asked again, the
    # pre-request chain (asked once per business loop: Run 1's and Run 2's) is not asked
    # again, and the request goes once, at attempt 1, with the snapshot.
    equal(len(of(trace, "restarted")), 1, "restarts")
    equal([(r["purpose"], r["attempt"]) for r in requests(trace)],
          [("business", 1), ("compaction", 1), ("business", 1)], "(purpose, attempt) of requests")
    equal([e["point"] for e in of(trace, "hook_called")], ["model.pre_request"] * 2,
          "hook chains asked (one per business loop)")
    business = requests(trace, "business")[-1]
    expect(business["snapshot_id"] is not None, "Run 2's request names no snapshot")
    equal(lines(business), [("system", "system_prompt", "sys"),
                            ("system", "summary", "SUMMARY"),
                            ("user", "user_ref", "Q" * 1597)], "Run 2's request")
    equal(endings(trace), [(1, "succeeded", None), (2, "succeeded", None)], "Run endings")


# --- recovery: a chunk whose raw answer is saved is post-processed, never asked again ----------


def _raw_saved_scenario() -> dict[str, Any]:
    return {**example("compaction-three-chunks-window-exceeded"),
            "hooks": [{"point": "compaction.post_response", "items": [{}]}],
            "crash": {"phase": "chunk_answer_saved", "occurrence": 2, "when": "after"}}


def _raw_saved_check(trace: Trace) -> None:
    # The runtime dies right after chunk 2's raw answer is saved, before its post-response
    # chain runs and before the chunk's result and cursor are committed (§8: the raw response
    # is saved first, CTX-8.70). The takeover resumes that post-processing (CTX-9.43): the
    # chain is asked for chunk 2 after the restart, and the summary model is not — each chunk
    # request (purpose_key, attempt) is sent exactly once, chunk 2 before the restart and
    # chunk 3 after it, folding chunk 2's saved S2.
    equal(len(of(trace, "restarted")), 1, "restarts")
    chunks = requests(trace, "compaction")
    asked = [(r["purpose_key"], r["attempt"]) for r in chunks]
    equal([(key.rsplit(":", 1)[1], attempt) for key, attempt in asked],
          [("1", 1), ("2", 1), ("3", 1)], "(chunk, attempt) of the compaction requests")
    equal(len(set(asked)), 3, "distinct chunk requests (none asked twice)")
    # One post-response chain per chunk, as without the crash: chunk 2's runs after the
    # restart, between the restart and chunk 3's request.
    posts = [i for i, e in enumerate(trace) if e["kind"] == "hook_called"
             and e["point"] == "compaction.post_response"]
    equal(len(posts), 3, "compaction.post_response chains asked")
    restart = next(i for i, e in enumerate(trace) if e["kind"] == "restarted")
    expect(trace.index(chunks[1]) < restart < posts[1] < trace.index(chunks[2]),
           "chunk 2's post-response chain is not what the takeover did first")
    expect("S2: reports 1-2: revenue grew, costs fell." in
           "\n".join(m["text"] for m in chunks[2]["view"]["messages"]), "chunk 3 lacks S2")
    equal(endings(trace), [(1, "succeeded", None), (2, "failed", "CONTEXT_WINDOW_EXCEEDED")],
          "Run endings")


# --- a later episode folds the applicable summary; coverage is the merged range ----------------


def _resummary_scenario() -> dict[str, Any]:
    """One Run, W = 5000, O = 400, S = 100: B = 4500, trigger 3600; the tool schema and the
    calls' framing count 0. Loops 1-2 as in §12 row 20 (ROW-20), then two more loops that grow
    past the trigger again."""
    document = base(window=5000, tools=[{"name": "t"}])
    document["steps"] = [{"ask": "go"}, {"advance": True}]
    document["model"] = {
        "business": [{"text": "A" * 1500, "tool_calls": [{"name": "t"}]},
                     {"text": "B" * 700, "tool_calls": [{"name": "t"}]},
                     {"text": "C" * 1500, "tool_calls": [{"name": "t"}]},
                     {"text": "D" * 600, "tool_calls": [{"name": "t"}]},
                     {"text": "done"}],
        "compaction": [{"text": "SUM1"}, {"text": "SUM2"}, {"text": "SUM3"}, {"text": "SUM4"}]}
    document["tools"] = {"t": [{"text": "r" * 1500}, {"text": "s" * 500}, {"text": "x" * 1500},
                               {"text": "y" * 500}]}
    return document


def _resummary_check(trace: Trace) -> None:
    # Loop 3: I = 3 + 2 + 1500 + 1500 + 700 + 500 = 4205 ≥ 3600: episode 1 summarises loops 1-2
    # in two chunks (F = 5, T = 400, a chunk carries W − 2T − S = 4100: the units 3000 and
    # 1200 do not fit together), SUM1 then SUM2. Loop 3 sends "sys", "go" and the summary
    # "SUM2": I = 3 + 2 + 4 = 9. Loop 4: 9 + 1500 + 1500 = 3009 < 3600, the same snapshot.
    # Loop 5: 3009 + 600 + 500 = 4109 ≥ 3600: a new business Operation, so a second episode.
    # The first summary still applies, so it is material of the second (folded, not its
    # records again) together with the increments C, x, D, y: 4 + 3000 + 1100 > 4100, two
    # chunks again. The merged coverage is loops 1-4: loop 5 sends only "sys", "go" and the
    # new summary SUM4: I = 3 + 2 + 4 = 9.
    equal([r["purpose"] for r in requests(trace)],
          ["business"] * 2 + ["compaction"] * 2 + ["business"] * 2 + ["compaction"] * 2
          + ["business"], "requests")
    equal(len({e["episode_id"] for e in of(trace, "compaction")}), 2, "episodes")
    second = "\n".join(m["text"] for r in requests(trace, "compaction")[2:]
                       for m in r["view"]["messages"])
    expect("SUM2" in second, "the second episode does not fold the applicable first summary")
    expect("C" * 1500 in second and "y" * 100 in second,
           "the second episode lacks the increments after the first summary")
    expect("A" * 1500 not in second and "r" * 1500 not in second,
           "the second episode summarises the first summary's records again")
    loop3, loop4, loop5 = requests(trace, "business")[2:]
    equal(loop4["snapshot_id"], loop3["snapshot_id"], "loop 4's snapshot (loop 3's)")
    expect(loop5["snapshot_id"] not in (None, loop3["snapshot_id"]),
           "loop 5 does not use the second episode's snapshot")
    equal(lines(loop5), [("system", "system_prompt", "sys"), ("user", "user_ref", "go"),
                         ("system", "summary", "SUM4")],
          "loop 5 (the merged coverage replaced by the new summary, once)")
    equal((loop5["compaction"], loop5["estimated_input_tokens"]), ("compact", 9),
          "loop 5 (§8 decision, I)")
    equal(endings(trace), [(1, "succeeded", None)], "Run endings")


# --- a hook change to uncovered material keeps the summary; a covered one does not -------------


def _uncovered_scenario() -> dict[str, Any]:
    document = _resummary_scenario()
    document["model"]["business"] = [{"text": "A" * 1500, "tool_calls": [{"name": "t"}]},
                                     {"text": "B" * 700, "tool_calls": [{"name": "t"}]},
                                     {"text": "C", "tool_calls": [{"name": "t"}]},
                                     {"text": "D", "tool_calls": [{"name": "t"}]},
                                     {"text": "done"}]
    document["model"]["compaction"] = [{"text": "SUM1"}, {"text": "SUM2"}]
    document["tools"] = {"t": [{"text": "r" * 1500}, {"text": "s" * 500}, {"text": "x"},
                               {"text": "y"}]}
    document["hooks"] = [
        {"point": "model.pre_request", "ordinal": 4, "items": [{"context_patch": [
            {"target": "last", "field": "text", "value": "x, corrected"}]}]},
        {"point": "model.pre_request", "ordinal": 5, "items": [{"context_patch": [
            {"target": "first_assistant", "field": "text", "value": "A, corrected"}]}]}]
    return document


def _uncovered_check(trace: Trace) -> None:
    # Loop 3 compacts loops 1-2 as in ROW-20 (I = 4205): loop 3 sends the summary, I = 9.
    # Before loop 4 a hook corrects loop 3's tool result "x" — after the summary, uncovered:
    # the summary still stands (same snapshot), the correction shows as it is now:
    # I = 3 + 2 + "SUM2" 4 + "C" 1 + "x, corrected" 12 = 22. Before loop 5 a hook corrects the first
    # decision, which the summary covers; no record is appended for it (the covered records'
    # highest context_seq is what it was), yet the effective content at the new revision
    # differs from the manifest's: the snapshot no longer applies and every record comes back
    # as it is now — I = 3 + 2 + 12 + 1500 + 700 + 500 + 1 + 12 + "D" 1 + "y" 1 = 2732, below
    # the trigger, so no new episode.
    equal([r["purpose"] for r in requests(trace)],
          ["business"] * 2 + ["compaction"] * 2 + ["business"] * 3, "requests")
    equal([(d["patch_valid"], d["diagnostics"]) for d in of(trace, "hook_decided")],
          [(True, []), (True, [])], "hook decisions")
    loop3, loop4, loop5 = requests(trace, "business")[2:]
    expect(loop3["snapshot_id"] is not None, "loop 3 uses no snapshot")
    equal(loop4["snapshot_id"], loop3["snapshot_id"],
          "loop 4's snapshot after an uncovered correction (loop 3's)")
    equal(lines(loop4)[2:], [("system", "summary", "SUM2"),
                             ("assistant", "assistant", "C"),
                             ("tool", "tool_result", "x, corrected")], "loop 4 after the prompt")
    equal(loop4["estimated_input_tokens"], 22, "loop 4's I")
    equal((loop5["snapshot_id"], loop5["compaction"], loop5["estimated_input_tokens"]),
          (None, "below_trigger", 2732), "loop 5 after a covered correction (snapshot, §8, I)")
    texts = [text for _, _, text in lines(loop5)]
    expect("A, corrected" in texts and "x, corrected" in texts and "B" * 700 in texts,
           "loop 5 lacks the records as they are now")
    expect(not any(kind == "summary" or "SUM" in text for _, kind, text in lines(loop5)),
           "loop 5 still shows the set-aside summary")


# --- the frozen request binds view, revisions, snapshot and inputs; retries keep it -------------


def _binding_scenario() -> dict[str, Any]:
    document = _increments_scenario()
    document["model"]["business"] = [{"text": "b" * 1000}, {"fail": "reset"},
                                     {"text": "c", "tool_calls": [{"name": "t"}]},
                                     {"text": "done"}]
    document["triggers"] = [
        {"on": {"purpose": "compaction", "ordinal": 1}, "do": {"supplement": "during"}},
        {"on": {"purpose": "business", "ordinal": 3}, "do": {"supplement": "retry"}}]
    return document


def _binding_check(trace: Trace) -> None:
    # Run 2's first loop compacts Run 1 as in S9-INCREMENTS (I = 3600). The supplement "during"
    # arrives while the chunk is summarised — an append only, after the request's input cutoff:
    # the snapshot commits with its original coverage and the request is sent with it:
    # I = 3 + "SUMMARY" 7 + 1597 = 1607. Attempt 1
    # fails; "retry" arrives just before attempt 2, which sends the frozen request: the same
    # view hash, revisions, snapshot, protected inputs and cutoff. Loop 2 is a new business
    # Operation: it reads the new head (the decision "c", its result "r", both supplements),
    # the same still-applicable snapshot, and binds the question and both supplements:
    # I = 1607 + "c" 1 + "r" 1 + "during" 6 + "retry" 5 = 1620.
    first, retry, loop2 = requests(trace, "business")[1:]
    expect(first["snapshot_id"] is not None, "Run 2's first request names no snapshot")
    binding = ("view_hash", "frozen_revisions", "snapshot_id", "protected_input_ids",
               "input_cutoff")
    equal((first["attempt"], retry["attempt"], retry["purpose_key"] == first["purpose_key"]),
          (1, 2, True), "(attempt, attempt, same purpose key) of Run 2's first Operation")
    equal({k: retry[k] for k in binding}, {k: first[k] for k in binding},
          "attempt 2's binding (attempt 1's)")
    equal(lines(retry), lines(first), "attempt 2's messages")
    equal([text[:20] for _, kind, text in lines(first) if kind == "user_ref"], ["Q" * 20],
          "attempt 1's user inputs")
    equal(first["estimated_input_tokens"], 1607, "attempt 1's I")
    equal(loop2["snapshot_id"], first["snapshot_id"], "loop 2's snapshot")
    equal([text[:20] for _, kind, text in lines(loop2) if kind == "user_ref"],
          ["Q" * 20, "during", "retry"], "loop 2's user inputs")
    equal(len(loop2["protected_input_ids"]), 3, "loop 2's protected inputs")
    expect(set(first["protected_input_ids"]) < set(loop2["protected_input_ids"]),
           "loop 2 does not keep the question among its protected inputs")
    expect(loop2["view_hash"] != first["view_hash"], "loop 2 binds the old view hash")
    [context] = first["frozen_revisions"]
    expect(loop2["frozen_revisions"].get(context, 0) > first["frozen_revisions"][context],
           "loop 2 binds no newer revision of the Run's context")
    equal(loop2["estimated_input_tokens"], 1620, "loop 2's I")
    equal(endings(trace), [(1, "succeeded", None), (2, "succeeded", None)], "Run endings")


# --- a concurrent update after the episode starts no second summary attempt --------------------


def _concurrent_scenario() -> dict[str, Any]:
    return {**example("compaction-three-chunks-window-exceeded"),
            "triggers": [{"on": {"purpose": "compaction", "ordinal": 2},
                          "do": {"supplement": "late words"}}]}


def _concurrent_check(trace: Trace) -> None:
    # The worked example: Run 2's request is compacted in three chunks and the summary leaves
    # it over B (Q-free arithmetic in the example: 3634 > B). A supplement arrives while chunk
    # 2 is summarised. The Operation already has its one episode: the rebuilt request is
    # checked against the hard window and the Run ends with CONTEXT_WINDOW_EXCEEDED — no
    # fourth chunk, no second episode, no business request of Run 2.
    equal(len(requests(trace, "compaction")), 3, "compaction requests")
    equal(len({e["episode_id"] for e in of(trace, "compaction")}), 1, "episodes")
    equal(len(requests(trace, "business")), 4, "business requests (all Run 1's)")
    equal(endings(trace), [(1, "succeeded", None), (2, "failed", "CONTEXT_WINDOW_EXCEEDED")],
          "Run endings")
    # The supplement (the third input) was received during the episode and never sent: §5
    # carries it to the next question — its delivery ends carried, a new one continues it.
    late = list(dict.fromkeys(e["input_id"] for e in of(trace, "delivery")))[2]
    equal([(states, previous is None) for _, states, previous in delivery_chains(trace, late)],
          [(["pending", "carried"], True), (["pending"], False)], "the supplement's deliveries")


# --- the summary's coverage takes effect with its pointer, never before ------------------------


def _atomic_scenario() -> dict[str, Any]:
    document = boundary()
    document["steps"] = [*document["steps"], {"read_history": {"kind": "audit"}}]
    document["crash"] = {"phase": "snapshot_published", "occurrence": 1, "when": "before"}
    return document


def _atomic_check(trace: Trace) -> None:
    # ROW-04-AT's Session (Run 2: I = 3 + 2024 + 1573 = 3600 ≥ 3600, one chunk) dies just
    # before the snapshot and its pointer are committed: the summary's coverage has not taken
    # effect, and no record was removed for it. The takeover reuses the committed chunk (asked
    # once), commits the snapshot and sends Run 2's request once, with the summary in place of
    # Run 1 — neither lost nor shown twice; the audit read still returns Run 1's records.
    equal(len(of(trace, "restarted")), 1, "restarts")
    equal([(r["purpose"], r["attempt"]) for r in requests(trace)],
          [("business", 1), ("compaction", 1), ("business", 1)], "(purpose, attempt) of requests")
    business = requests(trace, "business")[-1]
    expect(business["snapshot_id"] is not None, "Run 2's request names no snapshot")
    equal(lines(business), [("system", "system_prompt", "sys"),
                            ("system", "summary", "SUMMARY"),
                            ("user", "user_ref", "Q" * 1597)], "Run 2's request")
    [read] = of(trace, "history_read")
    equal(read["message_kinds"], ["user_ref", "assistant", "user_ref", "assistant"],
          "records an audit read returns after Run 2")
    equal(endings(trace), [(1, "succeeded", None), (2, "succeeded", None)], "Run endings")


# --- covered material changed while the episode ran: a refused switch, nothing re-run ----------


def _cas_scenario(correction: str) -> dict[str, Any]:
    """ROW-20's Run, but the correction of the first decision comes from the hook of the
    episode's second chunk request — after chunk 1 summarised the record — and loop 3's answer
    is the final one."""
    document = corrected_summary()
    business = document["model"]["business"]
    document["model"]["business"] = [*business[:2], {"text": "done"}]
    document["hooks"] = [{"point": "compaction.pre_request", "ordinal": 2, "items": [
        {"context_patch": [{"target": "first_assistant", "field": "text",
                            "value": correction}]}]}]
    return document


def _cas_common(trace: Trace) -> None:
    # Loop 3: I = 3 + 2 + 1500 + 1500 + 700 + 500 = 4205 ≥ 3600 (ROW-20's arithmetic), two
    # chunks. The hook of chunk 2's request corrects the first decision, which
    # chunk 1 already summarised: the snapshot may not become the head. Each chunk is asked
    # once and its hook chain runs once — the conflict is not resolved by asking either again.
    equal([r["purpose"] for r in requests(trace)][:4],
          ["business", "business", "compaction", "compaction"], "requests up to the episode")
    equal(len(requests(trace, "compaction")), 2, "compaction requests")
    equal([e["point"] for e in of(trace, "hook_called")],
          ["compaction.pre_request", "compaction.pre_request"], "hook chains run")
    equal(len({e["episode_id"] for e in of(trace, "compaction")}), 1, "episodes")
    steps = [e["step"] for e in of(trace, "compaction")]
    expect("snapshot_active" not in steps, "the summary of changed material became the head")
    expect(steps[-1] == "snapshot_refused",
           f"the episode's last step is {steps[-1]!r}, not the refused switch")
    expect("COVERED_MATERIAL_CHANGED" in of(trace, "compaction")[-1]["detail"],
           "the refusal does not say the covered material changed")


def _cas_rebuilt_check(trace: Trace) -> None:
    # The view is rebuilt from the records as they are now: the corrected decision stands in
    # for "A" × 1500, no summary. I = 4205 − 1500 + 1795 = 4500 = B: it fits the hard
    # window exactly, and goes.
    _cas_common(trace)
    loop3 = requests(trace, "business")[2]
    equal((loop3["snapshot_id"], loop3["estimated_input_tokens"]), (None, 4500),
          "loop 3's snapshot and I")
    texts = [m["text"] for m in loop3["view"]["messages"]]
    expect(not any(kind == "summary" or "SUM" in text for _, kind, text in lines(loop3)),
           "loop 3 shows the refused summary")
    expect("Z" * 1795 in texts and "r" * 1500 in texts and "B" * 700 in texts,
           "loop 3 lacks the covered records as they are now")
    expect("A" * 1500 not in texts, "loop 3 shows the decision as it was before the hook")
    equal(endings(trace), [(1, "succeeded", None)], "Run endings")


def _cas_over_check(trace: Trace) -> None:
    # One character more: I = 4501 > B = 4500. The Operation had its one episode, so the
    # rebuilt request is not summarised again: the Run ends with CONTEXT_WINDOW_EXCEEDED and
    # loop 3 is never sent.
    _cas_common(trace)
    equal(len(requests(trace, "business")), 2, "business requests")
    equal(endings(trace), [(1, "failed", "CONTEXT_WINDOW_EXCEEDED")], "Run endings")



def _writer_scenario() -> dict[str, Any]:
    """S9-CAS-REBUILT's Session, the correction made by an independent writer — not a hook —
    just before the episode's second chunk request."""
    document = corrected_summary()
    business = document["model"]["business"]
    document["model"]["business"] = [*business[:2], {"text": "done"}]
    document["hooks"] = []
    document["triggers"] = [{"on": {"purpose": "compaction", "ordinal": 2}, "do": {"write": {
        "target": "first_assistant", "field": "text", "value": "Z" * 1795}}}]
    return document


def _writer_check(trace: Trace) -> None:
    # As S9-CAS-REBUILT, with the change coming from outside the episode's own requests: chunk
    # 1 summarised the first decision, then another writer corrected it. The switch sees the
    # covered material changed and refuses (no summary becomes the head, no second episode, no
    # chunk asked again); loop 3 is rebuilt from the records as they are now — the corrected
    # decision, I = 4205 − 1500 + 1795 = 4500 = B (the content estimator) — and goes.
    equal(len(requests(trace, "compaction")), 2, "compaction requests")
    equal(len({e["episode_id"] for e in of(trace, "compaction")}), 1, "episodes")
    steps = [e["step"] for e in of(trace, "compaction")]
    expect("snapshot_active" not in steps and steps[-1] == "snapshot_refused",
           f"the episode's steps: {steps}")
    loop3 = requests(trace, "business")[2]
    equal((loop3["snapshot_id"], loop3["estimated_input_tokens"]), (None, 4500),
          "loop 3's snapshot and I")
    texts = [m["text"] for m in loop3["view"]["messages"]]
    expect("Z" * 1795 in texts and "A" * 1500 not in texts,
           "loop 3 does not show the written correction in place of the decision")
    expect(not any("SUM" in text for text in texts), "loop 3 shows the refused summary")
    equal(endings(trace), [(1, "succeeded", None)], "Run endings")


def _cas_takeover_scenario() -> dict[str, Any]:
    document = _cas_scenario("Z" * 1796)
    document["crash"] = {"phase": "snapshot_published", "occurrence": 1, "when": "before"}
    return document


def _cas_takeover_check(trace: Trace) -> None:
    # S9-CAS-OVER's Session dies just before the snapshot commit, both chunks committed and the
    # correction committed with chunk 2's hook decision. The takeover resumes the episode on
    # the material it started with — not on the records as they are now, which already carry
    # the correction and would make the summary of "A" × 1500 look applicable. So the switch is
    # still refused and the Run ends as uncrashed: CONTEXT_WINDOW_EXCEEDED at I = 4501, no
    # chunk or hook asked again.
    equal(len(of(trace, "restarted")), 1, "restarts")
    _cas_common(trace)
    equal(len(requests(trace, "business")), 2, "business requests")
    equal(endings(trace), [(1, "failed", "CONTEXT_WINDOW_EXCEEDED")], "Run endings")


CASES: tuple[Case, ...] = (
    Case("S9-INCREMENTS", "later loops reuse the summary and append only uncovered records",
         "§9", ("CTX-9.12", "CTX-9.19", "CTX-9.20", "CTX-9.23"), _increments_scenario(),
         _increments_check, COMPACTING),
    Case("S9-CHUNK-RESUME", "a takeover continues the same episode with the same chunk keys",
         "§9", ("CTX-9.38", "CTX-9.39", "CTX-9.40", "CTX-8.73", "CTX-8.78"),
         _chunk_resume_scenario(), _chunk_resume_check, COMPACTING | {"crash_points"}),
    Case("S9-SNAPSHOT-TAKEOVER", "a takeover after the summary commit sends the prepared request "
         "without asking its hooks again", "§9", ("CTX-9.42",), _snapshot_takeover_scenario(),
         _snapshot_takeover_check, COMPACTING | {"hooks", "crash_points"}),
    Case("S9-CHUNK-RAW-SAVED", "a takeover after a chunk's raw answer was saved post-processes "
         "it without asking the summary model again", "§9", ("CTX-8.70", "CTX-9.43"),
         _raw_saved_scenario(), _raw_saved_check, COMPACTING | {"hooks", "crash_points"}),
    Case("S9-RESUMMARY", "a later episode folds the applicable summary; coverage is merged",
         "§9", ("CTX-9.21",), _resummary_scenario(), _resummary_check, COMPACTING),
    Case("S9-UNCOVERED-CHANGE", "an uncovered correction keeps the summary, a covered one "
         "sets it aside", "§9", ("CTX-9.22", "CTX-9.24"), _uncovered_scenario(),
         _uncovered_check, COMPACTING | {"hooks"}),
    Case("S9-FROZEN-BINDING", "a retry after compaction sends the frozen binding; the next "
         "Operation reads the new head", "§9", ("CTX-9.31", "CTX-9.34", "CTX-9.35"),
         _binding_scenario(), _binding_check, COMPACTING | {"triggers"}),
    Case("S9-NO-SECOND-ATTEMPT", "an update during the episode starts no second summary; the "
         "window check ends the Run", "§9", ("CTX-9.29",), _concurrent_scenario(),
         _concurrent_check, COMPACTING | {"triggers"}),
    Case("S9-SUMMARY-ATOMIC", "a crash before the snapshot commit loses nothing and shows the "
         "summary once", "§9", ("CTX-9.18",), _atomic_scenario(), _atomic_check,
         COMPACTING | {"crash_points", "history_api"}),
    Case("S9-CAS-REBUILT", "covered material changed during the episode: the summary is not "
         "made the head, the view is rebuilt and sent at I = B", "§9",
         ("CTX-9.30", "CTX-9.33", "CTX-8.12"), _cas_scenario("Z" * 1795), _cas_rebuilt_check,
         COMPACTING | {"hooks"}),
    Case("S9-CAS-WRITER", "covered material changed by an independent writer during the "
         "episode: the summary is not made the head, the view is rebuilt", "§9",
         ("CTX-9.30", "CTX-9.33"), _writer_scenario(), _writer_check,
         COMPACTING | {"triggers", "writer"}),
    Case("S9-CAS-OVER", "covered material changed during the episode and the rebuilt request is "
         "one token over B: the Run ends, nothing is summarised again", "§9",
         ("CTX-9.33", "CTX-9.29"), _cas_scenario("Z" * 1796), _cas_over_check,
         COMPACTING | {"hooks"}),
    Case("S9-CAS-TAKEOVER", "a takeover before the snapshot commit resumes the episode on its "
         "own material: the changed coverage is still refused", "§9",
         ("CTX-9.33", "CTX-9.30"), _cas_takeover_scenario(), _cas_takeover_check,
         COMPACTING | {"hooks", "crash_points"}),
)
