"""The replay page (``ctxspec replay SCENARIO.json --html FILE.html``): the timeline of a
replay as one self-contained HTML page — the timeline of :mod:`replay_svg` at two zooms (fit to
the bars, or to W) switched without a script; each request's figures, parts, the values hooks
changed and its messages; each compaction episode with what it covered and its summary against
T; each input's deliveries request by request; Run endings; crashes and takeovers. What is drawn
comes from :mod:`replay_data`.

The page grows linearly with the Session (#35): each message's text is written once, in the
first request that sent it; a later request names the start it shares with the request before
it and links each other message it repeats to where it was written (Q435).
"""

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ctxspec.conformance.html_page import FONTS, document, esc
from ctxspec.conformance.replay_data import LABELS, Bar, Budget, Change, Episode, Mark, ReplayPage
from ctxspec.conformance.replay_svg import COLOURS, LINES, scale_top, timeline_svg

LEGEND = {"W": "W, the window", "B": "B = W − O − S", "⌊r×B⌋": "the trigger floor(r × B)"}
STATES = {"pending": "#d0d7de", "claimed": "#f2cc60", "delivered": "#4ac26b",
          "carried": "#54aeff"}
CSS = """
svg text { font: 11px FONTS; fill: #1d232a; }
""".replace("FONTS", FONTS) + """
svg text.row-label, svg text.offscale { font-style: italic; }
.swatch { display: inline-block; width: 12px; height: 12px; margin: 0 4px 0 12px;
          vertical-align: -2px; border: 1px solid #57606a; }
.chip { display: inline-block; padding: 0 6px; margin: 1px; border-radius: 8px;
        white-space: nowrap;
        font-size: 12px; border: 1px solid #8c959f; }
.failed, .error { color: #cf222e; font-weight: 600; } .succeeded { color: #1a7f37; }
.changed { background: #fff8c5; } td.nowrap, th.nowrap { white-space: nowrap; }
.delivery { font-size: 12px; color: #57606a; white-space: nowrap; }
.partial { border: 2px solid #cf222e; background: #ffebe9; padding: 6px 10px; }
.zoom > input { margin-left: 12px; } #view-window { display: none; }
#zoom-window:checked ~ #view-window { display: block; }
#zoom-window:checked ~ #view-fit { display: none; }
table.messages td.text { width: 100%; }
"""


HOW = ("How the bars are made: I (the bar's height) and the budget lines W, B and the trigger "
       "floor(r × B) are the integers the trace records for each request. The trace does not "
       "say how I divides into §8's parts, so the page derives it: protected inputs, "
       "compressible material, the summary and hook additions (the annotations hooks appended) "
       "are re-measured on the request's "
       "own messages with the scenario's estimator, and the fixed input is the remainder (I "
       "minus those: the system prompt, tool schemas and framing). In a compaction request the "
       "last message, the data block (the previous summary with the chunk), counts as material. "
       "Dashed bars were measured but never sent (red: refused, named by its error code); their "
       "I is the one their compaction step or Run ending states. A black tick over a summary "
       "part is its target T. Under the bars: the inputs each request carried (Q a question, S "
       "a supplement; S→ handed on to the next question), the hooks that decided (point, "
       "invocation), the tools and capabilities called, the graph state written; hover a mark "
       "for the whole of it.")


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
        if bar.budget is None or bar.run is None:
            continue
        node = page.runs[bar.run].node or ""
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


class MessageBook:
    """Each distinct message once (by identity, then by content), numbered in the order the
    page first writes it, with the request that wrote it."""

    def __init__(self) -> None:
        self._by_id: dict[int, tuple[Any, int]] = {}
        self._by_text: dict[str, int] = {}
        self.written: dict[int, int] = {}
        """Message number → the slot whose request wrote it out."""
        self.previous: list[int] = []
        self.previous_slot = -1

    def ref(self, message: Any) -> int:
        kept = self._by_id.get(id(message))
        if kept is not None and kept[0] is message:
            return kept[1]
        text = json.dumps(message, sort_keys=True, default=str)
        number = self._by_text.setdefault(text, len(self._by_text) + 1)
        self._by_id[id(message)] = (message, number)
        return number

    def rows(self, slot: int, bar: Bar) -> str:
        refs = [self.ref(m) for m in bar.messages]
        shared = 0
        while shared < min(len(refs), len(self.previous)) and \
                refs[shared] == self.previous[shared]:
            shared += 1
        out = []
        if shared:
            out.append(f'<tr class="shared" data-shared="{shared}"><td colspan="3">messages 1 '
                       f'to {shared}: the first {shared} of <a href="#request-'
                       f'{self.previous_slot + 1}">request #{self.previous_slot + 1}</a></td></tr>')
        for ref, message in zip(refs[shared:], bar.messages[shared:], strict=True):
            out.append(self._row(ref, message, slot))
        self.previous, self.previous_slot = refs, slot
        return "".join(out)

    def _row(self, ref: int, message: Any, slot: int) -> str:
        role, kind = esc(message.get("role", "")), esc(message.get("kind", ""))
        if ref in self.written:
            return (f'<tr class="again"><td class="nowrap">{role}</td><td class="nowrap">{kind}'
                    f'</td><td>the same as <a href="#m-{ref}">message {ref}</a>, written under '
                    f"request #{self.written[ref] + 1}</td></tr>")
        self.written[ref] = slot
        calls = "".join(f"<br><code>#{esc(c.get('action_ordinal', ''))} {esc(c.get('name', ''))}"
                        f"{esc(c.get('arguments', ''))}</code>"
                        for c in message.get("tool_calls") or ())
        return (f'<tr id="m-{ref}"><td class="nowrap">{role}</td><td class="nowrap">{kind}</td>'
                f'<td class="text"><pre>{esc(message.get("text", ""))}</pre>{calls}</td></tr>')


def _messages(slot: int, bar: Bar, book: MessageBook) -> str:
    rows = book.rows(slot, bar) if bar.messages else ""
    return ("<table class=\"messages\"><tr><th class=\"nowrap\">role</th>"
            "<th class=\"nowrap\">kind</th><th>text as sent</th></tr>" + rows + "</table>"
            ) if rows else ""


def _request(index: int, bar: Bar, page: ReplayPage, book: MessageBook,
             by_slot: Mapping[int, Sequence[Mark]]) -> str:
    run = page.runs[bar.run] if bar.run is not None else None
    where = " · ".join(p for p in ((run.node or "", run.label) if run else ("",)) if p)
    who = "" if bar.role == "root" else f" ({bar.role})"
    size = "" if bar.total is None else f" · I = {bar.total}"
    head = " · ".join(p for p in (f"#{index + 1}", where, f"{bar.kind}{who}",
                                  f"{bar.title}{size}", bar.decision) if p)
    parts = "".join(f"<tr><td>{esc(LABELS[part])}</td><td>{tokens}</td></tr>"
                    for part, tokens in bar.segments)
    figures = ""
    if bar.budget is not None:
        b = bar.budget
        figures = (f"W = {b.window}, O = {b.output_reserve}, S = {b.safety_margin}, "
                   f"B = {b.input_budget}, trigger = {b.trigger}"
                   + ("" if bar.max_output is None else f", max_output_tokens = {bar.max_output}")
                   + ("" if bar.target is None else f", the summary's target T = {bar.target}"))
    marks = "".join(f"<li>{esc(m.title)}</li>" for m in by_slot.get(index, ()))
    return (f'<details class="request" id="request-{index + 1}"><summary>{esc(head)}</summary>'
            + (f"<p>{esc(figures)}</p>" if figures else "")
            + (f'<p class="note">{esc(bar.note)}</p>' if bar.note else "")
            + (f"<table><tr><th>part</th><th>tokens</th></tr>{parts}</table>" if parts else "")
            + (f'<ul class="marks">{marks}</ul>' if marks else "")
            + _changes(bar.changes) + _messages(index, bar, book) + "</details>")


def _episodes(page: ReplayPage) -> str:
    if not page.episodes:
        return ""
    items = "".join(_episode(n, e) for n, e in enumerate(page.episodes))
    return f'<h2>Compaction episodes</h2><ol id="episodes">{items}</ol>'


def _episode(number: int, episode: Episode) -> str:
    slots = f"requests #{episode.first + 1} to #{episode.last + 1}"
    chunks = "".join(f"<li>{esc(line)}</li>" for line in episode.coverage)
    if episode.summary is not None and episode.target is not None:
        verdict = "over" if episode.summary > episode.target else "within"
        summary = (f'<p class="summary" data-summary="{episode.summary}" '
                   f'data-target="{episode.target}">final summary: {episode.summary} tokens, '
                   f"{verdict} its target T = {episode.target} ({esc(episode.summary_note)})</p>")
    elif episode.target is not None:
        summary = (f'<p class="summary" data-target="{episode.target}">T = {episode.target}; no '
                   "request after the episode shows its summary</p>")
    else:
        summary = ""
    return (f'<li class="episode-detail" data-episode="{number + 1}">{esc(episode.label)}, '
            f"{slots}; what each chunk covered:<ul>{chunks}</ul>{summary}</li>")


def _column_name(page: ReplayPage, column: int) -> str:
    if column == len(page.runs):
        return "after the last Run"
    run = page.runs[column]
    name = " · ".join(p for p in (run.node or "", run.label) if p)
    return f"session {run.session} · {name}" if len({r.session for r in page.runs}) > 1 \
        else name


def _deliveries(states: list[tuple[int, str, int | None]]) -> str:
    """One line per delivery of the input in this Run: its number and its states in order, each
    at the request it belongs to."""
    lines: dict[int, list[str]] = {}
    for number, state, slot in states:
        at, data = ("", "") if slot is None else (f" #{slot + 1}", str(slot + 1))
        lines.setdefault(number, []).append(
            f'<span class="chip" data-state="{esc(state)}" data-slot="{data}" '
            f'style="background:{STATES.get(state, "#ffffff")}">{esc(state)}{at}</span>')
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
        letter = "Q" if lane.kind == "question" else "S"
        rows.append(f'<tr class="lane" data-kind="{lane.kind}"><td class="nowrap">'
                    f"{letter}{lane.number} {esc(lane.kind)}</td>"
                    f'<td title="{esc(text)}">{esc(shown)}</td>{cells}</tr>')
    return (f"<table id=\"inputs\"><tr><th class=\"nowrap\">input</th><th>text</th>{head}</tr>"
            f"{''.join(rows)}</table>" if rows else "<p>No user input was traced.</p>")


def _endings(page: ReplayPage) -> str:
    rows = "".join(
        f'<tr><td class="nowrap">{esc(_column_name(page, i))}</td>'
        f'<td class="nowrap {esc(r.status or "")}">'
        f'{esc(r.status or "(did not end)")}</td><td class="nowrap">{esc(r.code or "")}</td>'
        f"<td>{esc(r.message or '')}</td></tr>" for i, r in enumerate(page.runs))
    return ("<table id=\"endings\"><tr><th>Run</th><th>status</th><th>code</th><th>message</th>"
            f"</tr>{rows}</table>")


def _zoom(page: ReplayPage) -> str:
    """The two zooms, switched by radio buttons and CSS alone (the page runs no script)."""
    fit, window = scale_top(page, False), scale_top(page, True)
    if fit == window:
        return f'<div class="scroll" id="view-fit">{timeline_svg(page)}</div>'
    return ('<div class="zoom"><input type="radio" name="zoom" id="zoom-fit" checked>'
            f'<label for="zoom-fit">fit the bars (0 to {fit} tokens)</label>'
            '<input type="radio" name="zoom" id="zoom-window">'
            f'<label for="zoom-window">the whole window (0 to {window})</label>'
            f'<div class="scroll" id="view-fit">{timeline_svg(page)}</div>'
            f'<div class="scroll" id="view-window">{timeline_svg(page, True)}</div></div>')


def render_page(page: ReplayPage) -> str:
    """The whole replay page as HTML text."""
    crashes = "".join(f"<li>before request #{c.after_bars + 1}: {esc(c.text)}</li>"
                      for c in page.crashes)
    book = MessageBook()
    by_slot: dict[int, list[Mark]] = {}
    for mark in page.marks:
        by_slot.setdefault(mark.slot, []).append(mark)
    body = [f"<h1>Replay: {esc(page.name)}</h1>",
            f'<p class="partial" id="partial">The replay stopped early: {esc(page.partial)}. '
            "The page shows what happened until then.</p>" if page.partial else "",
            f"<p>{esc(page.description)}</p>" if page.description else "",
            _agents(page),
            "<h2>Timeline</h2>", _legend(), _zoom(page),
            f'<p class="note">{esc(HOW)}</p>',
            *(_request(i, bar, page, book, by_slot) for i, bar in enumerate(page.bars)
              if bar.kind != "none"),
            _episodes(page),
            "<h2>Inputs and their deliveries, request by request</h2>", _lanes(page),
            "<h2>How each Run ended</h2>", _endings(page)]
    if crashes:
        body += ["<h2>Crashes and takeovers</h2>", f"<ul id=\"crashes\">{crashes}</ul>"]
    if page.later_changes:
        body += ["<h2>Changes after the last request</h2>", _changes(page.later_changes)]
    return document(f"ctxspec replay: {page.name}", CSS, "\n".join(b for b in body if b))
