"""``ctxspec conformance --html FILE.html``: the conformance report as one self-contained page — the
driver and versions at the top, then two matrices of status counts: one row per source of the
cases (a §12 row, a worked example, a section's cases, bad input, the crash matrix) and one row
per design section their requirements belong to. Every count opens, in one click, to its cases;
a failed or errored case shows its detail there."""

import platform
import re
from collections.abc import Callable, Mapping, Sequence
from importlib import metadata
from pathlib import Path

from ctxspec.conformance.harness import SUITE_VERSION, CaseResult
from ctxspec.conformance.html_page import document, esc, write_whole
from ctxspec.conformance.probes import ProbeResult

STATUSES = ("passed", "failed", "unsupported", "error")
CSS = """
td.count { text-align: right; min-width: 90px; }
td.count.zero { color: #afb8c1; }
td.failed, td.error { background: #ffebe9; } td.unsupported { background: #fff8c5; }
td.passed { background: #dafbe1; }
td.zero { background: none; }
.detail { max-width: 900px; }
ul.cases { margin: 4px 0; padding-left: 18px; text-align: left; }
"""
_SECTION = re.compile(r"^CTX-(\d+)\.")


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
        body.append(f'<tr data-row="{esc(name)}"><th>{esc(name)}</th>'
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


def render_report(results: Sequence[CaseResult], driver: str,
                  probes: Mapping[str, ProbeResult], seconds: float) -> str:
    """The whole report page as HTML text."""
    counts = {s: sum(r.status == s for r in results) for s in STATUSES}
    verdict = "every case passed or is unsupported" if not counts["failed"] + counts["error"] \
        else f"{counts['failed']} failed, {counts['error']} errored"
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
        f'<p id="verdict" class="{"passed" if not failures else "failed"}">{esc(verdict)}</p>',
        '<table id="facts">' + "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>"
                                       for k, v in facts) + "</table>",
        "<h2>Cases by source</h2>",
        '<p class="note">One row per source of the cases: a §12 row, a worked example, a '
        "section's cases, bad input, the crash matrix. Click a count to see its cases and, for a "
        "failure, what was expected and seen.</p>",
        _matrix("by-source", "source", _grouped(results, lambda r: [r.case.source])),
        "<h2>Cases by design section</h2>",
        '<p class="note">A case counts in every section its requirement IDs belong to, so a row '
        "may share cases with another.</p>",
        _matrix("by-section", "section", ordered),
        "<h2>Capabilities declared and probed</h2>",
        ("<table><tr><th>capability</th><th>probe</th><th>detail</th></tr>" + probe_rows
         + "</table>") if probe_rows else "<p>The driver declares no capability.</p>",
    ]
    if failures:
        body += ['<h2>Every failure</h2><ul id="failures" class="cases">',
                 *(_case_item(r) for r in failures), "</ul>"]
    return document("ctxspec conformance report", CSS, "\n".join(body))


def write_report_page(path: Path, results: Sequence[CaseResult], driver: str,
                      probes: Mapping[str, ProbeResult], seconds: float) -> None:
    write_whole(path, render_report(results, driver, probes, seconds))
