"""The stdio protocol v2 (docs/stdio-protocol.md): a runtime in another language is driven as a
subprocess, one JSON object per line each way.

The harness sends ``{"protocol": "ctxspec-stdio", "version": 2, "op": "hello"}`` and the runtime
answers ``{"ok": true, "version": 2, "capabilities": [...]}``; then one ``{"op": "run", "case":
ID, "scenario": {...}, "store": DIR}`` per run a case or probe needs (the scenario with every
default filled in), answered ``{"ok": true, "trace": [...]}`` (the neutral trace as JSON) or
``{"ok": false, "error": "..."}``; finally ``{"op": "bye"}``. The runtime scripts the model,
tools and hooks from the scenario itself, exactly as the scenario document describes.

A runtime that dies at the scenario's ``crash`` says so (``"died": true``, its trace so far and
its ``world``) and exits; the harness starts the command again and sends ``{"op": "restart",
...}`` with the same scenario and store and the world echoed, and the new process answers the
rest of the trace. What the runtime writes on its standard error is its log: each request's
lines reach that case's report. A runtime of version 1 is still spoken to in version 1 (Q360).

Both sides distrust the other (docs/robustness.md): every read has a time limit and a line
limit, every message is validated against its published schema, and the harness ends the
runtime's process (and everything it started) on every way out.
"""

import contextlib
import json
import os
import selectors
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from typing import IO, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ctxspec.conformance.documents import (
    INTEGER,
    DocumentError,
    json_document,
    json_problem,
    validation_problems,
)
from ctxspec.conformance.driver import ReferenceDriver, run_scenario
from ctxspec.conformance.linear_trace import TraceFormatError, events_of, linear
from ctxspec.conformance.scenario import ScenarioError, filled_in, parse_scenario
from ctxspec.conformance.stdio_process import Log, descendants, end_all, start, write_within
from ctxspec.limits import shown
from ctxspec.reference.errors import ErrorCode
from ctxspec.reference.ports import ScriptExhausted

PROTOCOL = "ctxspec-stdio"
VERSION = 2
VERSIONS = (1, 2)
"""The versions this harness speaks: version 2 added ``case``, ``store``, the crash operation
(``died``, ``restart``) and the log; a runtime of version 1 is spoken to as before (Q360)."""
RESTARTS = 8
"""Deaths of one run at most: a scenario has one crash, so a runtime that dies more often is
broken (it is ended, and named)."""
READ_TIMEOUT = 60.0
"""Seconds the harness waits for each answer line by default (``--stdio-timeout``): the
reference answers the largest case in well under a second."""
STOP_CHECK = 0.25
"""Seconds at most between two calls of a driver's ``stop`` check while it waits for an
answer: a stop ends the wait with no delay a person notices, and the check costs nothing."""
MAX_LINE = 64 * 1024 * 1024
"""Bytes of one line either side reads at most by default (``--stdio-max-line``): the largest
trace of the suite is a few MB."""


class StdioRequest(BaseModel):
    """A harness message (spec/schemas/StdioRequest.json)."""

    model_config = ConfigDict(extra="forbid")

    protocol: Literal["ctxspec-stdio"]
    version: Annotated[Literal[1, 2], INTEGER]
    op: Literal["hello", "run", "restart", "bye"]
    scenario: dict[str, Any] | None = Field(default=None, description=(
        "with op run and restart: a scenario document (Scenario.json), every default filled "
        "in (version 2; a document the harness cannot read is sent as the case wrote it)"))
    case: str | None = Field(default=None, description=(
        "with op run and restart (version 2): the ID of the case the run is for, or "
        "probe:<capability> for a capability's probe"))
    store: str | None = Field(default=None, description=(
        "with op run and restart (version 2): an empty directory of this run alone, where the "
        "runtime keeps what must outlive its process; restart names the same one"))
    world: Any = Field(default=None, description=(
        "with op restart: the world of the died answer, unchanged"))


class StdioAnswer(BaseModel):
    """A runtime's answer (spec/schemas/StdioAnswer.json): ok, and per op its version and
    capabilities (hello), its trace (run) or an error."""

    model_config = ConfigDict(extra="allow")

    ok: bool
    version: int | None = None
    capabilities: list[str] | None = None
    trace: list[dict[str, Any]] | dict[str, Any] | None = Field(default=None, description=(
        "with op run or restart: the trace, a list of events or its linear form (trace_format "
        "2); with died, the events up to the death"))
    error: str | None = None
    code: ErrorCode | None = Field(default=None, description=(
        "with ok false: the code of the closed set, where one applies (SCENARIO_INVALID, "
        "STDIO_REQUEST_INVALID, a budget code)"))
    exhausted: bool | None = Field(default=None, description=(
        "with ok false: a scripted port ran out — the runtime asked for more calls than the "
        "scenario scripts; the harness reports the case failed, not error"))
    died: bool | None = Field(default=None, description=(
        "with ok true (version 2): the runtime died at the scenario's crash and exits now; "
        "the harness starts it again and sends restart"))
    world: Any = Field(default=None, description=(
        "with died: what outlives the runtime but is not its store — the scripted ports' "
        "places, the clock, the step the harness was performing — echoed on restart"))


class ProtocolError(RuntimeError):
    """The subprocess broke the protocol: wrong version, a malformed line, silence past the
    time limit, or it died."""


def parse_command(command: str | Sequence[str]) -> list[str]:
    """The argument vector of ``--stdio``; ``ValueError`` naming the problem when there is
    none (an empty command, an unclosed quote)."""
    if isinstance(command, str):
        try:
            argv = shlex.split(command)
        except ValueError as error:
            raise ValueError(f"--stdio {shown(command)}: {error}") from None
    else:
        argv = list(command)
    if not argv:
        raise ValueError("--stdio: the command is empty")
    return argv


class Stop:
    """Ctrl-C (SIGINT) and SIGTERM end a run, and the runtime's process on the way out. The
    handler raises at once; ``check`` raises again later, for the case where the interpreter
    dropped that first exception (raised inside a finalizer, it is only printed as ignored).
    The command installs one, and so does each worker process of ``--jobs``: a worker told to
    stop then leaves through its finalizers, which end its runtime."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self) -> None:
        self.signum: int | None = None
        self._replaced: dict[int, Any] = {}

    def install(self) -> None:
        """Handle both signals here (in the main thread)."""
        self._replaced = {signum: signal.signal(signum, self.came) for signum in self.SIGNALS}

    def restore(self) -> None:
        """Give both signals back to the handlers ``install`` replaced."""
        for signum, handler in self._replaced.items():
            signal.signal(signum, handler)

    def came(self, signum: int, frame: object) -> None:
        self.signum = signum
        self.check()

    def check(self) -> None:
        if self.signum == signal.SIGINT:
            raise KeyboardInterrupt
        if self.signum is not None:
            raise SystemExit(128 + self.signum)


class StdioDriver:
    """A driver behind a subprocess. It runs whole scenarios (the ports live in the other
    process), so the harness hands it each case's scenario and reads back the trace. A broken
    answer ends the process: later cases are reported error at once, never wait."""

    def __init__(self, command: str | Sequence[str], timeout: float = READ_TIMEOUT,
                 max_line: int = MAX_LINE, stop: Callable[[], None] = lambda: None) -> None:
        self.command = command if isinstance(command, str) else shlex.join(command)
        self.timeout, self.max_line = timeout, max_line
        self.stop = stop
        """Called on every pass of a wait for an answer, at least every STOP_CHECK seconds; it
        raises to end the wait. The command line's check that a stop signal came: the
        exception a signal handler raises is dropped when it lands in a finalizer (a generator
        collected just then), and the harness would otherwise wait out the whole time limit on
        a silent runtime."""
        self.broken: str | None = None
        self._waiting = False
        """A request is out and its answer not read (an interrupt came in between): the
        exchange is out of step, so closing kills rather than says bye."""
        self._buffer = bytearray()
        self.escaped: list[int] = []
        """Processes of the runtime that had left its session when it was ended (reported)."""
        self._family: list[int] = []
        """The runtime's descendants listed when it was asked to leave (see close)."""
        self.version = VERSION
        self.case: str | None = None
        """The case (or probe:<capability>) the runs are for now (harness.for_case)."""
        self.logs: dict[str | None, list[str]] = {}
        """Log lines by the case whose request was out (None: hello, bye, a run without one)."""
        self.process, self.log = self._launch()
        self.capabilities = self._hello()
        self.result: list[dict[str, Any]] = []

    def _launch(self) -> "tuple[subprocess.Popen[bytes], Log]":
        # A session of its own: ending it ends whatever the command started, too; and it
        # ends if the harness is killed (conformance/stdio_process.py).
        self._buffer = bytearray()
        return start(parse_command(self.command)), Log()

    def _hello(self) -> frozenset[str]:
        """The capabilities, in the newest version both sides speak: a runtime of version 1
        answers a version 2 hello with its own version, or refuses it (then it is greeted in
        version 1)."""
        try:
            hello = self._ask({"op": "hello"})
            if not hello.ok and self.version == VERSION:
                self.version = 1
                hello = self._ask({"op": "hello"})
            if hello.version in VERSIONS and hello.version != self.version and hello.ok:
                self.version = hello.version
            if hello.version != self.version:
                raise ProtocolError(f"{self.command!r} speaks stdio protocol version "
                                    f"{hello.version!r}; this harness speaks "
                                    f"{' and '.join(map(str, VERSIONS))}")
            if not hello.ok or hello.capabilities is None:
                raise ProtocolError(f"{self.command!r} answered hello without ok and its "
                                    "capabilities")
        except BaseException:
            self.kill()
            raise
        return frozenset(hello.capabilities)

    def _ask(self, message: dict[str, Any], case: str | None = None) -> StdioAnswer:
        if self.broken is not None:
            raise ProtocolError(f"the runtime is gone: {self.broken}")
        try:
            try:
                return self._exchange(message)
            finally:  # what it logged meanwhile, even on the way to a broken answer
                self.log.drain(self.process)
                lines = self.log.take()
                if lines:
                    self.logs.setdefault(case, []).extend(lines)
        except ProtocolError as error:
            self.broken = f"{error}{self.log.said()}"
            self.kill()
            raise ProtocolError(self.broken) from None

    def take_log(self, case: str | None) -> list[str]:
        """The lines the runtime logged while requests for ``case`` were out (once)."""
        return self.logs.pop(case, [])

    def _exchange(self, message: dict[str, Any]) -> StdioAnswer:
        stdin = self.process.stdin
        if stdin is None:
            raise ProtocolError("the subprocess has no pipes")
        # ASCII, as the server answers: valid UTF-8 whatever the scenario's text holds.
        line = json.dumps({"protocol": PROTOCOL, "version": self.version, **message}) + "\n"
        self._waiting = True
        problem = write_within(self.process, line.encode("ascii"), self.timeout, self.stop,
                               STOP_CHECK)
        if problem is not None:
            raise ProtocolError(f"{self.command!r} {problem}")
        answer = self._answer(self._read_line())
        self._waiting = False
        return answer

    def _read_line(self) -> bytes:
        """One line of the runtime's output, within the time limit and the line limit."""
        stdout = self.process.stdout
        if stdout is None:
            raise ProtocolError("the subprocess has no pipes")
        deadline = time.monotonic() + self.timeout
        end = self._buffer.find(b"\n")
        with selectors.DefaultSelector() as selector:
            selector.register(stdout, selectors.EVENT_READ)
            stderr = self.process.stderr
            if stderr is not None and not stderr.closed:
                selector.register(stderr, selectors.EVENT_READ, "log")
            while end < 0:  # each byte is looked at once: a long line costs linear time
                if len(self._buffer) > self.max_line:
                    raise ProtocolError(f"{self.command!r} wrote a line longer than "
                                        f"{self.max_line} bytes")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ProtocolError(f"{self.command!r} gave no answer within "
                                        f"{self.timeout:g} s")
                ready = selector.select(min(left, STOP_CHECK))
                self.stop()  # also between the bytes of a line that trickles in
                for key, _ in ready:
                    if key.data == "log" and not self.log.read(key.fd):
                        selector.unregister(key.fileobj)  # it closed its log: read no more
                if not any(key.data is None for key, _ in ready):
                    continue
                chunk = os.read(stdout.fileno(), 1 << 16)
                if not chunk:
                    raise ProtocolError(f"{self.command!r} closed its output (exit code "
                                        f"{self.process.poll()})")
                found = chunk.find(b"\n")
                end = -1 if found < 0 else len(self._buffer) + found
                self._buffer += chunk
        line = bytes(self._buffer[:end])
        del self._buffer[:end + 1]
        if len(line) > self.max_line:
            raise ProtocolError(f"{self.command!r} wrote a line longer than {self.max_line} "
                                "bytes")
        return line

    def _answer(self, line: bytes) -> StdioAnswer:
        """An answer validated whole against StdioAnswer.json: ``ok`` a boolean, ``version``
        an integer, ``capabilities`` names, ``trace`` objects — never coerced."""
        try:
            document = json_document(line, "answer")
            problem = json_problem(document, "answer")
            if problem is not None:
                raise DocumentError(problem)
            return StdioAnswer.model_validate_json(json.dumps(document), strict=True)
        except DocumentError as error:
            raise ProtocolError(f"{self.command!r} wrote {shown(line)}: {error}") from None
        except ValidationError as error:
            raise ProtocolError(f"{self.command!r} answered against StdioAnswer.json: "
                                f"{validation_problems(error, 'answer')}") from None

    def run_document(self, scenario: dict[str, Any]) -> list[dict[str, Any]]:
        """The trace of one run of ``scenario`` (for the case :attr:`case`), its defaults
        filled in; in version 2 across every death at its crash: the process ends, the command
        starts again and restarts on the run's store."""
        document, case = filled_in(scenario), self.case
        if self.version == 1:
            return self._events(self._ask({"op": "run", "scenario": document}, case))
        with tempfile.TemporaryDirectory(prefix="ctxspec-store-") as store:
            request: dict[str, Any] = {"op": "run", "case": case, "scenario": document,
                                       "store": store}
            events: list[dict[str, Any]] = []
            for _ in range(RESTARTS):
                answer = self._ask(request, case)
                if not (answer.ok and answer.died is True):
                    return events + self._events(answer)
                events += self._events(answer)
                self._restart(case)
                request = {**request, "op": "restart", "world": answer.world}
        self.broken = (f"{self.command!r} died {RESTARTS} times in one run (a scenario has "
                       "one crash)")
        self.kill()
        raise ProtocolError(self.broken)

    def _events(self, answer: StdioAnswer) -> list[dict[str, Any]]:
        if not answer.ok and answer.exhausted is True:
            raise ScriptExhausted(str(answer.error))
        if not answer.ok:
            code = f"{answer.code}: " if answer.code and answer.code not in str(answer.error) \
                else ""
            raise ProtocolError(f"the runtime failed the scenario: {code}{answer.error}")
        if answer.trace is None:
            raise ProtocolError("a run answer has no trace list")
        try:
            return events_of(answer.trace)
        except TraceFormatError as error:
            raise ProtocolError(f"the runtime's linear trace is malformed: {error}") from None

    def _restart(self, case: str | None) -> None:
        """After a died answer: the process must exit within the time limit (it is ended
        either way, with all it started); then the command starts again and must declare the
        same capabilities."""
        deadline = time.monotonic() + self.timeout
        while self.process.poll() is None and time.monotonic() < deadline:
            self.stop()
            time.sleep(0.01)
        alive = self.process.poll() is None
        self.log.drain(self.process)
        self.logs.setdefault(case, []).extend(self.log.take())
        self.kill()
        if alive:
            self.broken = (f"{self.command!r} answered died but was still running after "
                           f"{self.timeout:g} s")
            raise ProtocolError(self.broken)
        before = self.capabilities
        self.process, self.log = self._launch()
        self.capabilities = self._hello()
        if self.capabilities != before:
            self.broken = (f"{self.command!r} declared other capabilities after its restart: "
                           f"{sorted(self.capabilities ^ before)}")
            self.kill()
            raise ProtocolError(self.broken)

    def close(self) -> None:
        """Say bye, close its input and reap it; one that does not leave is killed. A runtime
        out of step (broken, or a request unanswered when an interrupt came) is killed at
        once."""
        if self.broken is not None or self._waiting:
            self.kill()
            return
        # Listed before bye: once the runtime has left, what it started is no longer its own.
        self._family = descendants(self.process.pid)
        try:  # a stop that comes while it says bye still ends the runtime
            if self.process.poll() is None:
                with contextlib.suppress(ProtocolError, OSError):  # it may already be gone
                    saved, self.timeout = self.timeout, min(self.timeout, 5.0)
                    self._ask({"op": "bye"})
                    self.timeout = saved
            if self.process.stdin is not None:
                with contextlib.suppress(OSError):
                    self.process.stdin.close()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=5)
        finally:
            self.kill()

    def kill(self) -> None:
        """End the runtime and every process of its session, then reap it; a process of
        the runtime that had left its session is ended too, and reported on stderr."""
        escaped = [pid for pid in end_all(self.process, self._family)
                   if pid not in self.escaped]
        self._family = []
        if escaped:
            self.escaped += escaped
            print(f"ctxspec: {self.command!r} left {len(escaped)} process(es) outside its "
                  f"session ({', '.join(map(str, escaped))}); ended them", file=sys.stderr)
        for pipe in (self.process.stdin, self.process.stdout, self.process.stderr):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()

    def __enter__(self) -> "StdioDriver":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class CutLine(str):
    """The start of a line longer than the line limit (the rest was drained unread)."""


def _request(line: str, max_line: int) -> StdioRequest:
    """A harness line validated whole against StdioRequest.json, or :class:`ValueError` with
    the field, the rule and the value."""
    if isinstance(line, CutLine) or len(line) > max_line:
        raise ValueError(f"a line longer than {max_line} characters")
    if any("\udc80" <= char <= "\udcff" for char in line):  # bytes decoding could not read
        raise ValueError("the line is not UTF-8")
    document = json_document(line, "request")
    # The scenario is a document of its own: parse_scenario refuses it with SCENARIO_INVALID.
    scenario = document.pop("scenario", None) if isinstance(document, dict) else None
    problem = json_problem(document, "request")
    if problem is not None:
        raise ValueError(problem)
    if scenario is not None and not isinstance(scenario, dict):
        raise ValueError(f"request.scenario: a scenario is a JSON object (got {shown(scenario)})")
    if isinstance(document, dict) and (document.get("protocol") != PROTOCOL
                                       or type(document.get("version")) is not int
                                       or document.get("version") not in VERSIONS):
        raise ValueError(f"expected protocol {PROTOCOL} version "
                         f"{' or '.join(map(str, VERSIONS))}")
    try:
        request = StdioRequest.model_validate_json(json.dumps(document), strict=True)
    except ValidationError as error:
        raise ValueError(validation_problems(error, "request")) from None
    request = request.model_copy(update={"scenario": scenario})
    if (request.op in ("run", "restart")) != (request.scenario is not None):
        raise ValueError("request.scenario: goes with op run and restart, and only with them")
    if request.version == 1 and (request.op == "restart" or request.case is not None
                                 or request.store is not None):
        raise ValueError("request: restart, case and store are of version 2")
    return request


def serve(lines: Iterator[str], out: IO[str], max_line: int = MAX_LINE) -> None:
    """The reference runtime over the protocol (``ctxspec stdio-driver``), versions 1 and 2:
    its store is in memory, so a crash restarts within the process and the run is answered
    whole (never ``died``, Q361)."""
    for line in lines:
        try:
            request = _request(line, max_line)
        except ValueError as error:  # DocumentError included
            _write(out, {"ok": False, "code": ErrorCode.STDIO_REQUEST_INVALID.value,
                         "error": str(error)})
            continue
        if request.op == "bye":
            _write(out, {"ok": True})
            return
        if request.op == "hello":
            _write(out, {"ok": True, "version": request.version,
                         "capabilities": sorted(ReferenceDriver.capabilities)})
            continue
        if request.op == "restart":  # its crashes restart within the process (Q361)
            _write(out, {"ok": False, "code": ErrorCode.STDIO_REQUEST_INVALID.value,
                         "error": "request.op: restart follows a died answer, and this "
                                  "runtime never dies: it restarts within its process"})
            continue
        _write(out, _run(request.scenario or {}))


def _run(scenario: dict[str, Any]) -> dict[str, Any]:
    try:
        return {"ok": True, "trace": _reference_trace(scenario)}
    except ScenarioError as error:
        return {"ok": False, "code": ErrorCode.SCENARIO_INVALID.value, "error": str(error)}
    except ScriptExhausted as error:
        return {"ok": False, "error": str(error), "exhausted": True}
    except Exception as error:  # the runtime broke on this scenario; the session goes on
        text = str(error)
        code = next((c.value for c in ErrorCode if text.startswith(f"{c.value}:")), None)
        return {"ok": False, "error": f"{type(error).__name__}: {text}",
                **({"code": code} if code else {})}


def _write(out: IO[str], answer: dict[str, Any]) -> None:
    # ASCII: no reader can split the line at U+2028 or U+0085, and no lone surrogate of a
    # refused request reaches a UTF-8 writer raw.
    out.write(json.dumps(answer) + "\n")
    out.flush()


def _reference_trace(document: dict[str, Any]) -> dict[str, Any]:
    """The reference's trace in its linear form (each message once; a harness expands it)."""
    driver = ReferenceDriver()
    run_scenario(parse_scenario(document), lambda: driver)
    trace: dict[str, Any] = json.loads(json.dumps(linear(driver.trace_events()), default=str))
    return trace


def read_lines(stream: IO[bytes], max_line: int = MAX_LINE) -> Iterator[str]:
    """Lines of a byte stream as text, never more than ``max_line`` bytes read into one: a
    longer line is drained and handed on cut (so it is refused by length), bytes that are not
    UTF-8 as surrogate escapes (refused as not UTF-8)."""
    while True:
        line = stream.readline(max_line + 1)
        if not line:
            return
        if len(line) > max_line and not line.endswith(b"\n"):
            while (rest := stream.readline(1 << 20)) and not rest.endswith(b"\n"):
                pass
            yield CutLine(line[:80].decode("utf-8", "replace"))
            continue
        yield line.rstrip(b"\n").decode("utf-8", "surrogateescape")


def main(max_line: int = MAX_LINE) -> None:
    serve(read_lines(sys.stdin.buffer, max_line), sys.stdout, max_line)


__all__ = ["MAX_LINE", "PROTOCOL", "READ_TIMEOUT", "VERSION", "VERSIONS", "ProtocolError",
           "StdioAnswer", "StdioDriver", "StdioRequest", "Stop", "parse_command", "read_lines",
           "serve"]
