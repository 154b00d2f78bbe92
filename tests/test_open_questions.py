"""docs/open-questions.md: in the order `python -m tests.open_questions` writes (by design
section, with its index), every entry with its parts, every test and case an entry's
*Pinned by:* names existing, and every Q number the repository cites resolving to an entry."""

import ast
import fnmatch
import functools
import re
import subprocess
from pathlib import Path

import pytest

from ctxspec.conformance.cases import CASES
from ctxspec.conformance.mutants import all_mutants
from tests import open_questions
from tests.open_questions import Entry, Unplaced, appended, ordered, parse, taken

ROOT = Path(__file__).resolve().parent.parent
CITING = ("README.md", "docs", "tests", "conformance", "reference", "ctxspec", "models", "spec")
"""Where Q numbers are cited (not tests/data, whose scripted conversations name questions Q1,
Q2, nor this module, whose made-up entries are numbered past any range)."""

PATH = re.compile(r"\b((?:tests|conformance|reference|ctxspec|models|docs|spec)/[\w/.\-]*\w)")
CASE = re.compile(r"(?<![\w-])((?:ROW|HM|CRASH|BAD|EX\d+|S\d+|SCENARIO)-[A-Z0-9_*\-]*[A-Z0-9*])")


@functools.cache
def text() -> str:
    return open_questions.PATH.read_text("utf-8")


def entries() -> list[Entry]:
    return [entry for group in parse(text()).values() for entry in group]


def pinned(entry: Entry) -> str:
    return entry.text.split("*Pinned by:*", 1)[1]


@functools.cache
def defined_tests() -> frozenset[str]:
    names = set()
    for path in (ROOT / "tests").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
    return frozenset(names)


def unknown_names(pins: str) -> list[str]:
    """The tests, paths and case IDs ``pins`` names that do not exist."""
    case_ids = {case.id for case in CASES} | {mutant.id for mutant in all_mutants()}
    missing = [path for path in PATH.findall(pins)
               if not (ROOT / path.split("::")[0]).exists()]
    bare = PATH.sub(" ", pins)
    missing += [name for name in re.findall(r"\b(test_\w+)", bare) if name not in defined_tests()]
    for named in CASE.findall(bare):
        found = (fnmatch.filter(case_ids, named) if "*" in named else
                 [i for i in case_ids if i == named or i.startswith(named + "-")])
        if not found:
            missing.append(named)
    return missing


def test_the_file_is_in_the_scripts_order() -> None:
    assert ordered(text()) == text(), (
        "docs/open-questions.md is not in its order (by section, then number, with its index): "
        "run .venv/bin/python -m tests.open_questions")


def test_every_entry_has_its_section_decision_and_pinning_test() -> None:
    lacking = []
    for entry in entries():
        body = entry.text
        parts = [open_questions.TAG.match(body) is not None, "*Decision:*" in body,
                 "*Pinned by:*" in body]
        if not all(parts) or body.index("*Decision:*") > body.index("*Pinned by:*"):
            lacking.append(f"Q{entry.number}: needs '*Section:* §n.' after its title, then "
                           f"*Decision:*, then *Pinned by:* (has {parts})")
    assert not lacking, "\n".join(lacking)


def test_every_test_and_case_an_entry_names_exists() -> None:
    missing = [f"Q{entry.number}: {', '.join(names)}" for entry in entries()
               if (names := unknown_names(pinned(entry)))]
    assert not missing, "entries are pinned by what does not exist:\n" + "\n".join(missing)


def test_every_q_number_cited_in_the_repository_is_an_entry() -> None:
    numbers = {entry.number for entry in entries()}
    dangling = []
    for part in CITING:
        root = ROOT / part
        for path in [root] if root.is_file() else sorted(root.rglob("*")):
            if (path.suffix not in (".py", ".md", ".toml", ".json") or "data" in path.parts
                    or path == Path(__file__)):
                continue
            for cited in re.findall(r"\bQ(\d+)\b", path.read_text("utf-8")):
                if int(cited) not in numbers:
                    dangling.append(f"{path.relative_to(ROOT)} cites Q{cited}")
    assert not dangling, "no such entry in docs/open-questions.md:\n" + "\n".join(dangling)


def test_the_index_links_every_entry_to_its_anchor_under_its_section() -> None:
    index = text().split("\n## ", 2)[1]
    linked = [int(n) for n in re.findall(r"\[Q(\d+)\]\(#q\1\)", index)]
    anchors = [int(n) for n in re.findall(r'^<a id="q(\d+)"></a>\*\*Q\1\. ', text(), re.M)]
    assert linked == anchors and sorted(linked) == sorted({e.number for e in entries()})
    for key, title in open_questions.GROUPS:
        body = text().split(f"\n## {title}\n", 1)
        for entry in parse(text())[key]:
            assert f'<a id="q{entry.number}"></a>' in body[1].split("\n## ", 1)[0], (
                f"Q{entry.number} is not under '{title}'")


APPENDED = """
## Rules found by issue #99

**Q997. A supplement the §5 diagram does not show.** Text. *Decision:* a choice.
*Pinned by:* `ROW-02`.

- **Q996 — A bullet in the old style.** It turns on a rule of the suite and CTX-8.12
  before its decision. *Decision:* another choice. *Pinned by* `ROW-04-AT`.
"""


def test_appended_entries_go_to_the_section_they_cite_and_a_second_run_changes_nothing() -> None:
    once = ordered(text() + APPENDED)
    assert ordered(once) == once
    groups = parse(once)
    assert [e.number for e in groups["5"]][-1] == 997  # §5 in its title
    assert [e.number for e in groups["8"]][-1] == 996  # CTX-8.12 before its decision
    assert ("**Q996. A bullet in the old style.** *Section:* §8. It turns on a rule of the suite "
            "and CTX-8.12\nbefore its decision. *Decision:* another choice. *Pinned by:* "
            "`ROW-04-AT`.") in once
    assert "## Rules found by issue #99" not in once
    assert once.count("[Q997](#q997)") == 1 and once.count('<a id="q997"></a>**Q997. ') == 1


def test_an_entry_tagged_by_hand_goes_where_its_tag_says() -> None:
    tagged = APPENDED.replace("diagram does not show.**", "diagram does not show.** "
                              "*Section:* none.")
    groups = parse(ordered(text() + tagged))
    assert 997 in [e.number for e in groups["none"]]
    assert 997 not in [e.number for e in groups["5"]]


@pytest.mark.parametrize(("appended", "named"), [
    ("\n## New\n\n**Q998. A title.** No section. *Decision:* x. *Pinned by:* `ROW-02`.\n",
     "Q998 cites no design section"),
    ("\n## New\n\nA paragraph that is no entry.\n\n**Q998. On §5.** *Decision:* x.\n",
     "text under '## New' that is no entry"),
    ("\n## New\n\n**Q1. On §5 again.** *Decision:* x. *Pinned by:* `ROW-02`.\n",
     "Q1 is written twice"),
])
def test_what_the_script_cannot_place_fails_naming_it(appended: str, named: str) -> None:
    with pytest.raises(Unplaced, match=re.escape(named)):
        ordered(text() + appended)


def test_an_entry_moved_under_another_section_is_moved_back_by_its_tag() -> None:
    q1 = next(entry for entry in parse(text())["8"] if entry.number == 1)
    block = "\n".join(('<a id="q1"></a>' + q1.lines[0], *q1.lines[1:]))
    heading = "## " + open_questions.GROUPS[0][1] + "\n"
    moved = text().replace("\n" + block + "\n", "\n", 1).replace(
        heading, heading + "\n" + block + "\n", 1)
    assert moved != text()
    assert ordered(moved) == text()


def test_a_merged_branchs_appended_entries_are_taken_from_git_and_placed(tmp_path: Path) -> None:
    # A branch began at the unordered file and appended Q997; main ordered the file meanwhile.
    def git(*args: str) -> None:
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t.invalid", *args],
                       cwd=tmp_path, check=True, capture_output=True)

    page = tmp_path / "docs" / "open-questions.md"
    page.parent.mkdir()
    old = "# Old\n\n## Budgets\n\n- **Q1 — On §8.** *Decision:* x. *Pinned by* `ROW-02`.\n"
    page.write_text(old, "utf-8")
    git("init", "-q", "-b", "main")
    git("add", "-A")
    git("commit", "-q", "-m", "old")
    git("checkout", "-q", "-b", "helper")
    page.write_text(old + APPENDED, "utf-8")
    git("commit", "-q", "-am", "appended")
    git("checkout", "-q", "main")
    page.write_text(ordered(old), "utf-8")
    git("commit", "-q", "-am", "ordered")
    merged = ordered(taken(["helper"], tmp_path))
    assert merged == ordered(old + APPENDED)
    assert [e.number for e in parse(merged)["5"]] == [997]
    assert [e.number for e in parse(merged)["8"]] == [1, 996]


def test_a_branch_that_changed_more_than_the_end_is_refused() -> None:
    assert appended("a\nb\n", "a\nb\n## New\n", "helper") == "## New\n"
    refused = re.escape("helper changed docs/open-questions.md above its end")
    with pytest.raises(Unplaced, match=refused):
        appended("a\nb\n", "a\nc\n## New\n", "helper")
