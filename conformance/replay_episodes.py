"""The compaction episodes of the replay page (§8): the slots from the §8 evaluation that
started an episode to its last chunk, what each chunk's material covered, the summary target
T, and the final summary against T in the request that used it.

What a chunk covered is read from the chunk request itself: a record some request sent is
covered when the chunk's data block (its last message) names its record id. T is the one the
§8 evaluation traced (``budget_decision.summary_target``; else the ``T=`` its planned step
states). The final summary's tokens are the ``summary`` part of the next business request
(:func:`replay_data.split_request`); when that request was refused, they are its I less the
fixed input F the evaluation measured — the summary and any material the episode left — which
is what shows the summary overshooting T pushing the request over B (Q433).
"""

import re
from collections.abc import Mapping
from typing import Any

from ctxspec.conformance.replay_data import Bar, Budget, Episode, ReplayPage
from ctxspec.conformance.replay_marks import Names

Event = Mapping[str, Any]
_PLANNED = re.compile(r"\bI=(\d+)\b.*?\bM=(\d+)\b")
_TARGET = re.compile(r"\bT=(\d+)\b")


class EpisodeTracker:
    def __init__(self, page: ReplayPage, names: Names) -> None:
        self.page = page
        self.names = names
        self.known: set[str] = set()
        self.current: Episode | None = None
        self.finished: Episode | None = None
        """The episode closed last, until a request uses (or a refusal shows) its summary."""
        self.decision_event: Event | None = None
        self.chunks: list[tuple[Episode, str, str]] = []
        """Each chunk request's episode, title and data block, named by :meth:`resolve`."""

    def decision(self, event: Event) -> None:
        self.decision_event = event

    def planned(self, event: Event, run: int, budget: Budget) -> Bar | None:
        """A new episode's evaluated slot (None when a takeover resumes a known one)."""
        episode = str(event["episode_id"])
        slot = len(self.page.bars)
        if episode in self.known:  # a takeover resumes the same episode (§8, §10)
            if self.current is None:
                resumed = next(e for e in reversed(self.page.episodes))
                self.current = Episode(slot, slot - 1, "compaction episode, resumed",
                                       resumed.target, resumed.fixed)
            return None
        self.close()
        self.known.add(episode)
        detail = str(event["detail"])
        decided = self.decision_event if self.decision_event is not None and \
            self.decision_event.get("decision") == "compact" else None
        target = decided.get("summary_target") if decided else None
        if target is None and (match := _TARGET.search(detail)):
            target = int(match.group(1))
        fixed = decided.get("fixed_tokens") if decided else None
        self.current = Episode(slot, slot, "compaction episode",
                               None if target is None else int(target),
                               None if fixed is None else int(fixed))
        match = _PLANNED.search(detail)
        total, material = (int(match.group(1)), int(match.group(2))) if match else (None, 0)
        segments = () if total is None else tuple(
            (part, size) for part, size in (("fixed", total - material), ("material", material))
            if size > 0)
        return Bar("evaluated", "§8 evaluation", "compact", total, segments, budget, run,
                   note=f"measured, not sent; I and M as the compaction step states them: "
                        f"{detail}")

    def added(self, slot: int, bar: Bar) -> None:
        if self.current is not None:
            bar.episode = len(self.page.episodes)

    def request(self, slot: int, event: Event) -> None:
        bar = self.page.bars[slot]
        if event["purpose"] == "compaction" and self.current is not None:
            data = str(event["view"]["messages"][-1].get("text", "")) \
                if event["view"]["messages"] else ""
            self.chunks.append((self.current, bar.title, data))
        elif event["purpose"] == "business" and self.finished is not None:
            summary = dict(bar.segments).get("summary")
            if summary is not None:
                self.finished.summary = summary
                self.finished.summary_note = (f"the summary part of request #{slot + 1}, "
                                              "re-measured on its summary messages")
                bar.target = self.finished.target
            self.finished = None

    def resolve(self) -> None:
        """Each chunk's coverage, named once the whole trace is read: a record a chunk folds
        may be first sent by a later request (one the episode's own Loop added), in the order
        the chunk's data block names them."""
        for episode, title, data in self.chunks:
            found = sorted((data.find(record), name) for record, name in
                           self.names.records.items() if record in data)
            episode.coverage.append(f"{title}: " + (", ".join(name for _, name in found)
                                                    or "no record a request sent is named"))
        self.chunks = []

    def close(self) -> None:
        if self.current is not None:
            self.current.last = len(self.page.bars) - 1
            self.page.episodes.append(self.current)
            self.finished, self.current = self.current, None

    def refused(self, total: int) -> tuple[tuple[tuple[str, int], ...], str, int | None]:
        """The parts of a request refused right after an episode: F as the evaluation
        measured it, and the rest — the summary and what the episode left — with T."""
        episode, self.finished = self.finished, None
        if episode is None or episode.fixed is None or not 0 < episode.fixed < total:
            return (("unsplit", total),), "", None
        episode.summary = total - episode.fixed
        episode.summary_note = (f"I − F of the refused request: {total} − {episode.fixed} (the "
                                "summary and any material the episode left)")
        return ((("fixed", episode.fixed), ("summary", total - episode.fixed)),
                f"; split as F = {episode.fixed} (the §8 evaluation's) and the summary part, "
                f"I − F = {total - episode.fixed}", episode.target)
