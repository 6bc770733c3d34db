"""The permission projection: grant levels (project, source, folder, document) → one allow/deny pair (pure).

Spec: insertion-pipeline.md "Index" (the denormalised permission projection on every chunk).
Levels, outermost first (each may allow and deny principals):

1. **project** — ``access_grant`` rows with ``project_id`` (the source's project);
2. **source** — ``source.config["allowed_principals"]`` / ``["denied_principals"]`` (an absent
   ``allowed_principals`` key means ``["*"]``: a folder registered without grants is open to every
   principal) plus ``access_grant`` rows with ``source_id``;
3. **connector ACL** — for a local folder, the ``.ki-grants.json`` files from the source root down
   to the file's folder (:mod:`ki.domain.access.folder_grants`); a file may set ``"inherit": false``;
4. **document** — ``access_grant`` rows with ``source_object_id`` of the object or of any container
   it is embedded in (attachments inherit their mail's grants).

Compilation (:func:`compile_projection`): ``allowed`` accumulates the levels' allows, restarting
from empty at a level with ``inherit = false``; ``denied`` is the union of every level's denies
(an ethical wall set above cannot be lifted below). At query time a principal set ``P`` (always
including ``*``) sees a chunk iff ``allowed ∩ P ≠ ∅`` and ``denied ∩ P = ∅``: deny beats allow, and
an empty allow-list is visible to nobody (fail closed).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

#: The principal every caller holds: ``allowed_principals = ['*']`` is visible to everyone.
EVERYONE = "*"
MAX_PRINCIPAL_CHARS = 256


@dataclass(frozen=True)
class GrantLevel:
    """One level's grants.

    Attributes:
        scope: ``project``, ``source``, ``folder`` or ``document``.
        label: where it came from (a path, ``source 3``), for messages.
        allow / deny: principals (validated, stripped).
        inherit: False = allows of outer levels do not apply below this level (denies still do).
    """

    scope: str
    label: str
    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    inherit: bool = True


@dataclass(frozen=True)
class AccessProjection:
    """The compiled permission fields written on every chunk of one source object.

    Attributes:
        allowed: sorted unique principals that may see the object (empty = nobody).
        denied: sorted unique principals that never see it (wins over ``allowed``).
    """

    allowed: tuple[str, ...]
    denied: tuple[str, ...] = ()

    @property
    def acl_hash(self) -> str:
        """SHA-256 hex (first 16 chars) of the projection: equal projections hash equal."""
        blob = json.dumps([list(self.allowed), list(self.denied)], separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def visible_to(self, principals: Iterable[str]) -> bool:
        """Whether a caller holding ``principals`` (``*`` is added) may see the object."""
        held = principal_set(principals)
        return bool(set(self.allowed) & set(held)) and not (set(self.denied) & set(held))


def principal_set(principals: Iterable[str]) -> tuple[str, ...]:
    """The caller's principals as the filter uses them: stripped, unique, sorted, with ``*`` added."""
    return tuple(sorted({p.strip() for p in principals if p and p.strip()} | {EVERYONE}))


def clean_principals(values: Any, *, where: str) -> tuple[str, ...]:
    """Validate a list of principals read from configuration or a grants file.

    Raises: ValueError (with ``where``) for a non-list, a non-string, an empty or overlong name.
    """
    if not isinstance(values, list | tuple):
        raise ValueError(f"{where}: expected a list of principals, got {type(values).__name__}")
    out = []
    for v in values:
        if not isinstance(v, str) or not v.strip():
            raise ValueError(f"{where}: principal {v!r} is not a non-empty string")
        if len(v.strip()) > MAX_PRINCIPAL_CHARS:
            raise ValueError(f"{where}: principal longer than {MAX_PRINCIPAL_CHARS} characters")
        out.append(v.strip())
    return tuple(out)


def compile_projection(levels: Sequence[GrantLevel]) -> AccessProjection:
    """Compile levels (outermost first) into one projection (see the module docstring)."""
    allowed: set[str] = set()
    denied: set[str] = set()
    for level in levels:
        if not level.inherit:
            allowed = set()
        allowed.update(level.allow)
        denied.update(level.deny)
    return AccessProjection(tuple(sorted(allowed)), tuple(sorted(denied)))
