"""The driver judge's rules about budgets, counts, stops and hook changes (models/driver_judge.py
calls them after every step): §7 and §8's arithmetic on every request, each Run's Loop, tool
quota, attempt and deadline counts (across a takeover too), no compaction episode started after
a stop, and the three hook rules the common path once skipped — a tool's post-call chain for a
delegated Executor's result, a post-call edit as a recorded change, a shared field's own
revision.

Every expectation is derived from the design and the scenario document; the sentence each
rests on is quoted beside it. The trace is read as the contract publishes it
(conformance/trace_contract.py); the one extra the reference traces, ``budget_decision`` (its
§8 F and T), is used when present to pin T exactly, and bounds are checked without it.
"""

import os
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

Trace = list[dict[str, Any]]
Expect = Callable[[bool, str], None]

JUDGE_BUDGETS_ACROSS_TAKEOVER = os.environ.get("CTXSPEC_JUDGE_BUDGETS_ACROSS_TAKEOVER") == "1"
"""Issue #34 (open), off unless ``CTXSPEC_JUDGE_BUDGETS_ACROSS_TAKEOVER=1``: whether a Run's
Loop, tool quota, attempt and deadline counts are judged over a takeover too (§10
"执行权、版本检查、剩余额度和 deadline 一起参与恢复，不能在接管后重新获得完整预算").
Off until #34's fix lands: a count broken in a Run that was taken over is then noted
(``Notes.regained``), not failed, so main stays green; the same counts in Runs without a
takeover are always judged (docs/models.md)."""

SUMMARY_CAP = 8192
"""A = 8192, the default summary target cap (§8 "A = 8192 # 默认摘要目标上限")."""


@dataclass(frozen=True)
class Budget:
    """W, O, S and B of the Agent, with §7's defaults where it sets none."""

    window: int
    reserve: int
    margin: int
    ratio: Fraction
    provider_limit: int | None
    target: int | None

    @property
    def input_budget(self) -> int:
        return self.window - self.reserve - self.margin  # §7 "B … W − O − S"


def budget_of(agent: Mapping[str, Any]) -> Budget:
    window = agent["window"]
    # §7 "O … Agent 显式配置优先;未设置时取已知模型最大输出或 4096，与 floor(W/4) 的较小值".
    reserve = agent.get("output_reserve") or min(agent.get("max_output") or 4096, window // 4)
    # §7 "S … 默认 max(256, ceil(W × 1%))，Agent 可覆盖".
    margin = agent.get("safety_margin") or max(256, -(-window // 100))
    return Budget(window, reserve, margin, Fraction(agent.get("trigger_ratio", "0.80")),
                  agent.get("provider_output_limit"), agent.get("summary_target"))


def summary_target(budget: Budget, fixed: int) -> int:
    """T of §8 for a fixed input F, in the design's own steps."""
    b = budget.input_budget
    room = b - fixed                                            # H = B − F
    cap = min(x for x in (budget.reserve, budget.provider_limit, room) if x is not None)  # P
    if budget.target is not None:
        return min(budget.target, cap)        # T = min(Agent显式摘要目标, P) if 已配置
    default = min(SUMMARY_CAP, b // 4, cap)                     # C = min(A, floor(B×0.25), P)
    soft = b * 3 // 5 - fixed                                   # D = floor(B × q) − F
    return min(default, soft) if soft > 0 else default          # T_auto


def check_arithmetic(expect: Expect, budget: Budget, trace: Trace,
                     requests: Sequence[tuple[int, dict[str, Any]]]) -> None:
    """§7 and §8 on every request: B and the trigger line as configured, no business request
    over B, each compaction chunk's max output T."""
    b = budget.input_budget
    for position, request in requests:
        expect(request["input_budget"] == b,
               f"a request carries B = {request['input_budget']}; W − O − S = {b}")
        threshold = request.get("trigger_threshold")
        # §7 "触发压缩 | I >= floor(r × B)", exact: floor(0.29 × 100) is 29.
        expect(threshold in (None, int(budget.ratio * b)),
               f"a request carries the trigger line {threshold}; floor(r × B) = "
               f"{int(budget.ratio * b)}")
        if request["purpose"] == "business":
            # §7 "绝不能发送超过 B 的输入".
            expect(request["estimated_input_tokens"] <= b,
                   f"a business request is sent with I = {request['estimated_input_tokens']} "
                   f"over B = {b}")
        else:
            _target(expect, budget, trace, position, request)


def _target(expect: Expect, budget: Budget, trace: Trace, position: int,
            request: Mapping[str, Any]) -> None:
    """§8 "压缩请求的 max_output_tokens 设置为 T": T ≤ P ≤ min(O, the provider's limit); with an
    explicit target T ≤ it, else T ≤ C ≤ min(A, floor(B/4)); exactly T(F) when the driver
    traces the §8 decision's F."""
    sent = request["max_output_tokens"]
    caps = [budget.reserve, *(x for x in (budget.provider_limit,) if x is not None)]
    caps.append(budget.target if budget.target is not None
                else min(SUMMARY_CAP, budget.input_budget // 4))
    expect(0 < sent <= min(caps), f"a compaction chunk may answer {sent} tokens; T is at most "
                                  f"{min(caps)} (§8 P, C and the Agent's target)")
    # The episode's own decision: the one before its first event. A resumed episode keeps its
    # chunk parameters (§8 "材料的覆盖区间、分块参数和完成游标已持久化，恢复沿用同一 Episode"),
    # whatever a takeover's later evaluation says.
    role = request.get("role", "root")
    episode = request["purpose_key"].split(":")[1] if ":" in request["purpose_key"] else None
    first = next((i for i, e in enumerate(trace[:position]) if e["kind"] == "compaction"
                  and e["episode_id"] == episode), position)
    decision = next((e for e in reversed(trace[:first]) if e["kind"] == "budget_decision"
                     and e.get("role", "root") == role and e["decision"] == "compact"), None)
    if decision is not None:
        wanted = summary_target(budget, decision["fixed_tokens"])
        expect(sent == wanted == decision["summary_target"],
               f"a compaction chunk may answer {sent} tokens (the decision says "
               f"{decision['summary_target']}); §8 gives T = {wanted} for F = "
               f"{decision['fixed_tokens']}, B = {budget.input_budget}")


@dataclass
class Notes:
    """What the judge noted without failing: Runs whose budgets came back after a takeover
    while :data:`JUDGE_BUDGETS_ACROSS_TAKEOVER` is off (issue #34)."""

    regained: dict[int, str] = field(default_factory=dict)


def check_counts(expect: Expect, agent: Mapping[str, Any], trace: Trace,
                 run_of: Callable[[int], int | None], notes: Notes) -> None:
    """Per Run, over every incarnation: business Loops ≤ loop_limit (all roles, Q63), each
    Operation's attempts ≤ model_attempts, tools run ≤ tool_quota, calls ≤ run_deadline."""
    loops: dict[int, set[str]] = {}
    calls: Counter[int] = Counter()
    tools: Counter[int] = Counter()
    attempts: dict[str, int] = {}
    taken_over: set[int] = set()
    for position, event in enumerate(trace):
        run = run_of(position)
        if run is None:
            continue
        if event["kind"] == "restarted":
            taken_over.add(run)
        elif event["kind"] == "model_request":
            calls[run] += 1  # a tick per model call (docs/scenarios.md run_deadline)
            if event["purpose"] == "business":
                loops.setdefault(run, set()).add(event["purpose_key"])
            attempts[event["purpose_key"]] = max(attempts.get(event["purpose_key"], 0),
                                                 event["attempt"])
        elif event["kind"] == "tool_executed":
            calls[run] += 1
            tools[run] += 1
    for key, attempt in attempts.items():
        # §5 "模型请求重试使用同一冻结有效上下文版本": at most model_attempts of one Operation;
        # a chunk inherits the role's retry configuration (§8 "继承当前角色模型和连接重试配置").
        expect(attempt <= agent.get("model_attempts", 2),
               f"{key} was attempted {attempt} times; model_attempts is "
               f"{agent.get('model_attempts', 2)}")
    limits = (("business Loops", {r: len(k) for r, k in loops.items()}, agent.get("loop_limit",
                                                                                  8)),
              ("tool runs", tools, agent.get("tool_quota")),
              ("model calls and tool runs", calls, agent.get("run_deadline")))
    for what, counts, limit in limits:
        for run, count in counts.items():
            if limit is None or count <= limit:
                continue
            problem = f"run {run} made {count} {what}; its budget is {limit}"
            if run in taken_over and not JUDGE_BUDGETS_ACROSS_TAKEOVER:
                notes.regained.setdefault(run, problem)
                continue
            expect(False, problem + (" (after a takeover: §10 \"不能在接管后重新获得完整预算\")"
                                     if run in taken_over else ""))


def check_no_episode_after_stop(expect: Expect, trace: Trace, step_of: Callable[[int], int],
                                during: Sequence[int | None], stops: Mapping[int, int]) -> None:
    """§11 "用户在准备/压缩期间 Stop | 不启动新的压缩或业务 Attempt": no episode is first seen
    after the Run's stop arrived (one that started before may wind up)."""
    seen: set[str] = set()
    for position, event in enumerate(trace):
        if event["kind"] != "compaction" or event["episode_id"] in seen:
            continue
        seen.add(event["episode_id"])
        step = step_of(position)
        run = during[step] if step >= 0 else None
        expect(run is None or run not in stops or step <= stops[run],
               f"run {run} started a compaction episode after it was stopped")


def scripted_items(hooks: Iterable[Mapping[str, Any]], point: str,
                   ordinal: int) -> list[Mapping[str, Any]]:
    """The items the scripted hook port answers the ``ordinal``-th chain of ``point`` with, in
    chain order (conformance/scripted.py ScriptedHooks)."""
    return [item for hook in hooks if hook["point"] == point
            and hook.get("ordinal") in (None, ordinal) for item in hook["items"]]


def decided_items(hooks: Sequence[Mapping[str, Any]],
                  trace: Trace) -> list[tuple[Mapping[str, Any], dict[str, Any]]]:
    """Each traced decision with the scripted item that made it (the port counts a point's
    chains over the whole scenario, as the trace lists them)."""
    asked: Counter[str] = Counter()
    items: list[Mapping[str, Any]] = []
    paired: list[tuple[Mapping[str, Any], dict[str, Any]]] = []
    for event in trace:
        if event["kind"] == "hook_called":
            asked[event["point"]] += 1
            items = scripted_items(hooks, event["point"], asked[event["point"]])
        elif event["kind"] == "hook_decided":
            position = event["chain_position"]
            paired.append((items[position] if position < len(items) else {}, event))
    return paired


POST_POINTS = ("model.post_response", "tool.post_call")


def check_hook_changes(expect: Expect, hooks: Sequence[Mapping[str, Any]],
                       trace: Trace) -> None:
    """A response edit is a change, never an overwrite (§1 "原始用户、模型和工具记录不可覆盖;Hook
    可以修改有效上下文，通过追加变更和版本关联体现"; §3 "模型/工具响应 | 保存 raw_result，再提交
    Hook 后有效结果及版本"): a valid allow with a patch at a post point lists its change. A
    shared field has its own revision (§3 "共享字段与私有 context 使用各自 revision"; "若目标记
    录的相关字段和授权语义均未变化，可把同一已验证变更重新定位到最新 manifest"): an item changing it
    on the base it was given — its chain's, or the head — never meets
    CONTEXT_REVISION_CONFLICT while nothing else changed it (only one item a chain does)."""
    for item, decided in decided_items(hooks, trace):
        patched = bool(item.get("payload_patch") or item.get("context_patch"))
        if decided["point"] in POST_POINTS and decided["decision"] == "allow" \
                and decided["patch_valid"] and patched and not item.get("fails"):
            expect(bool(decided["changes"]),
                   f"a {decided['point']} edit was applied but lists no change: it overwrote "
                   f"the record instead of appending a ContextMutation")
        shared = [p for p in item.get("context_patch", ()) if p.get("scope") == "shared"]
        if shared and not item.get("fails"):
            expect("CONTEXT_REVISION_CONFLICT" not in (decided.get("diagnostics") or ()),
                   "a shared field's change on the base it was given met "
                   "CONTEXT_REVISION_CONFLICT: its revision was checked against the role's "
                   "private one")


REDACTED = "(redacted)"
REDACTION = {"payload_patch": [{"path": "result", "value": REDACTED}]}


def check_post_call_chain(expect: Expect, hooks: Sequence[Mapping[str, Any]], trace: Trace,
                          dropped: bool, writes: bool) -> None:
    """Every result a call delivers goes through the post-call chain, an Executor's too (§3
    "模型/工具响应 | 保存 raw_result，再提交 Hook 后有效结果及版本"; §10 "每个并行能力调用或
    Executor 分别保存原始结果及后处理进度"): when the only tool.post_call hook redacts every
    result, every ordinary result of a call that ran — a tool's or a delegation's — reads
    redacted. ``dropped``: a hook running at the crash was dropped (Q50), so one may not;
    ``writes``: an independent writer may correct a record afterwards."""
    post = [h for h in hooks if h["point"] == "tool.post_call"]
    # A later change of a tool's record may stand over it: a pre-request item editing the
    # newest record, or a writer (a post-response item edits the answer, a pre-call item the
    # call).
    edits = writes or any(item.get("context_patch") for h in hooks for item in h["items"]
                          if h["point"] in ("model.pre_request", "compaction.pre_request"))
    if dropped or edits or post != [{"point": "tool.post_call", "items": [REDACTION]}]:
        return
    ran = {e["call_id"] for e in trace if e["kind"] == "tool_executed" and e["outcome"] == "ok"}
    for event in trace:
        if event["kind"] != "model_request":
            continue
        messages = event["view"]["messages"]
        delegated = {c["call_id"] for m in messages for c in m.get("tool_calls") or ()
                     if c["name"] == "delegate"}
        for message in messages:
            if message["kind"] != "tool_result" or message.get("result_facts") \
                    or message.get("call_id") not in ran | delegated:
                continue
            expect(message["text"] == REDACTED,
                   f"a {'delegation' if message['call_id'] in delegated else 'tool'}'s result "
                   f"reads {message['text'][:40]!r}: it skipped the tool.post_call chain")


__all__ = ["JUDGE_BUDGETS_ACROSS_TAKEOVER", "POST_POINTS", "REDACTED", "REDACTION",
           "SUMMARY_CAP", "Budget", "Notes", "budget_of", "check_arithmetic", "check_counts",
           "check_hook_changes", "check_no_episode_after_stop", "check_post_call_chain",
           "decided_items", "scripted_items", "summary_target"]
