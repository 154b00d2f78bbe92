"""A request of a long Session costs what it adds (issue #35, Q530): the Runs ended before it
are a prefix of one lineage (:class:`~ctxspec.reference.history.EndedRuns`), sliced, checked
and compared without a pass over every Run; the older part's inputs are a set that grows
(:class:`~ctxspec.reference.grown.GrownSet`); a kept segment's mark is checked at its ends.
Each result is compared with the plain computation over the same values (a list of Runs, a
frozenset, a tuple), and each O(1) claim is pinned by what the code reads, never by a clock."""

import itertools
from collections.abc import Sequence
from typing import Any, overload

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxspec.conformance.driver import ReferenceDriver, run_scenario
from ctxspec.conformance.scenario import Scenario
from ctxspec.reference.contracts import RunStatus
from ctxspec.reference.grown import Grown, GrownSet, grown
from ctxspec.reference.history import EndedRun, EndedRuns, first_runs, run_ids, select_history
from ctxspec.reference.runtime import history_source
from ctxspec.reference.segments import Segment, mark, marked
from tests.benchmarks.long_session import short_runs_session
from tests.builders import uuid


def _runs(numbers: Sequence[int]) -> list[EndedRun]:
    return [EndedRun(uuid(n), n, RunStatus.SUCCEEDED) for n in numbers]


@given(st.lists(st.integers(1, 40), unique=True).map(sorted), st.integers(0, 6))
def test_ended_runs_slice_as_the_design_slicing_of_a_list(numbers: list[int],
                                                          recent_n: int) -> None:
    plain = _runs(numbers)
    older, recent = select_history(EndedRuns(plain), recent_n)
    expected_older, expected_recent = select_history(plain, recent_n)
    assert list(older) == list(expected_older) and list(recent) == list(expected_recent)
    assert list(run_ids(older)) == [run.run_id for run in expected_older]
    assert list(first_runs(EndedRuns(plain), 2)) == plain[:2]


def test_ended_runs_refuse_a_run_out_of_order_as_select_history_does() -> None:
    runs = _runs([1, 3])
    with pytest.raises(ValueError, match="strictly increasing run_no order"):
        EndedRuns(runs).plus(_runs([2])[0])
    with pytest.raises(ValueError, match="strictly increasing run_no order"):
        EndedRuns(runs[::-1])
    with pytest.raises(ValueError, match="strictly increasing run_no order"):
        select_history(runs[::-1], 1)


def test_the_older_runs_of_a_request_are_a_prefix_of_the_lineage_not_a_copy() -> None:
    """Before Q530 a request copied, checked and mapped the run ids of every ended Run; the
    older Runs are now the first ones of the same lists, and a later Run's compare with an
    earlier Run's by the list they share."""
    ended = EndedRuns(_runs(range(1, 6)))
    older, _ = select_history(ended, 2)
    assert isinstance(older, EndedRuns) and older.ids == tuple(uuid(n) for n in (1, 2, 3))
    later = ended.plus(_runs([6])[0])
    assert later.ids.backing is older.ids.backing  # one lineage, no copy
    # The first three ids, grown by the very next id object of the lineage, are that
    # lineage's; grown by an equal id of another object, a copy of their own.
    again = grown(older.ids, later.ids[3])
    assert again.backing is later.ids.backing and again == later.ids[:4]
    copied = grown(older.ids, uuid(4))
    assert copied.backing is not later.ids.backing and copied == again


def test_a_prefix_grown_by_other_items_forks_and_leaves_the_lineage_alone() -> None:
    whole = grown(("a", "b"), "c")
    forked = whole.prefix(2).plus("x")
    assert forked == ("a", "b", "x") and whole == ("a", "b", "c")
    assert forked.backing is not whole.backing
    assert whole.prefix(9) == whole and whole.prefix(0) == ()
    with pytest.raises(ValueError, match="length >= 0"):
        whole.prefix(-1)


@given(st.lists(st.lists(st.integers(0, 30), max_size=6), max_size=6), st.data())
def test_a_grown_set_is_the_union_of_what_it_was_given(batches: list[list[int]],
                                                       data: Any) -> None:
    values, sets = [GrownSet[int]()], [frozenset[int]()]
    for batch in batches:  # grow any earlier value: the newest extends, an older one forks
        at = data.draw(st.integers(0, len(values) - 1))
        values.append(values[at].plus(batch))
        sets.append(sets[at] | frozenset(batch))
    for value, plain in zip(values, sets, strict=True):
        assert set(value) == plain and len(value) == len(plain)
        assert value == GrownSet(plain) and hash(value) == hash(plain)
        assert all((n in value) == (n in plain) for n in range(31))
    for earlier, later in itertools.pairwise(values):
        assert set(later.added_since(earlier)) == set(later) - set(earlier)


def test_a_kept_older_part_shares_the_lineage_of_the_ended_runs() -> None:
    """What makes :meth:`OlderPart.shows` O(1): the kept part's Runs are a prefix of the
    lineage the repository's ended Runs keep (before Q530 a tuple of its own, compared id by
    id with a new tuple on every request)."""
    seen: list[tuple[Any, Any]] = []
    original = history_source.StoredHistory.older_part

    def spy(self: history_source.StoredHistory, ended: Any, *args: Any) -> Any:
        part = original(self, ended, *args)
        seen.append((run_ids(ended), self._older.runs))
        return part
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(history_source.StoredHistory, "older_part", spy)
        driver = ReferenceDriver()
        run_scenario(Scenario.model_validate(short_runs_session(6)), lambda: driver)
    lengths = [len(kept) for _, kept in seen]
    assert lengths == [0, 0, 0, 1, 2, 3]  # recent_runs = 2: the older part grows a Run a Run
    for ids, kept in seen[3:]:
        assert isinstance(kept, Grown) and isinstance(ids, Grown)
        assert kept.backing is ids.backing and kept == ids[:len(kept)]


class _Counted(Sequence[Any]):
    """A sequence that notes every item and slice read of it."""

    def __init__(self, items: tuple[Any, ...]) -> None:
        self.items, self.reads = items, 0

    def __len__(self) -> int:
        return len(self.items)

    @overload
    def __getitem__(self, at: int) -> Any: ...

    @overload
    def __getitem__(self, at: slice) -> tuple[Any, ...]: ...

    def __getitem__(self, at: int | slice) -> Any:
        self.reads += 1 if isinstance(at, int) else len(self.items[at])
        return self.items[at]


class _Holder:
    _segment: Any = None


def test_a_mark_is_checked_at_the_segments_ends_only() -> None:
    """Before Q530 a mark compared every item of the segment (a pass over the older Runs per
    request and per pass); now its two ends, which still catch a wrong offset or segment."""
    items = tuple(object() for _ in range(50))
    segment = Segment(items[5:45])
    counted = _Counted(items)
    assert marked(mark(_Holder(), counted, 5, segment)) == (5, segment)
    assert counted.reads == 2
    for offset in (4, 6, 11, -1):  # a wrong place, or past either end: left unmarked
        assert marked(mark(_Holder(), items, offset, segment)) is None
    other = Segment((*items[5:44], object()))
    assert marked(mark(_Holder(), items, 5, other)) is None
    assert marked(mark(_Holder(), items[:44], 5, segment)) is None


def test_a_saved_answer_releases_its_frozen_request() -> None:
    """A request frozen for its attempts is held until its answer is saved, never for the rest
    of the Session: held, every request's whole rendered view stayed alive, and the 1,000-Run
    benchmark peaked at 498 MB instead of 192 MB (docs/benchmarks.md)."""
    driver = ReferenceDriver()
    run_scenario(Scenario.model_validate(short_runs_session(5)), lambda: driver)
    assert driver.runtime is not None
    nodes = driver.runtime.driver
    requests = [e for e in driver.trace() if e["kind"] == "model_request"]
    assert len(requests) == 5  # not vacuous: five requests were frozen and sent
    assert (nodes.frozen, nodes.outcomes, nodes.fits) == ({}, {}, {})
