"""The §3 worked example's context for the hook tests: the root context holding the question and
the model's decision write(path="a.md"), the tool.pre_call hook call and its field registries, and
one hook item evaluated against them."""

from collections.abc import Mapping
from dataclasses import dataclass
from uuid import UUID

from ctxspec.reference.contracts import ContextRecord, MessageRole, MutationSourceKind
from ctxspec.reference.effective import ContextState, RawRecord, Scope, append_records, new_context
from ctxspec.reference.hooks import (
    BudgetRoom,
    HookCall,
    HookItemOutcome,
    HookProposal,
    evaluate,
    mutation_id_for,
)
from ctxspec.reference.registry import JSON, FieldRegistry, FieldSpec
from tests.builders import ref, uuid

CTX, RUN, OP, CALL = uuid(1), uuid(2), uuid(3), uuid(4)
QUESTION, DECISION, RESULT = uuid(10), uuid(11), uuid(12)
PATH = f"tool_call:{CALL}.arguments.path"

PRE_CALL = FieldRegistry("tool.pre_call", "1", (
    FieldSpec("tool_call:{call_id}.arguments", "arguments", "object"),))


def record(record_id: UUID, seq: int, role: MessageRole, kind: str, context: UUID = CTX,
           call: UUID | None = None, input_id: UUID | None = None) -> ContextRecord:
    return ContextRecord(record_id=record_id, context_id=context, context_seq=seq, run_id=RUN,
                         role=role, message_kind=kind, payload_ref=ref(str(record_id)),
                         operation_id=None, call_id=call, origin_input_id=input_id)


def root_context() -> ContextState:
    """The question, then the model's decision write(path="a.md")."""
    state = new_context(CTX, Scope("private", owner_role="react"))
    committed = append_records(state, [
        RawRecord(record(QUESTION, 1, MessageRole.USER, "user_ref", input_id=uuid(20)),
                  {"text": "写一份报告"}),
        RawRecord(record(DECISION, 2, MessageRole.ASSISTANT, "assistant"),
                  {"text": "", f"tool_call:{CALL}": {"name": "write", "action_ordinal": 1,
                                                     "arguments": {"path": "a.md"}}}),
    ], mutation_id=uuid(30), source_kind=MutationSourceKind.RUNTIME, source_ref="model-output")
    return committed.state


PAYLOAD: Mapping[str, JSON] = {"name": "write", "arguments": {"path": "a.md"}}
PRE = HookCall(operation_id=OP, hook_point="tool.pre_call", stage="pre", actor_role="react",
               actor_context_id=CTX, call_id=CALL, call_record_id=DECISION)


@dataclass
class Ids:
    next: int = 500

    def __call__(self, *_: int) -> UUID:
        self.next += 1
        return uuid(self.next)


def decide(proposal: HookProposal, states: Mapping[UUID, ContextState] | None = None,
           call: HookCall = PRE, registry: FieldRegistry = PRE_CALL,
           payload: Mapping[str, JSON] = PAYLOAD,
           budget: BudgetRoom | None = None) -> HookItemOutcome:
    return evaluate(proposal, call, registry, states or {CTX: root_context()}, payload,
                    chain_position=0, annotation_ids=Ids(), budget=budget)


def mutation_of(hook: int, context: UUID = CTX) -> UUID:
    return mutation_id_for(uuid(hook), context)


def codes(outcome: HookItemOutcome) -> list[str]:
    return [d.code for d in outcome.invocation.diagnostics]


TEXT = FieldRegistry("model.pre_request", "1", (FieldSpec("text", None, "string"),
                                                FieldSpec(None, "params.temperature", "number")))
