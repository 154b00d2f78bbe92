"""Reading JSON documents from outside (scenarios, vector files, stdio lines) with one error
path: every problem named by the path of its field, the rule and the value (cut short), never
an exception of the parser (docs/robustness.md).

Python's ``json`` takes what the documents refuse — ``NaN``, integers of thousands of digits
(then raises ``ValueError`` past 4300), nesting deep enough to raise ``RecursionError``, lone
surrogates that no UTF-8 writer can store — so a document is read here first and checked whole
before a model validates it.
"""

import json
import os
import re
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationError

from ctxspec.limits import MAX_DEPTH, MAX_TOKENS, depth, shown
from ctxspec.reference.errors import ErrorCode

_SURROGATE = re.compile("[\ud800-\udfff]")


class DocumentError(ValueError):
    """A document that is not JSON we read, with the problem in words."""


class ScenarioError(ValueError):
    """A malformed scenario: every problem with the path of its field, after our code
    SCENARIO_INVALID, so a driver in any language can refuse it the same way."""

    def __init__(self, problems: str) -> None:
        super().__init__(f"{ErrorCode.SCENARIO_INVALID}: {problems}")


class Doc(BaseModel):
    """The base of every part of a scenario document (conformance/scenario.py,
    conformance/scripts.py): frozen, and refusing a field it does not define."""

    model_config = ConfigDict(frozen=True, extra="forbid")


def read_regular(path: Path, limit: int) -> bytes:
    """The bytes of a regular file, at most ``limit`` (DocumentError past it): a FIFO, a
    device or a socket is refused before anything is read, since reading one may never end
    (opened without blocking, so a FIFO with no writer does not hang the open either; issue
    #35). OSError for a file that cannot be opened."""
    descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        mode = os.fstat(descriptor).st_mode
        if not stat.S_ISREG(mode):
            kind = ("a FIFO" if stat.S_ISFIFO(mode) else "a directory" if stat.S_ISDIR(mode)
                    else "a device or socket")
            raise DocumentError(f"not a regular file ({kind}): only files are read")
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(descriptor, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(descriptor)
    if size > limit:
        raise DocumentError(f"larger than {limit} bytes")
    return b"".join(chunks)


def _refuse_constant(name: str) -> object:
    raise DocumentError(f"{name} is not a JSON number")


def json_document(text: str | bytes, what: str) -> object:
    """The JSON value of ``text`` (UTF-8 when bytes), or :class:`DocumentError`."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as error:
            raise DocumentError(f"{what}: not UTF-8 (byte {error.start})") from None
    try:
        return json.loads(text, parse_constant=_refuse_constant)
    except json.JSONDecodeError as error:
        raise DocumentError(f"{what}: not JSON ({error.msg} at line {error.lineno} column "
                            f"{error.colno})") from None
    except RecursionError:
        raise DocumentError(f"{what}: nested deeper than {MAX_DEPTH}") from None
    except DocumentError as error:
        raise DocumentError(f"{what}: {error}") from None
    except ValueError as error:  # an integer of more digits than int() converts
        raise DocumentError(f"{what}: {error}") from None


def _path(what: str, parts: tuple[object, ...]) -> str:
    return what + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in parts)


def json_problem(document: object, what: str) -> str | None:
    """The first thing in a JSON-ready value that no document may hold — nesting past
    ``MAX_DEPTH``, a lone surrogate, an integer beyond ±``MAX_TOKENS``, a float that is not
    finite, a value JSON cannot carry — with its path; None when there is none."""
    if depth(document) > MAX_DEPTH:
        return f"{what}: nested deeper than {MAX_DEPTH}"
    pending: list[tuple[object, tuple[object, ...]]] = [(document, ())]
    while pending:
        value, parts = pending.pop()
        if isinstance(value, str):
            if _SURROGATE.search(value):
                return f"{_path(what, parts)}: text holds a lone surrogate, not Unicode text"
        elif isinstance(value, bool) or value is None:
            continue
        elif isinstance(value, int):
            if abs(value) > MAX_TOKENS:
                return f"{_path(what, parts)}: integer beyond ±{MAX_TOKENS}: {shown(value)}"
        elif isinstance(value, float):
            if value != value or value in (float("inf"), float("-inf")):
                return f"{_path(what, parts)}: {value} is not a JSON number"
        elif isinstance(value, Mapping):
            for key, item in value.items():
                if not isinstance(key, str) or _SURROGATE.search(key):
                    return f"{_path(what, parts)}: key {shown(key)} is not Unicode text"
                pending.append((item, (*parts, key)))
        elif isinstance(value, list | tuple):
            pending.extend((item, (*parts, index)) for index, item in enumerate(value))
        else:
            return f"{_path(what, parts)}: {type(value).__name__} is not a JSON value"
    return None


def _integer(value: object) -> object:
    if type(value) is not int:  # a Literal compares by ==, so 1.0 and True would equal 1
        raise ValueError("a version is a JSON integer")
    return value


INTEGER = BeforeValidator(_integer)
"""Annotate a ``Literal`` of integers with this: the literal alone takes ``1.0`` and ``true``."""


def validation_problems(error: ValidationError, what: str) -> str:
    """Every problem pydantic found: the path of the field, the rule and the value seen."""
    problems = []
    for issue in error.errors():
        seen: Any = issue.get("input")
        value = "" if isinstance(seen, dict | list) or issue["type"] == "missing" \
            else f" (got {shown(seen)})"
        problems.append(f"{_path(what, tuple(issue['loc']))}: {issue['msg']}{value}")
    return "; ".join(problems)


__all__ = ["INTEGER", "DocumentError", "json_document", "json_problem", "validation_problems"]
