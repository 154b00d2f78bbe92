"""Mutants: deliberately wrong runtimes, each one realistic bug, and the kill matrix that shows
which conformance cases catch it (docs/architecture.md "Layers"; issue #10).

A mutant is the reference driver with one piece of the reference runtime replaced while it
runs — a function of the pure core or a method of the runtime shell swapped for a wrong version
(``Patch``). The kill matrix runs the conformance cases against each mutant: a case that fails
or errors kills it. A mutant no case kills is a missing case: add the case, never weaken the
mutant. The mutants live in one module per area (history, budget, compaction, hooks,
recovery, access, ports, workflow); each names the design rule it breaks.
"""

import copy
import functools
import inspect
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from types import FunctionType
from typing import Any
from unittest import mock

from ctxspec.conformance.case import Case, Trace
from ctxspec.conformance.driver import Driver, ReferenceDriver
from ctxspec.conformance.harness import CaseResult, SharedRuns, run_case
from ctxspec.conformance.mutants import values
from ctxspec.conformance.stdio import StdioDriver
from ctxspec.conformance.universal import Findings


@dataclass(frozen=True)
class Patch:
    """Replace ``owner.attribute`` (a module's function or a class's method) while a mutant
    runs. ``wrong`` receives the original, so a mutant can wrap it instead of copying it."""

    owner: object
    attribute: str
    wrong: Callable[[Any], Any]
    reads_only: bool = False
    """The replaced method and its wrong version only read: they change no state (the store,
    the runtime's objects, the arguments). The reach pass then asks the wrong version beside
    the original at every call, as it does a function of the pure core, and a case is reached
    only where their answers differ."""


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

    With ``reach`` (:func:`reach_of`), a case the mutant cannot change is not run again: the
    mutated runtime takes exactly the reference's steps there, so its result is the
    reference's (issue #20: the whole kill matrix judges each of 70-odd mutants against every
    case)."""
    chosen = [c for c in cases if mutant.recovery or c.source != "§10 crash matrix"]
    with applied(mutant):
        # The mutated runtime's runs a document several cases need happen once (Q240).
        runs = SharedRuns(ReferenceDriver, chosen)
        return Verdict(mutant, tuple(
            reach.results[case.id] if reach is not None and case.id in reach.results
            and mutant.id not in reach.touched[case.id]
            else run_case(case, ReferenceDriver, runs=runs)
            for case in chosen))


@dataclass(frozen=True)
class Reach:
    """Each case's result on the reference, and the mutants whose run of it may differ."""

    results: dict[str, CaseResult]
    touched: dict[str, frozenset[str]]
    """By case: the mutants whose replaced code the case reached. A replaced shell method (or
    class, constant, static method) is reached when called; a replaced function of the pure
    core, or a shell method every mutant replacing it declares ``reads_only``, only when its
    wrong version, given the same arguments, answered differently."""


def _key(patch: Patch) -> tuple[int, str]:
    return id(patch.owner), patch.attribute


PURE_CORE, SHELL = "ctxspec.reference.", "ctxspec.reference.runtime"


def _pure(function: object) -> bool:
    """A function of the pure core: no I/O, clock, randomness or process-wide state
    (tests/purity.py), so its answer is all a call of it does (its arguments are checked)."""
    module = getattr(function, "__module__", None) or ""
    return isinstance(function, FunctionType) and module.startswith(PURE_CORE) \
        and not module.startswith(SHELL)


def reach_of(cases: Sequence[Case], mutants: Sequence[Mutant]) -> Reach:
    """Run every case once on the reference with each replaced function wrapped: a shell
    method by a recorder that calls it through, a pure-core function by a comparer that also
    asks each mutant's wrong version (on a copy of the arguments) and notes the mutants whose
    answer differs, a shell method that only reads by a comparer asking on the arguments
    themselves. A target that is not a plain function is reached by every case."""
    by_key: dict[tuple[int, str], list[tuple[Mutant, Patch]]] = {}
    for mutant in mutants:
        for patch in mutant.patches:
            by_key.setdefault(_key(patch), []).append((mutant, patch))
    touched: set[str] = set()
    known_frozen: dict[int, object] = {}  # values.kind's memo, one case at a time
    always: set[str] = set()
    results: dict[str, CaseResult] = {}
    reached: dict[str, frozenset[str]] = {}
    with ExitStack() as stack:
        for pairs in by_key.values():
            owner, attribute = pairs[0][1].owner, pairs[0][1].attribute
            if not isinstance(inspect.getattr_static(owner, attribute), FunctionType):
                always.update(mutant.id for mutant, _ in pairs)
                continue
            original = getattr(owner, attribute)
            wrongs = [(m.id, p.wrong(original)) for m, p in pairs]
            if _pure(original):
                wrapper = _comparer(original, wrongs, touched, known_frozen)
            elif all(p.reads_only for _, p in pairs):
                wrapper = _reader(original, wrongs, touched)
            else:
                wrapper = _recorder(original, {m.id for m, _ in pairs}, touched)
            stack.enter_context(mock.patch.object(owner, attribute, wrapper))
        runs = _ReachingRuns(cases, touched)
        for case in cases:
            touched.clear()
            known_frozen.clear()
            results[case.id] = run_case(case, ReferenceDriver, runs=runs)
            reached[case.id] = frozenset(touched | always)
    return Reach(results, reached)


class _ReachingRuns(SharedRuns):
    """A suite run's shared runs (Q240, Q241) whose every trace brings along the mutants its
    computing reached: a kept trace read by a later case adds what its run reached, and a
    document of a group of crashed runs adds what the group's run-up and every crashed run of
    it computed so far reached. So a case may be marked as reached by more mutants than its own
    run would be (they are re-run on it: only time), never by fewer."""

    def __init__(self, cases: Sequence[Case], touched: set[str]) -> None:
        super().__init__(ReferenceDriver, cases)
        self.touched = touched
        self.by_document: dict[str, set[str]] = {}

    def judged(self, scenario: Mapping[str, Any], driver: Driver | StdioDriver | None = None
               ) -> tuple[Trace, tuple[str, ...], Findings]:
        split = self._split(scenario)
        keys = {key for key in (self._key(scenario), None if split is None else split[0])
                if key is not None}
        before = set(self.touched)
        self.touched.clear()
        try:
            return super().judged(scenario, driver)
        finally:
            for key in keys:
                self.by_document.setdefault(key, set()).update(self.touched)
            for key in keys:
                self.touched.update(self.by_document[key])
            self.touched.update(before)


def _recorder(original: Callable[..., Any], mutant_ids: set[str],
              touched: set[str]) -> Callable[..., Any]:
    @functools.wraps(original)
    def recorded(*args: Any, **kwargs: Any) -> Any:
        touched.update(mutant_ids)
        return original(*args, **kwargs)
    return recorded


def _reader(original: Callable[..., Any], wrongs: list[tuple[str, Callable[..., Any]]],
            touched: set[str]) -> Callable[..., Any]:
    """A method that only reads, as is each wrong version of it (``Patch.reads_only``): asking
    the wrong version beside it changes nothing, so the mutated run takes the reference's steps
    through every call where the two answer alike."""
    @functools.wraps(original)
    def compared(*args: Any, **kwargs: Any) -> Any:
        pending = [(mutant_id, wrong) for mutant_id, wrong in wrongs if mutant_id not in touched]
        if any(isinstance(value, Iterator) for value in (*args, *kwargs.values())):
            # The original uses an iterator up: the wrong version would be asked on another
            # input than it is given in the mutated run, so the mutant runs the case.
            touched.update(mutant_id for mutant_id, _ in pending)
            pending = []
        try:
            answer = original(*args, **kwargs)
        except BaseException:
            touched.update(mutant_id for mutant_id, _ in pending)
            raise
        for mutant_id, wrong in pending:  # the arguments as they are: nothing changes them
            if not _answers_alike(wrong, (args, kwargs), answer, frozen=True):
                touched.add(mutant_id)
        return answer
    return compared


def _comparer(original: Callable[..., Any], wrongs: list[tuple[str, Callable[..., Any]]],
              touched: set[str], known_frozen: dict[int, object]) -> Callable[..., Any]:
    """The mutated run takes the reference's steps through a call whose wrong version gives
    the same answer and leaves its arguments as the original does: unchanged. Frozen
    arguments are handed to the wrong version as they are, mutable ones as a deep copy;
    opaque ones (conformance/mutants/values.py) are not handed over: the mutant runs."""
    @functools.wraps(original)
    def compared(*args: Any, **kwargs: Any) -> Any:
        pending = [(mutant_id, wrong) for mutant_id, wrong in wrongs if mutant_id not in touched]
        arguments = (args, kwargs)
        # The keyword dict is the call's own: only the values in it can be shared.
        found = values.kind((args, tuple(kwargs.values())), known_frozen) if pending else "frozen"
        if found == "opaque":
            touched.update(mutant_id for mutant_id, _ in pending)
            pending = []
        snapshot = arguments if found == "frozen" else _copy(arguments)
        try:
            answer = original(*args, **kwargs)
        except BaseException:
            touched.update(mutant_id for mutant_id, _ in pending)
            raise
        if snapshot is None or not values.alike(arguments, snapshot):
            touched.update(mutant_id for mutant_id, _ in pending)  # the original changed them
            return answer
        for mutant_id, wrong in pending:
            if not _answers_alike(wrong, snapshot if found == "frozen" else _copy(snapshot),
                                  answer, frozen=found == "frozen"):
                touched.add(mutant_id)
        return answer
    return compared


Arguments = tuple[tuple[Any, ...], dict[str, Any]]


def _copy(arguments: Arguments) -> Arguments | None:
    try:
        return copy.deepcopy(arguments)
    except Exception:  # not copyable: the mutant is run on the case
        return None


def _answers_alike(wrong: Callable[..., Any], arguments: Arguments | None, answer: Any, *,
                   frozen: bool) -> bool:
    if arguments is None:
        return False
    before = arguments if frozen else _copy(arguments)
    try:
        seen = wrong(*arguments[0], **arguments[1])
        return before is not None and values.alike(arguments, before) \
            and values.alike(seen, answer)
    except Exception:
        return False


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
        universal,
        workflow,
    )
    return (*history.MUTANTS, *budget.MUTANTS, *compaction.MUTANTS, *hooks.MUTANTS,
            *recovery.MUTANTS, *access.MUTANTS, *ports.MUTANTS, *workflow.MUTANTS,
            *paths.MUTANTS, *adapter.MUTANTS, *universal.MUTANTS)


__all__ = ["Mutant", "Patch", "Reach", "Verdict", "all_mutants", "applied", "judge", "reach_of"]
