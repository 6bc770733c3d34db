"""File names that are not valid UTF-8, stored losslessly.

A share written by old Windows or Samba clients may hold names in Latin-1 or a code page; the
operating system hands Python such a name with each undecodable byte as a lone surrogate
(``surrogateescape``), which PostgreSQL's ``text`` cannot hold. ki keeps two forms of every
relative path (``/`` separators, relative to the source root):

* the **display form** (``source_object.external_id``): the name itself when it is valid UTF-8,
  otherwise its bytes decoded with each undecodable byte written ``\\xNN`` (e.g.
  ``Vertr\\xe4ge/K\\xfcndigung.txt``); this is what ki shows, searches and compares;
* the **raw form** (``source_object.external_id_raw``, ``bytea``): the exact bytes, only for names
  that are not valid UTF-8 (NULL otherwise), from which the file is opened again.
"""

from __future__ import annotations

import os


def raw_bytes(name: str) -> bytes:
    """The bytes of an OS-given name (``str`` with surrogate escapes) as the file system holds them."""
    return os.fsencode(name)


def display_form(name: str) -> tuple[str, bytes | None]:
    """``(display text, raw bytes or None)`` of an OS-given relative name.

    The raw bytes are returned only when the name is not valid UTF-8 (the display text then writes
    each undecodable byte as ``\\xNN``); a valid name is its own display form.
    """
    try:
        name.encode("utf-8")
        return name, None
    except UnicodeEncodeError:
        raw = raw_bytes(name)
        return raw.decode("utf-8", "backslashreplace"), raw


def os_name(display: str, raw: bytes | None) -> str:
    """The name to hand the operating system for a stored ``(display, raw)`` pair."""
    return os.fsdecode(raw) if raw is not None else display
