"""What the kill matrix's reach (:func:`ctxspec.conformance.mutants.reach_of`) needs to know
of the values a pure-core function is called with and answers: whether they can change, and
whether two answers are the same value (issue #20).

A call is judged by its arguments' *kind*:

- ``frozen``: built only of atoms (None, bools, numbers, strings, bytes, enums, UUIDs, times),
  tuples, frozensets and frozen dataclasses or pydantic models of them: nothing a function
  does can change them, so a mutant's wrong version may be asked with the very same values;
- ``mutable``: lists, dicts, sets or unfrozen dataclasses or models somewhere inside, but
  nothing else: the wrong version is asked with a deep copy;
- ``opaque``: anything else (an object of the shell, a callable, a port): asking the wrong
  version could act on the real run, so it is not asked and the mutant runs the case.
"""

import dataclasses
from collections.abc import Iterable
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from enum import Enum
from fractions import Fraction
from typing import Literal
from uuid import UUID

from pydantic import BaseModel

Kind = Literal["frozen", "mutable", "opaque"]
_RANK: dict[Kind, int] = {"frozen": 0, "mutable": 1, "opaque": 2}
_ATOMS = (type(None), bool, int, float, complex, str, bytes, Enum, UUID, Decimal, Fraction,
          date, datetime, time, timedelta)


def kind(value: object, known_frozen: dict[int, object] | None = None) -> Kind:
    """The kind of ``value`` (the most changeable of its parts). ``known_frozen``: objects
    already found frozen, by id, kept alive by the dict so that an id stays its object's; a
    frozen object cannot change, so a later call does not walk it again (the reach pass asks
    of the same records and states call after call)."""
    return _kind(value, {}, {} if known_frozen is None else known_frozen)


def _worst(kinds: Iterable[Kind]) -> Kind:
    worst: Kind = "frozen"
    for found in kinds:
        if found == "opaque":
            return found
        if _RANK[found] > _RANK[worst]:
            worst = found
    return worst


def _kind(value: object, seen: dict[int, Kind], known_frozen: dict[int, object]) -> Kind:
    if isinstance(value, _ATOMS) or id(value) in known_frozen:
        return "frozen"
    known = seen.get(id(value))
    if known is not None:
        return known
    seen[id(value)] = "opaque"  # a value inside itself: judged opaque while it is walked
    found: Kind
    if isinstance(value, tuple | frozenset):
        found = _worst(_kind(item, seen, known_frozen) for item in value)
    elif isinstance(value, list | set):
        found = _worst(("mutable", *(_kind(item, seen, known_frozen) for item in value)))
    elif isinstance(value, dict):
        found = _worst(("mutable", *(_kind(item, seen, known_frozen) for pair in value.items()
                                     for item in pair)))
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        frozen = value.__dataclass_params__.frozen  # type: ignore[attr-defined]
        found = _worst(("frozen" if frozen else "mutable", *(
            _kind(getattr(value, field.name), seen, known_frozen)
            for field in dataclasses.fields(value))))
    elif isinstance(value, BaseModel):
        frozen = bool(value.model_config.get("frozen"))
        found = _worst(("frozen" if frozen else "mutable",
                        *(_kind(item, seen, known_frozen) for item in value.__dict__.values())))
    else:
        found = "opaque"
    seen[id(value)] = found
    if found == "frozen":
        known_frozen[id(value)] = value
    return found


def alike(seen: object, expected: object) -> bool:
    """The same value: equal, and of the same type at every level (so ``1`` and ``1.0`` or
    ``True`` differ anywhere inside, and a list is not a tuple)."""
    if seen is expected:
        return True
    if type(seen) is not type(expected):
        return False
    if isinstance(seen, tuple | list):
        assert isinstance(expected, tuple | list)
        return len(seen) == len(expected) and all(map(alike, seen, expected))
    if isinstance(seen, dict):
        assert isinstance(expected, dict)
        return list(seen) == list(expected) and all(alike(seen[k], expected[k]) for k in seen)
    if dataclasses.is_dataclass(seen) and not isinstance(seen, type):
        return all(alike(getattr(seen, f.name), getattr(expected, f.name))
                   for f in dataclasses.fields(seen))
    if isinstance(seen, BaseModel):
        assert isinstance(expected, BaseModel)
        return alike(seen.__dict__, expected.__dict__)
    if isinstance(seen, set | frozenset):
        assert isinstance(expected, set | frozenset)
        return seen == expected and {type(x) for x in seen} == {type(x) for x in expected}
    return bool(seen == expected)
