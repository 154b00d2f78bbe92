"""Mutants: deliberately wrong runtimes, each one realistic bug, and the kill matrix that shows
which conformance cases catch it (docs/architecture.md "Layers"; issue #10).

A mutant is the reference driver with one piece of the reference runtime replaced while it
runs — a function of the pure core or a method of the runtime shell swapped for a wrong version
(``Patch``). The kill matrix runs the conformance cases against each mutant: a case that fails
or errors kills it. A mutant no case kills is a missing case: add the case, never weaken the
mutant. The mutants live in one module per area (history, budget, compaction, hooks,
recovery, access, ports, workflow); each names the design rule it breaks.
"""

from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any
from unittest import mock

from ctxspec.conformance.case import Case
from ctxspec.conformance.driver import ReferenceDriver
from ctxspec.conformance.harness import CaseResult, run_case


@dataclass(frozen=True)
class Patch:
    """Replace ``owner.attribute`` (a module's function or a class's method) while a mutant
    runs. ``wrong`` receives the original, so a mutant can wrap it instead of copying it."""

    owner: object
    attribute: str
    wrong: Callable[[Any], Any]


@dataclass(frozen=True)
class Mutant:
    id: str
    description: str
    """The bug, and the design rule it breaks."""
    patches: tuple[Patch, ...]
    recovery: bool = False
    """Its bug shows only after a crash: the crash matrix is run for it too."""


@contextmanager
def applied(mutant: Mutant) -> Iterator[None]:
    with ExitStack() as stack:
        for patch in mutant.patches:
            original = getattr(patch.owner, patch.attribute)
            stack.enter_context(mock.patch.object(patch.owner, patch.attribute,
                                                  patch.wrong(original)))
        yield


@dataclass(frozen=True)
class Verdict:
    mutant: Mutant
    results: tuple[CaseResult, ...] = field(default_factory=tuple)

    @property
    def killed_by(self) -> list[str]:
        """The cases whose expectation the mutant broke. A case that errors (the mutated
        runtime raised) does not count: a kill is an observed wrong behaviour."""
        return [r.case.id for r in self.results if r.status == "failed"]

    @property
    def errored(self) -> list[str]:
        return [r.case.id for r in self.results if r.status == "error"]

    def to_json(self) -> dict[str, object]:
        return {"id": self.mutant.id, "description": self.mutant.description,
                "killed_by": self.killed_by, "errored": self.errored}


def judge(mutant: Mutant, cases: Sequence[Case]) -> Verdict:
    """Run the cases against the mutant (the crash matrix only for a recovery mutant)."""
    chosen = [c for c in cases if mutant.recovery or c.source != "§10 crash matrix"]
    with applied(mutant):
        return Verdict(mutant, tuple(run_case(case, ReferenceDriver) for case in chosen))


def all_mutants() -> tuple[Mutant, ...]:
    from ctxspec.conformance.mutants import (
        access,
        adapter,
        budget,
        compaction,
        history,
        hooks,
        paths,
        ports,
        recovery,
        workflow,
    )
    return (*history.MUTANTS, *budget.MUTANTS, *compaction.MUTANTS, *hooks.MUTANTS,
            *recovery.MUTANTS, *access.MUTANTS, *ports.MUTANTS, *workflow.MUTANTS,
            *paths.MUTANTS, *adapter.MUTANTS)


__all__ = ["Mutant", "Patch", "Verdict", "all_mutants", "applied", "judge"]
