"""Protected inputs (§5 "输入的保护"): which inputs a role's request must carry, and the check
that a final request still carries them verbatim, with their identity, in order.

- The root role protects this Run's question, its own supplements and the carried supplements
  it claimed, up to the request's input cutoff (CTX-5.1, CTX-5.28).
- An Executor protects what the Planner handed over for this delegation: the task, the
  constraints and the material refs; never the Planner's messages, its original prompt or
  undelivered supplements (CTX-5.2, CTX-5.3).
- Every actual request carries each protected input with its original text, identity and order,
  checked again after hooks and compaction; a summary or a history query never stands in for it
  (CTX-5.5 to CTX-5.8, CTX-4.18).
"""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal
from uuid import UUID

from ctxspec.reference.segments import Segment, marked
from ctxspec.reference.view import ModelView, ViewKind, ViewMessage


@dataclass(frozen=True)
class ProtectedInput:
    """One protected input: its identity, its receive order and its original text."""

    input_id: UUID
    input_seq: int
    text: str


@dataclass(frozen=True)
class BoundInput:
    """An input bound to the current Run (its question, a supplement, a carried supplement)."""

    input_id: UUID
    input_seq: int
    text: str


def root_protected_inputs(bound: Iterable[BoundInput],
                          input_cutoff: int) -> tuple[ProtectedInput, ...]:
    """The root role's protected set for a request frozen at ``input_cutoff``, in receive order.

    Every input bound to this Run up to the cutoff is in it: the question, this Run's
    supplements, and the carried supplements bound to it. Inputs after the cutoff wait for the
    next loop (CTX-5.29).  CTX-5.1, CTX-5.28
    """
    chosen = sorted((b for b in bound if b.input_seq <= input_cutoff), key=lambda b: b.input_seq)
    return tuple(ProtectedInput(b.input_id, b.input_seq, b.text) for b in chosen)


@dataclass(frozen=True)
class HandoverItem:
    """One item the Planner handed to an Executor: a task, a constraint or a material ref."""

    item_id: UUID
    kind: Literal["task", "constraint", "material_ref"]
    text: str


def executor_protected_inputs(handover: Sequence[HandoverItem]) -> tuple[ProtectedInput, ...]:
    """An Executor's protected set: exactly the delegation's hand-over, in the order given.

    Nothing else of the Planner enters it: not its messages, its original prompt or the
    supplements it never handed over.  CTX-5.2, CTX-5.3
    """
    return tuple(ProtectedInput(item.item_id, position, item.text)
                 for position, item in enumerate(handover, start=1))


@dataclass(frozen=True)
class ProtectionViolation:
    """A protected input the final request does not carry as it must."""

    input_id: UUID
    problem: Literal["missing", "altered", "out_of_order", "repeated"]


Refs = tuple[dict[UUID, list[int]], dict[UUID, list[str]]]
"""Each input's positions as a ``user_ref`` message, and its texts there, in order."""


def user_refs(messages: Sequence[ViewMessage], start: int = 0) -> Refs:
    """Where each input is shown as a ``user_ref`` message (positions from ``start``)."""
    positions: dict[UUID, list[int]] = {}
    texts: dict[UUID, list[str]] = {}
    user_ref = ViewKind.USER_REF
    for index, message in enumerate(messages, start):
        if message.kind is user_ref and message.input_id is not None:
            positions.setdefault(message.input_id, []).append(index)
            texts.setdefault(message.input_id, []).append(message.text)
    return positions, texts


def segment_user_refs(segment: Segment) -> Refs:
    """:func:`user_refs` of a kept segment, kept with it and extended with it: the lists of
    an input the new items show again are copied, never changed in place."""
    def extend(kept: tuple[Refs, int], items: tuple[ViewMessage, ...]) -> tuple[Refs, int]:
        (positions, texts), length = kept
        added_positions, added_texts = user_refs(items, length)
        if not added_positions:
            return (positions, texts), length + len(items)
        positions, texts = dict(positions), dict(texts)
        for input_id, found in added_positions.items():
            positions[input_id] = [*positions.get(input_id, ()), *found]
            texts[input_id] = [*texts.get(input_id, ()), *added_texts[input_id]]
        return (positions, texts), length + len(items)
    made: tuple[Refs, int] = segment.memo(
        "user_refs", lambda: (user_refs(segment.items), len(segment)), extend)
    return made[0]


def _refs_around(messages: tuple[ViewMessage, ...], at: int, segment: Segment,
                 wanted: set[UUID]) -> Refs:
    """:func:`user_refs` of the ``wanted`` inputs, the segment at ``at`` taken from what it
    keeps."""
    end = at + len(segment)
    parts = ((*user_refs(messages[:at]), 0), (*segment_user_refs(segment), at),
             (*user_refs(messages[end:], end), 0))
    positions: dict[UUID, list[int]] = {}
    texts: dict[UUID, list[str]] = {}
    for input_id in wanted:
        for part_positions, part_texts, shift in parts:
            if input_id in part_positions:
                positions.setdefault(input_id, []).extend(
                    p + shift for p in part_positions[input_id])
                texts.setdefault(input_id, []).extend(part_texts[input_id])
    return positions, texts


def check_protected_inputs(view: ModelView,
                           protected: Sequence[ProtectedInput]) -> tuple[ProtectionViolation, ...]:
    """Every protected input appears exactly once as a user message with its input_id and its
    original text, in receive order. Empty means the request may be sent.

    Run it on the final request, after hooks and compaction.  CTX-5.5, CTX-5.6, CTX-5.7
    """
    found_segment = marked(view)
    if found_segment is None:
        positions, texts = user_refs(view.messages)
    else:  # a kept segment's inputs are listed once (issue #35)
        positions, texts = _refs_around(view.messages, *found_segment,
                                        {p.input_id for p in protected})
    violations: list[ProtectionViolation] = []
    last_position = -1
    for item in sorted(protected, key=lambda p: p.input_seq):
        found = positions.get(item.input_id, [])
        if not found:
            violations.append(ProtectionViolation(item.input_id, "missing"))
            continue
        if len(found) > 1:
            violations.append(ProtectionViolation(item.input_id, "repeated"))
        if texts[item.input_id][0] != item.text:
            violations.append(ProtectionViolation(item.input_id, "altered"))
        if found[0] < last_position:
            violations.append(ProtectionViolation(item.input_id, "out_of_order"))
        last_position = max(last_position, found[0])
    return tuple(violations)
