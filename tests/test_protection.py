"""§5 protected inputs: the root and Executor sets, and the verbatim-in-order check."""

import pytest

from ctxspec.reference.contracts import MessageRole
from ctxspec.reference.protection import (
    BoundInput,
    HandoverItem,
    ProtectedInput,
    ProtectionViolation,
    check_protected_inputs,
    executor_protected_inputs,
    root_protected_inputs,
)
from ctxspec.reference.view import ModelView, ViewKind, ViewMessage
from tests.builders import uuid


def user(input_id: int, text: str) -> ViewMessage:
    return ViewMessage(role=MessageRole.USER, kind=ViewKind.USER_REF, text=text,
                       input_id=uuid(input_id))


def summary(text: str) -> ViewMessage:
    return ViewMessage(role=MessageRole.SYSTEM, kind=ViewKind.SUMMARY, text=text)


PROTECTED = (ProtectedInput(uuid(1), 3, "写部署方案"), ProtectedInput(uuid(2), 4, "只用 Docker"))


@pytest.mark.covers("CTX-5.1", "CTX-5.28", "CTX-5.29")
def test_root_set_is_this_runs_inputs_up_to_the_cutoff_in_receive_order() -> None:
    bound = [BoundInput(uuid(3), 5, "after cutoff"), BoundInput(uuid(2), 4, "supplement"),
             BoundInput(uuid(9), 2, "carried from run 1"), BoundInput(uuid(1), 3, "question")]
    assert root_protected_inputs(bound, input_cutoff=4) == (
        ProtectedInput(uuid(9), 2, "carried from run 1"),
        ProtectedInput(uuid(1), 3, "question"),
        ProtectedInput(uuid(2), 4, "supplement"))


@pytest.mark.covers("CTX-5.2", "CTX-5.3")
def test_executor_set_is_exactly_the_handover() -> None:
    handover = [HandoverItem(uuid(7), "task", "summarise the logs"),
                HandoverItem(uuid(8), "constraint", "no network"),
                HandoverItem(uuid(9), "material_ref", "blob:logs")]
    protected = executor_protected_inputs(handover)
    assert [(p.input_id, p.text) for p in protected] == [
        (uuid(7), "summarise the logs"), (uuid(8), "no network"), (uuid(9), "blob:logs")]
    # The Executor's request holds the hand-over only: none of the Planner's inputs.
    executor_view = ModelView(messages=tuple(user(i, t) for i, t in
                                             ((7, "summarise the logs"), (8, "no network"),
                                              (9, "blob:logs"))))
    assert check_protected_inputs(executor_view, protected) == ()


@pytest.mark.covers("CTX-5.5", "CTX-5.6", "CTX-5.7", "CTX-4.18")
def test_check_finds_missing_altered_reordered_and_repeated_inputs() -> None:
    good = ModelView(messages=(summary("earlier history"), user(1, "写部署方案"),
                               user(2, "只用 Docker")))
    assert check_protected_inputs(good, PROTECTED) == ()
    only_summary = ModelView(messages=(summary("写部署方案; 只用 Docker"), user(2, "只用 Docker")))
    assert check_protected_inputs(only_summary, PROTECTED) == (
        ProtectionViolation(uuid(1), "missing"),)
    altered = ModelView(messages=(user(1, "写部署方案 (hook edit)"), user(2, "只用 Docker")))
    assert check_protected_inputs(altered, PROTECTED) == (
        ProtectionViolation(uuid(1), "altered"),)
    swapped = ModelView(messages=(user(2, "只用 Docker"), user(1, "写部署方案")))
    assert check_protected_inputs(swapped, PROTECTED) == (
        ProtectionViolation(uuid(2), "out_of_order"),)
    twice = ModelView(messages=(user(1, "写部署方案"), user(1, "写部署方案"),
                                user(2, "只用 Docker")))
    assert check_protected_inputs(twice, PROTECTED) == (
        ProtectionViolation(uuid(1), "repeated"),)
