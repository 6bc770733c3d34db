"""A document's title: its own heading or subject line, verbatim. Pure.

Spec: insertion-pipeline.md "Extract metadata" (title). Order: the converter's title (a PDF/DOCX
heading), the e-mail subject, the first line of a plain text, the file name without extension.
"""

from __future__ import annotations

from pathlib import PurePath
from typing import Any

MAX_TITLE_CHARS = 300


def document_title(body: dict[str, Any], path: str) -> str:
    """The title of the converted document ``body`` (a ``structured_json`` dict) found at ``path``."""
    for candidate in (body.get("title"), (body.get("mail") or {}).get("subject")):
        if candidate and candidate.strip():
            return " ".join(candidate.split())[:MAX_TITLE_CHARS]
    for line in (body.get("text") or "").splitlines():
        if line.strip():
            return " ".join(line.split())[:MAX_TITLE_CHARS]
    return PurePath(path).stem[:MAX_TITLE_CHARS]
