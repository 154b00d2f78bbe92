"""The suite's own token estimator, ``content`` (docs/implementing-a-driver.md, "Exact token
arithmetic"): a count that depends only on what the scenario writes, so the expected numbers of
a boundary case hold for every runtime, whatever it adds around the scripted content.

A request's count is the number of characters of it that are the scenario's own text:

1. every occurrence of a whole scenario text — longest first, and not inside a longer word
   (the character before and after it is not a letter, digit or ``_``);
2. in what is left, every run of at least ``PIECE`` characters that is part of one scenario text
   (a chunk's piece of a record, a bounded preview, a broken stream's partial output).

Everything else counts 0: markers, envelopes, labels, separators, the prompts a runtime writes
for its summariser, tool names and tool schemas, the framing of tool calls (their argument
*values* are scenario text and count where they appear verbatim, as do the ``description``
texts of a tool's schema). There is no per-message or
per-request overhead, so counts add up across messages and a text counts the same wherever a
runtime puts it.

The scenario texts are the string values of the scenario document (defaults filled in) but
those naming or configuring something (``OPAQUE``), and but strings without a letter or digit.

Here too the fixed estimators a scenario's Agent may pick instead (``chars``, ``bytes``) and
:func:`estimator_for`, which picks.
"""

import functools
import re
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from ctxspec.reference.tokens import (
    ByteEstimator,
    EstimationRequest,
    TokenEstimate,
    TokenEstimator,
)

if TYPE_CHECKING:
    from ctxspec.conformance.scenario import AgentDoc, Scenario

PIECE = 8
"""The shortest part of a scenario text counted where the whole text is not shown."""

OPAQUE = frozenset({
    "name", "point", "target", "field", "operation", "scope", "decision", "estimator", "commit",
    "when", "purpose", "tool", "media_type", "path", "trigger_ratio", "on_error",
    "question_key", "output_key", "stop_after", "session", "role", "consumers", "fail",
    "scenario_version", "description", "kind", "error", "audit_readers", "phase"})
"""Keys whose string values name or configure something: never sent as content."""

_WORD = re.compile(r"\w")
"""One word character, as the rule's "not inside a longer word" reads it."""

FREE = frozenset({"arguments", "input", "value", "workspace_writes"})
"""Keys under which every string is content, whatever its own key (tool arguments, a
workflow's inputs, a hook's value)."""


def scenario_texts(document: Mapping[str, Any]) -> tuple[str, ...]:
    """The scenario's texts, longest first (ties in text order, so the order is stable)."""
    found = {text for text in _strings(document, None, free=False)
             if re.search(r"\w", text)}
    return tuple(sorted(found, key=lambda text: (-len(text), text)))


def _strings(node: Any, key: str | None, *, free: bool) -> Iterator[str]:
    if isinstance(node, str):
        if free or key not in OPAQUE:
            yield node
    elif isinstance(node, Mapping) and key == "schema":
        yield from _descriptions(node)
    elif isinstance(node, Mapping):
        for child_key, child in node.items():
            yield from _strings(child, str(child_key), free=free or child_key in FREE)
    elif isinstance(node, list | tuple):
        for child in node:
            yield from _strings(child, key, free=free)


def _descriptions(node: Any) -> Iterator[str]:
    """A tool schema's ``description`` texts: the rest of a schema (types, property names) is
    a format a runtime may translate, so it counts 0."""
    if isinstance(node, Mapping):
        for child_key, child in node.items():
            if child_key == "description" and isinstance(child, str):
                yield child
            else:
                yield from _descriptions(child)
    elif isinstance(node, list | tuple):
        for child in node:
            yield from _descriptions(child)


class ContentEstimator:
    """One token per character of scenario text in the request (the module's rule)."""

    name = "content"

    def __init__(self, texts: tuple[str, ...]) -> None:
        self.texts = texts
        self.counter = _counter(texts)

    def estimate(self, request: EstimationRequest) -> TokenEstimate:
        tokens = sum(self.count(message.text) for message in request.messages) + sum(
            self.count(schema) for schema in request.tool_schemas)
        return TokenEstimate(tokens=tokens, accuracy="estimated", estimator=self.name)

    def count(self, text: str) -> int:
        return self.counter.count(text)


@functools.lru_cache(maxsize=512)
def _counter(texts: tuple[str, ...]) -> "_Counter":
    """One counter per set of scenario texts, shared by the estimators of one case (its
    baseline, its restarts, its Executors) and by every later run of the same scenario (the
    kill matrix runs each case again under each mutant): a count depends only on the texts
    and the text counted, so it is computed once (issue #20). The suite's sets of texts (157
    when this was written) take about 9 MB together, besides the counts each counter keeps of
    the request texts it was asked."""
    return _Counter(texts)


class _Counter:
    def __init__(self, texts: tuple[str, ...]) -> None:
        self.joined = "\0".join(texts)
        self.grams = frozenset(self.joined[at:at + PIECE]
                               for at in range(len(self.joined) - PIECE + 1))
        """Every PIECE-long run of ``joined``: a run of that length is in ``joined`` exactly
        when it is one of these, found by one hash instead of a scan."""
        self.texts = texts
        self.cache: dict[str, int] = {}
        self.substrings: _Substrings | None = None
        self.searched = 0
        """The gaps searched so far, each weighed by the length of ``joined`` (SEARCH_BUDGET)."""

    def count(self, text: str) -> int:
        known = self.cache.get(text)
        if known is None:
            known = self.cache[text] = self._count(text)
        return known

    def _count(self, text: str) -> int:
        total, start = 0, 0
        for at, length in self._wholes(text):
            total += self._pieces(text[start:at]) + length
            start = at + length
        return total + self._pieces(text[start:])

    def _wholes(self, text: str) -> list[tuple[int, int]]:
        """(position, length) of the whole scenario texts in ``text``, as a left-to-right scan
        takes them: at each position the first text (longest first) that occurs there not
        inside a longer word, then on from its end. Every occurrence of every text is found
        with ``str.find`` and the scan is replayed over them, which costs far less than
        compiling the texts into one pattern (issue #20)."""
        found: list[tuple[int, int, int]] = []
        for rank, whole in enumerate(self.texts):
            at = text.find(whole)
            while at >= 0:
                end = at + len(whole)
                if not (at and _WORD.match(text, at - 1)) and not _WORD.match(text, end):
                    found.append((at, rank, len(whole)))
                at = text.find(whole, at + 1)
        taken: list[tuple[int, int]] = []
        free = 0
        for at, _rank, length in sorted(found):
            if at >= free:
                taken.append((at, length))
                free = at + length
        return taken

    def _pieces(self, gap: str) -> int:
        """Characters of ``gap`` in runs of at least PIECE that are part of a scenario text,
        taken greedily from the left, each as long as it goes: in the time of ``gap`` through
        the automaton of ``joined`` (:class:`_Substrings`) once the gaps searched so far
        outgrow SEARCH_BUDGET and while ``joined`` is at most SAM_LIMIT characters, else by
        searching ``joined`` (Q322). Both give the same count."""
        if len(gap) < PIECE:
            return 0
        if self.substrings is None and len(self.joined) <= SAM_LIMIT:
            self.searched += len(gap) * len(self.joined)
            if self.searched > SEARCH_BUDGET:
                self.substrings = _Substrings(self.joined)
        if self.substrings is not None:
            return _greedy(self.substrings.longest_from(gap))
        return self._pieces_by_search(gap)

    def _pieces_by_search(self, gap: str) -> int:
        total, at = 0, 0
        grams = self.grams
        while at + PIECE <= len(gap):
            if gap[at:at + PIECE] not in grams:
                at += 1
                continue
            longest = PIECE
            step = PIECE
            while at + longest < len(gap) and step:  # grow while the longer run still occurs
                size = min(longest + step, len(gap) - at)
                if gap[at:at + size] in self.joined:
                    longest, step = size, step * 2
                else:
                    step //= 2
            total += longest
            at += longest
        return total


SAM_LIMIT = 1 << 21
"""The longest ``joined`` (in characters) counted through a suffix automaton: about 2 states
and 3 transitions a character, some 300 MB at the limit; a longer one is searched (Q322)."""


SEARCH_BUDGET = 1 << 26
"""How much searching comes before the automaton is built: gap characters × characters of
``joined``, summed. Building it costs some 25 ms for a scenario's usual 8,000 characters, more
than most cases ever search; a counter whose gaps outgrow the budget (a long argument, many
requests) builds it, so a search costs at most about this much before the linear path takes
over (Q322)."""


def _greedy(longest: list[int]) -> int:
    """The greedy left-to-right runs: at each position the longest run starting there if it
    is at least PIECE long (then on from its end), else the next position."""
    total, at = 0, 0
    while at + PIECE <= len(longest):
        run = longest[at]
        if run >= PIECE:
            total += run
            at += run
        else:
            at += 1
    return total


class _Substrings:
    """The suffix automaton of the reversed ``joined``: reading a text backwards through it
    gives, at each position, the length of the longest run starting there that occurs in
    ``joined`` (matching statistics) in time linear in the text."""

    def __init__(self, joined: str) -> None:
        self.next: list[dict[str, int]] = [{}]
        self.link: list[int] = [-1]
        self.length: list[int] = [0]
        last = 0
        for char in reversed(joined):
            last = self._extend(last, char)

    def _extend(self, last: int, char: str) -> int:
        nxt, link, length = self.next, self.link, self.length
        current = len(length)
        nxt.append({})
        link.append(0)
        length.append(length[last] + 1)
        state = last
        while state != -1 and char not in nxt[state]:
            nxt[state][char] = current
            state = link[state]
        if state != -1:
            target = nxt[state][char]
            if length[state] + 1 == length[target]:
                link[current] = target
            else:
                clone = len(length)
                nxt.append(dict(nxt[target]))
                link.append(link[target])
                length.append(length[state] + 1)
                while state != -1 and nxt[state].get(char) == target:
                    nxt[state][char] = clone
                    state = link[state]
                link[target] = link[current] = clone
        return current

    def longest_from(self, text: str) -> list[int]:
        """For each position of ``text``, the longest run starting there found in
        ``joined``."""
        nxt, link, length = self.next, self.link, self.length
        found = [0] * len(text)
        state, matched = 0, 0
        for at in range(len(text) - 1, -1, -1):
            char = text[at]
            while state and char not in nxt[state]:
                state = link[state]
                matched = length[state]
            step = nxt[state].get(char)
            if step is None:
                state, matched = 0, 0
            else:
                state, matched = step, matched + 1
            found[at] = matched
        return found


class CharEstimator:
    """One token per character, no overhead: a deterministic estimator scenarios can inject so
    every runtime is measured alike."""

    name = "chars"

    def estimate(self, request: EstimationRequest) -> TokenEstimate:
        tokens = sum(len(m.text) for m in request.messages) + sum(map(len,
                                                                      request.tool_schemas))
        return TokenEstimate(tokens=tokens, accuracy="estimated", estimator=self.name)


ESTIMATORS: dict[str, Callable[[], TokenEstimator]] = {"bytes": ByteEstimator,
                                                       "chars": CharEstimator}


def estimator_for(scenario: "Scenario", agent: "AgentDoc") -> TokenEstimator:
    """The estimator an Agent of the scenario measures with: ``content`` counts the scenario's
    own texts only (above), the others are fixed estimators."""
    if agent.estimator == "content":
        return ContentEstimator(scenario_texts(scenario.model_dump(mode="json", by_alias=True)))
    return ESTIMATORS[agent.estimator]()


__all__ = ["ESTIMATORS", "FREE", "OPAQUE", "PIECE", "CharEstimator", "ContentEstimator",
           "estimator_for", "scenario_texts"]
