"""Mutants that trust what the ports report too much: the model's actual usage (§7) and the
order a batch's tools complete in (§2)."""

import math
from collections.abc import Callable, Sequence
from dataclasses import replace
from fractions import Fraction
from typing import Any
from uuid import UUID

from ctxspec.conformance.mutants import Mutant, Patch
from ctxspec.reference import history, protocol
from ctxspec.reference.contracts import MessageRole
from ctxspec.reference.ports import Complete, Failed, ModelOutcome
from ctxspec.reference.registry import JSON
from ctxspec.reference.runtime import trace as tr
from ctxspec.reference.runtime.context_manager import ContextManager
from ctxspec.reference.runtime.context_writes import ContextDelta
from ctxspec.reference.runtime.pipeline import InvocationPipeline
from ctxspec.reference.tokens import EstimationRequest, TokenEstimate, TokenEstimator
from ctxspec.reference.view import ViewKind, ViewMessage, message_from_record

# --- §7: the provider's actual usage ------------------------------------------------------------


def _rewrites_estimate(original: Callable[..., ModelOutcome]) -> Callable[..., ModelOutcome]:
    """Once the answer is in, the request's recorded token count is overwritten with the count
    the provider reported."""
    def model(self: InvocationPipeline, *args: Any, **kwargs: Any) -> ModelOutcome:
        outcome = original(self, *args, **kwargs)
        if isinstance(outcome, Complete) and outcome.input_tokens is not None:
            events = self.s.trace.events
            last = max(i for i, e in enumerate(events) if isinstance(e, tr.ModelRequestSent))
            sent = events[last]
            assert isinstance(sent, tr.ModelRequestSent)
            events[last] = replace(sent, estimated_input_tokens=outcome.input_tokens)
        return outcome
    return model


def _resends(original: Callable[..., ModelOutcome]) -> Callable[..., ModelOutcome]:
    """An answer whose reported input exceeds the input budget is taken as a request that did
    not fit, and the same request is sent again as the next attempt."""
    def model(self: InvocationPipeline, *args: Any, **kwargs: Any) -> ModelOutcome:
        outcome = original(self, *args, **kwargs)
        attempt = args[4] if len(args) > 4 else kwargs["attempt"]
        if isinstance(outcome, Complete) and outcome.input_tokens is not None \
                and outcome.input_tokens > self.s.budget.input_budget \
                and attempt < self.s.agent.model_attempts:
            return Failed("USAGE_OVER_BUDGET")
        return outcome
    return model


class _Calibrated:
    """The runtime's estimator scaled by the last reported input over its estimate."""

    def __init__(self, inner: TokenEstimator) -> None:
        self.inner = inner
        self.name = inner.name
        self.ratio = Fraction(1)

    def estimate(self, request: EstimationRequest) -> TokenEstimate:
        estimate = self.inner.estimate(request)
        return estimate.model_copy(update={"tokens": math.ceil(estimate.tokens * self.ratio)})


def _calibrating_model(original: Callable[..., ModelOutcome]) -> Callable[..., ModelOutcome]:
    def model(self: InvocationPipeline, *args: Any, **kwargs: Any) -> ModelOutcome:
        if not isinstance(self.s.estimator, _Calibrated):  # this runtime's first call
            self.s.estimator = _Calibrated(self.s.estimator)
        outcome = original(self, *args, **kwargs)
        estimator, estimation = self.s.estimator, kwargs["estimation"]
        if isinstance(estimator, _Calibrated) and isinstance(outcome, Complete) \
                and outcome.input_tokens is not None and estimation > 0:
            # the drift of this answer corrects every later estimate
            estimator.ratio *= Fraction(outcome.input_tokens, estimation)
        return outcome
    return model


# --- §2: the order a batch's tools complete in --------------------------------------------------


def _feedback_by_completion(original: Callable[..., ContextDelta]
                            ) -> Callable[..., ContextDelta]:
    """The batch's results are appended in the order the calls finished (their latency), so
    context_seq is the completion order."""
    def feed_back(self: ContextManager, run: Any,
                  results: Sequence[tuple[UUID, dict[str, JSON]]]) -> ContextDelta:
        latency = {e.call_id: e.latency for e in self.s.trace.of(tr.ToolExecuted)}
        order = sorted(range(len(results)), key=lambda i: (latency.get(results[i][0]) or 0, i))
        return original(self, run, [results[i] for i in order])
    return feed_back


class _CommitOrderRepair(protocol.ProtocolRepair):
    """Shows a settled batch's results in the order they were committed (context_seq), not in
    the action order of their calls."""

    def _emit(self, batch: Any, out: list[ViewMessage], *, placeholders: bool) -> None:
        self._open = None
        out.append(message_from_record(batch.decision, ViewKind.ASSISTANT,
                                       source_run_id=self._run_id))
        out.extend(message_from_record(record, ViewKind.TOOL_RESULT, source_run_id=self._run_id)
                   for record in batch.results.values())  # in the order they were fed
        if placeholders:
            out.extend(ViewMessage(
                role=MessageRole.TOOL, kind=ViewKind.PLACEHOLDER,
                text=protocol.placeholder_text(call, self._call_states.get(call.call_id)),
                call_id=call.call_id, source_run_id=self._run_id or batch.decision.record.run_id)
                for call in batch.decision.tool_calls if call.call_id.int not in batch.results)
        for held in batch.held:
            self.feed(held, out)


MUTANTS = (
    Mutant("USAGE-REWRITES-ESTIMATE",
           "a sent request's recorded estimate is overwritten with the input tokens the "
           "provider reported (§7: actual usage is audit data; it never alters a sent request)",
           (Patch(InvocationPipeline, "call_model", _rewrites_estimate),)),
    Mutant("USAGE-RESENDS",
           "an answer whose reported input exceeds B is treated as a failed attempt and the "
           "request sent again (§7: usage never changes what was sent, nor re-sends it)",
           (Patch(InvocationPipeline, "call_model", _resends),)),
    Mutant("USAGE-CALIBRATES",
           "later estimates are scaled by the last reported input over its estimate, so "
           "reported usage re-budgets the Session (§7: usage is for audit and deviation "
           "monitoring; I is the estimator's: Q57 \"Reported usage\")",
           (Patch(InvocationPipeline, "call_model", _calibrating_model),)),
    Mutant("FEEDBACK-BY-COMPLETION",
           "a batch's results are committed in completion (latency) order and the protocol "
           "follows the commit order (§2: context_seq is not decided by parallel completion "
           "times; §6/§10: feedback in action order)",
           (Patch(ContextManager, "prepare_batch_delivery", _feedback_by_completion),
            Patch(history, "ProtocolRepair", lambda _: _CommitOrderRepair))),
)
