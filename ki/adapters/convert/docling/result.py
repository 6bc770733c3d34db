"""Reading Docling Serve's answers: a ``ConvertDocumentResponse`` or a failed task → a document or an error.

The failure-contract rows of conversion.md section 3 that concern a *document* (HTTP 200 with
``success``/``partial_success``/``failure``/``skipped``, empty text, a task-level failure) live
here; the HTTP rows (404, 422, 401/403, 5xx, timeouts) live in :mod:`ki.adapters.convert.docling.client`.
"""

from __future__ import annotations

from typing import Any

from ki.adapters.convert.model import StructuredDocument, clean_text
from ki.core.errors import DoclingUnavailable, UnsupportedDocument

CONVERTER_NAME = "ki.docling"


def build_document(
    result: dict[str, Any], from_format: str, name: str, task_id: str, versions: dict[str, Any] | None,
) -> StructuredDocument:
    """Read one ``ConvertDocumentResponse`` (``GET /v1/result/{task_id}``) into a document.

    Args:
        result: the parsed JSON answer; ``from_format`` the Docling input format sent; ``name``
            the upload name (for messages); ``versions`` the server's ``/version`` answer or None.
    Returns:
        the :class:`StructuredDocument` described in :meth:`DoclingClient.convert`.
    Raises (conversion.md section 3):
        UnsupportedDocument: ``unsupported_format`` (``skipped``), ``conversion_failed``
            (``partial_success``/``failure``, or a ``TaskFailureResult`` refusing the file),
            ``empty_text`` (``success`` without text).
        DoclingUnavailable: an unknown status, success without any content, a crashed task.
    """
    if "document" not in result and isinstance(result.get("failure"), dict):  # TaskFailureResult
        raise_task_failure(task_id, {"failure": result["failure"]}, name)
    document = result.get("document") or result.get("content") or {}
    if not isinstance(document, dict):
        document = {}
    status = result.get("status")
    errors = [_error_item(e) for e in result.get("errors") or [] if isinstance(e, dict)]
    evidence = {"status": status, "errors": errors, "task_id": task_id, "filename": name}
    if status == "skipped":
        categories = sorted({e["category"] for e in errors if e.get("category")})
        raise UnsupportedDocument(
            f"{name}: Docling Serve skipped the file ({_errors_text(errors)}); the format "
            f"{from_format!r} is not allowed or not recognised",
            reason="unsupported_format",
            details={**evidence, "categories": categories},
        )
    if status in ("partial_success", "failure"):
        what = "converted only part of" if status == "partial_success" else "could not convert"
        raise UnsupportedDocument(
            f"{name}: Docling Serve {what} the document ({status}: {_errors_text(errors)})",
            reason="conversion_failed",
            details=evidence,
        )
    if status != "success":
        raise DoclingUnavailable(
            f"Docling Serve returned an unknown document status {status!r} for {name}",
            infrastructure="docling answered an unknown status",
        )

    warnings: list[str] = []
    raw_json = document.get("json_content")
    doc = None
    if isinstance(raw_json, dict):
        doc, problem = _rehydrate(raw_json)
        if problem:
            warnings.append(problem)
    elif raw_json is not None:
        warnings.append(f"docling json_content is a {type(raw_json).__name__}, not an object; ignored")
        raw_json = None

    text, source = _pick_text(doc, document)
    if text is None:
        raise DoclingUnavailable(
            f"Docling Serve reported success for {name} but returned no text, markdown or "
            "readable DoclingDocument although they were requested",
            infrastructure="docling answered success without content",
        )
    if not text.strip():
        raise UnsupportedDocument(
            f"{name}: Docling Serve converted the document but it has no text; OCR is the likely "
            "cause (a scan or image whose OCR read nothing: check the EasyOCR models and languages), "
            "or the document is empty",
            reason="empty_text",
            details={"status": status, "errors": errors, "task_id": task_id, "from_format": from_format},
        )
    if errors:
        warnings.append(f"docling reported success with errors: {_errors_text(errors)}")

    metadata: dict[str, Any] = {
        "docling_json": raw_json,
        "docling_status": status,
        "docling_errors": errors,
        "docling_task_id": task_id,
        "from_format": from_format,
        "text_source": source,
        "processing_time": result.get("processing_time"),
    }
    if result.get("confidence") is not None:
        metadata["confidence"] = result.get("confidence")
    if versions:
        metadata["docling_versions"] = versions
    if isinstance(raw_json, dict) and raw_json.get("version"):
        metadata["docling_schema_version"] = raw_json.get("version")
    return StructuredDocument(
        text=text,
        format=from_format,
        converter=CONVERTER_NAME,
        converter_version=_serve_version(versions) or "unknown",
        title=_title(doc, raw_json),
        pages=_pages(doc, raw_json),
        warnings=warnings,
        metadata=metadata,
    )


def raise_task_failure(task_id: str, status: dict[str, Any], name: str) -> None:
    """Raise what a task that ended ``failure`` without a result means.

    A non-retryable ``policy`` refusal of *this file* (size, page count, format policy) is the
    file's property: ``UnsupportedDocument("conversion_failed")``. Anything else (the task
    crashed server-side, models missing) is an outage: :class:`~ki.core.errors.DoclingUnavailable`.
    """
    failure = status.get("failure") if isinstance(status.get("failure"), dict) else {}
    message = failure.get("message") or status.get("error_message") or "no reason given"
    category = failure.get("category")
    details = {"status": "failure", "task_id": task_id, "failure": failure or None,
               "error_message": status.get("error_message")}
    if category == "policy" and failure.get("retryable") is False:
        # Admission refused *this file* (size, page count, format policy): the file's property.
        raise UnsupportedDocument(
            f"{name}: Docling Serve refused the document ({category}): {message}",
            reason="conversion_failed",
            details={**details, "errors": [{"category": category, "page_no": None,
                                            "module_name": failure.get("phase"), "error_message": message}]},
        )
    raise DoclingUnavailable(
        f"Docling Serve task {task_id} for {name} failed server-side "
        f"(category {category or 'unknown'}, phase {failure.get('phase') or 'unknown'}): {message}",
        infrastructure=f"docling task failed ({category or 'unknown'})",
    )


def _error_item(item: dict[str, Any]) -> dict[str, Any]:
    return {
        "category": item.get("category") or "unknown",
        "page_no": item.get("page_no"),
        "module_name": item.get("module_name"),
        "error_message": clean_text(str(item.get("error_message") or "")),
    }


def _errors_text(errors: list[dict[str, Any]]) -> str:
    if not errors:
        return "no error details"
    parts = []
    for e in errors[:5]:
        page = f" page {e['page_no']}" if e.get("page_no") is not None else ""
        parts.append(f"{e['category']}{page}: {e['error_message'][:160]}")
    more = f" (+{len(errors) - 5} more)" if len(errors) > 5 else ""
    return "; ".join(parts) + more


def _rehydrate(raw: dict[str, Any]) -> tuple[Any, str | None]:
    """``DoclingDocument.model_validate(raw)`` or ``(None, warning)``; never raises."""
    try:
        from docling_core.types.doc import DoclingDocument
    except ImportError as exc:  # pragma: no cover - docling-core is a dependency
        return None, f"docling-core is not installed; kept the raw DoclingDocument JSON ({exc})"
    try:
        return DoclingDocument.model_validate(raw), None
    except Exception as exc:  # pydantic ValidationError (a ValueError) or a schema bug
        try:
            from importlib.metadata import version

            sdk = version("docling-core")
        except Exception:  # pragma: no cover
            sdk = "?"
        first = str(exc).strip().splitlines()
        reason = " ".join(line.strip() for line in first[:3])[:300]
        return None, (
            f"docling_json (schema {raw.get('version')!r}) could not be re-hydrated with docling-core {sdk}: "
            f"{reason}; kept the raw JSON and the server's text"
        )


def _pick_text(doc: Any, document: dict[str, Any]) -> tuple[str | None, str]:
    """The document's text and where it came from.

    Preferred: the re-hydrated DoclingDocument exported with picture children (OCR of full-page
    scans). Fallbacks, in order: ``text_content``, ``md_content`` — also when the export is blank
    but the server's text is not (an exporter difference must not look like an empty scan).
    """
    exported = None
    if doc is not None:
        try:
            exported = doc.export_to_text(traverse_pictures=True)
        except Exception:  # an exporter bug must not lose the server's own text
            exported = None
        if exported is not None and exported.strip():
            return exported, "docling_json"
    for key in ("text_content", "md_content"):
        value = document.get(key)
        if isinstance(value, str) and (value.strip() or exported is None):
            return value, key
    if exported is not None:
        return exported, "docling_json"
    return None, "none"


def _pages(doc: Any, raw: Any) -> int | None:
    pages = getattr(doc, "pages", None) if doc is not None else (raw or {}).get("pages")
    return len(pages) if pages else None


def _title(doc: Any, raw: Any) -> str | None:
    texts = [(t.label.value if hasattr(t.label, "value") else t.label, t.text) for t in doc.texts] if doc else [
        (t.get("label"), t.get("text")) for t in (raw or {}).get("texts", []) if isinstance(t, dict)
    ]
    for label, text in texts:
        if label == "title" and isinstance(text, str) and text.strip():
            return text.strip()
    return None


def _serve_version(versions: dict[str, Any] | None) -> str | None:
    if not versions:
        return None
    for key in ("docling-serve", "docling_serve", "version"):
        value = versions.get(key)
        if isinstance(value, str) and value:
            return value
    return None
