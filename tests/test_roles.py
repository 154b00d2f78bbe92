"""Planner and Executors, shared and private scopes through the Driver: §12 rows 3 and 19, with
expectations derived by hand from §1, §2, §3 and §5."""

import json
from pathlib import Path
from typing import Any

import pytest

from ctxspec.conformance.cases import by_id
from ctxspec.conformance.driver import ReferenceDriver, run_scenario
from ctxspec.conformance.scenario import parse_scenario
from ctxspec.reference.runtime import trace as tr

EXAMPLES = Path(__file__).resolve().parent.parent / "docs" / "examples"


def run(document: dict[str, Any]) -> tr.Trace:
    driver = ReferenceDriver()
    run_scenario(parse_scenario(document), lambda: driver)
    return driver.raw_trace()


def texts(request: tr.ModelRequestSent) -> list[str]:
    return [m.text for m in request.view.messages]


def roles_scenario() -> dict[str, Any]:
    """The §12 row 19 scenario of the conformance case ROW-19 (scopes: the shared budget, a
    private note, an Executor that is no consumer)."""
    [case] = by_id(["ROW-19"])
    return dict(case.scenario)


def planner_requests(trace: tr.Trace) -> list[list[str]]:
    """The Planner's requests, one per Operation: a request whose answer was lost in a crash
    is sent again as it was, and counts once."""
    sent: dict[str, list[str]] = {}
    for request in trace.model_requests("business"):
        if request.role == "root":
            assert sent.setdefault(request.purpose_key, texts(request)) == texts(request)
    return list(sent.values())


def roles_commits() -> list[tuple[str, int, str]]:
    driver = ReferenceDriver()
    run_scenario(parse_scenario(roles_scenario()), lambda: driver)
    assert driver.runtime is not None
    return [(name, n, when) for name, count in sorted(driver.runtime.coordinator.by_name.items())
            for n in range(1, count + 1) for when in ("before", "after")]


@pytest.mark.covers("CTX-3.75", "CTX-3.87", "CTX-10.12")
@pytest.mark.parametrize(("commit", "occurrence", "when"), roles_commits(),
                         ids=lambda v: str(v))
def test_row19_scopes_survive_a_crash_at_any_commit(commit: str, occurrence: int,
                                                    when: str) -> None:
    # A takeover rebuilds the shared scope and the Executor from the store: wherever the
    # process dies, the Planner's requests are the ones it sends without a crash and the
    # Executor never sees the shared field or the Planner's context. Only a hook that was
    # running at the crash differs: it is dropped (HOOK_FAILED), so its patch never lands.
    plain = planner_requests(run(roles_scenario()))
    crashed = run({**roles_scenario(), "crash": {"commit": commit, "occurrence": occurrence,
                                                 "when": when}})
    executor = [r for r in crashed.model_requests("business") if r.role == "executor"]
    for request in executor:
        assert not any("budget" in t or "plan v1" in t for t in texts(request))
    hook_was_running = (commit, when) in (("HOOK_STARTED", "after"), ("HOOK_DECISION", "before"))
    if hook_was_running:
        assert any("HOOK_FAILED" in d.diagnostics for d in crashed.of(tr.HookDecided))
        return
    assert planner_requests(crashed) == plain


@pytest.mark.covers("CTX-3.93")
def test_an_allow_never_grants_a_tool_or_quota_the_role_lacks() -> None:
    document = {
        "scenario_version": 1, "name": "authority",
        "agent": {"system_prompt": "plan", "window": 16384, "estimator": "chars",
                  "tools": [{"name": "ls"}], "tool_quota": 1,
                  "executor": {"system_prompt": "execute", "tools": [{"name": "cat"}]}},
        "steps": [{"ask": "go"}, {"advance": True}],
        "model": {"business": [{"text": "", "tool_calls": [
            {"name": "ls"}, {"name": "ls"}, {"name": "cat"}]}, {"text": "done"}]},
        "tools": {"ls": [{"text": "a b"}]},
        "hooks": [{"point": "tool.pre_call", "items": [{"decision": "allow"}]}]}
    trace = run(document)
    assert [e.name for e in trace.of(tr.ToolExecuted)] == ["ls"]  # one call of quota 1
    results = [m.text for m in trace.model_requests("business")[-1].view.messages
               if m.kind.value == "tool_result"]
    assert results[0] == "a b"
    assert json.loads(results[1])["error"]["code"] == "QUOTA_EXHAUSTED"
    # cat is the Executor's tool, not the Planner's: an allow does not grant it.
    assert json.loads(results[2])["error"]["code"] == "NOT_PERMITTED"


@pytest.mark.covers("CTX-6.22", "CTX-1.12", "CTX-1.8")
def test_artifacts_enter_as_metadata_and_workspace_files_are_not_facts() -> None:
    document = {
        "scenario_version": 1, "name": "artifacts",
        "agent": {"system_prompt": "draw", "window": 16384, "estimator": "chars",
                  "persistent_sandbox": True,  # keep the files to look at them afterwards
                  "tools": [{"name": "plot"}, {"name": "shell"}]},
        "steps": [{"ask": "plot it"}, {"advance": True}],
        "model": {"business": [{"text": "", "tool_calls": [{"name": "plot"}, {"name": "shell"}]},
                               {"text": "done"}]},
        "tools": {"plot": [{"artifact": {"path": "out/chart.png", "media_type": "image/png",
                                         "size_bytes": 20480}}],
                  "shell": [{"text": "wrote files",
                             "workspace_writes": {"records/question.txt": "forged question",
                                                  "checkpoints/run.json": "{}"}}]}}
    driver = ReferenceDriver()
    run_scenario(parse_scenario(document), lambda: driver)
    request = driver.raw_trace().model_requests("business")[-1]
    results = [m.text for m in request.view.messages if m.kind.value == "tool_result"]
    assert json.loads(results[0]) == {"artifact": {"path": "out/chart.png",
                                                   "media_type": "image/png",
                                                   "size_bytes": 20480}}
    runtime = driver.runtime
    assert runtime is not None
    assert runtime.workspace == {"records/question.txt": "forged question",
                                 "checkpoints/run.json": "{}"}
    # The files changed nothing the Session knows: the question is still the question.
    assert "plot it" in [m.text for m in request.view.messages]
    assert "forged question" not in [m.text for m in request.view.messages]
    stored = [row["content"] for row in runtime.store.query(
        "SELECT content FROM records WHERE message_kind = 'user_ref'")]
    assert [json.loads(text) for text in stored] == [{"text": "plot it"}]


# --- identities and orders in the stored facts --------------------------------------------------


@pytest.mark.covers("CTX-2.1", "CTX-2.5", "CTX-2.14", "CTX-2.16", "CTX-2.17", "CTX-2.18")
def test_roles_and_identities_in_the_stored_facts() -> None:
    driver = ReferenceDriver()
    run_scenario(parse_scenario(json.loads(
        (EXAMPLES / "planner-two-executors.json").read_text("utf-8"))), lambda: driver)
    runtime = driver.runtime
    assert runtime is not None
    store = runtime.store
    sessions = store.query("SELECT agent_id FROM sessions")
    assert [row["agent_id"] for row in sessions] == [str(runtime.agent.agent_id)]
    contexts = store.query("SELECT context_id, run_id, role_key FROM role_contexts")
    roles = sorted(row["role_key"] for row in contexts)
    assert roles == ["executor", "executor", "root", "root"]  # 2 Runs, 2 executions
    # A record's role is the protocol role; the configured role is its context's role_key.
    by_context = {row["context_id"]: row["role_key"] for row in contexts}
    for row in store.query("SELECT context_id, role FROM records"):
        if row["context_id"] in by_context:
            assert row["role"] in ("user", "assistant", "tool", "system")
    # Every loop of one execution keeps its context: the Planner's two requests of Run 1
    # froze revisions of one and the same context.
    planner = [r for r in driver.raw_trace().model_requests("business") if r.role == "root"]
    assert set(planner[0].frozen_revisions) == set(planner[1].frozen_revisions)
    # The model Operation runs on the NodeTask of the role that got the input.
    owners = {row["context_id"]: json.loads(row["doc"])["owner_node_task_id"]
              for row in store.query("SELECT context_id, doc FROM role_contexts")}
    for row in store.query("SELECT doc FROM operations WHERE purpose = 'model'"):
        assert json.loads(row["doc"])["node_task_id"] in owners.values()
    from ctxspec.reference.contracts import Run

    assert "root_node_task_id" not in Run.model_fields


@pytest.mark.covers("CTX-2.32", "CTX-2.35", "CTX-1.11", "CTX-3.71")
def test_a_changed_response_never_passes_for_the_providers_and_a_post_deny_is_explicit() -> None:
    document = {
        "scenario_version": 1, "name": "post-hooks",
        "agent": {"system_prompt": "s", "window": 16384, "estimator": "chars",
                  "tools": [{"name": "fetch"}]},
        "steps": [{"ask": "go"}, {"advance": True}],
        "model": {"business": [{"text": "calling", "tool_calls": [{"name": "fetch"}]},
                               {"text": "the secret is 42"}]},
        "tools": {"fetch": [{"text": "payload"}]},
        "hooks": [{"point": "tool.post_call", "items": [{"decision": "deny"}]},
                  {"point": "model.post_response", "ordinal": 2, "items": [
                      {"payload_patch": [{"path": "text", "value": "the secret is [redacted]"}]}]}]}
    driver = ReferenceDriver()
    run_scenario(parse_scenario(document), lambda: driver)
    runtime = driver.runtime
    assert runtime is not None
    results = [m.text for m in driver.raw_trace().model_requests("business")[-1].view.messages
               if m.kind.value == "tool_result"]
    denied = json.loads(results[0])
    assert (denied["status"], denied["stage"], denied["executed"], denied["result_delivered"]) \
        == ("denied", "post", True, False)
    # The provider's words stay in the raw result; what consumers read is the effective text,
    # marked as modified, never presented as the provider's.
    refs = [op.raw_result_ref for op in runtime.operations.values()
            if op.purpose.value == "model" and op.raw_result_ref is not None]
    raws = [runtime.store.text(ref) for ref in refs]
    assert any("the secret is 42" in raw for raw in raws)
    from ctxspec.reference.effective import effective_records

    run = next(iter(runtime.runs.values()))
    final = [r for r in effective_records(runtime.contexts[run.context_id])
             if r.kind == "assistant"][-1]
    assert final.text == "the secret is [redacted]" and final.modified_by
