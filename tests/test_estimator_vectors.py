"""The estimators as data (issue #33): spec/estimators.json, whose counts are derived by hand
from the rules of docs/implementing-a-driver.md "Exact token arithmetic", holds against its
published schema, and the suite's own estimators reproduce every count (and, for ``content``,
the scenario texts, longest first); the tokenizer's vectors, computed with tiktoken directly, are
reproduced by the reference's tokenizer estimator."""

import json

import jsonschema
import pytest

from ctxspec.conformance.estimator_vectors import VECTORS, load, reproduce
from ctxspec.conformance.tokenizer_vectors import document as tokenizer_vectors
from ctxspec.contracts import render
from ctxspec.reference.runtime.tokenizer import TiktokenEstimator
from ctxspec.reference.tokens import EstimationRequest, PromptMessage
from ctxspec.schemas import published_schemas

SPEC = VECTORS.parent

DOCUMENT = load()


def test_the_vector_file_holds_its_published_schema() -> None:
    jsonschema.validate(json.loads(VECTORS.read_text("utf-8")),
                        published_schemas()["EstimatorVectors.json"])
    assert {v.estimator for v in DOCUMENT.vectors} == {"chars", "bytes", "content"}
    assert len({v.id for v in DOCUMENT.vectors}) == len(DOCUMENT.vectors)


@pytest.mark.parametrize("vector", DOCUMENT.vectors, ids=lambda v: v.id)
def test_the_estimators_reproduce_each_vector(vector: object) -> None:
    from ctxspec.conformance.estimator_vectors import EstimatorVector

    assert isinstance(vector, EstimatorVector)
    tokens, texts = reproduce(vector)
    assert tokens == vector.tokens, vector.why
    assert texts == vector.texts


TOKENIZER = load(SPEC / "estimators-tokenizer.json")


def test_the_tokenizer_vectors_name_their_encoding_and_are_the_generators() -> None:
    # The published file is what conformance/tokenizer_vectors.py computes with tiktoken
    # directly (ctxspec contracts writes it), names the encoding, and holds its schema.
    assert (SPEC / "estimators-tokenizer.json").read_text("utf-8") == render(tokenizer_vectors())
    assert TOKENIZER.encoding == "cl100k_base" and TOKENIZER.rule is not None
    jsonschema.validate(json.loads((SPEC / "estimators-tokenizer.json").read_text("utf-8")),
                        published_schemas()["EstimatorVectors.json"])
    assert {v.estimator for v in TOKENIZER.vectors} == {"tokenizer"}
    # One count known by hand: "hello world" is two cl100k tokens ("hello", " world"), "user"
    # one; 3 priming + (3 + 1 + 2) = 9.
    [hello] = [v for v in TOKENIZER.vectors if v.id == "tokenizer-one-message"]
    assert hello.tokens == 9


@pytest.mark.parametrize("vector", TOKENIZER.vectors, ids=lambda v: v.id)
def test_the_reference_tokenizer_reproduces_each_vector(vector: object) -> None:
    from ctxspec.conformance.estimator_vectors import EstimatorVector

    assert isinstance(vector, EstimatorVector)
    request = EstimationRequest(
        messages=tuple(PromptMessage(m.role, m.text) for m in vector.request.messages),
        tool_schemas=tuple(vector.request.tool_schemas))
    assert TiktokenEstimator().estimate(request).tokens == vector.tokens, vector.why
