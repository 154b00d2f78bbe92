"""The scenario's hook chain asked at one point, shared by the Python adapters: each adapter's
hook module (``langchain_hooks.py``, ``google_adk/callbacks.py``, ``pydantic_ai/hooks.py``)
reaches the design's hook points (§3) from its framework's own seam and hands the chain the
payload and the writes that seam can carry; what is left — running the chain, dropping a failed
item with its diagnostic, and tracing each decision — is the same everywhere and lives here."""

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ctxspec.reference.hook_changes import ContextOp
from ctxspec.reference.ports import HookContext, HookPoint, HookPort, HookReply


class HookDenied(Exception):
    """A hook denied the request or the answer: the role has no answer (HOOK_DENIED)."""

    code = "HOOK_DENIED"


@dataclass
class Chain:
    """Asks the scenario's chain at one point and reports its decisions as trace events."""

    hooks: HookPort
    event: Callable[..., None]
    asked: dict[str, int] = field(default_factory=dict)
    failed_diagnostics: tuple[str, ...] = ("HOOK_FAILED",)
    """What a failed item's ``hook_decided`` event names: the design's HOOK_FAILED (§3),
    or nothing where the framework's seam reports no diagnostic of a hook's (LangChain's
    middleware, the Agents SDK's guardrails and input filter; Q550)."""

    def ask(self, point: HookPoint, payload: dict[str, Any], stage: str,
            apply: Callable[[str, Any], bool], records: Mapping[str, uuid.UUID] | None = None,
            patch: Callable[[ContextOp], bool] | None = None) -> bool:
        """Run the chain; ``apply(path, value)`` carries one payload write, ``patch(op)`` one
        context operation on the records named in ``records`` (False: it has no place). A
        failed item is dropped (§3). True when an item denied."""
        self.asked[point] = ordinal = self.asked.get(point, 0) + 1
        self.event("hook_called", point=point, stage=stage)
        items = self.hooks.items(HookContext(
            point, payload, None, None, None,
            uuid.uuid5(uuid.NAMESPACE_URL, f"ctxspec:{point}:{ordinal}"), ordinal,
            dict(records or {})))
        denied = False
        for position, item in enumerate(items):
            changes = [] if item.failed else _written(item, apply) + [
                op.field_key for op in item.context_ops if patch is not None and patch(op)]
            self.event("hook_decided", point=point, chain_position=position,
                       decision="failed" if item.failed else item.decision,
                       patch_valid=not item.failed,
                       diagnostics=list(self.failed_diagnostics) if item.failed else [],
                       changes=changes)
            denied = denied or (not item.failed and item.decision == "deny")
        return denied


def _written(item: HookReply, apply: Callable[[str, Any], bool]) -> list[str]:
    return [op.path for op in item.payload_ops if apply(op.path, op.value)]
