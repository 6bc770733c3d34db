"""Docling Serve client (HTTP): the Parse stage's converter for everything ki does not convert itself.

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
408/425/429, connect/read errors, reset,          never quarantines)
timeouts, a task still running at the client
timeout
401 / 403                                         :class:`DoclingKeyRejected` (a
                                                  ``ProviderPermanentError``) + process-wide
                                                  cooldown
422                                               :class:`DoclingRequestRejected` (an
                                                  ``UnsupportedDocument``: this file is
                                                  quarantined ``conversion_failed`` with the
                                                  server's detail; other files go on)
413 (upload too large)                            ``UnsupportedDocument(reason="too_large")``
any other 4xx (400, 409, 415, ...)                ``UnsupportedDocument(reason="conversion_failed")``
task ``failure`` and no result (404): crashed     :class:`DoclingUnavailable`; a non-retryable
                                                  ``policy`` refusal of the file →
                                                  ``UnsupportedDocument("conversion_failed")``
================================================  ===========================================

Reading the result document is :mod:`ki.adapters.convert.docling.result`; format detection
:mod:`ki.adapters.convert.docling.formats`; the 401/403 cooldown :mod:`ki.adapters.convert.docling.cooldown`; the
startup canary file :mod:`ki.adapters.convert.docling.canary`.

No exception escapes as a bare ``ValueError`` (pydantic's ``ValidationError`` and
``json.JSONDecodeError`` are ValueErrors, which :func:`ki.core.retry.classify_error` would
quarantine): server-side garbage is an outage, not a property of the file.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import httpx

from ki.adapters import breaker
from ki.adapters.convert.docling.canary import CANARY_MARKER, canary_docx
from ki.adapters.convert.docling.cooldown import check_cooldown, start_cooldown
from ki.adapters.convert.docling.formats import detect_format, mime_type
from ki.adapters.convert.docling.result import build_document, raise_task_failure
from ki.adapters.convert.model import StructuredDocument
from ki.config.addresses import guarded_transport
from ki.core.errors import (
    ConfigurationError,
    DoclingKeyRejected,
    DoclingRequestRejected,
    DoclingUnavailable,
    UnsupportedDocument,
)
from ki.core.retry import INFRASTRUCTURE_HTTP_STATUSES

#: Task / document statuses that end polling (``ConversionStatus`` in docling).
TERMINAL_STATUSES = frozenset({"success", "partial_success", "failure", "skipped"})

KEY_HINT = "set components.docling_api_key / KI_COMPONENTS__DOCLING_API_KEY"
CANARY_FILENAME = "ki-docling-canary.docx"


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
        transport: an httpx transport (tests); default: a normal HTTP connection pool whose connections may
            not reach a link-local or cloud-metadata address (:mod:`ki.config.addresses`; a request that
            would raises ConfigurationError).
        allow_link_local: ``components.allow_link_local_urls``: lift that check.

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
        allow_link_local: bool = False,
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
        if transport is None and not allow_link_local:
            transport = guarded_transport("components.docling_url")
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
                ``unsupported_format`` (``skipped``, or a format nobody can detect);
                ``conversion_failed`` for any other HTTP 4xx (400, 409, 415, ...: the spec's
                "a Docling 4xx raises UnsupportedDocument"), ``too_large`` for 413.
            DoclingKeyRejected: HTTP 401/403, and every call during the cooldown that follows
                (``$KI_PROVIDER_FAULT_COOLDOWN_SECONDS``, default 60 s) without network traffic.
            DoclingRequestRejected: HTTP 422 (the request for this file refused: options invalid or
                forbidden for it); an ``UnsupportedDocument`` (``conversion_failed``) quoting the server's detail.
            DoclingUnavailable: while Docling is paused (an open circuit breaker, :mod:`ki.adapters.breaker`), at
                once without a request unless this thread holds the probe; 404 (task or task result not
                found: the task crashed server-side or the result expired), 5xx, 408/425/429, transport errors,
                non-JSON answers, a task-level failure, and a task still unfinished after
                ``client_timeout_seconds``.
        """
        check_cooldown()
        if not breaker.BREAKERS.allows(breaker.DOCLING):  # paused: fail fast, no request (ki.adapters.breaker)
            raise DoclingUnavailable(
                f"Docling Serve {self.base_url} is paused after repeated outages; not sending {filename} until a "
                "probe finds it answering",
                infrastructure="docling paused (circuit breaker open): failed fast without a request",
            )
        from_format, upload_name = detect_format(data, filename)
        deadline = time.monotonic() + self.client_timeout_seconds
        versions = self._server_versions(deadline)

        files = {"files": (upload_name, data, mime_type(upload_name))}
        status = self._request_json(
            "POST", "/v1/convert/file/async", deadline, what="submit", name=upload_name, files=files,
            data=_form_dict(self.form_options(from_format)),
        )
        breaker.succeeded(breaker.DOCLING)  # it answers: a paused Docling resumes (ki.adapters.breaker)
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
            raise_task_failure(task_id, status, upload_name)
        return build_document(result, from_format, upload_name, task_id, versions)

    def health(self) -> bool:
        """``GET /health`` → True when it answers HTTP 200 ``{"status": "ok"}``. Raises only
        ConfigurationError: the URL's host reached a link-local or cloud-metadata address.

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
            doc = self.convert(canary_docx(), CANARY_FILENAME)
        except DoclingRequestRejected:
            raise  # the known-good canary refused: the options or the server's limits are wrong
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
            start_cooldown(message)
            raise DoclingKeyRejected(message)
        if code == 422:
            raise DoclingRequestRejected(
                f"Docling Serve rejected the conversion request for this file (HTTP 422 on {request}): "
                f"{_quote(detail)}. If every file is refused alike, fix the Docling options or the server's limits.",
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
        if 400 <= code < 500 and code not in INFRASTRUCTURE_HTTP_STATUSES:
            # any other 4xx (400, 409, 415, ...) refuses this document: the spec's UnsupportedDocument,
            # never an outage retried forever
            raise UnsupportedDocument(
                f"Docling Serve refused the document (HTTP {code} on {request}): {_quote(detail)}",
                reason="conversion_failed",
                details={"http_status": code},
            )
        raise DoclingUnavailable(
            f"Docling Serve answered HTTP {code} on {what} ({request}): {_quote(detail)}",
            infrastructure=f"docling answered HTTP {code}",
        )


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
