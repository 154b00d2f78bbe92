"""The hook contract as data (issue #33): every hook point's payload, its writable fields and
their mapping to effective-record fields, its decisions and the diagnostics a decision records,
published as ``spec/hooks.json`` (schema ``spec/schemas/HookRegistry.json``) and generated from
the reference's own registries (``REGISTRIES`` of reference/runtime/session.py, the workflow's
``CAPABILITY_REGISTRY``, the forbidden names of reference/registry.py), so the published
document and the registries the reference validates patches with cannot drift apart:
``ctxspec contracts --check`` fails when they do, as ``ctxspec schemas --check`` does for the
schemas.
"""

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ctxspec.conformance.trace_fields import TraceFields
from ctxspec.reference.contracts import HookDecision
from ctxspec.reference.registry import FORBIDDEN_ROOTS, IDENTITY_NAMES, FieldRegistry
from ctxspec.reference.runtime.session import REGISTRIES
from ctxspec.reference.runtime.workflow import CAPABILITY_REGISTRY

HOOK_REGISTRY_VERSION = 1


class _Doc(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class WritableField(_Doc):
    """One field a hook at the point may write: the effective-record field and the payload
    path that express the same fact (either may be absent), and its kind."""

    context_key: str | None = Field(description=(
        "the effective-record field a context_patch writes: text, or "
        "tool_call:{call_id}.arguments ({call_id}: the call the hook runs for); null for a "
        "payload-only field"))
    payload_path: str | None = Field(description=(
        "the payload path a payload_patch writes (dots walk into objects); null for a "
        "context-only field"))
    kind: Literal["object", "string", "number", "boolean", "opaque"] = Field(description=(
        "an object is writable whole and in its descendants; opaque only whole"))
    required: bool = Field(description="may be replaced, never deleted")


class HookPointDoc(_Doc):
    point: str
    registry_version: str = Field(description=(
        "the version of the point's field registry, recorded with each decision"))
    stage: Literal["pre", "post"]
    guards: str = Field(description="what the point's decision lets through or blocks")
    payload: dict[str, Any] = Field(description="JSON Schema of the payload the hook reads")
    fields: list[WritableField]
    decisions: list[str] = Field(description="what a hook item may decide")


class DiagnosticDoc(_Doc):
    code: str
    rule: str


class HookRegistry(_Doc):
    """The hook contract a runtime meets (docs/implementing-a-driver.md "The hook port")."""

    format: Literal["ctxspec-hook-registry"] = "ctxspec-hook-registry"
    version: int = HOOK_REGISTRY_VERSION
    points: list[HookPointDoc]
    forbidden_roots: list[str] = Field(description=(
        "field roots no hook may write at any point: raw facts and the limits an allow can "
        "never lift"))
    identity_names: list[str] = Field(description=(
        "names that are identities wherever they appear in a field key: never writable"))
    recorded_decisions: list[str] = Field(description=(
        "what a hook_decided event's decision may say: an item's allow or deny, failed for a "
        "handler that failed, timed out or decided anything else, unknown for an item whose "
        "outcome a crash left uncommitted"))
    diagnostics: list[DiagnosticDoc]
    chain: dict[str, str] = Field(description="how a chain of items is run and traced")
    targets: dict[str, str] = Field(description=(
        "the records a scenario's context_patch may name as its target"))


PAYLOADS: dict[str, dict[str, Any]] = {
    "model.pre_request": {"type": "object", "required": ["params"], "properties": {
        "params": {"type": "object", "description": "request parameters (temperature, …)"}}},
    "model.post_response": {"type": "object", "required": ["text"], "properties": {
        "text": {"type": "string", "description": "the raw answer's text"}}},
    "tool.pre_call": {"type": "object", "required": ["name", "arguments"], "properties": {
        "name": {"type": "string"}, "arguments": {"type": "object"}}},
    "tool.post_call": {"type": "object", "required": ["result"], "properties": {
        "result": {"type": "string", "description": "the raw result's text"}}},
    "compaction.pre_request": {"type": "object", "required": ["purpose"], "properties": {
        "purpose": {"const": "compaction"}}},
    "compaction.post_response": {"type": "object", "required": ["summary"], "properties": {
        "summary": {"type": "string", "description": "the chunk's raw summary"}}},
    "capability.pre_call": {"type": "object", "required": ["input"], "properties": {
        "input": {"type": "object", "description": "the CapabilityNode's mapped input"}}},
}
"""The payload each point hands its hooks (tests/test_hook_registry.py records what the
reference hands them and checks it against these)."""

GUARDS = {
    "model.pre_request": "the business request: a deny ends the role HOOK_DENIED, unsent",
    "model.post_response": "the answer: a deny ends the role HOOK_DENIED, undelivered",
    "tool.pre_call": "the call: a deny answers it with a denied result, never run",
    "tool.post_call": "the result: a deny feeds back a denied result instead",
    "compaction.pre_request": "the chunk request: a deny leaves it unsent and the "
                              "AgentInvocation ends COMPACTION_FAILED",
    "compaction.post_response": "the chunk summary: a deny discards it and the "
                                "AgentInvocation ends COMPACTION_FAILED",
    "capability.pre_call": "the CapabilityNode's call: a deny fails the node (route denied), "
                           "never run",
}

DIAGNOSTICS = {
    "HOOK_PATCH_CONFLICT": "two of the item's writes to the same semantic field disagree (§3)",
    "CONTEXT_REVISION_CONFLICT": "the field changed, vanished or lost authorisation after the "
                                 "item's base revision (§3)",
    "FIELD_NOT_REGISTERED": "the point's registry has no such writable field",
    "FORBIDDEN_FIELD": "identities, raw text and permissions are never writable",
    "SCHEMA_MISMATCH": "the value breaks the registered kind, or a required field is deleted",
    "UNKNOWN_TARGET": "the target record is not in the revision the item read",
    "UNAUTHORISED_SCOPE": "the item may not write that scope",
    "PROTECTED_INPUT": "a user input is never overwritten",
    "FROZEN_FACT": "a frozen or executed request takes annotations only",
    "POST_STAGE_TARGET": "a post-response hook changes only the response not yet delivered",
    "INVALID_ANNOTATION": "the annotation is not well formed",
    "INVALID_PATCH": "the patch is not well formed",
    "ITEM_DOES_NOT_FIT": "the item's additions to the fixed input do not fit B by themselves "
                         "(§7, Q56)",
    "HOOK_FAILED": "the handler failed or timed out: the hook failure rule",
    "ILLEGAL_DECISION": "the handler decided neither allow nor deny: the hook failure rule",
}
"""Every code a hook decision's diagnostics may carry, and its rule (tests check the set
against the codes the reference core emits)."""

CHAIN = {
    "order": "a point's items run in the order the Agent registers them (a scenario: its hooks "
             "in order, each hook's items in order), each on the revision the previous "
             "committed",
    "chain_position": "counts the items of one chain from 0",
    "default_decision": "a scenario's item without decision allows",
    "invalid_patch": "an invalid patch is dropped whole with its diagnostics: an allow goes on "
                     "as if unpatched, a deny still blocks",
    "failed_item": "a failed or timed-out handler is traced decision failed, patch_valid "
                   "false, diagnostic HOOK_FAILED, and the chain goes on (fail-open)",
    "traced": "hook_called when a chain is asked; hook_decided per item once its decision and "
              "patch are committed, never before",
    "deleted_value": "a payload_patch with delete removes the field (a required one: "
                     "SCHEMA_MISMATCH)",
}

TARGETS = {
    "call": "the record the hook runs for: the assistant decision holding the call "
            "(tool points), the answer (model.post_response)",
    "question": "the Run's question, as its user_ref record",
    "last": "the role's last record",
    "first_assistant": "the role's first assistant decision",
    "shared:<field>": "a Run-level shared field by name (scope shared)",
    "<uuid>": "a record by its id",
}


def _point(registry: FieldRegistry) -> HookPointDoc:
    return HookPointDoc(
        point=registry.hook_point, registry_version=registry.version,
        stage="post" if registry.hook_point.endswith("post_response")
        or registry.hook_point.endswith("post_call") else "pre",
        guards=GUARDS[registry.hook_point], payload=PAYLOADS[registry.hook_point],
        fields=[WritableField(context_key=f.context_key, payload_path=f.payload_path,
                              kind=f.kind, required=f.required) for f in registry.fields],
        decisions=[HookDecision.ALLOW.value, HookDecision.DENY.value])


def hook_registry() -> HookRegistry:
    """The published hook contract, from the reference's registries."""
    registries = [*REGISTRIES.values(), CAPABILITY_REGISTRY]
    return HookRegistry(
        points=[_point(r) for r in registries], forbidden_roots=sorted(FORBIDDEN_ROOTS),
        identity_names=sorted(IDENTITY_NAMES),
        recorded_decisions=[d.value for d in HookDecision],
        diagnostics=[DiagnosticDoc(code=c, rule=r) for c, r in DIAGNOSTICS.items()],
        chain=CHAIN, targets=TARGETS)


def render(document: BaseModel) -> str:
    return json.dumps(document.model_dump(mode="json"), indent=2, ensure_ascii=False) + "\n"


def trace_fields() -> TraceFields:
    """The trace contract field by field, with the cases that look up each optional field in
    the reference's traces (conformance/trace_fields.py): the whole suite's checks run once."""
    from ctxspec.conformance.cases import CASES
    from ctxspec.conformance.harness import SharedRuns, load_factory
    from ctxspec.conformance.trace_fields import lookups
    from ctxspec.conformance.trace_fields import trace_fields as table

    runs = SharedRuns(load_factory(None), [c for c in CASES if c.refusal is None])
    return table(lookups(CASES, lambda document: runs.trace(document)[0]))


DOCUMENTS = ("hooks.json", "trace-fields.json", "estimators-tokenizer.json")


def published(only: tuple[str, ...] = DOCUMENTS) -> dict[str, str]:
    """File name under spec/ → its text, for the contract documents generated here (``only``
    those named)."""
    from ctxspec.conformance.tokenizer_vectors import document as tokenizer_vectors

    makers = {"hooks.json": lambda: render(hook_registry()),
              "trace-fields.json": lambda: render(trace_fields()),
              "estimators-tokenizer.json": lambda: render(tokenizer_vectors())}
    return {name: makers[name]() for name in only}


def drifted(spec: Path, only: tuple[str, ...] = DOCUMENTS) -> list[str]:
    """The published documents missing from ``spec`` or differing from the reference's."""
    return sorted(name for name, text in published(only).items()
                  if not (spec / name).is_file() or (spec / name).read_text("utf-8") != text)


def write(spec: Path) -> list[str]:
    """Write every published document into ``spec``; returns their names."""
    documents = published()
    for name, text in documents.items():
        (spec / name).write_text(text, "utf-8")
    return sorted(documents)


__all__ = ["DIAGNOSTICS", "DOCUMENTS", "HOOK_REGISTRY_VERSION", "PAYLOADS", "HookRegistry",
           "drifted", "hook_registry", "published", "render", "write"]
