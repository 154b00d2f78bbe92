"""The Session's Operations by id (§2 "Operation"), with the state of each tool call kept by
its call id as the Operations are set: the projection's protocol placeholders read the state of
the calls they close (§6, Q69) on every request, and reading them must not cost a pass over
every Operation the Session ever had (docs/architecture.md "The cost of a request", Q321).
"""

from collections.abc import Iterable, Mapping
from typing import Any
from uuid import UUID

from ctxspec.reference.contracts import Operation, OperationPurpose, OperationState


class OperationTable(dict[UUID, Operation]):
    """A dict of Operations by id whose ``tool_states`` follow every assignment.

    Only item assignment changes it (the runtime never removes an Operation); ``update`` and
    construction go through it too."""

    def __init__(self, items: Mapping[UUID, Operation] | Iterable[tuple[UUID, Operation]] = ()
                 ) -> None:
        super().__init__()
        self.tool_states: dict[UUID, OperationState] = {}
        """Each tool call's Operation state by the call's id (the newest assignment's)."""
        self.update(items)

    def __setitem__(self, key: UUID, value: Operation) -> None:
        super().__setitem__(key, value)
        if value.purpose is OperationPurpose.TOOL:
            self.tool_states[UUID(value.purpose_key.split(":", 1)[1])] = value.state

    def update(self, items: Any = (), /, **_: object) -> None:
        pairs = items.items() if isinstance(items, Mapping) else items
        for key, value in pairs:
            self[key] = value


__all__ = ["OperationTable"]
