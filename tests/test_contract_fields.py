"""Contracts given the same fields share one set of their names (Q503, issue #35): what a
contract says it was given, and what a document of it holds, are as before."""

from uuid import UUID

from ctxspec.reference import contracts as c

BODY = "sha256:" + "ab" * 32


def _run(n: int) -> c.Operation:
    """An Operation as the runtime builds one: every field given but the schema version."""
    return c.Operation(operation_id=UUID(int=n), run_id=UUID(int=100), node_task_id=UUID(int=7),
                       purpose=c.OperationPurpose.MODEL, purpose_key=f"model:{n}",
                       state=c.OperationState.RUNNING, raw_result_ref=None,
                       effective_result_ref=None)


def test_contracts_given_the_same_fields_share_their_set_and_say_what_they_were_given() -> None:
    first, second = _run(1), _run(2)
    assert first.__pydantic_fields_set__ is second.__pydantic_fields_set__
    # Written out by hand: every field of an Operation but the schema version, left default.
    assert first.model_fields_set == set(c.Operation.model_fields) - {"schema_version"}
    read = c.Operation.model_validate_json(first.model_dump_json())
    assert read.model_fields_set == set(c.Operation.model_fields) and read == first
    short = c.PayloadRef(digest=BODY, size_bytes=3)  # media_type left to its default
    assert short.model_fields_set == {"digest", "size_bytes"}
    assert short.model_dump(exclude_unset=True) == {"digest": BODY, "size_bytes": 3}


def test_a_copy_with_changes_leaves_the_shared_set_as_it_was() -> None:
    first, second = _run(1), _run(2)
    given = set(first.model_fields_set)
    ref = c.PayloadRef(digest=BODY, size_bytes=3)
    changed = first.model_copy(update={"raw_result_ref": ref, "schema_version": 1})
    assert changed.raw_result_ref == ref
    assert changed.model_fields_set == set(c.Operation.model_fields)
    assert first.model_fields_set == given and second.model_fields_set == given
    assert first.raw_result_ref is None
    # A position's document holds what its step set, shared set or not (NodeCheckpoint).
    position = c.NodeCheckpoint(stage=c.NodeStage.LOOP_DONE, loops=2, tool_calls_made=1, tick=4)
    assert position.document() == {"stage": "loop_done", "loops": 2, "tool_calls_made": 1,
                                   "tick": 4}
