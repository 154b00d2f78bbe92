"""Mutants of the outer workflow (§1 outer nodes, §2 WorkflowSession inputs, §3 an outer
node's context_patch, §11 error scope): wrong ways a workflow engine runs its nodes."""

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from ctxspec.conformance.mutants import Mutant, Patch
from ctxspec.reference.ports import HookContext, HookPoint, HookReply
from ctxspec.reference.runtime import workflow


def _context_patch_dropped(original: Callable[..., Any]) -> Callable[..., Any]:
    def evaluate(proposal: Any, call: Any, *args: Any, **kwargs: Any) -> Any:
        if call.actor_context_id is None and proposal.context_ops:
            # An outer node "has no context to patch", so its context_patch is quietly left
            # out and the rest of the item applied, as if it were valid.
            proposal = replace(proposal, context_ops=(), context_id=None)
        return original(proposal, call, *args, **kwargs)
    return evaluate


def _input_written_back(original: Callable[..., Any]) -> Callable[..., Any]:
    def capability(run: Any, node: Any, *args: Any) -> Any:
        done = len(run.operations)
        original(run, node, *args)
        if len(run.operations) > done:
            # The effective input goes back into the graph state under the input mapping, so
            # later nodes read the hook-changed values without an output mapping.
            _, _, effective = run.operations[-1]
            for argument, key in node.input_mapping.items():
                if argument in effective:
                    workflow._write(run, key, effective[argument], node.name)
    return capability


class _NoHooks:
    def registered(self, point: HookPoint) -> bool:
        return False

    def items(self, context: HookContext) -> tuple[HookReply, ...]:
        return ()


def _inner_hooks_skipped(original: Callable[..., Any]) -> Callable[..., Any]:
    def agent(run: Any, node: Any, invoke: Callable[[Any], Any], *args: Any) -> Any:
        def bare(inner: Any) -> Any:
            # The invocation is built without the hook pipeline: a "lightweight" agent call.
            runtime = invoke(inner)
            runtime.hooks = _NoHooks()
            return runtime
        return original(run, node, bare, *args)
    return agent


def _inputs_delivered(original: Callable[..., Any]) -> Callable[..., Any]:
    def run_workflow(flow: Any, inputs: Mapping[str, Any], *, invoke: Callable[[Any], Any],
                     **rest: Any) -> Any:
        def delivering(node: Any) -> Any:
            # The WorkflowSession's inputs are treated as the user's inputs of every Agent
            # root role: each invocation receives them before its own question.
            runtime = invoke(node)
            for value in inputs.values():
                if isinstance(value, str):
                    runtime.supplement(value)
            return runtime
        return original(flow, inputs, invoke=delivering, **rest)
    return run_workflow


def _fail_fast(original: Callable[..., Any]) -> Callable[..., Any]:
    def agent(run: Any, *args: Any) -> Any:
        original(run, *args)
        if run.results and run.results[-1].status == "failed":
            run.ended = "stopped"  # fail fast: a failed node cancels its siblings and the rest
    return agent


def _stop_not_heard(original: Callable[..., Any]) -> Callable[..., Any]:
    def tree_ending(run: Any, flow: Any, control: Any, clock: Any) -> Any:
        # The stop reaches the running invocation only; the workflow's own scheduling never
        # hears it, so the stopped node is routed like a failure and the graph goes on.
        return original(run, flow, workflow.WorkflowControl(), clock)
    return tree_ending


def _limits_per_node(original: Callable[..., Any]) -> Callable[..., Any]:
    def agent(run: Any, node: Any, invoke: Any, flow: Any, control: Any, clock: Any,
              *rest: Any) -> Any:
        # Every node gets the root Run's whole deadline and Loop budget, measured from its own
        # start, instead of what the tree has left.
        started, loops = run.started_at, run.loops
        run.started_at, run.loops = clock.now(), 0
        try:
            original(run, node, invoke, flow, control, clock, *rest)
        finally:
            run.started_at, run.loops = started, loops + run.loops
    return agent


MUTANTS = (
    Mutant("OUTER-CONTEXT-PATCH-DROPPED",
           "an outer node's context_patch is silently left out and the rest of its hook item "
           "applied (§1, §3: without an authorised scope the patch is invalid, as a whole)",
           (Patch(workflow, "evaluate", _context_patch_dropped),)),
    Mutant("HOOK-INPUT-WRITTEN-BACK",
           "a CapabilityNode's hook-changed input is written back into the graph state (§1: it "
           "is the Operation's effective input; the graph state takes only the output mapping)",
           (Patch(workflow, "run_capability_node", _input_written_back),)),
    Mutant("INNER-HOOKS-SKIPPED",
           "an AgentNode's invocation runs without the hook pipeline (§1: the inner React task "
           "follows every rule of the design)",
           (Patch(workflow, "run_agent_node", _inner_hooks_skipped),)),
    Mutant("WORKFLOW-INPUTS-DELIVERED",
           "the WorkflowSession's inputs are delivered to every AgentNode's root role as user "
           "inputs (§2: they go through the outer input mapping only)",
           (Patch(workflow, "run_workflow", _inputs_delivered),)),
    Mutant("FAILURE-CANCELS-TREE",
           "a failed AgentNode cancels its siblings and the rest of the workflow (§11: the "
           "node gets a failed result for its error route; siblings are not cancelled)",
           (Patch(workflow, "run_agent_node", _fail_fast),)),
    Mutant("STOP-ROUTED-AS-FAILURE",
           "the root Run's stop reaches the running invocation only; the node routes it as a "
           "failure and the workflow goes on (§11: a stop ends the whole tree)",
           (Patch(workflow, "tree_ending", _stop_not_heard),)),
    Mutant("ROOT-LIMITS-PER-NODE",
           "each AgentNode gets the root Run's whole deadline and Loop budget afresh (§11: the "
           "overall deadline and the root's Loops are the whole tree's)",
           (Patch(workflow, "run_agent_node", _limits_per_node),)),
)
