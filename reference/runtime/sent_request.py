"""The business request of a Loop as its steps hand it on (§5, §7, §10): frozen once
(T_FREEZE), it is rendered, counted and estimated once and sent as it is by every attempt
(§5 "重试使用同一冻结请求"); its saved answer is the raw result a takeover reads back instead
of asking the model again (§10 "只有原始结果时继续后处理").
"""

import json
from collections.abc import Sequence
from dataclasses import dataclass
from uuid import UUID

from ctxspec.reference.ports import Complete, ProposedCall
from ctxspec.reference.protection import ProtectedInput
from ctxspec.reference.runtime.context_manager import raw_call
from ctxspec.reference.tokens import PromptMessage, TokenEstimator
from ctxspec.reference.view import (
    ModelView,
    RenderedRequest,
    render_request,
    rendered_estimation,
)


@dataclass(frozen=True)
class SentRequest:
    """A frozen business request as every attempt sends it: its view, protected inputs and
    cutoff, the CompactionPolicy's decision and the snapshot it was fitted with, rendered,
    counted and estimated once."""

    view: ModelView
    protected: tuple[ProtectedInput, ...]
    cutoff: int
    decision: str
    snapshot_id: UUID | None
    rendered: RenderedRequest
    messages: tuple[PromptMessage, ...]
    estimation: int


def sent_request(final: ModelView, schemas: tuple[str, ...], estimator: TokenEstimator,
                 protected: Sequence[ProtectedInput], cutoff: int, decision: str,
                 snapshot_id: UUID | None) -> SentRequest:
    """What the adapter sends, marks included, is what is counted and what is traced (§6,
    §7: I counts everything sent)."""
    rendered = render_request(final, schemas)
    counted = rendered_estimation(rendered)
    return SentRequest(final, tuple(protected), cutoff, decision, snapshot_id, rendered,
                       counted.messages, estimator.estimate(counted).tokens)


def raw_answer(outcome: Complete) -> str:
    """The raw result saved of an answer: its text and calls as the model gave them (the
    raw keeps only what recovery needs)."""
    return json.dumps({"text": outcome.text, "tool_calls": [
        raw_call(c) for c in outcome.tool_calls]}, sort_keys=True, ensure_ascii=False)


def saved_answer(raw: str) -> Complete:
    """An answer read back from its saved raw result (:func:`raw_answer`)."""
    document = json.loads(raw)
    return Complete(document["text"], tuple(
        ProposedCall(c["name"], c["arguments"], c.get("provider_call_id"),
                     c.get("malformed_arguments")) for c in document["tool_calls"]))
