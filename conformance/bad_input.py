"""Bad input as conformance cases (IDs ``BAD-<name>``): hook patches the design refuses
(unregistered or forbidden fields, unknown targets, invalid values, stale revisions), a budget
that cannot be resolved, and scenario documents of ours that are malformed. Each case stands
beside its scenario and check."""

import json
from collections.abc import Callable
from typing import Any

from ctxspec.conformance.case import (
    Case,
    Trace,
    base,
    endings,
    equal,
    no_check,
    of,
    requests,
    result_facts,
)
from ctxspec.conformance.sessions import path_seen_by_model, write_path


def _unregistered_check(trace: Trace) -> None:
    # A patch of a field the hook point does not register (the tool's name) is refused with the
    # item's diagnostic; the allow goes on with the call as it was.
    equal([(d["decision"], d["patch_valid"], d["diagnostics"]) for d in of(trace, "hook_decided")],
          [("allow", False, ["FIELD_NOT_REGISTERED"])], "the hook's decision")
    equal([(e["name"], e["effective_arguments"]) for e in of(trace, "tool_executed")],
          [("write", {"path": "a.md"})], "tools executed")


BAD_UNREGISTERED_FIELD = Case(
    "BAD-UNREGISTERED-FIELD", "a patch of an unregistered field is refused, allow goes on",
    "bad input", ("CTX-3.59",), write_path(
        {"decision": "allow", "payload_patch": [{"path": "name", "value": "rm"}]}),
    _unregistered_check, frozenset({"hooks"}))


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
    equal(path_seen_by_model(trace), "b.md", "the path in the effective call record")


BAD_STALE_ALLOW = Case(
    "BAD-STALE-ALLOW", "an allow patching a field changed since its base keeps the old value",
    "bad input", ("CTX-3.83", "CTX-3.84", "CTX-3.85", "CTX-3.62", "CTX-3.63", "CTX-3.54"),
    _stale("allow"), _stale_allow_check, frozenset({"hooks"}))


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


BAD_STALE_DENY = Case(
    "BAD-STALE-DENY", "a deny with a stale patch still blocks and records the old call",
    "bad input", ("CTX-3.83", "CTX-3.84", "CTX-3.60", "CTX-3.70"), _stale("deny"),
    _stale_deny_check, frozenset({"hooks"}))


def _invalid_patch_check(code: str | None) -> Callable[[Trace], None]:
    def check(trace: Trace) -> None:
        # An allow whose patch fails validation goes on fail-open with the call as it was.
        # Without ``code`` the patch is judged refused or not: the design names no diagnostic
        # for it, so the runtime's own name is not compared (#32, Q294).
        decided = [(d["decision"], d["patch_valid"]) + (() if code is None else
                                                         (d["diagnostics"],))
                   for d in of(trace, "hook_decided")]
        equal(decided, [("allow", False) + (() if code is None else ([code],))],
              "the hook's decision")
        equal([e["effective_arguments"] for e in of(trace, "tool_executed")], [{"path": "a.md"}],
              "write's effective arguments")
        equal(endings(trace), [(1, "succeeded", None)], "Run endings")
    return check


BAD_INVALID_PATCH = Case(
    "BAD-INVALID-PATCH", "deleting a required field is refused, allow goes on",
    "bad input", ("CTX-3.51", "CTX-3.59", "CTX-3.78"), write_path(
        {"decision": "allow", "payload_patch": [{"path": "arguments", "delete": True}]}),
    _invalid_patch_check("SCHEMA_MISMATCH"), frozenset({"hooks"}))


BAD_FORBIDDEN_FIELD = Case(
    "BAD-FORBIDDEN-FIELD", "a patch of the call's identity is refused, allow goes on",
    "bad input", ("CTX-3.46", "CTX-3.59"), write_path(
        {"decision": "allow", "context_patch": [
            {"target": "call", "field": "tool_call:{call_id}.call_id", "value": "x"}]}),
    _invalid_patch_check(None), frozenset({"hooks"}))


BAD_UNKNOWN_TARGET = Case(
    "BAD-UNKNOWN-TARGET", "a patch of a record that is not there is refused, allow goes on",
    "bad input", ("CTX-3.45", "CTX-3.59", "CTX-3.78"), write_path(
        {"decision": "allow", "context_patch": [
            {"target": "00000000-0000-0000-0000-000000000001", "field": "text",
             "value": "x"}]}),
    _invalid_patch_check(None), frozenset({"hooks"}))


# --- bad input: our own documents ---------------------------------------------------------------


def _bad_budget_scenario() -> dict[str, Any]:
    # O = 2000 on a window of 1000: B = 1000 − 2000 − 100 < 0, a budget that cannot be resolved.
    document = base(window=1000, output_reserve=2000)
    document["steps"] = [{"ask": "hello"}, {"advance": True}]
    document["model"] = {"business": [{"text": "never asked"}]}
    return document


BAD_BUDGET = Case(
    "BAD-BUDGET", "an unresolvable budget is refused before anything runs", "bad input",
    ("CTX-7.7",), _bad_budget_scenario(), no_check, refusal="BUDGET_CONFIGURATION_INVALID")


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


# Our own document, not the design's: these cases name no requirement of it.


BAD_SCENARIO_FIELD = Case(
    "BAD-SCENARIO-FIELD", "a scenario with a field it does not define is refused",
    OUR_DOCUMENTS, (), _malformed(surprise=1), no_check, refusal="SCENARIO_INVALID")


BAD_SCENARIO_VERSION = Case(
    "BAD-SCENARIO-VERSION", "a scenario of an unknown version is refused", OUR_DOCUMENTS,
    (), _malformed(scenario_version=2), no_check, refusal="SCENARIO_INVALID")


BAD_SCENARIO_CRASH = Case(
    "BAD-SCENARIO-CRASH", "a crash at a phase the design does not name is refused",
    OUR_DOCUMENTS, (), _malformed(crash={"phase": "request_froze"}), no_check,
    refusal="SCENARIO_INVALID", needs=frozenset({"crash_points"}))


CASES: tuple[Case, ...] = (
    BAD_UNREGISTERED_FIELD, BAD_STALE_ALLOW, BAD_STALE_DENY, BAD_INVALID_PATCH,
    BAD_FORBIDDEN_FIELD, BAD_UNKNOWN_TARGET, BAD_BUDGET, BAD_SCENARIO_FIELD,
    BAD_SCENARIO_VERSION, BAD_SCENARIO_CRASH,
)
