"""What every data contract of :mod:`contracts` builds on (§2): the frozen base model, the
integer kinds of sequence numbers and counts, timestamps, and the content-addressed blob
reference. Its own module so the contracts of a topic (a role's position, §10:
:mod:`node_checkpoint`) can live apart from :mod:`contracts`, which re-exports them.
"""

from typing import Annotated

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

SCHEMA_VERSION = 1
"""The structure version of this edition of the contracts (not a message sequence number)."""

Seq = Annotated[int, Field(ge=1)]
"""A sequence number or revision: strictly increasing, the first one is 1."""
Count = Annotated[int, Field(ge=0)]
SchemaVersion = Annotated[int, Field(ge=1)]
Timestamp = AwareDatetime
"""Every time is timezone-aware; the pure core never reads a clock, it is handed times."""


class Contract(BaseModel):
    """Base of every contract: immutable, unknown fields refused, ids and times as values."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=False)


class PayloadRef(Contract):
    """A reference to an immutable, content-addressed blob (§2: large bodies are blobs)."""

    digest: str = Field(pattern=r"^sha256:[0-9a-f]{64}$",
                        description="sha256 of the blob's bytes, as 'sha256:<64 hex>'")
    size_bytes: Count
    media_type: str = Field(default="text/plain", min_length=1)
