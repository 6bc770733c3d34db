"""Which ontology is active: the one shipped with ki, or ``pipeline.ontology_file``.

Spec: insertion-pipeline.md "Extract metadata" ("the active document-type ontology") and the
Ontology page it links to; ("Another ontology can replace it through the config key
``pipeline.ontology_file`` (env ``KI_PIPELINE__ONTOLOGY_FILE``) pointing at a JSON file shaped like
the ``ontology`` object of ``truth.json``").

Loading is cached per (path, mtime, size): the stage handler asks on every document, the file is
read once per change.
"""

from __future__ import annotations

import json
import threading
from importlib import resources
from pathlib import Path
from typing import Any

from ki.core.errors import ConfigurationError, OntologyError
from ki.domain.ontology.model import Ontology

#: The package resource holding the shipped ontology.
DEFAULT_RESOURCE = "legal-document-types.json"

_cache: dict[tuple, Ontology] = {}
_lock = threading.Lock()


def default_ontology() -> Ontology:
    """The ontology shipped in ``ki/domain/ontology/data`` (cached)."""
    key = ("package", DEFAULT_RESOURCE)
    with _lock:
        cached = _cache.get(key)
    if cached is not None:
        return cached
    raw = resources.files("ki.domain.ontology").joinpath("data", DEFAULT_RESOURCE).read_text(encoding="utf-8")
    onto = Ontology.from_document(json.loads(raw), source=f"package:ki/domain/ontology/data/{DEFAULT_RESOURCE}")
    with _lock:
        _cache[key] = onto
    return onto


def load_ontology_file(path: str | Path) -> Ontology:
    """The ontology in the JSON file ``path`` (an ontology object, or a ``truth.json`` holding one).

    Raises:
        ConfigurationError: the file is missing, unreadable, not JSON or not an ontology — ki's own
            setup is wrong, so the run stops and says which file and why (no document is blamed).
    """
    p = Path(path).expanduser()
    try:
        st = p.stat()
    except OSError as exc:
        raise ConfigurationError(f"pipeline.ontology_file {str(p)!r} cannot be read: {exc}") from exc
    key = ("file", str(p.resolve()), st.st_mtime_ns, st.st_size)
    with _lock:
        cached = _cache.get(key)
    if cached is not None:
        return cached
    try:
        doc: Any = json.loads(p.read_text(encoding="utf-8"))
        onto = Ontology.from_document(doc, source=str(p))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, OntologyError) as exc:
        raise ConfigurationError(f"pipeline.ontology_file {str(p)!r} is not a usable ontology: {exc}") from exc
    with _lock:
        _cache[key] = onto
    return onto


def active_ontology(config: Any) -> Ontology:
    """The ontology the configuration selects: ``config.pipeline.ontology_file`` or the shipped one.

    Raises:
        ConfigurationError: see :func:`load_ontology_file`.
    """
    path = getattr(getattr(config, "pipeline", None), "ontology_file", None)
    return load_ontology_file(path) if path else default_ontology()
