"""The replay page (``ctxspec replay SCENARIO.json --html FILE.html``): the timeline of a
replay as one self-contained HTML page — every model request a stacked bar of its tokens
against the trigger floor(r × B), B and W; compaction episodes and their chunks set apart; each
request's messages and the values hooks changed; each input's delivery states per Run; Run
endings; crashes and takeovers. What is drawn comes from :mod:`replay_data`."""

from collections.abc import Iterator, Sequence
from fractions import Fraction
from itertools import groupby

from ctxspec.conformance.html_page import document, esc, px
from ctxspec.conformance.replay_data import LABELS, Bar, Budget, Change, ReplayPage

LEFT, SLOT, BAR, BANDS, TOP, PLOT, RIGHT = 140, 84, 44, 46, 76, 300, 24
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
LEGEND = {"W": "W, the window", "B": "B = W − O − S", "⌊r×B⌋": "the trigger floor(r × B)"}
STATES = {"pending": "#d0d7de", "claimed": "#f2cc60", "delivered": "#4ac26b",
          "carried": "#54aeff"}
CSS = """
svg text { font: 11px system-ui, sans-serif; fill: #1d232a; }
.swatch { display: inline-block; width: 12px; height: 12px; margin: 0 4px 0 12px;
          vertical-align: -2px; border: 1px solid #57606a; }
.chip { display: inline-block; padding: 0 6px; margin: 1px; border-radius: 8px;
        white-space: nowrap;
        font-size: 12px; border: 1px solid #8c959f; }
.failed, .error { color: #cf222e; font-weight: 600; } .succeeded { color: #1a7f37; }
.changed { background: #fff8c5; } td.nowrap { white-space: nowrap; }
.delivery { font-size: 12px; color: #57606a; white-space: nowrap; }
"""


def _fit(text: str, width: Fraction | int) -> str:
    """A label cut to the room it has, so no label runs over its neighbour."""
    room = int(Fraction(width) / CHAR)
    return text if len(text) <= room else text[:max(room - 1, 0)] + "…"


def _decision(bar: Bar) -> str:
    """The label under a bar: its §8 decision (who asked, when not the root role), its chunk,
    or why it was not sent."""
    if bar.kind == "compaction":
        return bar.title
    if bar.kind == "evaluated":
        return f"§8 {bar.decision}, not sent"
    return bar.decision if bar.role == "root" else f"{bar.role}: {bar.decision}"


class _Plot:
    """Exact coordinates: x of a slot, y of a token count (0 at the baseline, the largest
    figure on the page at the top)."""

    def __init__(self, page: ReplayPage) -> None:
        self.slots = max(len(page.bars), 1)
        self.top_value = max([1, *(b.budget.window for b in page.bars),
                              *(b.total or 0 for b in page.bars)])
        self.width = LEFT + self.slots * SLOT + RIGHT
        longest = max([8, *(len(_decision(bar)) for bar in page.bars)])
        self.bottom = 30 + int(min(longest, LONGEST) * CHAR)
        self.height = TOP + PLOT + self.bottom

    def x(self, slot: int) -> int:
        return LEFT + slot * SLOT

    def y(self, tokens: int) -> Fraction:
        return TOP + Fraction(PLOT * (self.top_value - tokens), self.top_value)


def _line_groups(page: ReplayPage) -> Iterator[tuple[int, int, Budget]]:
    """Runs of consecutive bars with the same budget figures: (first, last, budget)."""
    index = 0
    for budget, members in groupby(page.bars, key=lambda b: b.budget):
        count = len(list(members))
        yield index, index + count - 1, budget
        index += count


def _budget_lines(page: ReplayPage, plot: _Plot) -> list[str]:
    out = []
    for first, last, budget in _line_groups(page):
        placed: list[Fraction] = []
        for attribute, name, colour, dash in LINES:
            value = getattr(budget, attribute)
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
                       f'{esc(_fit(f"{name} {value}", room))}</text>')
    return out


def _bar(index: int, bar: Bar, plot: _Plot) -> list[str]:
    centre = plot.x(index) + SLOT // 2
    left = centre - BAR // 2
    outline = {"evaluated": ' stroke="#1d232a" stroke-dasharray="4 2" fill-opacity="0.45"',
               "unsent": ' stroke="#cf222e" stroke-dasharray="4 2" fill-opacity="0.45"',
               "compaction": ' stroke="#8250df" stroke-width="2"'}.get(bar.kind, "")
    out = [f'<g class="bar" data-index="{index + 1}" data-kind="{bar.kind}" '
           f'data-total="{bar.total if bar.total is not None else ""}">']
    stacked = 0
    for part, tokens in bar.segments:
        top, bottom = plot.y(stacked + tokens), plot.y(stacked)
        out.append(f'<rect class="seg" data-part="{part}" data-tokens="{tokens}" x="{left}" '
                   f'y="{px(top)}" width="{BAR}" height="{px(bottom - top)}" '
                   f'fill="{COLOURS[part]}"{outline}><title>{esc(LABELS[part])}: {tokens} '
                   f'tokens</title></rect>')
        stacked += tokens
    if bar.total is not None:
        out.append(f'<text class="total" x="{centre}" y="{px(plot.y(bar.total) - 4)}" '
                   f'text-anchor="middle">{esc(_fit(str(bar.total), SLOT - 4))}</text>')
    base = TOP + PLOT
    out.append(f'<text class="slot-no" x="{centre}" y="{base + 14}" text-anchor="middle">'
               f'#{index + 1}</text>')
    decision = _decision(bar)
    out.append(f'<text class="decision" x="{centre + 4}" y="{base + 22}" text-anchor="end" '
               f'transform="rotate(-90 {centre + 4} {base + 22})">'
               f'{esc(_fit(decision, plot.bottom - 28))}<title>{esc(decision)}</title></text>')
    out.append("</g>")
    return out


def _bands(page: ReplayPage, plot: _Plot) -> list[str]:
    out = []
    for run in page.runs:
        if not run.bars:
            continue
        first, last = min(run.bars), max(run.bars)
        x, width = plot.x(first) + 2, (last - first + 1) * SLOT - 4
        status = run.status or "(did not end)"
        colour = {"succeeded": "#dafbe1", "failed": "#ffebe9"}.get(status, "#eaeef2")
        rows = [run.node or "", run.label if len({r.session for r in page.runs}) == 1
                else f"session {run.session} · {run.label}", status]
        texts = "".join(f'<text x="{x + 4}" y="{14 + 13 * i}">{esc(_fit(row, width - 8))}'
                        f"<title>{esc(row)}</title></text>"
                        for i, row in enumerate(r for r in rows if r))
        out.append(f'<g class="run-band" data-status="{esc(status)}"><rect x="{x}" y="2" '
                   f'width="{width}" height="{BANDS - 6}" fill="{colour}" rx="3"/>{texts}</g>')
        if first > 0:
            out.append(f'<line x1="{plot.x(first)}" x2="{plot.x(first)}" y1="2" '
                       f'y2="{TOP + PLOT}" stroke="#8c959f"/>')
    for first, last, label in page.episodes:
        x, width = plot.x(first) + 2, (last - first + 1) * SLOT - 4
        out.append(f'<g class="episode"><rect x="{x}" y="{BANDS}" width="{width}" '
                   f'height="{TOP + PLOT - BANDS}" fill="#8250df" fill-opacity="0.08" '
                   f'stroke="#8250df" stroke-dasharray="3 3"/><text x="{x + 4}" y="{BANDS + 13}" '
                   f'fill="#8250df">{esc(_fit(label, width - 8))}</text></g>')
    for crash in page.crashes:
        x = plot.x(crash.after_bars)
        out.append(f'<g class="crash"><line x1="{x}" x2="{x}" y1="{BANDS}" y2="{TOP + PLOT}" '
                   f'stroke="#cf222e" stroke-width="3" stroke-dasharray="6 3"/>'
                   f'<text x="{x + 4}" y="{TOP + 12}" fill="#cf222e">crash<title>'
                   f'{esc(crash.text)}</title></text><text x="{x + 4}" y="{TOP + 25}" '
                   f'fill="#cf222e">takeover</text></g>')
    return out


def timeline_svg(page: ReplayPage) -> str:
    plot = _Plot(page)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" id="timeline" width="{plot.width}" '
             f'height="{plot.height}" viewBox="0 0 {plot.width} {plot.height}" role="img" '
             f'data-top-value="{plot.top_value}">',
             *_bands(page, plot),
             f'<line id="baseline" data-value="0" x1="{LEFT}" x2="{plot.x(plot.slots)}" '
             f'y1="{TOP + PLOT}" y2="{TOP + PLOT}" stroke="#1d232a"/>',
             f'<text x="{LEFT - 6}" y="{TOP + PLOT + 4}" text-anchor="end">0</text>']
    for index, bar in enumerate(page.bars):
        parts.extend(_bar(index, bar, plot))
    parts.extend(_budget_lines(page, plot))
    parts.append("</svg>")
    return "\n".join(parts)


HOW = ("How the bars are made: I (the bar's height) and the budget lines W, B and the trigger "
       "floor(r × B) are the integers the trace records for each request. The trace does not "
       "say how I divides into §8's parts, so the page derives it: protected inputs, "
       "compressible material, the summary and hook additions (the annotations hooks appended) "
       "are re-measured on the request's "
       "own messages with the scenario's estimator, and the fixed input is the remainder (I "
       "minus those: the system prompt, tool schemas and framing). In a compaction request the "
       "last message, the data block (the previous summary with the chunk), counts as material. "
       "Dashed bars were measured but never sent; their I is the one their compaction step or "
       "Run ending states.")


def _legend() -> str:
    items = "".join(f'<span class="swatch" style="background:{colour}"></span>{esc(LABELS[p])}'
                    for p, colour in COLOURS.items())
    lines = "".join(f'<span class="swatch" style="background:{colour}"></span>'
                    f"{esc(LEGEND[name])}" for _, name, colour, _ in LINES)
    return f'<p class="legend">{items}</p><p class="legend">lines:{lines}</p>'


def _agents(page: ReplayPage) -> str:
    rows = []
    seen: set[tuple[str, Budget]] = set()
    for bar in page.bars:
        run = page.runs[bar.run]
        node = run.node or ""
        if (node, bar.budget) in seen:
            continue
        seen.add((node, bar.budget))
        b, ratio = bar.budget, page.ratios.get(node, page.ratios.get("", "?"))
        rows.append(f"<tr><td>{esc(node or 'the Agent')}</td><td>{b.window}</td>"
                    f"<td>{b.output_reserve}</td><td>{b.safety_margin}</td>"
                    f"<td>{b.input_budget} = {b.window} − {b.output_reserve} − {b.safety_margin}"
                    f"</td><td>{esc(ratio)}</td><td>{b.trigger} = floor({esc(ratio)} × "
                    f"{b.input_budget})</td></tr>")
    return ("<table><tr><th>Agent</th><th>W</th><th>O</th><th>S</th><th>B = W − O − S</th>"
            "<th>r</th><th>trigger</th></tr>" + "".join(rows) + "</table>")


def _cut(value: str, room: int = 300) -> str:
    """A long value as its start and its length: the whole text is in the messages."""
    return value if len(value) <= room else f"{value[:room]}… ({len(value)} characters)"


def _changes(changes: Sequence[Change]) -> str:
    if not changes:
        return ""
    rows = "".join(f'<tr class="changed"><td>{esc(c.by)}</td><td><code>{esc(c.field)}</code>'
                   f"</td><td><code>{esc(_cut(c.before))}</code> → "
                   f"<code>{esc(_cut(c.after))}</code></td></tr>" for c in changes)
    return f"<table><tr><th>changed by</th><th>field</th><th>before → after</th></tr>{rows}</table>"


def _messages(bar: Bar) -> str:
    rows = []
    for message in bar.messages:
        calls = "".join(f"<br><code>#{esc(c.get('action_ordinal', ''))} {esc(c.get('name', ''))}"
                        f"{esc(c.get('arguments', ''))}</code>"
                        for c in message.get("tool_calls") or ())
        rows.append(f"<tr><td>{esc(message.get('role', ''))}</td>"
                    f"<td>{esc(message.get('kind', ''))}</td>"
                    f"<td><pre>{esc(message.get('text', ''))}</pre>{calls}</td></tr>")
    return ("<table class=\"messages\"><tr><th>role</th><th>kind</th><th>text as sent</th></tr>"
            + "".join(rows) + "</table>") if rows else ""


def _request(index: int, bar: Bar, page: ReplayPage) -> str:
    run = page.runs[bar.run]
    where = " · ".join(p for p in (run.node or "", run.label) if p)
    who = "" if bar.role == "root" else f" ({bar.role})"
    size = "" if bar.total is None else f" · I = {bar.total}"
    head = f"#{index + 1} · {where} · {bar.kind}{who} · {bar.title}{size} · {bar.decision}"
    b = bar.budget
    parts = "".join(f"<tr><td>{esc(LABELS[part])}</td><td>{tokens}</td></tr>"
                    for part, tokens in bar.segments)
    figures = (f"W = {b.window}, O = {b.output_reserve}, S = {b.safety_margin}, "
               f"B = {b.input_budget}, trigger = {b.trigger}"
               + ("" if bar.max_output is None else f", max_output_tokens = {bar.max_output}"))
    return (f'<details class="request" id="request-{index + 1}"><summary>{esc(head)}</summary>'
            f"<p>{esc(figures)}</p>" + (f'<p class="note">{esc(bar.note)}</p>' if bar.note
                                        else "")
            + (f"<table><tr><th>part</th><th>tokens</th></tr>{parts}</table>" if parts else "")
            + _changes(bar.changes) + _messages(bar) + "</details>")


def _column_name(page: ReplayPage, column: int) -> str:
    if column == len(page.runs):
        return "after the last Run"
    run = page.runs[column]
    name = " · ".join(p for p in (run.node or "", run.label) if p)
    return f"session {run.session} · {name}" if len({r.session for r in page.runs}) > 1 \
        else name


def _deliveries(states: list[tuple[int, str]]) -> str:
    """One line per delivery of the input in this Run: its number and its states in order."""
    lines: dict[int, list[str]] = {}
    for number, state in states:
        lines.setdefault(number, []).append(
            f'<span class="chip" data-state="{esc(state)}" style="background:'
            f'{STATES.get(state, "#ffffff")}">{esc(state)}</span>')
    return "<br>".join(f'<span class="delivery">delivery {n}:</span> ' + " → ".join(chips)
                       for n, chips in lines.items())


def _lanes(page: ReplayPage) -> str:
    columns = sorted({c for lane in page.lanes for c in lane.states})
    head = "".join(f"<th>{esc(_column_name(page, c))}</th>" for c in columns)
    rows = []
    for lane in page.lanes:
        cells = "".join(f"<td>{_deliveries(lane.states.get(c, []))}</td>" for c in columns)
        text = " ".join(lane.text.split())
        shown = text if len(text) <= 80 else text[:79] + "…"  # whole in its requests' messages
        rows.append(f'<tr class="lane"><td title="{esc(text)}"><code>{esc(lane.input_id[:8])}'
                    f"</code> {esc(shown)}</td>{cells}</tr>")
    return (f"<table id=\"inputs\"><tr><th>input</th>{head}</tr>{''.join(rows)}</table>"
            if rows else "<p>No user input was traced.</p>")


def _endings(page: ReplayPage) -> str:
    rows = "".join(
        f'<tr><td class="nowrap">{esc(_column_name(page, i))}</td>'
        f'<td class="nowrap {esc(r.status or "")}">'
        f'{esc(r.status or "(did not end)")}</td><td class="nowrap">{esc(r.code or "")}</td>'
        f"<td>{esc(r.message or '')}</td></tr>" for i, r in enumerate(page.runs))
    return ("<table id=\"endings\"><tr><th>Run</th><th>status</th><th>code</th><th>message</th>"
            f"</tr>{rows}</table>")


def render_page(page: ReplayPage) -> str:
    """The whole replay page as HTML text."""
    crashes = "".join(f"<li>before request #{c.after_bars + 1}: {esc(c.text)}</li>"
                      for c in page.crashes)
    body = [f"<h1>Replay: {esc(page.name)}</h1>",
            f"<p>{esc(page.description)}</p>" if page.description else "",
            _agents(page),
            "<h2>Model requests</h2>", _legend(),
            f'<div class="scroll">{timeline_svg(page)}</div>',
            f'<p class="note">{esc(HOW)}</p>',
            *(_request(i, bar, page) for i, bar in enumerate(page.bars) if bar.kind != "none"),
            "<h2>Inputs and their delivery states, Run by Run</h2>", _lanes(page),
            "<h2>How each Run ended</h2>", _endings(page)]
    if crashes:
        body += ["<h2>Crashes and takeovers</h2>", f"<ul id=\"crashes\">{crashes}</ul>"]
    if page.later_changes:
        body += ["<h2>Changes after the last request</h2>", _changes(page.later_changes)]
    return document(f"ctxspec replay: {page.name}", CSS, "\n".join(b for b in body if b))
