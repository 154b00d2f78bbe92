"""The purity rule of the reference core (docs/architecture.md "Layers"; docs/reference-core.md):
every module of ``reference/`` outside the runtime shell, found by walking the folder, does no
I/O, touches no database, environment, clock, randomness or threads, and keeps no process-wide
mutable state. Ids, times and blobs come in as arguments; results go out as values.

The rule reads the source (imports, names, calls, module-level assignments), so it holds for a
module nobody has listed yet.
"""

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "reference"
SHELL = REFERENCE / "runtime"
"""The imperative shell: the store, the ports' adapters, the loop. Everything else under
``reference/`` is the pure core."""

FORBIDDEN_MODULES = frozenset({
    # I/O: files, processes, sockets, the network, serialisation to disk
    "io", "os", "sys", "pathlib", "shutil", "tempfile", "glob", "fileinput", "socket", "ssl",
    "select", "selectors", "signal", "subprocess", "urllib", "http", "ftplib", "smtplib",
    "asyncio", "mmap", "pickle", "shelve", "dbm", "logging", "importlib", "ctypes", "builtins",
    # databases
    "sqlite3", "sqlite_utils",
    # the clock and randomness
    "time", "random", "secrets",
    # threads and processes
    "threading", "_thread", "multiprocessing", "concurrent", "queue",
    # adapters that read files (the tokenizer's encoding)
    "tiktoken", "tiktoken_ext",
})
"""Top-level modules the core may not import at all."""

FORBIDDEN_LAYERS = ("ctxspec.reference.runtime", "ctxspec.conformance", "ctxspec.models",
                    "ctxspec.cli", "ctxspec.commands", "ctxspec.catalogue", "ctxspec.schemas")
"""The core is the bottom layer: it imports nothing above it."""

FORBIDDEN_NAMES = frozenset({
    "open", "print", "input", "breakpoint", "eval", "exec", "compile", "__import__", "globals",
    "uuid1", "uuid4", "lru_cache", "getenv", "environ",
})
"""Builtins and imported names that do I/O, mint randomness, read the environment or keep a
process-wide cache."""

FORBIDDEN_IMPORTS = FORBIDDEN_NAMES | {"cache"}
"""Names the core may not import from any module (``functools.cache`` is a process-wide cache;
a local variable called ``cache`` is fine)."""

FORBIDDEN_ATTRIBUTES = frozenset({
    "uuid1", "uuid4", "now", "utcnow", "today", "environ", "getenv", "lru_cache", "urandom",
    "getrandbits", "perf_counter", "monotonic",
})
"""``x.now()``, ``uuid.uuid4()``, ``functools.lru_cache``, ``os.environ``: the same, reached
through a module or class."""

MUTABLE_CONSTRUCTORS = frozenset({
    "list", "dict", "set", "bytearray", "defaultdict", "OrderedDict", "Counter", "deque",
    "ChainMap", "Lock", "RLock", "Semaphore", "Event", "Condition", "Queue", "WeakValueDictionary",
    "WeakKeyDictionary",
})
MUTABLE_LITERALS = (ast.List, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp)


def core_modules() -> list[Path]:
    """Every module of the pure core: ``reference/**/*.py`` outside the shell."""
    return [path for path in sorted(REFERENCE.rglob("*.py"))
            if not path.is_relative_to(SHELL) and "__pycache__" not in path.parts]


def _called_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _mutable(value: ast.expr | None) -> bool:
    if isinstance(value, MUTABLE_LITERALS):
        return True
    return isinstance(value, ast.Call) and _called_name(value.func) in MUTABLE_CONSTRUCTORS


def _module_state(tree: ast.Module) -> Iterator[str]:
    """Module-level (and class-level) mutable values: state every caller in the process shares.
    ``__all__`` is a declaration, not state."""
    bodies: list[list[ast.stmt]] = [tree.body]
    bodies += [node.body for node in ast.walk(tree) if isinstance(node, ast.ClassDef)]
    for body in bodies:
        for statement in body:
            if isinstance(statement, ast.Assign):
                targets = [ast.unparse(t) for t in statement.targets]
                value: ast.expr | None = statement.value
            elif isinstance(statement, ast.AnnAssign):
                targets, value = [ast.unparse(statement.target)], statement.value
            else:
                continue
            if _mutable(value) and targets != ["__all__"]:
                yield f"line {statement.lineno}: {', '.join(targets)} is a shared mutable value"


def violations(source: str) -> list[str]:
    """What in ``source`` breaks the purity rule, one line per finding."""
    tree = ast.parse(source)
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) \
                else [node.module or ""]
            for name in names:
                if name.split(".")[0] in FORBIDDEN_MODULES or name.startswith(FORBIDDEN_LAYERS):
                    found.append(f"line {node.lineno}: imports {name}")
            if isinstance(node, ast.ImportFrom):
                found += [f"line {node.lineno}: imports {alias.name} from {node.module}"
                          for alias in node.names if alias.name in FORBIDDEN_IMPORTS]
        elif isinstance(node, ast.Name) and node.id in FORBIDDEN_NAMES:
            found.append(f"line {node.lineno}: uses {node.id}")
        elif isinstance(node, ast.Attribute) and (node.attr in FORBIDDEN_ATTRIBUTES or (
                node.attr == "cache" and ast.unparse(node.value) == "functools")):
            found.append(f"line {node.lineno}: uses .{node.attr}")
        elif isinstance(node, ast.Global):
            found.append(f"line {node.lineno}: global {', '.join(node.names)}")
    return found + list(_module_state(tree))
