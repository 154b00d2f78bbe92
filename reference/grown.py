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
"""

from collections.abc import Iterable, Iterator, Sequence
from itertools import islice
from typing import Any, TypeVar, overload

T = TypeVar("T")


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
        if len(shared) != self._length:  # a later value grew on from this one: fork
            shared = shared[:self._length]
        shared.extend(items)
        grown: Grown[T] = Grown.__new__(Grown)
        grown._items, grown._length = shared, len(shared)
        return grown

    def __len__(self) -> int:
        return self._length

    @overload
    def __getitem__(self, at: int) -> T: ...

    @overload
    def __getitem__(self, at: slice) -> tuple[T, ...]: ...

    def __getitem__(self, at: int | slice) -> T | tuple[T, ...]:
        if isinstance(at, slice):
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


def grown(items: Sequence[T], *more: T) -> Grown[T]:
    """``items`` followed by ``more``, as a :class:`Grown` (``items`` itself grown on when it
    is one)."""
    start = items if isinstance(items, Grown) else Grown(items)
    return start.plus(*more)


__all__ = ["Grown", "grown"]
