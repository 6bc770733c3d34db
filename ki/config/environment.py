"""Environment variables read by processes that must stay small, without the settings models.

The settings models (:mod:`ki.config.process`) read every other variable. These two questions are asked before
anything heavy is loaded: whether tracing is wanted at all (any ``OTEL_*`` variable), and which variables decide
what a search finds (``ki search`` and ``ki serve`` compare them before one answers for the other). Standard
library only.
"""

from __future__ import annotations

import os
from collections.abc import Mapping


def tracing_requested(environ: Mapping[str, str] | None = None) -> bool:
    """Whether any ``OTEL_*`` variable is set (``environ``: default ``os.environ``): without one, tracing stays off
    and its settings need not be loaded."""
    environ = os.environ if environ is None else environ
    return any(name.startswith("OTEL_") for name in environ)


def search_environment(environ: Mapping[str, str] | None = None) -> list[tuple[str, str]]:
    """The (name, value) pairs, sorted, of the variables that decide what a search finds: ``KI_DATABASE_URL``, the
    OpenSearch settings (``KI_OPENSEARCH_*``) and the configuration pins (``KI_SECTION__FIELD``); empty values
    count as unset. ``environ``: default ``os.environ``."""
    environ = os.environ if environ is None else environ
    return sorted((k, v) for k, v in environ.items() if v and (
        k == "KI_DATABASE_URL" or k.startswith("KI_OPENSEARCH_") or (k.startswith("KI_") and "__" in k)))
