"""Kept segments: a run of messages many requests of a Session send whole, and what each pass
over a request makes of it, kept with it (§4's older Runs; issue #35).

The older Runs of a Session (§4: every ended Run before the recent ones, shown as its inputs,
its final result and its terminal marker) are the same messages, in the same order, in every
request of the current Run, and in every later Run's but for the Run that joins them. A
projection that keeps that part (:class:`Segment`) marks each view built from it with where
the segment lies (:func:`mark`); each pass over a view — the estimate, the rendering, the
view hash, the protected-input check, §8's split — then makes its result for the segment's
messages once, keeps it with the segment (:meth:`Segment.memo`), and passes only over the
messages around it. When a Run joins the older ones the segment is extended
(:meth:`Segment.extended`) and each kept result is extended by the new messages alone, so a
request costs what it adds. The result is the one the plain pass gives: a pass uses a kept
part only where the plain pass's state at the segment's start is the state the kept part was
made from (for instance no adjusted tool call pending), and passes over the messages
otherwise.

A segment is a value: its items never change, and what it keeps is a function of its items
(and of the key's other parts), so keeping it is no state of the core.
"""

from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from ctxspec.reference.grown import Grown

T = TypeVar("T")
H = TypeVar("H")

Extend = Callable[[Any, tuple[Any, ...]], Any]
"""How a kept result of a segment becomes the result of the segment extended by some items:
``extend(kept, new_items)``."""


class Segment:
    """An immutable, non-empty run of items (view, rendered or prompt messages) and what
    passes made of it. Not a dataclass: two segments are the same kept part only when they
    are one object, and nothing of it is serialised."""

    __slots__ = ("_items", "_kept", "_run")

    def __init__(self, items: Iterable[Any]) -> None:
        self._run: Grown[Any] = items if isinstance(items, Grown) else Grown(items)
        """The items, sharing one list with the segments extended from this one: extending
        costs the new items, and a trace that keeps each request's (:attr:`backing` and a
        length) keeps each message once, however many Runs extended it (issue #35, Q530)."""
        self._items: tuple[Any, ...] | None = None
        self._kept: dict[object, tuple[Any, Extend | None]] = {}

    @property
    def items(self) -> tuple[Any, ...]:
        """The items as a tuple, made once for the segment (the passes copy it into each
        request's items: from a tuple that is a copy of memory, not an iteration)."""
        if self._items is None:
            self._items = tuple(self._run)
        return self._items

    @property
    def backing(self) -> list[Any]:
        """The list the items are the first ``len(self)`` of."""
        return self._run.backing

    def __len__(self) -> int:
        return len(self._run)

    def memo(self, key: object, make: Callable[[], T], extend: Extend | None = None) -> T:
        """What ``make`` gives for this segment under ``key`` (a pass's name and the other
        inputs its result depends on), made on first use, then kept; ``extend`` carries it
        to an extended segment (else the extended segment makes it again)."""
        kept = self._kept.get(key)
        if kept is not None:
            value: T = kept[0]
            return value
        value = make()
        self._kept[key] = (value, extend)
        return value

    def extended(self, items: tuple[Any, ...]) -> "Segment":
        """This segment followed by ``items``, with every kept result that can be extended
        extended by them alone."""
        if not items:
            return self
        longer = Segment(self._run.plus(*items))
        for key, (value, extend) in self._kept.items():
            if extend is not None:
                longer._kept[key] = (extend(value, items), extend)
        return longer


Pass = Callable[[Sequence[Any], dict[Any, Any]], list[Any]]
"""A pass over items that carries a state from item to item (for the view's passes: the
adjusted tool calls not answered yet), updating it in place."""


def around(items: tuple[Any, ...], at: int, segment: Segment, key: object,
           each: Pass) -> tuple[list[Any], Segment | None]:
    """``each`` over ``items`` with the segment at ``at`` taken from what it keeps: made once
    from the segment alone (from an empty state, the state it leaves kept with it) and used
    only where the state is empty at its start, as the plain pass would have it there. The
    result, and the kept segment of it (None when not used)."""
    state: dict[Any, Any] = {}
    out = each(items[:at], state)
    end = at + len(segment)
    if state:  # the segment's result depends on what came before it: pass over it
        return out + each(items[at:], state), None

    def make() -> tuple[Segment, dict[Any, Any]]:
        left: dict[Any, Any] = {}
        return Segment(each(segment.items, left)), left

    def extend(kept: tuple[Segment, dict[Any, Any]], new: tuple[Any, ...]
               ) -> tuple[Segment, dict[Any, Any]]:
        left = dict(kept[1])
        return kept[0].extended(tuple(each(new, left))), left

    made, left = segment.memo(key, make, extend)
    out.extend(made.items)
    state.update(left)
    return out + each(items[end:], state), made


def mark(holder: H, items: Sequence[Any], offset: int, segment: Segment | None) -> H:
    """``holder`` (a view, a rendered or an estimation request, §8's parts, whose items are
    ``items``) with ``segment`` marked at ``offset``, after checking that the items there are
    the segment's at both ends (every holder marked is made from the segment's items, so the
    ends catch a wrong segment or offset in O(1) where comparing each item cost a pass over
    the view per request, Q530); left unmarked otherwise."""
    if segment is not None and len(segment) and offset >= 0 and \
            offset + len(segment) <= len(items) and \
            items[offset] is segment.items[0] and \
            items[offset + len(segment) - 1] is segment.items[-1]:
        if hasattr(holder, "__pydantic_private__"):  # a model's private attribute
            setattr(holder, "_segment", (offset, segment))  # noqa: B010 (no attribute of H)
        else:  # a frozen dataclass's slot
            object.__setattr__(holder, "_segment", (offset, segment))
    return holder


def marked(holder: object) -> tuple[int, Segment] | None:
    """Where a segment lies among a request value's items, when one was marked."""
    found: tuple[int, Segment] | None = getattr(holder, "_segment", None)
    return found


def carried(new: H, new_items: Sequence[Any], old: object, shift: int) -> H:
    """``new`` marked with ``old``'s segment moved by ``shift`` items (``new`` was made from
    ``old``'s items with ``shift`` items put before them), when the items still match."""
    found = marked(old)
    if found is None:
        return new
    return mark(new, new_items, found[0] + shift, found[1])


__all__ = ["Pass", "Segment", "around", "carried", "mark", "marked"]
