"""Bounds on what ctxspec reads from outside (command lines, scenario documents, vector files,
stdio lines), and how a refused value is shown.

The design fixes none of these figures; they are the tool's, chosen so that no legitimate input
comes near them and no hostile one makes the tool slow (docs/robustness.md, Q105).
"""

MAX_TOKENS = 10**12
"""The largest token count accepted anywhere (a window, a reserve, a margin, a count of F or
M): a thousand times the largest context window on sale, far below anything that makes integer
arithmetic slow."""

MAX_COUNT = 10**6
"""The largest count of anything else (a Loop limit, an ordinal, an occurrence, a latency)."""

MAX_DEPTH = 64
"""The deepest nesting of a JSON document read (a scenario nests about 8 deep)."""

MAX_DOCUMENT_BYTES = 64 * 1024 * 1024
"""The largest scenario or vector file read (the largest of the project's own is < 2 MB)."""

SHOWN = 80
"""How many characters of a refused value a message repeats."""


def shown(value: object) -> str:
    """``repr`` of a refused value, cut to :data:`SHOWN` characters so that a 50 MB field never
    fills a terminal."""
    text = repr(value)
    return text if len(text) <= SHOWN else f"{text[:SHOWN]}… ({len(text)} characters)"


def depth(document: object, limit: int = MAX_DEPTH) -> int:
    """The nesting depth of a JSON value, counted without recursion, stopping past ``limit``."""
    deepest, pending = 0, [(document, 1)]
    while pending:
        value, level = pending.pop()
        deepest = max(deepest, level)
        if deepest > limit:
            return deepest
        if isinstance(value, dict):
            pending.extend((item, level + 1) for item in value.values())
        elif isinstance(value, list | tuple):
            pending.extend((item, level + 1) for item in value)
    return deepest


__all__ = ["MAX_COUNT", "MAX_DEPTH", "MAX_DOCUMENT_BYTES", "MAX_TOKENS", "SHOWN", "depth",
           "shown"]
