"""§6 protocol repair: complete batches, placeholders, fragments, large results, adapters."""

import json
from uuid import UUID

import pytest

from ctxspec.reference.contracts import ContextRecord, MessageRole, OperationState, RunStatus
from ctxspec.reference.history import project_history
from ctxspec.reference.protocol import (
    bounded_preview,
    read_range,
    repair,
    structured_error,
)
from ctxspec.reference.view import (
    EffectiveRecord,
    ModelView,
    Truncation,
    ViewKind,
    ViewMessage,
    message_from_record,
    render_chat_messages,
)
from tests.builders import SessionBuilder, ref


def shape(messages: list[ViewMessage]) -> list[tuple[str, str, str]]:
    return [(m.role.value, m.kind.value, m.text) for m in messages]


@pytest.mark.covers("CTX-2.28", "CTX-6.1", "CTX-6.2", "CTX-6.4", "CTX-6.5")
def test_multi_round_batches_in_action_order_with_a_failed_item() -> None:
    # Round 1: two calls whose results were committed in completion order (second first);
    # round 2: one call that failed with a structured error. Expected by hand: each assistant
    # message is followed by its results in action ordinal order, nothing dropped.
    session = SessionBuilder()
    run = session.run()
    session.ask(run, "q")
    read, grep = session.call(run, "read", "grep")
    session.result(run, grep, "grep output")
    session.result(run, read, "read output")
    (write,) = session.call(run, "write")
    session.result(run, write, structured_error("EACCES", "permission denied"))
    session.say(run, "done")
    messages = repair(run.records, run_ended=False)
    assert isinstance(messages, list)
    assert shape(messages) == [
        ("user", "user_ref", "q"),
        ("assistant", "assistant", ""),
        ("tool", "tool_result", "read output"),
        ("tool", "tool_result", "grep output"),
        ("assistant", "assistant", ""),
        ("tool", "tool_result",
         '{"error": {"code": "EACCES", "detail": "permission denied"}, "status": "error"}'),
        ("assistant", "assistant", "done"),
    ]
    assert [m.call_id for m in messages[2:4]] == [read.call_id, grep.call_id]
    assert json.loads(messages[5].text)["status"] == "error"


@pytest.mark.covers("CTX-6.6", "CTX-6.12")
def test_a_placeholder_for_a_call_that_never_started_says_so() -> None:
    # No Operation exists for the call: it is not "unknown" (which would say it may have acted).
    session = SessionBuilder()
    run = session.run()
    session.ask(run, "q")
    (call,) = session.call(run, "a")
    messages = repair(run.records, run_ended=True)
    assert isinstance(messages, list)
    [placeholder] = [m for m in messages if m.kind is ViewKind.PLACEHOLDER]
    assert json.loads(placeholder.text)["operation_state"] == "not_started"
    assert call.call_id == placeholder.call_id


@pytest.mark.covers("CTX-6.6", "CTX-6.10", "CTX-6.12")
def test_stopped_run_mid_batch_gets_placeholders_and_keeps_real_states() -> None:
    session = SessionBuilder()
    run = session.run()
    session.ask(run, "q")
    done, running, queued = session.call(run, "a", "b", "c")
    session.result(run, done, "a result")
    states = {running.call_id: OperationState.UNKNOWN, queued.call_id: OperationState.CANCELLED}
    before = dict(states)
    messages = repair(run.records, run_ended=True, call_states=states)
    assert isinstance(messages, list)
    assert [(m.kind.value, m.call_id) for m in messages[1:]] == [
        ("assistant", None), ("tool_result", done.call_id),
        ("placeholder", running.call_id), ("placeholder", queued.call_id)]
    assert json.loads(messages[3].text) == {
        "status": "not_executed", "tool": "b", "operation_state": "unknown",
        "reason": "the run ended before this call produced a result"}
    assert json.loads(messages[4].text)["operation_state"] == "cancelled"
    assert states == before  # the projection reports states, it never changes them
    assert not any("success" in m.text for m in messages if m.kind is ViewKind.PLACEHOLDER)


@pytest.mark.covers("CTX-6.8", "CTX-5.20")
def test_incomplete_stream_is_a_marked_fragment_never_a_decision() -> None:
    session = SessionBuilder()
    run = session.run()
    session.ask(run, "q")
    session.say(run, "I will call wri", incomplete=True)
    messages = repair(run.records, run_ended=True)
    assert isinstance(messages, list)
    fragment = messages[-1]
    assert (fragment.role.value, fragment.kind.value, fragment.incomplete) == \
        ("system", "fragment", True)
    assert fragment.text == "[incomplete model output, not a decision] I will call wri"
    assert fragment.tool_calls == ()


@pytest.mark.covers("CTX-6.3")
def test_a_cut_inside_a_batch_never_leaves_a_tool_message_without_its_call() -> None:
    session = SessionBuilder()
    run = session.run()
    session.ask(run, "q")
    (call,) = session.call(run, "read")
    session.result(run, call, "read output")
    messages = repair(run.records[2:], run_ended=True)  # the cut starts at the result
    assert isinstance(messages, list)
    assert [(m.role.value, m.kind.value, m.call_id) for m in messages] == \
        [("system", "marker", None)]
    assert messages[0].text.endswith("read output")


@pytest.mark.covers("CTX-6.9")
def test_reasoning_is_kept_and_rendered_only_where_accepted() -> None:
    session = SessionBuilder()
    run = session.run()
    session.ask(run, "q")
    record = session.say(run, "answer", reasoning="because")
    view = project_history(ended_runs=[], recent_runs=2, source=session,
                           current_run_id=run.run_id, current_records=run.records,
                           protected_input_ids=set())
    assert isinstance(view, ModelView)
    assert view.messages[-1].reasoning == record.reasoning == "because"
    assert "reasoning" not in render_chat_messages(view, accepts_reasoning=False)[-1]
    assert render_chat_messages(view, accepts_reasoning=True)[-1]["reasoning"] == "because"
    assert all("reasoning" not in item
               for item in render_chat_messages(view, accepts_reasoning=True)[:-1])


@pytest.mark.covers("CTX-6.13", "CTX-6.14", "CTX-6.15", "CTX-6.17", "CTX-6.18", "CTX-6.20")
def test_huge_tool_result_stays_a_bounded_preview_and_read_makes_a_new_record() -> None:
    # §12 "极大工具结果": the blob holds the whole body; the model sees a preview marked
    # truncated with its range and result_ref; history never expands it; result.read returns a
    # new tool result of its own call.
    body = "".join(f"line {n}\n" for n in range(10_000))
    blob = ref(body)
    preview, truncation = bounded_preview(body, 100, blob)
    assert preview == body[:100] and truncation is not None
    assert (truncation.from_char, truncation.through_char, truncation.total_chars) == \
        (0, 100, len(body))
    assert bounded_preview("short", 100, blob) == ("short", None)

    session = SessionBuilder()
    r1 = session.run()
    session.ask(r1, "q1")
    (big,) = session.call(r1, "fetch")
    session.result(r1, big, preview, truncation=truncation)
    (read,) = session.call(r1, "result.read")
    session.result(r1, read, read_range(body, 100, 200))
    session.end(r1, RunStatus.SUCCEEDED, final="a1")
    r2 = session.run()
    session.ask(r2, "q2")
    view = project_history(ended_runs=session.ended(r2), recent_runs=2, source=session,
                           current_run_id=r2.run_id, current_records=r2.records,
                           protected_input_ids={session.runs[1].inputs[0]})
    assert isinstance(view, ModelView)
    results = [m for m in view.messages if m.kind is ViewKind.TOOL_RESULT]
    assert [m.text for m in results] == [body[:100], body[100:200]]
    assert results[0].truncation == truncation and results[0].truncation.result_ref == blob
    assert results[1].truncation is None and results[1].call_id == read.call_id
    assert sum(len(m.text) for m in view.messages) < 1000  # never expanded into the view


def test_read_range_and_preview_reject_nonsense() -> None:
    with pytest.raises(ValueError):
        read_range("abc", 2, 1)
    with pytest.raises(ValueError):
        bounded_preview("abc", 0, ref("abc"))


def test_render_closes_every_tool_calls_group() -> None:
    session = SessionBuilder()
    run = session.run()
    session.ask(run, "q")
    first, second = session.call(run, "a", "b")
    session.result(run, first, "ra")
    messages = repair(run.records, run_ended=True)
    assert isinstance(messages, list)
    rendered = render_chat_messages(ModelView(messages=tuple(messages)), accepts_reasoning=False)
    call_ids = [call["id"] for call in rendered[1]["tool_calls"]]
    assert [item["tool_call_id"] for item in rendered[2:]] == call_ids
    assert call_ids == [str(first.call_id), str(second.call_id)]


def test_a_view_message_carries_every_field_of_its_record() -> None:
    # message_from_record builds view messages positionally (a projection makes one per
    # record): each field must land in the field of the same name, whatever order they have.
    run_id, call_id, input_id, record_id = (UUID(int=n) for n in (1, 2, 3, 4))
    preview = Truncation(from_char=0, through_char=2, total_chars=9, result_ref=ref("body"))
    record = EffectiveRecord(
        record=ContextRecord(record_id=record_id, context_id=UUID(int=5), context_seq=7,
                             run_id=run_id, role=MessageRole.TOOL, message_kind="tool_result",
                             payload_ref=ref("x"), operation_id=None, call_id=call_id,
                             origin_input_id=input_id),
        text="ab", truncation=preview, incomplete=True, reasoning="why",
        annotation_source="hook:1", modified_by=("m1",))
    message = message_from_record(record, ViewKind.TOOL_RESULT)
    assert message == ViewMessage(
        role=MessageRole.TOOL, kind=ViewKind.TOOL_RESULT, text="ab", record_id=record_id,
        input_id=input_id, call_id=call_id, tool_calls=(), source_run_id=run_id,
        carried_from_run_id=None, truncation=preview, incomplete=True, reasoning="why",
        annotation_source="hook:1", modified_by=("m1",))
    relabelled = message_from_record(record, ViewKind.MARKER, role=MessageRole.SYSTEM,
                                     text="t", keep_call=False)
    assert (relabelled.role, relabelled.text, relabelled.call_id) == \
        (MessageRole.SYSTEM, "t", None)


def test_a_malformed_tool_schema_declares_nothing_and_raises_nothing() -> None:
    # Found by the scenario fuzz batch: a scenario's tool schema with a non-string type name or
    # a non-list `required` raised TypeError out of `ctxspec replay` (#18, Q82).
    from ctxspec.reference.protocol import argument_problems
    assert argument_problems({"properties": {"path": {"type": [[]]}}}, {"path": "a"}) == ()
    assert argument_problems({"required": 5}, {}) == ()
    assert argument_problems({"required": ["x", [1]]}, {}) == ("missing required argument 'x'",)
