"""Conformance cases for normative statements of §8 about the summary (IDs ``S8-<name>``): its
target T, a chunk's model attempts, a result still above the trigger or at T, and the material a
chunk carries. The episode itself is in ``s8.py``. Each case stands beside its scenario and
check, its expected values derived by hand from the design (see conformance/case.py)."""

import itertools
import re
from collections.abc import Callable
from typing import Any

from ctxspec.conformance.case import (
    COMPACTING,
    Case,
    Trace,
    base,
    ending_figures,
    endings,
    equal,
    exactly,
    example,
    expect,
    lines,
    of,
    requests,
)
from ctxspec.conformance.sessions import boundary
from ctxspec.conformance.statements.s8 import CHUNKS, HOOKED, episode_failed, texts

# --- summary targets --------------------------------------------------------------------------


def _target_check(target: int) -> Callable[[Trace], None]:
    def check(trace: Trace) -> None:
        equal([(r["purpose"], r["max_output_tokens"]) for r in requests(trace)][1:],
              [("compaction", target), ("business", 400)], "Run 2's requests (purpose, max output)")
        equal(endings(trace)[-1], (2, "succeeded", None), "Run 2's ending")
    return check


# An explicit target below P: T = min(100, P = min(O = 400, H)) = 100.


S8_TARGET_EXPLICIT = Case(
    "S8-TARGET-EXPLICIT", "an explicit summary target is the chunk's max output", "§8",
    ("CTX-8.39",), boundary(summary_target=100), _target_check(100), COMPACTING)


# A known provider limit of 250 is part of P = min(400, 250, H) = 250; the explicit 1000 is


# capped: T = min(1000, 250) = 250.


S8_TARGET_PROVIDER_LIMIT = Case(
    "S8-TARGET-PROVIDER-LIMIT", "a known provider output limit caps the summary target",
    "§8", ("CTX-8.39", "CTX-8.42"),
    boundary(summary_target=1000, provider_output_limit=250), _target_check(250),
    COMPACTING)


def _soft_target(question: int, asked: int, answered: int) -> dict[str, Any]:
    # W = 200001, O = 20000, S = 2000: B = 178001, trigger floor(0.8 × 178001) = 142400.
    document = base(window=200_001, output_reserve=20_000, safety_margin=2000)
    document["steps"] = [{"ask": "m" * asked}, {"advance": True}, {"ask": "Q" * question},
                         {"advance": True}]
    document["model"] = {"business": [{"text": "n" * answered}, {"text": "done"}],
                         "compaction": [{"text": "s" * 10}]}
    return document


def _soft_check(target: int, sent: int) -> Callable[[Trace], None]:
    def check(trace: Trace) -> None:
        equal([(r["purpose"], r["max_output_tokens"]) for r in requests(trace)][1:],
              [("compaction", target), ("business", 20_000)],
              "Run 2's requests (purpose, max output)")
        equal(requests(trace, "business")[-1]["estimated_input_tokens"], sent,
              "I of Run 2's business request")
        equal(endings(trace)[-1], (2, "succeeded", None), "Run 2's ending")
    return check


# F = 3 + 101797 = 101800 (the summary's envelope is the runtime's and counts 0), M =


# "m" × 20000 + "n" × 21000 = 41000, I = 142800 ≥ 142400. H = 76200,


# P = min(20000, H) = 20000, C = min(8192,


# floor(178001 / 4) = 44500, 20000) = 8192, D = floor(0.6 × 178001) − F = floor(106800.6)


# − 101800 = 5000 → T = min(8192, 5000) = 5000 (round() would say 5001). The summary of 10


# re-assembles to 101800 + 10 = 101810.


S8_SOFT_TARGET = Case(
    "S8-SOFT-TARGET", "T leaves the input at 60% of B when that is below the cap", "§8",
    ("CTX-8.29", "CTX-8.31", "CTX-8.32", "CTX-8.43"), _soft_target(101_797, 20_000, 21_000),
    _soft_check(5000, 101_810), COMPACTING)


# F = 3 + 50000 = 50003, M = 46000 + 46500 = 92500, I = 142503 ≥ 142400.


# D = 106800 − 50003 = 56797 > C = min(8192, 44500, 20000) = 8192 → T = A = 8192; the


# summary of 10 re-assembles to 50013.


S8_TARGET_CAP = Case(
    "S8-TARGET-CAP", "T is capped at A = 8192", "§8", ("CTX-8.31", "CTX-8.33"),
    _soft_target(50_000, 46_000, 46_500), _soft_check(8192, 50_013), COMPACTING)


def _too_large_scenario() -> dict[str, Any]:
    document = base()
    document["steps"] = [{"ask": "Q" * 3600}, {"advance": True}]
    document["model"] = {"business": [{"text": "never asked"}]}
    return document


def _too_large_check(trace: Trace) -> None:
    # B = 4000 − 400 − 100 = 3500; I = "sys" 3 + 3600 = 3603 > B with nothing compressible:
    # CONTEXT_PROTECTED_INPUT_TOO_LARGE, no request (no summary call either), and the message
    # gives the fixed input and the budget.
    equal(requests(trace), [], "requests")
    equal(endings(trace), [(1, "failed", "CONTEXT_PROTECTED_INPUT_TOO_LARGE")], "Run endings")
    ending_figures(trace, {"fixed_input_tokens": 3603, "input_budget": 3500},
                   "the fixed input and the budget")


S8_PROTECTED_TOO_LARGE = Case(
    "S8-PROTECTED-TOO-LARGE", "a fixed input over B with nothing to summarise is refused",
    "§8", ("CTX-8.49",), _too_large_scenario(), _too_large_check,
    frozenset({"estimator_injection"}))


# --- a chunk inherits the role's model attempts (CTX-8.2, CTX-8.75) ------------------------------


def _chunk_retry_scenario(attempts: int, failures: int) -> dict[str, Any]:
    """The worked example with chunk 2's first ``failures`` attempts failing (a connection
    reset) before the rest of the script: S2, then S3 as before."""
    document = example(CHUNKS)
    document["agent"]["model_attempts"] = attempts
    summaries = document["model"]["compaction"]
    document["model"]["compaction"] = [summaries[0], *[{"fail": "reset"}] * failures,
                                       *summaries[1:]]
    return document


def _chunk_attempts(trace: Trace) -> list[tuple[str, int]]:
    return [(r["purpose_key"], r["attempt"]) for r in requests(trace, "compaction")]


def _chunk_retried_check(trace: Trace) -> None:
    # model_attempts = 2 (the role's connection retries, which the episode inherits): chunk 2's
    # attempt 1 fails, so the same Operation is asked again — the same purpose_key
    # compaction:<episode>:chunk:2, attempt 2 — and answers S2. Not the final failure, so the
    # episode goes on: chunk 3 folds S2 at attempt 1, and Run 2 ends as the worked example
    # does (the long S3 still exceeds the window). The compaction uses no business attempt.
    sent = _chunk_attempts(trace)
    equal([(key.rsplit(":", 1)[1], attempt) for key, attempt in sent],
          [("1", 1), ("2", 1), ("2", 2), ("3", 1)], "(chunk, attempt) of the compaction requests")
    equal(sent[1][0], sent[2][0], "the purpose_key of chunk 2's two attempts")
    equal(len({key.rsplit(":", 2)[0] for key, _ in sent}), 1, "episodes in the purpose keys")
    expect("S2: reports 1-2: revenue grew, costs fell." in texts(requests(trace, "compaction")[3]),
           "chunk 3 lacks the S2 of chunk 2's second attempt")
    equal([r["attempt"] for r in requests(trace, "business")], [1, 1, 1, 1],
          "business attempts (Run 1's four, each at attempt 1)")
    equal(endings(trace), [(1, "succeeded", None), (2, "failed", "CONTEXT_WINDOW_EXCEEDED")],
          "Run endings")


S8_CHUNK_RETRIED = Case(
    "S8-CHUNK-RETRIED", "a failed chunk attempt is retried as the next attempt of the same "
    "purpose key, with the role's model attempts", "§8", ("CTX-8.2", "CTX-8.75"),
    _chunk_retry_scenario(2, 1), _chunk_retried_check, COMPACTING)


# The same script with model_attempts = 1: the one failure is chunk 2's last attempt, so the


# episode fails at once; S2 and S3, still in the script, are never asked for.


S8_CHUNK_ONE_ATTEMPT = Case(
    "S8-CHUNK-ONE-ATTEMPT", "with one model attempt a chunk's failure is final", "§8",
    ("CTX-8.2", "CTX-8.75"), _chunk_retry_scenario(1, 1),
    episode_failed([(1, 1), (2, 1)]), COMPACTING)


# model_attempts = 2 and both of chunk 2's attempts fail: only the second is final.


S8_CHUNK_LAST_ATTEMPT = Case(
    "S8-CHUNK-LAST-ATTEMPT", "a chunk fails the episode only when its last attempt fails",
    "§8", ("CTX-8.2", "CTX-8.75"), _chunk_retry_scenario(2, 2),
    episode_failed([(1, 1), (2, 1), (2, 2)]), COMPACTING)


# --- the same rules with one summary request: no chunked fold needed --------------------------


def _one_summary(attempts: int, *answers: dict[str, Any]) -> dict[str, Any]:
    """sessions.boundary (Run 2 at the trigger, Run 1 summarised in one request) with the
    role's ``attempts`` and the summary requests answering ``answers``."""
    document = boundary(model_attempts=attempts)
    document["model"]["compaction"] = list(answers)
    return document


def _summary_fails_check(trace: Trace) -> None:
    # model_attempts = 1 and the one summary request fails: that is its final attempt, so the
    # compaction fails, no summary is pretended and Run 2 ends COMPACTION_FAILED without a
    # business request of its own (§8, §11).
    equal([(r["purpose"], r["attempt"]) for r in requests(trace)],
          [("business", 1), ("compaction", 1)], "(purpose, attempt) of the requests")
    equal(endings(trace), [(1, "succeeded", None), (2, "failed", "COMPACTION_FAILED")],
          "Run endings")


S8_SUMMARY_FAILS = Case(
    "S8-SUMMARY-FAILS", "a summary request whose last attempt fails fails the compaction and "
    "the Run", "§8", ("CTX-8.75", "CTX-8.9"),
    _one_summary(1, {"fail": "reset"}), _summary_fails_check, COMPACTING)


def _summary_retried_check(trace: Trace) -> None:
    # model_attempts = 2: the summary request's attempt 1 breaks after a partial output (no
    # summary: U-FAILED-SUMMARY holds every request to showing none of it), so the same
    # Operation is asked
    # again — the same purpose_key, attempt 2 — and its "SUMMARY" is what Run 2's request
    # shows in place of Run 1; both Runs succeed.
    sent = requests(trace)
    equal([(r["purpose"], r["attempt"]) for r in sent],
          [("business", 1), ("compaction", 1), ("compaction", 2), ("business", 1)],
          "(purpose, attempt) of the requests")
    equal(sent[1]["purpose_key"], sent[2]["purpose_key"], "the purpose_key of both attempts")
    expect(("system", "summary", "SUMMARY") in lines(sent[3]),
           "Run 2's request lacks the summary of the second attempt")
    equal(endings(trace), [(1, "succeeded", None), (2, "succeeded", None)], "Run endings")


S8_SUMMARY_RETRIED = Case(
    "S8-SUMMARY-RETRIED", "a failed summary attempt is retried as the next attempt of the same "
    "purpose key", "§8", ("CTX-8.2", "CTX-8.75"),
    _one_summary(2, {"partial": "Run 1 asked for a", "fail": "reset"}, {"text": "SUMMARY"}),
    _summary_retried_check,
    COMPACTING)


# --- after a compaction still above the trigger ------------------------------------------------


def _above_trigger_scenario() -> dict[str, Any]:
    document = base(window=5000, tools=[{"name": "t"}])
    document["steps"] = [{"ask": "a" * 1000}, {"advance": True}, {"ask": "Q" * 1600},
                         {"advance": True}]
    document["model"] = {"business": [{"text": "b" * 1000},
                                      {"text": "", "tool_calls": [{"name": "t"}]},
                                      {"text": "done"}],
                         "compaction": [{"text": "s" * 2000}, {"text": "SUM2"}]}
    document["tools"] = {"t": [{"text": "x"}]}
    return document


def _above_trigger_check(trace: Trace) -> None:
    # B = 5000 − 400 − 100 = 4500, trigger floor(0.8 × 4500) = 3600 (the schema, the call's
    # framing, the outcome and the envelope are the runtime's and count 0).
    # Run 2's loop 1: 3 + Run 1 (1000 + 1000) + 1600 = 3603 ≥ 3600 → one episode;
    # the 2000-character summary re-assembles to F + S = (3 + 1600) + 2000 = 3603: at or above
    # the trigger but within B, so it is sent as it is, with no second episode for the same
    # operation. Loop 2 is a new business call, checked against the normal threshold: 3603 +
    # "x" 1 = 3604 ≥ 3600 → a new episode, which folds the old summary in: 1603 + "SUM2" 4 =
    # 1607.
    equal([r["purpose"] for r in requests(trace)],
          ["business", "compaction", "business", "compaction", "business"], "requests")
    run2 = requests(trace, "business")[1:]
    equal([(r["compaction"], r["estimated_input_tokens"]) for r in run2],
          [("compact", 3603), ("compact", 1607)], "Run 2's requests (§8 decision, I)")
    first = run2[0]
    expect(first["trigger_threshold"] <= first["estimated_input_tokens"]
           <= first["input_budget"], "loop 1 is not between the trigger and B")
    equal(endings(trace), [(1, "succeeded", None), (2, "succeeded", None)], "Run endings")


S8_ABOVE_TRIGGER_AFTER = Case(
    "S8-ABOVE-TRIGGER-AFTER", "a compacted request still above the trigger is sent; the "
    "next business call is checked again", "§8", ("CTX-8.80",),
    _above_trigger_scenario(), _above_trigger_check, COMPACTING)


# --- a summary that reaches T --------------------------------------------------------------------


def _at_cap_scenario() -> dict[str, Any]:
    document = boundary()
    document["model"]["compaction"] = [{"text": "s" * 400}]
    document["steps"].append({"read_history": {"kind": "audit"}})
    return document


def _at_cap_check(trace: Trace) -> None:
    # boundary(): B = 4500, F = 3 + 1597 = 1600, H = 2900, P = min(400, H) = 400,
    # C = min(8192, 1125, 400) = 400, D = 2700 − 1600 = 1100 → T = 400. The summary is exactly
    # 400 characters (T tokens) and completes normally: it is accepted — no quality check, no
    # second episode — and the business request carries it: 3 + 400 + 1597 = 2000. The
    # raw records it covers are not lost: the audit reader still gets Run 1's question and
    # answer beside Run 2's.
    equal([(r["purpose"], r["max_output_tokens"]) for r in requests(trace)][1:],
          [("compaction", 400), ("business", 400)], "Run 2's requests (purpose, max output)")
    business = requests(trace, "business")[-1]
    expect(("system", "summary", "s" * 400)
           in lines(business), "the business request lacks the summary at the cap")
    equal(business["estimated_input_tokens"], 2000, "I of Run 2's business request")
    equal(endings(trace), [(1, "succeeded", None), (2, "succeeded", None)], "Run endings")
    [read] = exactly(1, of(trace, "history_read"), "history_read events")
    equal((read["allowed"], sorted(read["message_kinds"])),
          (True, ["assistant", "assistant", "user_ref", "user_ref"]),
          "the audit read of the raw records")


S8_SUMMARY_AT_CAP = Case(
    "S8-SUMMARY-AT-CAP", "a summary that reaches T is accepted and no raw record is lost",
    "§8", ("CTX-8.54",), _at_cap_scenario(), _at_cap_check, COMPACTING | {"history_api"})


# --- the material: history order, effective facts, whole interactions, labelled fragments --------


def _order_scenario() -> dict[str, Any]:
    document = example(CHUNKS)
    for n, answer in enumerate(document["model"]["business"][:3], 1):
        answer["tool_calls"][0]["arguments"] = {"path": f"report-{n}.md"}
    document["hooks"] = [{"point": "tool.pre_call", "ordinal": 2, "items": [
        {"payload_patch": [{"path": "arguments.path", "value": "report-2-final.md"}]}]}]
    # The adjustment's mark in the requests after it (§6, §12 参数修改反馈) is the runtime's text
    # and counts 0 with the content estimator: Run 1 stays below 0.80 × B (45 + the three reports
    # 2560 + their paths < 2800) and the one episode is Run 2's, as in the example.
    return document


def _order_check(trace: Trace) -> None:
    # The worked example's episode (three chunks of Run 1's process), with the pre-call hook
    # moving call 2 to report-2-final.md, which is what the tool ran with. §8: the material is
    # the effective context in history order — the question, then each call with its result,
    # then the answer — carrying the executed arguments, never the proposed report-2.md. Each
    # call and its result travel together: chunk 1 has room left after report 1 for call 2
    # alone (about 150 characters) but not for its 900-character result, so the interaction
    # moves whole to chunk 2.
    marks = ["Collect the three reports.", "report-1.md", "revenue-grew", "report-2-final.md",
             "costs-fell-ok", "report-3.md", "margin-is-up", "Collected all three."]
    chunks = [texts(r) for r in requests(trace, "compaction")]
    equal([[m for m in marks if m in chunk] for chunk in chunks],
          [marks[:3], marks[3:5], marks[5:]], "what each chunk carries")
    material = "\n".join(chunks)
    equal(sorted(marks, key=material.find), marks, "the material's order")
    expect("report-2.md" not in material, "the material carries the proposed arguments")


S8_MATERIAL_ORDER = Case(
    "S8-MATERIAL-ORDER", "the material is the effective context in history order, each "
    "tool interaction within one chunk", "§8", ("CTX-8.63", "CTX-8.65"),
    _order_scenario(), _order_check, HOOKED)


def _oversize_text() -> str:
    words = ("".join(p) + " " for p in itertools.product("abcdefghij", repeat=3))
    return "".join(words)[:3000]


def _oversize_scenario() -> dict[str, Any]:
    document = base(tools=[{"name": "t"}], custom_compaction_prompt="K" * 300)
    document["steps"] = [{"ask": "go"}, {"advance": True}]
    document["model"] = {"business": [{"text": "", "tool_calls": [{"name": "t"}]},
                                      {"text": "done"}],
                         "compaction": [{"text": "S1"}, {"text": "S2"}, {"text": "S3"}]}
    document["tools"] = {"t": [{"text": _oversize_text()}]}
    return document


def _oversize_check(trace: Trace) -> None:
    # B = 3500, trigger 2800. Loop 2: "sys" 3 + "go" 2 + schema 47 + the call + the
    # 3000-character result ≥ 2800 → compact. F = 3 + 2 + 47 + 30 = 82, H = 3418,
    # P = min(400, H) = 400, C = min(8192, 875, 400) = 400, D = 2100 − 82 = 2018 → T = 400.
    # §8 chunk budget: W − S − T (output) − T (previous summary) = 4000 − 100 − 800 = 3100 for
    # the system prompt, the 300-character custom prompt and the chunk text with its labels;
    # so a chunk holds at most 3100 − 300 = 2800 characters of the result and the 3000-character
    # record must be split (at least ceil(3000 / 2800) = 2 chunks, as many as its length needs).
    chunks = requests(trace, "compaction")
    text = _oversize_text()
    pieces: list[tuple[int, int, str]] = []
    start = 0
    for chunk in chunks:
        body = texts(chunk)
        end = start
        while end < len(text) and text[start:end + 1] in body:
            end += 1
        if end - start >= 20:  # the words are unique: 20 characters are no accident
            pieces.append((start, end, body))
            start = end
    # Every character summarised once, in order, in at least two fragments.
    equal(start, len(text), "characters of the oversized result that reached a chunk")
    expect(len(pieces) >= 2, f"the 3000-character result was not split: {len(pieces)} piece")
    # Each fragment is labelled with the record's ID (the same identifier in every fragment's
    # chunk) and its character range (its start and end offsets, end inclusive or not); the
    # result holds no digit, so numbers come from the labels.
    uuid = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
    shared = set.intersection(*(set(re.findall(uuid, body)) for _, _, body in pieces))
    expect(bool(shared), "the fragments' chunks name no common record ID")
    for first, last, body in pieces:
        numbers = set(re.findall(r"\d+", re.sub(uuid, "", body)))
        expect(str(first) in numbers and bool({str(last), str(last - 1)} & numbers),
               f"the fragment {first}-{last} is not labelled with its range")
    # Each chunk request leaves T for the output and T for the previous summary: without the
    # previous summary's own text, its input stays within W − S − 2T.
    previous = ["", "S1", "S2"]
    for n, chunk in enumerate(chunks, 1):
        equal(chunk["max_output_tokens"], 400, f"chunk {n}'s T")
        seen = chunk["estimated_input_tokens"] - len(previous[n - 1])
        expect(seen <= 4000 - 100 - 2 * 400,
               f"chunk {n} leaves no room for the previous summary's T: I less the previous "
               f"summary is {seen} > W − S − 2T = 3100")
    equal(endings(trace), [(1, "succeeded", None)], "Run endings")


S8_OVERSIZE_RECORD = Case(
    "S8-OVERSIZE-RECORD", "an oversized record is split into labelled ranges within a chunk "
    "budget that reserves the previous summary's T", "§8",
    ("CTX-8.66", "CTX-8.68", "CTX-8.71"), _oversize_scenario(), _oversize_check,
    COMPACTING)


# --- a chunk too small to be useful: refused before any summary call (Q120) -----------------


def _useless_chunk_scenario() -> dict[str, Any]:
    document = base(tools=[{"name": "t"}], window=6100, output_reserve=2400,
                    summary_target=2200)
    document["steps"] = [{"ask": "go"}, {"advance": True}]
    document["model"] = {"business": [{"text": "", "tool_calls": [{"name": "t"}]},
                                      {"text": "done"}],
                         "compaction": [{"text": f"S{n}"} for n in range(1, 13)]}
    document["tools"] = {"t": [{"text": "r" * 3500}]}
    return document


def _useless_chunk_check(trace: Trace) -> None:
    # W = 6100, O = 2400, S = 100: B = 3600, trigger floor(0.8 × 3600) = 2880. Loop 2 carries
    # the 3500-character result: I > 2880 → compact. F (the system prompt, the question "go",
    # the tool schema and the summary envelope) is far below 1400, so H = 3600 − F > 2200,
    # P = min(O, H) ≥ 2200 and T = min(2200, P) = 2200 (explicit); C = min(8192, 900, P) = 900.
    # A useful chunk carries max(T, C) = 2200 tokens of material (Q120). Every chunk request
    # reserves T for its output, T for the previous summary and S: W − 2T − S = 1600 tokens are
    # all that is left for the compaction prompt, the labels and the material — less than 2200
    # whatever the prompt. The episode is refused before any summary call: no compaction
    # request, no second business request, the Run fails COMPACTION_FAILED (Q120).
    equal(len(requests(trace, "compaction")), 0, "compaction requests")
    equal(len(requests(trace, "business")), 1, "business requests (Loop 1's only)")
    equal(endings(trace), [(1, "failed", "COMPACTION_FAILED")], "Run endings")


S8_CHUNK_FLOOR = Case(
    "S8-CHUNK-FLOOR", "a chunk that cannot carry max(T, C) tokens of material refuses the "
    "episode before any summary call", "§8", ("CTX-8.45", "CTX-8.68", "CTX-8.71"),
    _useless_chunk_scenario(), _useless_chunk_check, COMPACTING)


# --- §8: compaction prompts that leave no room for material: a configuration error, traced -------


def _no_room_scenario() -> dict[str, Any]:
    document = base(custom_compaction_prompt="K" * 3100)
    document["steps"] = [{"ask": "a" * 1000}, {"advance": True}, {"ask": "Q" * 900},
                         {"advance": True}]
    document["model"] = {"business": [{"text": "b" * 1000}, {"text": "done"}],
                         "compaction": [{"text": "SUMMARY"}]}
    return document


def _no_room_check(trace: Trace) -> None:
    # B = 4000 − 400 − 100 = 3500, trigger floor(0.8 × 3500) = 2800. Run 2's request holds
    # "sys", Run 1 (2000 characters and its status) and the 900-character question: I ≥ 2903
    # ≥ 2800 with about 2000 compressible → compact. F ≈ 903 plus the status line, so H > 0;
    # P = min(O 400, H) = 400, C = min(8192, floor(3500/4) = 875, 400) = 400, D = 2100 − F
    # > 400 → T = 400. A chunk request has W − S − T (its output) − T (a previous summary) =
    # 3100 for its prompts and material, and the custom prompt alone takes 3100: no material
    # fits in any chunk. No summary call can be made, so the Run ends as a budget
    # configuration error (§8 "其余配置导致 T 无法为正时属于预算配置错误"; Q67), not as a failed
    # compaction: nothing was asked. The §8 decision is traced though nothing is sent.
    equal([r["purpose"] for r in requests(trace)], ["business"], "requests sent")
    equal(endings(trace), [(1, "succeeded", None), (2, "failed", "BUDGET_CONFIGURATION_INVALID")],
          "Run endings")
    decisions = of(trace, "budget_decision")
    sent = {r["operation_id"] for r in requests(trace)}
    unsent = [d for d in decisions if d["operation_id"] not in sent]
    expect(len(unsent) == 1, f"§8 decisions of the request never sent: {len(unsent)}")
    equal((unsent[0]["decision"], unsent[0]["summary_target"]), ("compact", 400),
          "Run 2's §8 decision and T")
    expect(unsent[0]["input_tokens"] >= 2903, "Run 2's I is below what it carries")


S8_PROMPTS_LEAVE_NO_ROOM = Case(
    "S8-PROMPTS-LEAVE-NO-ROOM", "compaction prompts that leave no room for material are a "
    "budget configuration error, decided and traced before anything is sent", "§8",
    ("CTX-8.51", "CTX-8.68"), _no_room_scenario(), _no_room_check, COMPACTING)


# --- a summary the provider cuts at T is a summary: accepted, once --------------------------------


def _cut_scenario() -> dict[str, Any]:
    document = base(window=5000, output_reserve=1000, summary_target=300)
    document["steps"] = [{"ask": "a" * 1000}, {"advance": True}, {"ask": "Q" * 1200},
                         {"advance": True}]
    document["model"] = {"business": [{"text": "b" * 1000}, {"text": "done"}],
                         "compaction": [{"text": "s" * 2000}], "limit_output": True}
    return document


def _cut_check(trace: Trace) -> None:
    # B = 5000 − 1000 − 100 = 3900, trigger floor(0.8 × 3900) = 3120. Run 2's request holds
    # "sys", Run 1 (2000 characters and its status) and the 1200-character question: I > 3120
    # → compact, with the Agent's explicit target: T = min(300, P) = 300 (P = min(1000, H) and
    # H = 3900 − F > 2600). The provider cuts the 2000-character summary at T and says so. §8:
    # a summary that reaches its output limit yet completes is accepted — no quality check,
    # no second episode — and the business request carries exactly what came back (300 "s").
    equal([(r["purpose"], r["max_output_tokens"]) for r in requests(trace)][1:],
          [("compaction", 300), ("business", 1000)], "Run 2's requests (purpose, max output)")
    [usage] = [u for u in of(trace, "model_usage") if u["purpose"] == "compaction"]
    equal((usage["cut"], usage["output_tokens"]), (True, 300), "the summary as reported")
    summary = [m["text"] for m in requests(trace, "business")[-1]["view"]["messages"]
               if m["kind"] == "summary"]
    equal([max(len(run) for run in text.split(" ") for run in run.split("\n")
               if set(run) <= {"s"}) for text in summary], [300], "the summary in use")
    equal(endings(trace), [(1, "succeeded", None), (2, "succeeded", None)], "Run endings")


S8_SUMMARY_CUT_AT_T = Case(
    "S8-SUMMARY-CUT-AT-T", "a summary the provider cuts at T is accepted once and used as "
    "it came back", "§8", ("CTX-8.54", "CTX-8.44", "CTX-8.39"), _cut_scenario(), _cut_check,
    COMPACTING | {"usage_reports"})


CASES: tuple[Case, ...] = (
    S8_TARGET_EXPLICIT, S8_TARGET_PROVIDER_LIMIT, S8_SOFT_TARGET, S8_TARGET_CAP,
    S8_PROTECTED_TOO_LARGE, S8_CHUNK_RETRIED, S8_CHUNK_ONE_ATTEMPT, S8_CHUNK_LAST_ATTEMPT,
    S8_SUMMARY_FAILS, S8_SUMMARY_RETRIED,
    S8_ABOVE_TRIGGER_AFTER, S8_SUMMARY_AT_CAP, S8_MATERIAL_ORDER, S8_OVERSIZE_RECORD,
    S8_CHUNK_FLOOR, S8_PROMPTS_LEAVE_NO_ROOM, S8_SUMMARY_CUT_AT_T,
)
