"""Every input bounded in time (issue #35, docs/robustness.md): each test here hung, left a
process running or raised a traceback before its fix. None is timed: a watchdog only turns a
hang into a failure."""

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ctxspec.cli import main
from ctxspec.conformance.stdio import ProtocolError, StdioDriver
from tests import processes

WATCHDOG = 60.0
"""Seconds after which a call that should have answered counts as hung."""


def _within(call: Callable[[], Any]) -> Any:
    """``call()``'s result or exception, or a failure if it does not answer in WATCHDOG s."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["result"] = call()
        except BaseException as error:  # handed back to the test
            box["error"] = error

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(WATCHDOG)
    assert not worker.is_alive(), f"no answer within {WATCHDOG:g} s: a hang"
    if "error" in box:
        raise box["error"]
    return box.get("result")


def _cli(*args: str) -> tuple[int, str]:
    done = subprocess.run([sys.executable, "-m", "ctxspec", *args], capture_output=True,
                          text=True, timeout=WATCHDOG, check=False)
    return done.returncode, done.stdout + done.stderr


# --- special files -------------------------------------------------------------------------


def test_a_fifo_given_as_scenario_is_refused(tmp_path: Path) -> None:
    fifo = tmp_path / "scenario.json"
    os.mkfifo(fifo)
    code, output = _cli("replay", str(fifo))  # before: read forever
    assert code == 2 and "not a regular file (a FIFO)" in output, output


def test_a_fifo_in_a_vectors_folder_is_unread(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "vector.json")
    code, output = _cli("vectors", "--replay", str(tmp_path))
    assert code == 1 and "not a regular file (a FIFO)" in output and "1 unread" in output, \
        output


# --- the stdio runtime ---------------------------------------------------------------------

RUNTIME = '''
import json, os, subprocess, sys, time
mode, note = sys.argv[1], sys.argv[2]
hello = {"ok": True, "version": 1, "capabilities": ["root_loop"]}
if mode == "setsid-child":
    child = subprocess.Popen([sys.executable, "-S", "-c", "import time; time.sleep(120)"],
                             start_new_session=True)
    open(note, "w").write(str(child.pid))
else:
    open(note, "w").write(str(os.getpid()))
line = sys.stdin.buffer.readline()
sys.stdout.buffer.write(json.dumps(hello).encode() + b"\\n")
sys.stdout.buffer.flush()
if mode == "stops-reading":
    time.sleep(120)  # never reads the next request
for line in sys.stdin.buffer:
    if json.loads(line)["op"] == "bye":  # answered, as the protocol says, then it leaves
        sys.stdout.buffer.write(b'{"ok": true}\\n')
        sys.stdout.buffer.flush()
        break
    sys.stdout.buffer.write(b'{"ok": true, "trace": []}\\n')
    sys.stdout.buffer.flush()
'''


def _runtime(tmp_path: Path, mode: str) -> tuple[str, Path]:
    script = tmp_path / "runtime.py"
    script.write_text(RUNTIME)
    note = tmp_path / f"{mode}.pid"
    return f"{sys.executable} -S {script} {mode} {note}", note


def _gone_soon(pid: int) -> bool:
    deadline = time.monotonic() + 10
    while processes.alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    if processes.alive(pid):
        os.kill(pid, signal.SIGKILL)  # leave nothing behind, then fail
        return False
    return True


def test_a_runtime_that_stops_reading_is_given_the_read_time_limit(tmp_path: Path) -> None:
    """A request larger than the pipe holds, to a runtime that no longer reads: before, the
    harness's write blocked for good, whatever --stdio-timeout said."""
    command, _ = _runtime(tmp_path, "stops-reading")
    driver = StdioDriver(command, timeout=1)
    scenario = {"scenario_version": 1, "name": "big", "agent": {"window": 4096},
                "steps": [{"ask": "x" * 300_000}, {"advance": True}],
                "model": {"business": [{"text": "ok"}]}}
    try:
        with pytest.raises(ProtocolError, match="took no input for 1 s"):
            _within(lambda: driver.run_document(scenario))
    finally:
        driver.kill()


def test_a_killed_harness_takes_its_runtime_along(tmp_path: Path) -> None:
    """SIGKILL reaches no handler; the runtime has a session of its own, so a runtime busy
    with something else than reading its input (here: asleep) ran on before; the
    parent-death signal now ends it."""
    command, note = _runtime(tmp_path, "stops-reading")
    harness = subprocess.Popen([sys.executable, "-c", (
        "import sys, time\n"
        "from ctxspec.conformance.stdio import StdioDriver\n"
        f"driver = StdioDriver({command!r})\n"
        "print('ready', flush=True)\n"
        "time.sleep(120)\n")], stdout=subprocess.PIPE, text=True)
    try:
        assert harness.stdout is not None and harness.stdout.readline() == "ready\n"
        runtime = int(note.read_text())
        assert processes.alive(runtime)
        harness.kill()
        harness.wait()
        assert _gone_soon(runtime), "the runtime outlived its killed harness"
    finally:
        harness.kill()
        harness.wait()


def test_a_grandchild_that_left_the_session_is_ended_and_reported(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    command, note = _runtime(tmp_path, "setsid-child")
    driver = StdioDriver(command, timeout=10)
    grandchild = int(note.read_text())
    assert processes.alive(grandchild)
    driver.close()
    assert _gone_soon(grandchild), "a setsid() grandchild outlived the runtime"
    assert driver.escaped == [grandchild]
    assert f"({grandchild}); ended them" in capsys.readouterr().err


# --- paths and the Python API --------------------------------------------------------------


def test_a_symlink_loop_as_a_report_path_is_a_usage_error(tmp_path: Path) -> None:
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    for option in ("--report", "--junit", "--html"):
        outcome = CliRunner().invoke(main, ["conformance", "--case", "ROW-02", option,
                                            str(loop / "out.json")])
        assert outcome.exit_code == 2, (option, outcome.output, outcome.exception)
        assert "loop of symbolic links" in outcome.output, outcome.output


def test_schemas_out_on_a_symlink_loop_exits_2(tmp_path: Path) -> None:
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    outcome = CliRunner().invoke(main, ["schemas", "--out", str(loop)])
    assert outcome.exit_code == 2, (outcome.output, outcome.exception)


def test_replay_html_on_a_symlink_loop_exits_2(tmp_path: Path) -> None:
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    example = Path(__file__).resolve().parent.parent / "spec/examples/tool-batch-hook.json"
    outcome = CliRunner().invoke(main, ["replay", str(example), "--html",
                                        str(loop / "page.html")])
    assert outcome.exit_code == 2, (outcome.output, outcome.exception)


def test_a_runtime_stopped_by_a_failed_commit_refuses_the_next_stimulus() -> None:
    """docs/architecture.md: a refused commit stops the runtime. Before, the next advance() of
    a runtime whose APP-INPUT failed raised a KeyError from deep inside."""
    from ctxspec.conformance.driver import ReferenceDriver, run_scenario
    from ctxspec.conformance.scenario import Scenario
    from ctxspec.reference.runtime.store import CommitFailed, RuntimeStopped

    driver = ReferenceDriver()
    run_scenario(Scenario.model_validate({
        "scenario_version": 1, "name": "m", "agent": {"window": 4096},
        "steps": [{"observe_retention": True}], "model": {"business": [{"text": "ok"}]},
        "crash": {"commit": "APP-INPUT", "occurrence": 1, "when": "fails"}}), lambda: driver)
    runtime = driver.runtime
    assert runtime is not None
    with pytest.raises(CommitFailed):
        runtime.ask("hi")
    for stimulus in (runtime.advance, lambda: runtime.ask("again"), runtime.stop):
        with pytest.raises(RuntimeStopped, match="failed commit 'APP-INPUT'"):
            stimulus()


@pytest.mark.parametrize(("target", "words"), [
    ("nonsense", "target: a record id or one of question, first_assistant, last"),
    ("first_assistant", "SCENARIO_INVALID"),  # well formed, but no assistant record yet
])
def test_a_writer_step_with_a_bad_target_is_refused_as_scenario_invalid(
        tmp_path: Path, target: str, words: str) -> None:
    scenario = {"scenario_version": 1, "name": "w", "agent": {"window": 4096},
                "steps": [{"ask": "hi"}, {"write": {"target": target, "field": "text",
                                                    "value": "x"}}, {"advance": True}],
                "model": {"business": [{"text": "ok"}]}}
    path = tmp_path / "writer.json"
    path.write_text(json.dumps(scenario))
    outcome = CliRunner().invoke(main, ["replay", str(path)])
    assert outcome.exit_code == 2, (outcome.output, outcome.exception)
    assert "SCENARIO_INVALID" in outcome.output and words in outcome.output, outcome.output
