"""The runtime process behind the stdio protocol (conformance/stdio.py): started in a session
of its own that ends with the harness, written to within the time limit the reads have, and
ended with every process it started (issue #35).

- **A harness killed** (SIGKILL, which no handler sees) takes its runtime along: the runtime
  is started with a parent-death signal (Linux ``PR_SET_PDEATHSIG``, SIGKILL), so it does not
  outlive the harness in its own session. Where the platform has none, the harness's own exits
  (success, failure, Ctrl-C, SIGTERM) still end it.
- **A write** to a runtime that stopped reading waits at most the time limit, as a read does:
  the pipe is written without blocking, in chunks, while the time lasts.
- **Its standard error is the log channel** (docs/stdio-protocol.md "Log"): read while the
  harness waits for an answer (a runtime that writes much there never blocks), each line kept
  for the report of the case whose request was out (:class:`Log`).
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
                            stderr=subprocess.PIPE, preexec_fn=_die_with_parent)


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


class Log:
    """The lines a runtime wrote on its standard error, the current request's apart: at most
    ``MAX_LINES`` of ``MAX_CHARS`` characters each are kept per request (the rest counted),
    bytes that are not UTF-8 shown as U+FFFD."""

    MAX_LINES = 200
    MAX_CHARS = 2000

    def __init__(self) -> None:
        self._partial = bytearray()
        self.lines: list[str] = []
        self.dropped = 0
        self.tail: list[str] = []
        """The last lines whatever request they came with (a broken runtime's words)."""

    def take(self) -> list[str]:
        """The current request's lines (and how many were dropped), and start afresh."""
        lines = self.lines + ([f"(and {self.dropped} more lines)"] if self.dropped else [])
        self.lines, self.dropped = [], 0
        return lines

    def feed(self, chunk: bytes) -> None:
        """Bytes read from the pipe; an empty chunk is its end (a last unended line counts).
        A line longer than the limit is cut, never held whole."""
        self._partial += chunk if chunk else b"\n" if self._partial else b""
        *whole, rest = self._partial.split(b"\n")
        self._partial = bytearray(rest[:4 * self.MAX_CHARS])
        for raw in whole:
            self._keep(raw.decode("utf-8", "replace").rstrip("\r")[:self.MAX_CHARS])

    def _keep(self, line: str) -> None:
        self.tail = [*self.tail[-9:], line]
        if len(self.lines) < self.MAX_LINES:
            self.lines.append(line)
        else:
            self.dropped += 1

    def drain(self, process: "subprocess.Popen[bytes]", wait: float = 0.0) -> None:
        """Read what the pipe holds now (within ``wait`` seconds), without blocking."""
        stderr = process.stderr
        if stderr is None or stderr.closed:
            return
        with selectors.DefaultSelector() as selector:
            selector.register(stderr, selectors.EVENT_READ)
            while selector.select(wait):
                if not self.read(stderr.fileno()):
                    return

    def read(self, descriptor: int) -> bool:
        """One read of the pipe; False at its end."""
        try:
            chunk = os.read(descriptor, 1 << 16)
        except OSError:
            chunk = b""
        self.feed(chunk)
        return bool(chunk)

    def said(self) -> str:
        """The last lines, for an error message; empty when there were none."""
        return "; its last log lines: " + " | ".join(self.tail) if self.tail else ""


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


__all__ = ["Log", "descendants", "end_all", "start", "write_within"]
