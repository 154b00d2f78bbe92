"""What a case's check reads of a trace (docs/open-questions.md Q310): the trace wrapped so that
every field a check looks up is noted, each as a path naming the event and the message it
belongs to, e.g. ``model_request[compaction].view.messages[summary].body`` or
``run_ended[failed/COMPACTION_FAILED].status``. ``conformance/capabilities.py`` ties each
capability to the paths that show it (``EVIDENCE``); ``tests/test_case_rules.py`` holds every
case to reading, for each capability it needs, at least one of them.

Picking events out of the trace (``of``, ``requests`` in conformance/case.py) reads which
events of that kind (and purpose) there are — ``restarted``, ``model_request[compaction]`` —
but not their fields.

A dict of the trace is qualified by its ``kind`` and, where it has them, its ``purpose`` (a
model request), ``status`` (a Run's ending), ``point`` (a hook event) or ``phase`` (a
restart); a key a check only tests (``in``) or the ``kind`` it filters on is not a read.
"""

import re
from collections.abc import Callable, Iterable
from functools import cache
from typing import Any

QUALIFIERS = ("purpose", "status", "point", "phase")
"""The fields that, beside ``kind``, qualify a dict's path (the first one it has); a Run's
ending adds its error code, a compaction request after a fold's first chunk its chunk."""
_CHUNK = re.compile(r":chunk:(\d+)$")


class Reads:
    """The paths a check read, collected over one or more wrapped traces."""

    def __init__(self) -> None:
        self.paths: set[str] = set()

    def wrap(self, value: Any, path: str = "") -> Any:
        """``value`` (a trace, an event, a list or a dict inside one) with its reads noted."""
        if isinstance(value, dict):
            return _Watched(value, _qualified(path, value), self)
        if isinstance(value, list):
            items = [self.wrap(item, path) for item in value]
            return WatchedTrace(items, self) if not path else items
        return value


class WatchedTrace(list[Any]):
    """A whole trace whose events are watched; :func:`selected` notes a selection of it."""

    def __init__(self, events: list[Any], reads: Reads) -> None:
        super().__init__(events)
        self.reads = reads


def selected(trace: list[Any], tag: str, events: Iterable[Any] = ()) -> None:
    """Note that a check picked ``events``, those ``tag`` names (``model_request[compaction]``,
    ``restarted``), out of ``trace``: whether there are any, and how many, is then a read —
    the absence of a compaction request is what some rules are about — and so is each picked
    event's own path (``model_request[compaction chunk 2]``, ``restarted[tool_settled]``)."""
    if isinstance(trace, WatchedTrace):
        trace.reads.paths.add(tag)
        trace.reads.paths.update(event.path for event in events if isinstance(event, _Watched))


def _qualified(path: str, value: dict[str, Any]) -> str:
    kind = value.get("kind")
    if not isinstance(kind, str):
        return path
    qualifier = next((value[q] for q in QUALIFIERS if isinstance(value.get(q), str)), None)
    if kind in ("run_ended", "node_ended") and isinstance(value.get("error_code"), str):
        qualifier = f"{qualifier}/{value['error_code']}"  # run_ended[failed/COMPACTION_FAILED]
    chunk = _CHUNK.search(str(value.get("purpose_key", "")))
    if kind == "model_request" and chunk is not None and chunk.group(1) != "1":
        qualifier = f"{qualifier} chunk {chunk.group(1)}"  # a later chunk of a fold
    tag = kind if qualifier is None else f"{kind}[{qualifier}]"
    return tag if not path else f"{path}[{kind}]" if path.endswith("messages") else \
        f"{path}.{tag}"


class _Watched(dict[str, Any]):
    """A dict of the trace whose lookups are noted in ``reads`` (its values wrapped as read)."""

    def __init__(self, original: dict[str, Any], path: str, reads: Reads) -> None:
        super().__init__(original)
        self._path = path
        self._reads = reads

    @property
    def path(self) -> str:
        return self._path

    def _read(self, key: str) -> Any:
        value = super().__getitem__(key)
        if key != "kind":
            self._reads.paths.add(f"{self._path}.{key}" if self._path else key)
        return self._reads.wrap(value, f"{self._path}.{key}" if self._path else key)

    def __getitem__(self, key: str) -> Any:
        return self._read(key)

    def get(self, key: str, default: Any = None) -> Any:
        return self._read(key) if key in self else default

    def values(self) -> Any:
        return [self._read(key) for key in self]

    def items(self) -> Any:
        return [(key, self._read(key)) for key in self]

    def __eq__(self, other: object) -> bool:
        self.values()
        return dict(self) == other

    __hash__ = None


def read_paths(check: Callable[..., None], *traces: list[dict[str, Any]]) -> set[str]:
    """The paths ``check`` reads of ``traces`` (a case's trace; a relational case's trace and
    and trace), whatever it concludes: a failure of the check is the caller's concern."""
    reads = Reads()
    check(*(reads.wrap(trace) for trace in traces))
    return reads.paths


def matches(path: str, patterns: Iterable[str]) -> bool:
    """Whether ``path`` is one of ``patterns``, ``*`` standing for any run of characters (and
    nothing else special: brackets are the path's own)."""
    return any(_pattern(pattern).fullmatch(path) for pattern in patterns)


@cache
def _pattern(pattern: str) -> re.Pattern[str]:
    return re.compile(".*".join(re.escape(part) for part in pattern.split("*")))


__all__ = ["QUALIFIERS", "Reads", "WatchedTrace", "matches", "read_paths", "selected"]
