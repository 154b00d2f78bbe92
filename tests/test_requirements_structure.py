"""Requirements that no other test pinned, about the reference's structure that its code can show
(§3's components: the context core does no I/O, one CommitCoordinator writes every fact, no legacy
interface commits on its own; §2's record has no second message DTO; §10's recovery bundles are
never persisted), and §7's agent configuration frozen for the session's every request.

Expected values are derived by hand from the design and the scenario; the character estimator (one
token per character, no overhead) keeps the numbers readable.
"""

import ast
from collections.abc import Iterator
from dataclasses import FrozenInstanceError
from pathlib import Path

import pytest

from ctxspec.catalogue import package_root
from ctxspec.conformance.case import example
from ctxspec.reference.budget import BudgetConfig
from ctxspec.reference.contracts import ContextRecord, MutationSourceKind
from ctxspec.reference.runtime.runtime import REGISTRIES, AgentConfig
from ctxspec.reference.runtime.store import TABLES
from tests.driven_scenarios import drive
from tests.purity import core_modules

REFERENCE = package_root() / "reference"


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
