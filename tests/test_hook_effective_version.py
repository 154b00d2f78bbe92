"""§3 the effective version everywhere, and what the shell stores: an argument change is what the
next model request sees (§4, §6), prompt projection items keep their resource version, request
parameters live in the effective payload (§7), the committed mutation and revision as contracts,
and the request after hooks rebuilt and re-measured (§5, §7).

Expected values are written by hand from the design.
"""

import json
from uuid import UUID

import pytest

from ctxspec.reference.contracts import MessageRole, MutationSourceKind
from ctxspec.reference.contracts import PatchOperationKind as Op
from ctxspec.reference.effective import (
    ContextState,
    RawRecord,
    Scope,
    append_records,
    effective_content,
    effective_records,
    manifest,
    new_context,
)
from ctxspec.reference.history import EndedRun, InputOccurrence, InputPlacement
from ctxspec.reference.hooks import ContextOp, HookCall, HookProposal, PayloadOp
from ctxspec.reference.registry import FieldRegistry, FieldSpec
from ctxspec.reference.view import EffectiveRecord
from tests.builders import uuid
from tests.hook_calls import CTX, OP, RUN, TEXT, decide, mutation_of, record, root_context

# --- the effective version everywhere -----------------------------------------------------------


@pytest.mark.covers("CTX-3.15", "CTX-3.69", "CTX-4.10", "CTX-6.16")
def test_argument_change_a_to_b_is_what_the_next_model_request_sees() -> None:
    # §12 "参数修改反馈": the model proposed path A, the handler ran with B; the next request is
    # rebuilt from the effective revision: it shows B and which mutation made it.
    outcome = decide(HookProposal(uuid(90), "allow", (PayloadOp("arguments.path", "B.md"),)))
    records = effective_records(outcome.states[CTX])
    decision = records[1]
    assert json.loads(decision.tool_calls[0].arguments) == {"path": "B.md"}
    assert decision.modified_by == (str(mutation_of(90)),)
    raw_view = effective_records(outcome.states[CTX], revision=2)[1]
    assert json.loads(raw_view.tool_calls[0].arguments) == {"path": "a.md"}


@pytest.mark.covers("CTX-3.35")
def test_prompt_projection_items_keep_their_resource_version() -> None:
    release = {"system_prompt": {"resource": "prompt:system", "version": 3,
                                 "text": "You are helpful."}}
    system_id = uuid(60)
    state = new_context(CTX, Scope("private", owner_role="react"))
    state = append_records(state, [RawRecord(
        record(system_id, 1, MessageRole.SYSTEM, "system_prompt"),
        {"text": "You are helpful."}, source="prompt:system@3")], mutation_id=uuid(34),
        source_kind=MutationSourceKind.RUNTIME, source_ref="release").state
    call = HookCall(operation_id=OP, hook_point="model.pre_request", stage="pre",
                    actor_role="react", actor_context_id=CTX, call_id=None, call_record_id=None)
    outcome = decide(HookProposal(uuid(90), "allow", (), CTX, 2, (
        ContextOp(system_id, "text", Op.REPLACE_VALUE, "You are terse."),)),
        states={CTX: state}, call=call, registry=TEXT)
    entry = manifest(outcome.states[CTX])[0]
    assert entry.source == "prompt:system@3" and entry.modified_fields == {"text": mutation_of(90)}
    assert effective_content(outcome.states[CTX], system_id) == {"text": "You are terse."}
    assert release["system_prompt"]["text"] == "You are helpful."  # the release is untouched


@pytest.mark.covers("CTX-7.29")
def test_request_parameters_live_in_the_effective_payload() -> None:
    call = HookCall(operation_id=OP, hook_point="model.pre_request", stage="pre",
                    actor_role="react", actor_context_id=CTX, call_id=None, call_record_id=None)
    outcome = decide(HookProposal(uuid(90), "allow", (PayloadOp("params.temperature", 0.2),)),
                     call=call, registry=TEXT, payload={"params": {"temperature": 1.0}})
    assert outcome.payload == {"params": {"temperature": 0.2}}
    assert outcome.committed == {}  # a payload-only field: no context mutation
    # A later append (e.g. a summary replacing covered messages) leaves the parameter alone.
    later = append_records(outcome.states[CTX], [], mutation_id=uuid(35),
                           source_kind=MutationSourceKind.RUNTIME, source_ref="summary")
    assert later.state.head.revision == 3 and outcome.payload["params"] == {"temperature": 0.2}


# --- what the shell stores, and the request re-measured -----------------------------------------


@pytest.mark.covers("CTX-3.19", "CTX-3.24", "CTX-3.25", "CTX-3.26", "CTX-3.28")
def test_committed_mutation_and_revision_as_contracts() -> None:
    from datetime import UTC, datetime

    from ctxspec.reference.context_contracts import mutation_contract, revision_contract
    from ctxspec.reference.contracts import RoleContext
    from ctxspec.reference.effective import project_head

    outcome = decide(HookProposal(uuid(90), "allow", (PayloadOp("arguments.path", "b.md"),)))
    state, now = outcome.states[CTX], datetime(2026, 11, 29, tzinfo=UTC)
    mutation = mutation_contract(state, mutation_of(90), cause_operation_id=OP, created_at=now)
    assert (mutation.base_revision, mutation.committed_revision, mutation.source_kind.value,
            mutation.source_ref) == (2, 3, "hook", str(uuid(90)))
    revision = revision_contract(state, 3, commit_ref="commit-1", created_at=now)
    assert (revision.revision, revision.parent_revision, revision.record_watermark,
            revision.mutation_ids) == (3, 2, 2, (mutation_of(90),))
    # The manifest is content references and sources, not text: the raw words never appear.
    assert revision.effective_manifest_ref != revision_contract(
        state, 2, commit_ref="commit-0", created_at=now).effective_manifest_ref
    head = project_head(RoleContext(context_id=CTX, invocation_id=uuid(5),
                                    owner_node_task_id=uuid(6), role_key="react",
                                    record_head=0, effective_revision=1,
                                    active_snapshot_id=None, last_model_operation_id=None),
                        state)
    assert (head.record_head, head.effective_revision) == (2, 3)


@pytest.mark.covers("CTX-7.25", "CTX-5.6", "CTX-3.14")
def test_the_request_after_hooks_is_rebuilt_and_re_measured() -> None:
    from ctxspec.reference.history import project_history
    from ctxspec.reference.protection import ProtectedInput, check_protected_inputs
    from ctxspec.reference.tokens import ByteEstimator
    from ctxspec.reference.view import ModelView, estimation_request, render_request

    def request_of(state: ContextState) -> ModelView:
        # The write(...) call is still open (no result yet): this request shows the rest.
        view = project_history(ended_runs=[], recent_runs=2, source=_NoHistory(),
                               current_run_id=RUN, current_records=[
                                   r for r in effective_records(state)
                                   if r.record.message_kind != "assistant"
                                   or not r.tool_calls],
                               protected_input_ids={uuid(20)})
        assert isinstance(view, ModelView)
        return view

    registry = FieldRegistry("model.pre_request", "1", (FieldSpec("text", None, "string"),))
    call = HookCall(operation_id=OP, hook_point="model.pre_request", stage="pre",
                    actor_role="react", actor_context_id=CTX, call_id=None, call_record_id=None)
    state = append_records(root_context(), [RawRecord(
        record(uuid(13), 3, MessageRole.ASSISTANT, "assistant"), {"text": "short note"})],
        mutation_id=uuid(31), source_kind=MutationSourceKind.RUNTIME, source_ref="r").state
    before = request_of(state)
    outcome = decide(HookProposal(uuid(90), "allow", (), CTX, 3, (
        ContextOp(uuid(13), "text", Op.REPLACE_VALUE, "a much longer note " * 20),)),
        states={CTX: state}, call=call, registry=registry)
    after = request_of(outcome.states[CTX])
    estimator = ByteEstimator()
    grew = estimator.estimate(estimation_request(after)).tokens - \
        estimator.estimate(estimation_request(before)).tokens
    # Byte estimate: the text grew from 10 to 380 bytes, and the changed text now carries the
    # mark the provider receives with it (§2, §6: never passed off as the provider's); the rest
    # is the same.
    [marked] = [m for m in render_request(after).messages if m.marks]
    [mark] = marked.marks
    assert mark.kind == "text_modified"
    assert grew == len("a much longer note " * 20) - len("short note") + len(
        ("\n" + mark.text).encode())
    assert check_protected_inputs(after, [ProtectedInput(uuid(20), 1, "写一份报告")]) == ()


class _NoHistory:
    """A Session with no ended Run; every input was received and delivered in this one."""

    def user_inputs(self, run: EndedRun) -> list[InputOccurrence]:
        return []

    def root_records(self, run: EndedRun) -> list[EffectiveRecord]:
        return []

    def placement(self, input_id: UUID) -> InputPlacement:
        return InputPlacement(RUN, RUN)
