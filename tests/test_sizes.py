"""The size rule of docs/architecture.md "Invariants": a module of the project's code is at most
MODULE_LINES lines and a function (a method, a nested function) at most FUNCTION_LINES, so a
reader can hold one in mind; a module of its tests (every module under tests/, test modules and
their helpers) is held to the same module limit. A new module or function over the limit fails
here; the few that cannot be split yet are listed in ALLOWED with the reason, and an entry that is
no longer needed fails too, so the list only shrinks.

The function limit is not applied to the tests: a test's body is its scenario, and cutting one
into steps changes the test, where splitting a module only moves tests. Three test functions are
over it today (tests/benchmarks/bench_store.py's ``LoopRun.loop`` and ``build_session``,
tests/test_store_history.py's projection test)."""

import ast
import functools
import os
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PARTS = ("reference", "conformance", "models", "ctxspec")
"""The project's code. ctxspec/ links the other three in: its links are not followed, so each
file is measured once, under its own folder."""
TEST_PARTS = ("tests",)
"""The project's tests: their modules are held to MODULE_LINES, their functions are not."""
MODULE_LINES = 600
FUNCTION_LINES = 60

ALLOWED: dict[str, str] = {}
"""``path`` (a module) or ``path::qualified.name`` (a function) → why it is over the limit now."""


def sources(parts: tuple[str, ...] = PARTS + TEST_PARTS) -> Iterator[Path]:
    for part in parts:
        for folder, subfolders, files in os.walk(ROOT / part):  # links are not followed
            subfolders[:] = sorted(d for d in subfolders if d != "__pycache__")
            for name in sorted(files):
                if name.endswith(".py"):
                    yield Path(folder) / name


def functions(tree: ast.AST, prefix: str = "") -> Iterator[tuple[str, int]]:
    """Every function, method and nested function: its qualified name and its length in lines
    (from ``def`` to its last line; decorators are not counted)."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            name = prefix + node.name
            yield name, (node.end_lineno or node.lineno) - node.lineno + 1
            yield from functions(node, name + ".")
        elif isinstance(node, ast.ClassDef):
            yield from functions(node, prefix + node.name + ".")
        else:
            yield from functions(node, prefix)


@functools.cache  # both tests below read it: the sources are parsed once per process
def oversized() -> dict[str, str]:
    found: dict[str, str] = {}
    for path in sources():
        text = path.read_text("utf-8")
        where = path.relative_to(ROOT).as_posix()
        lines = len(text.splitlines())
        if lines > MODULE_LINES:
            found[where] = f"{lines} lines (at most {MODULE_LINES})"
        if path.relative_to(ROOT).parts[0] in TEST_PARTS:
            continue
        for name, length in functions(ast.parse(text)):
            if length > FUNCTION_LINES:
                found[f"{where}::{name}"] = f"{length} lines (at most {FUNCTION_LINES})"
    return found


def test_modules_and_functions_stay_small() -> None:
    over = {key: size for key, size in oversized().items() if key not in ALLOWED}
    assert over == {}, ("split these (a module by topic, a function into named steps), or, if "
                        "that cannot be done now, list them in ALLOWED with the reason")


def test_the_allow_list_only_shrinks() -> None:
    stale = sorted(set(ALLOWED) - set(oversized()))
    assert stale == [], "within the limits now: remove them from ALLOWED"


def test_the_rule_measures_what_it_guards() -> None:
    # Not vacuous: every part is walked (through its own folder, not ctxspec/'s links), and a
    # function's length is measured from its def to its last line, nested ones included.
    walked = {path.relative_to(ROOT).parts[0] for path in sources()}
    assert walked == set(PARTS + TEST_PARTS)
    assert ROOT / "tests" / "test_sizes.py" in set(sources())
    assert not any(path.relative_to(ROOT).parts[:2] == ("ctxspec", "reference")
                   for path in sources())
    source = "class A:\n    def f(self):\n        def g():\n            pass\n        return g\n"
    assert dict(functions(ast.parse(source))) == {"A.f": 4, "A.f.g": 2}
