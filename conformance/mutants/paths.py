"""Mutants of rules the suite once pinned on one path only (issue #22): each reintroduces a
fault the reference had on the other paths — a post-response deny ignored, an Executor's raw
answer handed to the Planner, an Executor's context error swallowed, a retry past the Run's
deadline, a failed attempt's fragment kept after a good retry, a stop that loses to the outcome
of the request in flight, a pre-request deny that still sends the request."""

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from ctxspec.conformance.mutants import Mutant, Patch
from ctxspec.reference.contracts import MessageRole, RunStatus
from ctxspec.reference.runtime import context_manager
from ctxspec.reference.runtime.compaction_service import CompactionService
from ctxspec.reference.runtime.node_driver import NodeDriver
from ctxspec.reference.runtime.pipeline import InvocationPipeline
from ctxspec.reference.runtime.runtime import ReferenceRuntime, RunState

Method = Callable[..., Any]


def _response_deny_ignored(original: Method) -> Method:
    def decided(self: NodeDriver, run: RunState, record_id: Any, chain: Any) -> list[Any]:
        # The deny is recorded as a decision, but the response goes on as given.
        position: list[Any] = original(self, run, record_id, None)
        return position
    return decided


def _raw_answer(original: Method) -> Method:
    def answer(self: NodeDriver, effective: Any, raw_text: str) -> str:
        return raw_text  # the waiter gets the provider's text, not the post-hook result
    return answer


def _error_swallowed(original: Method) -> Method:
    def ends(self: NodeDriver, task: RunState) -> bool:
        return False  # every Executor failure is just its delegation's error result
    return ends


def _retry_past_deadline(original: Method) -> Method:
    def halted(self: NodeDriver, run: RunState) -> bool:
        if self.stop_pending(run):  # only the stop is checked between attempts
            self.end(run, RunStatus.STOPPED)
            return True
        return False
    return halted


def _fragment_kept(original: Method) -> Method:
    def settle(self: NodeDriver, run: RunState, fragments: Sequence[str], *,
               succeeded: bool) -> None:
        for fragment in fragments:  # kept in the role's context whatever the retry did
            self.s.put_delta(self.context.append(run, MessageRole.ASSISTANT, "assistant",
                                                 {"text": fragment}, incomplete=True))
    return settle


def _stop_loses(original: Method) -> Method:
    def ending(self: NodeDriver, run: RunState, status: RunStatus, error: Any,
               message: str | None) -> tuple[RunStatus, Any, str | None]:
        return status, error, message  # the request in flight decides the ending
    return ending


def _deadline_per_task(original: Method) -> Method:
    def halted(self: NodeDriver, run: RunState) -> bool:
        if self.stop_pending(run):
            self.end(run, RunStatus.STOPPED)
            return True
        deadline = self.s.agent.run_deadline  # counted from the role's own start
        if deadline is not None and self.s.clock.now() - run.started_at_tick >= deadline:
            self.end(run, RunStatus.TIMED_OUT)
            return True
        return False
    return halted


def _serves_raw(original: Method) -> Method:
    def effective(self: ReferenceRuntime, caller: Any, content: Any) -> bool:
        return bool(content == "effective")  # a role's default read is the raw records
    return effective


def _arguments_unchecked(original: Method) -> Method:
    def problems(self: InvocationPipeline, run: RunState, name: str, arguments: Any,
                 malformed: bool = False) -> tuple[str, ...]:
        return ()  # whatever the schema declares or the provider sent, the call runs
    return problems


def _pre_call_after_stop(original: Method) -> Method:
    def asks(self: NodeDriver, run: RunState) -> bool:
        return True  # the batch's pre-call hooks are asked though the Run is stopping
    return asks


def _request_deny_ignored(original: Method) -> Method:
    def chain(proposals: Any, call: Any, *args: Any, **kwargs: Any) -> Any:
        outcome = original(proposals, call, *args, **kwargs)
        # A pre-request deny is recorded, but the request is frozen and sent anyway.
        return replace(outcome, blocked=False) if call.hook_point == "model.pre_request" \
            else outcome
    return chain


def _chunk_sent_after_stop(original: Method) -> Method:
    def halted(self: CompactionService, run: RunState, attempt: int, first: int) -> bool:
        # Only a retry checks the stop: a stop during the chunk's pre-request chain is missed.
        return attempt > first and bool(original(self, run, attempt, first))
    return halted


MUTANTS = (
    Mutant("CHUNK-SENT-AFTER-STOP",
           "a stop that comes while a chunk's pre-request hook runs is checked only before a "
           "retry: the chunk's first attempt is sent (§11: a stop during compaction starts no "
           "new compaction Attempt; Q161)",
           (Patch(CompactionService, "halted_before_chunk_attempt", _chunk_sent_after_stop),)),
    Mutant("RESPONSE-DENY-IGNORED",
           "a model.post_response deny is recorded but the answer is delivered: its calls run, "
           "a final answer ends the Run succeeded (§2 "
           "\"后置拒绝则交明确拒绝状态\", §3: a legitimate deny blocks execution or delivery)",
           (Patch(NodeDriver, "response_decided", _response_deny_ignored),)),
    Mutant("EXECUTOR-ANSWER-RAW",
           "the Planner receives the Executor's raw answer, not the post-hook effective one (§3 "
           "response row: the effective result goes to the current waiter)",
           (Patch(NodeDriver, "answer_text", _raw_answer, reads_only=True),)),
    Mutant("EXECUTOR-ERROR-SWALLOWED",
           "an Executor's context or compaction error becomes its delegation's error result and "
           "the Planner carries on (§11: it ends the whole AgentInvocation)",
           (Patch(NodeDriver, "ends_invocation", _error_swallowed, reads_only=True),)),
    Mutant("RETRY-PAST-DEADLINE",
           "between model attempts only the stop is checked: a retry is sent after the Run's "
           "deadline (§8: every call is under the same Run deadline)",
           (Patch(NodeDriver, "halted_before_retry", _retry_past_deadline),)),
    Mutant("FRAGMENT-KEPT-AFTER-RETRY",
           "a failed attempt's fragment stays in the role's context after a good retry (§12 row "
           "12: only the complete response enters the business view)",
           (Patch(NodeDriver, "settle_fragments", _fragment_kept),)),
    Mutant("STOP-LOSES-TO-OUTCOME",
           "a stop that arrives while a request is in flight ends the Run as that request did "
           "(§11: the root Run's stop is not swallowed by local outcomes; Q76)",
           (Patch(NodeDriver, "ending", _stop_loses, reads_only=True),)),
    Mutant("EXECUTOR-DEADLINE-RENEWED",
           "an Executor's deadline counts from the Executor's own start, so it gets the Run's "
           "whole deadline afresh (§8: every call is under the same Run deadline; §11)",
           (Patch(NodeDriver, "stopped_or_out_of_time", _deadline_per_task),)),
    Mutant("HISTORY-SERVES-RAW",
           "the history API serves a role the raw records, so a hook's change reads as the "
           "provider's original (§1: the effective version is business consumers' common "
           "source; Q81)",
           (Patch(ReferenceRuntime, "serves_effective", _serves_raw, reads_only=True),)),
    Mutant("ARGUMENTS-UNCHECKED",
           "a call whose arguments break its tool's declared schema, or are no JSON, runs (§11: "
           "an output-format error is corrected by a new business Loop; Q82)",
           (Patch(InvocationPipeline, "argument_problems", _arguments_unchecked,
                  reads_only=True),)),
    Mutant("PRE-CALL-ASKED-AFTER-STOP",
           "after a stop the pre-call hooks are still asked for calls that will never run "
           "(Q80)", (Patch(NodeDriver, "asks_pre_call", _pre_call_after_stop, reads_only=True),)),
    Mutant("REQUEST-DENY-IGNORED",
           "a model.pre_request deny is recorded but the request is sent (§3: a legitimate "
           "deny blocks the call)",
           (Patch(context_manager, "run_chain", _request_deny_ignored),)),
)
