"""Mutants only the universal checks catch (conformance/universal.py, issue #31): realistic bugs
that break a rule holding on every request, in cases that are about something else."""

from collections.abc import Callable
from typing import Any
from uuid import UUID

from ctxspec.conformance.mutants import Mutant, Patch
from ctxspec.reference import snapshots
from ctxspec.reference.compaction import material_key
from ctxspec.reference.view import ModelView, ViewKind


def _cut_keeps_last_result(original: Callable[..., Any]) -> Callable[..., Any]:
    def apply_snapshot(view: ModelView, manifest: snapshots.SourceManifest, summary_text: str,
                       snapshot_id: UUID) -> ModelView:
        # The summary cut lands on a message boundary, not a protocol group's: the tail tool
        # result of the covered material stays in the view, its call summarised away
        # (langchain-ai/langchain#34282, put back).
        applied: ModelView = original(view, manifest, summary_text, snapshot_id)
        covered = [m for m in view.messages if material_key(m) in manifest.keys]
        if not covered or covered[-1].kind is not ViewKind.TOOL_RESULT:
            return applied
        messages = list(applied.messages)
        at = next(i for i, m in enumerate(messages) if m.kind is ViewKind.SUMMARY)
        messages.insert(at + 1, covered[-1])
        return ModelView(tuple(messages))
    return apply_snapshot


MUTANTS = (
    Mutant("ORPHAN-AFTER-CUT",
           "the compaction cut keeps the covered material's last tool result after the summary, "
           "its call summarised away (§6: every tool result in a request has its call)",
           (Patch(snapshots, "apply_snapshot", _cut_keeps_last_result),)),
)
