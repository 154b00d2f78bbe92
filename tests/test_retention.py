"""Retention and access (§1, §11, §12 rows 24 and 25): working files go when a Run without a
persistent sandbox ends while records stay; deleting the Agent removes every row it owns; the
history API refuses other Sessions, unauthorised roles and workspace scripts."""

import json
from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest

from ctxspec.conformance.case import example
from ctxspec.conformance.driver_config import agent_config
from ctxspec.conformance.estimator import ESTIMATORS
from ctxspec.conformance.scenario import (
    AUDITOR,
    ScriptedHooks,
    ScriptedModel,
    ScriptedTools,
    Triggers,
    parse_scenario,
)
from ctxspec.reference.ports import LogicalClock
from ctxspec.reference.runtime.runtime import (
    AccessDenied,
    AuditGrants,
    HistoryCaller,
    ReferenceRuntime,
)
from ctxspec.reference.runtime.store import TABLES, CommitCoordinator, Store, insert


def scenario_doc(persistent: bool) -> dict[str, Any]:
    doc = example("tool-batch-hook")
    doc["tools"]["write"][0]["workspace_writes"] = {"reports/a.md": "draft!"}
    doc["agent"]["persistent_sandbox"] = persistent
    return doc


AUDIT = AuditGrants.issue([AUDITOR])
"""The grants the runtimes here are configured with (their Agent names AUDITOR)."""


def finished_run(tmp_path: Path, persistent: bool = False) -> tuple[ReferenceRuntime, Store]:
    scenario = parse_scenario(scenario_doc(persistent))
    triggers = Triggers(())
    store = Store(tmp_path / "retention.db")
    runtime = ReferenceRuntime(agent_config(scenario.agent),
                               model=ScriptedModel(scenario.model, triggers),
                               tools=ScriptedTools(scenario.tools, triggers),
                               hooks=ScriptedHooks(scenario.hooks),
                               estimator=ESTIMATORS["chars"](), clock=LogicalClock(),
                               store=store, audit=AUDIT)
    runtime.ask("Write the report and read my notes.")
    runtime.advance()
    return runtime, store


def counts(store: Store) -> dict[str, int]:
    return {table: store.count(table) for table in TABLES}


@pytest.mark.covers("CTX-1.14", "CTX-1.15")
def test_a_run_without_a_sandbox_leaves_no_working_file_and_keeps_every_record(
        tmp_path: Path) -> None:
    runtime, store = finished_run(tmp_path)
    assert runtime.workspace == {}
    # The question, the decision, both tool results and the answer are all still stored, and so
    # is the blob behind the question.
    kinds = [row["message_kind"] for row in store.query(
        "SELECT message_kind FROM records ORDER BY context_seq")]
    assert kinds == ["user_ref", "assistant", "tool_result", "tool_result", "assistant"]
    assert store.count("blobs") >= 1
    assert store.count("user_inputs") == 1


def test_a_persistent_sandbox_keeps_the_working_files(tmp_path: Path) -> None:
    runtime, _ = finished_run(tmp_path, persistent=True)
    assert runtime.workspace == {"reports/a.md": "draft!"}


def test_deleting_the_agent_removes_every_row_it_owns(tmp_path: Path) -> None:
    runtime, store = finished_run(tmp_path, persistent=True)
    before = counts(store)
    for table in ("agents", "sessions", "runs", "user_inputs", "deliveries", "role_contexts",
                  "records", "revisions", "operations", "hook_invocations",
                  "checkpoints", "events", "blobs"):
        assert before[table] > 0, table  # written by the run: its emptiness below means something
    runtime.delete_agent()
    assert counts(store) == dict.fromkeys(TABLES, 0)
    assert runtime.workspace == {}
    assert store.query("PRAGMA integrity_check")[0]["integrity_check"] == "ok"


def test_deleting_an_agent_keeps_a_blob_another_agent_still_refers_to(tmp_path: Path) -> None:
    runtime, store = finished_run(tmp_path)
    question = store.query("SELECT doc FROM user_inputs")[0]["doc"]
    digest = json.loads(question)["body_ref"]["digest"]
    other = str(uuid4())
    CommitCoordinator(store).commit("OTHER-AGENT", [insert(  # another Agent's row, same payload
        "records", record_id=str(uuid4()), context_id=other, context_seq=1, run_id=other,
        role="user", message_kind="user_ref", doc=json.dumps({"ref": digest}), content="{}")])
    runtime.delete_agent()
    assert [row["digest"] for row in store.query("SELECT digest FROM blobs")] == [digest]
    assert store.count("records") == 1


@pytest.mark.covers("CTX-11.15", "CTX-4.11")
def test_the_history_api_serves_the_root_role_and_audit_of_its_own_session(
        tmp_path: Path) -> None:
    runtime, _ = finished_run(tmp_path)
    own = runtime.read_history(HistoryCaller(runtime.session_id, "role", "root"))
    assert [raw.record.message_kind for raw in own] == [
        "user_ref", "assistant", "tool_result", "tool_result", "assistant"]
    audit = runtime.read_history(HistoryCaller(runtime.session_id, "audit", AUDITOR,
                                               AUDIT.grant(AUDITOR)))
    assert len(audit) == len(own)


@pytest.mark.covers("CTX-11.15")
@pytest.mark.parametrize("who", ["other-session", "executor-role", "script", "script-same-role"])
def test_the_history_api_refuses_and_the_refusal_reveals_nothing(tmp_path: Path, who: str
                                                                 ) -> None:
    runtime, _ = finished_run(tmp_path)
    caller = {"other-session": HistoryCaller(uuid4(), "role", "root"),
              "executor-role": HistoryCaller(runtime.session_id, "role", "executor"),
              "script": HistoryCaller(runtime.session_id, "script"),
              "script-same-role": HistoryCaller(runtime.session_id, "script", "root")}[who]
    with pytest.raises(AccessDenied) as refused:
        runtime.read_history(caller)
    message = str(refused.value)
    # The same words whoever asks, and none of the Session's facts or identifiers.
    assert message == "not authorised to read this history"
    assert str(runtime.session_id) not in message and "report" not in message
