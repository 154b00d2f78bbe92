"""The suite's ``content`` estimator (conformance/estimator.py) against a second, plain
reading of its rule: whole scenario texts found by one regular expression (longest first, not
inside a longer word), then runs of at least PIECE characters of one text found by scanning
``joined`` — the way the estimator counted before it was made fast (issue #20)."""

import json
import re
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from ctxspec.conformance.estimator import (
    PIECE,
    SEARCH_BUDGET,
    ContentEstimator,
    _Counter,
    _greedy,
    _Substrings,
)


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


def _longest_plain(joined: str, text: str) -> list[int]:
    """The longest run starting at each position of ``text`` that occurs in ``joined``, by
    trying every length (slow and obviously right)."""
    found = []
    for at in range(len(text)):
        size = 0
        while at + size < len(text) and text[at:at + size + 1] in joined:
            size += 1
        found.append(size)
    return found


_RUNS = st.text(st.sampled_from("abc\0"), max_size=40)


@given(_RUNS, _RUNS)
def test_the_automaton_finds_the_longest_runs_of_the_plain_definition(joined: str,
                                                                       text: str) -> None:
    """Issue #35: runs are found through a suffix automaton, in the time of the text."""
    assert _Substrings(joined).longest_from(text) == _longest_plain(joined, text)


@given(_TEXTS, st.data())
def test_searching_and_the_automaton_count_alike(texts: tuple[str, ...],
                                                 data: st.DataObject) -> None:
    parts = st.one_of(_CHARS, st.sampled_from(texts)) if texts else _CHARS
    text = "".join(data.draw(st.lists(parts, max_size=15)))
    counter = _Counter(texts)
    by_search = counter._pieces_by_search(text)
    assert counter._pieces(text) == by_search  # the path the budget chose: a search at first
    assert _greedy(_Substrings(counter.joined).longest_from(text)) == by_search


def test_the_automaton_is_built_once_the_searches_outgrow_their_budget() -> None:
    body = "the incident lasted forty minutes; "
    counter = _Counter((body * 40,))
    gap = body * 3
    per_gap = len(gap) * len(counter.joined)
    for _ in range(SEARCH_BUDGET // per_gap):
        assert counter._pieces(gap) == len(gap)
    assert counter.substrings is None  # within the budget: searched
    assert counter._pieces(gap) == len(gap)
    assert counter.substrings is not None  # past it: the automaton, and the same count


def test_the_automaton_reads_a_long_text_once_per_character() -> None:
    """A text that breaks a scenario text at every few characters (a JSON-escaped argument)
    is read in one pass: the automaton takes one step per character, not a search of every
    scenario text per run (which made a 100 KB argument take 1.3 s and 400 KB 31 s)."""
    body = 'say "a" and think about it for a while\n' * 2000
    counter = _Counter((body, "Question?"))
    steps = 0

    class Counting(dict[str, int]):
        def get(self, key: str, default: Any = None) -> Any:
            nonlocal steps
            steps += 1
            return super().get(key, default)

    substrings = _Substrings(counter.joined)
    substrings.next = [Counting(n) for n in substrings.next]
    counter.substrings = substrings
    escaped = json.dumps(body)
    assert counter.count(escaped) == counter._pieces_by_search(escaped) > 0.8 * len(body)
    assert 0 < steps <= len(escaped)
