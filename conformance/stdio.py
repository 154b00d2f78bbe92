"""The stdio protocol v1 (docs/stdio-protocol.md): a runtime in another language is driven as a
subprocess, one JSON object per line each way.

The harness sends ``{"protocol": "ctxspec-stdio", "version": 1, "op": "hello"}`` and the runtime
answers ``{"ok": true, "version": 1, "capabilities": [...]}``; then one ``{"op": "run",
"scenario": {...}}`` per case, answered ``{"ok": true, "trace": [...]}`` (the neutral trace as
JSON) or ``{"ok": false, "error": "..."}``; finally ``{"op": "bye"}``. The runtime scripts the
model, tools and hooks from the scenario itself, exactly as the scenario document describes.
"""

import contextlib
import json
import shlex
import subprocess
import sys
from collections.abc import Iterator
from typing import IO, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ctxspec.conformance.driver import ReferenceDriver, run_scenario
from ctxspec.conformance.scenario import ScenarioError, parse_scenario
from ctxspec.reference.ports import ScriptExhausted

PROTOCOL = "ctxspec-stdio"
VERSION = 1


class StdioRequest(BaseModel):
    """A harness message (spec/schemas/StdioRequest.json)."""

    model_config = ConfigDict(extra="forbid")

    protocol: Literal["ctxspec-stdio"]
    version: Literal[1]
    op: Literal["hello", "run", "bye"]
    scenario: dict[str, Any] | None = Field(
        default=None, description="with op run: a scenario document (Scenario.json)")


class StdioAnswer(BaseModel):
    """A runtime's answer (spec/schemas/StdioAnswer.json): ok, and per op its version and
    capabilities (hello), its trace (run) or an error."""

    model_config = ConfigDict(extra="allow")

    ok: bool
    version: int | None = None
    capabilities: list[str] | None = None
    trace: list[dict[str, Any]] | None = None
    error: str | None = None
    exhausted: bool | None = Field(default=None, description=(
        "with ok false: a scripted port ran out — the runtime asked for more calls than the "
        "scenario scripts; the harness reports the case failed, not error"))


class ProtocolError(RuntimeError):
    """The subprocess broke the protocol: wrong version, a malformed line, or it died."""


class StdioDriver:
    """A driver behind a subprocess. It runs whole scenarios (the ports live in the other
    process), so the harness hands it each case's scenario and reads back the trace."""

    def __init__(self, command: str) -> None:
        self.command = command
        self.process = subprocess.Popen(shlex.split(command), stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True, encoding="utf-8")
        hello = self._ask({"op": "hello"})
        if hello.get("version") != VERSION:
            self.close()
            raise ProtocolError(f"{command!r} speaks stdio protocol version "
                                f"{hello.get('version')!r}; this harness speaks {VERSION}")
        self.capabilities = frozenset(str(c) for c in hello.get("capabilities", ()))
        self.result: list[dict[str, Any]] = []

    def _ask(self, message: dict[str, Any]) -> dict[str, Any]:
        stdin, stdout = self.process.stdin, self.process.stdout
        if stdin is None or stdout is None:
            raise ProtocolError("the subprocess has no pipes")
        stdin.write(json.dumps({"protocol": PROTOCOL, "version": VERSION, **message}) + "\n")
        stdin.flush()
        line = stdout.readline()
        if not line:
            raise ProtocolError(f"{self.command!r} closed its output (exit code "
                                f"{self.process.poll()})")
        try:
            answer = json.loads(line)
        except ValueError as error:
            raise ProtocolError(f"{self.command!r} wrote a line that is not JSON: "
                                f"{line[:80]!r}") from error
        if not isinstance(answer, dict):
            raise ProtocolError(f"{self.command!r} answered {answer!r}, not an object")
        return answer

    def run_document(self, scenario: dict[str, Any]) -> list[dict[str, Any]]:
        answer = self._ask({"op": "run", "scenario": scenario})
        if not answer.get("ok") and answer.get("exhausted") is True:
            raise ScriptExhausted(str(answer.get("error")))
        if not answer.get("ok"):
            raise ProtocolError(f"the runtime failed the scenario: {answer.get('error')}")
        trace = answer.get("trace")
        if not isinstance(trace, list):
            raise ProtocolError("a run answer has no trace list")
        return trace

    def close(self) -> None:
        """Say bye, close its input and reap it; one that does not leave is killed."""
        if self.process.poll() is None:
            with contextlib.suppress(ProtocolError, OSError):  # it may already be gone
                self._ask({"op": "bye"})
            if self.process.stdin is not None:
                with contextlib.suppress(OSError):
                    self.process.stdin.close()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def serve(lines: Iterator[str], out: IO[str]) -> None:
    """The reference runtime over the protocol (``ctxspec stdio-driver``)."""
    for line in lines:
        try:
            message = json.loads(line)
            if message.get("protocol") != PROTOCOL or message.get("version") != VERSION:
                raise ValueError(f"expected protocol {PROTOCOL} version {VERSION}")
            op = message.get("op")
            if op == "hello":
                answer: dict[str, Any] = {"ok": True, "version": VERSION,
                                          "capabilities": sorted(ReferenceDriver.capabilities)}
            elif op == "run":
                answer = {"ok": True, "trace": _reference_trace(message["scenario"])}
            elif op == "bye":
                out.write(json.dumps({"ok": True}) + "\n")
                out.flush()
                return
            else:
                raise ValueError(f"unknown op {op!r}")
        except (ValueError, KeyError, ScenarioError) as error:
            answer = {"ok": False, "error": str(error)}
        except ScriptExhausted as error:
            answer = {"ok": False, "error": str(error), "exhausted": True}
        except Exception as error:  # the runtime broke on this scenario; the session goes on
            answer = {"ok": False, "error": f"{type(error).__name__}: {error}"}
        out.write(json.dumps(answer, ensure_ascii=False) + "\n")
        out.flush()


def _reference_trace(document: dict[str, Any]) -> list[dict[str, Any]]:
    driver = ReferenceDriver()
    run_scenario(parse_scenario(document), lambda: driver)
    trace: list[dict[str, Any]] = json.loads(json.dumps(driver.trace(), default=str))
    return trace


def main() -> None:
    serve(iter(sys.stdin), sys.stdout)


__all__ = ["PROTOCOL", "VERSION", "ProtocolError", "StdioAnswer", "StdioDriver", "StdioRequest",
           "serve"]
