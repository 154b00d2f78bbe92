"""Append-only sequences sharing their items with the sequence they grew from
(reference/grown.py, Q500): a value like a tuple, whatever later values of its lineage append."""

import copy
import pickle

import pytest

from ctxspec.reference.grown import Grown, grown


def test_a_grown_sequence_equals_and_hashes_as_the_tuple_of_its_items() -> None:
    items = grown((1, 2), 3, 4)
    assert items == (1, 2, 3, 4) and (1, 2, 3, 4) == items  # noqa: SIM300 (reflected ==)
    assert items != (1, 2, 3) and items != [1, 2, 3, 4]
    assert hash(items) == hash((1, 2, 3, 4))
    assert list(items) == [1, 2, 3, 4] and list(reversed(items)) == [4, 3, 2, 1]
    assert items[0] == 1 and items[-1] == 4 and items[1:3] == (2, 3) and items[::-2] == (4, 2)
    assert len(items) == 4 and 3 in items and 5 not in items
    with pytest.raises(IndexError):
        items[4]
    with pytest.raises(IndexError):
        items[-5]


def test_growing_a_value_again_never_changes_it_or_a_later_one() -> None:
    first = grown((), "a")
    second = first.plus("b")
    third = second.plus("c")
    # An older value grown on forks: neither it nor the lineage's newest sees the other's item.
    other = second.plus("x")
    assert first == ("a",) and second == ("a", "b")
    assert third == ("a", "b", "c") and other == ("a", "b", "x")
    assert list(third) == ["a", "b", "c"] and third[-1] == "c" and other[-1] == "x"
    assert third.plus("d") == ("a", "b", "c", "d") and third == ("a", "b", "c")


def test_a_grown_sequence_copies_and_pickles_as_its_items() -> None:
    items = grown(("a",), "b")
    assert copy.deepcopy(items) == ("a", "b") and copy.copy(items) == ("a", "b")
    again = pickle.loads(pickle.dumps(items))
    assert isinstance(again, Grown) and again == ("a", "b")
    assert repr(items) == "Grown(('a', 'b'))"
