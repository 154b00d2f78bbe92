"""Inputs, supplements and their delivery: §2 "身份、顺序和对象结构" (UserInput,
UserInputDelivery, the input_seq order) and §5 "输入的保护、补充与转交" with its "投递时序"
sequence (APP-INPUT, T_FREEZE, T_FIRST_OUTPUT, APP-FINALIZE), plus the §11 row "用户在准备/压缩期间
Stop".

The lifecycle of one delivery (one binding of a UserInput to a Run)::

    pending --claim (T_FREEZE)--> claimed --first output (T_FIRST_OUTPUT)--> delivered
    pending | claimed --Run ended (APP-FINALIZE)--> carried  (+ a NEW pending successor)

A delivered or carried delivery never changes again; a move to the next question is a new
delivery pointing back through previous_delivery_id, never a rewrite of the old one.

Pure: no I/O, clock, randomness or uuid4. Ids and times arrive as arguments; every transition
returns ``(new_book, write_set)`` — the write set is what the shell commits in the one
transaction of the named RuntimeCommit — or a :class:`DeliveryRejected` naming the rule broken.
Exceptions are kept for programming errors (an unknown id in a query, a question without the
id of the Run it creates).

Requirement IDs implemented here: CTX-1.3, CTX-2.2, CTX-2.3, CTX-2.7, CTX-2.9, CTX-2.19,
CTX-2.20, CTX-2.22, CTX-2.27, CTX-5.1, CTX-5.9, CTX-5.10, CTX-5.12, CTX-5.13, CTX-5.14,
CTX-5.16, CTX-5.17, CTX-5.18, CTX-5.23, CTX-5.27, CTX-5.28, CTX-5.29, CTX-5.30, CTX-5.31,
CTX-5.32, CTX-11.6.

Decisions where §5 is not explicit (docs/open-questions.md records them with their tests):

- Only supplements are carried. A Run's question whose delivery never became delivered (a stop
  during preparation, a failure before first output) keeps that pending/claimed delivery as a
  closed fact of its ended Run: it is never claimed again and is not handed to the next
  question (§5 and §11 speak of carried *supplements*; §5's "始终未 delivered 的旧输入保留原接收
  位置" is exactly this case).
- A supplement received while no Run is active gets a pending delivery with no target; the
  receipt names no Run. It never starts a Run (CTX-5.27); the next question binds it.
- Binding a pending delivery to the next question fills its target_run_id in place (pending
  stays pending). Each hand-over is one delivery record, created by APP-FINALIZE; the old
  Operation's delivery facts are never touched (CTX-2.22).
- The inputs of a Run are ordered by input_seq, so supplements carried from earlier Runs come
  before the question that picked them up (§5: "保留原接收顺序").
- The cutoff of a freeze lies between the Run's question and the last received input, and never
  goes back below an earlier freeze of the same Run.
- A second freeze of the same Operation with the same Run and cutoff returns the stored manifest
  and an empty write set (a replay after a crash between commit and reply must not claim
  anything new); with another Run or cutoff it is rejected.
- A second first-output receipt for the same Operation changes nothing: the evidence is saved
  once (CTX-5.18), the first receipt stays.
- A first output or a freeze for an ended Run is rejected (a late result of an old owner never
  advances an ended Run, §10).
"""

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import TypeVar
from uuid import UUID

from ctxspec.reference.contracts import (
    DeliveryState,
    InputKind,
    PayloadRef,
    Timestamp,
    UserInput,
    UserInputDelivery,
)
from ctxspec.reference.delivery_book import (
    LIVE_STATES,
    Applied,
    DeliveryBook,
    DeliveryRejectCode,
    DeliveryRejected,
    Frozen,
    InputManifest,
    WriteSet,
    book_index,
    derive,
    empty_book,
    has_run,
)
from ctxspec.reference.grown import grown

_T = TypeVar("_T")

# --- one delivery: the state graph ---------------------------------------------------------


def _with(delivery: UserInputDelivery, **changes: object) -> UserInputDelivery:
    """A validated new version of ``delivery``."""
    return UserInputDelivery.model_validate({**dict(delivery), **changes})


_FINAL_STATE_CODES: Mapping[DeliveryState, DeliveryRejectCode] = MappingProxyType({
    DeliveryState.CLAIMED: DeliveryRejectCode.DELIVERY_ALREADY_CLAIMED,
    DeliveryState.DELIVERED: DeliveryRejectCode.DELIVERY_ALREADY_DELIVERED,
    DeliveryState.CARRIED: DeliveryRejectCode.DELIVERY_ALREADY_CARRIED,
    DeliveryState.PENDING: DeliveryRejectCode.DELIVERY_NOT_CLAIMED,
})


def _ok(result: _T | DeliveryRejected) -> _T:
    """Unwrap a step the caller selected as legal; a rejection here is a bug of this module."""
    if isinstance(result, DeliveryRejected):
        raise AssertionError(f"internal delivery step refused: {result}")
    return result


def _wrong_state(delivery: UserInputDelivery, action: str) -> DeliveryRejected:
    return DeliveryRejected(_FINAL_STATE_CODES[delivery.state],
                            f"cannot {action} delivery {delivery.delivery_id}: it is "
                            f"{delivery.state.value}")


def bind(delivery: UserInputDelivery, *, run_id: UUID) -> UserInputDelivery | DeliveryRejected:
    """Bind a pending delivery that waits for the next question to that question's Run
    (pending stays pending).  CTX-5.23, CTX-2.20"""
    if delivery.state is not DeliveryState.PENDING:
        return _wrong_state(delivery, "bind")
    if delivery.target_run_id is not None:
        return DeliveryRejected(DeliveryRejectCode.DELIVERY_ALREADY_BOUND,
                                f"delivery {delivery.delivery_id} already targets Run "
                                f"{delivery.target_run_id}")
    return _with(delivery, target_run_id=run_id)


def claim(delivery: UserInputDelivery, *, run_id: UUID,
          operation_id: UUID) -> UserInputDelivery | DeliveryRejected:
    """pending → claimed by a model Operation of its target Run (part of T_FREEZE). Only a
    pending delivery can be claimed, so two current requests never take the same input.
    CTX-5.12, CTX-5.16"""
    if delivery.state is not DeliveryState.PENDING:
        return _wrong_state(delivery, "claim")
    if delivery.target_run_id is None:
        return DeliveryRejected(DeliveryRejectCode.DELIVERY_UNBOUND,
                                f"delivery {delivery.delivery_id} waits for the next question "
                                "and targets no Run yet")
    if delivery.target_run_id != run_id:
        return DeliveryRejected(DeliveryRejectCode.DELIVERY_OTHER_RUN,
                                f"delivery {delivery.delivery_id} targets Run "
                                f"{delivery.target_run_id}, not {run_id}")
    return _with(delivery, state=DeliveryState.CLAIMED, operation_id=operation_id)


def deliver(delivery: UserInputDelivery, *, operation_id: UUID, receipt_ref: PayloadRef,
            delivered_at: Timestamp) -> UserInputDelivery | DeliveryRejected:
    """claimed → delivered, with the internal first-output receipt of the claiming Operation
    (part of T_FIRST_OUTPUT). Nothing else reaches delivered.  CTX-5.13, CTX-5.17, CTX-2.10"""
    if delivery.state is not DeliveryState.CLAIMED:
        return _wrong_state(delivery, "deliver")
    if delivery.operation_id != operation_id:
        return DeliveryRejected(DeliveryRejectCode.DELIVERY_OTHER_OPERATION,
                                f"delivery {delivery.delivery_id} was claimed by Operation "
                                f"{delivery.operation_id}, not {operation_id}")
    return _with(delivery, state=DeliveryState.DELIVERED, first_output_receipt_ref=receipt_ref,
                 delivered_at=delivered_at)


def carry(delivery: UserInputDelivery, *, successor_id: UUID
          ) -> tuple[UserInputDelivery, UserInputDelivery] | DeliveryRejected:
    """pending | claimed → carried, and the NEW pending delivery for the next question that
    points back to it (part of APP-FINALIZE). The carried record keeps its Run and Operation;
    nothing delivered is ever carried.  CTX-5.14, CTX-2.19, CTX-2.22"""
    if delivery.state not in LIVE_STATES:
        return _wrong_state(delivery, "carry")
    carried = _with(delivery, state=DeliveryState.CARRIED)
    successor = UserInputDelivery(
        delivery_id=successor_id, input_id=delivery.input_id, target_run_id=None,
        operation_id=None, previous_delivery_id=delivery.delivery_id,
        state=DeliveryState.PENDING, context_seq=None, first_output_receipt_ref=None,
        delivered_at=None)
    return carried, successor


# --- the Session's book: queries -----------------------------------------------------------


def user_input(book: DeliveryBook, input_id: UUID) -> UserInput:
    """The UserInput with this id (KeyError if the Session has none).  CTX-1.3"""
    at = book_index(book).input_at.get(input_id)
    if at is None or at >= len(book.inputs):
        raise KeyError(input_id)
    return book.inputs[at]


def delivery(book: DeliveryBook, delivery_id: UUID) -> UserInputDelivery:
    """The current state of one delivery (KeyError if unknown).  CTX-2.9"""
    at = book_index(book).delivery_at.get(delivery_id)
    if at is None or at >= len(book.deliveries):
        raise KeyError(delivery_id)
    return book.deliveries[at]


def deliveries_to(book: DeliveryBook, run_id: UUID | None) -> tuple[UserInputDelivery, ...]:
    """Every delivery whose target is this Run (None: waiting for the next question), in
    creation order, found through the book's index (the time of the Run's own deliveries).
    CTX-2.22"""
    places = book_index(book).by_target.get(run_id, ())
    size = len(book.deliveries)
    found = sorted({at for at in places if at < size})
    return tuple(book.deliveries[at] for at in found
                 if book.deliveries[at].target_run_id == run_id)


def active_run(book: DeliveryBook) -> UUID | None:
    """The Run of the Session that has not ended, if any (one at a time).  CTX-2.2"""
    return book.active_run_id


def inputs_of_run(book: DeliveryBook, run_id: UUID) -> tuple[UserInput, ...]:
    """The inputs with a delivery to this Run (bound, claimed, delivered or carried from it),
    in receive order, in the time of the Run's own deliveries.  CTX-2.22, CTX-5.1"""
    ids = {d.input_id for d in deliveries_to(book, run_id)}
    return tuple(sorted((user_input(book, i) for i in ids), key=lambda u: u.input_seq))


def _seq(book: DeliveryBook, input_id: UUID) -> int:
    return user_input(book, input_id).input_seq


def _in_receive_order(book: DeliveryBook,
                      deliveries: Sequence[UserInputDelivery]) -> tuple[UserInputDelivery, ...]:
    return tuple(sorted(deliveries, key=lambda d: _seq(book, d.input_id)))


def _require_run(book: DeliveryBook, run_id: UUID) -> None:
    if not has_run(book, run_id):
        raise KeyError(run_id)


def pending_inputs(book: DeliveryBook, run_id: UUID | None) -> tuple[UUID, ...]:
    """The input ids whose pending delivery targets this Run, in receive order; with
    ``run_id=None``, the inputs waiting for the next question.  CTX-5.29, CTX-5.23"""
    if run_id is not None:
        _require_run(book, run_id)
    waiting = [d for d in deliveries_to(book, run_id) if d.state is DeliveryState.PENDING]
    return tuple(d.input_id for d in _in_receive_order(book, waiting))


def frozen_inputs(book: DeliveryBook, operation_id: UUID) -> InputManifest | None:
    """The input manifest T_FREEZE fixed for this Operation (None if it was never frozen):
    what every retry of the Operation must send.  CTX-5.31, CTX-5.32"""
    at = book_index(book).manifest_at.get(operation_id)
    return book.manifests[at] if at is not None and at < len(book.manifests) else None


def _manifests_of(book: DeliveryBook, run_id: UUID) -> list[InputManifest]:
    size = len(book.manifests)
    return [book.manifests[at] for at in book_index(book).manifests_of.get(run_id, ())
            if at < size]


def delivered_inputs(book: DeliveryBook, run_id: UUID) -> tuple[UUID, ...]:
    """The input ids delivered to this Run, in receive order.  CTX-5.17"""
    _require_run(book, run_id)
    done = [d for d in deliveries_to(book, run_id) if d.state is DeliveryState.DELIVERED]
    return tuple(d.input_id for d in _in_receive_order(book, done))


def deliveries_of(book: DeliveryBook, input_id: UUID) -> tuple[UserInputDelivery, ...]:
    """Every delivery of one input, oldest first (its binding and hand-over record).
    CTX-2.22"""
    user_input(book, input_id)
    size = len(book.deliveries)
    return tuple(book.deliveries[at] for at in book_index(book).by_input.get(input_id, ())
                 if at < size)


def live_delivery(book: DeliveryBook, input_id: UUID) -> UserInputDelivery | None:
    """The input's delivery that may still change (pending or claimed), if any."""
    live = [d for d in deliveries_of(book, input_id) if d.state in LIVE_STATES]
    return live[-1] if live else None


def last_delivered_run(book: DeliveryBook, input_id: UUID) -> UUID | None:
    """The Run this input was delivered to (an input is delivered at most once), or None if it
    never was; history projection puts its body there.  CTX-5.25, CTX-5.26"""
    for known in deliveries_of(book, input_id):
        if known.state is DeliveryState.DELIVERED:
            return known.target_run_id
    return None


def receive_position(book: DeliveryBook, input_id: UUID) -> UUID | None:
    """The Run that was active when the input was received (UserInput.origin_run_id; a
    question's own Run), or None if none was.  CTX-1.3, CTX-5.26"""
    return user_input(book, input_id).origin_run_id


def delivery_chain(book: DeliveryBook, delivery_id: UUID) -> tuple[UserInputDelivery, ...]:
    """This delivery and its carry sources through previous_delivery_id, newest first; the
    target_run_id of each older link is a Run the input was carried from.  CTX-2.19, CTX-5.23"""
    chain = [delivery(book, delivery_id)]
    while chain[-1].previous_delivery_id is not None:
        chain.append(delivery(book, chain[-1].previous_delivery_id))
        if len(chain) > len(book.deliveries):
            raise ValueError(f"previous_delivery_id chain of {delivery_id} cycles")
    return tuple(chain)


def to_carry(book: DeliveryBook, run_id: UUID) -> tuple[UserInputDelivery, ...]:
    """The deliveries APP-FINALIZE of this Run will carry: its supplements' pending or claimed
    deliveries, in receive order (finalize needs one new delivery id for each).  CTX-5.14,
    CTX-5.30, CTX-11.6"""
    _require_run(book, run_id)
    live = [d for d in deliveries_to(book, run_id) if d.state in LIVE_STATES
            and user_input(book, d.input_id).kind is InputKind.SUPPLEMENT]
    return _in_receive_order(book, live)


# --- the Session's book: the named commits -------------------------------------------------


def _replace(book: DeliveryBook,
             changed: Sequence[UserInputDelivery]) -> Sequence[UserInputDelivery]:
    """The book's deliveries with each changed one at its place (the time of the copy and of
    the changes, not a Python step per delivery)."""
    if not changed:
        return book.deliveries
    at = book_index(book).delivery_at
    replaced = list(book.deliveries)
    for known in changed:
        replaced[at[known.delivery_id]] = known
    return tuple(replaced)


def _unused_delivery_ids(book: DeliveryBook, ids: Sequence[UUID]) -> DeliveryRejected | None:
    used = book_index(book).delivery_at
    if len(set(ids)) != len(ids) or any(
            used.get(i, len(book.deliveries)) < len(book.deliveries) for i in ids):
        return DeliveryRejected(DeliveryRejectCode.DUPLICATE_DELIVERY_ID,
                                "new delivery ids must be distinct and unused in the Session")
    return None


def _run_state(book: DeliveryBook, run_id: UUID) -> DeliveryRejected | None:
    if not has_run(book, run_id):
        return DeliveryRejected(DeliveryRejectCode.UNKNOWN_RUN,
                                f"Run {run_id} is not a Run of this Session")
    if run_id != book.active_run_id:
        return DeliveryRejected(DeliveryRejectCode.RUN_ENDED, f"Run {run_id} has ended")
    return None


def _input_refused(book: DeliveryBook, received: UserInput,
                   delivery_id: UUID) -> DeliveryRejected | None:
    """An input APP-INPUT cannot register: another Session's, one registered already, one out
    of input_seq order, or a delivery id in use."""
    if received.session_id != book.session_id:
        return DeliveryRejected(DeliveryRejectCode.SESSION_MISMATCH,
                                f"input {received.input_id} belongs to Session "
                                f"{received.session_id}, not {book.session_id}")
    if book_index(book).input_at.get(received.input_id, len(book.inputs)) < len(book.inputs):
        return DeliveryRejected(DeliveryRejectCode.DUPLICATE_INPUT_ID,
                                f"input {received.input_id} is already registered")
    expected_seq = book.inputs[-1].input_seq + 1 if book.inputs else 1
    if received.input_seq != expected_seq:
        return DeliveryRejected(DeliveryRejectCode.INPUT_SEQ_OUT_OF_ORDER,
                                f"input_seq {received.input_seq} received, the Session's next "
                                f"is {expected_seq}")
    return _unused_delivery_ids(book, [delivery_id])


def _question_refused(book: DeliveryBook, received: UserInput,
                      run_id: UUID) -> DeliveryRejected | None:
    """A question that cannot create its Run: another Run active, the Run id in use, or an
    origin_run_id other than the Run it creates."""
    if book.active_run_id is not None:
        return DeliveryRejected(DeliveryRejectCode.RUN_ALREADY_ACTIVE,
                                f"Run {book.active_run_id} is still active; a supplement is "
                                "the only input it accepts")
    if has_run(book, run_id):
        return DeliveryRejected(DeliveryRejectCode.DUPLICATE_RUN_ID,
                                f"Run {run_id} already exists")
    if received.origin_run_id != run_id:
        return DeliveryRejected(DeliveryRejectCode.ORIGIN_RUN_MISMATCH,
                                f"a question's origin_run_id is the Run it creates, {run_id}")
    return None


def _supplement_refused(book: DeliveryBook, received: UserInput) -> DeliveryRejected | None:
    """A supplement whose origin_run_id is not the active Run (None when no Run is active)."""
    target = book.active_run_id
    if received.origin_run_id == target:
        return None
    if has_run(book, received.origin_run_id):
        return DeliveryRejected(DeliveryRejectCode.RUN_ENDED,
                                f"Run {received.origin_run_id} has ended; a supplement "
                                "now waits for the next question")
    return DeliveryRejected(DeliveryRejectCode.ORIGIN_RUN_MISMATCH,
                            f"a supplement's origin_run_id is the active Run, {target}")


def app_input(book: DeliveryBook, received: UserInput, *, delivery_id: UUID,
              run_id: UUID | None = None) -> Applied | DeliveryRejected:
    """APP-INPUT: register a UserInput and its first delivery, under the Session lock.

    ``received.input_seq`` must be exactly the last input_seq + 1. A question creates its Run
    (``run_id``, required for a question and refused for a supplement; its origin_run_id is
    that Run) only when no other Run is active, and binds every pending input that waits for the
    next question to it, in receive order, next to its own pending delivery. A supplement gets
    a pending delivery of the active Run (its origin_run_id must name that Run), or, when no Run
    is active, a pending delivery with no target (origin_run_id None): it waits for the next
    question and never starts a Run. The new delivery's target_run_id is the actual ownership
    the receipt reports.  CTX-1.3, CTX-2.2, CTX-2.3, CTX-2.7, CTX-2.20, CTX-2.27, CTX-5.9,
    CTX-5.10, CTX-5.23, CTX-5.27
    """
    is_question = received.kind is InputKind.QUESTION
    if is_question and run_id is None:
        raise ValueError("a question needs the id of the Run it creates")
    if not is_question and run_id is not None:
        raise ValueError("a supplement never creates a Run; pass no run_id")
    refused = _input_refused(book, received, delivery_id)
    if refused is not None:
        return refused
    target: UUID | None
    bound: list[UserInputDelivery] = []
    if run_id is not None:
        refused = _question_refused(book, received, run_id)
        if refused is not None:
            return refused
        target = run_id
        waiting = [d for d in deliveries_to(book, None) if d.state is DeliveryState.PENDING]
        for pending in _in_receive_order(book, waiting):
            bound.append(_ok(bind(pending, run_id=run_id)))
    else:
        target = book.active_run_id
        refused = _supplement_refused(book, received)
        if refused is not None:
            return refused

    created = UserInputDelivery(
        delivery_id=delivery_id, input_id=received.input_id, target_run_id=target,
        operation_id=None, previous_delivery_id=None, state=DeliveryState.PENDING,
        context_seq=None, first_output_receipt_ref=None, delivered_at=None)
    new_book = derive(
        book, inputs=grown(book.inputs, received),
        deliveries=grown(_replace(book, bound), created), changed=bound,
        run_ids=grown(book.run_ids, run_id) if run_id is not None else book.run_ids,
        active_run_id=run_id, keep_active=run_id is None)
    return new_book, WriteSet(inputs=(received,), inserted=(created,), updated=tuple(bound))


def freeze(book: DeliveryBook, *, run_id: UUID, operation_id: UUID,
           input_cutoff: int) -> Frozen | DeliveryRejected:
    """T_FREEZE's input part: with the cutoff prepare_context fixed, claim for this model
    Operation every pending delivery of the Run whose input_seq <= cutoff, in receive order,
    and fix the Operation's input manifest. Later supplements stay pending for the next Loop.

    The cutoff must lie between the Run's question and the last received input and never below
    an earlier freeze of the Run. Freezing the same Operation again with the same Run and cutoff
    returns the stored manifest with an empty write set (a replay must not claim anything new);
    with another Run or cutoff it is rejected.  CTX-5.1, CTX-5.12, CTX-5.16, CTX-5.28,
    CTX-5.29, CTX-5.31, CTX-5.32
    """
    not_active = _run_state(book, run_id)
    if not_active is not None:
        return not_active
    existing = frozen_inputs(book, operation_id)
    if existing is not None:
        if (existing.run_id, existing.input_cutoff) == (run_id, input_cutoff):
            return book, WriteSet(), existing
        return DeliveryRejected(DeliveryRejectCode.OPERATION_ALREADY_FROZEN,
                                f"Operation {operation_id} was frozen with Run {existing.run_id} "
                                f"and cutoff {existing.input_cutoff}; a retry reuses them")
    question_seq = min(user_input(book, d.input_id).input_seq
                       for d in deliveries_to(book, run_id)
                       if user_input(book, d.input_id).kind is InputKind.QUESTION
                       and user_input(book, d.input_id).origin_run_id == run_id)
    if input_cutoff > book.inputs[-1].input_seq:
        return DeliveryRejected(DeliveryRejectCode.CUTOFF_AHEAD_OF_INPUTS,
                                f"cutoff {input_cutoff} is beyond the last received input_seq "
                                f"{book.inputs[-1].input_seq}")
    if input_cutoff < question_seq:
        return DeliveryRejected(DeliveryRejectCode.CUTOFF_BEFORE_QUESTION,
                                f"cutoff {input_cutoff} is before the Run's question "
                                f"(input_seq {question_seq})")
    earlier = max((m.input_cutoff for m in _manifests_of(book, run_id)), default=0)
    if input_cutoff < earlier:
        return DeliveryRejected(DeliveryRejectCode.CUTOFF_REGRESSED,
                                f"cutoff {input_cutoff} is below the Run's earlier cutoff "
                                f"{earlier}")

    candidates = [d for d in deliveries_to(book, run_id) if d.state is DeliveryState.PENDING
                  and _seq(book, d.input_id) <= input_cutoff]
    claimed: list[UserInputDelivery] = []
    for pending in _in_receive_order(book, candidates):
        claimed.append(_ok(claim(pending, run_id=run_id, operation_id=operation_id)))
    deliveries = _replace(book, claimed)
    now = {d.delivery_id: d for d in claimed}
    in_request = [d for d in (now.get(d.delivery_id, d) for d in deliveries_to(book, run_id))
                  if d.state in (DeliveryState.CLAIMED, DeliveryState.DELIVERED)
                  and _seq(book, d.input_id) <= input_cutoff]
    manifest = InputManifest(
        operation_id=operation_id, run_id=run_id, input_cutoff=input_cutoff,
        input_ids=tuple(d.input_id for d in _in_receive_order(book, in_request)),
        claimed_input_ids=tuple(d.input_id for d in claimed),
        claimed_delivery_ids=tuple(d.delivery_id for d in claimed))
    new_book = derive(book, deliveries=deliveries, changed=claimed,
                      manifests=grown(book.manifests, manifest))
    return new_book, WriteSet(updated=tuple(claimed), manifest=manifest), manifest


def first_output(book: DeliveryBook, *, operation_id: UUID, receipt_ref: PayloadRef,
                 delivered_at: Timestamp) -> Applied | DeliveryRejected:
    """T_FIRST_OUTPUT's delivery part: the first valid output of this Operation was received
    and its internal receipt saved, so every delivery it claimed becomes delivered with that
    receipt and time. The evidence is saved once: a second call for the same Operation changes
    nothing (empty write set) and the first receipt stays.  CTX-5.13, CTX-5.17, CTX-5.18,
    CTX-5.21, CTX-2.10
    """
    manifest = frozen_inputs(book, operation_id)
    if manifest is None:
        return DeliveryRejected(DeliveryRejectCode.UNKNOWN_OPERATION,
                                f"Operation {operation_id} never froze an input list")
    not_active = _run_state(book, manifest.run_id)
    if not_active is not None:
        return not_active
    changed: list[UserInputDelivery] = []
    for delivery_id in manifest.claimed_delivery_ids:
        current = delivery(book, delivery_id)
        if current.state is DeliveryState.DELIVERED:
            continue
        changed.append(_ok(deliver(current, operation_id=operation_id, receipt_ref=receipt_ref,
                                   delivered_at=delivered_at)))
    if not changed:
        return book, WriteSet()
    new_book = derive(book, deliveries=_replace(book, changed), changed=changed)
    return new_book, WriteSet(updated=tuple(changed))


def finalize(book: DeliveryBook, *, run_id: UUID,
             carry_ids: Sequence[UUID]) -> Applied | DeliveryRejected:
    """APP-FINALIZE's delivery part: the Run ended, whatever its terminal state (succeeded,
    failed, stopped during preparation or compaction, timed out, loop exhausted). Every
    supplement delivery of the Run not yet delivered (pending or claimed) becomes carried and
    gets a NEW pending delivery with no target pointing back to it; ``carry_ids`` are their ids,
    one per :func:`to_carry` entry, in that (receive) order. Nothing delivered is carried. The
    Run's own question is not carried (see the module docstring).  CTX-5.14, CTX-5.30,
    CTX-2.19, CTX-2.22, CTX-11.6
    """
    not_active = _run_state(book, run_id)
    if not_active is not None:
        return not_active
    undelivered = to_carry(book, run_id)
    if len(carry_ids) != len(undelivered):
        return DeliveryRejected(DeliveryRejectCode.CARRY_IDS_MISMATCH,
                                f"{len(undelivered)} deliveries to carry, {len(carry_ids)} new "
                                "delivery ids given")
    duplicate = _unused_delivery_ids(book, carry_ids)
    if duplicate is not None:
        return duplicate
    carried: list[UserInputDelivery] = []
    successors: list[UserInputDelivery] = []
    for live, successor_id in zip(undelivered, carry_ids, strict=True):
        old, new = _ok(carry(live, successor_id=successor_id))
        carried.append(old)
        successors.append(new)
    new_book = derive(book, deliveries=grown(_replace(book, carried), *successors),
                      changed=carried, active_run_id=None, keep_active=False)
    return new_book, WriteSet(inserted=tuple(successors), updated=tuple(carried))


__all__ = [
    "LIVE_STATES", "Applied", "DeliveryBook", "DeliveryRejectCode", "DeliveryRejected", "Frozen",
    "InputManifest", "WriteSet", "active_run", "app_input", "bind", "carry", "claim", "deliver",
    "delivered_inputs", "deliveries_of", "deliveries_to", "delivery", "delivery_chain",
    "empty_book", "finalize", "first_output", "freeze", "frozen_inputs", "inputs_of_run",
    "last_delivered_run", "live_delivery", "pending_inputs", "receive_position", "to_carry",
    "user_input",
]
