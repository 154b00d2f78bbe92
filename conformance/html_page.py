"""What the review pages (``ctxspec replay --html``, ``ctxspec conformance --html``) share: one
self-contained HTML document (inline CSS and SVG, no script, nothing fetched), every text
escaped, written whole or not at all."""

import html
from fractions import Fraction
from pathlib import Path

FONTS = ('system-ui, "Noto Sans", "Noto Sans CJK SC", "Noto Sans CJK JP", "Noto Sans CJK KR", '
         '"Noto Sans CJK TC", sans-serif')
"""The text fonts, with CJK fallbacks (Debian's fonts-noto-cjk, which the README's apt line and
CI install): with none, a Chinese scenario's texts would be drawn as empty boxes."""
MONO = 'ui-monospace, "DejaVu Sans Mono", "Noto Sans Mono CJK SC", monospace'
BASE_CSS = """
body { font: 14px/1.45 FONTS; color: #1d232a; margin: 24px; max-width: 1280px; }
h1 { font-size: 22px; margin: 0 0 4px; } h2 { font-size: 17px; margin: 28px 0 8px; }
p, li { overflow-wrap: anywhere; }
table { border-collapse: collapse; margin: 6px 0; }
th, td { border: 1px solid #c9d1d9; padding: 3px 8px; text-align: left; vertical-align: top;
         overflow-wrap: anywhere; }
th { background: #f2f4f7; }
code, pre { font: 12px/1.4 MONO; }
pre { white-space: pre-wrap; overflow-wrap: anywhere; margin: 0; }
details { margin: 4px 0; } summary { cursor: pointer; overflow-wrap: anywhere; }
.note { color: #57606a; font-size: 13px; }
.scroll { overflow-x: auto; border: 1px solid #d0d7de; }
""".replace("MONO", MONO).replace("FONTS", FONTS)


def esc(text: object) -> str:
    """Any text as HTML text or attribute value: scenario texts and driver messages are user
    input, so nothing is ever written unescaped."""
    return html.escape(str(text), quote=True)


def px(value: Fraction | int) -> str:
    """A pixel coordinate from exact arithmetic, rounded once, at the end, to 1/100 px."""
    hundredths = round(Fraction(value) * 100)
    sign = "-" if hundredths < 0 else ""
    whole, part = divmod(abs(hundredths), 100)
    return f"{sign}{whole}.{part:02d}"


def document(title: str, css: str, body: str) -> str:
    """A whole page: a strict content security policy forbids every script and every fetch,
    so the page shows the same with no network."""
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
            "style-src 'unsafe-inline'; img-src data:\">"
            f"<title>{esc(title)}</title><style>{BASE_CSS}{css}</style></head>\n"
            f"<body>\n{body}\n</body></html>\n")


def write_whole(path: Path, text: str) -> None:
    """Written whole or not at all: a temporary file beside the target, renamed into place."""
    temporary = path.with_name(path.name + ".partial")
    try:
        temporary.write_text(text, "utf-8")
        temporary.replace(path)
    finally:
        temporary.unlink(missing_ok=True)
