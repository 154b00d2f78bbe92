"""The CompactionPolicy port of §3 and its default, the design's own rules
("CompactionPolicy.evaluate 和 TokenEstimator 是可替换的纯计算端口";
``ContextManager --> CompactionPolicy : 判断阈值``).

A policy looks at one prepared request's fixed input F and compressible material M (§7, §8)
and decides: below the trigger, compact (with its summary target), or an error. It is
replaceable, and pure. Whatever a replacement decides, the runtime still checks the protected
inputs and the hard window I + O + S ≤ W before anything is sent (§3 "替换实现不能删掉受保护输入
或绕过硬窗口"), so a policy can change when compaction happens, never what may be sent.
"""

from dataclasses import dataclass
from typing import Protocol

from ctxspec.reference import budget
from ctxspec.reference.budget import CompactionEvaluation, ResolvedBudget


class CompactionPolicy(Protocol):
    """The replaceable decision of §7/§8 for one prepared request."""

    def evaluate(self, resolved: ResolvedBudget, fixed: int,
                 material: int) -> CompactionEvaluation:
        """The decision for a request of ``fixed`` tokens of fixed input and ``material``
        tokens of compressible material under the Agent's resolved budget."""
        ...


@dataclass(frozen=True)
class DesignCompactionPolicy:
    """The default CompactionPolicy: the design's boundary rules in its order
    (:func:`~ctxspec.reference.budget.evaluate_compaction`).  CTX-7.12, CTX-8.28, CTX-8.46 to
    CTX-8.51"""

    def evaluate(self, resolved: ResolvedBudget, fixed: int,
                 material: int) -> CompactionEvaluation:
        # Through the module, so a fault planted in the budget rules reaches every policy user.
        return budget.evaluate_compaction(resolved, fixed, material)


__all__ = ["CompactionPolicy", "DesignCompactionPolicy"]
