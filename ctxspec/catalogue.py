"""The requirement catalogue (spec/requirements.toml) and its traceability to tests and cases.

One requirement per normative statement of design §1-§11, ID ``CTX-<section>.<n>``. A test
declares what it pins with ``@pytest.mark.covers("CTX-7.8", ...)`` (a model, which must not
need pytest, with ``@catalogue.covers(...)``); the trace reads those
declarations from the source (no test run needed) and classifies every requirement:

- ``conformance``: pinned by a conformance case or a driver-level model invariant (files under
  ``conformance/`` or ``models/``), which any runtime faces;
- ``unit``: pinned only by the reference's own tests (``tests/``); its ``white_box`` field
  says why no black box can observe it (what it states lives inside the runtime: a stored
  field, a pure function's internals), so no conformance case can pin it;
- ``not_testable``: the catalogue says why no test can observe it;
- ``uncovered``: nothing pins it yet.
"""

import ast
import functools
import re
import tomllib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import Literal, TypeVar

REQUIREMENT_ID = re.compile(r"^CTX-(\d+)\.(\d+)$")
LEVELS = ("MUST", "MUST NOT", "SHOULD")
SECTIONS = range(1, 12)
"""§1-§11 are normative text; §12 is the acceptance table that the conformance cases encode."""

Status = Literal["conformance", "unit", "uncovered", "not_testable"]


class CatalogueError(ValueError):
    """The catalogue file breaks its own format; the message names the entry and the rule."""


@dataclass(frozen=True)
class Requirement:
    id: str
    section: int
    level: str
    statement: str
    anchor: str
    not_testable: str | None = None
    white_box: str | None = None
    """Why only the reference's own tests can pin it: nothing a black box sees shows it."""


def package_root() -> Path:
    """The directory of the ``ctxspec`` package (holds the links to the four parts)."""
    return Path(str(files("ctxspec")))


def catalogue_path() -> Path:
    return package_root() / "spec" / "requirements.toml"


def parse_catalogue(text: str) -> tuple[Requirement, ...]:
    """Parse and check the catalogue: unique well-formed IDs, consecutive per section."""
    data = tomllib.loads(text)
    entries = data.get("requirement")
    if not isinstance(entries, list) or not entries:
        raise CatalogueError("requirements.toml: needs a non-empty [[requirement]] array")
    requirements: list[Requirement] = []
    seen: set[str] = set()
    next_n: dict[int, int] = {}
    for index, entry in enumerate(entries, start=1):
        where = f"requirement #{index} ({entry.get('id', '?')})"
        unknown = set(entry) - {"id", "section", "level", "statement", "anchor", "not_testable",
                                "white_box"}
        if unknown:
            raise CatalogueError(f"{where}: unknown field(s) {sorted(unknown)}")
        for field in ("id", "section", "level", "statement", "anchor"):
            if field not in entry:
                raise CatalogueError(f"{where}: field '{field}' is required")
        match = REQUIREMENT_ID.match(str(entry["id"]))
        if not match:
            raise CatalogueError(f"{where}: id must look like CTX-<section>.<n>")
        section, n = int(match.group(1)), int(match.group(2))
        if entry["section"] != section or section not in SECTIONS:
            raise CatalogueError(f"{where}: section must be {section} and within 1-11")
        if entry["id"] in seen:
            raise CatalogueError(f"{where}: id is used twice")
        if n != next_n.get(section, 1):
            raise CatalogueError(f"{where}: ids are consecutive per section; expected "
                                 f"CTX-{section}.{next_n.get(section, 1)}")
        if entry["level"] not in LEVELS:
            raise CatalogueError(f"{where}: level must be one of {LEVELS}")
        statement = entry["statement"]
        if not isinstance(statement, str) or not statement.strip() or "\n" in statement:
            raise CatalogueError(f"{where}: statement must be one non-empty line")
        not_testable = entry.get("not_testable")
        if not_testable is not None and not str(not_testable).strip():
            raise CatalogueError(f"{where}: not_testable needs a reason")
        white_box = entry.get("white_box")
        if white_box is not None and not str(white_box).strip():
            raise CatalogueError(f"{where}: white_box needs a reason")
        if white_box is not None and not_testable is not None:
            raise CatalogueError(f"{where}: a requirement is white_box or not_testable, not both")
        seen.add(entry["id"])
        next_n[section] = n + 1
        requirements.append(Requirement(entry["id"], section, entry["level"], statement,
                                        entry["anchor"], not_testable, white_box))
    missing = [s for s in SECTIONS if s not in next_n]
    if missing:
        raise CatalogueError(f"requirements.toml: no requirement for section(s) {missing}")
    return tuple(requirements)


def load_catalogue(path: Path | None = None) -> tuple[Requirement, ...]:
    return parse_catalogue((path or catalogue_path()).read_text("utf-8"))


# --- coverage declarations -----------------------------------------------------------------


@dataclass(frozen=True)
class Declaration:
    """One ``covers(...)`` use: which IDs, and the test or case that declares them."""

    requirement_ids: tuple[str, ...]
    covered_by: str
    kind: Literal["conformance", "unit"]
    matrix: tuple[tuple[str, str], ...] = ()
    """For a case generated from a matrix: its coordinate, (dimension, value) pairs."""


_Declared = TypeVar("_Declared")


def covers(*requirement_ids: str) -> Callable[[_Declared], _Declared]:
    """Declare the requirements a model or check pins where pytest is not at hand (the models
    run from an installed wheel with only their extra): ``@catalogue.covers("CTX-2.2", ...)``.
    The trace reads the declaration from the source like a ``pytest.mark.covers``; the decorated
    object is returned unchanged."""
    def declare(target: _Declared) -> _Declared:
        return target
    return declare


def _covers_ids(decorator: ast.expr) -> tuple[str, ...] | None:
    """The string arguments of ``<anything>.covers(...)``, else None."""
    if not (isinstance(decorator, ast.Call) and isinstance(decorator.func, ast.Attribute)
            and decorator.func.attr == "covers"):
        return None
    return tuple(arg.value for arg in decorator.args
                 if isinstance(arg, ast.Constant) and isinstance(arg.value, str))


def _declarations_in(path: Path, label: str,
                     kind: Literal["conformance", "unit"]) -> Iterator[Declaration]:
    tree = ast.parse(path.read_text("utf-8"), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            for decorator in node.decorator_list:
                ids = _covers_ids(decorator)
                if ids:
                    yield Declaration(ids, f"{label}::{node.name}", kind)
        elif isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets):
            marks = node.value.elts if isinstance(node.value, ast.List | ast.Tuple) \
                else [node.value]
            for mark in marks:
                ids = _covers_ids(mark)
                if ids:
                    yield Declaration(ids, label, kind)


@functools.cache
def _declared_in(path: Path, stamp: tuple[int, int], label: str,
                 kind: Literal["conformance", "unit"]) -> tuple[Declaration, ...]:
    """A file's declarations, parsed once per process while its ``stamp`` (modification time
    and size) is unchanged: the tests call ``ctxspec trace`` many times in one process."""
    return tuple(_declarations_in(path, label, kind))


def scan_declarations(repository_root: Path | None = None) -> tuple[list[Declaration], bool]:
    """Every coverage declaration: the conformance cases' requirement IDs, ``covers(...)`` in
    conformance/ and models/, and (in a checkout) in tests/.

    Returns the declarations and whether the reference's own tests were found (they are not
    part of an installed wheel, so ``unit`` coverage is only known in a checkout).
    """
    package = package_root()
    root = repository_root or package.resolve().parent
    sources: list[tuple[Path, Literal["conformance", "unit"]]] = [
        (package / "conformance", "conformance"), (package / "models", "conformance")]
    tests = root / "tests"
    if tests.is_dir():
        sources.append((tests, "unit"))
    from ctxspec.conformance.cases import CASES  # the cases name their requirements

    declarations = [Declaration(case.requirements, f"conformance case {case.id}", "conformance",
                                tuple((case.matrix or {}).items()))
                    for case in CASES]
    for directory, kind in sources:
        for path in sorted(directory.rglob("*.py")):
            label = f"{directory.name}/{path.relative_to(directory).as_posix()}"
            stat = path.stat()
            declarations.extend(_declared_in(path, (stat.st_mtime_ns, stat.st_size), label,
                                             kind))
    return declarations, tests.is_dir()


def unknown_ids(declarations: Iterable[Declaration],
                requirements: Iterable[Requirement]) -> list[tuple[str, str]]:
    """(id, covered_by) for every declared ID the catalogue does not have."""
    known = {r.id for r in requirements}
    return [(rid, d.covered_by) for d in declarations for rid in d.requirement_ids
            if rid not in known]


@dataclass(frozen=True)
class TraceRow:
    id: str
    section: int
    level: str
    status: Status
    covered_by: tuple[str, ...]
    statement: str
    not_testable: str | None
    white_box: str | None = None
    matrix: tuple[dict[str, str], ...] = ()
    """The matrix points pinned for it: each case's coordinate and its ``case`` ID."""


def trace(requirements: Iterable[Requirement],
          declarations: Iterable[Declaration]) -> list[TraceRow]:
    by_id: dict[str, list[Declaration]] = {}
    for declaration in declarations:
        for rid in declaration.requirement_ids:
            by_id.setdefault(rid, []).append(declaration)
    rows = []
    for requirement in requirements:
        found = by_id.get(requirement.id, [])
        status: Status
        if any(d.kind == "conformance" for d in found):
            status = "conformance"
        elif found:
            status = "unit"
        elif requirement.not_testable:
            status = "not_testable"
        else:
            status = "uncovered"
        points = tuple({**dict(d.matrix), "case": d.covered_by.removeprefix(
            "conformance case ")} for d in sorted(found, key=lambda d: d.covered_by)
            if d.matrix)
        rows.append(TraceRow(requirement.id, requirement.section, requirement.level, status,
                             tuple(sorted({d.covered_by for d in found})),
                             requirement.statement, requirement.not_testable,
                             requirement.white_box, points))
    return rows
