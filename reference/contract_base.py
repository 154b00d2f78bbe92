"""What every data contract of :mod:`contracts` builds on (§2): the frozen base model, the
integer kinds of sequence numbers and counts, timestamps, and the content-addressed blob
reference. Its own module so the contracts of a topic (a role's position, §10:
:mod:`node_checkpoint`) can live apart from :mod:`contracts`, which re-exports them.

The base also shares the set of given field names among contracts (Q503): a pydantic model
keeps, per instance, the set of the fields it was given (what ``model_fields_set`` and an
``exclude_unset`` dump read); a long Session holds tens of thousands of contracts, and their
sets took more memory than their values (issue #35).
"""

from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Self

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
    __given_fields__: ClassVar[dict[frozenset[str], set[str]]]

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        every = frozenset(cls.model_fields)
        # The sets of field names a contract is given in practice: all of them (read from a
        # document) or all but the schema version (built in code), made once per class.
        cls.__given_fields__ = {names: set(names)
                                for names in (every, every - {"schema_version"})}

    def model_post_init(self, context: Any, /) -> None:
        """Share the class's set of the field names this contract was given (Q503): a long
        Session holds tens of thousands of contracts, and each one's own set took more memory
        than its values (issue #35). A shared set is never changed: a frozen contract takes no
        assignment, and ``model_copy`` copies the set before it adds the names it updates."""
        shared = type(self).__given_fields__.get(frozenset(self.__pydantic_fields_set__))
        if shared is not None:
            object.__setattr__(self, "__pydantic_fields_set__", shared)

    def model_copy(self, *, update: Mapping[str, Any] | None = None,
                   deep: bool = False) -> Self:
        """A copy, sharing its class's set of given field names as a constructed one does."""
        copied = super().model_copy(update=update, deep=deep)
        copied.model_post_init(None)
        return copied


class PayloadRef(Contract):
    """A reference to an immutable, content-addressed blob (§2: large bodies are blobs)."""

    digest: str = Field(pattern=r"^sha256:[0-9a-f]{64}$",
                        description="sha256 of the blob's bytes, as 'sha256:<64 hex>'")
    size_bytes: Count
    media_type: str = Field(default="text/plain", min_length=1)
