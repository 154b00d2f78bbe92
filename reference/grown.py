"""Append-only sequences that share their items with the sequence they grew from (§2, §5: a
Session's inputs and deliveries only grow, in receive order; issue #35).

A Session's delivery book (:mod:`~ctxspec.reference.delivery_book`) is a value: each delivery
transition returns a new book. Its inputs and deliveries were tuples, so registering one input
copied every input the Session had received: 50,000 supplements to one question copied about
2.5 billion references and took minutes. A :class:`Grown` is the first ``len`` items of a list
shared by a lineage of values: appending to the newest value of a lineage appends to the list
(the time of the new items); appending to an older value copies its own items first, so no
value ever sees an item it did not have. Like a tuple it is immutable, equal to a tuple with
the same items and hashed like one.

A value that takes the first items of its lineage (:meth:`Grown.prefix`) and then the very
items that followed them there is that later value again, not a copy (:meth:`Grown.plus`):
the older Runs of one request are a prefix of the next Run's, so what each request shows
stays one lineage and two of them compare in O(1) (issue #35, Q530). :class:`GrownSet` is
the same for a set that only grows (the inputs an older part lists, Q530).
"""

import operator
from collections.abc import Hashable, Iterable, Iterator, Sequence, Set
from itertools import islice
from typing import Any, TypeVar, overload

T = TypeVar("T")
K = TypeVar("K", bound=Hashable)


class Grown(Sequence[T]):
    """An immutable sequence: the first ``len(self)`` items of a list that only later values
    of its lineage append to (Q500)."""

    __slots__ = ("_items", "_length")

    def __init__(self, items: Iterable[T] = ()) -> None:
        self._items: list[T] = list(items)
        self._length = len(self._items)

    def plus(self, *items: T) -> "Grown[T]":
        """This sequence followed by ``items`` (the time of ``items`` when this is the newest
        value of its lineage)."""
        shared = self._items
        if len(shared) != self._length:  # a later value grew on from this one
            end = self._length + len(items)
            if not (len(shared) >= end and all(map(operator.is_,
                                                   islice(shared, self._length, end), items))):
                shared = shared[:self._length]  # other items: fork
                shared.extend(items)
            # else the very items it grew on with: that later value
        else:
            shared.extend(items)
        grown: Grown[T] = Grown.__new__(Grown)
        grown._items, grown._length = shared, self._length + len(items)
        return grown

    def prefix(self, length: int) -> "Grown[T]":
        """The first ``length`` items (all when ``length`` is larger), sharing the list: O(1)."""
        if length < 0:
            raise ValueError(f"a prefix has a length >= 0, got {length}")
        part: Grown[T] = Grown.__new__(Grown)
        part._items, part._length = self._items, min(length, self._length)
        return part

    @property
    def backing(self) -> list[T]:
        """The list shared by the lineage: this value's items are its first ``len(self)``;
        a reader keeps (list, length) instead of a copy. Never appended to but by
        :meth:`plus`."""
        return self._items

    def __len__(self) -> int:
        return self._length

    @overload
    def __getitem__(self, at: int) -> T: ...

    @overload
    def __getitem__(self, at: slice) -> tuple[T, ...]: ...

    def __getitem__(self, at: int | slice) -> T | tuple[T, ...]:
        if isinstance(at, slice):
            start, stop, step = at.indices(self._length)
            if step == 1:  # the slice's own items: no copy of the whole list
                return tuple(self._items[start:stop])
            return tuple(self._items[:self._length][at])
        if not -self._length <= at < self._length:
            raise IndexError("Grown index out of range")
        return self._items[at if at >= 0 else self._length + at]

    def __iter__(self) -> Iterator[T]:
        return islice(self._items, self._length)

    def __reversed__(self) -> Iterator[T]:
        return (self._items[at] for at in range(self._length - 1, -1, -1))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Grown):
            return self._length == other._length and (
                self._items is other._items or self._items[:self._length] ==
                other._items[:other._length])
        if isinstance(other, tuple):
            return self._length == len(other) and tuple(self) == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"Grown({tuple(self)!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return Grown, (tuple(self),)


class GrownSet(Set[K]):
    """An immutable set that only grows: the first ``len(self)`` keys of a dict (key →
    the order it was added in) shared by a lineage, as :class:`Grown` shares a list, so
    adding keys to the newest value costs the keys added, and membership is O(1) (Q530)."""

    __slots__ = ("_length", "_order")

    def __init__(self, keys: Iterable[K] = ()) -> None:
        self._order: dict[K, int] = {}
        for key in keys:
            self._order.setdefault(key, len(self._order))
        self._length = len(self._order)

    def plus(self, keys: Iterable[K]) -> "GrownSet[K]":
        """This set with ``keys`` added (the time of ``keys`` when this is the newest value
        of its lineage)."""
        order = self._order
        if len(order) != self._length:  # a later value grew on from this one: fork
            order = {key: at for key, at in order.items() if at < self._length}
        for key in keys:
            order.setdefault(key, len(order))
        grown: GrownSet[K] = GrownSet.__new__(GrownSet)
        grown._order, grown._length = order, len(order)
        return grown

    def __contains__(self, key: object) -> bool:
        at = self._order.get(key)  # type: ignore[arg-type]  # any key may be asked
        return at is not None and at < self._length

    def __len__(self) -> int:
        return self._length

    def __iter__(self) -> Iterator[K]:
        return islice(self._order, self._length)

    def added_since(self, earlier: "GrownSet[K]") -> Iterator[K]:
        """The keys of this set that ``earlier`` lacks (by their order when this set grew
        from it: the time of those keys)."""
        if earlier._order is self._order and earlier._length <= self._length:
            return islice(self._order, earlier._length, self._length)
        return (key for key in self if key not in earlier)

    def __hash__(self) -> int:
        return hash(frozenset(self))

    def __repr__(self) -> str:
        return f"GrownSet({list(self)!r})"


def grown(items: Sequence[T], *more: T) -> Grown[T]:
    """``items`` followed by ``more``, as a :class:`Grown` (``items`` itself grown on when it
    is one)."""
    start = items if isinstance(items, Grown) else Grown(items)
    return start.plus(*more)


__all__ = ["Grown", "GrownSet", "grown"]
