"""What a record's revision and a view message keep once computed (issue #20): the kept value
is the one a fresh computation gives, whatever was computed before, and it is never a field."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxspec.reference.contracts import MessageRole
from ctxspec.reference.protocol import repair
from ctxspec.reference.view import (
    VIEW_ADAPTER,
    EffectiveRecord,
    ModelView,
    ToolCall,
    Truncation,
    ViewKind,
    ViewMessage,
    estimation_request,
    message_from_record,
    render_request,
    rendered_estimation,
)
from tests.builders import SessionBuilder, ref, uuid


def answered_batch() -> tuple[EffectiveRecord, EffectiveRecord]:
    """A decision whose one call a hook adjusted, and its result."""
    session = SessionBuilder()
    run = session.run()
    call = ToolCall(call_id=uuid(7), action_ordinal=1, name="read", arguments='{"path": "b"}',
                    proposed_arguments='{"path": "a"}', adjusted_by=("hook:h1",))
    decision = session._record(run, MessageRole.ASSISTANT, "assistant", "reading",
                               tool_calls=(call,))
    result = session.result(run, call, "contents of b")
    return decision, result


def test_a_revision_keeps_its_own_message_and_a_copy_does_not() -> None:
    decision, _ = answered_batch()
    kept = decision.view_message()
    assert decision.view_message() is kept
    assert kept == message_from_record(decision)
    assert decision == decision.model_copy() and hash(decision) == hash(decision.model_copy())
    edited = decision.model_copy(update={"text": "reading again"})
    assert edited.view_message().text == "reading again", "a copy kept the old revision's message"
    assert set(decision.model_dump()) == set(EffectiveRecord.model_fields), "the memo is no field"


def test_repair_shows_the_same_messages_every_time() -> None:
    records = list(answered_batch())
    first = repair(records, run_ended=True)
    second = repair(records, run_ended=True)
    fresh = repair([r.model_copy() for r in records], run_ended=True)
    assert first == second == fresh


ADJUSTMENT = ("[arguments adjusted by hook:h1 before the call ran; the model proposed "
              '{"path": "a"}]')


@pytest.mark.parametrize("cut_first", [True, False])
def test_the_adjustment_mark_depends_on_the_view_not_on_what_was_rendered_before(
        cut_first: bool) -> None:
    """The result is marked where its adjusted call is in view, and bare where the cut starts
    at the result, whichever of the two was rendered first (its kept rendering is the bare
    one)."""
    decision, result = answered_batch()
    whole = ModelView((decision.view_message(), result.view_message()))
    cut = ModelView((result.view_message(),))
    if cut_first:
        cut_render = render_request(cut)
        whole_render = render_request(whole)
    else:
        whole_render = render_request(whole)
        cut_render = render_request(cut)
    assert cut_render.messages[0].content == "contents of b"
    assert whole_render.messages[1].content == "contents of b\n" + ADJUSTMENT
    assert estimation_request(whole).messages[1].text == "contents of b\n" + ADJUSTMENT
    assert estimation_request(whole).messages[0].text == 'reading\nread({"path": "b"})'


def test_reasoning_is_sent_only_where_accepted_after_either_rendering() -> None:
    message = ViewMessage(role=MessageRole.ASSISTANT, kind=ViewKind.ASSISTANT, text="answer",
                          reasoning="because")
    view = ModelView((message,))
    for accepts in (False, True, False, True):
        sent = render_request(view, accepts_reasoning=accepts).messages[0]
        assert sent.reasoning == ("because" if accepts else None)
    assert estimation_request(view).messages[0].text == "answer"


def test_a_kept_rendering_is_no_field_of_the_message() -> None:
    decision, result = answered_batch()
    view = ModelView((decision.view_message(), result.view_message()))
    before = VIEW_ADAPTER.dump_json(view)
    render_request(view)
    estimation_request(view)
    assert VIEW_ADAPTER.dump_json(view) == before
    assert VIEW_ADAPTER.validate_json(before) == view


def _call(n: int, ordinal: int, adjusted: bool) -> ToolCall:
    return ToolCall(call_id=uuid(n), action_ordinal=ordinal, name=f"tool{n}",
                    arguments=f'{{"n": {n}}}',
                    proposed_arguments='{"n": 0}' if adjusted else None,
                    adjusted_by=("hook:h",) if adjusted else ())


@st.composite
def view_messages(draw: st.DrawFn) -> ViewMessage:
    """A message of any role that may carry what the adapter marks: an edited text, a
    truncated preview, calls (some adjusted), an answered call, reasoning."""
    role = draw(st.sampled_from(list(MessageRole)))
    first = draw(st.integers(1, 4))
    calls = tuple(_call(first + i, i + 1, draw(st.booleans()))
                  for i in range(draw(st.integers(0, 2))))
    return ViewMessage(
        role=role, kind=draw(st.sampled_from(list(ViewKind))), text=draw(st.text(max_size=8)),
        call_id=uuid(draw(st.integers(1, 5))) if draw(st.booleans()) else None,
        tool_calls=calls,
        truncation=Truncation(from_char=0, through_char=2, total_chars=9,
                              result_ref=ref("body")) if draw(st.booleans()) else None,
        reasoning=draw(st.none() | st.text(max_size=4)),
        text_changed_by=("hook:edit",) if draw(st.booleans()) else ())


@given(st.lists(view_messages(), max_size=8), st.lists(st.integers(0, 7), max_size=12),
       st.booleans())
def test_the_estimate_counts_what_the_adapter_sends(
        pool: list[ViewMessage], order: list[int], accepts: bool) -> None:
    """estimation_request gives the prompt messages of the rendered request (marks included,
    reasoning left out), whatever the messages kept from the views they were in before."""
    if not pool:
        return
    views = [ModelView(tuple(pool[i % len(pool)] for i in order)), ModelView(tuple(pool)),
             ModelView(tuple(reversed(pool)))]
    for view in views:
        render_request(view, accepts_reasoning=accepts)
        assert estimation_request(view, ("schema",)) == rendered_estimation(
            render_request(view, ("schema",)))
