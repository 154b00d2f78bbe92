"""The field registry of a hook point (§3): which semantic fields a hook may write, their schema,
and how payload fields map to effective-context fields.

A field key addresses a stable record's semantic field, never a view index (CTX-3.20, CTX-3.21):
``<root>.<name>.<name>…`` where the root names a part of the record — ``text``, or
``tool_call:<call_id>`` for one call of an assistant decision — and the names walk into its
object value. ``tool_call:<call_id>.arguments.path`` is the ``path`` argument of that call.

Each hook point has a versioned registry. A :class:`FieldSpec` declares one writable field: its
context key pattern (``{call_id}`` stands for the call the hook runs for), the payload path that
expresses the same fact (``arguments`` ⇔ ``tool_call:{call_id}.arguments``), and its kind. An
``object`` field is writable as a whole and in its descendants, and overlapping writes are
compared by expanding it; an ``opaque`` field is writable only as a whole, so a write to a
descendant can never be proved consistent with it. Some fields are never writable, whatever a
registry says: identities, raw text, permissions, quotas, deadlines and stopped state
(CTX-3.46, CTX-3.93; :func:`forbidden`). CTX-3.43
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal
from uuid import UUID

FieldKind = Literal["object", "string", "number", "boolean", "opaque"]

FORBIDDEN_ROOTS = frozenset({"raw", "identity", "permissions", "quota", "deadline", "stopped"})
"""Roots no hook may write: raw facts and the limits an allow can never lift."""
IDENTITY_NAMES = frozenset({"id", "call_id", "event_id", "record_id", "input_id", "operation_id",
                            "run_id", "context_id"})
"""Names that are identities wherever they appear (CTX-3.46: identities are never writable)."""


def split(field_key: str) -> tuple[str, tuple[str, ...]]:
    """A field key as (root, names)."""
    root, *names = field_key.split(".")
    return root, tuple(names)


def well_formed(field_key: str) -> bool:
    """A root and names, none of them empty, and never a view path such as /messages/3."""
    return bool(field_key) and not field_key.startswith("/") and \
        all(part for part in field_key.split("."))


def is_within(key: str, ancestor: str) -> bool:
    """Whether ``key`` is ``ancestor`` or one of its descendants."""
    return key == ancestor or key.startswith(ancestor + ".")


def forbidden(field_key: str) -> bool:
    """Identities, raw text, permissions, quotas, deadlines and stopped state are never writable,
    at whatever depth they appear."""
    root, names = split(field_key)
    return root.split(":")[0] in FORBIDDEN_ROOTS or \
        any(n in IDENTITY_NAMES or n in FORBIDDEN_ROOTS for n in names)


@dataclass(frozen=True)
class FieldSpec:
    """One writable field of a hook point."""

    context_key: str | None
    """Pattern of the effective-context field, e.g. ``tool_call:{call_id}.arguments``."""
    payload_path: str | None
    """The payload path of the same fact, e.g. ``arguments``; None for a context-only field."""
    kind: FieldKind
    required: bool = False
    """A required field may be replaced but never deleted."""

    def __post_init__(self) -> None:
        if self.context_key is None and self.payload_path is None:
            raise ValueError("a field spec names a context key, a payload path or both")
        for key in (self.context_key, self.payload_path):
            if key is not None and forbidden(key.replace("{call_id}", "x")):
                raise ValueError(f"{key!r} is never writable (identity, raw text or a limit)")

    def context_key_for(self, call_id: UUID | None) -> str | None:
        if self.context_key is None:
            return None
        if "{call_id}" in self.context_key:
            if call_id is None:
                return None
            return self.context_key.replace("{call_id}", str(call_id))
        return self.context_key


@dataclass(frozen=True)
class FieldRegistry:
    """The writable fields of one hook point, at one version (recorded with every decision)."""

    hook_point: str
    version: str
    fields: Sequence[FieldSpec]

    def spec_for_context(self, field_key: str,
                         call_id: UUID | None) -> tuple[FieldSpec, str] | None:
        """The most specific spec covering a context field key, and the spec's own key: the
        field itself or an ancestor of ``object`` kind. None when the field is not registered."""
        best: tuple[FieldSpec, str] | None = None
        for spec in self.fields:
            declared = spec.context_key_for(call_id)
            if declared is None:
                continue
            covers = field_key == declared or (spec.kind == "object"
                                               and is_within(field_key, declared))
            if covers and (best is None or len(declared) > len(best[1])):
                best = spec, declared
        return best

    def context_key_of_payload(self, payload_path: str, call_id: UUID | None) -> str | None:
        """The context field that a payload path expresses (``arguments.path`` →
        ``tool_call:<call_id>.arguments.path``), or None for a payload-only or unknown path."""
        spec = self.payload_spec(payload_path)
        if spec is None or spec.payload_path is None:
            return None
        declared = spec.context_key_for(call_id)
        if declared is None:
            return None
        return declared + payload_path[len(spec.payload_path):]

    def payload_spec(self, payload_path: str) -> FieldSpec | None:
        """The most specific spec covering a payload path."""
        best: FieldSpec | None = None
        for spec in self.fields:
            if spec.payload_path is None:
                continue
            covers = payload_path == spec.payload_path or (
                spec.kind == "object" and is_within(payload_path, spec.payload_path))
            if covers and (best is None or len(spec.payload_path) > len(best.payload_path or "")):
                best = spec
        return best

    def payload_path_of_context(self, field_key: str, call_id: UUID | None) -> str | None:
        """The payload path of a context field of the current call, if the payload has one."""
        for spec in self.fields:
            declared = spec.context_key_for(call_id)
            if declared is None or spec.payload_path is None:
                continue
            if field_key == declared or (spec.kind == "object" and is_within(field_key, declared)):
                return spec.payload_path + field_key[len(declared):]
        return None


# --- values at paths -----------------------------------------------------------------------

JSON = None | bool | int | float | str | list["JSON"] | dict[str, "JSON"]


class _Absent:
    """The final value of a field that a write deleted (or never had)."""

    def __repr__(self) -> str:
        return "ABSENT"


ABSENT = _Absent()


def value_at(document: Mapping[str, JSON], names: Sequence[str]) -> "JSON | _Absent":
    """The value at a path inside an object document; ABSENT where the path does not exist."""
    node: JSON | _Absent = dict(document)
    for name in names:
        if not isinstance(node, dict) or name not in node:
            return ABSENT
        node = node[name]
    return node


def with_value(document: Mapping[str, JSON], names: Sequence[str],
               value: "JSON | _Absent") -> dict[str, JSON]:
    """A copy of ``document`` with ``value`` at the path (ABSENT deletes it); missing objects on
    the way are created."""
    if not names:
        raise ValueError("a path has at least one name")
    head, rest = names[0], names[1:]
    copy = dict(document)
    if not rest:
        if isinstance(value, _Absent):
            copy.pop(head, None)
        else:
            copy[head] = value
        return copy
    child = copy.get(head)
    copy[head] = with_value(child if isinstance(child, dict) else {}, rest, value)
    return copy


def kind_accepts(kind: FieldKind, value: "JSON | _Absent") -> bool:
    """Whether a value has the schema a field declares (deletion is accepted for any field)."""
    if isinstance(value, _Absent):
        return True
    if kind == "object":
        return isinstance(value, dict)
    if kind == "string":
        return isinstance(value, str)
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "boolean":
        return isinstance(value, bool)
    return True
