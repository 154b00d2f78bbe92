"""Who may read a Session's history (§1, §4, §11 "授权审计"): the caller of the history API,
and the audit grants a runtime is configured with.

An audit read needs a grant, and a grant is a credential, not a name: :meth:`AuditGrants.issue`
makes one :class:`AuditGrant` per audit reader the Agent's configuration names
(``AgentConfig.audit_readers``); the operator hands the runtime the grants it issued
(``ReferenceRuntime(audit=…)``, ``restore(audit=…)``) and each reader its own. A read is
admitted only with a grant object those grants issued, for a reader the Agent still names —
a caller that only says it is ``"auditor"``, or brings a grant it built itself, is refused
(issue #34).
"""

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal
from uuid import UUID


class AuditGrant:
    """One audit reader's credential. Compared by identity: an object made anywhere but by
    :meth:`AuditGrants.issue` — whatever reader it names — is not one the runtime issued."""

    __slots__ = ("reader",)

    def __init__(self, reader: str) -> None:
        self.reader = reader

    def __repr__(self) -> str:
        return f"AuditGrant({self.reader!r})"


class AuditGrants:
    """The audit grants of one configuration: reader → the credential issued for it."""

    def __init__(self, issued: dict[str, AuditGrant]) -> None:
        self._issued = issued

    @classmethod
    def issue(cls, readers: Iterable[str]) -> "AuditGrants":
        """A new credential for each reader (none: no audit read is admitted)."""
        return cls({reader: AuditGrant(reader) for reader in readers})

    def grant(self, reader: str) -> AuditGrant | None:
        """The credential issued for ``reader``, to hand to it; None if none was issued."""
        return self._issued.get(reader)

    def admits(self, grant: AuditGrant | None, readers: Iterable[str]) -> bool:
        """Whether ``grant`` is a credential these grants issued, for one of ``readers`` (the
        Agent's audit readers now)."""
        return grant is not None and grant.reader in readers \
            and self._issued.get(grant.reader) is grant


@dataclass(frozen=True)
class HistoryCaller:
    """Who asks the history API: a Session, and a role, audit or a workspace script. An
    ``audit`` caller proves who it is with its ``grant`` (``role`` is the reader it names,
    which must be the grant's)."""

    session_id: UUID
    kind: Literal["role", "audit", "script"]
    role: str | None = None
    grant: AuditGrant | None = None


class AccessDenied(PermissionError):
    """The history API refused a caller; the message names nothing of what exists."""
