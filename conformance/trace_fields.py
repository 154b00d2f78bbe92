"""The trace contract field by field (issue #33), published as ``spec/trace-fields.json``
(schema ``spec/schemas/TraceFields.json``): every event kind and field the contract names
(conformance/trace_contract.py), each ``required`` or ``optional``, and for an optional one the
cases whose checks look it up — so a driver author knows which cases a field left out costs
before running them. Inside a field the contract leaves free JSON (``rendered``,
``frozen_revisions``), the paths cases look up are listed too.

The cases' lookups are what their checks ask of the reference's traces by name
(``looked_up`` of conformance/reads.py); ``tests/test_trace_fields.py`` fails when a case looks
up a field the contract does not name.
"""

import re
from collections import defaultdict
from collections.abc import Iterable, Iterator
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ctxspec.conformance.case import Case, no_check
from ctxspec.conformance.reads import Reads
from ctxspec.conformance.trace_contract import (
    EVENTS,
    TRACE_CONTRACT_VERSION,
    field_status,
    model_of,
)

_QUALIFIER = re.compile(r"\[[^\]]*\]")
_ID = re.compile(r"\.[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


class FieldEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    path: str = Field(description=(
        "dotted, lists walked through: view.messages.modified_by; <id> for a key that is an "
        "identity"))
    status: Literal["required", "optional"]
    read_by: list[str] = Field(description=(
        "the cases whose checks look the field up (listed for optional fields only)"))


class EventEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: str
    read_by: list[str] = Field(description="the cases that pick events of this kind")
    fields: list[FieldEntry]


class TraceFields(BaseModel):
    """Every event and field of the trace contract, with the cases that read the optional
    ones (docs/implementing-a-driver.md §3)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    format: Literal["ctxspec-trace-fields"] = "ctxspec-trace-fields"
    version: int = 1
    trace_contract_version: str = TRACE_CONTRACT_VERSION
    events: list[EventEntry]


def contract_field(path: str) -> tuple[str, str]:
    """(event kind, field) of a read path (conformance/reads.py): qualifiers dropped and
    identities as ``<id>``, so ``model_request[business].view.messages[assistant].modified_by``
    is ``("model_request", "view.messages.modified_by")``."""
    kind, _, rest = _ID.sub(".<id>", _QUALIFIER.sub("", path)).partition(".")
    return kind, rest


def _walk(model: type[BaseModel], prefix: str = "", within: bool = True
          ) -> Iterator[tuple[str, bool]]:
    """(path, required) of every field of a contract model, nested models walked into; a
    field inside an optional one is optional (``within``: every field above is required)."""
    for name, info in model.model_fields.items():
        if name == "kind" and not prefix:
            continue
        path, required = f"{prefix}{name}", within and info.is_required()
        yield path, required
        inner = model_of(info.annotation)
        if inner is not None:
            yield from _walk(inner, path + ".", required)


def lookups(cases: Iterable[Case], trace_of: Any) -> dict[tuple[str, str], set[str]]:
    """(event kind, field) → the cases whose checks look it up in the reference's traces
    (``trace_of(document)`` gives a document's trace); a field of "" is picking the kind."""
    found: dict[tuple[str, str], set[str]] = defaultdict(set)
    for case in cases:
        if case.refusal is not None:
            continue
        reads = Reads()
        trace = trace_of(case.scenario)
        try:
            if case.check is not no_check:
                case.check(reads.wrap(trace))
            if case.compare is not None and case.baseline is not None:
                case.compare(reads.wrap(trace), reads.wrap(trace_of(case.baseline)))
        except Exception:  # the reference passes every case; a lookup made is still made
            pass
        for path in reads.looked_up | {p for p in reads.paths if "." not in p}:
            found[contract_field(path)].add(case.id)
    return found


def trace_fields(read: dict[tuple[str, str], set[str]]) -> TraceFields:
    """The published table from the contract's models and the cases' lookups ``read``."""
    events = []
    for kind, model in EVENTS.items():
        named = dict(_walk(model))
        extra = {field for k, field in read if k == kind and field and field not in named
                 and field_status(kind, field) is not None}
        entries = [FieldEntry(path=path, status="required" if required else "optional",
                              read_by=[] if required else sorted(read.get((kind, path), ())))
                   for path, required in named.items()]
        entries += [FieldEntry(path=path, status=field_status(kind, path),  # type: ignore[arg-type]
                               read_by=sorted(read[(kind, path)])) for path in sorted(extra)]
        events.append(EventEntry(kind=kind, read_by=sorted(
            {case for (k, _), cases in read.items() if k == kind for case in cases}),
            fields=entries))
    return TraceFields(events=events)


def unnamed(read: dict[tuple[str, str], set[str]]) -> list[str]:
    """The event fields cases look up that the contract does not name, with the cases."""
    return sorted(f"{kind}.{field}: {', '.join(sorted(cases))}"
                  for (kind, field), cases in read.items()
                  if field and field_status(kind, field) is None)


__all__ = ["EventEntry", "FieldEntry", "TraceFields", "contract_field", "lookups",
           "trace_fields", "unnamed"]
