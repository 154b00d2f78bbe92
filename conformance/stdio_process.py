"""The runtime process behind the stdio protocol (conformance/stdio.py): started in a session
of its own that ends with the harness, written to within the time limit the reads have, and
ended with every process it started (issue #35).

- **A harness killed** (SIGKILL, which no handler sees) takes its runtime along: the runtime
  is started with a parent-death signal (Linux ``PR_SET_PDEATHSIG``, SIGKILL), so it does not
  outlive the harness in its own session. Where the platform has none, the harness's own exits
  (success, failure, Ctrl-C, SIGTERM) still end it.
- **A write** to a runtime that stopped reading waits at most the time limit, as a read does:
  the pipe is written without blocking, in chunks, while the time lasts.
- **A grandchild that left the session** (it called ``setsid()``) is not reached by ending the
  session: the runtime's descendants are listed from ``/proc`` before it is ended, and each
  still alive outside the session is ended by its pid and reported (Q323).
"""

import contextlib
import ctypes
import ctypes.util
import os
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:  # runs in the child, between fork and exec
    os.setsid()
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def start(argv: Sequence[str]) -> "subprocess.Popen[bytes]":
    """The runtime in a session of its own, ended by the kernel if the harness dies."""
    return subprocess.Popen(list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            preexec_fn=_die_with_parent)


def write_within(process: "subprocess.Popen[bytes]", data: bytes, timeout: float,
                 stop: Callable[[], None], check: float) -> str | None:
    """Write ``data`` to the runtime's input within ``timeout`` seconds; the problem in words
    when it cannot (it stopped reading, or closed its input), else None. ``stop`` is asked
    every ``check`` seconds, as while reading."""
    stdin = process.stdin
    if stdin is None:
        return "the subprocess has no pipes"
    descriptor = stdin.fileno()
    os.set_blocking(descriptor, False)
    deadline = time.monotonic() + timeout
    view = memoryview(data)
    with selectors.DefaultSelector() as selector:
        selector.register(descriptor, selectors.EVENT_WRITE)
        while view:
            left = deadline - time.monotonic()
            if left <= 0:
                return f"took no input for {timeout:g} s ({len(view)} bytes left to write)"
            ready = selector.select(min(left, check))
            stop()
            if not ready:
                continue
            try:
                view = view[os.write(descriptor, view[:1 << 16]):]
            except BlockingIOError:
                continue
            except OSError as error:
                return f"stopped reading ({error.strerror}; exit code {process.poll()})"
    return None


def descendants(pid: int) -> list[int]:
    """The processes descended from ``pid`` (read from ``/proc``; none where there is none)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = entry.read_text().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(entry.parent.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def end_all(process: "subprocess.Popen[bytes]", listed: Sequence[int] = ()) -> list[int]:
    """End the runtime, its session and any descendant that left the session (those alive
    now, and ``listed`` ones, found while it still ran); the pids of those that had left it
    (to report)."""
    family = list(dict.fromkeys(
        [*listed, *(descendants(process.pid) if process.poll() is None else [])]))
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    escaped = []
    for pid in family:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if os.getsid(pid) != process.pid:
                escaped.append(pid)
                os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(OSError):
        process.kill()
    process.wait()
    return escaped


__all__ = ["descendants", "end_all", "start", "write_within"]
