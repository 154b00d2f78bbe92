"""Token estimation: the ``TokenEstimator`` port and the conservative estimator (design §7, §8).

Design §7 (budget), TokenEstimator paragraph: the estimator prefers the tokenizer that belongs
to the model adapter. When no exact tokenizer is known it falls back to a conservative estimate,
UTF-8 bytes plus per-message and per-tool protocol overhead, and marks the result
``accuracy="estimated"``. It never claims to know the exact token count of a provider's hidden
chat template. The model's reported usage is for audit and drift monitoring only; it never
rewrites a request that was already sent.

Design §7 also defines ``I`` (estimated_input_tokens) as the estimate of the *whole* final
request: system prompt(s), tool schemas, history, current input, legal Hook additions and
protocol overhead. Design §8 applies the same rule to compaction requests: the compaction
system prompt, the user's supplementary compaction prompt and legal Hook additions all count
toward that request's budget. So the unit of estimation here is a whole request
(:class:`EstimationRequest`), never a loose fragment of text.

This module provides:

* :class:`TokenEstimator`, the port. The runtime and the conformance harness inject any
  estimator through it (§7 lists TokenEstimator among the replaceable pure ports).
* :class:`ByteEstimator` ("utf8-bytes"), the conservative estimator: pure, no I/O, integer
  arithmetic, always ``accuracy="estimated"``.
* the framing overheads of the tokenizer estimator, which the byte estimator's must bound.

The tokenizer estimator itself, ``TiktokenEstimator`` ("tiktoken:cl100k_base"), is an adapter:
it loads an encoding file once per process and keeps it, so it lives in the runtime shell
(``reference/runtime/tokenizer.py``), never in this pure module.

Why the byte estimator is an upper bound on the tokenizer estimator, for every request:

1. Byte-level BPE starts from one token per UTF-8 byte, and each merge turns two tokens into
   one. So a text never encodes to more tokens than it has UTF-8 bytes. That holds for the
   text of each message, each role name and each tool schema, each counted on its own.
   Lone surrogates are legal in a Python ``str``: we count each as the 3 bytes that
   ``surrogatepass`` gives. tiktoken first repairs the text through UTF-16, so a lone
   surrogate becomes U+FFFD (also 3 bytes) and an adjacent high/low pair becomes one 4-byte
   character (we count 6). Either way the tokenizer sees no more bytes than we count.
2. Each of the byte estimator's per-request, per-message and per-tool overheads is chosen
   >= the tokenizer estimator's corresponding overhead (see the constants below).

Adding the two gives ``ByteEstimator().estimate(r).tokens >= TiktokenEstimator().estimate(r)
.tokens`` for every request ``r``. The tests check this as a property.

tiktoken counts are not additive *inside* one text (``"::" + ":A"`` gives 3 tokens, but the
two parts counted alone give 1 + 1). They are additive *across* chat messages, because the wire
format puts special tokens between messages. So counts are cached per whole message text, never
per fragment.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, TypeAdapter

from ctxspec.reference.segments import marked

__all__ = [
    "MESSAGE_OVERHEAD",
    "PROMPT_MESSAGE_ADAPTER",
    "REQUEST_OVERHEAD",
    "REQUEST_PRIMING",
    "TIKTOKEN_MESSAGE_OVERHEAD",
    "TIKTOKEN_TOOL_OVERHEAD",
    "TOOL_SCHEMA_OVERHEAD",
    "ByteEstimator",
    "EstimationRequest",
    "PromptMessage",
    "TokenEstimate",
    "TokenEstimator",
    "utf8_length",
]

Role = Literal["system", "user", "assistant", "tool"]
Accuracy = Literal["tokenizer", "estimated"]
"""How far a count may be trusted (§7)."""


# --------------------------------------------------------------------------------------------
# Data contracts
# --------------------------------------------------------------------------------------------


class _KeptSize:
    """A slot for the conservative size a prompt message keeps once counted
    (:class:`ByteEstimator`): a function of its own fields, so no field (issue #35)."""

    __slots__ = ("_bytes",)
    _bytes: int | None


@dataclass(frozen=True, slots=True)
class PromptMessage(_KeptSize):
    """One chat message of a request to be estimated (§7: the whole final request).

    A slotted dataclass rather than a pydantic model, as :class:`~ctxspec.reference.view.
    ViewMessage` is: every request estimate makes one per message of the view (a few times
    per business request), and this keeps that a fraction of the cost. Values arriving from
    outside are validated with :data:`PROMPT_MESSAGE_ADAPTER` (or inside an
    :class:`EstimationRequest`), which also refuses unknown fields.
    """

    __pydantic_config__ = ConfigDict(extra="forbid")

    role: Role
    text: str


class EstimationRequest(BaseModel):
    """A whole model request, the unit of estimation (§7 ``I``; §8 compaction requests).

    System prompts are messages with role ``system``. Each entry of ``tool_schemas`` is the
    canonical JSON text of one tool schema.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    messages: tuple[PromptMessage, ...]
    tool_schemas: tuple[str, ...] = ()
    _segment: Any = PrivateAttr(default=None)
    """Where a kept segment of prompt messages lies among ``messages``
    (:mod:`~ctxspec.reference.segments`): no field, so equality and hashing ignore it."""

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, EstimationRequest):
            return NotImplemented
        return self.messages == other.messages and self.tool_schemas == other.tool_schemas

    def __hash__(self) -> int:
        return hash((self.messages, self.tool_schemas))


PROMPT_MESSAGE_ADAPTER: TypeAdapter[PromptMessage] = TypeAdapter(PromptMessage)
"""Validates a prompt message that comes from outside (role and text, no other field)."""


class TokenEstimate(BaseModel):
    """An estimator's result (§7): an integer token count and how far it may be trusted.

    ``accuracy="tokenizer"`` means the model is declared to use the tokenizer that counted.
    ``"estimated"`` means the count is not exact for this model.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    tokens: int = Field(ge=0)
    accuracy: Accuracy
    estimator: str


# --------------------------------------------------------------------------------------------
# The port
# --------------------------------------------------------------------------------------------


class TokenEstimator(Protocol):
    """The token-estimation port (§7): any estimator is injected through it.

    The runtime and the conformance harness depend only on this port. Any implementation must
    estimate the whole request it is given, protocol overhead included (§7 ``I``, §8).
    """

    @property
    def name(self) -> str:
        """A stable identifier of the estimator, recorded in every :class:`TokenEstimate`."""
        ...

    def estimate(self, request: EstimationRequest) -> TokenEstimate:
        """Estimate the input tokens of the whole ``request`` (§7)."""
        ...


# --------------------------------------------------------------------------------------------
# Overhead constants
# --------------------------------------------------------------------------------------------

# Tokenizer estimator (cl100k_base chat framing).
REQUEST_PRIMING: Final[int] = 3
"""Reply priming: ``<|im_start|>assistant<|im_sep|>`` is 3 tokens per request."""

TIKTOKEN_MESSAGE_OVERHEAD: Final[int] = 3
"""Message framing: ``<|im_start|>``, the role/content separator and ``<|im_end|>``."""

TIKTOKEN_TOOL_OVERHEAD: Final[int] = 8
"""Per-tool framing around a schema (namespace entry, name line, separators), an estimate."""

# Byte estimator. Each one must be >= the matching tokenizer constant above: the byte counts of
# the texts bound their token counts, so these inequalities make the whole estimate an upper
# bound. They also leave room for chat templates other than cl100k's.
REQUEST_OVERHEAD: Final[int] = 8
"""Per-request overhead. It is >= ``REQUEST_PRIMING`` (3) and also covers a BOS token plus a
generation prompt of the usual templates (ChatML, Llama 3 header: at most 6 tokens)."""

MESSAGE_OVERHEAD: Final[int] = 8
"""Per-message overhead. It is >= ``TIKTOKEN_MESSAGE_OVERHEAD`` (3). Common templates frame a
message with at most 5 tokens besides the role and the text. An example is Llama 3's
``<|start_header_id|>``/``<|end_header_id|>``/``\\n\\n``/``<|eot_id|>``."""

TOOL_SCHEMA_OVERHEAD: Final[int] = 16
"""Per-tool-schema overhead. It is >= ``TIKTOKEN_TOOL_OVERHEAD`` (8), with the same margin
again for templates that wrap each tool in extra markup."""


# --------------------------------------------------------------------------------------------
# The conservative estimator
# --------------------------------------------------------------------------------------------


def utf8_length(text: str) -> int:
    """Return the number of UTF-8 bytes of ``text``, lone surrogates included (§7).

    Uses ``surrogatepass``: lone surrogates are legal in a Python ``str`` and tiktoken accepts
    them, so each one counts as its 3-byte encoded form and is never rejected.
    """
    return len(text.encode("utf-8", "surrogatepass"))


def _sizes(messages: Iterable[PromptMessage]) -> int:
    """Σ (utf8_length(role) + utf8_length(text) + MESSAGE_OVERHEAD), each message's size kept
    with it once counted."""
    tokens = 0
    for message in messages:
        size: int | None = getattr(message, "_bytes", None)
        if size is None:
            size = utf8_length(message.role) + utf8_length(message.text) + MESSAGE_OVERHEAD
            object.__setattr__(message, "_bytes", size)
        tokens += size
    return tokens


class ByteEstimator:
    """The conservative estimator (§7): UTF-8 bytes plus message and tool protocol overhead.

    ``tokens = REQUEST_OVERHEAD
    + Σ over messages (utf8_length(role) + utf8_length(text) + MESSAGE_OVERHEAD)
    + Σ over tool schemas (utf8_length(schema) + TOOL_SCHEMA_OVERHEAD)``.

    Pure integer arithmetic with no I/O. It always reports ``accuracy="estimated"``. Its count
    is an upper bound on what :class:`TiktokenEstimator` counts (see the module docstring).
    """

    __slots__ = ()

    @property
    def name(self) -> str:
        """``"utf8-bytes"`` (§7)."""
        return "utf8-bytes"

    def estimate(self, request: EstimationRequest) -> TokenEstimate:
        """Estimate the whole ``request`` from UTF-8 byte counts (§7, §8)."""
        messages = request.messages
        found = marked(request)
        if found is None:
            tokens = REQUEST_OVERHEAD + _sizes(messages)
        else:  # the sum is additive: a kept segment's is made once (issue #35)
            at, segment = found
            kept = segment.memo("bytes", lambda: _sizes(segment.items),
                                lambda total, items: total + _sizes(items))
            tokens = (REQUEST_OVERHEAD + _sizes(messages[:at]) + kept
                      + _sizes(messages[at + len(segment):]))
        for schema in request.tool_schemas:
            tokens += utf8_length(schema) + TOOL_SCHEMA_OVERHEAD
        return TokenEstimate(tokens=tokens, accuracy="estimated", estimator=self.name)
