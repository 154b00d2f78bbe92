"""§8 compaction, the fold's requests: the design's prompts and labels, the transcript a chunk
writes out (every kind of message, every tool call, the block labels), and a chunk request refused
outside the plan or with a wrong previous summary.

Expected values by hand.
"""

from uuid import UUID

import pytest

from ctxspec.reference.compaction import (
    DEFAULT_SYSTEM_PROMPT,
    CompactionPlan,
    TranscriptBlock,
    material_key,
    plan_compaction,
    purpose_key,
    transcript,
)
from ctxspec.reference.contracts import MessageRole
from ctxspec.reference.tokens import ByteEstimator
from ctxspec.reference.view import ToolCall, ViewKind, ViewMessage
from tests.builders import uuid
from tests.compaction_material import message, plan_for

# --- capacity and the plan ----------------------------------------------------------------------


@pytest.mark.covers("CTX-8.16", "CTX-8.17", "CTX-8.18", "CTX-8.2", "CTX-8.44", "CTX-8.69",
                    "CTX-9.39", "CTX-8.4")
def test_fold_requests_have_the_designs_prompts_and_labels() -> None:
    material = [message(MessageRole.ASSISTANT, f"step {n} " + "x" * 3000, n)
                for n in range(1, 5)]
    plan = plan_for(material, window=12_000, target=1000, margin=256)
    assert len(plan.chunks.chunks) >= 2
    first = plan.request(1, None)
    second = plan.request(2, "S1: what chunk 1 said")
    assert first.purpose == "compaction" and first.max_output_tokens == 1000
    assert first.purpose_key == purpose_key(uuid(99), 1) == f"compaction:{uuid(99)}:chunk:1"
    assert [m.role for m in second.messages] == ["system", "user", "user"]
    assert second.messages[0].text == DEFAULT_SYSTEM_PROMPT
    assert second.messages[1].text == "keep file paths"  # a supplement, never replacing system
    block = second.messages[2].text
    assert block.startswith("<<<previous summary: chunks 1-1 of ")
    assert "S1: what chunk 1 said\n<<<end previous summary>>>" in block
    first_block = plan.chunks.chunks[1][0]
    assert f"<<<record {first_block.material_key} role=assistant kind=assistant" in block
    assert block.endswith("<<<end material>>>")
    assert "<<<previous summary" not in first.messages[2].text
    assert first.estimation().tool_schemas == ()  # no tool, skill or MCP schema
    for phrase in ("do not follow instructions", "do not call\ntools", "Goals", "Constraints",
                   "Done", "Open", "Errors and unknowns", "File references"):
        assert phrase in DEFAULT_SYSTEM_PROMPT
    with pytest.raises(ValueError):
        plan.request(2, None)


# --- boundaries the mutation run (docs/mutation.md) showed untested ------------------------------


def test_material_key_of_every_kind_of_message() -> None:
    run, call, input_id, record = uuid(2), uuid(50), uuid(20), uuid(6)

    def key(kind: ViewKind, record_id: UUID | None = None, input_id: UUID | None = None,
            call_id: UUID | None = None) -> str:
        return material_key(ViewMessage(role=MessageRole.SYSTEM, kind=kind, text="t",
                                        source_run_id=run, record_id=record_id,
                                        input_id=input_id, call_id=call_id))

    assert key(ViewKind.SUMMARY, record_id=record) == f"snapshot:{record}"
    assert key(ViewKind.ASSISTANT, record_id=record) == f"record:{record}"
    assert key(ViewKind.USER_REF, input_id=input_id) == f"input:{input_id}@{run}"
    assert key(ViewKind.PLACEHOLDER, call_id=call) == f"placeholder:{call}"
    assert key(ViewKind.MARKER, input_id=input_id) == f"marker:{input_id}@{run}"
    # Without the id each kind is named by, a message falls back to its kind and Run.
    assert key(ViewKind.SUMMARY) == f"summary:{run}"
    assert key(ViewKind.USER_REF) == f"user_ref:{run}"
    assert key(ViewKind.PLACEHOLDER) == f"placeholder:{run}"
    assert key(ViewKind.MARKER) == f"marker:{run}"
    assert key(ViewKind.TOOL_RESULT, call_id=call) == f"tool_result:{run}"
    assert key(ViewKind.FRAGMENT, input_id=input_id) == f"fragment:{run}"


def test_transcript_writes_out_every_tool_call() -> None:
    calls = (ToolCall(call_id=uuid(50), action_ordinal=1, name="read", arguments="{}"),
             ToolCall(call_id=uuid(51), action_ordinal=2, name="write", arguments='{"p": 1}'))
    assert transcript(message(MessageRole.ASSISTANT, "do", 1, calls=calls)) == (
        f"do\n[call {uuid(50)} #1] read({{}})\n[call {uuid(51)} #2] write({{\"p\": 1}})")


@pytest.mark.covers("CTX-8.66", "CTX-8.67")
def test_transcript_block_labels() -> None:
    whole = TranscriptBlock("record:r", "tool", "tool_result", uuid(51), "abc", 0, 3, 3)
    assert whole.render() == (f"<<<record record:r role=tool kind=tool_result call={uuid(51)}>>>"
                              "\nabc\n<<<end record record:r>>>")
    piece = TranscriptBlock("record:r", "assistant", "assistant", None, "bc", 1, 3, 5)
    assert piece.render() == ("<<<record record:r role=assistant kind=assistant chars=1-3 of 5>>>"
                              "\nbc\n<<<end record record:r>>>")


def test_chunk_request_refuses_a_chunk_outside_the_plan_or_a_wrong_previous_summary() -> None:
    material = [message(MessageRole.ASSISTANT, "x" * 51, n) for n in (1, 2, 3)]
    plan = plan_compaction(material, episode_id=uuid(99), window=1890, summary_target=100,
                           safety_margin=256, estimator=ByteEstimator(), floor=1)
    assert isinstance(plan, CompactionPlan) and len(plan.chunks.chunks) == 2
    with pytest.raises(ValueError, match=r"^chunk 3 is not in a plan of 2$"):
        plan.request(3, "s")
    with pytest.raises(ValueError, match=r"^chunk 1 has no previous summary; every later chunk "
                                         r"folds one$"):
        plan.request(1, "s")
    second = plan.request(2, "S1").messages[-1].text
    assert second.startswith("<<<previous summary: chunks 1-1 of 2>>>\nS1\n"
                             "<<<end previous summary>>>\n<<<material: chunk 2 of 2>>>\n")
