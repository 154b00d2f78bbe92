"""Mutants: deliberately wrong runtimes, each one realistic bug, and the kill matrix that shows
which conformance cases catch it (docs/architecture.md "Layers"; issue #10).

A mutant is the reference driver with one piece of the reference runtime replaced while it
runs — a function of the pure core or a method of the runtime shell swapped for a wrong version
(``Patch``). The kill matrix runs the conformance cases against each mutant: a case that fails
or errors kills it. A mutant no case kills is a missing case: add the case, never weaken the
mutant. The mutants live in one module per area (history, budget, compaction, hooks,
recovery, access, ports, workflow); each names the design rule it breaks.
"""

import functools
import inspect
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from types import FunctionType
from typing import Any
from unittest import mock

from ctxspec.conformance.case import Case
from ctxspec.conformance.driver import ReferenceDriver
from ctxspec.conformance.harness import CaseResult, SharedRuns, run_case


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


def judge(mutant: Mutant, cases: Sequence[Case], reach: "Reach | None" = None) -> Verdict:
    """Run the cases against the mutant (the crash matrix only for a recovery mutant).

    With ``reach`` (:func:`reach_of`), a case in which the reference never called anything the
    mutant replaces is not run again: the mutated runtime takes exactly the reference's steps
    there, so its result is the reference's (issue #20: the whole kill matrix judges each of
    70-odd mutants against every case)."""
    chosen = [c for c in cases if mutant.recovery or c.source != "§10 crash matrix"]
    keys = {_key(patch) for patch in mutant.patches}
    with applied(mutant):
        # The mutated runtime's runs a document several cases need happen once (Q240).
        runs = SharedRuns(ReferenceDriver, chosen)
        return Verdict(mutant, tuple(
            reach.results[case.id] if reach is not None and case.id in reach.results
            and not keys & reach.called[case.id] else run_case(case, ReferenceDriver, runs=runs)
            for case in chosen))


@dataclass(frozen=True)
class Reach:
    """Each case's result on the reference and which mutants' replaced functions it called."""

    results: dict[str, CaseResult]
    called: dict[str, frozenset[tuple[int, str]]]


def _key(patch: Patch) -> tuple[int, str]:
    return id(patch.owner), patch.attribute


def reach_of(cases: Sequence[Case], mutants: Sequence[Mutant]) -> Reach:
    """Run every case once on the reference with each replaced function wrapped by a recorder
    that calls it through. A target that is not a plain function (a class, a constant, a
    static or class method) is counted as called by every case, so such a mutant is always
    run."""
    targets = {_key(p): p for m in mutants for p in m.patches}
    plain = {key: p for key, p in targets.items()
             if isinstance(inspect.getattr_static(p.owner, p.attribute), FunctionType)}
    always = frozenset(targets.keys() - plain.keys())
    called: set[tuple[int, str]] = set()
    results: dict[str, CaseResult] = {}
    reached: dict[str, frozenset[tuple[int, str]]] = {}
    with ExitStack() as stack:
        for key, patch in plain.items():
            stack.enter_context(mock.patch.object(patch.owner, patch.attribute, _recorder(
                getattr(patch.owner, patch.attribute), key, called)))
        for case in cases:
            called.clear()
            results[case.id] = run_case(case, ReferenceDriver)
            reached[case.id] = frozenset(called) | always
    return Reach(results, reached)


def _recorder(original: Callable[..., Any], key: tuple[int, str],
              called: set[tuple[int, str]]) -> Callable[..., Any]:
    @functools.wraps(original)
    def recorded(*args: Any, **kwargs: Any) -> Any:
        called.add(key)
        return original(*args, **kwargs)
    return recorded


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


__all__ = ["Mutant", "Patch", "Reach", "Verdict", "all_mutants", "applied", "judge", "reach_of"]
