"""The replay page's timeline (``ctxspec replay --html``), one inline SVG per zoom: every slot
of :mod:`replay_data` a stacked bar of its tokens against the trigger floor(r × B), B and W;
above the bars the workflow nodes, the Runs, the Executors nested in them and the compaction
episodes; under them the marks of :mod:`replay_marks` in their rows and each slot's decision.

The y-axis is scaled to what the bars need (Q434): to the tallest bar, or to a budget line
when that line is within twice the tallest bar, so the bars and the lines they are judged
against are both legible; a line further up is named above the plot instead. The second zoom
scales to W, as the design's budget is drawn.
"""

import json
import math
from collections.abc import Iterator
from fractions import Fraction
from itertools import groupby

from ctxspec.conformance.html_page import esc, px
from ctxspec.conformance.replay_data import LABELS, Bar, Budget, ReplayPage, Span
from ctxspec.conformance.replay_marks import ROWS, Mark

LEFT, SLOT, BAR, PLOT, RIGHT, ROW = 140, 92, 44, 300, 24, 16
CHAR = Fraction(15, 2)
"""Width of one character of the 11 px labels, generously (capitals measure about 7.3 px):
labels are cut to fit by it."""
LONGEST = 36
"""Characters of a decision label shown whole (the longest error code has 33)."""
COLOURS = {"fixed": "#8c959f", "protected": "#2f81f7", "material": "#e3b341",
           "summary": "#8250df", "hooks": "#db61a2", "unsplit": "#d0d7de"}
LINES = (("window", "W", "#1d232a", ""), ("input_budget", "B", "#0969da", "6 3"),
         ("trigger", "⌊r×B⌋", "#bc4c00", "2 3"))
"""The budget lines: the attribute of :class:`Budget`, the label, colour and dash."""
MARK_COLOURS = {"inputs": "#0969da", "hooks": "#bf3989", "tools": "#1d232a",
                "graph": "#1a7f37"}
NAME_COLOURS = {"question": "#0969da", "supplement": "#8a4600"}
"""A question's mark and a supplement's, told apart by colour as well as by letter."""


def fit(text: str, width: Fraction | int) -> str:
    """A label cut to the room it has, so no label runs over its neighbour."""
    room = int(Fraction(width) / CHAR)
    return text if len(text) <= room else text[:max(room - 1, 0)] + "…"


def decision(bar: Bar) -> str:
    """The label under a bar: its §8 decision (who asked, when not the root role), its chunk,
    why it was not sent, or the capability it called."""
    if bar.kind == "compaction":
        return bar.title
    if bar.kind == "evaluated":
        return f"§8 {bar.decision}, not sent"
    if bar.kind in ("capability", "none"):
        return f"{bar.title}: {bar.decision}" if bar.kind == "capability" else bar.title
    return bar.decision if bar.role == "root" else f"{bar.role}: {bar.decision}"


def scale_top(page: ReplayPage, to_window: bool) -> int:
    """The token count at the top of the plot (see the module's docstring), with headroom."""
    tallest = max([1, *(b.total or 0 for b in page.bars)])
    lines: list[int] = [getattr(b.budget, name) for b in page.bars if b.budget is not None
             for name, *_ in LINES]
    if to_window:
        top = max([tallest, *lines])
    else:
        top = max([tallest, *(v for v in lines if v <= 2 * tallest)])
    return top + top // 20 + 1


class Plot:
    """Exact coordinates: x of a slot, y of a token count, and the rows above and below."""

    def __init__(self, page: ReplayPage, to_window: bool) -> None:
        self.slots = max(len(page.bars), 1)
        self.top_value = scale_top(page, to_window)
        self.width = LEFT + self.slots * SLOT + RIGHT
        y = 2
        self.nodes_y = y
        y += 34 if page.nodes else 0
        self.runs_y = y
        y += 44
        self.executors_y = y
        y += 20 if page.executors else 0
        self.offscale_y = y + 11
        y += 16
        self.episodes_y = y
        self.top = y + 18
        self.base = self.top + PLOT
        self.rows = [name for name, _ in ROWS if any(m.row == name for m in page.marks)]
        self.marks_y = self.base + 22
        longest = max([8, *(len(decision(bar)) for bar in page.bars)])
        self.decisions_y = self.marks_y + ROW * len(self.rows) + 6
        self.label_room = min(longest, LONGEST) * CHAR
        self.height = self.decisions_y + math.ceil(self.label_room) + 8

    def x(self, slot: int) -> int:
        return LEFT + slot * SLOT

    def y(self, tokens: int) -> Fraction:
        return self.top + Fraction(PLOT * (self.top_value - tokens), self.top_value)


def _line_groups(page: ReplayPage) -> Iterator[tuple[int, int, Budget]]:
    """Runs of consecutive slots with the same budget figures: (first, last, budget)."""
    index = 0
    for budget, members in groupby(page.bars, key=lambda b: b.budget):
        count = len(list(members))
        if budget is not None:
            yield index, index + count - 1, budget
        index += count


def _budget_lines(page: ReplayPage, plot: Plot) -> list[str]:
    out = []
    for first, last, budget in _line_groups(page):
        placed: list[Fraction] = []
        above = []
        for attribute, name, colour, dash in LINES:
            value = getattr(budget, attribute)
            if value > plot.top_value:
                above.append(f"{name} {value}")
                continue
            y = plot.y(value)
            out.append(f'<line class="budget-line" data-line="{attribute}" data-value="{value}" '
                       f'x1="{plot.x(first)}" x2="{plot.x(last + 1)}" y1="{px(y)}" y2="{px(y)}" '
                       f'stroke="{colour}" stroke-width="1.5" stroke-dasharray="{dash}">'
                       f'<title>{esc(name)} = {value}</title></line>')
            # In the margin for the first bars; above the line where the figures change.
            label_y = y + 4 if first == 0 else y - 3
            while any(abs(label_y - other) < 12 for other in placed):
                label_y -= 12  # keep close lines' labels apart
            placed.append(label_y)
            x, anchor, room = (LEFT - 6, "end", LEFT - 8) if first == 0 else \
                (plot.x(first) + 3, "start", (last - first + 1) * SLOT - 6)
            out.append(f'<text class="line-label" x="{x}" y="{px(label_y)}" '
                       f'text-anchor="{anchor}" fill="{colour}">'
                       f'{esc(fit(f"{name} {value}", room))}</text>')
        if above:
            text = "above the plot: " + ", ".join(above)
            out.append(f'<text class="offscale" x="{plot.x(first) + 3}" y="{plot.offscale_y}" '
                       f'fill="#57606a">{esc(fit(text, (last - first + 1) * SLOT - 6))}'
                       f"<title>{esc(text)}</title></text>")
    return out


def _bar(index: int, bar: Bar, plot: Plot) -> list[str]:
    centre = plot.x(index) + SLOT // 2
    left = centre - BAR // 2
    outline = {"evaluated": ' stroke="#1d232a" stroke-dasharray="4 2" fill-opacity="0.45"',
               "unsent": ' stroke="#cf222e" stroke-width="2" stroke-dasharray="5 3" '
                         'fill-opacity="0.45"',
               "compaction": ' stroke="#8250df" stroke-width="2"'}.get(bar.kind, "")
    out = [f'<g class="bar" data-index="{index + 1}" data-kind="{bar.kind}" '
           f'data-role="{esc(bar.role)}" '
           f'data-total="{bar.total if bar.total is not None else ""}">']
    stacked = 0
    for part, tokens in bar.segments:
        top, bottom = plot.y(stacked + tokens), plot.y(stacked)
        out.append(f'<rect class="seg" data-part="{part}" data-tokens="{tokens}" x="{left}" '
                   f'y="{px(top)}" width="{BAR}" height="{px(bottom - top)}" '
                   f'fill="{COLOURS[part]}"{outline}><title>{esc(LABELS[part])}: {tokens} '
                   f'tokens</title></rect>')
        if part == "summary" and bar.target is not None:
            out.extend(_target(bar.target, stacked, tokens, left, plot))
        stacked += tokens
    if bar.total is not None:
        out.append(f'<text class="total" x="{centre}" y="{px(plot.y(bar.total) - 4)}" '
                   f'text-anchor="middle">{esc(fit(str(bar.total), SLOT - 4))}</text>')
    if bar.kind == "capability":
        out.append(f'<rect class="capability" x="{left}" y="{plot.base - 16}" width="{BAR}" '
                   f'height="16" fill="#dafbe1" stroke="#1a7f37"><title>capability '
                   f'{esc(bar.title)}</title></rect>')
    out.append(f'<text class="slot-no" x="{centre}" y="{plot.base + 14}" '
               f'text-anchor="middle">#{index + 1}</text>')
    said = decision(bar)
    y = plot.decisions_y
    out.append(f'<text class="decision" x="{centre + 4}" y="{y}" text-anchor="end" '
               f'transform="rotate(-90 {centre + 4} {y})">'
               f'{esc(fit(said, plot.label_room))}<title>{esc(said)}</title></text>')
    out.append("</g>")
    return out


def _target(target: int, below: int, summary: int, left: int, plot: Plot) -> list[str]:
    """T drawn over a summary part: where a summary of T tokens would end (§8)."""
    y = plot.y(below + target)
    over = "over" if summary > target else "within"
    return [f'<line class="target" data-value="{target}" data-summary="{summary}" '
            f'x1="{left - 6}" x2="{left + BAR + 6}" y1="{px(y)}" y2="{px(y)}" stroke="#1d232a" '
            f'stroke-width="2"><title>T = {target}: the summary has {summary} tokens, {over} '
            f'its target</title></line>',
            f'<text class="target-label" x="{left + BAR + 8}" y="{px(y + 4)}">T {target}</text>']


def _span(span: Span, y: int, height: int, plot: Plot, css: str, fill: str) -> str:
    x, width = plot.x(span.first) + 2, (span.last - span.first + 1) * SLOT - 4
    rows = [r for r in (span.label, span.detail) if r]
    texts = "".join(f'<text x="{x + 4}" y="{y + 12 + 13 * i}">{esc(fit(row, width - 8))}'
                    f"<title>{esc(row)}</title></text>" for i, row in enumerate(rows))
    return (f'<g class="{css}" data-label="{esc(span.label)}" data-status="{esc(span.status)}" '
            f'data-detail="{esc(span.detail)}" '
            f'data-first="{span.first + 1}" data-last="{span.last + 1}"><rect x="{x}" y="{y}" '
            f'width="{max(width, 1)}" height="{height}" fill="{fill}" rx="3"/>{texts}</g>')


def _bands(page: ReplayPage, plot: Plot) -> list[str]:
    out = [_span(node, plot.nodes_y, 30, plot, "node",
                 {"succeeded": "#dafbe1", "failed": "#ffebe9"}.get(node.status, "#eaeef2"))
           for node in page.nodes if node.last >= node.first]
    sessions = len({r.session for r in page.runs}) > 1
    for run in page.runs:
        if not run.bars:
            continue
        status = run.status or "(did not end)"
        label = f"session {run.session} · {run.label}" if sessions else run.label
        if run.node and not page.nodes:
            label = f"{run.node} · {label}"
        band = Span(label, min(run.bars), max(run.bars), status, status)
        colour = {"succeeded": "#dafbe1", "failed": "#ffebe9"}.get(status, "#eaeef2")
        out.append(_span(band, plot.runs_y, 40, plot, "run-band", colour))
        if band.first > 0:
            out.append(f'<line x1="{plot.x(band.first)}" x2="{plot.x(band.first)}" '
                       f'y1="{plot.runs_y}" y2="{plot.base}" stroke="#8c959f"/>')
    for executor in page.executors:
        out.append(_span(executor, plot.executors_y, 16, plot, "executor", "#fff1e5"))
        x, width = plot.x(executor.first) + 1, (executor.last - executor.first + 1) * SLOT - 2
        out.append(f'<rect class="executor-span" x="{x}" y="{plot.executors_y + 16}" '
                   f'width="{width}" height="{plot.base - plot.executors_y - 16}" fill="none" '
                   f'stroke="#bc4c00" stroke-dasharray="2 2"/>')
    for number, episode in enumerate(page.episodes):
        x, width = plot.x(episode.first) + 2, (episode.last - episode.first + 1) * SLOT - 4
        label = episode.label + (f": {len(episode.coverage)} chunks" if episode.coverage
                                 else "")
        out.append(f'<g class="episode" data-episode="{number + 1}"><rect x="{x}" '
                   f'y="{plot.episodes_y}" width="{width}" height="{plot.base - plot.episodes_y}"'
                   f' fill="#8250df" fill-opacity="0.08" stroke="#8250df" '
                   f'stroke-dasharray="3 3"/><text x="{x + 4}" y="{plot.episodes_y + 13}" '
                   f'fill="#8250df">{esc(fit(label, width - 8))}<title>{esc(label)}</title>'
                   "</text></g>")
    for crash in page.crashes:
        x = plot.x(crash.after_bars)
        out.append(f'<g class="crash"><line x1="{x}" x2="{x}" y1="{plot.episodes_y}" '
                   f'y2="{plot.base}" stroke="#cf222e" stroke-width="3" stroke-dasharray="6 3"/>'
                   f'<text x="{x + 4}" y="{plot.top + 12}" fill="#cf222e">crash<title>'
                   f'{esc(crash.text)}</title></text><text x="{x + 4}" y="{plot.top + 25}" '
                   f'fill="#cf222e">takeover</text></g>')
    return out


def _marks(page: ReplayPage, plot: Plot) -> list[str]:
    out = []
    labels = dict(ROWS)
    for row_index, row in enumerate(plot.rows):
        y = plot.marks_y + ROW * row_index
        out.append(f'<text class="row-label" x="{LEFT - 6}" y="{y + 11}" text-anchor="end" '
                   f'fill="{MARK_COLOURS[row]}">{esc(labels[row])}</text>')
        in_row = sorted((m for m in page.marks if m.row == row), key=lambda m: m.slot)
        for slot, group in groupby(in_row, key=lambda m: m.slot):
            marks: list[Mark] = list(group)
            text = " ".join(m.label for m in marks)
            names = json.dumps([m.name for m in marks], ensure_ascii=False)
            titles = "\n".join(m.title for m in marks)
            out.append(f'<text class="mark" data-row="{row}" data-slot="{slot + 1}" '
                       f'data-names="{esc(names)}" data-labels="{esc(text)}" '
                       f'x="{plot.x(slot) + 4}" y="{y + 11}" fill="{MARK_COLOURS[row]}">'
                       f"{_spans(marks, SLOT - 8)}<title>{esc(titles)}</title></text>")
    return out


def _spans(marks: list[Mark], room: int) -> str:
    """The marks' labels side by side, each in its own colour (a supplement apart from a
    question), cut as one label is when they run out of room."""
    cut = fit(" ".join(m.label for m in marks), room)
    out, at = [], 0
    for mark in marks:
        part = cut[at:at + len(mark.label) + 1]
        if not part:
            break
        colour = NAME_COLOURS.get(mark.name)
        fill = f' fill="{colour}"' if colour else ""
        out.append(f"<tspan{fill}>{esc(part)}</tspan>")
        at += len(mark.label) + 1
    return "".join(out)


def timeline_svg(page: ReplayPage, to_window: bool = False) -> str:
    plot = Plot(page, to_window)
    ident = "timeline-window" if to_window else "timeline"
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" id="{ident}" width="{plot.width}" '
             f'height="{plot.height}" viewBox="0 0 {plot.width} {plot.height}" role="img" '
             f'data-top-value="{plot.top_value}">',
             *_bands(page, plot),
             f'<line class="baseline" data-value="0" x1="{LEFT}" x2="{plot.x(plot.slots)}" '
             f'y1="{plot.base}" y2="{plot.base}" stroke="#1d232a"/>',
             f'<text x="{LEFT - 6}" y="{plot.base + 4}" text-anchor="end">0</text>']
    for index, bar in enumerate(page.bars):
        parts.extend(_bar(index, bar, plot))
    parts.extend(_budget_lines(page, plot))
    parts.extend(_marks(page, plot))
    parts.append("</svg>")
    return "\n".join(parts)
