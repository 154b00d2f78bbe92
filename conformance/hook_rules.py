"""The design's hook rules as a table (§1, §2, §3, §8, §10, §11): for every hook point and every
decision a hook may give there — allow, modify (an allow with a valid patch), deny, fail (the
handler fails) — what the design says happens, with the sentence it says it in. The hook matrix
(``conformance/matrix.py``) reads its expectations from these rows alone, never from how the
reference happens to branch; a reviewer checks a row against the sentence it cites.

A row says:

- ``write`` — how the record the point guards is written: ``append`` (as it was produced: the
  request as prepared, the answer, the call's arguments, its result, the summary), ``hook_change``
  (the hook's edit, a change of that record: its raw kept, the view marking the edit),
  ``runtime_mark`` (the runtime's explicit denied state in place of the ordinary result) or
  ``none`` (nothing is produced: the request is never sent);
- ``runs`` — whether the guarded action happens: the request is sent, the call runs;
- ``actor`` — what becomes of the role the hook acts in: it ``goes_on``, it ``fails`` (no answer
  for it: HOOK_DENIED), or its whole invocation fails (``invocation_fails``: COMPACTION_FAILED).

Two more small tables complete the matrix's dimensions: :data:`CALLS`, the kinds of call a
role's Loop makes (a tool, a Planner's ``delegate``, the runtime's ``result.read``), and
:data:`SCOPES`, where a hook's context patch lands (the role's private context, or a Run-level
shared field registered for it). Combinations the design leaves open or makes impossible are
:data:`NOT_APPLICABLE`, each with its reason (Q258, Q259).
"""

from collections.abc import Mapping
from dataclasses import dataclass
from itertools import product
from typing import Literal

Write = Literal["append", "hook_change", "runtime_mark", "none"]
Actor = Literal["goes_on", "fails", "invocation_fails"]

POINTS = ("model.pre_request", "model.post_response", "tool.pre_call", "tool.post_call",
          "compaction.pre_request", "compaction.post_response")
DECISIONS = ("allow", "modify", "deny", "fail")
CALLS = ("tool", "delegate", "result_read")
SCOPES = ("private", "shared")
WRITES: tuple[Write, ...] = ("append", "hook_change", "runtime_mark", "none")


@dataclass(frozen=True)
class Rule:
    """What the design says happens when the hook at ``point`` decides ``decision``."""

    point: str
    decision: str
    write: Write
    runs: bool
    actor: Actor
    cites: str
    """The design's sentence (section and words) the row follows."""


_ALLOW = "§3 \"Hook 可以允许、拒绝或修改输入输出\": an allow lets the call go as it was produced"
_MODIFY = ("§1 \"Hook 可以修改有效上下文，通过追加变更和版本关联体现\" and §3 \"保存 "
           "raw_result，再提交 Hook 后有效结果及版本\": the edit is a change of the record, its "
           "raw kept")
_FAIL = ("§3 \"决定本身不合法或处理器失败时，才按 Hook 故障规则继续\", §8 \"Hook 自身失败只"
         "舍弃当前项继续\": the failed item is dropped, the call goes on as before it")

RULES: tuple[Rule, ...] = (
    Rule("model.pre_request", "allow", "append", True, "goes_on", _ALLOW),
    Rule("model.pre_request", "modify", "hook_change", True, "goes_on", _MODIFY),
    Rule("model.pre_request", "deny", "none", False, "fails",
         "§3 \"合法 deny … 必须阻止执行或交付\": the request is never sent; the role has no "
         "answer and ends HOOK_DENIED (Q75)"),
    Rule("model.pre_request", "fail", "append", True, "goes_on", _FAIL),
    Rule("model.post_response", "allow", "append", True, "goes_on", _ALLOW),
    Rule("model.post_response", "modify", "hook_change", True, "goes_on",
         _MODIFY + "; §2 \"不得把变更后的内容伪装成供应商原文\""),
    Rule("model.post_response", "deny", "runtime_mark", True, "fails",
         "§2 \"后置拒绝则交明确拒绝状态\": the answer was produced and is withheld — its calls "
         "never run; the role ends HOOK_DENIED (Q75)"),
    Rule("model.post_response", "fail", "append", True, "goes_on", _FAIL),
    Rule("tool.pre_call", "allow", "append", True, "goes_on", _ALLOW),
    Rule("tool.pre_call", "modify", "hook_change", True, "goes_on",
         "§3 \"实际 Handler 和有效调用记录均使用新路径，原始模型响应保持\": the call runs with the "
         "hook's arguments, the model's proposal kept"),
    Rule("tool.pre_call", "deny", "runtime_mark", False, "goes_on",
         "§3 \"合法 deny … 必须阻止执行\": the call never runs; the role reads the denial as its "
         "result and goes on"),
    Rule("tool.pre_call", "fail", "append", True, "goes_on", _FAIL),
    Rule("tool.post_call", "allow", "append", True, "goes_on", _ALLOW),
    Rule("tool.post_call", "modify", "hook_change", True, "goes_on", _MODIFY),
    Rule("tool.post_call", "deny", "runtime_mark", True, "goes_on",
         "§3 \"合法后置拒绝记录已经发生的调用\": the call ran, its ordinary result is withheld; "
         "the role reads the denied state and goes on"),
    Rule("tool.post_call", "fail", "append", True, "goes_on", _FAIL),
    Rule("compaction.pre_request", "allow", "append", True, "goes_on", _ALLOW),
    Rule("compaction.pre_request", "modify", "hook_change", True, "goes_on",
         "§8 \"可以合法允许、拒绝和修改\": the record is changed before it is summarised"),
    Rule("compaction.pre_request", "deny", "none", False, "invocation_fails",
         "§8 \"合法拒绝使本次压缩无法完成，按压缩终止规则返回明确拒绝\": the compaction "
         "request is never sent; the compaction fails and ends the invocation (Q77)"),
    Rule("compaction.pre_request", "fail", "append", True, "goes_on", _FAIL),
    Rule("compaction.post_response", "allow", "append", True, "goes_on", _ALLOW),
    Rule("compaction.post_response", "modify", "hook_change", True, "goes_on",
         "§8 \"可以合法允许、拒绝和修改\": the summary published is the hook's"),
    Rule("compaction.post_response", "deny", "none", True, "invocation_fails",
         "§8 \"不假装已生成摘要\": the compaction request was sent, no summary is published; the "
         "compaction fails and ends the invocation (Q77)"),
    Rule("compaction.post_response", "fail", "append", True, "goes_on", _FAIL),
)
"""One row per hook point × decision."""

RULE: Mapping[tuple[str, str], Rule] = {(r.point, r.decision): r for r in RULES}


@dataclass(frozen=True)
class CallKind:
    """A kind of call a role's Loop makes, and the call the matrix's hooks act on."""

    call: str
    tool: str
    """The tool name the model calls."""
    business_requests: int
    """The actor's business requests when nothing stops it: the last one compacts."""
    subject: int
    """The n-th model request and answer whose call is the subject (its tool calls' chains
    counted the same way)."""
    cites: str


CALL: Mapping[str, CallKind] = {
    "tool": CallKind("tool", "t", 2, 1,
                     "§3 \"保存 raw_result，再提交 Hook 后有效结果\": a tool's call and result"),
    "delegate": CallKind(
        "delegate", "delegate", 2, 1,
        "§10 \"每个并行能力调用或 Executor 分别保存原始结果及后处理进度\": an Executor's answer is "
        "its delegate call's result"),
    "result_read": CallKind(
        "result_read", "result.read", 3, 2,
        "§6 \"模型后续通过 result.read 读取的内容成为新的工具结果\": a read is a tool result by "
        "the same rules"),
}

SHARED_WRITES: Mapping[str, str | None] = {
    "model.pre_request": "written", "compaction.pre_request": "written",
    "model.post_response": "refused", "tool.post_call": "refused",
    "compaction.post_response": "refused", "tool.pre_call": None}
"""What a consumer's patch of a Run-level shared field does at each point: ``written`` at a
pre-stage point whose request reads it (§3 "共享字段与私有 context 使用各自 revision"; the
field registered for the consumer, §3 "显式共享业务字段同样必须先注册到授权 ContextScope");
``refused`` at a post stage, which may change only the response not yet delivered (§3
"响应后置阶段只允许修改本次尚未交付的有效响应"), so an allow fails open and a deny still denies;
None where the design leaves it to the point's field registry (Q258)."""

NOT_APPLICABLE: Mapping[tuple[str, str, str], str] = {
    **{(point, "allow", "shared"): "an allow with no patch addresses no scope; with a valid "
       "shared patch it is the modify row" for point in POINTS},
    **{(point, "fail", "shared"): "a failed handler returns no patch (§3 \"处理器失败\"): it "
       "addresses no scope" for point in POINTS},
    **{(point, decision, "shared"): "the point's field registry decides whether a shared field "
       "is writable here (§3 \"完整逐挂点字段白名单由对应 schema 注册表细化\"); the design does "
       "not (Q258)"
       for point, decision in product(POINTS, ("modify", "deny"))
       if SHARED_WRITES[point] is None},
}
"""(point, decision, scope) combinations the matrix has no case for, and why."""


def applicable(point: str, decision: str, scope: str) -> bool:
    return (point, decision, scope) not in NOT_APPLICABLE


__all__ = ["CALL", "CALLS", "DECISIONS", "NOT_APPLICABLE", "POINTS", "RULE", "RULES", "SCOPES",
           "SHARED_WRITES", "WRITES", "CallKind", "Rule", "applicable"]
