"""History projection (§4) with §5 de-duplication: the design's example and the §12 rows that
are pure here, with expected views written by hand from the design."""

import pytest

from ctxspec.reference.contracts import InputKind, MessageRole, OperationState, RunStatus
from ctxspec.reference.history import (
    DEFAULT_RECENT_RUNS,
    EndedRun,
    project_history,
    select_history,
)
from ctxspec.reference.protocol import UnsettledBatch
from ctxspec.reference.view import EffectiveRecord, ModelView
from tests.builders import RunFacts, SessionBuilder, uuid

Q, S = InputKind.QUESTION, InputKind.SUPPLEMENT


def project(session: SessionBuilder, current: RunFacts, recent: int = DEFAULT_RECENT_RUNS,
            protected: tuple[str, ...] = ()) -> ModelView:
    protected_ids = {i.input_id for i in session.inputs.values() if i.text in protected}
    view = project_history(ended_runs=session.ended(current), recent_runs=recent,
                           source=session, current_run_id=current.run_id,
                           current_records=current.records, protected_input_ids=protected_ids)
    assert isinstance(view, ModelView)
    return view


def lines(view: ModelView) -> list[tuple[str, str, str]]:
    return [(m.role.value, m.kind.value, m.text) for m in view.messages]


@pytest.mark.covers("CTX-4.5", "CTX-4.6", "CTX-4.15", "CTX-4.16")
def test_section4_example_older_run_keeps_question_supplements_final_and_status() -> None:
    # §4: 原问题 写部署方案 / 补充 只用 Docker / 补充 不开放公网端口 / 最终结果 / succeeded.
    session = SessionBuilder()
    first = session.run()
    session.ask(first, "写部署方案")
    session.call(first, "shell")  # process that an older run does not show
    session.result(first, session.runs[0].records[-1].tool_calls[0], "docker ps")
    for text in ("只用 Docker", "不开放公网端口"):
        session.deliver(first, session.receive(first, S, text))
    session.end(first, RunStatus.SUCCEEDED, final="方案见……")
    current = session.run()
    session.ask(current, "下一步")
    assert lines(project(session, current, recent=0, protected=("下一步",))) == [
        ("user", "user_ref", "写部署方案"),
        ("user", "user_ref", "只用 Docker"),
        ("user", "user_ref", "不开放公网端口"),
        ("assistant", "assistant", "方案见……"),
        ("system", "outcome", "[run 1 ended: succeeded]"),
        ("user", "user_ref", "下一步"),
    ]


@pytest.mark.covers("CTX-4.3", "CTX-4.4", "CTX-4.7", "CTX-4.12", "CTX-4.13", "CTX-4.14")
def test_n2_with_succeeded_failed_stopped_runs() -> None:
    # §12 row 1: runs succeeded, failed, stopped; the current request shows the full process of
    # the failed and the stopped run only; the succeeded run keeps all inputs and its result.
    session = SessionBuilder()
    r1 = session.run()
    session.ask(r1, "q1")
    session.say(r1, "thinking 1")
    session.end(r1, RunStatus.SUCCEEDED, final="answer 1")
    r2 = session.run()
    session.ask(r2, "q2")
    session.say(r2, "thinking 2")
    session.end(r2, RunStatus.FAILED)
    r3 = session.run()
    session.ask(r3, "q3")
    session.deliver(r3, session.receive(r3, S, "s3"))
    session.end(r3, RunStatus.STOPPED)
    r4 = session.run()
    session.ask(r4, "q4")
    assert lines(project(session, r4, protected=("q4",))) == [
        ("user", "user_ref", "q1"),
        ("assistant", "assistant", "answer 1"),
        ("system", "outcome", "[run 1 ended: succeeded]"),
        ("user", "user_ref", "q2"),
        ("assistant", "assistant", "thinking 2"),
        ("system", "outcome", "[run 2 ended: failed; no final result]"),
        ("user", "user_ref", "q3"),
        ("user", "user_ref", "s3"),
        ("system", "outcome", "[run 3 ended: stopped; no final result]"),
        ("user", "user_ref", "q4"),
    ]


@pytest.mark.covers("CTX-4.1", "CTX-4.4")
def test_select_history_is_the_design_slicing() -> None:
    runs = [EndedRun(uuid(n), n, RunStatus.SUCCEEDED) for n in range(1, 6)]
    assert select_history(runs, 2) == (runs[:3], runs[3:])
    assert select_history(runs, 0) == (runs, [])
    assert select_history(runs, 9) == ([], runs)
    assert DEFAULT_RECENT_RUNS == 2
    with pytest.raises(ValueError, match="recent_runs must be >= 0"):
        select_history(runs, -1)
    with pytest.raises(ValueError, match="strictly increasing run_no"):
        select_history(runs[::-1], 2)
    with pytest.raises(ValueError, match="not ended"):
        EndedRun(uuid(9), 9, RunStatus.RUNNING)


@pytest.mark.covers("CTX-4.20")
def test_a_taken_over_run_is_one_run() -> None:
    # A takeover continues the same Run (same run_id, run_no); it never adds a history round.
    session = SessionBuilder()
    r1 = session.run()
    session.ask(r1, "q1")
    session.say(r1, "before the crash")
    session.say(r1, "after the takeover")
    session.end(r1, RunStatus.SUCCEEDED, final="a1")
    r2 = session.run()
    session.ask(r2, "q2")
    outcomes = [m for m in project(session, r2, protected=("q2",)).messages
                if m.kind.value == "outcome"]
    assert [m.text for m in outcomes] == ["[run 1 ended: succeeded]"]


@pytest.mark.covers("CTX-2.3", "CTX-4.15", "CTX-4.17")
def test_five_supplements_in_one_run_survive_trimming() -> None:
    # §12 row 2: five supplements are five UserInputs of one Run; once that Run is older than the
    # recent two, its process is trimmed but the question and all five supplements remain.
    session = SessionBuilder()
    r1 = session.run()
    session.ask(r1, "q1")
    for n in range(1, 6):
        session.deliver(r1, session.receive(r1, S, f"s{n}"))
        session.say(r1, f"step {n}")
    session.end(r1, RunStatus.SUCCEEDED, final="a1")
    for n in (2, 3):
        run = session.run()
        session.ask(run, f"q{n}")
        session.end(run, RunStatus.SUCCEEDED, final=f"a{n}")
    current = session.run()
    session.ask(current, "q4")
    view = lines(project(session, current, protected=("q4",)))
    assert view[:8] == [("user", "user_ref", t) for t in ("q1", "s1", "s2", "s3", "s4", "s5")] \
        + [("assistant", "assistant", "a1"), ("system", "outcome", "[run 1 ended: succeeded]")]
    assert not any(text.startswith("step") for _, _, text in view)
    assert len({m.run_no for m in session.runs}) == 4


@pytest.mark.covers("CTX-5.23", "CTX-5.24", "CTX-5.25")
def test_carried_supplement_is_shown_once_in_the_current_request() -> None:
    # A supplement claimed by run 1 but never delivered (run 1 failed before first output) is
    # carried to run 2 with the same input_id; it is current protected input there: its body is
    # shown once, in the current request, with its source; run 1 keeps a marker.
    session = SessionBuilder()
    r1 = session.run()
    session.ask(r1, "q1")
    late = session.receive(r1, S, "late supplement")
    session.end(r1, RunStatus.FAILED)
    r2 = session.run()
    session.ask(r2, "q2")
    session.deliver(r2, late)
    view = project(session, r2, recent=0, protected=("q2", "late supplement"))
    assert lines(view) == [
        ("user", "user_ref", "q1"),
        ("system", "marker", f"[user input {late.input_id}: text shown in the current request]"),
        ("system", "outcome", "[run 1 ended: failed; no final result]"),
        ("user", "user_ref", "q2"),
        ("user", "user_ref", "late supplement"),
    ]
    assert view.messages[-1].carried_from_run_id == r1.run_id


@pytest.mark.covers("CTX-5.25", "CTX-5.26")
def test_body_at_last_delivered_position_marker_elsewhere() -> None:
    # Received in run 1, never delivered there, carried and delivered in run 2 (both older now):
    # the body sits in run 2, run 1 keeps a marker. An input never delivered anywhere keeps its
    # receive position.
    session = SessionBuilder()
    r1 = session.run()
    session.ask(r1, "q1")
    carried = session.receive(r1, S, "carried")
    session.end(r1, RunStatus.STOPPED)
    r2 = session.run()
    session.ask(r2, "q2")
    session.deliver(r2, carried)
    stranded = session.receive(r2, S, "never delivered")
    session.end(r2, RunStatus.SUCCEEDED, final="a2")
    r3 = session.run()
    session.ask(r3, "q3")
    assert lines(project(session, r3, recent=0, protected=("q3",))) == [
        ("user", "user_ref", "q1"),
        ("system", "marker", f"[user input {carried.input_id}: text shown in run {r2.run_id}]"),
        ("system", "outcome", "[run 1 ended: stopped; no final result]"),
        # Bound with the next question in the original receive order (§5): carried first.
        ("user", "user_ref", "carried"),
        ("user", "user_ref", "q2"),
        ("user", "user_ref", "never delivered"),
        ("assistant", "assistant", "a2"),
        ("system", "outcome", "[run 2 ended: succeeded]"),
        ("user", "user_ref", "q3"),
    ]
    assert stranded.last_delivered_run_id is None


@pytest.mark.covers("CTX-4.11")
def test_executor_private_log_never_enters_root_history() -> None:
    # §12 row 3 (history side): the root context shows the delegation and its summary feedback;
    # the Executor's own context (its model and tool log) is not part of the projection.
    session = SessionBuilder()
    r1 = session.run()
    session.ask(r1, "q1")
    (delegate,) = session.call(r1, "delegate_to_executor")
    executor_context = session.fresh()
    session.private(r1, executor_context, "executor private reasoning")
    session.result(r1, delegate, "executor summary: done")
    session.end(r1, RunStatus.SUCCEEDED, final="a1")
    r2 = session.run()
    session.ask(r2, "q2")
    texts = [text for _, _, text in lines(project(session, r2, protected=("q2",)))]
    assert "executor summary: done" in texts
    assert "executor private reasoning" not in texts


@pytest.mark.covers("CTX-6.7")
def test_unsettled_current_batch_builds_no_request() -> None:
    session = SessionBuilder()
    r1 = session.run()
    session.ask(r1, "q1")
    first, second = session.call(r1, "read", "write")
    session.result(r1, second, "written")
    outcome = project_history(ended_runs=[], recent_runs=2, source=session,
                              current_run_id=r1.run_id, current_records=r1.records,
                              protected_input_ids=set())
    assert outcome == UnsettledBatch(r1.records[1].record_id, (first.call_id,))


@pytest.mark.covers("CTX-5.24", "CTX-5.26")
def test_an_input_twice_in_the_current_context_keeps_a_marker_at_the_second_place() -> None:
    # The current context holds the question's user_ref twice (claimed by a frozen request, then
    # delivered again): the body is shown once, the second place keeps a marker that still
    # names the input, its own record and the Run it sits in.
    session = SessionBuilder()
    current = session.run()
    question = session.ask(current, "q1")
    again = session.claim(current, question)
    view = project(session, current, protected=("q1",))
    assert lines(view) == [
        ("user", "user_ref", "q1"),
        ("system", "marker", f"[user input {question.input_id}: text shown earlier in this "
                             "request]"),
    ]
    marker = view.messages[1]
    assert (marker.input_id, marker.record_id, marker.source_run_id) == \
        (question.input_id, again.record_id, current.run_id)


@pytest.mark.covers("CTX-5.25", "CTX-5.26")
def test_a_marker_in_an_older_run_names_its_input_record_and_run() -> None:
    # Run 1 received the supplement, run 2 delivered it: run 1 (recent, so its records are
    # shown) keeps a marker at its own user_ref record.
    session = SessionBuilder()
    r1 = session.run()
    session.ask(r1, "q1")
    late = session.receive(r1, S, "late")
    claimed = session.claim(r1, late)
    session.end(r1, RunStatus.FAILED)
    r2 = session.run()
    session.ask(r2, "q2")
    session.deliver(r2, late)
    session.end(r2, RunStatus.SUCCEEDED, final="a2")
    r3 = session.run()
    session.ask(r3, "q3")
    view = project(session, r3, protected=("q3",))
    (marker,) = [m for m in view.messages if m.kind.value == "marker"]
    assert marker.text == f"[user input {late.input_id}: text shown in run {r2.run_id}]"
    assert (marker.input_id, marker.record_id, marker.source_run_id) == \
        (late.input_id, claimed.record_id, r1.run_id)


@pytest.mark.covers("CTX-6.10")
def test_a_recent_runs_placeholder_reports_the_real_operation_state() -> None:
    # Run 1 failed with its deploy call unanswered; the Operation is known to be still running.
    session = SessionBuilder()
    r1 = session.run()
    session.ask(r1, "q1")
    (deploy,) = session.call(r1, "deploy")
    session.end(r1, RunStatus.FAILED)
    r2 = session.run()
    session.ask(r2, "q2")
    view = project_history(ended_runs=session.ended(r2), recent_runs=2, source=session,
                           current_run_id=r2.run_id, current_records=r2.records,
                           protected_input_ids={session.runs[1].inputs[0]},
                           call_states={deploy.call_id: OperationState.RUNNING})
    assert isinstance(view, ModelView)
    placeholder = view.messages[2]
    assert (placeholder.kind.value, placeholder.call_id, placeholder.source_run_id) == \
        ("placeholder", deploy.call_id, r1.run_id)
    assert placeholder.text == (
        '{"operation_state": "running", "reason": "the run ended before this call produced a '
        'result", "status": "not_executed", "tool": "deploy"}')


def stored(record: EffectiveRecord) -> EffectiveRecord:
    """The record as a store reads it back: equal, with its own id objects."""
    return EffectiveRecord.model_validate_json(record.model_dump_json())


@pytest.mark.covers("CTX-4.23")
def test_every_message_of_a_run_shares_the_runs_one_id_object() -> None:
    # A projection over 100k records keeps one run id object per Run alive, not one per record:
    # records read from storage each carry their own copy, the view stamps the Run's.
    session = SessionBuilder()
    for n in (1, 2, 3):
        run = session.run()
        session.ask(run, f"q{n}")
        session.say(run, f"work {n}")
        session.end(run, RunStatus.SUCCEEDED, final=f"a{n}")
    current = session.run()
    session.ask(current, "q4")
    for facts in session.runs:
        facts.records = [stored(record) for record in facts.records]
        facts.final = stored(facts.final) if facts.final is not None else None
    view = project(session, current, protected=("q4",))
    runs = {facts.run_id: facts.run_id for facts in session.runs}
    stamped = [m for m in view.messages if m.kind.value != "outcome"]
    assert {m.source_run_id for m in stamped} == set(runs)  # older, both recent and current
    assert all(m.source_run_id is runs[m.source_run_id] for m in stamped if m.source_run_id)
    assert all(r.record.run_id is not runs[r.record.run_id]
               for facts in session.runs for r in facts.records)


@pytest.mark.covers("CTX-5.24")
def test_an_annotation_that_names_an_input_is_never_taken_for_the_input() -> None:
    # Only a user_ref stands for an input's body: an annotation that refers to the question
    # keeps its own text where it is, even though the question's body is shown before it.
    session = SessionBuilder()
    r1 = session.run()
    question = session.ask(r1, "q1")
    session._record(r1, MessageRole.SYSTEM, "annotation", "note on q1", input_id=question.input_id,
                    annotation_source="hook:audit")
    session.end(r1, RunStatus.SUCCEEDED, final="a1")
    r2 = session.run()
    session.ask(r2, "q2")
    assert lines(project(session, r2, protected=("q2",)))[:3] == [
        ("user", "user_ref", "q1"), ("system", "annotation", "note on q1"),
        ("assistant", "assistant", "a1")]
