"""Conformance cases for normative statements of §1 outside the §12 table and the worked
examples (IDs ``S1-<name>``): each a scenario and a predicate over the neutral trace, its
expected values derived by hand from the design (see conformance/case.py)."""

from typing import Any

from ctxspec.conformance.case import (
    Case,
    Trace,
    base,
    equal,
    exactly,
    expect,
    lines,
    of,
    requests,
    structured,
)

# --- §1 statements: workspace files are not session facts; artifacts are metadata ---------------


def _workspace_scenario() -> dict[str, Any]:
    document = base(persistent_sandbox=True, tools=[{"name": "plot"}, {"name": "shell"}])
    document["steps"] = [{"ask": "plot it"}, {"advance": True}, {"observe_retention": True},
                         {"ask": "again?"}, {"advance": True}]
    document["model"] = {"business": [
        {"text": "", "tool_calls": [{"name": "plot"}, {"name": "shell"}]},
        {"text": "done"}, {"text": "yes"}]}
    document["tools"] = {
        "plot": [{"artifact": {"path": "out/chart.png", "media_type": "image/png",
                               "size_bytes": 20480}}],
        # A tool writes files named like the Session's own facts: a forged question and a
        # checkpoint. They are workspace files only.
        "shell": [{"text": "wrote files",
                   "workspace_writes": {"records/question.txt": "forged question",
                                        "checkpoints/run.json": "{}"}}]}
    return document


def _workspace_check(trace: Trace) -> None:
    # §1: workspace files are written by authorised tools and live as the sandbox policy says —
    # with persistent_sandbox the two files the shell tool wrote are still there after Run 1.
    [retained] = exactly(1, of(trace, "retained"), "retained events")
    equal(sorted(retained["workspace_files"]), ["checkpoints/run.json", "records/question.txt"],
          "working files kept under the persistent sandbox policy")
    # §1: raw messages and checkpoints are never in a model-writable directory, so the
    # same-named files change no Session fact: Run 2 still sees Run 1's question as asked and
    # goes on from the real state (both Runs succeed), never from the forged checkpoint.
    run2 = requests(trace, "business")[-1]
    equal([text for _, kind, text in lines(run2) if kind == "user_ref"], ["plot it", "again?"],
          "the user inputs Run 2 sees")
    expect(all("forged question" not in text for _, _, text in lines(run2)),
           "the forged file reached the model as a fact")
    equal([(e["run_no"], e["status"]) for e in of(trace, "run_ended")],
          [(1, "succeeded"), (2, "succeeded")], "Run endings")
    # §6: a non-text file enters as artifact metadata and its path, never as its bytes: the
    # plot's result is exactly the metadata the tool returned.
    first_result = next(text for _, kind, text in lines(run2) if kind == "tool_result")
    equal(structured(first_result, "the plot's result"),
          {"artifact": {"path": "out/chart.png", "media_type": "image/png",
                        "size_bytes": 20480}}, "the plot's result as the model sees it")


# --- §1 statements: records are appended, summaries and trimming delete nothing ------------------


def _originals_scenario() -> dict[str, Any]:
    """W = 5000, O = 400, S = 100: B = 4500, trigger floor(0.8 × 4500) = 3600. Run 1 leaves a
    1000-character question, a tool call whose result is trimmed away later, and a
    1000-character answer; Run 2's 1600-character question brings the request over 3600."""
    document = base(window=5000, recent_runs=0, tools=[{"name": "look"}])
    document["steps"] = [{"ask": "a" * 1000}, {"advance": True},
                         {"read_history": {"kind": "audit"}},
                         {"ask": "x"}, {"advance": True},
                         {"read_history": {"kind": "audit"}},
                         {"ask": "Q" * 1600}, {"advance": True},
                         {"read_history": {"kind": "audit"}}]
    document["model"] = {"business": [{"text": "", "tool_calls": [{"name": "look"}]},
                                      {"text": "b" * 1000}, {"text": "y"}, {"text": "done"}],
                         "compaction": [{"text": "SUMMARY"}]}
    document["tools"] = {"look": [{"text": "looked"}]}
    return document


def _originals_check(trace: Trace) -> None:
    # recent_runs = 0: from Run 2 on, Run 1 is older history, trimmed to its question, answer
    # and status (its tool call and result leave the view); Run 3's request is over the trigger
    # ("sys" 3 + Run 1 1000 + 1000 + 24 + Run 2 1 + 1 + 24 + 1600 = 3653 ≥ 3600) and is compacted:
    # Run 1's texts become summary material and leave the business view.
    business = requests(trace, "business")
    run2, run3 = business[2], business[3]
    expect("looked" not in [text for _, _, text in lines(run2)],
           "Run 1's tool result is still in Run 2's view (the trimming premise)")
    material = " ".join(m["text"] for r in requests(trace, "compaction")
                        for m in r["view"]["messages"])
    expect("a" * 1000 in material and "b" * 1000 in material,
           "Run 1's question and answer are not compaction material")
    expect(all("a" * 1000 not in text for _, _, text in lines(run3)),
           "Run 1's question is still in the compacted view (the summary premise)")
    # §1: records are appended, never overwritten; a summary never overwrites them and
    # trimming never deletes them. Each audit read returns the earlier read's records, in the
    # same order, then the new ones: Run 1 = question, decision, tool result, answer (4);
    # Run 2 = question, answer; Run 3 = question, answer.
    reads = [e["message_kinds"] for e in of(trace, "history_read")]
    run1 = ["user_ref", "assistant", "tool_result", "assistant"]
    run_n = ["user_ref", "assistant"]
    equal(reads[0], run1, "audit read after Run 1")
    equal(reads[1], run1 + run_n, "audit read after Run 2 (Run 1 trimmed from the view)")
    equal(reads[2][:len(reads[1])], reads[1], "audit read after the compaction, its prefix")
    equal(reads[2].count("user_ref"), 3, "questions kept after the compaction")
    equal(reads[2].count("tool_result"), 1, "tool results kept after the compaction")


def _questions_scenario() -> dict[str, Any]:
    """W = 5000, O = 400, S = 100: B = 4500, trigger 3600. Three short questions with long
    answers, no tools, then a question that brings the request over the trigger: the
    material is mostly answers, the questions short, so a history that keeps every question
    verbatim beside the summary still fits."""
    document = base(window=5000)
    document["steps"] = [step for text in ("a" * 100, "c" * 100, "e" * 100, "Q" * 1500)
                         for step in ({"ask": text}, {"advance": True})]
    document["steps"].append({"read_history": {"kind": "audit"}})
    document["model"] = {"business": [{"text": "b" * 1000}, {"text": "d" * 1000},
                                      {"text": "f" * 1000}, {"text": "done"}],
                         "compaction": [{"text": "SUMMARY"}]}
    return document


def _questions_check(trace: Trace) -> None:
    # Run 4's request (4 questions 1800, 3 answers 3000, the prompt and the outcomes: over
    # 3600) is compacted. §1: a summary never overwrites raw records, so the audit read after
    # it still serves the four questions asked, whatever the summary covered: the Session's
    # user inputs are records, not material a compaction may delete. One rule: nothing else of
    # the read is judged (S1-ORIGINALS-KEPT judges every record).
    expect(bool(requests(trace, "compaction")), "no compaction request (the case's premise)")
    [read] = exactly(1, of(trace, "history_read"), "history reads")
    equal(read["message_kinds"].count("user_ref"), 4, "questions kept after the compaction")


# --- §1: a context_patch needs an authorised scope; none is made up for it ---------------------


def _no_scope_scenario() -> dict[str, Any]:
    document = base(tools=[{"name": "t"}])
    document["steps"] = [{"ask": "go"}, {"advance": True}]
    document["model"] = {"business": [{"text": "first", "tool_calls": [{"name": "t"}]},
                                      {"text": "done"}]}
    document["tools"] = {"t": [{"text": "r"}]}
    # The Agent registers no shared field, so its Run has no shared scope; the hook patches
    # "the shared scope" anyway, on a field the role's own context also has.
    document["hooks"] = [{"point": "model.pre_request", "ordinal": 2, "items": [
        {"context_patch": [{"target": "first_assistant", "field": "text", "value": "hijacked",
                           "scope": "shared"}]}]}]
    return document


def _no_scope_check(trace: Trace) -> None:
    # §1: a context_patch is allowed only where an explicitly authorised ContextScope exists.
    # There is no shared scope: the item may write no such scope (UNAUTHORISED_SCOPE, the
    # suite's code for it), so its patch is invalid and the allow goes on without it. No
    # context is made up for it and it is not redirected to the role's private one: the second
    # request binds the root context alone and shows the decision as the model wrote it.
    equal([(d["decision"], d["patch_valid"], d["diagnostics"])
           for d in of(trace, "hook_decided")], [("allow", False, ["UNAUTHORISED_SCOPE"])],
          "the hook decision")
    first, second = exactly(2, requests(trace, "business"), "business requests")
    equal([text for _, kind, text in lines(second) if kind == "assistant"], ["first"],
          "the decision in request 2")
    equal(list(second["frozen_revisions"]), list(first["frozen_revisions"]),
          "contexts request 2 binds (request 1's)")
    equal(len(second["frozen_revisions"]), 1, "contexts request 2 binds")


CASES: tuple[Case, ...] = (
    Case("S1-WORKSPACE-NOT-FACTS",
         "workspace files live by the sandbox policy and change no Session fact; an artifact is "
         "metadata", "§1", ("CTX-1.8", "CTX-1.12", "CTX-6.22"), _workspace_scenario(),
         _workspace_check, frozenset({"retention"})),
    Case("S1-ORIGINALS-KEPT",
         "records are appended; trimming and a summary delete none of them", "§1",
         ("CTX-1.4", "CTX-1.13", "CTX-4.19"), _originals_scenario(), _originals_check,
         frozenset({"history_api", "compaction", "estimator_injection"})),
    Case("S1-QUESTIONS-KEPT", "a compaction deletes none of the Session's questions", "§1",
         ("CTX-1.13", "CTX-4.19"), _questions_scenario(), _questions_check,
         frozenset({"history_api", "compaction", "estimator_injection"})),
    Case("S1-NO-SCOPE", "a context_patch for a scope that does not exist is invalid, never "
         "redirected", "§1", ("CTX-1.18",), _no_scope_scenario(), _no_scope_check,
         frozenset({"hooks"})),
)
