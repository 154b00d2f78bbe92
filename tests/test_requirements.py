"""Requirements that no other test pinned: behaviour of the reference runtime seen through the
Driver (the neutral trace, and the store where the statement is about what is persisted), and
the few statements about the reference's structure that its code can show.

Expected values are derived by hand from the design and the scenario; the character estimator
(one token per character, no overhead) keeps the numbers readable.
"""

import ast
import json
from collections.abc import Callable, Iterator, Mapping
from copy import deepcopy
from dataclasses import FrozenInstanceError, dataclass, field
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest

from ctxspec.catalogue import package_root
from ctxspec.conformance.case import example
from ctxspec.conformance.cases import by_id
from ctxspec.conformance.driver import Ports, ReferenceDriver, perform
from ctxspec.conformance.estimator import estimator_for
from ctxspec.conformance.scenario import (
    AUDITOR,
    ScriptedHooks,
    ScriptedModel,
    ScriptedTools,
    Triggers,
    parse_scenario,
)
from ctxspec.reference.budget import BudgetConfig
from ctxspec.reference.compaction import PROMPT_VERSION
from ctxspec.reference.contracts import (
    CompactionEpisode,
    ContextRecord,
    ContextSnapshot,
    MessageRole,
    MutationSourceKind,
    UserInputDelivery,
)
from ctxspec.reference.ports import (
    Complete,
    HookContext,
    HookReply,
    ModelCall,
    ModelOutcome,
)
from ctxspec.reference.runtime import trace as tr
from ctxspec.reference.runtime.runtime import REGISTRIES, AgentConfig, HistoryCaller
from ctxspec.reference.runtime.store import TABLES
from ctxspec.reference.snapshots import (
    ActivePointer,
    SwitchRefused,
    build_manifest,
    switch_active,
    view_with_snapshot,
)
from ctxspec.reference.view import ModelView, ViewKind, ViewMessage
from tests.purity import core_modules

REFERENCE = package_root() / "reference"


# --- driving a scenario, optionally through wrapped ports ----------------------------------------


@dataclass
class Recording:
    """A model port that passes every call to the scripted one and keeps what it was asked."""

    inner: ScriptedModel
    calls: list[ModelCall] = field(default_factory=list)
    usage: int | None = None
    """When set, every complete answer reports this many output tokens (actual usage)."""

    def call(self, request: ModelCall) -> ModelOutcome:
        self.calls.append(request)
        outcome = self.inner.call(request)
        if self.usage is not None and isinstance(outcome, Complete):
            return Complete(outcome.text, outcome.tool_calls, outcome.reasoning, self.usage)
        return outcome


def drive(document: Mapping[str, Any], *, usage: int | None = None,
          hooks: Callable[[ScriptedHooks], Any] | None = None
          ) -> tuple[ReferenceDriver, Recording]:
    """run_scenario with the model port recorded and, optionally, the hook port wrapped."""
    scenario = parse_scenario(dict(document))
    triggers = Triggers(scenario.triggers)
    model = Recording(ScriptedModel(scenario.model, triggers), usage=usage)
    scripted = ScriptedHooks(scenario.hooks)
    ports = Ports(model, ScriptedTools(scenario.tools, triggers),
                  hooks(scripted) if hooks else scripted, estimator_for(scenario, scenario.agent))
    driver = ReferenceDriver()
    driver.configure(scenario, ports)
    triggers.act = lambda step: perform(driver, step)
    for step in scenario.steps:
        perform(driver, step)
    return driver, model


def base(**agent: Any) -> dict[str, Any]:
    return {"scenario_version": 1, "name": "t", "steps": [],
            "agent": {"system_prompt": "sys", "window": 4000, "output_reserve": 400,
                      "safety_margin": 100, "estimator": "chars", **agent}}


def boundary() -> dict[str, Any]:
    """§12 row 4 at the trigger: W=5000, O=400, S=100 give B = 4500 and the trigger 3600; Run 2's
    request is "sys" (3) + Run 1's "a"*1000, "b"*1000 and its 24-character outcome + the
    1573-character question = 3600, so it compacts (one chunk, summary "SUMMARY")."""
    document = base(window=5000)
    document["steps"] = [{"ask": "a" * 1000}, {"advance": True}, {"ask": "Q" * 1573},
                         {"advance": True}]
    document["model"] = {"business": [{"text": "b" * 1000}, {"text": "done"}],
                         "compaction": [{"text": "SUMMARY"}]}
    return document


def texts(request: tr.ModelRequestSent) -> list[str]:
    return [m.text for m in request.view.messages]


def lines(request: tr.ModelRequestSent) -> list[tuple[str, str, str]]:
    return [(m.role.value, m.kind.value, m.text) for m in request.view.messages]


def ended(trace: tr.Trace) -> list[tuple[int, str, str | None]]:
    return [(e.run_no, e.status, e.error_code) for e in trace.of(tr.RunEnded)]


def audit(driver: ReferenceDriver) -> list[str]:
    """Every stored record's text as authorised audit reads it (§1, §11)."""
    runtime = driver.runtime
    assert runtime is not None
    return [str(raw.content.get("text", "")) for raw in
            runtime.read_history(HistoryCaller(runtime.session_id, "audit", AUDITOR,
                                               driver.audit.grant(AUDITOR)))]


# --- structure the code can show -----------------------------------------------------------------


def python_files(directory: Path) -> Iterator[Path]:
    return (path for path in sorted(directory.rglob("*.py")) if "mutants" not in path.parts)


def imported(path: Path) -> set[str]:
    modules: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Import):
            modules.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            modules.add(node.module)
    return modules


IO_MODULES = ("sqlite3", "os", "pathlib", "io", "socket", "subprocess", "urllib", "http",
              "shutil", "tempfile", "asyncio", "threading")


@pytest.mark.covers("CTX-3.1", "CTX-3.3")
def test_the_context_core_does_no_io_and_cannot_reach_the_store_or_the_model() -> None:
    # The core returns drafts, views and write sets; only the shell (reference/runtime) holds the
    # store, the commit coordinator and the model port, so the core can neither commit nor send.
    # Every module of the core, found by walking reference/ (tests/purity.py has the whole rule).
    for path in core_modules():
        modules = imported(path)
        assert not {m for m in modules if m.startswith("ctxspec.reference.runtime")}, path.name
        assert not {m for m in modules if m.split(".")[0] in IO_MODULES}, path.name


STORE_WRITES = frozenset({"execute", "executemany", "executescript", "put_blob", "put_text",
                          "_apply"})


@pytest.mark.covers("CTX-1.5", "CTX-1.7", "CTX-3.1", "CTX-3.11", "CTX-10.5")
def test_every_fact_is_written_by_the_one_commit_coordinator() -> None:
    # Outside the storage modules (store.py, where the CommitCoordinator lives, the schema it
    # creates and the writes it applies) nothing of the reference writes the store directly:
    # effective revisions, snapshots and checkpoints all go through a named commit, and no
    # module writes a checkpoint file of its own.
    writers: list[str] = []
    for path in python_files(REFERENCE):
        if path.parent.name == "runtime" and path.name in ("store.py", "schema.py",
                                                            "writes.py"):
            continue
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr in STORE_WRITES:
                writers.append(f"{path.name}: {node.attr}")
            if isinstance(node, ast.Name) and node.id == "open":
                writers.append(f"{path.name}: open")
    assert writers == []
    session = (REFERENCE / "runtime" / "session.py").read_text("utf-8")
    assert "self.coordinator.commit(" in session


@pytest.mark.covers("CTX-3.8")
def test_there_is_no_independently_committing_legacy_interface() -> None:
    legacy = {"apply_mutation", "commit_batch", "freeze_request"}
    found = [f"{path}: {node.name}" for directory in (REFERENCE, package_root() / "conformance")
             for path in python_files(directory)
             for node in ast.walk(ast.parse(path.read_text("utf-8")))
             if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
             and node.name in legacy]
    assert found == []


@pytest.mark.covers("CTX-2.15")
def test_a_context_record_has_no_second_message_dto_of_protocol_batch_or_time_fields() -> None:
    # protocol, batch_id and recorded_at are payload metadata or projection attributes: neither
    # the contract nor the stored row has them as fields of their own.
    extra = {"protocol", "batch_id", "recorded_at"}
    assert not extra & set(ContextRecord.model_fields)
    assert not extra & set(TABLES["records"].columns)
    # The stored row is the contract (doc) plus its content and keys, not another message shape.
    assert {"doc", "content"} <= set(TABLES["records"].columns)


@pytest.mark.covers("CTX-10.13")
def test_recovery_bundles_are_never_persisted() -> None:
    # Recovery reads the persisted checkpoints and per-item results; no table holds a runtime
    # checkpoint or recovery bundle DTO, and no such class is defined as a stored contract.
    for name in TABLES:
        assert "bundle" not in name and "runtime_checkpoint" not in name
    classes = {node.name for path in python_files(REFERENCE)
               for node in ast.walk(ast.parse(path.read_text("utf-8")))
               if isinstance(node, ast.ClassDef)}
    assert not {"RecoveryBundle", "RuntimeCheckpoint"} & classes


@pytest.mark.covers("CTX-3.13")
def test_the_outer_workflow_nodes_reach_context_only_through_the_runtime() -> None:
    # An outer node invokes an Agent (the runtime) or a capability; it does not import the
    # context core that prepares views and effective revisions.
    modules = imported(REFERENCE / "runtime" / "workflow.py")
    core = {f"ctxspec.reference.{name}" for name in ("effective", "view", "history", "snapshots",
                                                      "compaction")}
    assert not modules & core
    assert "ctxspec.reference.runtime.runtime" in modules


@pytest.mark.covers("CTX-3.23")
def test_a_mutation_source_kind_is_exactly_hook_runtime_or_user() -> None:
    assert {kind.value for kind in MutationSourceKind} == {"hook", "runtime", "user"}


@pytest.mark.covers("CTX-3.43")
def test_the_pre_call_registry_maps_the_payload_to_the_call_record_field() -> None:
    # The versioned registry says that the payload's arguments and the effective call record's
    # tool_call:<call_id>.arguments are one fact.
    registry = REGISTRIES["tool.pre_call"]
    assert registry.version == "1"
    [spec] = registry.fields
    assert (spec.context_key, spec.payload_path) == ("tool_call:{call_id}.arguments", "arguments")


@pytest.mark.covers("CTX-7.1")
def test_the_agent_configuration_is_frozen_and_every_request_of_a_session_uses_it() -> None:
    agent = AgentConfig(system_prompt="sys", budget=BudgetConfig(window=4000))
    with pytest.raises(FrozenInstanceError):
        agent.system_prompt = "changed"  # type: ignore[misc]
    document = example("supplements-across-runs")
    driver, _ = drive(document)
    figures = {(r.window, r.output_reserve, r.safety_margin, r.input_budget, r.trigger_threshold)
               for r in driver.raw_trace().model_requests()}
    assert len(figures) == 1


# --- hooks: asked once, committed, never a handle on the runtime's state -------------------------


@pytest.mark.covers("CTX-3.2", "CTX-3.12", "CTX-3.11", "CTX-3.17")
def test_a_hook_is_asked_once_per_call_and_its_change_is_a_committed_mutation() -> None:
    # tool-batch-hook: one pre-call chain per call (write, read). Committing the change and
    # re-reading the effective record do not pass the chain again.
    driver, _ = drive(example("tool-batch-hook"))
    trace = driver.raw_trace()
    assert [(e.point, e.stage) for e in trace.of(tr.HookCalled)] == [("tool.pre_call", "pre")] * 2
    # The change is a committed mutation of the role's context: source hook, its expected
    # revision the one it read, the revision it made the next.
    hooked = [row for row in driver.store.query("SELECT doc FROM mutations")
              if json.loads(row["doc"])["source_kind"] == "hook"]
    assert len(hooked) == 1
    mutation = json.loads(hooked[0]["doc"])
    assert mutation["committed_revision"] == mutation["base_revision"] + 1
    [executed] = [e for e in trace.of(tr.ToolExecuted) if e.name == "write"]
    assert executed.effective_arguments["path"] == "reports/a.md"


@dataclass
class Meddling:
    """A hook handler that writes into what it was given instead of answering with a patch."""

    inner: ScriptedHooks

    def registered(self, point: str) -> bool:
        return point == "tool.pre_call"

    def items(self, context: HookContext) -> tuple[HookReply, ...]:
        arguments = context.payload.get("arguments")
        if isinstance(arguments, dict):
            arguments["path"] = "/etc/passwd"
        return (HookReply(),)


@pytest.mark.covers("CTX-3.7")
def test_a_hook_that_writes_into_its_payload_changes_nothing() -> None:
    # A hook changes a call only by a validated patch; writing into the payload it reads never
    # reaches the handler or the effective record.
    document = base(tools=[{"name": "write"}])
    document["steps"] = [{"ask": "write it"}, {"advance": True}]
    document["model"] = {"business": [
        {"text": "", "tool_calls": [{"name": "write", "arguments": {"path": "a.md"}}]},
        {"text": "done"}]}
    document["tools"] = {"write": [{"text": "ok"}]}
    driver, _ = drive(document, hooks=Meddling)
    trace = driver.raw_trace()
    assert [e.effective_arguments for e in trace.of(tr.ToolExecuted)] == [{"path": "a.md"}]
    decision = next(m for m in trace.model_requests("business")[1].view.messages if m.tool_calls)
    assert json.loads(decision.tool_calls[0].arguments) == {"path": "a.md"}


def scenario_of(case_id: str) -> dict[str, Any]:
    """A copy of a conformance case's scenario (the case's own must stay as it is)."""
    document: dict[str, Any] = deepcopy(dict(by_id([case_id])[0].scenario))
    return document


@pytest.mark.covers("CTX-1.6", "CTX-3.89")
def test_a_request_names_the_one_revision_its_view_was_made_from() -> None:
    # ROW-15: before the second request a hook corrects the first decision. That request is
    # frozen at the revision the hook's mutation committed, and its view shows the value of
    # that revision; the first request names the revision before it.
    driver, _ = drive(scenario_of("ROW-15"))
    trace = driver.raw_trace()
    first, second = trace.model_requests("business")
    [context] = second.frozen_revisions
    hooked = [json.loads(row["doc"]) for row in driver.store.query("SELECT doc FROM mutations")]
    [mutation] = [m for m in hooked if m["source_kind"] == "hook"]
    assert mutation["context_id"] == context
    assert second.frozen_revisions[context] == mutation["committed_revision"]
    assert first.frozen_revisions[context] <= mutation["base_revision"]
    assert "first (as corrected by a hook)" in texts(second)
    assert "first (as corrected by a hook)" not in texts(first)


@pytest.mark.covers("CTX-3.33")
def test_record_ids_stay_when_the_view_is_compacted_and_the_summary_retired() -> None:
    # ROW-20: the first decision is in the requests before compaction, covered by the summary
    # in loop 3, and back (corrected by a hook that addressed it by its id) in loop 4 — with the
    # same record id throughout.
    driver, _ = drive(scenario_of("ROW-20"))
    business = driver.raw_trace().model_requests("business")
    before = next(m for m in business[1].view.messages if m.text == "A" * 1500)
    after = next(m for m in business[3].view.messages if m.text == "A, corrected")
    assert before.record_id is not None and before.record_id == after.record_id
    assert all(m.record_id != before.record_id for m in business[2].view.messages)


# --- the model gets the frozen request; results reach the Loop after post-processing -------------


@pytest.mark.covers("CTX-3.4")
def test_the_model_port_gets_exactly_the_frozen_request_on_every_attempt() -> None:
    # A first attempt breaks before any output; the second attempt of the same Operation sends
    # the same frozen request, and the port receives exactly the messages traced as sent.
    document = base()
    document["steps"] = [{"ask": "q"}, {"advance": True}]
    document["model"] = {"business": [{"fail": "reset"}, {"text": "ok"}]}
    driver, model = drive(document)
    sent = driver.raw_trace().model_requests("business")
    assert [(r.purpose_key, r.attempt) for r in sent] == [(sent[0].purpose_key, 1),
                                                          (sent[0].purpose_key, 2)]
    assert sent[0].view == sent[1].view
    for call, request in zip(model.calls, sent, strict=True):
        assert [(m.role, m.text) for m in call.messages] == \
            [(m.role.value, m.text) for m in request.view.messages]


@pytest.mark.covers("CTX-2.34")
def test_the_loop_takes_the_response_as_the_post_response_hook_left_it() -> None:
    # A post-response hook rewrites Run 1's answer before it is handed on: the Run's final
    # result, as the next question's history shows it, is the rewritten text.
    document = base()
    document["steps"] = [{"ask": "q1"}, {"advance": True}, {"ask": "q2"}, {"advance": True}]
    document["model"] = {"business": [{"text": "raw answer"}, {"text": "a2"}]}
    document["hooks"] = [{"point": "model.post_response", "ordinal": 1, "items": [
        {"payload_patch": [{"path": "text", "value": "checked answer"}]}]}]
    driver, _ = drive(document)
    trace = driver.raw_trace()
    assert lines(trace.model_requests("business")[1]) == [
        ("system", "system_prompt", "sys"), ("user", "user_ref", "q1"),
        ("assistant", "assistant", "checked answer"),
        ("system", "outcome", "[run 1 ended: succeeded]"), ("user", "user_ref", "q2")]


@pytest.mark.covers("CTX-2.36")
def test_the_final_answer_reaches_the_client_only_with_the_run_end() -> None:
    # The client gets lifecycle events; the answer is never streamed in one, and each Run's
    # last event is its end, after its last model request.
    document = example("supplements-across-runs")
    driver, _ = drive(document)
    trace = driver.raw_trace()
    answers = [m.text for r in trace.model_requests("business") for m in r.view.messages
               if m.kind.value == "assistant"]
    for event in trace.of(tr.ClientEvent):
        assert not any(answer and answer in event.detail for answer in answers)
    for run_end in trace.of(tr.RunEnded):
        events = [e for e in trace.of(tr.ClientEvent) if e.run_id == run_end.run_id]
        assert events[-1].event == "run_ended"


# --- history: the current Run, the actual process, originals kept --------------------------------


@pytest.mark.covers("CTX-4.2")
def test_the_current_run_is_whole_even_with_recent_runs_zero() -> None:
    # recent_runs = 0: Run 1 is older history (question, result, status), while Run 2's own
    # decision and tool result are in its second request — the current Run is not one of the
    # recent Runs to select.
    document = base(recent_runs=0, tools=[{"name": "t"}])
    document["steps"] = [{"ask": "q1"}, {"advance": True}, {"ask": "q2"}, {"advance": True}]
    document["model"] = {"business": [{"text": "a1"}, {"text": "", "tool_calls": [{"name": "t"}]},
                                      {"text": "a2"}]}
    document["tools"] = {"t": [{"text": "tool says hi"}]}
    driver, _ = drive(document)
    last = driver.raw_trace().model_requests("business")[-1]
    assert [(role, kind, text) for role, kind, text in lines(last)] == [
        ("system", "system_prompt", "sys"), ("user", "user_ref", "q1"),
        ("assistant", "assistant", "a1"), ("system", "outcome", "[run 1 ended: succeeded]"),
        ("user", "user_ref", "q2"), ("assistant", "assistant", ""),
        ("tool", "tool_result", "tool says hi")]


@pytest.mark.covers("CTX-4.9")
def test_recent_history_shows_effective_arguments_and_deny_states() -> None:
    # Run 1: write(a.md) moved to reports/a.md by a hook, rm denied. Run 2's request shows Run 1's
    # actual process: the decision with the effective path, write's result and rm's refusal.
    document = base(tools=[{"name": "write"}, {"name": "rm"}])
    document["steps"] = [{"ask": "q1"}, {"advance": True}, {"ask": "q2"}, {"advance": True}]
    document["model"] = {"business": [
        {"text": "", "tool_calls": [{"name": "write", "arguments": {"path": "a.md"}},
                                    {"name": "rm", "arguments": {"path": "/"}}]},
        {"text": "a1"}, {"text": "a2"}]}
    document["tools"] = {"write": [{"text": "wrote"}]}
    document["hooks"] = [
        {"point": "tool.pre_call", "ordinal": 1, "items": [
            {"payload_patch": [{"path": "arguments.path", "value": "reports/a.md"}]}]},
        {"point": "tool.pre_call", "ordinal": 2, "items": [{"decision": "deny"}]}]
    driver, _ = drive(document)
    last = driver.raw_trace().model_requests("business")[-1]
    decision = next(m for m in last.view.messages if m.tool_calls)
    assert [json.loads(c.arguments) for c in decision.tool_calls] == [{"path": "reports/a.md"},
                                                                     {"path": "/"}]
    results = [m.text for m in last.view.messages if m.kind.value == "tool_result"]
    assert results[0] == "wrote"
    refusal = json.loads(results[1])
    assert (refusal["status"], refusal["executed"]) == ("denied", False)


@pytest.mark.covers("CTX-1.13", "CTX-4.19")
def test_compaction_and_trimming_keep_every_original_text() -> None:
    # Compaction: Run 1's question and answer are summarised out of Run 2's request, and stay in
    # the records word for word.
    driver, _ = drive(boundary())
    after = driver.raw_trace().model_requests("business")[-1]
    assert "a" * 1000 not in texts(after) and "b" * 1000 not in texts(after)
    kept = audit(driver)
    assert "a" * 1000 in kept and "b" * 1000 in kept
    # Trimming: an older Run loses its tool process from the view, never from the records.
    driver, _ = drive(scenario_of("EX4-OLDER-RUN"))
    assert "docker docs" not in texts(driver.raw_trace().model_requests("business")[-1])
    assert "docker docs" in audit(driver)


@pytest.mark.covers("CTX-3.76")
def test_a_file_the_executor_writes_shares_none_of_its_messages() -> None:
    # The Executor's tool writes a workspace file the Planner could read; its private request,
    # tool result and the file's words never enter the Planner's requests or its history read.
    document: dict[str, Any] = {
        "scenario_version": 1, "name": "files",
        "agent": {"system_prompt": "plan", "window": 16384, "estimator": "chars",
                  "persistent_sandbox": True,
                  "executor": {"system_prompt": "execute", "tools": [{"name": "note"}]}},
        "steps": [{"ask": "go"}, {"advance": True}, {"ask": "and now?"}, {"advance": True},
                  {"read_history": {"kind": "role", "role": "root"}}],
        "model": {"business": [{"text": "", "tool_calls": [
            {"name": "delegate", "arguments": {"task": "take a note"}}]},
            {"text": "done"}, {"text": "still done"}],
            "executor": [{"text": "private thinking", "tool_calls": [{"name": "note"}]},
                         {"text": "noted"}]},
        "tools": {"note": [{"text": "note stored",
                            "workspace_writes": {"notes.md": "secret words"}}]}}
    driver, _ = drive(document)
    assert driver.workspace() == {"notes.md": "secret words"}
    trace = driver.raw_trace()
    for request in trace.model_requests("business"):
        if request.role == "root":
            assert not any(word in text for text in texts(request)
                           for word in ("private thinking", "note stored", "secret words"))
    assert "noted" in texts(trace.model_requests("business")[-1])
    [read] = driver.observed.of(tr.HistoryRead)
    assert read.allowed and "tool_result" not in read.message_kinds[:2]
    runtime = driver.runtime
    assert runtime is not None
    root = [str(raw.content.get("text", "")) for raw in
            runtime.read_history(HistoryCaller(runtime.session_id, "role", "root"))]
    assert not any("private thinking" in t or "note stored" in t for t in root)


# --- inputs: configuration apart, materialised, frozen late, receipts ----------------------------


@pytest.mark.covers("CTX-5.4")
def test_the_system_prompt_and_tool_schemas_are_configuration_not_inputs() -> None:
    driver, _ = drive(example("tool-batch-hook"))
    prompt = "You write reports."
    stored = [row["content"] for row in driver.store.query("SELECT content FROM records")]
    assert not any(prompt in content or '"properties"' in content for content in stored)
    assert driver.store.count("user_inputs") == 1
    assert json.loads(str(driver.store.query("SELECT config FROM agents")[0]["config"])
                      )["system_prompt"] == prompt
    for request in driver.raw_trace().model_requests("business"):
        assert lines(request)[0] == ("system", "system_prompt", prompt)


@pytest.mark.covers("CTX-5.11")
def test_a_request_is_frozen_after_its_hooks_compaction_and_the_window_check() -> None:
    # Run 2 of the boundary scenario with a pre-request hook: the hook decides, the episode
    # summarises, and only then is the question claimed (T_FREEZE) and the request sent.
    document = boundary()
    document["hooks"] = [{"point": "model.pre_request", "ordinal": 2, "items": [{}]}]
    driver, _ = drive(document)
    events = driver.raw_trace().events
    question = next(e.input_id for e in events if isinstance(e, tr.DeliveryChanged)
                    and e.state == "pending" and events.index(e) > 3)

    def at(match: Callable[[tr.TraceEvent], bool]) -> int:
        return next(i for i, e in enumerate(events) if match(e))

    hook = at(lambda e: isinstance(e, tr.HookDecided) and e.point == "model.pre_request")
    chunk = at(lambda e: isinstance(e, tr.ModelRequestSent) and e.purpose == "compaction")
    claim = at(lambda e: isinstance(e, tr.DeliveryChanged) and e.input_id == question
               and e.state == "claimed")
    sent = max(i for i, e in enumerate(events) if isinstance(e, tr.ModelRequestSent))
    assert hook < chunk < claim < sent
    # Still over the window after the summary: never frozen, so the question is never claimed.
    driver, _ = drive(example("compaction-three-chunks-window-exceeded"))
    deliveries = driver.raw_trace().of(tr.DeliveryChanged)
    last_question = deliveries[-1].input_id
    assert [d.state for d in deliveries if d.input_id == last_question] == ["pending"]


@pytest.mark.covers("CTX-5.21")
def test_the_first_output_receipt_is_stored_evidence_apart_from_client_events() -> None:
    driver, _ = drive(example("tool-batch-hook"))
    trace = driver.raw_trace()
    [row] = driver.store.query("SELECT doc FROM deliveries WHERE state = 'delivered'")
    delivery = UserInputDelivery.model_validate_json(str(row["doc"]))
    first = trace.model_requests("business")[0]
    assert delivery.operation_id == first.operation_id
    receipt = delivery.first_output_receipt_ref
    assert receipt is not None
    assert str(first.operation_id) in driver.store.text(receipt)  # evidence of that Operation
    event_ids = {str(e.run_seq) for e in trace.of(tr.ClientEvent)}
    assert receipt.digest not in event_ids


@pytest.mark.covers("CTX-5.22")
def test_receiving_a_supplement_is_announced_as_received_never_as_understood() -> None:
    # The receipt event comes when the input is stored, before any request carries it, so it
    # cannot mean the model read it; it says only what arrived.
    document = base()
    document["steps"] = [{"ask": "q"}, {"supplement": "also this"}, {"advance": True}]
    document["model"] = {"business": [{"text": "ok"}]}
    driver, _ = drive(document)
    events = driver.raw_trace().events
    [received] = [e for e in events if isinstance(e, tr.ClientEvent)
                  and e.event == "input_received"]
    first_request = next(e for e in events if isinstance(e, tr.ModelRequestSent))
    assert events.index(received) < events.index(first_request)
    assert "also this" in texts(first_request)
    assert received.detail == "supplement"


# --- tool results, budget figures ----------------------------------------------------------------


@pytest.mark.covers("CTX-6.19")
def test_the_unread_body_of_a_large_result_stays_readable_for_audit() -> None:
    # ROW-08: the model saw the first 4000 characters; audit reads the record with its
    # truncation, and the result_ref holds all 20000.
    driver, _ = drive(scenario_of("ROW-08"))
    runtime = driver.runtime
    assert runtime is not None
    auditor = HistoryCaller(runtime.session_id, "audit", AUDITOR, driver.audit.grant(AUDITOR))
    [dumped] = [raw for raw in runtime.read_history(auditor)
                if raw.record.message_kind == "tool_result"
                and isinstance(raw.content.get("truncation"), dict)]
    truncation = dumped.content["truncation"]
    assert isinstance(truncation, dict)
    ref = truncation["result_ref"]
    assert isinstance(ref, dict)
    body = "".join(f"row {n:05d}\n" for n in range(2000))
    assert runtime.blobs[str(ref["digest"])] == body
    assert len(str(dumped.content["text"])) == 4000


@pytest.mark.covers("CTX-7.21")
def test_reported_usage_never_changes_a_request() -> None:
    # The same Session with the model reporting a huge actual usage sends the same requests with
    # the same estimates.
    document = example("tool-batch-hook")
    plain, _ = drive(document)
    reported, _ = drive(document, usage=10**6)

    def sent(driver: ReferenceDriver) -> list[tuple[list[str], int, int]]:
        return [(texts(r), r.estimated_input_tokens, r.max_output_tokens)
                for r in driver.raw_trace().model_requests()]
    assert sent(reported) == sent(plain)


# --- compaction: one episode for the prepared operation, its own prompt, its own budget ----------


def row20_with_a_correction_in_loop_3() -> dict[str, Any]:
    """ROW-20, but the hook corrects the first decision in loop 3's pre-request chain — the
    loop that compacts. "Z" * 1500 keeps I at 3964 ≥ 3600."""
    document = scenario_of("ROW-20")
    document["hooks"] = [{"point": "model.pre_request", "ordinal": 3, "items": [
        {"context_patch": [{"target": "first_assistant", "field": "text",
                            "value": "Z" * 1500}]}]}]
    return document


@pytest.mark.covers("CTX-7.26", "CTX-7.27", "CTX-7.28")
def test_compaction_material_is_the_committed_effective_context_and_hooks_run_once() -> None:
    driver, _ = drive(row20_with_a_correction_in_loop_3())
    trace = driver.raw_trace()
    assert [r.purpose for r in trace.model_requests()] == [
        "business", "business", "compaction", "compaction", "business", "business"]
    material = "".join(text for r in trace.model_requests("compaction") for text in texts(r))
    assert "Z" * 1500 in material and "A" * 1500 not in material
    # One pre-request chain per business loop, none again for the compacted request.
    assert [e.point for e in trace.of(tr.HookCalled)] == ["model.pre_request"] * 4
    # The rebuilt request keeps the question and fits the hard window.
    third = trace.model_requests("business")[2]
    assert "go" in texts(third) and third.snapshot_id is not None
    assert third.estimated_input_tokens + third.max_output_tokens + third.safety_margin \
        <= third.window


@pytest.mark.covers("CTX-7.32")
def test_over_the_window_after_compaction_keeps_the_question_and_the_history() -> None:
    # The three-chunk example with a pre-request hook: Run 2 ends CONTEXT_WINDOW_EXCEEDED; its
    # chain was asked once, its question is still a record of it, and Run 1's records stay.
    document = example("compaction-three-chunks-window-exceeded")
    document["hooks"] = [{"point": "model.pre_request", "items": [{}]}]
    driver, _ = drive(document)
    trace = driver.raw_trace()
    assert ended(trace)[-1] == (2, "failed", "CONTEXT_WINDOW_EXCEEDED")
    assert len(trace.of(tr.HookCalled)) == 4 + 1  # Run 1's four loops, Run 2's one
    kinds = [row["message_kind"] for row in driver.store.query(
        "SELECT message_kind FROM records ORDER BY rowid")]
    assert kinds == ["user_ref", "assistant", "tool_result", "assistant", "tool_result",
                     "assistant", "tool_result", "assistant", "user_ref"]
    question = document["steps"][2]["ask"]
    assert question in audit(driver)


@pytest.mark.covers("CTX-8.1", "CTX-8.24")
def test_a_compaction_request_is_its_own_prompt_with_no_tools_and_never_compacted() -> None:
    driver, model = drive(example("compaction-three-chunks-window-exceeded"))
    trace = driver.raw_trace()
    chunks = [c for c in model.calls if c.purpose == "compaction"]
    assert len(chunks) == 3
    prompt = "You are a reports assistant."  # the example's business system prompt
    for call in chunks:
        assert call.tool_schemas == ()
        assert call.messages[0].role == "system" and prompt not in call.messages[0].text
        assert call.messages[0].text == chunks[0].messages[0].text  # the same prompt, whole
    # One episode, planned once; its own requests carry no compaction decision.
    planned = [s for s in trace.of(tr.CompactionStep) if s.step == "planned"]
    assert len(planned) == 1
    assert {r.compaction for r in trace.model_requests("compaction")} == {None}


@pytest.mark.covers("CTX-8.5", "CTX-8.6", "CTX-9.13", "CTX-9.3", "CTX-9.16", "CTX-1.7")
def test_the_episode_serves_the_prepared_operation_and_links_to_its_snapshot() -> None:
    driver, _ = drive(boundary())
    trace = driver.raw_trace()
    business = trace.model_requests("business")[-1]
    # The business Operation was prepared before the episode and sent only after it.
    events = trace.events
    chunk = next(e for e in events if isinstance(e, tr.ModelRequestSent)
                 and e.purpose == "compaction")
    assert not any(isinstance(e, tr.OperationState) and e.operation_id == business.operation_id
                   for e in events[:events.index(chunk)])
    [row] = driver.store.query("SELECT doc FROM episodes")
    episode = CompactionEpisode.model_validate_json(str(row["doc"]))
    assert episode.triggering_model_operation_id == business.operation_id
    assert (business.attempt, business.role) == (1, "root")
    [snapshot_row] = driver.store.query("SELECT doc FROM snapshots")
    snapshot = ContextSnapshot.model_validate_json(str(snapshot_row["doc"]))
    assert episode.result_snapshot_id == snapshot.snapshot_id == business.snapshot_id
    assert driver.store.text(snapshot.summary_ref) == "SUMMARY"
    assert snapshot.token_estimate == len("SUMMARY")  # one token per character
    assert snapshot.source_ranges and snapshot.source_effective_revisions
    runtime = driver.runtime
    assert runtime is not None
    assert (episode.release_id, episode.prompt_version) == (runtime.agent.release_id,
                                                            PROMPT_VERSION)


@pytest.mark.covers("CTX-8.7", "CTX-11.5")
def test_a_stop_or_the_deadline_during_compaction_starts_no_business_attempt() -> None:
    # Reference defect found here: the business request after the episode was sent although the
    # user had stopped the Run, or its deadline had passed, while the chunk was summarised.
    stopped = boundary()
    stopped["triggers"] = [{"on": {"purpose": "compaction", "ordinal": 1}, "do": {"stop": True}}]
    driver, _ = drive(stopped)
    trace = driver.raw_trace()
    assert [r.purpose for r in trace.model_requests()] == ["business", "compaction"]
    assert ended(trace) == [(1, "succeeded", None), (2, "stopped", None)]
    # Deadline 1 tick: Run 2 starts at tick 1 (Run 1's one model call); its chunk request takes
    # the clock to 2, so the deadline has passed when the episode ends.
    late = boundary()
    late["agent"]["run_deadline"] = 1
    driver, _ = drive(late)
    trace = driver.raw_trace()
    assert [r.purpose for r in trace.model_requests()] == ["business", "compaction"]
    assert ended(trace) == [(1, "succeeded", None), (2, "timed_out", None)]


@pytest.mark.covers("CTX-8.23")
def test_a_compaction_hook_cannot_forge_the_sources_or_the_cutoff() -> None:
    # The compaction request's hook point registers no field: patches of its sources or cutoff
    # are refused, and the chunk summarises the same material as without the hook.
    plain, _ = drive(boundary())
    forged = boundary()
    forged["hooks"] = [{"point": "compaction.pre_request", "items": [{"payload_patch": [
        {"path": "source_manifest", "value": []}, {"path": "cutoff", "value": 99}]}]}]
    driver, _ = drive(forged)
    trace = driver.raw_trace()
    assert [(d.decision, d.patch_valid, d.diagnostics) for d in trace.of(tr.HookDecided)] == [
        ("allow", False, ("FIELD_NOT_REGISTERED", "FIELD_NOT_REGISTERED"))]
    assert texts(trace.model_requests("compaction")[0]) == \
        texts(plain.raw_trace().model_requests("compaction")[0])
    assert ended(trace) == ended(plain.raw_trace())


@pytest.mark.covers("CTX-8.79")
def test_a_summary_claiming_the_episode_is_done_advances_nothing() -> None:
    # The model's answer is only a summary text: one that claims the remaining chunks are done
    # leaves the episode to ask for every planned chunk.
    document = example("compaction-three-chunks-window-exceeded")
    claims = {"text": '{"chunk_cursor": 3, "covered_through": "everything"}'}
    document["model"]["compaction"] = [claims, *document["model"]["compaction"][1:]]
    driver, _ = drive(document)
    assert len(driver.raw_trace().model_requests("compaction")) == 3


@pytest.mark.covers("CTX-8.12")
def test_a_snapshot_whose_sources_changed_is_not_activated_and_the_originals_return() -> None:
    def message(n: int, text: str) -> ViewMessage:
        return ViewMessage(role=MessageRole.ASSISTANT, kind=ViewKind.ASSISTANT, text=text,
                           record_id=UUID(int=n))
    covered = ModelView((message(1, "first"), message(2, "second")))
    context = UUID(int=100)
    manifest = build_manifest(covered.messages, {UUID(int=1): (context, 1),
                                                 UUID(int=2): (context, 2)}, {context: 1}, 100, 1)
    edited = ModelView((message(1, "first, corrected"), message(2, "second")))
    refused = switch_active(ActivePointer(None, 1), expected_active=None, lease_epoch=1,
                            new_snapshot_id=UUID(int=7), manifest=manifest, current_view=edited)
    assert isinstance(refused, SwitchRefused)
    view, used, _ = view_with_snapshot(edited, (UUID(int=7), manifest, "S"))
    assert used is None and view == edited  # the records as they are now, no summary


# --- recovery ------------------------------------------------------------------------------------


@pytest.mark.covers("CTX-9.42", "CTX-10.3")
def test_a_crash_after_the_snapshot_commit_goes_on_with_the_same_prepared_operation() -> None:
    # The summary is committed, the business request not yet sent: the takeover sends the
    # prepared Operation (not a new one, the snapshot does not count as the step done), with
    # the same messages, and asks neither the pre-request chain nor the compaction again.
    document = boundary()
    document["hooks"] = [{"point": "model.pre_request", "ordinal": 2, "items": [{}]}]
    plain, _ = drive(document)
    crashed, _ = drive({**document, "crash": {"commit": "SNAPSHOT_COMMITTED", "occurrence": 1,
                                              "when": "after"}})
    trace = crashed.raw_trace()
    assert len(trace.of(tr.Restarted)) == 1
    assert [r.purpose for r in trace.model_requests()] == ["business", "compaction", "business"]
    [row] = crashed.store.query("SELECT doc FROM episodes")
    episode = CompactionEpisode.model_validate_json(str(row["doc"]))
    last = trace.model_requests("business")[-1]
    assert episode.triggering_model_operation_id == last.operation_id
    assert (last.purpose_key, last.attempt) == (f"model:{last.operation_id}", 1)
    assert lines(last) == lines(plain.raw_trace().model_requests("business")[-1])
    assert len(trace.of(tr.HookCalled)) == 2  # one chain per loop, none again
    assert ended(trace) == [(1, "succeeded", None), (2, "succeeded", None)]


@pytest.mark.covers("CTX-10.8")
def test_after_a_takeover_the_old_summary_never_hides_a_committed_correction() -> None:
    # ROW-20 with a crash just before loop 4 is frozen (after the hook corrected a covered
    # record): the restored run re-materialises the covered records as they are now.
    document = {**scenario_of("ROW-20"),
                "crash": {"commit": "T_FREEZE", "occurrence": 4, "when": "before"}}
    driver, _ = drive(document)
    trace = driver.raw_trace()
    assert len(trace.of(tr.Restarted)) == 1
    fourth = trace.model_requests("business")[-1]
    assert (fourth.snapshot_id, fourth.compaction) == (None, "below_trigger")
    assert "A, corrected" in texts(fourth) and not any("SUM" in t for t in texts(fourth))


@pytest.mark.covers("CTX-10.1")
def test_checkpoints_hold_positions_and_ids_never_copies_of_messages() -> None:
    driver, _ = drive(example("tool-batch-hook"))
    words = ["Write the report and read my notes.", "wrote 6 bytes to reports/a.md",
             "ship on Friday", "Written to reports/a.md; your notes say: ship on Friday."]
    docs = [str(row["doc"]) for row in driver.store.query("SELECT doc FROM checkpoints")]
    assert docs
    assert not any(word in doc for doc in docs for word in words)
    loop = [json.loads(d) for d in docs if '"stage"' in d]
    assert loop and all("stage" in d and "loops" in d for d in loop)


@pytest.mark.covers("CTX-10.30", "CTX-10.31")
def test_a_new_session_starts_with_nothing_of_another() -> None:
    # Two Sessions of one Agent: the second one's request is its prompt and question only, and
    # a file the first one's tool left in a persistent workspace is not read into it.
    document = base(tools=[{"name": "save"}], persistent_sandbox=True)
    document["steps"] = [{"ask": "I prefer tabs"}, {"advance": True}]
    document["model"] = {"business": [{"text": "", "tool_calls": [{"name": "save"}]},
                                      {"text": "noted"}]}
    document["tools"] = {"save": [{"text": "saved", "workspace_writes": {"prefs.md": "tabs"}}]}
    first, _ = drive(document)
    assert first.workspace() == {"prefs.md": "tabs"}
    other = base()
    other["steps"] = [{"ask": "format this"}, {"advance": True}]
    other["model"] = {"business": [{"text": "ok"}]}
    second, _ = drive(other)
    [request] = second.raw_trace().model_requests()
    assert lines(request) == [("system", "system_prompt", "sys"),
                              ("user", "user_ref", "format this")]
    # No table outside the Session's own facts was written: nothing like a memory of the user.
    assert not any("memory" in name or "preference" in name for name in TABLES)


# --- errors --------------------------------------------------------------------------------------


@pytest.mark.covers("CTX-11.9")
def test_a_malformed_decision_is_corrected_by_a_new_business_loop_that_counts() -> None:
    # The model names a tool its role does not have (an output the runtime cannot act on): the
    # call gets a structured error and the business role corrects itself in its next Loop; no
    # compaction is asked. With a Loop budget of one, that correction is out of budget.
    document = base(tools=[{"name": "t"}])
    document["steps"] = [{"ask": "go"}, {"advance": True}]
    document["model"] = {"business": [{"text": "", "tool_calls": [{"name": "tt"}]},
                                      {"text": "fixed"}]}
    driver, _ = drive(document)
    trace = driver.raw_trace()
    assert [r.purpose for r in trace.model_requests()] == ["business", "business"]
    error = next(m.text for m in trace.model_requests()[1].view.messages
                 if m.kind.value == "tool_result")
    assert json.loads(error)["error"]["code"] == "NOT_PERMITTED"
    assert ended(trace) == [(1, "succeeded", None)]
    document["agent"]["loop_limit"] = 1
    driver, _ = drive(document)
    trace = driver.raw_trace()
    assert len(trace.model_requests()) == 1
    assert ended(trace) == [(1, "loop_exhausted", None)]


# --- addressing, the compaction pipeline, the manifest, commits a hook cannot replace -----------


def write_with_context_patch(field_key: str) -> dict[str, Any]:
    """The model proposes write(path="a.md"); one pre-call item patches the call record's field
    ``field_key`` to reports/a.md."""
    document = base(tools=[{"name": "write"}])
    document["steps"] = [{"ask": "write it"}, {"advance": True}]
    document["model"] = {"business": [
        {"text": "", "tool_calls": [{"name": "write", "arguments": {"path": "a.md"}}]},
        {"text": "done"}]}
    document["tools"] = {"write": [{"text": "ok"}]}
    document["hooks"] = [{"point": "tool.pre_call", "items": [{"context_patch": [
        {"target": "call", "field": field_key, "value": "reports/a.md"}]}]}]
    return document


@pytest.mark.covers("CTX-3.34")
def test_a_call_argument_is_addressed_by_its_call_id_never_by_a_view_index() -> None:
    driver, _ = drive(write_with_context_patch("tool_call:{call_id}.arguments.path"))
    trace = driver.raw_trace()
    [executed] = trace.of(tr.ToolExecuted)
    assert executed.effective_arguments == {"path": "reports/a.md"}
    [decided] = trace.of(tr.HookDecided)
    assert decided.patch_valid
    assert decided.changes == (f'tool_call:{executed.call_id}.arguments.path="reports/a.md"',)
    # The same change addressed by the position of the call in the view is refused; the call
    # runs as proposed.
    driver, _ = drive(write_with_context_patch("/messages/2/tool_calls/0/arguments/path"))
    trace = driver.raw_trace()
    [decided] = trace.of(tr.HookDecided)
    assert not decided.patch_valid and decided.diagnostics
    assert [e.effective_arguments for e in trace.of(tr.ToolExecuted)] == [{"path": "a.md"}]


@pytest.mark.covers("CTX-8.8")
def test_every_chunk_request_and_its_answer_pass_the_compaction_hooks() -> None:
    # The three-chunk example with both compaction hook points registered: each of the three
    # chunk calls is asked through the pre-request chain and answered through the post-response
    # chain, in that order.
    document = example("compaction-three-chunks-window-exceeded")
    document["hooks"] = [{"point": "compaction.pre_request", "items": [{}]},
                         {"point": "compaction.post_response", "items": [{}]}]
    driver, _ = drive(document)
    trace = driver.raw_trace()
    assert [(e.point, e.stage) for e in trace.of(tr.HookCalled)] == [
        ("compaction.pre_request", "pre"), ("compaction.post_response", "post")] * 3
    hooks = [i for i, e in enumerate(trace.events) if isinstance(e, tr.HookCalled)]
    chunks = [i for i, e in enumerate(trace.events)
              if isinstance(e, tr.ModelRequestSent) and e.purpose == "compaction"]
    assert [hooks[2 * n] < chunks[n] < hooks[2 * n + 1] for n in range(3)] == [True] * 3


@pytest.mark.covers("CTX-9.14")
def test_the_manifest_keeps_each_covered_records_hash_mutations_and_revision() -> None:
    # Loop 3's hook corrects the first decision, then the episode covers it: its piece names the
    # hook's mutation and the revision that mutation committed; every piece has a content hash.
    driver, _ = drive(row20_with_a_correction_in_loop_3())
    hooked = [json.loads(row["doc"]) for row in driver.store.query("SELECT doc FROM mutations")]
    [mutation] = [m for m in hooked if m["source_kind"] == "hook"]
    [snapshot] = [json.loads(str(row["doc"])) for row in driver.store.query(
        "SELECT name, doc FROM checkpoints") if row["name"] == "snapshot"]
    pieces = snapshot["manifest"]["pieces"]
    assert pieces and all(p["content_hash"].startswith("sha256:") for p in pieces)
    assert {p["source_revision"] for p in pieces} == {mutation["committed_revision"]}
    corrected = [p for p in pieces if p["mutation_ids"]]
    assert [p["mutation_ids"] for p in corrected] == [[mutation["mutation_id"]]]
    assert corrected[0]["context_seq"] == 2  # the first decision, after the question


@pytest.mark.covers("CTX-10.27")
def test_a_hook_change_adds_its_own_commits_and_replaces_none() -> None:
    # tool-batch-hook with and without its hook: the same named commits, plus one HOOK_STARTED
    # and one HOOK_DECISION per pre-call chain (two calls).
    hooked, _ = drive(example("tool-batch-hook"))
    bare = example("tool-batch-hook")
    del bare["hooks"]
    plain, _ = drive(bare)
    with_hook = hooked.runtime.coordinator.by_name if hooked.runtime else None
    without = plain.runtime.coordinator.by_name if plain.runtime else None
    assert with_hook is not None and without is not None
    assert with_hook - without == {"HOOK_STARTED": 2, "HOOK_DECISION": 2}
    assert not without - with_hook
