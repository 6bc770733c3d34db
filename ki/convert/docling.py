"""Docling Serve client: the Parse stage's converter for everything ki does not convert itself.

Spec: insertion-pipeline.md "Parse (convert)" (Docling Serve with OCR pinned to EasyOCR for
German and English, accurate tables, a 270-second per-document budget, one structured_json per
content hash) and "Failure modes" (a poison file quarantines at Parse, half a document is never
indexed, dead credentials fail fast through a short cooldown). The API facts and the
failure-contract table come from conversion.md sections 2, 3 and 9 (docling-serve 1.38.2).

Flow: ``POST /v1/convert/file/async`` (multipart) → ``GET /v1/status/poll/{task_id}?wait=N``
until the task is done, bounded by the client timeout → ``GET /v1/result/{task_id}``.

Failure mapping (every row is tested in tests/integration/test_docling_client.py):

================================================  ===========================================
Observation                                       Raised
================================================  ===========================================
200 + ``success`` + text                          nothing: a :class:`StructuredDocument`
200 + ``success`` + empty/whitespace text         ``UnsupportedDocument(reason="empty_text")``
200 + ``partial_success`` / ``failure``           ``UnsupportedDocument(reason="conversion_failed")``
200 + ``skipped``                                 ``UnsupportedDocument(reason="unsupported_format")``
404 (task / task result not found), 5xx,          :class:`DoclingUnavailable` (infrastructure,
408/429, connect/read errors, reset, timeouts,    never quarantines)
a task still running at the client timeout
401 / 403                                         :class:`DoclingKeyRejected` (a
                                                  ``ProviderPermanentError``) + process-wide
                                                  cooldown
422                                               :class:`DoclingRequestRejected` (a
                                                  ``ConfigurationError``: stops the run)
413 (upload too large)                            ``UnsupportedDocument(reason="too_large")``
task ``failure`` and no result (404): crashed     :class:`DoclingUnavailable`; a non-retryable
                                                  ``policy`` refusal of the file →
                                                  ``UnsupportedDocument("conversion_failed")``
================================================  ===========================================

No exception escapes as a bare ``ValueError`` (pydantic's ``ValidationError`` and
``json.JSONDecodeError`` are ValueErrors, which :func:`ki.taxonomies.classify_error` would
quarantine): server-side garbage is an outage, not a property of the file.
"""

from __future__ import annotations

import io
import json
import mimetypes
import os
import threading
import time
import zipfile
from pathlib import PurePath
from typing import Any

import httpx

from ki.convert.model import StructuredDocument, clean_text
from ki.errors import ConfigurationError, InfrastructureError, ProviderPermanentError, UnsupportedDocument

CONVERTER_NAME = "ki.docling"

#: Task / document statuses that end polling (``ConversionStatus`` in docling).
TERMINAL_STATUSES = frozenset({"success", "partial_success", "failure", "skipped"})

#: Environment variable of the provider-fault cooldown (ProcessSettings.provider_fault_cooldown_seconds).
COOLDOWN_ENV = "KI_PROVIDER_FAULT_COOLDOWN_SECONDS"
DEFAULT_COOLDOWN_SECONDS = 60.0

KEY_HINT = "set components.docling_api_key / KI_COMPONENTS__DOCLING_API_KEY"

#: Docling ``InputFormat`` per file extension (docling ``FormatToExtensions``, the subset ki routes).
EXTENSION_FORMATS: dict[str, str] = {
    **dict.fromkeys(("docx", "dotx", "docm", "dotm"), "docx"),
    **dict.fromkeys(("doc", "dot"), "doc"),
    "rtf": "rtf",
    **dict.fromkeys(("pptx", "potx", "ppsx", "pptm", "potm", "ppsm"), "pptx"),
    **dict.fromkeys(("ppt", "pot", "pps"), "ppt"),
    "pdf": "pdf",
    **dict.fromkeys(("md", "markdown"), "md"),
    **dict.fromkeys(("html", "htm", "xhtml"), "html"),
    **dict.fromkeys(("mhtml", "mht"), "mhtml"),
    **dict.fromkeys(("jpg", "jpeg", "png", "tif", "tiff", "bmp", "webp", "gif"), "image"),
    **dict.fromkeys(("adoc", "asciidoc", "asc"), "asciidoc"),
    "csv": "csv",
    **dict.fromkeys(("xlsx", "xlsm", "xltx", "xltm"), "xlsx"),
    **dict.fromkeys(("xls", "xlt"), "xls"),
    **dict.fromkeys(("odt", "ott"), "odt"),
    **dict.fromkeys(("ods", "ots"), "ods"),
    **dict.fromkeys(("odp", "otp"), "odp"),
    **dict.fromkeys(("eml", "msg"), "email"),
    "epub": "epub",
    **dict.fromkeys(("tex", "latex"), "latex"),
    "vtt": "vtt",
}


class DoclingUnavailable(InfrastructureError):
    """Docling Serve is down, slow, crashed on the task or answered garbage (never quarantines).

    ``infrastructure`` is the short cause, e.g. ``"docling answered HTTP 504"``.
    """


class DoclingRequestRejected(ConfigurationError):
    """Docling Serve refused the request's options (HTTP 422): a configuration error that stops the run.

    Attributes:
        detail: the server's validation detail (FastAPI/pydantic ``detail``), as parsed JSON or text.
    """

    def __init__(self, message: str, *, detail: Any = None):
        super().__init__(message)
        self.detail = detail


class DoclingKeyRejected(ProviderPermanentError):
    """Docling Serve refused the API key (HTTP 401/403); deterministic, with a process-wide cooldown."""


# --- process-wide cooldown after 401/403 ------------------------------------------------------

_cooldown_lock = threading.Lock()
_cooldown_until = 0.0
_cooldown_message: str | None = None


def cooldown_seconds() -> float:
    """The provider-fault cooldown in seconds: ``$KI_PROVIDER_FAULT_COOLDOWN_SECONDS`` or 60 (≥ 0)."""
    raw = os.environ.get(COOLDOWN_ENV)
    if raw is None or not raw.strip():
        return DEFAULT_COOLDOWN_SECONDS
    try:
        return max(0.0, float(raw))
    except ValueError:
        return DEFAULT_COOLDOWN_SECONDS


def reset_cooldown() -> None:
    """Forget a 401/403 cooldown (tests, and the quarantine retry after the key was fixed)."""
    global _cooldown_until, _cooldown_message
    with _cooldown_lock:
        _cooldown_until = 0.0
        _cooldown_message = None


def cooldown_remaining() -> float:
    """Seconds left in the current 401/403 cooldown (0.0 when none is active)."""
    with _cooldown_lock:
        return max(0.0, _cooldown_until - time.monotonic()) if _cooldown_message else 0.0


def _start_cooldown(message: str) -> None:
    global _cooldown_until, _cooldown_message
    with _cooldown_lock:
        _cooldown_until = time.monotonic() + cooldown_seconds()
        _cooldown_message = message


def _check_cooldown() -> None:
    with _cooldown_lock:
        active = _cooldown_message is not None and time.monotonic() < _cooldown_until
        message = _cooldown_message
    if active and message:
        raise DoclingKeyRejected(message)


# --- format detection -------------------------------------------------------------------------

_CANONICAL_EXT = {"docx": "docx", "pptx": "pptx", "xlsx": "xlsx", "pdf": "pdf", "html": "html", "rtf": "rtf",
                  "odt": "odt", "ods": "ods", "odp": "odp", "epub": "epub"}
_IMAGE_MAGIC = ((b"\x89PNG", "png"), (b"\xff\xd8\xff", "jpg"), (b"II*\x00", "tif"), (b"MM\x00*", "tif"),
                (b"GIF8", "gif"), (b"BM", "bmp"))
_ODF_MIMETYPES = {b"application/vnd.oasis.opendocument.text": "odt",
                  b"application/vnd.oasis.opendocument.spreadsheet": "ods",
                  b"application/vnd.oasis.opendocument.presentation": "odp",
                  b"application/epub+zip": "epub"}


def detect_format(data: bytes, filename: str) -> tuple[str, str]:
    """Docling's input format for a file, and the filename to upload it under.

    The extension decides (docling's own extension table); a file without a known extension is
    recognised by its leading bytes (PDF, PNG/JPEG/TIFF/GIF/BMP/WebP, OOXML/ODF/EPUB zips, RTF,
    HTML) and uploaded with the matching extension appended, because Docling Serve skips a file
    whose name does not match ``from_formats`` (conversion.md section 9, row 12).

    Returns:
        ``(format, upload_filename)``, e.g. ``("pptx", "deck.pptx")``.
    Raises:
        UnsupportedDocument: reason ``unsupported_format`` when neither tells a format Docling reads
            (e.g. an OLE2 container without extension).
    """
    name = PurePath(filename).name or "document"
    ext = PurePath(name).suffix.lower().lstrip(".")
    if ext in EXTENSION_FORMATS:
        return EXTENSION_FORMATS[ext], name
    fmt, new_ext = _sniff(data)
    if fmt is None:
        raise UnsupportedDocument(
            f"{name}: Docling Serve cannot tell this file's format (extension {ext or 'none'!r}, "
            "leading bytes not recognised)",
            reason="unsupported_format",
            details={"extension": ext},
        )
    return fmt, f"{name}.{new_ext}"


def _sniff(data: bytes) -> tuple[str | None, str]:
    head = data[:2048]
    if b"%PDF-" in data[:1024]:
        return "pdf", "pdf"
    for magic, ext in _IMAGE_MAGIC:
        if head.startswith(magic):
            return "image", ext
    if head.startswith(b"RIFF") and head[8:12] == b"WEBP":
        return "image", "webp"
    if head.startswith(b"PK\x03\x04"):
        try:
            with zipfile.ZipFile(io.BytesIO(data)) as archive:
                names = archive.namelist()
                if "mimetype" in names:
                    odf = _ODF_MIMETYPES.get(archive.read("mimetype").strip())
                    if odf:
                        return odf, _CANONICAL_EXT[odf]
        except (zipfile.BadZipFile, OSError, KeyError, RuntimeError):
            return None, ""
        for prefix, fmt in (("word/", "docx"), ("ppt/", "pptx"), ("xl/", "xlsx")):
            if any(n.startswith(prefix) for n in names):
                return fmt, fmt
        return None, ""
    stripped = head.lstrip(b"\xef\xbb\xbf \t\r\n").lower()
    if stripped.startswith(b"{\\rtf"):
        return "rtf", "rtf"
    if stripped.startswith((b"<!doctype html", b"<html")):
        return "html", "html"
    return None, ""


def _mime_type(upload_name: str) -> str:
    return mimetypes.guess_type(upload_name)[0] or "application/octet-stream"


# --- the client -------------------------------------------------------------------------------


class DoclingClient:
    """Synchronous Docling Serve client (async task API + long polling).

    Args:
        base_url: ``components.docling_url``, e.g. ``http://docling:5001`` (no trailing ``/v1``).
        api_key: sent as ``X-Api-Key`` when set (``DOCLING_SERVE_API_KEY`` on the server).
        document_timeout_seconds: the server-side ``document_timeout`` form option (s, > 0; the
            server answers 422 for ≤ 0 or above its ``DOCLING_SERVE_MAX_DOCUMENT_TIMEOUT``).
        client_timeout_seconds: the whole per-document budget on this side (s): submit + polling +
            every read. Keep it above ``document_timeout_seconds`` so the server reports its own
            timeout (as ``partial_success``/``timeout``) before the client gives up.
        poll_wait_seconds: ``wait`` of each long poll (s), capped by the time left.
        transport: an httpx transport (tests); default: a normal HTTP connection pool.

    Thread-safe: one instance may serve every worker thread (httpx.Client is thread-safe).
    """

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        document_timeout_seconds: float = 240,
        client_timeout_seconds: float = 270,
        poll_wait_seconds: float = 5,
        transport: httpx.BaseTransport | None = None,
    ):
        if not base_url:
            raise ConfigurationError("components.docling_url is empty")
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key or None
        self.document_timeout_seconds = float(document_timeout_seconds)
        self.client_timeout_seconds = float(client_timeout_seconds)
        self.poll_wait_seconds = max(0.0, float(poll_wait_seconds))
        headers = {"Accept": "application/json"}
        if self.api_key:
            headers["X-Api-Key"] = self.api_key
        self._http = httpx.Client(base_url=self.base_url, headers=headers, transport=transport,
                                  timeout=httpx.Timeout(self.client_timeout_seconds))
        self._version_lock = threading.Lock()
        self._versions: dict[str, Any] | None = None
        self._version_checked = False

    # -- lifecycle --

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def __enter__(self) -> DoclingClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- public API --

    def form_options(self, from_format: str) -> list[tuple[str, str]]:
        """The multipart option fields sent with every upload (conversion.md section 2.2).

        Returns ``(name, value)`` pairs in order; list options repeat their name
        (``to_formats=json``, ``to_formats=text``, ``ocr_lang=de``, ``ocr_lang=en``).
        """
        return [
            ("from_formats", from_format),
            ("to_formats", "json"),
            ("to_formats", "text"),
            ("do_ocr", "true"),
            ("ocr_preset", "easyocr"),
            ("ocr_lang", "de"),
            ("ocr_lang", "en"),
            ("table_mode", "accurate"),
            ("abort_on_error", "false"),
            ("document_timeout", _number(self.document_timeout_seconds)),
            ("include_images", "false"),
            ("image_export_mode", "placeholder"),
        ]

    def convert(self, data: bytes, filename: str) -> StructuredDocument:
        """Convert one file through Docling Serve (insertion-pipeline.md "Parse (convert)").

        Args:
            data: the file's bytes (non-empty; the router quarantines 0-byte files as ``empty``).
            filename: the source name; its extension selects ``from_formats`` (see :func:`detect_format`).

        Returns:
            ``StructuredDocument(format=<docling input format>, converter="ki.docling",
            converter_version=<docling-serve version or "unknown">)``. ``text`` is the document's
            plain text (re-exported from the DoclingDocument with picture children included, so the
            OCR text of full-page scans is kept; the server's ``text_content`` when the JSON cannot
            be re-hydrated); ``pages`` the page count (None for page-less formats); ``title`` the
            first title item. ``metadata`` holds ``docling_json`` (the raw ``json_content`` dict,
            unchanged), ``docling_status``, ``docling_errors`` (non-fatal errors of a ``success``),
            ``docling_task_id``, ``from_format``, ``text_source`` (``docling_json`` /
            ``text_content`` / ``md_content``), ``processing_time`` (s), ``confidence`` and
            ``docling_versions`` when the server shows them. ``warnings`` records a failed
            re-hydration (docling-core older than the server's schema).

        Raises (insertion-pipeline.md "Failure modes"; conversion.md section 3):
            UnsupportedDocument: ``empty_text`` (success without text: a scan OCR could not read);
                ``conversion_failed`` (``partial_success``/``failure``; ``details={"status",
                "errors": [{category, page_no, module_name, error_message}]}``);
                ``unsupported_format`` (``skipped``, or a format nobody can detect).
            DoclingKeyRejected: HTTP 401/403, and every call during the cooldown that follows
                (``$KI_PROVIDER_FAULT_COOLDOWN_SECONDS``, default 60 s) without network traffic.
            DoclingRequestRejected: HTTP 422 (options invalid/forbidden); the message quotes the
                server's detail.
            DoclingUnavailable: 404 (task or task result not found: the task crashed server-side
                or the result expired), 5xx, 408/429, other unexpected 4xx, transport errors,
                non-JSON answers, a task-level failure, and a task still unfinished after
                ``client_timeout_seconds``.
        """
        _check_cooldown()
        from_format, upload_name = detect_format(data, filename)
        deadline = time.monotonic() + self.client_timeout_seconds
        versions = self._server_versions(deadline)

        files = {"files": (upload_name, data, _mime_type(upload_name))}
        status = self._request_json(
            "POST", "/v1/convert/file/async", deadline, what="submit", name=upload_name, files=files,
            data=_form_dict(self.form_options(from_format)),
        )
        task_id = str(status.get("task_id") or "")
        if not task_id:
            raise DoclingUnavailable(
                f"Docling Serve accepted {upload_name} without a task_id: {_short(status)}",
                infrastructure="docling answered without a task id",
            )
        status = self._wait_for_task(task_id, status, deadline, upload_name)
        # A task whose only document failed or was skipped also ends "failure" (jobkit derives the
        # task status from the per-document counts), but its result exists and says why; a task
        # that crashed has no result (404) and its reason is only in the poll answer.
        result = self._request_json("GET", f"/v1/result/{task_id}", deadline, what="result", task_id=task_id,
                                    name=upload_name, floor_seconds=min(5.0, self.client_timeout_seconds),
                                    missing_ok=status.get("task_status") == "failure")
        if result is None:
            self._raise_task_failure(task_id, status, upload_name)
        return self._build_document(result, from_format, upload_name, task_id, versions)

    def health(self) -> bool:
        """``GET /health`` → True when it answers HTTP 200 ``{"status": "ok"}``; never raises.

        Liveness only: a healthy server may still be unable to convert (models missing,
        conversion.md section 4); use :meth:`canary` at startup.
        """
        try:
            response = self._http.get("/health", timeout=min(10.0, self.client_timeout_seconds))
        except httpx.HTTPError:
            return False
        if response.status_code != 200:
            return False
        try:
            body = response.json()
        except ValueError:
            return False
        return isinstance(body, dict) and body.get("status") == "ok"

    def canary(self) -> StructuredDocument:
        """Startup check: convert a tiny generated DOCX and require its marker text back.

        ``/health`` and ``/ready`` prove nothing about conversions (conversion.md section 3); this
        runs the whole async flow on ~1 KB.

        Returns: the converted canary document.
        Raises:
            DoclingKeyRejected / DoclingRequestRejected: as :meth:`convert` (key or options wrong).
            DoclingUnavailable: anything else failed, including a canary Docling reports as
                failed, empty or without the marker (the canary file is known-good, so its failure
                means the server cannot convert: models or OCR missing).
        """
        try:
            doc = self.convert(canary_docx(), "ki-docling-canary.docx")
        except UnsupportedDocument as exc:
            raise DoclingUnavailable(
                f"Docling Serve canary conversion failed ({exc.reason}): {exc}",
                infrastructure="docling canary conversion failed",
            ) from exc
        if CANARY_MARKER.lower() not in doc.text.lower():
            raise DoclingUnavailable(
                f"Docling Serve canary conversion lost its text (got {doc.text[:200]!r})",
                infrastructure="docling canary conversion failed",
            )
        return doc

    # -- internals --

    def _server_versions(self, deadline: float) -> dict[str, Any] | None:
        """``GET /version`` once per client (best effort; 403 when the server hides it)."""
        with self._version_lock:
            if self._version_checked:
                return self._versions
            try:
                response = self._http.get("/version", timeout=max(0.001, min(5.0, deadline - time.monotonic())))
            except httpx.HTTPError:
                return None  # try again next time; the conversion request reports the outage
            self._version_checked = True
            if response.status_code == 200:
                try:
                    body = response.json()
                except ValueError:
                    body = None
                if isinstance(body, dict):
                    self._versions = {str(k): v for k, v in body.items()}
            return self._versions

    def _wait_for_task(self, task_id: str, status: dict[str, Any], deadline: float, name: str) -> dict[str, Any]:
        while status.get("task_status") not in TERMINAL_STATUSES:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise self._timeout(name, task_id, status.get("task_status"))
            # Leave the last fifth of the remaining time for the answer to travel back.
            wait = min(self.poll_wait_seconds, remaining * 0.8)
            started = time.monotonic()
            status = self._request_json(
                "GET", f"/v1/status/poll/{task_id}", deadline, what="poll", params={"wait": f"{wait:.3f}"},
                task_id=task_id, name=name, last_status=status.get("task_status"),
            )
            took = time.monotonic() - started
            if status.get("task_status") not in TERMINAL_STATUSES and took < wait:
                # A server that ignores ``wait`` must not be hammered.
                time.sleep(max(0.0, min(wait - took, 1.0, deadline - time.monotonic())))
        return status

    def _timeout(self, name: str, task_id: str | None, last_status: Any) -> DoclingUnavailable:
        seconds = _number(self.client_timeout_seconds)
        where = f" (task {task_id}, last status {last_status})" if task_id else ""
        return DoclingUnavailable(
            f"Docling Serve did not finish converting {name} within the client timeout of {seconds} s{where}",
            infrastructure=f"docling conversion exceeded the client timeout ({seconds} s)",
        )

    def _request_json(
        self, method: str, path: str, deadline: float, *, what: str, floor_seconds: float = 0.0,
        task_id: str | None = None, name: str = "", missing_ok: bool = False, last_status: Any = None,
        **kwargs: Any,
    ) -> dict[str, Any] | None:
        remaining = deadline - time.monotonic()
        budget = max(remaining, floor_seconds)
        if budget <= 0:
            raise self._timeout(name or path, task_id, last_status)
        timeout = httpx.Timeout(budget, connect=min(10.0, budget))
        try:
            response = self._http.request(method, path, timeout=timeout, **kwargs)
        except httpx.TimeoutException as exc:
            if deadline - time.monotonic() <= 0.05:
                raise self._timeout(name or path, task_id, last_status or f"no answer to {what}") from exc
            raise DoclingUnavailable(
                f"Docling Serve timed out on {what} ({method} {path}): {type(exc).__name__}",
                infrastructure=f"docling {what} timed out ({type(exc).__name__})",
            ) from exc
        except httpx.TransportError as exc:
            raise DoclingUnavailable(
                f"Docling Serve at {self.base_url} is unreachable on {what} ({method} {path}): "
                f"{type(exc).__name__}: {exc}",
                infrastructure=f"docling unreachable ({type(exc).__name__})",
            ) from exc
        if missing_ok and response.status_code == 404:
            return None
        self._raise_for_status(response, what)
        try:
            body = response.json()
        except ValueError as exc:
            raise DoclingUnavailable(
                f"Docling Serve answered {what} with HTTP {response.status_code} but not JSON: "
                f"{response.text[:200]!r}",
                infrastructure="docling answered a non-JSON body",
            ) from exc
        if not isinstance(body, dict):
            raise DoclingUnavailable(
                f"Docling Serve answered {what} with a JSON {type(body).__name__}, not an object",
                infrastructure="docling answered an unexpected body",
            )
        return body

    def _raise_for_status(self, response: httpx.Response, what: str) -> None:
        code = response.status_code
        if 200 <= code < 300:
            return
        detail = _detail(response)
        request = f"{response.request.method} {response.request.url.path}"
        if code in (401, 403):
            sent = "" if self.api_key else "none is configured; "
            message = (
                f"Docling Serve refused the API key ({sent}HTTP {code} on {request}: {_quote(detail)}): {KEY_HINT}"
            )
            _start_cooldown(message)
            raise DoclingKeyRejected(message)
        if code == 422:
            raise DoclingRequestRejected(
                f"Docling Serve rejected the conversion request's options (HTTP 422 on {request}): "
                f"{_quote(detail)}. Fix the Docling options or the server's limits; nothing was converted.",
                detail=detail,
            )
        if code == 413:
            raise UnsupportedDocument(
                f"Docling Serve refused the upload as too large (HTTP 413): {_quote(detail)}",
                reason="too_large",
                details={"http_status": 413},
            )
        if code == 404:
            raise DoclingUnavailable(
                f"Docling Serve answered HTTP 404 on {what} ({request}): {_quote(detail)} — the task "
                "crashed server-side, its result expired, or the URL is wrong",
                infrastructure="docling answered HTTP 404",
            )
        raise DoclingUnavailable(
            f"Docling Serve answered HTTP {code} on {what} ({request}): {_quote(detail)}",
            infrastructure=f"docling answered HTTP {code}",
        )

    def _raise_task_failure(self, task_id: str, status: dict[str, Any], name: str) -> None:
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

    def _build_document(
        self, result: dict[str, Any], from_format: str, name: str, task_id: str, versions: dict[str, Any] | None,
    ) -> StructuredDocument:
        if "document" not in result and isinstance(result.get("failure"), dict):  # TaskFailureResult
            self._raise_task_failure(task_id, {"failure": result["failure"]}, name)
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


# --- helpers ----------------------------------------------------------------------------------


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def _form_dict(pairs: list[tuple[str, str]]) -> dict[str, str | list[str]]:
    form: dict[str, str | list[str]] = {}
    for key, value in pairs:
        if key in form:
            existing = form[key]
            form[key] = [*existing, value] if isinstance(existing, list) else [existing, value]
        else:
            form[key] = value
    return form


def _detail(response: httpx.Response) -> Any:
    try:
        body = response.json()
    except ValueError:
        return response.text[:500] or response.reason_phrase
    if isinstance(body, dict) and "detail" in body:
        return body["detail"]
    return body


def _quote(detail: Any) -> str:
    """A readable one-line rendering of a FastAPI ``detail`` (string or pydantic error list)."""
    if isinstance(detail, list):
        parts = []
        for item in detail[:10]:
            if isinstance(item, dict):
                loc = ".".join(str(p) for p in item.get("loc", []) if p != "body")
                bad = f" (got {item['input']!r})" if "input" in item and item.get("input") is not None else ""
                parts.append(f"{loc or '?'}: {item.get('msg', item)}{bad}")
            else:
                parts.append(str(item))
        return "; ".join(parts) or "[]"
    if isinstance(detail, dict):
        return json.dumps(detail, ensure_ascii=False)[:500]
    return str(detail)[:500]


def _short(body: Any) -> str:
    return json.dumps(body, ensure_ascii=False, default=str)[:200]


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


# --- canary -----------------------------------------------------------------------------------

CANARY_MARKER = "ki docling canary"


def canary_docx() -> bytes:
    """A minimal valid DOCX (one paragraph, :data:`CANARY_MARKER`), built in memory (~1 KB)."""
    ns = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
    parts = {
        "[Content_Types].xml": (
            '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
            '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
            '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
            '<Default Extension="xml" ContentType="application/xml"/>'
            '<Override PartName="/word/document.xml" '
            'ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/>'
            "</Types>"
        ),
        "_rels/.rels": (
            '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
            '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
            '<Relationship Id="rId1" Target="word/document.xml" '
            'Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument"/>'
            "</Relationships>"
        ),
        "word/document.xml": (
            f'<?xml version="1.0" encoding="UTF-8" standalone="yes"?><w:document xmlns:w="{ns}"><w:body>'
            f"<w:p><w:r><w:t>{CANARY_MARKER.capitalize()}: Prüfung / check.</w:t></w:r></w:p>"
            "</w:body></w:document>"
        ),
    }
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for part, xml in parts.items():
            archive.writestr(part, xml)
    return out.getvalue()
