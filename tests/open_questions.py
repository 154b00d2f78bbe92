"""Keeps docs/open-questions.md ordered by the design's sections (§1 … §12, then the questions of
the conformance suite and its tools, which belong to no section), with its index at the top.

Run it after adding or merging entries, from the checkout's root::

    .venv/bin/python -m tests.open_questions          # rewrites the file in its order
    .venv/bin/python -m tests.open_questions --check  # exits 1 if the file is not in it

A branch that appended entries at the file's end conflicts there when merged (the ordering
rewrote the end); during that merge, take HEAD's file with what the branches appended, and
order it::

    .venv/bin/python -m tests.open_questions --take-appended BRANCH [BRANCH ...]

Each entry is one paragraph (an indented block may follow inside it) that starts
``**Q<n>. Title.** *Section:* §<k>.`` (or ``*Section:* none.`` for the suite's own questions),
then the question and the design sentences it turns on, ``*Decision:*`` and ``*Pinned by:*``.
An entry with no ``*Section:*`` tag — one appended under a new ``## ...`` heading at the end —
goes to the first section its title cites (``§7`` or a requirement ``CTX-7.n``), else the first
its question cites before ``*Decision:*``; the tag is then written into it, so a second run
changes nothing. An entry that cites none makes the run fail, naming it: give it a tag.
Within a section the entries go by number. Text under a heading that is no entry is refused,
never dropped. The script rewrites only the order, the index, the anchors, the tags and three
spellings (``- **Qn — …**`` bullets, ``*Pinned by*``, ``*Decided:*``); never an entry's words.
"""

import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

PATH = Path(__file__).resolve().parent.parent / "docs" / "open-questions.md"

GROUPS: tuple[tuple[str, str], ...] = (
    ("1", "§1 原始事实、有效上下文与请求视图 — raw facts, the effective context, the request view"),
    ("2", "§2 身份、顺序和对象结构 — identities, order and object structures"),
    ("3", "§3 上下文模块与类关系 — the context modules, hooks and patches"),
    ("4", "§4 历史投影：默认最近两次已结束提问 — history projection"),
    ("5", "§5 输入的保护、补充与转交 — protected inputs, supplements, delivery"),
    ("6", "§6 完整消息与协议修复 — complete messages and protocol repair"),
    ("7", "§7 预算公式与默认计算 — budget formulas, defaults and token estimation"),
    ("8", "§8 独立压缩任务的具体方案 — the compaction episode"),
    ("9", "§9 摘要覆盖与增量恢复 — summary coverage and snapshots"),
    ("10", "§10 上下文与执行现场的边界 — recovery, ownership and takeover"),
    ("11", "§11 异常与用户反馈 — errors, stops, deadlines and endings"),
    ("12", "§12 验收与故障注入 — the acceptance and fault-injection table"),
    ("none", "The conformance suite, the adapters and the tools — no design section"),
)
"""Each group's key (the ``*Section:*`` tag's value) and its heading, in the file's order."""

INTRO = """\
# Open questions found in the design, and what we decided

Where the design (`spec/design/`) is silent, ambiguous or self-contradictory, an entry records
the question, the design sentences it turns on (quoted, or cited by §), the decision and the
test or case that pins it. Entries are grouped by the design section whose sentences the
decision reads (the `*Section:*` tag; other sections it cites are in its text); a question of
how the suite, an adapter or a tool judges or shows a runtime is the suite's, even where it
cites a section, and goes last. Within a group entries go by number. A number is never
reused or renumbered: code, tests and other pages cite them. When a decision changes, change
the test in the same commit.

The order, this index and the anchors are written by `python -m tests.open_questions` (new
entries may be appended at the end under any heading; the script moves each to its section);
`tests/test_open_questions.py` checks the order, each entry's parts, that every test and case
an entry names exists, and that every Q number cited in the repository is here.
"""

ENTRY = re.compile(r"^(?:- )?\*\*Q(\d+)(?:\.| —) ")
TITLE = re.compile(r"^\*\*Q\d+\. ((?:(?!\*\*).)*)\*\*", re.DOTALL)
TAG = re.compile(TITLE.pattern + r" \*Section:\* (§(\d+)|none)\.", re.DOTALL)
CITED = re.compile(r"§(\d+)|CTX-(\d+)\.")
ANCHOR = re.compile(r'^<a id="(q\d+|s\d+|suite)"></a>$')
INLINE_ANCHOR = re.compile(r'^<a id="q\d+"></a>(?=\*\*Q)')
KEYS = {key for key, _ in GROUPS}


class Unplaced(ValueError):
    """The file holds something the script cannot place; the message says what and where."""


@dataclass(frozen=True)
class Entry:
    number: int
    lines: tuple[str, ...]
    """The entry as written, its first line starting ``**Q<n>. ``."""

    @property
    def text(self) -> str:
        return " ".join(line.strip() for line in self.lines)


def _normalised(lines: list[str]) -> list[str]:
    """One spelling of the entry's first line and labels; a bullet's indent taken off."""
    bullet = lines[0].startswith("- ")
    first = re.sub(r"^(?:- )?\*\*Q(\d+)(?:\.| —) ", r"**Q\1. ", lines[0])
    rest = [line[2:] if bullet and line.startswith("  ") else line for line in lines[1:]]
    out = [first, *rest]
    text = re.sub(r"\*Pinned(\s+)by\*", r"*Pinned\1by:*", "\n".join(out))
    out = re.sub(r"\*Decided:\*", "*Decision:*", text).split("\n")
    while out and out[-1] == "":
        out.pop()
    return out


def _key(entry: list[str], heading: str | None) -> str:
    """The group an entry goes to: its tag, else the group it is under, else what it cites."""
    tagged = TAG.match("\n".join(entry))
    if tagged:
        return tagged.group(3) or "none"
    groups = {title: key for key, title in GROUPS}
    if heading in groups:
        return groups[heading]
    text = " ".join(line.strip() for line in entry)
    title = TITLE.match(text)
    assert title is not None, entry[0]
    number = entry[0][3:entry[0].index(".")]
    question = text[title.end():].split("*Decision:*")[0]
    for part in (title.group(1), question):
        for cited in CITED.finditer(part):
            key = cited.group(1) or cited.group(2)
            if key in KEYS:
                return key
    raise Unplaced(f"Q{number} cites no design section (§n or CTX-n.m) in its title or before "
                   f"its *Decision:*; write its group into it: '**Q{number}. Title.** "
                   f"*Section:* §n.' (or '*Section:* none.' for a question of the suite itself)")


def _tagged(lines: list[str], key: str) -> tuple[str, ...]:
    text = "\n".join(lines)
    if TAG.match(text):
        return tuple(lines)
    title = TITLE.match(text)
    assert title is not None, lines[0]
    tag = "none" if key == "none" else f"§{key}"
    return tuple(f"{text[:title.end()]} *Section:* {tag}.{text[title.end():]}".split("\n"))


def _blocks(text: str) -> list[tuple[str | None, list[str]]]:
    """Each entry's lines with the heading it is under, in the file's order."""
    blocks: list[tuple[str | None, list[str]]] = []
    heading: str | None = None
    current: list[str] | None = None
    for line in text.split("\n"):
        line = INLINE_ANCHOR.sub("", line)
        if line.startswith("## "):
            current, heading = None, line[3:]
        elif ENTRY.match(line):
            current = [line]
            blocks.append((heading, current))
        elif ANCHOR.match(line) or heading in (None, "Index"):
            continue
        elif current is not None:
            current.append(line)
        elif line.strip():
            raise Unplaced(f"text under '## {heading}' that is no entry: {line[:70]!r} — "
                           f"write it into an entry (entries start '**Q<n>. Title.**')")
    return blocks


def parse(text: str) -> dict[str, list[Entry]]:
    """The entries of the file by group, each group by number."""
    groups: dict[str, list[Entry]] = {key: [] for key, _ in GROUPS}
    seen: dict[int, str | None] = {}
    for heading, block in _blocks(text):
        lines = _normalised(block)
        number = int(lines[0][3:lines[0].index(".")])
        if number in seen:
            raise Unplaced(f"Q{number} is written twice (under '{seen[number]}' and "
                           f"'{heading}'): a Q number is one entry; give one a free number")
        seen[number] = heading
        key = _key(lines, heading)
        groups[key].append(Entry(number, _tagged(lines, key)))
    for entries in groups.values():
        entries.sort(key=lambda entry: entry.number)
    return groups


def render(groups: dict[str, list[Entry]]) -> str:
    """The file: the introduction, the index, then each group that has entries."""
    index = ["## Index", "", "| Section | Questions |", "|---|---|"]
    body: list[str] = []
    for key, title in GROUPS:
        if not groups[key]:
            continue
        anchor = f"s{key}" if key != "none" else "suite"
        links = ", ".join(f"[Q{e.number}](#q{e.number})" for e in groups[key])
        index.append(f"| [{title}](#{anchor}) | {links} |")
        body += ["", f'<a id="{anchor}"></a>', "", f"## {title}"]
        for entry in groups[key]:
            first, *rest = entry.lines
            body += ["", f'<a id="q{entry.number}"></a>{first}', *rest]
    return "\n".join([INTRO, *index, *body, ""])


def ordered(text: str) -> str:
    """The file as the script writes it; the same text for a file already in order."""
    return render(parse(text))


def appended(base: str, branch: str, name: str) -> str:
    """What ``branch`` (the file on a branch called ``name``) appended to ``base`` (the file
    where that branch began)."""
    if not branch.startswith(base):
        raise Unplaced(f"{name} changed docs/open-questions.md above its end; only appended "
                       f"entries can be taken: merge that part by hand")
    return branch[len(base):]


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True,
                          check=True).stdout


def taken(branches: list[str], root: Path = PATH.parent.parent) -> str:
    """HEAD's file with the entries each branch appended since it began (a merge of such a
    branch conflicts at the file's end, which the ordering rewrote)."""
    show = "{}:docs/open-questions.md"
    text = _git(root, "show", show.format("HEAD"))
    for branch in branches:
        began = _git(root, "merge-base", "HEAD", branch).strip()
        text = text.rstrip("\n") + "\n" + appended(_git(root, "show", show.format(began)),
                                                   _git(root, "show", show.format(branch)),
                                                   branch)
    return text


def main(argv: list[str]) -> int:
    branches = argv[argv.index("--take-appended") + 1:] if "--take-appended" in argv else []
    try:
        if branches:  # written before it is ordered, so that what cannot be placed is fixed there
            PATH.write_text(taken(branches), "utf-8")
        text = PATH.read_text("utf-8")
        new = ordered(text)
    except Unplaced as problem:
        print(f"docs/open-questions.md: {problem}; then run python -m tests.open_questions",
              file=sys.stderr)
        return 2
    if "--check" in argv:
        if new != text:
            print("docs/open-questions.md is not in its order: run "
                  "python -m tests.open_questions", file=sys.stderr)
            return 1
        return 0
    PATH.write_text(new, "utf-8")
    print(f"docs/open-questions.md: {sum(map(len, parse(new).values()))} entries in order")
    return 0

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
