"""DoclingClient against the loopback Docling Serve stub (conversion.md sections 3, 4.1 and 9).

Every row of the failure-contract table in ki/adapters/convert/docling.py is exercised over real HTTP on
127.0.0.1: the stub parses the multipart request, validates the option names and values, runs a
task with a scripted duration and answers with genuine DoclingDocument JSON.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import httpx
import pytest

from ki.adapters.convert import docling as docling_mod
from ki.adapters.convert.docling import (
    CANARY_MARKER,
    DoclingClient,
    DoclingKeyRejected,
    DoclingRequestRejected,
    DoclingUnavailable,
    canary_docx,
    detect_format,
    reset_cooldown,
)
from ki.core.errors import ConfigurationError, InfrastructureError, ProviderPermanentError, UnsupportedDocument
from ki.core.retry import ErrorVerdict, Treatment, classify_error
from tests.helpers.docling_stub import (
    DEFAULT_PARTIAL_ERRORS,
    FIXTURES,
    DoclingStub,
    Scenario,
    fixture_text,
    load_fixture,
)

pytestmark = pytest.mark.timeout(60)

DOCX = canary_docx()  # any bytes do: the stub serves fixtures; a real DOCX keeps it honest
PPTX_BYTES = b"PK\x03\x04 not really a deck"


@pytest.fixture(autouse=True)
def _fresh_cooldown(monkeypatch):
    monkeypatch.delenv(docling_mod.COOLDOWN_ENV, raising=False)
    reset_cooldown()
    yield
    reset_cooldown()


@pytest.fixture
def stub():
    with DoclingStub() as server:
        yield server


def make_client(stub: DoclingStub, **kwargs) -> DoclingClient:
    kwargs.setdefault("client_timeout_seconds", 10)
    kwargs.setdefault("poll_wait_seconds", 0.2)
    return DoclingClient(stub.url, **kwargs)


def convert(stub: DoclingStub, scenario: Scenario, filename: str = "memo.docx", data: bytes = DOCX, **kwargs):
    stub.scenario = scenario
    with make_client(stub, **kwargs) as client:
        return client.convert(data, filename)


def unavailable(stub: DoclingStub, scenario: Scenario, **kwargs) -> DoclingUnavailable:
    with pytest.raises(DoclingUnavailable) as info:
        convert(stub, scenario, **kwargs)
    verdict = classify_error(info.value)
    assert verdict.treatment is Treatment.infrastructure, verdict  # never quarantines
    return info.value


# --- fixtures are genuine ---------------------------------------------------------------------


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*.docling.json")), ids=lambda p: p.name)
def test_fixture_is_a_valid_small_docling_document(path: Path):
    from docling_core.types.doc import DoclingDocument

    assert path.stat().st_size < 200_000
    doc = DoclingDocument.model_validate(load_fixture(path.name))
    assert doc.export_to_text(traverse_pictures=True).strip()


# --- success ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fixture", "filename", "fmt", "expect"),
    [
        ("word_tables", "tables.docx", "docx", "A uniform table"),
        ("legal_list", "list.docx", "docx", "Lorem ipsum dolor sit amet"),
        ("features", "features.docx", "docx", "insert this"),
        ("slides", "nordlicht.pptx", "pptx", "Change-of-Control-Klausel"),
    ],
)
def test_success_returns_the_fixture_text(stub, fixture, filename, fmt, expect):
    doc = convert(stub, Scenario(fixture=fixture), filename=filename)
    payload = load_fixture(fixture)
    assert doc.text == fixture_text(payload, traverse_pictures=True)
    assert expect in doc.text
    assert doc.format == fmt
    assert doc.converter == "ki.docling"
    assert doc.converter_version == "1.38.2"
    assert doc.metadata["docling_json"] == payload  # raw JSON kept unchanged
    assert doc.metadata["docling_status"] == "success"
    assert doc.metadata["text_source"] == "docling_json"
    assert doc.metadata["docling_versions"]["docling-core"] == "2.104.0"
    assert doc.warnings == []
    submit = next(r for r in stub.requests if r.path == "/v1/convert/file/async")
    assert submit.form("from_formats") == [fmt]
    assert submit.files[0][1] == filename


def test_pptx_fixture_pages_and_title(stub):
    doc = convert(stub, Scenario(fixture="slides"), filename="nordlicht.pptx")
    assert doc.pages == 3
    assert "Risikomatrix / Risk matrix" in doc.text


def test_scanned_pdf_keeps_ocr_text_under_pictures(stub):
    """Full-page OCR text sits under a PictureItem; the server's text_content misses it."""
    stub.scenario = Scenario(fixture="scanned_pdf")
    with make_client(stub) as client:
        doc = client.convert(b"%PDF-1.7\n%scan", "scan_mietvertrag.pdf")
    served = fixture_text(load_fixture("scanned_pdf"))
    assert "Mietdauer" not in served  # what text_content holds
    assert "§ 3 Mietdauer" in doc.text and "Gewerbemietvertrag" in doc.text
    assert "Seite 1 von 2" not in doc.text  # furniture stays out
    assert doc.pages == 2
    assert doc.title == "Gewerbemietvertrag"
    assert doc.format == "pdf"


def test_request_carries_the_pinned_options(stub):
    convert(stub, Scenario(fixture="legal_list"), document_timeout_seconds=240)
    submit = next(r for r in stub.requests if r.path == "/v1/convert/file/async")
    assert submit.form("to_formats") == ["json", "text"]
    assert submit.form("ocr_lang") == ["de", "en"]
    assert submit.form("ocr_preset") == ["easyocr"]
    assert submit.form("do_ocr") == ["true"]
    assert submit.form("table_mode") == ["accurate"]
    assert submit.form("abort_on_error") == ["false"]
    assert submit.form("document_timeout") == ["240"]
    assert submit.form("include_images") == ["false"]
    assert submit.form("image_export_mode") == ["placeholder"]
    assert submit.files[0][2] == DOCX  # bytes arrive intact
    assert "x-api-key" not in submit.headers


def test_async_poll_flow_with_a_delayed_task(stub):
    doc = convert(stub, Scenario(fixture="legal_list", task_seconds=0.7), poll_wait_seconds=0.2)
    assert "Lorem ipsum" in doc.text
    polls = [r for r in stub.requests if r.path.startswith("/v1/status/poll/")]
    assert len(polls) >= 2  # long polls of ≤ 0.2 s until the 0.7 s task finished
    assert all(float(r.query["wait"][0]) <= 0.2 for r in polls)
    assert stub.paths()[-1].startswith("GET /v1/result/")


def test_slow_answer_within_the_budget_is_accepted(stub):
    doc = convert(stub, Scenario(fixture="features", delay=0.5, on="submit"), client_timeout_seconds=5)
    assert "Lorem ipsum" in doc.text


def test_api_key_is_sent(monkeypatch):
    with DoclingStub(api_key="s3cret") as stub:
        stub.scenario = Scenario(fixture="legal_list")
        with DoclingClient(stub.url, api_key="s3cret", poll_wait_seconds=0.1) as client:
            assert "Lorem ipsum" in client.convert(DOCX, "a.docx").text
        assert all(r.headers.get("x-api-key") == "s3cret" for r in stub.requests)


# --- success without text ---------------------------------------------------------------------


def _unreadable_empty_doc() -> dict:
    from tests.helpers.docling_stub import empty_document

    payload = empty_document("scan.pdf")
    payload["version"] = "1.99.0"  # forces the text_content path
    return payload


@pytest.mark.parametrize(
    "scenario",
    [Scenario(outcome="empty"), Scenario(outcome="whitespace"),
     Scenario(outcome="whitespace", json_content=_unreadable_empty_doc())],
    ids=["empty", "whitespace", "whitespace-text_content"],
)
def test_success_without_text_is_empty_text(stub, scenario):
    with pytest.raises(UnsupportedDocument) as info:
        convert(stub, scenario, filename="scan.pdf", data=b"%PDF-1.4 scan")
    assert info.value.reason == "empty_text"
    assert "OCR" in str(info.value)
    assert classify_error(info.value).treatment is Treatment.deterministic


# --- document status inside HTTP 200 ----------------------------------------------------------


def test_partial_success_with_errors_is_conversion_failed(stub):
    with pytest.raises(UnsupportedDocument) as info:
        convert(stub, Scenario(outcome="partial_success"), filename="big.pdf", data=b"%PDF-1.7")
    exc = info.value
    assert exc.reason == "conversion_failed"
    assert exc.details["status"] == "partial_success"
    assert exc.details["errors"] == [
        {"category": e["category"], "page_no": e["page_no"], "module_name": e["module_name"],
         "error_message": e["error_message"]}
        for e in DEFAULT_PARTIAL_ERRORS
    ]
    assert "timeout" in str(exc) and "page 301" in str(exc)


def test_partial_success_with_empty_errors_is_still_conversion_failed(stub):
    with pytest.raises(UnsupportedDocument) as info:
        convert(stub, Scenario(outcome="partial_success", errors=[]))
    assert info.value.reason == "conversion_failed"
    assert info.value.details["status"] == "partial_success"
    assert info.value.details["errors"] == []


@pytest.mark.parametrize("errors", [None, []], ids=["with-errors", "errors-empty"])
def test_failure_is_conversion_failed(stub, errors):
    with pytest.raises(UnsupportedDocument) as info:
        convert(stub, Scenario(outcome="failure", errors=errors), filename="broken.docx")
    exc = info.value
    assert exc.reason == "conversion_failed"
    assert exc.details["status"] == "failure"
    if errors is None:
        assert exc.details["errors"][0]["category"] == "backend_failure"
        assert "could not load document" in exc.details["errors"][0]["error_message"]
    else:
        assert exc.details["errors"] == []
    assert classify_error(exc).treatment is Treatment.deterministic
    # the task itself ended "failure", yet the client fetched the result to learn why
    assert any(p.startswith("GET /v1/result/") for p in stub.paths())


def test_skipped_is_unsupported_format_with_category(stub):
    with pytest.raises(UnsupportedDocument) as info:
        convert(stub, Scenario(outcome="skipped"), filename="deck.pptx", data=PPTX_BYTES)
    exc = info.value
    assert exc.reason == "unsupported_format"
    assert exc.details["status"] == "skipped"
    assert exc.details["categories"] == ["policy"]
    assert exc.details["errors"][0]["category"] == "policy"
    assert "File format not allowed" in str(exc)


def test_413_is_too_large(stub):
    with pytest.raises(UnsupportedDocument) as info:
        convert(stub, Scenario(outcome="http", http_status=413, http_detail="Request Entity Too Large",
                               on="submit"))
    assert info.value.reason == "too_large"


@pytest.mark.parametrize("code", [400, 409, 415, 451])
def test_other_4xx_is_unsupported_document_not_an_outage(stub, code):
    """Issue 14 item 8: a 4xx outside the documented 401/403/404/413/422 handling refuses the document
    (the spec's UnsupportedDocument), it is not retried as an outage forever."""
    with pytest.raises(UnsupportedDocument) as info:
        convert(stub, Scenario(outcome="http", http_status=code, http_detail="refused", on="submit"))
    assert info.value.reason == "conversion_failed"
    assert info.value.details == {"http_status": code}
    assert f"HTTP {code}" in str(info.value)
    assert classify_error(info.value).treatment is Treatment.deterministic


# --- outages: infrastructure, never quarantine ------------------------------------------------


def test_404_task_result_not_found_is_infrastructure(stub):
    exc = unavailable(stub, Scenario(outcome="http", http_status=404, on="result"))
    assert exc.infrastructure == "docling answered HTTP 404"
    assert "Task result not found" in str(exc)


def test_404_task_not_found_on_poll_is_infrastructure(stub):
    exc = unavailable(stub, Scenario(outcome="http", http_status=404, http_detail="Task not found.", on="poll",
                                     task_seconds=5))
    assert "Task not found." in str(exc)


def test_task_crash_without_result_is_infrastructure(stub):
    exc = unavailable(stub, Scenario(outcome="task_failure"))
    assert "Internal processing error." in str(exc)
    assert exc.infrastructure == "docling task failed (internal)"


def test_task_refused_by_policy_is_the_documents_fault(stub):
    scenario = Scenario(outcome="task_failure", failure_category="policy", failure_retryable=False,
                        failure_message="File size exceeds DOCLING_SERVE_MAX_FILE_SIZE")
    with pytest.raises(UnsupportedDocument) as info:
        convert(stub, scenario)
    assert info.value.reason == "conversion_failed"
    assert info.value.details["errors"][0]["category"] == "policy"


@pytest.mark.parametrize("code", [500, 502, 503, 504, 429])
@pytest.mark.parametrize("on", ["submit", "poll", "result"])
def test_server_errors_are_infrastructure(stub, code, on):
    exc = unavailable(stub, Scenario(outcome="http", http_status=code, on=on, task_seconds=0.3 if on == "poll" else 0))
    assert exc.infrastructure == f"docling answered HTTP {code}"
    assert isinstance(exc, InfrastructureError)


def test_connection_refused_is_infrastructure():
    with socket_port() as port:
        pass  # the port is closed again: nothing listens there
    with DoclingClient(f"http://127.0.0.1:{port}", client_timeout_seconds=3) as client:
        with pytest.raises(DoclingUnavailable) as info:
            client.convert(DOCX, "a.docx")
    assert info.value.infrastructure == "docling unreachable (ConnectError)"
    assert classify_error(info.value).treatment is Treatment.infrastructure


@pytest.mark.parametrize("on", ["submit", "poll", "result"])
def test_connection_reset_is_infrastructure(stub, on):
    exc = unavailable(stub, Scenario(outcome="reset", on=on, task_seconds=0.3 if on == "poll" else 0))
    assert exc.infrastructure.startswith("docling unreachable (")


def test_read_timeout_is_infrastructure_naming_the_timeout(stub):
    started = time.monotonic()
    exc = unavailable(stub, Scenario(fixture="features", delay=5, on="submit"), client_timeout_seconds=0.8)
    assert time.monotonic() - started < 3
    assert "client timeout of 0.8 s" in str(exc)
    assert exc.infrastructure == "docling conversion exceeded the client timeout (0.8 s)"


def test_task_that_never_finishes_hits_the_client_timeout(stub):
    started = time.monotonic()
    exc = unavailable(stub, Scenario(task_seconds=math.inf), client_timeout_seconds=1.0, poll_wait_seconds=0.3)
    elapsed = time.monotonic() - started
    assert 0.9 <= elapsed < 3
    assert "did not finish" in str(exc) and "1 s" in str(exc) and "last status started" in str(exc)
    assert exc.infrastructure == "docling conversion exceeded the client timeout (1 s)"
    assert stub.count("/v1/status/poll/") >= 3
    assert stub.count("/v1/result/") == 0


def test_non_json_answer_is_infrastructure(stub):
    exc = unavailable(stub, Scenario(outcome="http", http_status=500, on="submit"))
    assert "Internal Server Error" in str(exc)  # the text body is quoted


# --- 401 / 403: provider permanent + cooldown ---------------------------------------------------


@pytest.mark.parametrize("code", [401, 403])
def test_key_rejection_is_provider_permanent_with_cooldown(stub, code):
    stub.scenario = Scenario(outcome="http", http_status=code, on="submit")
    with make_client(stub, api_key="wrong") as client:
        with pytest.raises(ProviderPermanentError) as first:
            client.convert(DOCX, "a.docx")
        message = str(first.value)
        assert "Docling Serve refused the API key" in message
        assert "components.docling_api_key / KI_COMPONENTS__DOCLING_API_KEY" in message
        assert isinstance(first.value, DoclingKeyRejected)
        verdict = classify_error(first.value)
        assert verdict.treatment is Treatment.deterministic and verdict.reason == "provider_permanent"

        seen = len(stub.requests)
        started = time.monotonic()
        with pytest.raises(ProviderPermanentError) as second:
            client.convert(DOCX, "b.docx")
        assert time.monotonic() - started < 0.2
        assert str(second.value) == message
        assert len(stub.requests) == seen  # the stub was not touched

    # a new client in the same process is in the same cooldown
    with make_client(stub, api_key="wrong") as other:
        with pytest.raises(DoclingKeyRejected):
            other.convert(DOCX, "c.docx")
    assert len(stub.requests) == seen

    reset_cooldown()  # e.g. the quarantine retry after the key was fixed
    stub.scenario = Scenario(fixture="legal_list")
    with make_client(stub, api_key="right") as client:
        assert "Lorem ipsum" in client.convert(DOCX, "d.docx").text


def test_missing_key_against_a_protected_server():
    with DoclingStub(api_key="s3cret") as stub:
        with DoclingClient(stub.url, poll_wait_seconds=0.1) as client:
            with pytest.raises(DoclingKeyRejected) as info:
                client.convert(DOCX, "a.docx")
    assert "none is configured" in str(info.value)
    assert "Missing field X-Api-Key." in str(info.value)


def test_cooldown_length_comes_from_the_environment(stub, monkeypatch):
    monkeypatch.setenv(docling_mod.COOLDOWN_ENV, "0.3")
    stub.scenario = Scenario(outcome="http", http_status=401, on="submit")
    with make_client(stub) as client:
        with pytest.raises(DoclingKeyRejected):
            client.convert(DOCX, "a.docx")
        assert 0 < docling_mod.cooldown_remaining() <= 0.3
        time.sleep(0.35)
        assert docling_mod.cooldown_remaining() == 0
        stub.scenario = Scenario(fixture="legal_list")
        assert "Lorem ipsum" in client.convert(DOCX, "b.docx").text


def test_default_cooldown_is_60_seconds(monkeypatch):
    monkeypatch.delenv(docling_mod.COOLDOWN_ENV, raising=False)
    assert docling_mod.cooldown_seconds() == 60
    monkeypatch.setenv(docling_mod.COOLDOWN_ENV, "5")
    assert docling_mod.cooldown_seconds() == 5


# --- 422: the file's own verdict, never a run-wide stop ------------------------------------------


def test_422_is_the_file_s_unsupported_document_quoting_the_detail(stub):
    stub.scenario = Scenario(outcome="http", http_status=422, on="submit")
    with make_client(stub) as client:
        with pytest.raises(DoclingRequestRejected) as info:
            client.convert(DOCX, "a.docx")
    exc = info.value
    assert isinstance(exc, UnsupportedDocument) and not isinstance(exc, ConfigurationError)
    assert classify_error(exc) == ErrorVerdict(Treatment.deterministic, reason="conversion_failed")
    assert "document_timeout" in str(exc) and "DOCLING_SERVE_MAX_DOCUMENT_TIMEOUT=120.0" in str(exc)
    assert isinstance(exc.detail, list) and exc.detail[0]["loc"] == ["body", "document_timeout"]
    assert exc.details["http_status"] == 422 and exc.details["detail"] == exc.detail


def test_invalid_option_value_is_rejected_by_validation(stub):
    """The client's own option passes through the stub's real validation: document_timeout=0 → 422."""
    stub.scenario = Scenario(fixture="legal_list")
    with make_client(stub, document_timeout_seconds=0) as client:
        with pytest.raises(DoclingRequestRejected) as info:
            client.convert(DOCX, "a.docx")
    assert "document_timeout" in str(info.value) and "(got '0')" in str(info.value)
    assert stub.count("/v1/status/poll/") == 0


# --- the stub validates option names like the server's schema ---------------------------------


def _post(stub: DoclingStub, fields: list[tuple[str, str]], path: str = "/v1/convert/file/async") -> httpx.Response:
    files = [("files", ("a.docx", DOCX, "application/octet-stream"))]
    data: dict[str, list[str]] = {}
    for key, value in fields:
        data.setdefault(key, []).append(value)
    return httpx.post(stub.url + path, data=data, files=files, timeout=10)


def test_stub_accepts_the_clients_option_names(stub):
    with make_client(stub) as client:
        fields = client.form_options("docx")
    response = _post(stub, fields)
    assert response.status_code == 200, response.text
    assert response.json()["task_status"] in ("pending", "success")


@pytest.mark.parametrize(
    ("fields", "loc", "kind"),
    [
        ([("ocr_langs", "de")], ["body", "ocr_langs"], "extra_forbidden"),
        ([("to_format", "json")], ["body", "to_format"], "extra_forbidden"),
        ([("table_mode", "accurat")], ["body", "table_mode"], "enum"),
        ([("to_formats", "json"), ("to_formats", "txt")], ["body", "to_formats", 1], "enum"),
        ([("do_ocr", "maybe")], ["body", "do_ocr"], "bool_parsing"),
        ([("document_timeout", "-1")], ["body", "document_timeout"], "value_error"),
        ([("ocr_preset", "easy")], ["body", "ocr_preset"], "value_error"),
    ],
)
def test_stub_rejects_misspelled_or_invalid_options(stub, fields, loc, kind):
    response = _post(stub, fields)
    assert response.status_code == 422
    detail = response.json()["detail"]
    assert any(d["loc"] == loc and d["type"] == kind for d in detail), detail


def test_stub_requires_files(stub):
    response = httpx.post(stub.url + "/v1/convert/file/async", data={"to_formats": "json"},
                          files={"other": ("x.txt", b"x")}, timeout=10)
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["body", "files"]


def test_stub_sync_endpoint_shapes(stub):
    stub.scenario = Scenario(fixture="legal_list")
    response = _post(stub, [("to_formats", "json"), ("to_formats", "md")], path="/v1/convert/file")
    body = response.json()
    assert response.status_code == 200
    assert set(body) == {"document", "status", "errors", "processing_time", "timings", "confidence"}
    assert body["status"] == "success"
    assert body["document"]["text_content"] is None  # not requested ⇒ null
    assert body["document"]["md_content"].startswith("1. Lorem ipsum")
    assert body["document"]["json_content"]["schema_name"] == "DoclingDocument"

    stub.scenario = Scenario(task_seconds=math.inf, max_sync_wait=0.3)
    response = _post(stub, [("to_formats", "json")], path="/v1/convert/file")
    assert response.status_code == 504
    assert "DOCLING_SERVE_MAX_SYNC_WAIT" in response.json()["detail"]


# --- re-hydration -----------------------------------------------------------------------------


def test_version_mismatch_keeps_raw_json_and_server_text(stub):
    payload = load_fixture("legal_list")
    payload["version"] = "1.99.0"  # a server newer than our docling-core
    stub.scenario = Scenario(json_content=payload)
    with make_client(stub) as client:
        doc = client.convert(DOCX, "list.docx")
    assert doc.metadata["docling_json"] == payload
    assert doc.metadata["text_source"] == "text_content"
    assert doc.text == fixture_text(load_fixture("legal_list"))  # the stub's text_content, from a readable copy
    assert len(doc.warnings) == 1 and "could not be re-hydrated" in doc.warnings[0]
    assert "1.99.0" in doc.warnings[0]


def test_no_text_at_all_is_infrastructure(stub):
    payload = load_fixture("legal_list")
    payload["version"] = "9.0.0"  # unreadable here, and the stub cannot export text for it either
    exc = unavailable(stub, Scenario(json_content=payload))
    assert "no text" in str(exc)


# --- format detection, health, canary ---------------------------------------------------------


def test_detect_format():
    assert detect_format(b"", "a.DOCX") == ("docx", "a.DOCX")
    assert detect_format(b"", "deck.pptx") == ("pptx", "deck.pptx")
    assert detect_format(b"", "scan.TIF") == ("image", "scan.TIF")
    assert detect_format(b"", "mail.msg") == ("email", "mail.msg")
    assert detect_format(b"%PDF-1.7", "scan") == ("pdf", "scan.pdf")
    assert detect_format(b"\x89PNG\r\n", "upload.bin") == ("image", "upload.bin.png")
    assert detect_format(canary_docx(), "noext") == ("docx", "noext.docx")
    with pytest.raises(UnsupportedDocument) as info:
        detect_format(b"\xd0\xcf\x11\xe0 ole2", "legacy")
    assert info.value.reason == "unsupported_format"


def test_sniffed_format_is_uploaded_with_its_extension(stub):
    convert(stub, Scenario(fixture="scanned_pdf"), filename="Scan 0001", data=b"%PDF-1.4 x")
    submit = next(r for r in stub.requests if r.path == "/v1/convert/file/async")
    assert submit.files[0][1] == "Scan 0001.pdf"
    assert submit.form("from_formats") == ["pdf"]


def test_undetectable_format_does_not_touch_the_network(stub):
    with pytest.raises(UnsupportedDocument):
        convert(stub, Scenario(), filename="blob", data=b"\x00\x01 binary")
    assert stub.requests == []


def test_health(stub):
    with make_client(stub) as client:
        assert client.health() is True
        stub.scenario = Scenario(outcome="http", http_status=503, on="health")
        assert client.health() is False
    with socket_port() as port:
        pass
    with DoclingClient(f"http://127.0.0.1:{port}") as client:
        assert client.health() is False


def test_canary_converts_a_tiny_docx(stub):
    stub.scenario = Scenario(fixture=None)  # the stub reads the uploaded DOCX itself
    with make_client(stub) as client:
        doc = client.canary()
    assert CANARY_MARKER in doc.text.lower()
    assert len(canary_docx()) < 2000


@pytest.mark.parametrize(
    ("scenario", "error"),
    [
        (Scenario(outcome="failure", errors=[]), DoclingUnavailable),
        (Scenario(outcome="empty"), DoclingUnavailable),
        (Scenario(fixture="legal_list"), DoclingUnavailable),  # text without the marker
        (Scenario(outcome="http", http_status=404, on="result"), DoclingUnavailable),
        (Scenario(outcome="http", http_status=401, on="submit"), DoclingKeyRejected),
        (Scenario(outcome="http", http_status=422, on="submit"), DoclingRequestRejected),
    ],
)
def test_canary_raises_on_failure(stub, scenario, error):
    stub.scenario = scenario
    with make_client(stub) as client:
        with pytest.raises(error):
            client.canary()


# --- helpers ----------------------------------------------------------------------------------


class socket_port:  # noqa: N801 - used like a function
    """Reserve a free loopback port and release it (nothing listens there afterwards)."""

    def __enter__(self) -> int:
        import socket

        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        return self._sock.getsockname()[1]

    def __exit__(self, *exc: object) -> None:
        self._sock.close()
