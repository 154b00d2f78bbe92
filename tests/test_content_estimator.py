"""The suite's ``content`` estimator (conformance/estimator.py) against a second, plain
reading of its rule: whole scenario texts found by one regular expression (longest first, not
inside a longer word), then runs of at least PIECE characters of one text found by scanning
``joined`` — the way the estimator counted before it was made fast (issue #20)."""

import re

from hypothesis import given
from hypothesis import strategies as st

from ctxspec.conformance.estimator import PIECE, ContentEstimator


def _plain_count(texts: tuple[str, ...], text: str) -> int:
    joined = "\0".join(texts)
    whole = re.compile("|".join(rf"(?<!\w){re.escape(t)}(?!\w)" for t in texts))

    def pieces(gap: str) -> int:
        total, at = 0, 0
        while at + PIECE <= len(gap):
            if gap[at:at + PIECE] not in joined:
                at += 1
                continue
            longest = PIECE
            while at + longest < len(gap) and gap[at:at + longest + 1] in joined:
                longest += 1
            total += longest
            at += longest
        return total

    total, start = 0, 0
    for match in whole.finditer(text):
        total += pieces(text[start:match.start()]) + len(match.group())
        start = match.end()
    return total + pieces(text[start:])


_CHARS = st.sampled_from("ab _.\0é1-")
_TEXTS = st.lists(st.text(_CHARS, min_size=1, max_size=12), min_size=1, max_size=5).map(
    lambda found: tuple(sorted({t for t in found if re.search(r"\w", t)},
                               key=lambda t: (-len(t), t))))


@given(_TEXTS, st.data())
def test_counts_as_the_plain_reading_of_the_rule(texts: tuple[str, ...],
                                                 data: st.DataObject) -> None:
    parts = st.one_of(_CHARS, st.sampled_from(texts)) if texts else _CHARS
    text = "".join(data.draw(st.lists(parts, max_size=15)))
    assert ContentEstimator(texts).count(text) == _plain_count(texts, text), (texts, text)


def test_worked_example() -> None:
    # "hello world" and "ok" whole (11 + 2); in "xhello wor" the text is not whole, but
    # "hello wor" is a run of 9 >= PIECE characters of one text (9); the rest counts 0.
    texts = ("hello world", "ok")
    assert ContentEstimator(texts).count("[hello world] ok, xhello wor!") == 11 + 2 + 9
