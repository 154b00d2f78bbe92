"""The public seams point one way (docs/architecture.md "Layers"): the scenario schema, the commit
names, the port protocols, the script errors and ToolSpec live in neutral modules of the core
(``reference/ports.py``, ``reference/commits.py``) that the reference runtime and the
conformance package both import. The conformance package and the models import the reference
runtime only where they build the reference driver (``conformance/driver.py``, with
``conformance/crash_runup.py``, its crashed runs sharing their run-up, and
``conformance/history_steps.py``, its history-API steps) and its mutants
(``conformance/mutants/``), so the contract never depends on the implementation it judges."""

import ast
from pathlib import Path

from tests.purity import ROOT

RUNTIME = "ctxspec.reference.runtime"
MAY_IMPORT_THE_RUNTIME = ("conformance/driver.py", "conformance/driver_config.py",
                          "conformance/crash_runup.py", "conformance/history_steps.py",
                          "conformance/mutants/")
"""The reference driver (with its reading of a scenario's Agent, its crashed-run sharing and
its history-API steps), and the deliberately wrong runtimes made from it."""


def runtime_imports(path: Path) -> list[str]:
    """Every import of the reference runtime in ``path``, at any depth (also inside a function)."""
    found: list[str] = []
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.startswith(RUNTIME)]
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.module.startswith(RUNTIME):
                found.append(node.module)
            elif node.module == "ctxspec.reference":
                found += [f"{node.module}.{a.name}" for a in node.names if a.name == "runtime"]
    return found


def harness_modules() -> dict[str, Path]:
    return {path.relative_to(ROOT).as_posix(): path
            for folder in ("conformance", "models")
            for path in sorted((ROOT / folder).rglob("*.py")) if "__pycache__" not in path.parts}


def test_the_harness_reaches_the_runtime_only_through_the_reference_driver() -> None:
    wrong = {name: imports for name, path in harness_modules().items()
             if not name.startswith(MAY_IMPORT_THE_RUNTIME)
             and (imports := runtime_imports(path))}
    assert wrong == {}, ("these modules import the reference runtime; import the neutral "
                         "seams (ctxspec.reference.ports, ctxspec.reference.commits) instead")


def test_the_rule_sees_the_imports_it_allows() -> None:
    # Not vacuous: the reference driver does import the runtime, and the modules the rule
    # guards (the schema, the harness, the timeline, the models' driver machine) are walked.
    modules = harness_modules()
    assert runtime_imports(modules["conformance/driver.py"]) != []
    assert {"conformance/scenario.py", "conformance/scripts.py", "conformance/scripted.py",
            "conformance/harness.py", "conformance/timeline.py", "conformance/stdio.py",
            "models/driver_machine.py"} <= set(modules)


def test_the_seams_are_neutral() -> None:
    # The neutral modules belong to neither side: they import neither the runtime nor the
    # conformance package (the purity rule keeps them free of I/O and shared state as well).
    for name in ("ports.py", "commits.py"):
        source = (ROOT / "reference" / name).read_text("utf-8")
        modules = {n.module for n in ast.walk(ast.parse(source))
                   if isinstance(n, ast.ImportFrom) and n.module}
        assert not {m for m in modules if m.startswith((RUNTIME, "ctxspec.conformance"))}, name
