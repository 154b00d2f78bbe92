"""The delivery state of one Session and what a delivery transition writes or refuses (§2
"身份、顺序和对象结构", §5 "输入的保护、补充与转交"): the DeliveryBook, the InputManifest T_FREEZE
fixes, the WriteSet of one RuntimeCommit and the DeliveryRejected of a broken rule. Values only;
the transitions are reference/delivery.py's, which re-exports these names.
"""

from dataclasses import dataclass
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
    """

    session_id: UUID
    inputs: tuple[UserInput, ...] = ()
    deliveries: tuple[UserInputDelivery, ...] = ()
    run_ids: tuple[UUID, ...] = ()
    active_run_id: UUID | None = None
    manifests: tuple[InputManifest, ...] = ()


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


__all__ = ["LIVE_STATES", "Applied", "DeliveryBook", "DeliveryRejectCode", "DeliveryRejected",
           "Frozen", "InputManifest", "WriteSet", "empty_book"]
