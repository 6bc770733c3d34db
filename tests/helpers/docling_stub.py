"""A loopback Docling Serve 1.38.2 stand-in for tests (conversion.md section 4.1).

A real docling-serve cannot convert anything offline (conversion.md section 4), so tests talk
to this stub: a real HTTP server (``ThreadingHTTPServer`` on 127.0.0.1, port 0, in a thread)
answering with the shapes of conversion.md sections 2.1–2.3:

* ``GET /health`` → ``{"status": "ok"}``; ``GET /version`` → package versions.
* ``POST /v1/convert/file/async`` → ``TaskStatusResponse``; ``GET /v1/status/poll/{id}?wait=s``
  (long poll); ``GET /v1/result/{id}`` → ``ConvertDocumentResponse``.
* ``POST /v1/convert/file`` (sync) → ``ConvertDocumentResponse``, or 504 after ``max_sync_wait``.

Every multipart upload is parsed and its option names and values are checked against
docling's ``ConvertDocumentsOptions`` (the field list of docling 2.143.0, kept below as data):
an unknown or misspelled name, a bad enum/bool/number or a missing ``files`` field is answered
with HTTP 422 and a FastAPI/pydantic-style ``detail`` list. (A real server validates the values
the same way; for unknown *names* it is laxer — FastAPI ignores unknown form fields — so the stub
is deliberately stricter to catch typos in ki's request.)

What each request gets is scripted with :class:`Scenario` (``stub.scenario = Scenario(...)``);
every request is recorded in ``stub.requests``. Successful conversions serve genuine
DoclingDocument JSON fixtures from ``tests/fixtures/docling`` (``text_content`` / ``md_content``
are exported from the fixture with docling-core, as the server does); a DOCX upload without a
fixture is "converted" by reading its ``w:t`` runs (enough for the canary).
"""

from __future__ import annotations

import copy
import io
import json
import math
import re
import socket
import struct
import threading
import time
import uuid
import zipfile
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.helpers.loopback import LoopbackServer, QuietHandler

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "docling"

SERVE_VERSIONS = {
    "docling-serve": "1.38.2",
    "docling-jobkit": "3.9.1",
    "docling": "2.143.0",
    "docling-core": "2.104.0",
    "python": "cpython-311",
}

# --- docling 2.143.0 ConvertDocumentsOptions, as data -----------------------------------------

INPUT_FORMATS = (
    "docx", "doc", "rtf", "pptx", "ppt", "html", "mhtml", "image", "pdf", "asciidoc", "md", "csv", "xlsx", "xls",
    "odt", "ods", "odp", "xml_uspto", "xml_jats", "xml_xbrl", "xml_doclang", "dclx", "mets_gbs", "json_docling",
    "audio", "video", "vtt", "latex", "email", "epub", "boxnote", "iwork_pages", "iwork_keynote", "iwork_numbers",
    "ebcdic", "afp",
)
OUTPUT_FORMATS = ("md", "json", "yaml", "html", "html_split_page", "text", "doctags", "vtt", "doclang", "dclx",
                  "chunks", "latex")
ENUM_OPTIONS: dict[str, tuple[str, ...]] = {
    "from_formats": INPUT_FORMATS,
    "to_formats": OUTPUT_FORMATS,
    "image_export_mode": ("placeholder", "embedded", "referenced"),
    "pdf_backend": ("pypdfium2", "docling_parse", "threaded_docling_parse", "dlparse_v1", "dlparse_v2",
                    "dlparse_v4"),
    "table_mode": ("fast", "accurate"),
    "pipeline": ("legacy", "standard", "native", "vlm", "asr"),
    "target_type": ("inbody", "zip"),
}
LIST_OPTIONS = frozenset({"from_formats", "to_formats", "ocr_lang"})
BOOL_OPTIONS = frozenset({
    "do_ocr", "force_ocr", "table_cell_matching", "abort_on_error", "do_table_structure", "do_pdf_heading_hierarchy",
    "include_images", "include_page_images", "md_compact_tables", "do_code_enrichment", "do_formula_enrichment",
    "do_picture_classification", "do_chart_extraction", "do_picture_description",
})
FLOAT_OPTIONS = frozenset({"document_timeout", "images_scale", "picture_description_area_threshold"})
OCR_PRESETS = ("auto", "easyocr", "rapidocr", "tesseract", "tesseract_cli", "ocrmac")
OTHER_OPTIONS = frozenset({
    "ocr_engine", "ocr_preset", "ocr_custom_config", "page_range", "md_page_break_placeholder",
    "pdf_heading_hierarchy_options", "chunking_options", "chunking_preset", "chart_extraction_preset",
    "chart_extraction_custom_config", "picture_description_local", "picture_description_api", "vlm_pipeline_model",
    "vlm_pipeline_model_local", "vlm_pipeline_model_api", "vlm_pipeline_preset", "picture_description_preset",
    "code_formula_preset", "vlm_pipeline_custom_config", "picture_description_custom_config",
    "code_formula_custom_config", "table_structure_preset", "table_structure_custom_config", "layout_custom_config",
    "layout_preset", "picture_classification_preset", "picture_classification_custom_config",
})
#: Every form field name the multipart endpoints accept.
OPTION_NAMES = frozenset(ENUM_OPTIONS) | LIST_OPTIONS | BOOL_OPTIONS | FLOAT_OPTIONS | OTHER_OPTIONS | {"files"}
MAX_DOCUMENT_TIMEOUT = 604_800.0  # DOCLING_SERVE_MAX_DOCUMENT_TIMEOUT default
_TRUE = {"true", "1", "yes", "on", "t", "y"}
_FALSE = {"false", "0", "no", "off", "f", "n"}


def _enum_msg(values: tuple[str, ...]) -> str:
    quoted = [f"'{v}'" for v in values]
    return ", ".join(quoted[:-1]) + f" or {quoted[-1]}" if len(quoted) > 1 else quoted[0]


def validate_options(fields: list[tuple[str, str]], files: list[tuple[str, str, bytes]]) -> list[dict[str, Any]]:
    """pydantic-style errors for a multipart request (empty list: valid)."""
    errors: list[dict[str, Any]] = []
    if not any(name == "files" for name, _, _ in files):
        errors.append({"type": "missing", "loc": ["body", "files"], "msg": "Field required", "input": None})
    for name, filename, _ in files:
        if name != "files":
            errors.append({"type": "extra_forbidden", "loc": ["body", name], "msg": "Extra inputs are not permitted",
                           "input": filename})
    index: dict[str, int] = {}
    values: dict[str, list[str]] = {}
    for name, value in fields:
        position = index[name] = index.get(name, -1) + 1
        values.setdefault(name, []).append(value)
        loc: list[Any] = ["body", name] + ([position] if name in LIST_OPTIONS else [])
        if name not in OPTION_NAMES:
            errors.append({"type": "extra_forbidden", "loc": ["body", name], "msg": "Extra inputs are not permitted",
                           "input": value})
        elif name in ENUM_OPTIONS and value not in ENUM_OPTIONS[name]:
            expected = _enum_msg(ENUM_OPTIONS[name])
            errors.append({"type": "enum", "loc": loc, "msg": f"Input should be {expected}", "input": value,
                           "ctx": {"expected": expected}})
        elif name in BOOL_OPTIONS and value.strip().lower() not in _TRUE | _FALSE:
            errors.append({"type": "bool_parsing", "loc": loc,
                           "msg": "Input should be a valid boolean, unable to interpret input", "input": value})
        elif name in FLOAT_OPTIONS:
            try:
                number = float(value)
            except ValueError:
                errors.append({"type": "float_parsing", "loc": loc,
                               "msg": "Input should be a valid number, unable to parse string as a number",
                               "input": value})
                continue
            if math.isnan(number) or (name == "document_timeout" and not 0 < number <= MAX_DOCUMENT_TIMEOUT):
                errors.append({"type": "value_error", "loc": loc,
                               "msg": f"Value error, document_timeout must be > 0 and <= {MAX_DOCUMENT_TIMEOUT:g}",
                               "input": value})
        elif name == "ocr_preset" and value not in OCR_PRESETS:
            errors.append({"type": "value_error", "loc": loc, "msg": f"Value error, unknown OCR preset {value!r}",
                           "input": value})
        if name not in LIST_OPTIONS and name != "files" and name in OPTION_NAMES and len(values[name]) > 1:
            errors.append({"type": "string_type", "loc": ["body", name], "msg": "Input should be a valid string",
                           "input": values[name]})
    if values.get("ocr_custom_config") and values.get("ocr_preset", ["auto"])[0] != "auto":
        errors.append({"type": "value_error", "loc": ["body"],
                       "msg": "Value error, ocr_custom_config cannot be combined with a non-auto ocr_preset",
                       "input": None})
    return errors


def parse_multipart(content_type: str, body: bytes) -> tuple[list[tuple[str, str]], list[tuple[str, str, bytes]]]:
    """Split a ``multipart/form-data`` body into ``(fields, files)``.

    ``fields`` are ``(name, value)`` in order; ``files`` are ``(field name, filename, bytes)``.
    """
    match = re.search(r'boundary="?([^";]+)"?', content_type or "")
    if not match or "multipart/form-data" not in content_type:
        raise ValueError("not multipart/form-data")
    delimiter = b"--" + match.group(1).encode("latin-1")
    fields: list[tuple[str, str]] = []
    files: list[tuple[str, str, bytes]] = []
    for chunk in body.split(delimiter)[1:]:
        if chunk.startswith(b"--"):
            break
        chunk = chunk[2:] if chunk.startswith(b"\r\n") else chunk
        head, _, content = chunk.partition(b"\r\n\r\n")
        if content.endswith(b"\r\n"):
            content = content[:-2]
        headers = head.decode("utf-8", "replace")
        name = re.search(r'\bname="([^"]*)"', headers)
        filename = re.search(r'\bfilename="([^"]*)"', headers)
        if not name:
            continue
        if filename is not None:
            files.append((name.group(1), filename.group(1), content))
        else:
            fields.append((name.group(1), content.decode("utf-8", "replace")))
    return fields, files


# --- fixtures and documents ---------------------------------------------------------------------


def load_fixture(name: str) -> dict[str, Any]:
    """A DoclingDocument JSON fixture by stem (``"word_tables"``) or file name."""
    path = FIXTURES / (name if name.endswith(".json") else f"{name}.docling.json")
    return json.loads(path.read_text(encoding="utf-8"))


def fixture_text(payload: dict[str, Any], *, traverse_pictures: bool = False) -> str:
    """What Docling Serve puts in ``text_content`` for this document (docling-core export)."""
    from docling_core.types.doc import DoclingDocument

    return DoclingDocument.model_validate(payload).export_to_text(traverse_pictures=traverse_pictures)


def fixture_markdown(payload: dict[str, Any]) -> str:
    from docling_core.types.doc import DoclingDocument

    return DoclingDocument.model_validate(payload).export_to_markdown()


def docx_to_docling(data: bytes, filename: str) -> dict[str, Any]:
    """Build a DoclingDocument from a DOCX's paragraphs (its ``w:t`` runs): the stub's own 'converter'."""
    from docling_core.types.doc import DocItemLabel, DoclingDocument

    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        xml = archive.read("word/document.xml").decode("utf-8")
    doc = DoclingDocument(name=Path(filename).stem)
    for paragraph in re.findall(r"<w:p[ >].*?</w:p>", xml, flags=re.S):
        text = "".join(re.findall(r"<w:t(?: [^>]*)?>([^<]*)</w:t>", paragraph))
        if text.strip():
            doc.add_text(DocItemLabel.PARAGRAPH, text)
    return doc.export_to_dict()


def empty_document(filename: str) -> dict[str, Any]:
    """A DoclingDocument with one page and no text: a scan whose OCR read nothing."""
    from docling_core.types.doc import DoclingDocument, Size

    doc = DoclingDocument(name=Path(filename).stem)
    doc.add_page(page_no=1, size=Size(width=595.0, height=842.0))
    return doc.export_to_dict()


# --- scenarios ----------------------------------------------------------------------------------

DEFAULT_PARTIAL_ERRORS = [
    {"component_type": "pipeline", "module_name": "StandardPdfPipeline",
     "error_message": "Document processing timed out after 240.0 seconds", "category": "timeout", "page_no": None},
    {"component_type": "model", "module_name": "LayoutModel",
     "error_message": "std::bad_alloc", "category": "inference_failure", "page_no": 301},
]
DEFAULT_FAILURE_ERRORS = [
    {"component_type": "document_backend", "module_name": "MsWordDocumentBackend",
     "error_message": "MsWordDocumentBackend could not load document with hash 1f3a", "category": "backend_failure",
     "page_no": None},
]
DEFAULT_SKIPPED_ERRORS = [
    {"component_type": "user_input", "module_name": "DocumentConverter",
     "error_message": "File format not allowed: deck.pptx", "category": "policy", "page_no": None},
]

HTTP_DETAILS: dict[int, Any] = {
    401: "The provided API Key is invalid.",
    403: "Not authenticated",
    404: "Task result not found. Please wait for a completion status.",
    422: [{"type": "value_error", "loc": ["body", "document_timeout"],
           "msg": "Value error, document_timeout exceeds DOCLING_SERVE_MAX_DOCUMENT_TIMEOUT=120.0",
           "input": "240"}],
    429: "Too many requests",
    503: "Service Unavailable",
    504: "Conversion is taking too long. The maximum wait time is configure as DOCLING_SERVE_MAX_SYNC_WAIT=120.",
}


@dataclass
class Scenario:
    """What the stub answers.

    Attributes:
        outcome: ``success`` (serve ``fixture``), ``empty`` (success, no text), ``whitespace``
            (success, text is blanks), ``partial_success``, ``failure``, ``skipped`` (document
            statuses inside HTTP 200), ``task_failure`` (the task crashes: poll says failure,
            result 404), ``http`` (answer ``http_status`` on ``on``), ``reset`` (close the socket
            without answering on ``on``).
        fixture: fixture stem for ``success``; None → a DOCX upload is read by the stub itself.
        json_content: explicit ``json_content`` dict (overrides ``fixture``).
        errors: the ``errors`` list; None → a typical list for the outcome (``[]`` is kept).
        http_status / http_detail: for ``http`` (detail None → a typical body for the code).
        on: where ``http`` / ``reset`` / ``delay`` apply: ``submit``, ``poll``, ``result``, ``sync``,
            ``health``, ``any``.
        delay: seconds to wait before answering requests matching ``on`` (slow server).
        task_seconds: how long a task runs before it is done; ``math.inf`` = never finishes.
        failure_category / failure_retryable / failure_message: the task-level failure.
        max_sync_wait: seconds the sync endpoint waits for an unfinished task before its 504.
    """

    outcome: str = "success"
    fixture: str | None = "word_tables"
    json_content: dict[str, Any] | None = None
    errors: list[dict[str, Any]] | None = None
    http_status: int = 500
    http_detail: Any = None
    on: str = "any"
    delay: float = 0.0
    task_seconds: float = 0.0
    failure_category: str = "internal"
    failure_retryable: bool = True
    failure_message: str = "Internal processing error."
    max_sync_wait: float = 1.0


@dataclass
class RecordedRequest:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    fields: list[tuple[str, str]] = field(default_factory=list)
    files: list[tuple[str, str, bytes]] = field(default_factory=list)

    def form(self, name: str) -> list[str]:
        """All values sent for form field ``name``."""
        return [value for key, value in self.fields if key == name]


@dataclass
class _Task:
    task_id: str
    created: float
    scenario: Scenario
    filename: str
    upload: bytes
    to_formats: list[str]
    fetched: int = 0


class DoclingStub(LoopbackServer):
    """The loopback server. Use as a context manager or call :meth:`start` / :meth:`stop`.

    Args:
        api_key: when set, every endpoint but ``/health`` requires ``X-Api-Key`` (401 otherwise).
    """

    thread_name = "docling-stub"

    def __init__(self, api_key: str | None = None):
        super().__init__()
        self.api_key = api_key
        self.scenario = Scenario()
        #: upload file name → the scenario for that file alone (submit, its poll and its result);
        #: every other file gets ``scenario``
        self.by_file: dict[str, Scenario] = {}
        self.requests: list[RecordedRequest] = []
        self.tasks: dict[str, _Task] = {}
        self._lock = threading.Lock()

    def scenario_for(self, record: RecordedRequest) -> Scenario:
        """The scenario of an upload named in :attr:`by_file`, or of a poll/result of its task; else
        :attr:`scenario`."""
        if self.by_file:
            for _, filename, _ in record.files:
                if filename in self.by_file:
                    return self.by_file[filename]
            task_id = record.path.rsplit("/", 1)[-1]
            with self._lock:
                task = self.tasks.get(task_id)
            if task is not None and task.filename in self.by_file:
                return self.by_file[task.filename]
        return self.scenario

    def handler_class(self) -> type[BaseHTTPRequestHandler]:
        stub = self

        class Handler(_Handler):
            owner = stub

        return Handler

    def __enter__(self) -> DoclingStub:
        return self.start()

    # -- inspection --

    def paths(self) -> list[str]:
        """``"METHOD /path"`` of every request so far."""
        with self._lock:
            return [f"{r.method} {r.path}" for r in self.requests]

    def count(self, prefix: str = "") -> int:
        """How many requests had a path starting with ``prefix``."""
        with self._lock:
            return sum(1 for r in self.requests if r.path.startswith(prefix))

    # -- helpers for the handler --

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)

    def _task_done(self, task: _Task) -> bool:
        return time.monotonic() - task.created >= task.scenario.task_seconds

    def _task_status(self, task: _Task) -> str:
        if not self._task_done(task):
            return "started"
        outcome = task.scenario.outcome
        if outcome == "task_failure":
            return "failure"
        if outcome in ("failure", "skipped"):
            return "failure"  # jobkit: no document succeeded ⇒ task FAILURE (result still stored)
        return "success"

    def status_body(self, task: _Task) -> dict[str, Any]:
        status = self._task_status(task)
        done = status != "started"
        outcome = task.scenario.outcome
        failure = None
        error_message = None
        if done and outcome == "task_failure":
            error_message = task.scenario.failure_message
            failure = {"category": task.scenario.failure_category, "message": task.scenario.failure_message,
                       "retryable": task.scenario.failure_retryable, "phase": "execution", "details": {}}
        succeeded = int(done and outcome in ("success", "empty", "whitespace"))
        partial = int(done and outcome == "partial_success")
        return {
            "task_id": task.task_id,
            "task_type": "convert",
            "task_status": status,
            "task_position": None if done else 0,
            "task_meta": {"num_docs": 1, "num_processed": int(done), "num_succeeded": succeeded,
                          "num_partially_succeeded": partial,
                          "num_failed": int(done) - succeeded - partial},
            "error_message": error_message,
            "failure": failure,
        }

    def result_body(self, task: _Task) -> dict[str, Any]:
        """The ``ConvertDocumentResponse`` of a finished task."""
        sc = task.scenario
        outcome = sc.outcome
        content: dict[str, Any] = {
            "filename": task.filename, "md_content": None, "json_content": None, "html_content": None,
            "text_content": None, "doctags_content": None, "doclang_content": None,
        }
        errors: list[dict[str, Any]] = []
        if outcome in ("success", "whitespace", "empty", "partial_success"):
            if sc.json_content is not None:
                payload = copy.deepcopy(sc.json_content)
            elif outcome in ("empty", "whitespace"):
                payload = empty_document(task.filename)
            elif sc.fixture is None and task.filename.lower().endswith(".docx"):
                payload = docx_to_docling(task.upload, task.filename)
            else:
                payload = load_fixture(sc.fixture or "word_tables")
            text = "" if outcome == "empty" else " \n\t \n" if outcome == "whitespace" else None
            if "json" in task.to_formats:
                content["json_content"] = payload
            if "text" in task.to_formats:
                content["text_content"] = text if text is not None else _safe_export(fixture_text, payload)
            if "md" in task.to_formats:
                content["md_content"] = text if text is not None else _safe_export(fixture_markdown, payload)
            if outcome == "partial_success":
                errors = DEFAULT_PARTIAL_ERRORS if sc.errors is None else sc.errors
            elif sc.errors:
                errors = sc.errors
        elif outcome == "failure":
            errors = DEFAULT_FAILURE_ERRORS if sc.errors is None else sc.errors
        elif outcome == "skipped":
            errors = DEFAULT_SKIPPED_ERRORS if sc.errors is None else sc.errors
        status = {"whitespace": "success", "empty": "success"}.get(outcome, outcome)
        return {
            "document": content,
            "status": status,
            "errors": copy.deepcopy(errors),
            "processing_time": round(max(0.01, min(sc.task_seconds, 1e6)), 3),
            "timings": {},
            "confidence": None,
        }


def _safe_export(export, payload: dict[str, Any]) -> str | None:
    """Export text as the server would; a payload of a newer *minor* schema (which a newer server
    reads fine) is exported after pinning its version to this docling-core's; another major → None."""
    try:
        return export(payload)
    except Exception:
        from docling_core.types.doc.document import CURRENT_VERSION

        version = str(payload.get("version", ""))
        if version.split(".")[0] != CURRENT_VERSION.split(".")[0]:
            return None
        try:
            return export({**payload, "version": CURRENT_VERSION})
        except Exception:
            return None


class _Handler(QuietHandler):
    owner: DoclingStub
    protocol_version = "HTTP/1.1"
    server_version = "uvicorn"
    sys_version = ""

    # -- plumbing --

    def _endpoint(self, path: str) -> str:
        if path.startswith("/v1/convert/file/async"):
            return "submit"
        if path.startswith("/v1/convert/file"):
            return "sync"
        if path.startswith("/v1/status/poll/"):
            return "poll"
        if path.startswith("/v1/result/"):
            return "result"
        return path.strip("/") or "root"

    def _send_json(self, code: int, body: Any) -> None:
        self.send_bytes(code, json.dumps(body).encode("utf-8"))

    def _send_text(self, code: int, text: str) -> None:
        self.send_bytes(code, text.encode("utf-8"), "text/plain; charset=utf-8")

    def _send_http_error(self, code: int, detail: Any = None) -> None:
        if detail is None and code in (500, 502):
            self._send_text(code, "Internal Server Error" if code == 500 else "Bad Gateway")
            return
        self._send_json(code, {"detail": HTTP_DETAILS.get(code, "Error") if detail is None else detail})

    def _reset(self) -> None:
        """Close the connection with a TCP RST and no answer."""
        try:
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
        self.close_connection = True
        try:
            self.connection.close()
        except OSError:
            pass

    # -- dispatch --

    def do_GET(self) -> None:  # noqa: N802 - http.server API
        self._handle("GET")

    def do_POST(self) -> None:  # noqa: N802 - http.server API
        self._handle("POST")

    def _handle(self, method: str) -> None:
        stub = self.owner
        split = urlsplit(self.path)
        path = split.path
        body = self.read_body() if method == "POST" else b""
        record = RecordedRequest(method, path, parse_qs(split.query), {k.lower(): v for k, v in self.headers.items()})
        endpoint = self._endpoint(path)
        if method == "POST" and endpoint in ("submit", "sync"):
            try:
                record.fields, record.files = parse_multipart(self.headers.get("content-type", ""), body)
            except ValueError:
                pass
        stub._record(record)
        sc = stub.scenario_for(record)
        applies = sc.on in ("any", endpoint)
        if applies and sc.delay and stub.pause(sc.delay):
            self._reset()
            return
        if applies and sc.outcome == "reset":
            self._reset()
            return
        if endpoint == "health":
            self._send_json(200, {"status": "ok"}) if not (applies and sc.outcome == "http") else \
                self._send_http_error(sc.http_status, sc.http_detail)
            return
        if stub.api_key is not None:
            key = self.headers.get("x-api-key")
            if key is None:
                self._send_json(401, {"detail": "Missing field X-Api-Key."})
                return
            if key.strip() != stub.api_key:
                self._send_json(401, {"detail": "The provided API Key is invalid."})
                return
        if applies and sc.outcome == "http":
            self._send_http_error(sc.http_status, sc.http_detail)
            return
        if endpoint == "version" and method == "GET":
            self._send_json(200, SERVE_VERSIONS)
        elif endpoint in ("submit", "sync") and method == "POST":
            self._convert(record, endpoint)
        elif endpoint == "poll" and method == "GET":
            self._poll(path.rsplit("/", 1)[-1], record)
        elif endpoint == "result" and method == "GET":
            self._result(path.rsplit("/", 1)[-1])
        else:
            self._send_json(404, {"detail": "Not Found"})

    def _convert(self, record: RecordedRequest, endpoint: str) -> None:
        stub = self.owner
        if not record.files and not record.fields and "multipart/form-data" not in self.headers.get("content-type", ""):
            self._send_json(422, {"detail": [{"type": "missing", "loc": ["body", "files"], "msg": "Field required",
                                              "input": None}]})
            return
        problems = validate_options(record.fields, record.files)
        if problems:
            self._send_json(422, {"detail": problems})
            return
        _, filename, upload = next(f for f in record.files if f[0] == "files")
        to_formats = record.form("to_formats") or ["md"]
        task = _Task(uuid.uuid4().hex, time.monotonic(), copy.deepcopy(stub.scenario_for(record)), filename, upload,
                     to_formats)
        with stub._lock:
            stub.tasks[task.task_id] = task
        if endpoint == "submit":
            body = stub.status_body(task)
            body["task_status"] = "pending" if not stub._task_done(task) else body["task_status"]
            self._send_json(200, body)
            return
        # sync: wait for the task up to max_sync_wait, then 504 (the task keeps running)
        waited = 0.0
        while not stub._task_done(task) and waited < task.scenario.max_sync_wait:
            if stub.pause(0.02):
                return
            waited += 0.02
        if not stub._task_done(task):
            self._send_json(504, {"detail": HTTP_DETAILS[504].replace("=120", f"={task.scenario.max_sync_wait:g}")})
            return
        if task.scenario.outcome == "task_failure":
            self._send_json(404, {"detail": HTTP_DETAILS[404]})
            return
        self._send_json(200, stub.result_body(task))

    def _poll(self, task_id: str, record: RecordedRequest) -> None:
        stub = self.owner
        task = stub.tasks.get(task_id)
        if task is None:
            self._send_json(404, {"detail": "Task not found."})
            return
        try:
            wait = float((record.query.get("wait") or ["0"])[0])
        except ValueError:
            self._send_json(422, {"detail": [{"type": "float_parsing", "loc": ["query", "wait"],
                                              "msg": "Input should be a valid number", "input": record.query}]})
            return
        end = time.monotonic() + max(0.0, wait)
        while not stub._task_done(task) and time.monotonic() < end:
            if stub.pause(min(0.02, end - time.monotonic())):
                return
        self._send_json(200, stub.status_body(task))

    def _result(self, task_id: str) -> None:
        stub = self.owner
        task = stub.tasks.get(task_id)
        if task is None or not stub._task_done(task) or task.scenario.outcome == "task_failure":
            self._send_json(404, {"detail": HTTP_DETAILS[404]})
            return
        task.fetched += 1
        self._send_json(200, stub.result_body(task))
