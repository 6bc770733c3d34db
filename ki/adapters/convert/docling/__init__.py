"""Docling Serve: the Parse stage's converter for everything ki does not convert itself.

One concept per module: :mod:`.client` (the HTTP flow: submit, long poll, result, the HTTP
failure rows), :mod:`.result` (a result document or failed task → StructuredDocument or a
classified error), :mod:`.formats` (Docling's input format and upload name), :mod:`.cooldown`
(the 401/403 cooldown), :mod:`.canary` (the startup check's tiny DOCX). The names below are the
package's public surface.
"""

from __future__ import annotations

from ki.adapters.convert.docling.canary import CANARY_MARKER, canary_docx
from ki.adapters.convert.docling.client import KEY_HINT, TERMINAL_STATUSES, DoclingClient
from ki.adapters.convert.docling.cooldown import (
    COOLDOWN_ENV,
    DEFAULT_COOLDOWN_SECONDS,
    cooldown_remaining,
    cooldown_seconds,
    reset_cooldown,
)
from ki.adapters.convert.docling.formats import EXTENSION_FORMATS, detect_format
from ki.adapters.convert.docling.result import CONVERTER_NAME
from ki.core.errors import DoclingKeyRejected, DoclingRequestRejected, DoclingUnavailable

__all__ = [
    "CANARY_MARKER",
    "COOLDOWN_ENV",
    "CONVERTER_NAME",
    "DEFAULT_COOLDOWN_SECONDS",
    "EXTENSION_FORMATS",
    "KEY_HINT",
    "TERMINAL_STATUSES",
    "DoclingClient",
    "DoclingKeyRejected",
    "DoclingRequestRejected",
    "DoclingUnavailable",
    "canary_docx",
    "cooldown_remaining",
    "cooldown_seconds",
    "detect_format",
    "reset_cooldown",
]
