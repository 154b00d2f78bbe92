"""Conformance cases for normative statements of §9 outside the §12 table and the worked
examples (IDs ``S9-<name>``): each a scenario and a predicate over the neutral trace, its
expected values derived by hand from the design (see conformance/case.py)."""

from typing import Any

from ctxspec.conformance.case import (
    Case,
    Trace,
    base,
    endings,
    equal,
    example,
    expect,
    lines,
    of,
    requests,
)


def _boundary(**agent: Any) -> dict[str, Any]:
    """W = 5000, O = 400, S = 100: B = 4500, trigger 3600. Run 1 leaves "a" × 1000, "b" × 1000
    and its 24-character outcome; Run 2 asks "Q" × 1573 (see ROW-04-AT)."""
    document = base(window=5000, **agent)
    document["steps"] = [{"ask": "a" * 1000}, {"advance": True}, {"ask": "Q" * 1573},
                         {"advance": True}]
    document["model"] = {"business": [{"text": "b" * 1000}, {"text": "done"}],
                         "compaction": [{"text": "SUMMARY"}]}
    return document


# --- later loops: the summary once, uncovered increments appended, protected inputs kept -------


def _increments_scenario() -> dict[str, Any]:
    document = _boundary(tools=[{"name": "t"}])
    document["model"]["business"] = [{"text": "b" * 1000},
                                     {"text": "c", "tool_calls": [{"name": "t"}]},
                                     {"text": "done"}]
    document["tools"] = {"t": [{"text": "r"}]}
    return document


def _increments_check(trace: Trace) -> None:
    # Run 2's first loop: I = "sys" 3 + Run 1's 2024 + the question 1573 + the tool schema 47 =
    # 3647 ≥ 3600: Run 1 is summarised (the question is not: it is a current protected input).
    # The second loop reuses the snapshot — still applicable, nothing covered changed — and
    # appends only what came after it: the decision "c" with its call written out and the
    # result "r". I = 3 + (30 + 7) + 1573 + ("c\nt({})" 7) + 1 + 47 = 1668 < 3600: no new
    # episode, and none of Run 1's covered text comes back.
    equal([r["purpose"] for r in requests(trace)],
          ["business", "compaction", "business", "business"], "requests")
    material = "\n".join(m["text"] for m in requests(trace, "compaction")[0]["view"]["messages"])
    expect("a" * 1000 in material and "b" * 1000 in material, "the material lacks Run 1")
    expect("Q" * 1573 not in material, "the current question was sent to be summarised")
    first, second = requests(trace, "business")[1:]
    expect(first["snapshot_id"] is not None, "Run 2's first loop names no snapshot")
    equal(second["snapshot_id"], first["snapshot_id"], "the snapshot of Run 2's second loop")
    summary = ("system", "summary", "[summary of earlier material]\nSUMMARY")
    equal([line for line in lines(second) if line[1] not in ("assistant", "tool_result")],
          [("system", "system_prompt", "sys"), summary, ("user", "user_ref", "Q" * 1573)],
          "Run 2's second loop without its own increments")
    equal([(role, kind) for role, kind, _ in lines(second)][3:],
          [("assistant", "assistant"), ("tool", "tool_result")],
          "the increments appended after the question")
    equal(lines(second)[4][2], "r", "the tool result appended")
    texts = "\n".join(text for _, _, text in lines(second))
    expect("a" * 1000 not in texts and "b" * 1000 not in texts,
           "Run 2's second loop shows covered material again")
    equal((second["compaction"], second["estimated_input_tokens"]), ("below_trigger", 1668),
          "Run 2's second loop (§8 decision, I)")
    equal(endings(trace), [(1, "succeeded", None), (2, "succeeded", None)], "Run endings")


# --- recovery: the same episode, the same chunk Operations --------------------------------------


def _chunk_resume_scenario() -> dict[str, Any]:
    return {**example("compaction-three-chunks-window-exceeded"),
            "crash": {"commit": "CHUNK_COMMITTED", "occurrence": 2, "when": "after"}}


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
    document = _boundary()
    document["hooks"] = [{"point": "model.pre_request", "items": [{}]}]
    document["crash"] = {"commit": "SNAPSHOT_COMMITTED", "occurrence": 1, "when": "after"}
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
                            ("system", "summary", "[summary of earlier material]\nSUMMARY"),
                            ("user", "user_ref", "Q" * 1573)], "Run 2's request")
    equal(endings(trace), [(1, "succeeded", None), (2, "succeeded", None)], "Run endings")


# --- recovery: a chunk whose raw answer is saved is post-processed, never asked again ----------


def _raw_saved_scenario() -> dict[str, Any]:
    return {**example("compaction-three-chunks-window-exceeded"),
            "hooks": [{"point": "compaction.post_response", "items": [{}]}],
            "crash": {"commit": "CHUNK_RAW_SAVED", "occurrence": 2, "when": "after"}}


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


_COMPACTION = frozenset({"compaction", "estimator_injection"})

CASES: tuple[Case, ...] = (
    Case("S9-INCREMENTS", "later loops reuse the summary and append only uncovered records",
         "§9", ("CTX-9.12", "CTX-9.19", "CTX-9.20", "CTX-9.23"), _increments_scenario(),
         _increments_check, _COMPACTION),
    Case("S9-CHUNK-RESUME", "a takeover continues the same episode with the same chunk keys",
         "§9", ("CTX-9.38", "CTX-9.39", "CTX-9.40", "CTX-8.73", "CTX-8.78"),
         _chunk_resume_scenario(), _chunk_resume_check, _COMPACTION | {"crash_points"}),
    Case("S9-SNAPSHOT-TAKEOVER", "a takeover after the summary commit sends the prepared request "
         "without asking its hooks again", "§9", ("CTX-9.42",), _snapshot_takeover_scenario(),
         _snapshot_takeover_check, _COMPACTION | {"hooks", "crash_points"}),
    Case("S9-CHUNK-RAW-SAVED", "a takeover after a chunk's raw answer was saved post-processes "
         "it without asking the summary model again", "§9", ("CTX-8.70", "CTX-9.43"),
         _raw_saved_scenario(), _raw_saved_check, _COMPACTION | {"hooks", "crash_points"}),
)
