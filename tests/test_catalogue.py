"""The requirement catalogue and the trace: format checks, classification, unknown IDs."""

import re
from pathlib import Path

import pytest

from ctxspec import catalogue

DESIGN = Path(__file__).resolve().parent.parent / "spec" / "design" / \
    "session-context-compaction.zh.md"


def entry(rid: str, **extra: str) -> str:
    section = rid.split("-")[1].split(".")[0]
    fields = {"id": rid, "section": section, "level": "MUST", "statement": "A rule.",
              "anchor": "规则"} | extra
    lines = ["[[requirement]]"] + [
        f"{key} = {value}" if key == "section" else f'{key} = "{value}"'
        for key, value in fields.items()]
    return "\n".join(lines) + "\n"


def minimal(*extra_entries: str) -> str:
    return "schema_version = 1\n" + "".join(entry(f"CTX-{s}.1") for s in range(1, 12)) + \
        "".join(extra_entries)


def test_the_catalogue_parses_and_covers_sections_1_to_11() -> None:
    requirements = catalogue.load_catalogue()
    assert {r.section for r in requirements} == set(range(1, 12))
    assert len(requirements) >= 11


def test_catalogue_anchors_locate_the_statement_in_the_design() -> None:
    text = DESIGN.read_text("utf-8")
    missing = [r.id for r in catalogue.load_catalogue() if r.anchor not in text]
    assert missing == []


def test_catalogue_statements_are_one_line_english() -> None:
    for requirement in catalogue.load_catalogue():
        assert not re.search(r"[\u4e00-\u9fff]", requirement.statement), requirement.id


@pytest.mark.parametrize(("text", "message"), [
    ("schema_version = 1\n", "non-empty [[requirement]]"),
    (minimal(entry("CTX-1.3")), "expected CTX-1.2"),
    (minimal(entry("CTX-1.1")), "id is used twice"),
    (minimal(entry("CTX-1.2", level="MAY")), "level must be one of"),
    (minimal(entry("CTX-1.2", owner="me")), "unknown field"),
    (minimal(entry("CTX-1.2", not_testable=" ")), "not_testable needs a reason"),
    (minimal(entry("CTX-1.2", white_box=" ")), "white_box needs a reason"),
    (minimal(entry("CTX-1.2", white_box="a stored field", not_testable="platform")),
     "white_box or not_testable, not both"),
    (minimal(entry("CTX-12.1")), "within 1-11"),
    (minimal(entry("REQ-1")), "CTX-<section>.<n>"),
    ("".join(entry(f"CTX-{s}.1") for s in range(1, 11)), "no requirement for section(s) [11]"),
], ids=["empty", "gap", "duplicate", "level", "unknown-field", "blank-reason",
        "blank-white-box", "white-box-and-not-testable", "section-12", "id-shape",
        "missing-section"])
def test_malformed_catalogues_are_refused_with_the_rule(text: str, message: str) -> None:
    with pytest.raises(catalogue.CatalogueError, match=re.escape(message)):
        catalogue.parse_catalogue(text)


def test_trace_classifies_by_the_kind_of_declaration() -> None:
    requirements = catalogue.parse_catalogue(minimal(
        entry("CTX-1.2"), entry("CTX-1.3", not_testable="platform boundary"), entry("CTX-1.4")))
    declarations = [
        catalogue.Declaration(("CTX-1.1",), "tests/test_a.py::t", "unit"),
        catalogue.Declaration(("CTX-1.1", "CTX-1.2"), "conformance/cases.py::c", "conformance"),
        catalogue.Declaration(("CTX-2.1",), "tests/test_b.py::u", "unit"),
    ]
    rows = {row.id: row for row in catalogue.trace(requirements, declarations)}
    assert (rows["CTX-1.1"].status, rows["CTX-1.1"].covered_by) == \
        ("conformance", ("conformance/cases.py::c", "tests/test_a.py::t"))
    assert rows["CTX-1.2"].status == "conformance"
    assert rows["CTX-1.3"].status == "not_testable"
    assert rows["CTX-1.4"].status == "uncovered"
    assert rows["CTX-2.1"].status == "unit"


def test_a_white_box_reason_travels_with_a_unit_requirement() -> None:
    requirements = catalogue.parse_catalogue(minimal(
        entry("CTX-1.2", white_box="a stored field no trace shows")))
    declarations = [catalogue.Declaration(("CTX-1.2",), "tests/test_a.py::t", "unit")]
    rows = {row.id: row for row in catalogue.trace(requirements, declarations)}
    assert (rows["CTX-1.2"].status, rows["CTX-1.2"].white_box) == \
        ("unit", "a stored field no trace shows")


def test_scan_reads_decorators_and_module_marks(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_x.py").write_text(
        "import pytest\n"
        "pytestmark = [pytest.mark.covers('CTX-2.1')]\n"
        "@pytest.mark.covers('CTX-1.1', 'CTX-1.2')\n"
        "def test_one():\n    pass\n"
        "class TestGroup:\n"
        "    @pytest.mark.covers('CTX-3.1')\n"
        "    def test_two(self):\n        pass\n", "utf-8")
    declarations, found_tests = catalogue.scan_declarations(tmp_path)
    assert found_tests
    mine = {(d.requirement_ids, d.covered_by) for d in declarations
            if d.covered_by.startswith("tests/test_x.py")}
    assert mine == {(("CTX-2.1",), "tests/test_x.py"),
                    (("CTX-1.1", "CTX-1.2"), "tests/test_x.py::test_one"),
                    (("CTX-3.1",), "tests/test_x.py::test_two")}


def test_every_declaration_in_the_repository_names_a_known_requirement() -> None:
    declarations, found_tests = catalogue.scan_declarations()
    assert found_tests
    assert catalogue.unknown_ids(declarations, catalogue.load_catalogue()) == []
    assert any(d.covered_by.startswith("tests/test_budget.py") for d in declarations)


def test_unknown_covers_marker_fails_the_pytest_run(pytester: pytest.Pytester) -> None:
    pytester.makeconftest("from tests.conftest import pytest_collection_modifyitems as "
                          "pytest_collection_modifyitems\n")
    pytester.makepyfile(
        "import pytest\n@pytest.mark.covers('CTX-99.1')\ndef test_x():\n    assert 1 + 1 == 2\n")
    pytester.syspathinsert(Path(__file__).resolve().parent.parent)
    # Without the adapters' extras' plugins, which this process does not load either: an
    # in-process run would import them afresh.
    result = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:langsmith_plugin",
                                "-p", "no:anyio")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*CTX-99.1 in test_unknown_covers_marker_fails*"])


def test_every_unit_only_requirement_says_why_no_case_pins_it() -> None:
    # Issue #10: whatever a black box can observe is pinned by a conformance case, so a `unit`
    # requirement must carry the white_box reason no trace can show it.
    requirements = catalogue.load_catalogue()
    declarations, _ = catalogue.scan_declarations()
    assert [row.id for row in catalogue.trace(requirements, declarations)
            if row.status == "unit" and not row.white_box] == []
