"""The estimators as data (issue #33): spec/estimators.json, whose counts are derived by hand
from the rules of docs/implementing-a-driver.md "Exact token arithmetic", holds against its
published schema, and the suite's own estimators reproduce every count (and, for ``content``,
the scenario texts, longest first)."""

import json

import jsonschema
import pytest

from ctxspec.conformance.estimator_vectors import VECTORS, load, reproduce
from ctxspec.schemas import published_schemas

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
