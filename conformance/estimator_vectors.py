"""The estimators' test vectors (issue #33): ``spec/estimators.json`` (schema
``spec/schemas/EstimatorVectors.json``) holds requests and, for the ``content`` estimator, the
scenario document whose texts it counts, each with the count derived by hand from the rule of
docs/implementing-a-driver.md "Exact token arithmetic" — so a runtime in any language checks
its own ``chars``, ``bytes`` and ``content`` estimators against the same numbers. The
``tokenizer`` estimator's vectors are ``spec/estimators-tokenizer.json``, computed by
conformance/tokenizer_vectors.py with tiktoken directly. ``tests/test_estimator_vectors.py``
checks the suite's own estimators, and the reference runtime's tokenizer, reproduce every one.
"""

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ctxspec.conformance.estimator import CharEstimator, ContentEstimator, scenario_texts
from ctxspec.reference.tokens import ByteEstimator, EstimationRequest, PromptMessage

VECTORS = Path(__file__).resolve().parent.parent / "spec" / "estimators.json"


class _Doc(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class VectorMessage(_Doc):
    role: Literal["system", "user", "assistant", "tool"]
    text: str


class VectorRequest(_Doc):
    messages: list[VectorMessage]
    tool_schemas: list[str] = Field(default_factory=list, description=(
        "each offered tool's schema as the text the runtime sends"))


class EstimatorVector(_Doc):
    id: str
    estimator: Literal["chars", "bytes", "content", "tokenizer"]
    scenario: dict[str, Any] | None = Field(default=None, description=(
        "content only: the scenario document (defaults filled in) whose texts count"))
    texts: list[str] | None = Field(default=None, description=(
        "content only: the scenario's texts, longest first, ties in code point order"))
    request: VectorRequest
    tokens: int = Field(ge=0)
    why: str = Field(description="the count derived by hand from the rule")


class EstimatorVectors(_Doc):
    """Requests and their expected counts under the suite's estimators."""

    format: Literal["ctxspec-estimator-vectors"] = "ctxspec-estimator-vectors"
    version: int = 1
    encoding: str | None = Field(default=None, description=(
        "tokenizer vectors only: the tiktoken encoding whose token counts they use"))
    rule: str | None = Field(default=None, description=(
        "tokenizer vectors only: how a request's count is made of its texts' token counts"))
    vectors: list[EstimatorVector]


def load(path: Path = VECTORS) -> EstimatorVectors:
    return EstimatorVectors.model_validate(json.loads(path.read_text("utf-8")))


def reproduce(vector: EstimatorVector) -> tuple[int, list[str] | None]:
    """The suite's own count of the vector's request (and, for ``content``, the scenario
    texts it found)."""
    request = EstimationRequest(
        messages=tuple(PromptMessage(m.role, m.text) for m in vector.request.messages),
        tool_schemas=tuple(vector.request.tool_schemas))
    if vector.estimator == "content":
        texts = scenario_texts(vector.scenario or {})
        return ContentEstimator(texts).estimate(request).tokens, list(texts)
    if vector.estimator == "tokenizer":  # the reference runtime's own: its tests check it
        raise ValueError("a tokenizer vector is checked against the reference runtime's "
                         "TiktokenEstimator (tests/test_estimator_vectors.py)")
    estimator = CharEstimator() if vector.estimator == "chars" else ByteEstimator()
    return estimator.estimate(request).tokens, None


__all__ = ["VECTORS", "EstimatorVector", "EstimatorVectors", "load", "reproduce"]
