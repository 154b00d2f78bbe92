"""Every §3 component of the design is a class of the design's name, in the module
docs/architecture.md names (issue #19 "every §3 component of the design's diagram is a class or
module of the same name").

The components and the return types are read from the design's own class diagram (the
``classDiagram`` block of §3), so a component the design adds is checked without editing this
test; the one table here says where each lives.
"""

import importlib
import inspect
import re
import types
import typing
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DESIGN = ROOT / "spec" / "design" / "session-context-compaction.zh.md"
ARCHITECTURE = ROOT / "docs" / "architecture.md"

MODULES = {
    "ContextManager": "ctxspec.reference.runtime.context_manager",
    "HistoryProjector": "ctxspec.reference.history_projector",
    "ContextRepository": "ctxspec.reference.repository",
    "TokenEstimator": "ctxspec.reference.tokens",
    "CompactionPolicy": "ctxspec.reference.policy",
    "CompactionService": "ctxspec.reference.runtime.compaction_service",
    "NodeDriver": "ctxspec.reference.runtime.node_driver",
    "InvocationPipeline": "ctxspec.reference.runtime.pipeline",
    "CommitCoordinator": "ctxspec.reference.runtime.store",
    "ModelGateway": "ctxspec.reference.runtime.pipeline",
}
"""Component → the module that defines its class (docs/architecture.md "The design's §3
components")."""

TEXT_ONLY = frozenset({"ModelGateway"})
"""Components §3 names in its text ("ModelManager / ModelGateway 使用已冻结有效请求"), not in the
diagram."""


def diagram() -> dict[str, dict[str, str]]:
    """The §3 class diagram: each class with its ``+method() ReturnType`` lines."""
    lines = DESIGN.read_text(encoding="utf-8").splitlines()
    start = lines.index("classDiagram")
    classes: dict[str, dict[str, str]] = {}
    current: str | None = None
    for line in lines[start + 1:]:
        if not line.strip():
            break
        if match := re.fullmatch(r"\s*class (\w+)( \{)?", line):
            current = match.group(1) if match.group(2) else None
            classes[match.group(1)] = {}
        elif current is not None and (match := re.fullmatch(r"\s*\+(\w+)\(\) (\w+)", line)):
            classes[current][match.group(1)] = match.group(2)
    return classes


DIAGRAM = diagram()


def test_the_diagram_is_read() -> None:
    # The design's diagram, as §3 draws it: nine classes, ContextManager with six methods and
    # CompactionService with three (spec/design/…zh.md, the classDiagram block).
    assert len(DIAGRAM) == 9, f"the §3 diagram's classes: expected 9, read {sorted(DIAGRAM)}"
    assert len(DIAGRAM["ContextManager"]) == 6 and len(DIAGRAM["CompactionService"]) == 3


def test_the_table_covers_the_diagram() -> None:
    assert set(MODULES) == set(DIAGRAM) | TEXT_ONLY, (
        "each §3 component needs its module here: "
        f"missing {sorted(set(DIAGRAM) - set(MODULES))}, "
        f"not in §3 {sorted(set(MODULES) - set(DIAGRAM) - TEXT_ONLY)}")


@pytest.mark.parametrize("name", sorted(MODULES))
def test_a_component_is_a_class_of_its_name(name: str) -> None:
    module = importlib.import_module(MODULES[name])
    found = getattr(module, name, None)
    assert inspect.isclass(found) and found.__name__ == name, (
        f"§3 names the component {name}: expected a class {name} in {MODULES[name]}, "
        f"found {found!r}")


@pytest.mark.parametrize("name", sorted(MODULES))
def test_the_architecture_page_says_where_it_is(name: str) -> None:
    rows = [line for line in ARCHITECTURE.read_text(encoding="utf-8").splitlines()
            if line.startswith(f"| {name} |")]
    assert len(rows) == 1, f"docs/architecture.md: expected one table row for {name}"
    file = MODULES[name].rsplit(".", 1)[1] + ".py"
    assert f"`{name}`" in rows[0] and file in rows[0], (
        f"docs/architecture.md's row for {name} must name {file} and the class `{name}`")


METHODS = [(component, method, returned) for component, methods in DIAGRAM.items()
           for method, returned in methods.items()]


def _names(annotation: object) -> set[str]:
    """The class names a return annotation allows (the members of a union)."""
    members = typing.get_args(annotation) if isinstance(
        annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union \
        else (annotation,)
    return {getattr(member, "__name__", repr(member)) for member in members}


@pytest.mark.parametrize(("component", "method", "returned"), METHODS)
def test_a_diagram_method_returns_the_diagram_type(component: str, method: str,
                                                   returned: str) -> None:
    cls = getattr(importlib.import_module(MODULES[component]), component)
    function = getattr(cls, method, None)
    assert callable(function), f"§3: {component}.{method}() is missing"
    annotation = typing.get_type_hints(function)["return"]
    assert returned in _names(annotation), (
        f"§3: {component}.{method}() returns {returned}; annotated {annotation}")
    # The type is a class of its own, importable beside the component.
    assert any(inspect.isclass(getattr(importlib.import_module(m), returned, None))
               for m in set(MODULES.values()) | {
                   "ctxspec.reference.runtime.context_writes", "ctxspec.reference.view"}), (
        f"§3's {returned} is no class")
