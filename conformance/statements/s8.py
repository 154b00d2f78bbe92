"""Conformance cases for normative statements of §8 outside the §12 table and the worked
examples (IDs ``S8-<name>``), the compaction episode: its requests, its hook points, its cursor,
and the business request that waits for it. The summary's target, its chunks' attempts and its
material are in ``s8_summary.py``. Each case stands beside its scenario and check, its expected
values derived by hand from the design (see conformance/case.py)."""

from collections.abc import Callable
from typing import Any

from ctxspec.conformance.case import (
    COMPACTING,
    Case,
    Trace,
    endings,
    equal,
    example,
    expect,
    lines,
    of,
    requests,
)
from ctxspec.conformance.sessions import boundary

CHUNKS = "compaction-three-chunks-window-exceeded"
"""The worked example: Run 2 compacts Run 1's process in three chunks (S1, S2, S3), then ends
CONTEXT_WINDOW_EXCEEDED; W = 4000, O = 400, S = 100, B = 3500, the chars estimator."""

HOOKED = COMPACTING | {"hooks"}


def texts(request: dict[str, Any]) -> str:
    return "\n".join(m["text"] for m in request["view"]["messages"])


# --- the compaction request: its own prompt, transcript data, T as its output ------------------


def _prompt_scenario() -> dict[str, Any]:
    return example(CHUNKS)


def _prompt_check(trace: Trace) -> None:
    custom = example(CHUNKS)["agent"]["custom_compaction_prompt"]
    chunks = requests(trace, "compaction")
    equal(len(chunks), 3, "compaction requests")
    summaries = ["S1: report 1 says revenue grew.", "S2: reports 1-2: revenue grew, costs fell."]
    reports = ["revenue-grew", "costs-fell-ok", "margin-is-up"]
    for n, chunk in enumerate(chunks, 1):
        messages = chunk["view"]["messages"]
        # §8 Prompt: the platform's default system prompt — not the role's ("You are an
        # analyst.") — the same for every chunk; the Agent's custom prompt is a user message
        # beside it, never replacing it; the rest is transcript data in user messages, no
        # assistant or provider tool message.
        equal((messages[0]["role"], messages[0]["kind"]), ("system", "system_prompt"),
              f"chunk {n}'s first message")
        expect("You are an analyst." not in texts(chunk),
               f"chunk {n} carries the business system prompt")
        equal(messages[0]["text"], chunks[0]["view"]["messages"][0]["text"],
              f"chunk {n}'s system prompt (the same default for every chunk)")
        equal(sum(1 for m in messages if m["role"] == "system"), 1,
              f"system messages in chunk {n}")
        expect(("user", custom) in [(m["role"], m["text"]) for m in messages],
               f"chunk {n} lacks the custom prompt as a user message")
        equal(sorted({m["role"] for m in messages[1:]}), ["user"],
              f"roles after the system prompt in chunk {n} (transcript data only)")
        # Sequential fold: chunk n holds report n and the summary of chunk n − 1.
        expect(reports[n - 1] in texts(chunk), f"chunk {n} lacks report {n}")
        if n > 1:
            expect(summaries[n - 2] in texts(chunk), f"chunk {n} lacks S{n - 1}")
        # T: F = the role's system 19 + the question + the 30-character summary envelope < 500,
        # H = 3500 − F > 400, P = min(O = 400, H) = 400, C = min(8192, floor(3500 / 4) = 875,
        # 400) = 400, D = floor(0.6 × 3500) − F = 2100 − F > 1600 → T = min(400, D) = 400.
        equal(chunk["max_output_tokens"], 400, f"chunk {n}'s max output tokens (T)")
        # The custom prompt counts toward the request (1724 with the content estimator; the
        # platform's default prompt and the data framing are the runtime's and count 0): chunk
        # 1 = 1724 + the question 26 + report 1 832; chunk 2 = 1724 + S1 31 + report 2 896;
        # chunk 3 = 1724 + S2 42 + report 3 832 + the final answer 20.
        equal(chunk["estimated_input_tokens"], [2582, 2651, 2618][n - 1],
              f"chunk {n}'s I (the custom prompt included)")
        expect(chunk["estimated_input_tokens"] + chunk["max_output_tokens"]
               + chunk["safety_margin"] <= chunk["window"], f"chunk {n} exceeds the window")
        # The compactor's own request is never evaluated for compaction.
        equal(chunk["compaction"], None, f"chunk {n}'s §8 decision")
    equal([e["step"] for e in of(trace, "compaction")].count("planned"), 1, "episodes planned")


S8_COMPACTION_PROMPT = Case(
    "S8-COMPACTION-PROMPT", "chunk requests: the default system prompt, the custom prompt "
    "as a user message, transcript data folded in order, T as max output", "§8",
    ("CTX-8.1", "CTX-8.2", "CTX-8.4", "CTX-8.16", "CTX-8.17", "CTX-8.18", "CTX-8.24",
     "CTX-8.25", "CTX-8.44", "CTX-8.62", "CTX-8.67", "CTX-8.69"),
    _prompt_scenario(), _prompt_check, COMPACTING)


# --- every chunk call passes through the compaction hook points ---------------------------------


def _pipeline_scenario() -> dict[str, Any]:
    document = example(CHUNKS)
    document["hooks"] = [{"point": "compaction.pre_request", "items": [{}]},
                         {"point": "compaction.post_response", "items": [{}]}]
    return document


def _pipeline_check(trace: Trace) -> None:
    # Three chunk calls, each asked through compaction.pre_request before it is sent and its
    # answer through compaction.post_response after it: (pre, request, post) three times.
    seen = [(e["point"], e["stage"]) if e["kind"] == "hook_called" else ("request", e["purpose"])
            for e in trace if e["kind"] == "hook_called"
            or (e["kind"] == "model_request" and e["purpose"] == "compaction")]
    equal(seen, [("compaction.pre_request", "pre"), ("request", "compaction"),
                 ("compaction.post_response", "post")] * 3,
          "hook chains around the chunk requests")
    equal(endings(trace)[-1], (2, "failed", "CONTEXT_WINDOW_EXCEEDED"), "Run 2's ending")


S8_COMPACTION_PIPELINE = Case(
    "S8-COMPACTION-PIPELINE", "every chunk call passes both compaction hook points",
    "§8", ("CTX-8.8", "CTX-8.19"), _pipeline_scenario(), _pipeline_check, HOOKED)


# --- a failing hook item is dropped; a deny or a failed chunk fails the episode ------------------


def _hook_fails_scenario() -> dict[str, Any]:
    document = boundary()
    document["hooks"] = [{"point": "compaction.post_response", "items": [
        {"fails": True},
        {"payload_patch": [{"path": "summary", "value": "SUMMARY (redacted)"}]}]}]
    return document


def _hook_fails_check(trace: Trace) -> None:
    # The first item's handler fails: only it is dropped; the second item's legitimate patch of
    # the registered "summary" field is what the business request carries.
    equal([(d["point"], d["decision"], d["patch_valid"]) for d in of(trace, "hook_decided")],
          [("compaction.post_response", "failed", False),
           ("compaction.post_response", "allow", True)], "hook decisions")
    business = requests(trace, "business")[-1]
    expect(("system", "summary", "SUMMARY (redacted)")
           in lines(business), "the business request lacks the hook-changed summary")
    equal(endings(trace), [(1, "succeeded", None), (2, "succeeded", None)], "Run endings")


S8_COMPACTION_HOOK_FAILS = Case(
    "S8-COMPACTION-HOOK-FAILS", "a failing compaction hook item is dropped alone", "§8",
    ("CTX-8.20", "CTX-8.21"), _hook_fails_scenario(), _hook_fails_check, HOOKED)


def _denied_scenario() -> dict[str, Any]:
    document = example(CHUNKS)
    document["hooks"] = [{"point": "compaction.post_response", "ordinal": 2,
                          "items": [{"decision": "deny"}]}]
    return document


def _failed_chunk_scenario() -> dict[str, Any]:
    document = example(CHUNKS)
    # One attempt per model Operation, so chunk 2's only attempt is its final one (whether a
    # chunk inherits the role's retries is a question of its own; this case does not depend on
    # it).
    document["agent"]["model_attempts"] = 1
    compaction = document["model"]["compaction"]
    document["model"]["compaction"] = [compaction[0], {"fail": "reset"}]
    return document


def episode_failed(attempts: list[tuple[int, int]]) -> Callable[[Trace], None]:
    def check(trace: Trace) -> None:
        # Chunk 2's final response is denied (or its last attempt fails): the episode fails,
        # chunk 3 is never asked, no summary is pretended — Run 2 ends COMPACTION_FAILED and
        # sends no business request of its own.
        chunks = requests(trace, "compaction")
        ordinals = [int(r["purpose_key"].rsplit(":", 1)[1]) for r in chunks]
        equal([(o, r["attempt"]) for o, r in zip(ordinals, chunks, strict=True)], attempts,
              "(chunk, attempt) of the compaction requests")
        equal(len(requests(trace, "business")), 4, "business requests (Run 1's four only)")
        equal(endings(trace), [(1, "succeeded", None), (2, "failed", "COMPACTION_FAILED")],
              "Run endings")
    return check


S8_COMPACTION_DENIED = Case(
    "S8-COMPACTION-DENIED", "a denied chunk answer fails the episode and the Run", "§8",
    ("CTX-8.9", "CTX-8.20", "CTX-8.22"), _denied_scenario(),
    episode_failed([(1, 1), (2, 1)]), HOOKED)


S8_CHUNK_FAILS = Case(
    "S8-CHUNK-FAILS", "a chunk whose attempts all fail fails the episode and the Run", "§8",
    ("CTX-8.9", "CTX-8.75"), _failed_chunk_scenario(),
    episode_failed([(1, 1), (2, 1)]), COMPACTING)


# --- a compaction hook cannot forge the sources or the cutoff ------------------------------------


def _forged_scenario() -> dict[str, Any]:
    document = boundary()
    document["hooks"] = [{"point": "compaction.pre_request", "items": [{"payload_patch": [
        {"path": "source_manifest", "value": []}, {"path": "cutoff", "value": 99}]}]}]
    return document


def _forged_check(trace: Trace) -> None:
    # compaction.pre_request registers no writable field: both writes are refused, the allow
    # goes on with the request as it was.
    equal([(d["decision"], d["patch_valid"], d["diagnostics"]) for d in of(trace, "hook_decided")],
          [("allow", False, ["FIELD_NOT_REGISTERED", "FIELD_NOT_REGISTERED"])],
          "the hook item's decision")


def _same_compaction(trace: Trace, baseline: Trace) -> None:
    # ... and the chunk summarises exactly what it does without the hook, with the same outcome.
    equal([lines(r) for r in requests(trace, "compaction")],
          [lines(r) for r in requests(baseline, "compaction")],
          "the compaction requests (against the scenario without the hook)")
    equal(endings(trace), endings(baseline), "Run endings (against the scenario without the hook)")


S8_COMPACTION_PATCH = Case(
    "S8-COMPACTION-PATCH", "a compaction hook cannot forge the sources or the cutoff", "§8",
    ("CTX-8.23",), _forged_scenario(), _forged_check, HOOKED,
    baseline=boundary(), compare=_same_compaction)


# --- the model cannot advance the cursor ----------------------------------------------------------


def _cursor_scenario() -> dict[str, Any]:
    document = example(CHUNKS)
    claim = {"text": '{"chunk_cursor": 3, "covered_through": "everything", "status": "succeeded"}'}
    document["model"]["compaction"] = [claim, *document["model"]["compaction"][1:]]
    return document


def _cursor_check(trace: Trace) -> None:
    # Chunk 1's answer claims the episode is done. It is only summary text: chunks 2 and 3 are
    # still asked, each once, and chunk 2 gets the claim as its previous summary (data).
    chunks = requests(trace, "compaction")
    equal([(int(r["purpose_key"].rsplit(":", 1)[1]), r["attempt"]) for r in chunks],
          [(1, 1), (2, 1), (3, 1)], "(chunk, attempt) of the compaction requests")
    expect('"chunk_cursor": 3' in texts(chunks[1]), "chunk 2 lacks chunk 1's summary")
    equal(endings(trace)[-1], (2, "failed", "CONTEXT_WINDOW_EXCEEDED"), "Run 2's ending")


S8_MODEL_CURSOR = Case(
    "S8-MODEL-CURSOR", "a summary claiming the episode is done advances nothing", "§8",
    ("CTX-8.79",), _cursor_scenario(), _cursor_check, COMPACTING)


# --- the business request waits for the episode ---------------------------------------------------


def _waits_check(trace: Trace) -> None:
    # loop_limit = 1: each Run has one business loop. Run 2's request is prepared, waits for the
    # episode (its chunk request comes first), then is sent once with the snapshot: the summary
    # in place of Run 1 and the question verbatim — the chunk did not use up Run 2's loop.
    equal([r["purpose"] for r in requests(trace)], ["business", "compaction", "business"],
          "requests in order")
    business = requests(trace, "business")[-1]
    equal((business["attempt"], business["compaction"]), (1, "compact"),
          "Run 2's request (attempt, §8 decision)")
    expect(business["snapshot_id"] is not None, "Run 2's request names no snapshot")
    equal(lines(business), [("system", "system_prompt", "sys"),
                            ("system", "summary", "SUMMARY"),
                            ("user", "user_ref", "Q" * 1597)], "Run 2's request")
    equal(endings(trace), [(1, "succeeded", None), (2, "succeeded", None)], "Run endings")


S8_EPISODE_WAITS = Case(
    "S8-EPISODE-WAITS", "the prepared business request waits for the episode, uses no "
    "loop for it, and goes with the snapshot", "§8",
    ("CTX-8.3", "CTX-8.5", "CTX-8.6", "CTX-8.13"), boundary(loop_limit=1), _waits_check,
    COMPACTING)


def _stopped_scenario() -> dict[str, Any]:
    document = boundary()
    document["triggers"] = [{"on": {"purpose": "compaction", "ordinal": 1},
                             "do": {"stop": True}}]
    return document


def _stopped_check(trace: Trace) -> None:
    # The user stops Run 2 while its chunk is summarised: the episode is under the Run's
    # cancellation, so the business request is never sent and Run 2 ends stopped.
    equal([r["purpose"] for r in requests(trace)], ["business", "compaction"], "requests")
    equal(endings(trace), [(1, "succeeded", None), (2, "stopped", None)], "Run endings")


S8_STOP_DURING_COMPACTION = Case(
    "S8-STOP-DURING-COMPACTION", "a stop during the episode sends no business request",
    "§8", ("CTX-8.7",), _stopped_scenario(), _stopped_check, COMPACTING | {"triggers"})


CASES: tuple[Case, ...] = (
    S8_COMPACTION_PROMPT, S8_COMPACTION_PIPELINE, S8_COMPACTION_HOOK_FAILS,
    S8_COMPACTION_DENIED, S8_CHUNK_FAILS, S8_COMPACTION_PATCH, S8_MODEL_CURSOR,
    S8_EPISODE_WAITS, S8_STOP_DURING_COMPACTION,
)
