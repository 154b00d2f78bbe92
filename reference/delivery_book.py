"""The delivery state of one Session and what a delivery transition writes or refuses (§2
"身份、顺序和对象结构", §5 "输入的保护、补充与转交"): the DeliveryBook, the InputManifest T_FREEZE
fixes, the WriteSet of one RuntimeCommit and the DeliveryRejected of a broken rule. Values only;
the transitions are reference/delivery.py's, which re-exports these names.
"""

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Self
from uuid import UUID

from pydantic import model_validator

from ctxspec.reference.contracts import (
    Contract,
    DeliveryState,
    Seq,
    UserInput,
    UserInputDelivery,
)

LIVE_STATES = frozenset({DeliveryState.PENDING, DeliveryState.CLAIMED})
"""A live delivery may still change; delivered and carried are final."""


class DeliveryRejectCode(StrEnum):
    """Why a delivery transition was refused. These name rules of §2/§5 broken by a caller; they
    are not the design's §11 error codes and never reach a client."""

    SESSION_MISMATCH = "SESSION_MISMATCH"
    DUPLICATE_INPUT_ID = "DUPLICATE_INPUT_ID"
    DUPLICATE_DELIVERY_ID = "DUPLICATE_DELIVERY_ID"
    DUPLICATE_RUN_ID = "DUPLICATE_RUN_ID"
    INPUT_SEQ_OUT_OF_ORDER = "INPUT_SEQ_OUT_OF_ORDER"
    RUN_ALREADY_ACTIVE = "RUN_ALREADY_ACTIVE"
    ORIGIN_RUN_MISMATCH = "ORIGIN_RUN_MISMATCH"
    UNKNOWN_RUN = "UNKNOWN_RUN"
    RUN_ENDED = "RUN_ENDED"
    UNKNOWN_OPERATION = "UNKNOWN_OPERATION"
    OPERATION_ALREADY_FROZEN = "OPERATION_ALREADY_FROZEN"
    CUTOFF_AHEAD_OF_INPUTS = "CUTOFF_AHEAD_OF_INPUTS"
    CUTOFF_BEFORE_QUESTION = "CUTOFF_BEFORE_QUESTION"
    CUTOFF_REGRESSED = "CUTOFF_REGRESSED"
    CARRY_IDS_MISMATCH = "CARRY_IDS_MISMATCH"
    DELIVERY_UNBOUND = "DELIVERY_UNBOUND"
    DELIVERY_ALREADY_BOUND = "DELIVERY_ALREADY_BOUND"
    DELIVERY_OTHER_RUN = "DELIVERY_OTHER_RUN"
    DELIVERY_OTHER_OPERATION = "DELIVERY_OTHER_OPERATION"
    DELIVERY_NOT_CLAIMED = "DELIVERY_NOT_CLAIMED"
    DELIVERY_ALREADY_CLAIMED = "DELIVERY_ALREADY_CLAIMED"
    DELIVERY_ALREADY_DELIVERED = "DELIVERY_ALREADY_DELIVERED"
    DELIVERY_ALREADY_CARRIED = "DELIVERY_ALREADY_CARRIED"


@dataclass(frozen=True, slots=True)
class DeliveryRejected:
    """A refused transition: the rule broken (``code``) and a sentence for humans."""

    code: DeliveryRejectCode
    reason: str


class InputManifest(Contract):
    """The input list T_FREEZE fixes for one model Operation (§5 "输入清单"): every retry,
    compaction and recovery of that Operation uses exactly this list.  CTX-5.28, CTX-5.31

    ``input_ids`` are the Run's inputs in this request (question, claimed carried supplements
    and the Run's supplements up to the cutoff: the root role's protected set, CTX-5.1), in
    receive order; ``claimed_*`` are the ones this Operation newly claimed, in receive order.
    """

    operation_id: UUID
    run_id: UUID
    input_cutoff: Seq
    input_ids: tuple[UUID, ...]
    claimed_input_ids: tuple[UUID, ...]
    claimed_delivery_ids: tuple[UUID, ...]

    @model_validator(mode="after")
    def _claimed_within(self) -> Self:
        if len(self.claimed_input_ids) != len(self.claimed_delivery_ids):
            raise ValueError("one claimed delivery per claimed input")
        if not set(self.claimed_input_ids) <= set(self.input_ids):
            raise ValueError("the claimed inputs are part of the request's inputs")
        return self


@dataclass(frozen=True, slots=True)
class DeliveryBook:
    """The delivery state of one Session: its UserInputs in receive order, every
    UserInputDelivery (in creation order, each at its current state), its Runs in question order
    and the input manifests of frozen Operations. Build the first one with :func:`empty_book`.

    Each sequence is a tuple or, once a transition appended to it, a :class:`~ctxspec.reference.
    grown.Grown` sharing its items with the book it grew from (equal to the tuple of its items;
    registering an input costs the input, not the Session's inputs, Q500).
    """

    session_id: UUID
    inputs: Sequence[UserInput] = ()
    deliveries: Sequence[UserInputDelivery] = ()
    run_ids: Sequence[UUID] = ()
    active_run_id: UUID | None = None
    manifests: Sequence[InputManifest] = ()
    index: "BookIndex | None" = field(default=None, compare=False, repr=False, hash=False)
    """Where each input, delivery and manifest sits (:func:`book_index`): derived from the
    other fields, never part of the value (Q320)."""


@dataclass(slots=True, eq=False)
class BookIndex:
    """Positions in the tuples of a lineage of books (Q320): each id to its place, each input
    and each target Run to the places of its deliveries, each Run to its manifests. A book
    derived from the lineage's newest book (``inputs`` / ``deliveries`` / ``manifests`` are that
    book's own tuples) extends it in the time of what changed; an older book reads only the
    positions below its own lengths, which the lineage never changes (tuples only grow, and a
    replaced delivery keeps its id and input). A position listed under a target is checked
    against the delivery there, since a binding moves a delivery to its Run."""

    inputs: Sequence[UserInput]
    deliveries: Sequence[UserInputDelivery]
    manifests: Sequence[InputManifest]
    input_at: dict[UUID, int]
    delivery_at: dict[UUID, int]
    by_input: dict[UUID, list[int]]
    by_target: dict[UUID | None, list[int]]
    manifests_of: dict[UUID, list[int]]
    manifest_at: dict[UUID, int]
    run_ids: Sequence[UUID] = ()
    run_at: dict[UUID, int] = field(default_factory=dict)
    """Each Run's place in ``run_ids`` (a Session of 5,000 Runs asks it per transition)."""

    def add(self, inputs: Sequence[UserInput], deliveries: Sequence[UserInputDelivery],
            manifests: Sequence[InputManifest], run_ids: Sequence[UUID] = ()) -> None:
        """Index what follows the positions already indexed, and become these tuples'."""
        for at in range(len(self.run_ids), len(run_ids)):
            self.run_at[run_ids[at]] = at
        self.run_ids = run_ids
        for at in range(len(self.inputs), len(inputs)):
            self.input_at[inputs[at].input_id] = at
        for at in range(len(self.deliveries), len(deliveries)):
            known = deliveries[at]
            self.delivery_at[known.delivery_id] = at
            self.by_input.setdefault(known.input_id, []).append(at)
            self.by_target.setdefault(known.target_run_id, []).append(at)
        for at in range(len(self.manifests), len(manifests)):
            self.manifests_of.setdefault(manifests[at].run_id, []).append(at)
            self.manifest_at[manifests[at].operation_id] = at
        self.inputs, self.deliveries, self.manifests = inputs, deliveries, manifests

    def moved(self, changed: "tuple[UserInputDelivery, ...] | list[UserInputDelivery]") -> None:
        """List a changed delivery under its (new) target Run too."""
        for known in changed:
            at = self.delivery_at[known.delivery_id]
            places = self.by_target.setdefault(known.target_run_id, [])
            if not places or places[-1] != at:
                places.append(at)


def book_index(book: DeliveryBook) -> BookIndex:
    """The book's index, built once from its tuples when it has none (a book constructed
    directly, as a restore does). The index is a cache of the value's own fields: building it
    changes nothing a caller can observe."""
    if book.index is None:
        index = BookIndex((), (), (), {}, {}, {}, {}, {}, {})
        index.add(book.inputs, book.deliveries, book.manifests, book.run_ids)
        object.__setattr__(book, "index", index)
        return index
    return book.index


def has_run(book: DeliveryBook, run_id: UUID | None) -> bool:
    """Whether ``run_id`` is one of the book's Runs, through its index."""
    return book_index(book).run_at.get(run_id, len(book.run_ids)) < len(book.run_ids) \
        if run_id is not None else False


def derive(book: DeliveryBook, *, inputs: Sequence[UserInput] | None = None,
           deliveries: Sequence[UserInputDelivery] | None = None,
           changed: "tuple[UserInputDelivery, ...] | list[UserInputDelivery]" = (),
           run_ids: Sequence[UUID] | None = None, active_run_id: UUID | None = None,
           keep_active: bool = True,
           manifests: Sequence[InputManifest] | None = None) -> DeliveryBook:
    """The next book of a transition: ``book`` with the given fields, its index extended by
    what was appended and what ``changed`` when ``book`` is its lineage's newest, else left to
    be built when first asked (a second book derived from the same parent, Q320)."""
    new = DeliveryBook(
        session_id=book.session_id,
        inputs=book.inputs if inputs is None else inputs,
        deliveries=book.deliveries if deliveries is None else deliveries,
        run_ids=book.run_ids if run_ids is None else run_ids,
        active_run_id=book.active_run_id if keep_active else active_run_id,
        manifests=book.manifests if manifests is None else manifests)
    index = book.index
    if index is not None and index.inputs is book.inputs \
            and index.deliveries is book.deliveries and index.manifests is book.manifests \
            and index.run_ids is book.run_ids:
        index.add(new.inputs, new.deliveries, new.manifests, new.run_ids)
        index.moved(changed)
        object.__setattr__(new, "index", index)
    return new


@dataclass(frozen=True, slots=True)
class WriteSet:
    """What one RuntimeCommit writes: the UserInputs and deliveries inserted, the new version of
    every delivery that changed (in receive order of their inputs) and the input manifest
    T_FREEZE fixes. An empty write set means there is nothing to commit."""

    inputs: tuple[UserInput, ...] = ()
    inserted: tuple[UserInputDelivery, ...] = ()
    updated: tuple[UserInputDelivery, ...] = ()
    manifest: InputManifest | None = None

    @property
    def is_empty(self) -> bool:
        return not (self.inputs or self.inserted or self.updated) and self.manifest is None


Applied = tuple[DeliveryBook, WriteSet]
Frozen = tuple[DeliveryBook, WriteSet, InputManifest]


def empty_book(session_id: UUID) -> DeliveryBook:
    """A Session with no input yet."""
    return DeliveryBook(session_id=session_id)


__all__ = ["LIVE_STATES", "Applied", "BookIndex", "DeliveryBook", "DeliveryRejectCode",
           "DeliveryRejected", "Frozen", "InputManifest", "WriteSet", "book_index", "derive",
           "empty_book"]
