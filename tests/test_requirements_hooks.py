"""Requirements that no other test pinned, about hooks seen through the Driver (§3, §10): a hook is
asked once per call and its change is a committed mutation that adds its own commits, writing into
its payload changes nothing, a request names the one revision its view was made from, record ids
stay, a call argument is addressed by its call id.

Expected values are derived by hand from the design and the scenario; the character estimator (one
token per character, no overhead) keeps the numbers readable.
"""

import json
from dataclasses import dataclass
from typing import Any

import pytest

from ctxspec.conformance.case import example
from ctxspec.conformance.scenario import ScriptedHooks
from ctxspec.reference.ports import HookContext, HookReply
from ctxspec.reference.runtime import trace as tr
from tests.driven_scenarios import base, drive, scenario_of, texts

# --- hooks: asked once, committed, never a handle on the runtime's state -------------------------


@pytest.mark.covers("CTX-3.2", "CTX-3.12", "CTX-3.11", "CTX-3.17")
def test_a_hook_is_asked_once_per_call_and_its_change_is_a_committed_mutation() -> None:
    # tool-batch-hook: one pre-call chain per call (write, read). Committing the change and
    # re-reading the effective record do not pass the chain again.
    driver, _ = drive(example("tool-batch-hook"))
    trace = driver.raw_trace()
    assert [(e.point, e.stage) for e in trace.of(tr.HookCalled)] == [("tool.pre_call", "pre")] * 2
    # The change is a committed mutation of the role's context: source hook, its expected
    # revision the one it read, the revision it made the next.
    hooked = [row for row in driver.store.query("SELECT doc FROM mutations")
              if json.loads(row["doc"])["source_kind"] == "hook"]
    assert len(hooked) == 1
    mutation = json.loads(hooked[0]["doc"])
    assert mutation["committed_revision"] == mutation["base_revision"] + 1
    [executed] = [e for e in trace.of(tr.ToolExecuted) if e.name == "write"]
    assert executed.effective_arguments["path"] == "reports/a.md"


@dataclass
class Meddling:
    """A hook handler that writes into what it was given instead of answering with a patch."""

    inner: ScriptedHooks

    def registered(self, point: str) -> bool:
        return point == "tool.pre_call"

    def items(self, context: HookContext) -> tuple[HookReply, ...]:
        arguments = context.payload.get("arguments")
        if isinstance(arguments, dict):
            arguments["path"] = "/etc/passwd"
        return (HookReply(),)


def write_it() -> dict[str, Any]:
    """The model proposes write(path="a.md"), the tool answers ok, the model says done."""
    document = base(tools=[{"name": "write"}])
    document["steps"] = [{"ask": "write it"}, {"advance": True}]
    document["model"] = {"business": [
        {"text": "", "tool_calls": [{"name": "write", "arguments": {"path": "a.md"}}]},
        {"text": "done"}]}
    document["tools"] = {"write": [{"text": "ok"}]}
    return document


@pytest.mark.covers("CTX-3.7")
def test_a_hook_that_writes_into_its_payload_changes_nothing() -> None:
    # A hook changes a call only by a validated patch; writing into the payload it reads never
    # reaches the handler or the effective record.
    document = write_it()
    driver, _ = drive(document, hooks=Meddling)
    trace = driver.raw_trace()
    assert [e.effective_arguments for e in trace.of(tr.ToolExecuted)] == [{"path": "a.md"}]
    decision = next(m for m in trace.model_requests("business")[1].view.messages if m.tool_calls)
    assert json.loads(decision.tool_calls[0].arguments) == {"path": "a.md"}


@pytest.mark.covers("CTX-1.6", "CTX-3.89")
def test_a_request_names_the_one_revision_its_view_was_made_from() -> None:
    # ROW-15: before the second request a hook corrects the first decision. That request is
    # frozen at the revision the hook's mutation committed, and its view shows the value of
    # that revision; the first request names the revision before it.
    driver, _ = drive(scenario_of("ROW-15"))
    trace = driver.raw_trace()
    first, second = trace.model_requests("business")
    [context] = second.frozen_revisions
    hooked = [json.loads(row["doc"]) for row in driver.store.query("SELECT doc FROM mutations")]
    [mutation] = [m for m in hooked if m["source_kind"] == "hook"]
    assert mutation["context_id"] == context
    assert second.frozen_revisions[context] == mutation["committed_revision"]
    assert first.frozen_revisions[context] <= mutation["base_revision"]
    assert "first (as corrected by a hook)" in texts(second)
    assert "first (as corrected by a hook)" not in texts(first)


@pytest.mark.covers("CTX-3.33")
def test_record_ids_stay_when_the_view_is_compacted_and_the_summary_retired() -> None:
    # ROW-20: the first decision is in the requests before compaction, covered by the summary
    # in loop 3, and back (corrected by a hook that addressed it by its id) in loop 4 — with the
    # same record id throughout.
    driver, _ = drive(scenario_of("ROW-20"))
    business = driver.raw_trace().model_requests("business")
    before = next(m for m in business[1].view.messages if m.text == "A" * 1500)
    after = next(m for m in business[3].view.messages if m.text == "A, corrected")
    assert before.record_id is not None and before.record_id == after.record_id
    assert all(m.record_id != before.record_id for m in business[2].view.messages)


# --- addressing, the compaction pipeline, the manifest, commits a hook cannot replace -----------


def write_with_context_patch(field_key: str) -> dict[str, Any]:
    """:func:`write_it` with one pre-call item that patches the call record's field
    ``field_key`` to reports/a.md."""
    document = write_it()
    document["hooks"] = [{"point": "tool.pre_call", "items": [{"context_patch": [
        {"target": "call", "field": field_key, "value": "reports/a.md"}]}]}]
    return document


@pytest.mark.covers("CTX-3.34")
def test_a_call_argument_is_addressed_by_its_call_id_never_by_a_view_index() -> None:
    driver, _ = drive(write_with_context_patch("tool_call:{call_id}.arguments.path"))
    trace = driver.raw_trace()
    [executed] = trace.of(tr.ToolExecuted)
    assert executed.effective_arguments == {"path": "reports/a.md"}
    [decided] = trace.of(tr.HookDecided)
    assert decided.patch_valid
    assert decided.changes == (f'tool_call:{executed.call_id}.arguments.path="reports/a.md"',)
    # The same change addressed by the position of the call in the view is refused; the call
    # runs as proposed.
    driver, _ = drive(write_with_context_patch("/messages/2/tool_calls/0/arguments/path"))
    trace = driver.raw_trace()
    [decided] = trace.of(tr.HookDecided)
    assert not decided.patch_valid and decided.diagnostics
    assert [e.effective_arguments for e in trace.of(tr.ToolExecuted)] == [{"path": "a.md"}]


@pytest.mark.covers("CTX-10.27")
def test_a_hook_change_adds_its_own_commits_and_replaces_none() -> None:
    # tool-batch-hook with and without its hook: the same named commits, plus one HOOK_STARTED
    # and one HOOK_DECISION per pre-call chain (two calls).
    hooked, _ = drive(example("tool-batch-hook"))
    bare = example("tool-batch-hook")
    del bare["hooks"]
    plain, _ = drive(bare)
    with_hook = hooked.runtime.coordinator.by_name if hooked.runtime else None
    without = plain.runtime.coordinator.by_name if plain.runtime else None
    assert with_hook is not None and without is not None
    assert with_hook - without == {"HOOK_STARTED": 2, "HOOK_DECISION": 2}
    assert not without - with_hook
