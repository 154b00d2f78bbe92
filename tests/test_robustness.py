"""Bad input gets a clear answer (docs/robustness.md): each class of input that once raised a
traceback, hung or was accepted against the documents, answered with exit 2, the field, the
rule and the value, and a code of the closed set where the design defines one."""

import dataclasses
import io
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
from uuid import uuid4

import pytest
from click.testing import CliRunner

from ctxspec.cli import main
from ctxspec.conformance.case import example
from ctxspec.conformance.driver import ReferenceDriver
from ctxspec.conformance.driver_config import agent_config
from ctxspec.conformance.estimator import ESTIMATORS
from ctxspec.conformance.harness import scenario_trace
from ctxspec.conformance.scenario import (
    ScenarioError,
    ScriptedHooks,
    ScriptedModel,
    ScriptedTools,
    Triggers,
    parse_scenario,
)
from ctxspec.conformance.stdio import StdioDriver, Stop, read_lines, serve
from ctxspec.conformance.vectors import VECTORS
from ctxspec.reference.ports import LogicalClock
from ctxspec.reference.runtime.restore import restore
from ctxspec.reference.runtime.runtime import (
    AccessDenied,
    AgentDeleted,
    AuditGrant,
    AuditGrants,
    HistoryCaller,
    ReferenceRuntime,
)
from ctxspec.reference.runtime.store import Store
from tests import processes


def cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(f"a traceback, not an answer: {result.exception!r}")
    return result.exit_code, result.output


def minimal(**changes: Any) -> dict[str, Any]:
    document: dict[str, Any] = {
        "scenario_version": 1, "name": "minimal", "agent": {"window": 4096},
        "steps": [{"ask": "hi"}, {"advance": True}], "model": {"business": [{"text": "ok"}]}}
    document.update(changes)
    return document


def replay_bytes(tmp_path: Path, data: bytes) -> tuple[int, str]:
    path = tmp_path / "scenario.json"
    path.write_bytes(data)
    return cli("replay", str(path))


def replay(tmp_path: Path, document: dict[str, Any]) -> tuple[int, str]:
    return replay_bytes(tmp_path, json.dumps(document).encode())


# --- ctxspec budget ------------------------------------------------------------------------

@pytest.mark.parametrize(("args", "words"), [
    (["--window", "\u0661\u0662\u0668K"], "is not a token count"),
    (["--window", "128_000"], "is not a token count"),
    (["--window", "9" * 5000], "is not a token count"),
    (["--window", "1" + "0" * 13], "is more than"),
    (["--window", "128K", "--trigger-ratio", "\u0660.\u0665"], "BUDGET_CONFIGURATION_INVALID"),
    (["--window", "128K", "--trigger-ratio", "0.8_0"], "BUDGET_CONFIGURATION_INVALID"),
    (["--window", "128K", "--trigger-ratio", "0." + "8" * 5000], "BUDGET_CONFIGURATION_INVALID"),
])
def test_budget_takes_ascii_digits_within_bounds_only(args: list[str], words: str) -> None:
    code, output = cli("budget", *args)
    assert code == 2 and words in output, output
    assert len(output) < 1000, "the refused value is cut short"


def test_budget_still_reads_plain_counts() -> None:
    code, output = cli("budget", "--json", "--window", " 128k ", "--trigger-ratio", ".5")
    assert code == 0, output
    assert json.loads(output)["window"] == 131_072


# --- ctxspec replay: the document -----------------------------------------------------------

@pytest.mark.parametrize(("data", "words"), [
    (b"\xff\xfe{}", "not UTF-8"),
    (b"[" * 100_000, "nested deeper"),
    (b'{"a": ' + b"9" * 5000 + b"}", "digits"),
    (b'{"a": NaN}', "not a JSON number"),
    (json.dumps(minimal(name="\ud800")).encode(), "lone surrogate"),
])
def test_replay_refuses_a_document_that_is_not_json_we_read(tmp_path: Path, data: bytes,
                                                             words: str) -> None:
    code, output = replay_bytes(tmp_path, data)
    assert code == 2 and "SCENARIO_INVALID" in output and words in output, output


@pytest.mark.parametrize("window", [True, "4096", 4096.0, 10**13])
def test_replay_takes_integers_only_as_numbers(tmp_path: Path, window: object) -> None:
    code, output = replay(tmp_path, minimal(agent={"window": window}))
    assert code == 2 and "scenario.agent.window" in output, output


def test_replay_refuses_an_invalid_budget_with_its_code_before_running(tmp_path: Path) -> None:
    code, output = replay(tmp_path, minimal(agent={"window": 100}))
    assert code == 2, output
    assert "BUDGET_CONFIGURATION_INVALID" in output and "scenario.agent.input_budget" in output


@pytest.mark.parametrize(("steps", "words"), [
    ([{"ask": "a"}, {"ask": "b"}, {"advance": True}], "steps[1]: ask while"),
    ([{"ask": "a"}, {"delete_agent": True}, {"advance": True}], "steps[2]: the Agent was deleted"),
])
def test_replay_refuses_steps_the_runtime_could_not_take(tmp_path: Path, steps: list[Any],
                                                         words: str) -> None:
    code, output = replay(tmp_path, minimal(steps=steps))
    assert code == 2 and "SCENARIO_INVALID" in output and words in output, output


@pytest.mark.parametrize(("item", "words"), [
    ({"context_patch": [{"target": "nonsense", "field": "text"}]}, "target 'nonsense'"),
    ({"context_patch": [{"target": "last", "field": "a"},
                        {"target": "last", "field": "b", "scope": "shared"}]}, "one scope"),
])
def test_a_bad_hook_item_is_refused_when_the_scenario_is_read(item: dict[str, Any],
                                                              words: str) -> None:
    document = minimal(hooks=[{"point": "model.pre_request", "items": [item]}])
    with pytest.raises(ScenarioError, match="SCENARIO_INVALID") as refused:
        parse_scenario(document)
    assert words in str(refused.value)


def test_a_named_target_missing_at_its_call_is_named(tmp_path: Path) -> None:
    document = minimal(hooks=[{"point": "model.pre_request", "items": [
        {"context_patch": [{"target": "first_assistant", "field": "text", "value": "x"}]}]}])
    code, output = replay(tmp_path, document)
    assert code == 2 and "'first_assistant' does not exist" in output, output


def test_the_projects_own_refusal_vectors_replay_to_a_usage_error(tmp_path: Path) -> None:
    refusals = [path for path in sorted(VECTORS.glob("*.json"))
                if "refusal" in json.loads(path.read_text("utf-8"))["expected"]]
    assert len(refusals) >= 4
    for path in refusals:
        vector = json.loads(path.read_text("utf-8"))
        code, output = replay(tmp_path, vector["scenario"])
        assert code == 2 and vector["expected"]["refusal"] in output, (path.name, output)


# --- the runtime ------------------------------------------------------------------------------

def test_a_stimulus_after_the_agent_was_deleted_is_refused_by_name() -> None:
    scenario = parse_scenario(example("tool-batch-hook"))
    triggers = Triggers(())
    runtime = ReferenceRuntime(agent_config(scenario.agent),
                               model=ScriptedModel(scenario.model, triggers),
                               tools=ScriptedTools(scenario.tools, triggers),
                               hooks=ScriptedHooks(scenario.hooks),
                               estimator=ESTIMATORS["chars"](), clock=LogicalClock())
    runtime.ask("Write the report and read my notes.")
    runtime.delete_agent()
    for stimulus in (runtime.advance, lambda: runtime.ask("again"),
                     lambda: runtime.supplement("more")):
        with pytest.raises(AgentDeleted, match="deleted"):
            stimulus()


# --- ctxspec vectors --replay ---------------------------------------------------------------

def _cut(vector: dict[str, Any], change: str) -> dict[str, Any]:
    """A copy of a real vector, damaged one way."""
    damaged: dict[str, Any] = json.loads(json.dumps(vector))
    if change == "expected empty":
        damaged["expected"] = {}
    elif change == "expected key deleted":
        del damaged["expected"]["run_endings"]
    elif change == "refusal empty":
        damaged["expected"] = {"refusal": ""}
    elif change == "refusal unknown":
        damaged["expected"] = {"refusal": "NOT_A_CODE"}
    elif change == "expected a list":
        damaged["expected"] = []
    elif change == "needs null":
        damaged["manifest"]["needs"] = None
    elif change == "needs a number":
        damaged["manifest"]["needs"] = 3
    elif change == "needs holds a number":
        damaged["manifest"]["needs"] = [3]
    elif change == "format true":
        damaged["manifest"]["format"] = True
    return damaged


DAMAGES = ["expected empty", "expected key deleted", "refusal empty", "refusal unknown",
           "expected a list", "needs null", "needs a number", "needs holds a number",
           "format true"]


@pytest.mark.parametrize("change", DAMAGES)
def test_a_damaged_vector_is_unread_with_the_reason(tmp_path: Path, change: str) -> None:
    from ctxspec.conformance.vectors import replay

    vector = json.loads((VECTORS / "ROW-02.json").read_text("utf-8"))
    (tmp_path / "damaged.json").write_text(json.dumps(_cut(vector, change)))
    [result] = replay(tmp_path, ReferenceDriver)
    assert result.status == "unread", (change, result)
    assert result.detail.startswith("vector"), result.detail
    code, output = cli("vectors", "--replay", str(tmp_path))
    assert code == 1 and "1 unread" in output, output


# --- ctxspec conformance --stdio: a misbehaving runtime --------------------------------------

FAKE = '''
import json, os, subprocess, sys, time
mode = sys.argv[1]
child = subprocess.Popen([sys.executable, "-S", "-c", "import time; time.sleep(120)"])
with open(sys.argv[2], "a") as pids:  # each runtime of a run in workers adds its own
    pids.write(f"{os.getpid()} {child.pid} ")
runs = 0
hello = {"ok": True, "version": 1, "capabilities": ["root_loop"]}
out = sys.stdout.buffer
for line in sys.stdin.buffer:
    op = json.loads(line)["op"]
    if op == "bye" and mode == "slow-bye":
        time.sleep(30)  # takes its time to leave
    if op == "bye":
        break
    runs += op == "run"
    if mode == "silent-hello" or (mode == "silent-run" and op == "run") \
            or (mode == "silent-second-run" and runs == 2):
        open(sys.argv[2] + ".silent", "w").close()  # the harness now waits on a silence
        time.sleep(120)
    answer = {"ok": True, "trace": []} if op == "run" else dict(hello)
    if op == "hello":
        if mode == "string-capabilities":
            answer["capabilities"] = "root_loop"
        elif mode == "version-true":
            answer["version"] = True
    if mode == "not-utf8":
        out.write(b"\\xff\\xfe\\n")
    elif mode == "long-line" and op == "run":
        out.write(b'{"ok": true, "trace": [], "pad": "' + b"x" * 3_000_000 + b'"}\\n')
    else:
        out.write(json.dumps(answer).encode() + b"\\n")
    out.flush()
'''


def _left_running(pids: Path) -> list[int]:
    """The fake runtime's processes still alive 5 s on (a process killed dies soon after, not
    at once)."""
    deadline = time.monotonic() + 5
    while True:
        alive = [int(pid) for pid in pids.read_text().split() if processes.alive(int(pid))]
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.05)


def fake_runtime(tmp_path: Path, mode: str) -> tuple[str, Path]:
    script = tmp_path / "fake_runtime.py"
    script.write_text(FAKE)
    pids = tmp_path / f"{mode}.pids"
    return f"{sys.executable} -S {script} {mode} {pids}", pids  # -S: no site-packages needed


@pytest.mark.parametrize(("mode", "words"), [
    ("silent-hello", "gave no answer within 0.5 s"),
    ("silent-run", "gave no answer within 3 s"),
    ("string-capabilities", "answer.capabilities"),
    ("version-true", "answer.version"),
    ("not-utf8", "not UTF-8"),
    ("long-line", "a line longer than 1048576 bytes"),
])
def test_a_misbehaving_runtime_is_ended_and_named(tmp_path: Path, mode: str,
                                                   words: str) -> None:
    command, pids = fake_runtime(tmp_path, mode)
    began = time.monotonic()
    # A silent run waits 3 s: the runtime's hello, its interpreter's start included, must come
    # first, even under load. A silent hello is silence however short the wait (a worker of
    # the test run idles through it).
    timeout = {"silent-hello": "0.5", "silent-run": "3"}.get(mode, "60")
    code, output = cli("conformance", "--stdio", command, "--stdio-timeout", timeout,
                       "--stdio-max-line", str(1 << 20), "--case", "ROW-02", "-v")
    assert time.monotonic() - began < 30, "the harness waited past its time limit"
    assert code == 1 and words in output, output
    assert not _left_running(pids), "the runtime or a process it started was left running"


@pytest.mark.parametrize("command", ["", "   ", '"unclosed'])
def test_an_unusable_stdio_command_is_a_usage_error(command: str) -> None:
    code, output = cli("conformance", "--stdio", command)
    assert code == 2 and "--stdio" in output, output


# --- ctxspec stdio-driver: every request against StdioRequest.json ---------------------------

HELLO = {"protocol": "ctxspec-stdio", "version": 1, "op": "hello"}


@pytest.mark.parametrize(("request_", "code", "words"), [
    ({**HELLO, "extra": "x" * 1000}, "STDIO_REQUEST_INVALID", "request.extra"),
    ({**HELLO, "version": 1.0}, "STDIO_REQUEST_INVALID", "version 1"),
    ({**HELLO, "version": True}, "STDIO_REQUEST_INVALID", "version 1"),
    ({**HELLO, "op": "run"}, "STDIO_REQUEST_INVALID", "request.scenario"),
    ({**HELLO, "scenario": minimal()}, "STDIO_REQUEST_INVALID", "request.scenario"),
    ({**HELLO, "op": "run", "scenario": minimal(name="\ud800")}, "SCENARIO_INVALID",
     "lone surrogate"),
    ({**HELLO, "op": "run", "scenario": minimal(steps=[{"ask": "\udfff"}, {"advance": True}])},
     "SCENARIO_INVALID", "lone surrogate"),
])
def test_the_stdio_server_refuses_a_request_with_a_code(request_: dict[str, Any], code: str,
                                                        words: str) -> None:
    out = io.StringIO()
    serve(iter([json.dumps(request_) + "\n", json.dumps(HELLO) + "\n"]), out)
    refused, hello = (json.loads(line) for line in out.getvalue().splitlines())
    assert refused["ok"] is False and refused["code"] == code and words in refused["error"], \
        refused
    assert hello["ok"] is True, "the session goes on"


def test_the_stdio_server_refuses_a_line_past_its_limit_and_goes_on() -> None:
    data = (json.dumps({**HELLO, "pad": "x" * 5000}) + "\n" + json.dumps(HELLO) + "\n"
            + "\xff not utf-8\n").encode("latin-1")
    out = io.StringIO()
    serve(read_lines(io.BytesIO(data), max_line=1024), out, max_line=1024)
    long, hello, bad = (json.loads(line) for line in out.getvalue().splitlines())
    assert long["code"] == "STDIO_REQUEST_INVALID" and "longer than 1024" in long["error"]
    assert hello["ok"] is True
    assert bad["code"] == "STDIO_REQUEST_INVALID" and "not UTF-8" in bad["error"]


# --- access ---------------------------------------------------------------------------------

def runtime_of(store: Store | None = None, seed: str | None = None,
               audit: AuditGrants | None = None, **agent: Any) -> ReferenceRuntime:
    scenario = parse_scenario(example("tool-batch-hook"))
    triggers = Triggers(())
    config = dataclasses.replace(agent_config(scenario.agent), **agent)
    return ReferenceRuntime(config, model=ScriptedModel(scenario.model, triggers),
                            tools=ScriptedTools(scenario.tools, triggers),
                            hooks=ScriptedHooks(scenario.hooks),
                            estimator=ESTIMATORS["chars"](), clock=LogicalClock(),
                            store=store, seed=seed, audit=audit)


def test_an_audit_read_needs_a_grant_in_the_agent_configuration() -> None:
    grants = AuditGrants.issue(["compliance", "auditor"])
    runtime = runtime_of(audit_readers=("compliance",), audit=grants)
    runtime.ask("Write the report and read my notes.")
    runtime.advance()
    session = runtime.session_id
    assert runtime.read_history(HistoryCaller(session, "audit", "compliance",
                                              grants.grant("compliance")))
    refused = [
        # a grant the runtime admits, for a reader the Agent does not name
        HistoryCaller(session, "audit", "auditor", grants.grant("auditor")),
        # another reader's grant, or none, whatever the caller says it is
        HistoryCaller(session, "audit", "auditor", grants.grant("compliance")),
        HistoryCaller(session, "audit", None), HistoryCaller(session, "audit", "compliance "),
    ]
    for caller in refused:
        with pytest.raises(AccessDenied):
            runtime.read_history(caller)
    ungranted = runtime_of(audit_readers=(), audit=grants)
    with pytest.raises(AccessDenied):
        ungranted.read_history(HistoryCaller(ungranted.session_id, "audit", "auditor",
                                             grants.grant("auditor")))


def test_an_audit_read_by_name_or_with_a_forged_grant_is_refused() -> None:
    # Issue #34: naming a reader the Agent grants is no credential, nor is a grant the caller
    # built itself or one another configuration issued; only the credential the runtime was
    # configured with is.
    grants = AuditGrants.issue(["compliance"])
    runtime = runtime_of(audit_readers=("compliance",), audit=grants)
    runtime.ask("Write the report and read my notes.")
    runtime.advance()
    session = runtime.session_id
    for forged in (None, AuditGrant("compliance"),
                   AuditGrants.issue(["compliance"]).grant("compliance")):
        with pytest.raises(AccessDenied, match="not authorised to read this history"):
            runtime.read_history(HistoryCaller(session, "audit", "compliance", forged))
    assert runtime.read_history(HistoryCaller(session, "audit", "compliance",
                                              grants.grant("compliance")))
    # A runtime built without grants admits no audit read, whatever its Agent names.
    bare = runtime_of(audit_readers=("compliance",))
    with pytest.raises(AccessDenied):
        bare.read_history(HistoryCaller(bare.session_id, "audit", "compliance",
                                        grants.grant("compliance")))


def test_a_scenario_without_the_grant_sees_its_audit_read_refused() -> None:
    document = example("tool-batch-hook")
    document["agent"]["audit_readers"] = []
    document["steps"] = [*document["steps"], {"read_history": {"kind": "audit"}},
                         {"read_history": {"kind": "role", "role": "root"}}]
    reads = [e for e in scenario_trace(ReferenceDriver(), document)
             if e["kind"] == "history_read"]
    assert [r["allowed"] for r in reads] == [False, True]


def test_restore_refuses_a_session_of_another_agent() -> None:
    store = Store()
    runtime_of(store, seed="mine").ask("Write the report and read my notes.")
    scenario = parse_scenario(example("tool-batch-hook"))
    triggers = Triggers(())
    other = dataclasses.replace(agent_config(scenario.agent), agent_id=uuid4())
    with pytest.raises(AccessDenied, match="another Agent"):
        restore(store, other, model=ScriptedModel(scenario.model, triggers),
                tools=ScriptedTools(scenario.tools, triggers), hooks=ScriptedHooks(()),
                estimator=ESTIMATORS["chars"](), clock=LogicalClock())


def test_default_identities_are_unique_per_runtime_and_a_seed_fixes_them() -> None:
    store = Store()
    first, second = runtime_of(store), runtime_of(store)
    assert first.session_id != second.session_id
    assert runtime_of(seed="s").session_id == runtime_of(seed="s").session_id


# --- the other commands' arguments ----------------------------------------------------------

@pytest.mark.parametrize("args", [
    ["vectors", "--replay", "/nonexistent/vectors"],
    ["trace", "--section", "\u0661"],
    ["trace", "--section", "1_0"],
    ["conformance", "--stdio-timeout", "nan", "--case", "ROW-02"],
    ["conformance", "--jobs", "0", "--case", "ROW-02"],
    ["conformance", "--jobs", "\u0662", "--case", "ROW-02"],
    ["conformance", "--jobs", "all", "--case", "ROW-02"],
    ["conformance", "--stdio", "/nonexistent/runtime", "--case", "ROW-02"],
    ["conformance", "--stdio", "/nonexistent/runtime", "--case", "NO-SUCH-CASE"],
    ["stdio-driver", "--max-line", "\u0661\u0660\u0662\u0664"],
    ["conformance", "--case", "ROW-02", "--report", "/nonexistent/report.jsonl"],
    ["conformance", "--case", "ROW-02", "--junit", "/nonexistent/report.xml"],
    ["conformance", "--case", "ROW-02", "--html", "/nonexistent/report.html"],
    ["replay", "--html", "/nonexistent/page.html",
     str(Path(__file__).parent.parent / "docs" / "examples" / "tool-batch-hook.json")],
    ["schemas", "--out", "/nonexistent/folder/schemas"],
])
def test_every_command_refuses_a_bad_argument_before_acting(args: list[str]) -> None:
    code, output = cli(*args)
    assert code == 2, output


def test_replaying_an_empty_directory_is_not_a_pass(tmp_path: Path) -> None:
    code, output = cli("vectors", "--replay", str(tmp_path))
    assert code == 2 and "no *.json vector files" in output, output


def test_the_stdio_server_process_answers_in_ascii_whatever_it_was_sent() -> None:
    lines = [json.dumps({"protocol": {"\u2028": "\ud800"}, "version": 1, "op": "hello"}),
             json.dumps({**HELLO, "op": "run", "scenario": minimal(name="\ud800")}),
             json.dumps({**HELLO, "op": "bye"})]
    done = subprocess.run([sys.executable, "-m", "ctxspec", "stdio-driver"], check=False,
                          input=("\n".join(lines) + "\n").encode(), capture_output=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-500:]
    answers = [json.loads(line) for line in done.stdout.split(b"\n") if line]
    assert done.stdout.isascii() and len(answers) == 3
    assert [a.get("code") for a in answers] == ["STDIO_REQUEST_INVALID", "SCENARIO_INVALID",
                                                None]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_stopping_the_harness_ends_the_runtime(tmp_path: Path, signum: int) -> None:
    command, pids = fake_runtime(tmp_path, "silent-run")
    harness = subprocess.Popen([sys.executable, "-m", "ctxspec", "conformance", "--stdio",
                                command, "--case", "ROW-02"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    try:
        # The runtime notes when it goes silent on a run: hello answered, the harness waits.
        silent, deadline = Path(f"{pids}.silent"), time.monotonic() + 60
        while not silent.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        harness.send_signal(signum)
        _, stderr = harness.communicate(timeout=30)
    finally:
        if harness.poll() is None:
            harness.kill()
            harness.wait()
    assert harness.returncode != 0 and b"Traceback" not in stderr, stderr[-500:]
    assert not _left_running(pids), "the runtime or a process it started was left running"


def stop_check() -> tuple[threading.Event, Callable[[], None]]:
    """A stop check like the command's, with no signal: it raises once the event is set."""
    stopped = threading.Event()

    def check() -> None:
        if stopped.is_set():
            raise KeyboardInterrupt

    return stopped, check


def test_a_stop_whose_exception_was_dropped_still_ends_the_wait(tmp_path: Path) -> None:
    # CPython drops an exception a signal handler raises inside a finalizer, so a stop can come
    # without an exception reaching the harness. The driver asks its stop check while it waits
    # (here the check alone says stop): the wait ends then, not at the 60 s time limit.
    command, pids = fake_runtime(tmp_path, "silent-run")
    stopped, check = stop_check()
    driver = StdioDriver(command, timeout=60, stop=check)
    try:
        threading.Timer(0.5, stopped.set).start()
        began = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            driver.run_document(minimal())
        assert time.monotonic() - began < 20, "the wait outlasted the stop"
    finally:
        driver.close()
    assert not _left_running(pids), "the runtime or a process it started was left running"


def test_the_command_asks_its_stop_check_while_the_runtime_is_silent(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The command's SIGINT handler here only records the signal, as if the exception it raises
    # had been dropped: the run must still end, by the check the stdio driver asks while it
    # waits (well before the 60 s time limit).
    monkeypatch.setattr(Stop, "came", lambda self, signum, frame: setattr(self, "signum", signum))
    command, pids = fake_runtime(tmp_path, "silent-run")
    silent = Path(f"{pids}.silent")

    def interrupt() -> None:
        deadline = time.monotonic() + 60
        while not silent.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        if silent.exists():  # the command waits, its handler in place: never pytest's
            os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=interrupt, daemon=True).start()
    began = time.monotonic()
    result = CliRunner().invoke(main, ["conformance", "--stdio", command, "--case", "ROW-02"])
    assert isinstance(result.exception, SystemExit) and result.exit_code == 1, result.output
    assert "Aborted" in result.output and time.monotonic() - began < 30, result.output
    assert not _left_running(pids), "the runtime or a process it started was left running"


def test_a_stop_while_the_runtime_says_bye_still_ends_it(tmp_path: Path) -> None:
    # Closing says bye and waits for the runtime to leave; a stop then ends the wait, and the
    # runtime (slow to leave here) is ended all the same.
    command, pids = fake_runtime(tmp_path, "slow-bye")
    stopped, check = stop_check()
    driver = StdioDriver(command, timeout=60, stop=check)
    stopped.set()
    with pytest.raises(KeyboardInterrupt):
        driver.close()
    assert not _left_running(pids), "the runtime or a process it started was left running"


def test_stopping_a_run_in_workers_ends_every_runtime(tmp_path: Path) -> None:
    # With --jobs 2 each worker drives its own runtime (the cases need only root_loop, which
    # the fake declares); here each runtime answers its first run and
    # goes silent on its second. SIGTERM to the command's process group (as a CI job's timeout
    # sends it) must end every runtime: a worker leaves through its finalizers, which close its
    # runtime, rather than dying with a silent runtime still running.
    command, pids = fake_runtime(tmp_path, "silent-second-run")
    harness = subprocess.Popen(
        [sys.executable, "-m", "ctxspec", "conformance", "--stdio", command, "--jobs", "2",
         *(arg for case in ("ROW-02", "ROW-12", "ROW-13", "ROW-14") for arg in ("--case", case))],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        silent, deadline = Path(f"{pids}.silent"), time.monotonic() + 60
        while not silent.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert silent.exists(), "no worker's runtime went silent"
        os.killpg(harness.pid, signal.SIGTERM)
        harness.communicate(timeout=30)
    finally:
        if harness.poll() is None:
            os.killpg(harness.pid, signal.SIGKILL)
            harness.wait()
    assert harness.returncode != 0
    assert len(pids.read_text().split()) == 6, "the command's runtime and one per worker"
    assert not _left_running(pids), "a runtime or a process it started was left running"
