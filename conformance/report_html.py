"""``ctxspec conformance --html FILE.html``: the conformance report as one self-contained page — the
verdict, its counts linking to the failures, then every failure (its source, the rule its check
cites, what was expected and seen, why it fails where the driver's profile says, and the command
that replays it), then the driver and versions and two matrices of status counts: one row per
source of the cases (a §12 row by its number and title, a worked example, a section's cases,
bad input, the crash matrix) and one row per design section their requirements belong to. Every
count opens, in one click, to its cases; a failed or errored case shows its detail there."""

import platform
import re
from collections.abc import Callable, Mapping, Sequence
from importlib import metadata
from pathlib import Path

from ctxspec.conformance.compat import ROWS
from ctxspec.conformance.harness import SUITE_VERSION, CaseResult
from ctxspec.conformance.html_page import document, esc, write_whole
from ctxspec.conformance.probes import ProbeResult
from ctxspec.conformance.replays import replay_command
from ctxspec.conformance.verdicts import rule

STATUSES = ("passed", "failed", "unsupported", "error")
CSS = """
td.count { text-align: right; min-width: 90px; }
td.count.zero { color: #afb8c1; }
td.failed, td.error { background: #ffebe9; } td.unsupported { background: #fff8c5; }
td.passed { background: #dafbe1; }
td.zero { background: none; }
.detail { max-width: 900px; }
ul.cases { margin: 4px 0; padding-left: 18px; text-align: left; }
#failures > li { border-left: 4px solid #cf222e; padding: 4px 10px; margin: 10px 0;
                 list-style: none; }
#failures .rule { font-weight: 600; margin: 2px 0; } #failures .why { margin: 4px 0; }
#failures .source { color: #57606a; }
#verdict a { color: #cf222e; }
"""
_SECTION = re.compile(r"^CTX-(\d+)\.")
_ROW = re.compile(r"^§12 rows? (\d+)(?:-(\d+))?$")


def _versions() -> list[tuple[str, str]]:
    try:
        ctxspec = metadata.version("ctxspec")
    except metadata.PackageNotFoundError:  # a checkout that was not installed
        ctxspec = "(not installed)"
    return [("suite version", SUITE_VERSION), ("ctxspec", ctxspec),
            ("Python", platform.python_version()), ("platform", platform.platform())]


def _case_item(result: CaseResult) -> str:
    detail = f'<pre class="detail">{esc(result.detail)}</pre>' if result.detail else ""
    return (f'<li data-case="{esc(result.case.id)}"><code>{esc(result.case.id)}</code> '
            f"{esc(result.case.title)}{detail}</li>")


def named(source: str) -> str:
    """A source as the page names it: a §12 row with its title (``§12 row 2: five
    supplements in one Run``), any other source as it is."""
    match = _ROW.match(source)
    if match is None:
        return source
    numbers = range(int(match.group(1)), int(match.group(2) or match.group(1)) + 1)
    return f"{source}: " + "; ".join(ROWS[n] for n in numbers if n in ROWS)


def _failure(result: CaseResult, driver: str, why: Mapping[str, str]) -> str:
    """One failure: the case and its source, the rule its check cites, what was expected and
    seen, why (when the driver's profile says) and the command that replays it."""
    case = result.case
    cited = rule(case, result.requirement or None)
    lines = result.detail.splitlines()
    shown = lines[1:] if lines and lines[0] == cited else lines
    reason = why.get(case.id)
    return (f'<li id="failure-{esc(case.id)}" data-case="{esc(case.id)}">'
            f"<code>{esc(case.id)}</code> <b>{esc(result.status)}</b> {esc(case.title)} "
            f'<span class="source">({esc(named(case.source))})</span>'
            + (f'<p class="rule">{esc(cited)}</p>' if result.status == "failed" else "")
            + f'<pre class="detail">{esc(chr(10).join(shown))}</pre>'
            + (f'<p class="why">Why: {esc(reason)}</p>' if reason else "")
            + f'<p class="replay">Replay: <code>{esc(replay_command(case.id, driver))}'
            "</code></p></li>")


def _cell(status: str, members: Sequence[CaseResult]) -> str:
    if not members:
        return '<td class="count zero">0</td>'
    items = "".join(_case_item(r) for r in members)
    return (f'<td class="count {status}" data-status="{status}"><details>'
            f"<summary>{len(members)}</summary><ul class=\"cases\">{items}</ul></details></td>")


def _matrix(table_id: str, heading: str, rows: Mapping[str, Sequence[CaseResult]]) -> str:
    head = "".join(f"<th>{s}</th>" for s in STATUSES)
    body = []
    for name, members in rows.items():
        cells = "".join(_cell(s, [r for r in members if r.status == s]) for s in STATUSES)
        body.append(f'<tr data-row="{esc(name)}"><th>{esc(named(name))}</th>'
                    f'<td class="count">{len(members)}</td>{cells}</tr>')
    return (f'<table id="{table_id}"><tr><th>{esc(heading)}</th><th>cases</th>{head}</tr>'
            + "".join(body) + "</table>")


def _grouped(results: Sequence[CaseResult],
             keys: Callable[[CaseResult], Sequence[str]]) -> dict[str, list[CaseResult]]:
    groups: dict[str, list[CaseResult]] = {}
    for result in results:
        for key in keys(result):
            groups.setdefault(key, []).append(result)
    return groups


def _sections(result: CaseResult) -> list[str]:
    numbers = sorted({int(m.group(1)) for r in result.case.requirements
                      if (m := _SECTION.match(r))})
    return [f"§{n}" for n in numbers] or ["(no requirement)"]


def _verdict(counts: Mapping[str, int]) -> str:
    """The verdict line; its counts of failures link to them."""
    if not counts["failed"] + counts["error"]:
        return "every case passed or is unsupported"
    return ", ".join(f'<a href="#failures">{counts[s]} {word}</a>' if counts[s] else
                     f"{counts[s]} {word}" for s, word in (("failed", "failed"),
                                                            ("error", "errored")))


def render_report(results: Sequence[CaseResult], driver: str,
                  probes: Mapping[str, ProbeResult], seconds: float,
                  why: Mapping[str, str] | None = None) -> str:
    """The whole report page as HTML text; ``why``: case ID → why it fails (the driver's
    compatibility profile, conformance/compat.py), where known."""
    counts = {s: sum(r.status == s for r in results) for s in STATUSES}
    facts = [("driver", driver), *_versions(),
             ("cases", f"{len(results)} in {seconds:.2f} s: " + ", ".join(
                 f"{counts[s]} {s}" for s in STATUSES))]
    probe_rows = "".join(f"<tr><td>{esc(p.capability)}</td><td>{esc(p.status)}</td>"
                         f"<td>{esc(p.detail)}</td></tr>" for p in probes.values())
    by_section = _grouped(results, _sections)
    ordered = dict(sorted(by_section.items(),
                          key=lambda item: int(item[0][1:]) if item[0][1:].isdigit() else 99))
    failures = [r for r in results if r.status in ("failed", "error")]
    body = [
        "<h1>ctxspec conformance report</h1>",
        f'<p id="verdict" class="{"passed" if not failures else "failed"}">'
        f"{_verdict(counts)}</p>"]
    if failures:
        body += [f'<h2 id="failures-heading">Failures ({len(failures)})</h2>',
                 '<p class="note">Each with the rule its check cites, what was expected and '
                 "seen, why where the driver's profile says, and the command that shows its run "
                 "beside the reference's.</p>",
                 '<ul id="failures">', *(_failure(r, driver, why or {}) for r in failures),
                 "</ul>"]
    body += [
        '<table id="facts">' + "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>"
                                       for k, v in facts) + "</table>",
        "<h2>Cases by source</h2>",
        '<p class="note">One row per source of the cases: a §12 row (its number and title), a '
        "worked example, a section's cases, bad input, the crash matrix. Click a count to see "
        "its cases and, for a failure, what was expected and seen.</p>",
        _matrix("by-source", "source", _grouped(results, lambda r: [r.case.source])),
        "<h2>Cases by design section</h2>",
        '<p class="note">A case counts in every section its requirement IDs belong to, so a row '
        "may share cases with another.</p>",
        _matrix("by-section", "section", ordered),
        "<h2>Capabilities declared and probed</h2>",
        ("<table><tr><th>capability</th><th>probe</th><th>detail</th></tr>" + probe_rows
         + "</table>") if probe_rows else "<p>The driver declares no capability.</p>",
    ]
    return document("ctxspec conformance report", CSS, "\n".join(body))


def write_report_page(path: Path, results: Sequence[CaseResult], driver: str,
                      probes: Mapping[str, ProbeResult], seconds: float,
                      why: Mapping[str, str] | None = None) -> None:
    write_whole(path, render_report(results, driver, probes, seconds, why))
