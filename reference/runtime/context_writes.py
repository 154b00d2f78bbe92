"""What the ContextManager prepares (§3 "ContextManager 返回 ContextDraft / ModelView
或待提交写集"): small frozen values its methods return and the component that owns the step
puts into its own RuntimeCommit (``SessionState.put_delta``, ``put_context_writes``,
``put_model_freeze``). The ContextManager itself writes nothing: not the Session's state in
memory, not the pending write set.

- :class:`ContextDelta` — records appended to or fields changed in contexts: each changed
  context's new state, the records appended, the bodies their payload refs point at
  (``prepare_accept_model``, ``prepare_batch_delivery``, an explicit write);
- :class:`ContextDraft` — a request's protected inputs at its cutoff and the delta that shows
  them once as ``user_ref`` records (``prepare``, §5);
- :class:`ContextWriteSet` — a hook chain's validated changes on the head revisions (CAS) and
  the chain's own Operation (``stage_patch``, §3);
- :class:`ModelFreezeWriteSet` — T_FREEZE's part: the inputs claimed into the request's
  manifest, the business Operation running, the frozen position (``prepare_model_freeze``, §5).
"""

from dataclasses import dataclass
from uuid import UUID

from ctxspec.reference import delivery as dl
from ctxspec.reference.contracts import NodeCheckpoint, Operation
from ctxspec.reference.effective import ContextState
from ctxspec.reference.hooks import ChainOutcome
from ctxspec.reference.protection import ProtectedInput


@dataclass(frozen=True)
class ContextDelta:
    """Contexts' new states, in the order they first changed; the records appended; the texts
    of the blobs the new records point at (written with the commit that takes the delta)."""

    states: tuple[tuple[UUID, ContextState], ...] = ()
    record_ids: tuple[UUID, ...] = ()
    bodies: tuple[str, ...] = ()

    def then(self, later: "ContextDelta") -> "ContextDelta":
        """This delta followed by ``later``: a context changed by both keeps its first place
        and takes the later state."""
        states = dict(self.states)
        states.update(later.states)
        return ContextDelta(tuple(states.items()), self.record_ids + later.record_ids,
                            self.bodies + later.bodies)

    def state(self, context_id: UUID, before: ContextState) -> ContextState:
        """The context's state after this delta (``before`` when it does not change it)."""
        return dict(self.states).get(context_id, before)

    @property
    def record_id(self) -> UUID:
        """The one record this delta appended last."""
        if not self.record_ids:
            raise AssertionError("this delta appended no record")
        return self.record_ids[-1]


NO_DELTA = ContextDelta()


@dataclass(frozen=True)
class ContextDraft:
    """A request's context as ``prepare`` fixes it at its input cutoff (§5): its protected
    inputs, and the delta that appends the ones the role has not shown yet."""

    protected: tuple[ProtectedInput, ...]
    delta: ContextDelta


@dataclass(frozen=True)
class ContextWriteSet:
    """A hook chain's outcome on the contexts it may change (§3 "校验Hook修改"): the chain, the
    contexts' new head revisions and the chain's Operation (purpose hook), for the caller's
    HOOK_DECISION."""

    chain: ChainOutcome
    operation: Operation
    delta: ContextDelta


@dataclass(frozen=True)
class ModelFreezeWriteSet:
    """T_FREEZE's write set (§5): the Session's delivery book after the claim and what the
    claim wrote (None for an Executor, which claims nothing), the business Operation that
    goes running, and the frozen position (its NodeCheckpoint, §10)."""

    operation_id: UUID
    purpose_key: str
    book: dl.DeliveryBook | None
    deliveries: dl.WriteSet | None
    position: NodeCheckpoint


__all__ = ["NO_DELTA", "ContextDelta", "ContextDraft", "ContextWriteSet", "ModelFreezeWriteSet"]
