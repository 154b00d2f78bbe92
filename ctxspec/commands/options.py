"""Option types and checks the commands share (docs/robustness.md): counts of tokens, integers
and seconds read as ASCII text within bounds, and the folders a command will write to."""

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from ctxspec.limits import MAX_TOKENS, shown
from ctxspec.reference.budget import K

USAGE_ERROR = 2
_TOKENS = re.compile(r"[ \t]*([0-9]{1,16})[ \t]*([kK]?)[ \t]*")
"""ASCII digits only: ``int`` would take the digits of every script (``١٢٨``) and ``_``."""


class Tokens(click.ParamType[int]):
    """An integer count of tokens: ``131072`` or ``128K`` (1K = 1024, design §7)."""

    name = "tokens"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> int:
        if isinstance(value, int) and not isinstance(value, bool):  # a default
            return value
        match = _TOKENS.fullmatch(str(value))
        if not match:
            self.fail(f"{shown(value)} is not a token count (ASCII digits, optionally followed "
                      "by K for 1024 tokens, e.g. 128K)", param, ctx)
        number = int(match.group(1)) * (K if match.group(2) else 1)
        if number > MAX_TOKENS:
            self.fail(f"{shown(value)} is more than {MAX_TOKENS} tokens", param, ctx)
        return number


TOKENS = Tokens()


class Count(click.ParamType[int]):
    """An integer of ASCII digits within bounds: click's own ``int`` would take digits of other
    scripts, ``1_0`` and ``+1``."""

    name = "integer"

    def __init__(self, low: int, high: int) -> None:
        self.low, self.high = low, high

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> int:
        if isinstance(value, int) and not isinstance(value, bool):  # a default
            return value
        text = str(value).strip(" \t")
        if not re.fullmatch(r"[0-9]{1,12}", text) or not self.low <= int(text) <= self.high:
            self.fail(f"{shown(value)} is not an integer from {self.low} to {self.high} "
                      "(ASCII digits)", param, ctx)
        return int(text)


class Seconds(click.ParamType[float]):
    """Seconds as ASCII decimal text within bounds (``float`` would take ``nan``, ``1e3`` and
    digits of other scripts)."""

    name = "seconds"

    def __init__(self, low: float, high: float) -> None:
        self.low, self.high = low, high

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> float:
        if isinstance(value, float):  # a default
            return value
        text = str(value).strip(" \t")
        if not re.fullmatch(r"[0-9]{1,6}(\.[0-9]{1,6})?", text) \
                or not self.low <= float(text) <= self.high:
            self.fail(f"{shown(value)} is not a number of seconds from {self.low:g} to "
                      f"{self.high:g} (ASCII decimal text)", param, ctx)
        return float(text)


class Jobs(click.ParamType[int | None]):
    """How many worker processes: ``auto`` (None: :func:`workers_for` decides) or an integer
    of ASCII digits from 1 to 1024."""

    name = "jobs"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> int | None:
        if value is None or (isinstance(value, int) and not isinstance(value, bool)):
            return value
        text = str(value).strip(" \t")
        if text == "auto":
            return None
        if not re.fullmatch(r"[0-9]{1,4}", text) or not 1 <= int(text) <= 1024:
            self.fail(f"{shown(value)} is not 'auto' or a number of worker processes from 1 "
                      "to 1024 (ASCII digits)", param, ctx)
        return int(text)


CASES_PER_WORKER = 100
"""Under ``--jobs auto`` a run gets at most one worker per this many cases: a worker takes
about as long to start as forty of the reference's cases take to run, so a short run is
fastest in one process."""


def workers_for(jobs: int | None, cases: int) -> int:
    """The worker processes a run of ``cases`` cases uses: ``jobs`` if given, else one per
    core this process may use, at most one per :data:`CASES_PER_WORKER` cases, at least one."""
    if jobs is not None:
        return jobs
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") \
        else os.cpu_count() or 1
    return max(1, min(cores, cases // CASES_PER_WORKER))


def writable(folder: Path, option: str) -> None:
    """A file an option names must be writable in an existing folder: checked before anything
    runs, so a long run never ends in a report it cannot write."""
    if not folder.is_dir() or not os.access(folder, os.W_OK):
        raise click.UsageError(f"{option}: {str(folder)!r} is not a folder this user can write "
                               "to")


def folder_of(path: Path, option: str) -> Path:
    """The folder a file an option names will be written in, resolved; a path through a loop
    of symbolic links is a usage error (exit 2), never a traceback (issue #35)."""
    try:
        return path.resolve().parent
    except (RuntimeError, OSError) as error:  # Python 3.11 raises RuntimeError on a loop
        raise click.UsageError(f"{option}: {str(path)!r} goes through a loop of symbolic "
                               f"links ({type(error).__name__})") from None


def out_folder(path: Path, option: str) -> None:
    """A folder an option names to write into: an existing folder this user can write to, or
    a new one in such a folder; a file, a dangling link or a loop of symbolic links there is a
    usage error (exit 2)."""
    if os.path.lexists(path) and not path.is_dir():
        what = "a loop of symbolic links or a dangling link" if path.is_symlink() and not \
            path.exists() else "not a folder"
        raise click.UsageError(f"{option}: {str(path)!r} is {what}")
    writable(path if path.is_dir() else folder_of(path, option), option)


def write_page(path: Path, write: Callable[[], None]) -> None:
    """A page that cannot be written is said, with the reason, not raised (exit 1)."""
    try:
        write()
    except OSError as error:
        raise click.ClickException(f"--html {path}: {error.strerror or error}") from error
