"""Converter routing: which converter owns a file, and what this install can convert.

DESIGN.md "Converter routing" (as amended in docs/design-decisions.md): ki's own converters own plain
text, mail, DOCX, XLSX, PPTX, OpenDocument, RTF, HTML, XLS, archives and PDFs with a text layer; legacy
Office goes through LibreOffice; scans and images go to the built-in OCR or Docling Serve; a format nothing
here reads is refused with what would read it (:mod:`ki.adapters.convert.unread`). Detection
(:func:`ki.adapters.convert.formats.sniff_format`, re-exported here) uses the extension first, then the leading bytes.
"""

from __future__ import annotations

from collections.abc import Callable

from ki.adapters.convert.docling.shared import docling as shared_docling
from ki.adapters.convert.formats import sniff_format
from ki.adapters.convert.model import StructuredDocument
from ki.config.settings import KiConfig
from ki.core.errors import UnsupportedDocument

Converter = Callable[[bytes, str], StructuredDocument]
Renew = Callable[[], object]

__all__ = ["sniff_format", "convert_bytes", "converter_for", "capabilities", "handles_reason",
           "ocr_enabled", "docling_client"]

BUILTIN_CAPABILITIES = frozenset({"text", "mail", "msg", "mbox", "docx", "xlsx", "pptx", "odf", "pdf", "html",
                                  "rtf", "xls", "zip", "tnef", "p7m"})


def ocr_enabled(config: KiConfig) -> bool:
    """Built-in OCR is on (``pipeline.ocr.enabled``) and its wheel (rapidocr + onnxruntime) is installed."""
    if not config.pipeline.ocr.enabled:
        return False
    from ki.adapters.convert.ocr import ocr_available

    return ocr_available()


def soffice_program(config: KiConfig) -> str | None:
    """The LibreOffice program ``components.libreoffice`` names when it is installed, else None."""
    from ki.adapters.convert.soffice import find_soffice

    return find_soffice(config.components.libreoffice)


def capabilities(config: KiConfig) -> set[str]:
    """What this install can convert: the built-ins, ``ocr`` when built-in OCR is on, ``docling``
    when Docling Serve is configured and ``libreoffice`` when LibreOffice is installed (legacy Office)."""
    caps = set(BUILTIN_CAPABILITIES)
    if ocr_enabled(config):
        caps.add("ocr")
    if config.components.docling_url:
        caps.add("docling")
    if soffice_program(config):
        caps.add("libreoffice")
    return caps


def handles_reason(config: KiConfig, reason: str) -> bool:
    """Whether a capability quarantine ``reason`` could now be converted (DESIGN.md capability rule).

    ``unsupported_format`` always may: the row is released only when the capabilities recorded at quarantine
    time lack one present now (a workbook quarantined before ki read XLSX is read once it does).
    """
    caps = capabilities(config)
    if reason == "needs_ocr":
        return "ocr" in caps or "docling" in caps
    if reason == "needs_converter":
        return "libreoffice" in caps
    return reason == "unsupported_format"


#: The built-in converter of each format, as ``"module:function"`` (run in a worker: ki.adapters.convert.isolation).
BUILTIN_CONVERTERS = {
    "txt": "ki.adapters.convert.text:convert_text",
    "eml": "ki.adapters.convert.mail:convert_mail",
    "msg": "ki.adapters.convert.msg:convert_msg",
    "mbox": "ki.adapters.convert.embedded:convert_mbox",
    "docx": "ki.adapters.convert.docx:convert_docx",
    "xlsx": "ki.adapters.convert.xlsx:convert_xlsx",
    "pptx": "ki.adapters.convert.pptx:convert_pptx",
    "odf": "ki.adapters.convert.odf:convert_odf",
    "pdf": "ki.adapters.convert.pdf:convert_pdf",
    "html": "ki.adapters.convert.html:convert_html",
    "rtf": "ki.adapters.convert.rtf:convert_rtf",
    "xls": "ki.adapters.convert.xls:convert_xls",
    "zip": "ki.adapters.convert.archive:convert_zip",
    "tnef": "ki.adapters.convert.tnef:convert_tnef",
    "p7m": "ki.adapters.convert.smime:convert_p7m",
}
LEGACY = "ki.adapters.convert.legacy:convert_legacy"
OCR_PDF = "ki.adapters.convert.ocr:ocr_pdf"
OCR_IMAGE = "ki.adapters.convert.ocr:ocr_image"
IMAGE_WITHOUT_TEXT = "ki.adapters.convert.image_info:image_without_text"


def converter_target(fmt: str, filename: str = "") -> str:
    """The ``"module:function"`` of the built-in converter for a detected format.

    Raises:
        UnsupportedDocument: no converter here can read it (reason ``needs_ocr`` for images,
            ``needs_converter`` for legacy Office without LibreOffice, ``unsupported_format``
            otherwise, saying what would read it: :func:`ki.adapters.convert.unread.unreadable`).
    """
    target = BUILTIN_CONVERTERS.get(fmt)
    if target is not None:
        return target
    if fmt == "image":
        raise UnsupportedDocument("an image needs OCR, and no OCR converter is configured", reason="needs_ocr")
    if fmt == "legacy":
        from ki.adapters.convert.soffice import INSTALL_HINT

        raise UnsupportedDocument(f"a legacy Office or word-processor file needs LibreOffice: {INSTALL_HINT}",
                                  reason="needs_converter", details={"component": "libreoffice"})
    if fmt == "archive":
        raise UnsupportedDocument("no converter here opens 7-Zip or RAR archives (py7zr would read .7z; it is LGPL "
                                  "and not installed); unpack it and add its files", reason="unsupported_format",
                                  details={"component": None})
    from ki.adapters.convert.unread import unreadable

    raise unreadable(fmt, filename)


def converter_for(fmt: str, config: KiConfig) -> Converter:
    """The converter function for a detected format (in this process; see :func:`converter_target`)."""
    from ki.adapters.convert.isolation import resolve

    return resolve(converter_target(fmt))


def run_builtin(config: KiConfig, target: str, data: bytes, filename: str, *, renew: Renew | None = None,
                **kwargs: object) -> StructuredDocument:
    """Run a built-in converter under the per-file budget of ``pipeline.convert``.

    With ``pipeline.convert.isolate`` the converter runs in a worker process
    (:mod:`ki.adapters.convert.isolation`): over its memory or wall-clock budget the file is ``too_large``;
    ``renew`` is called while waiting. OCR targets hold a slot of the process-wide OCR lane meanwhile.
    Without isolation the converter runs here (OCR targets get ``renew`` between pages).
    """
    from ki.adapters.convert import isolation

    ocr = target in (OCR_PDF, OCR_IMAGE)
    budget = config.pipeline.convert
    if not budget.isolate:
        extra = {"renew": renew} if ocr else {}
        return isolation.resolve(target)(data, filename, **kwargs, **extra)
    workers = isolation.pool(isolation.Budget(budget.memory_mb, budget.timeout_seconds))
    if not ocr:
        return workers.run(target, data, filename, renew=renew, **kwargs)
    from ki.adapters.convert.ocr_engine import lane_slot

    with lane_slot(renew):
        return workers.run(target, data, filename, renew=renew, **kwargs)


def docling_client(config: KiConfig):
    """The process-wide Docling Serve client for ``components.docling_url``
    (:func:`ki.adapters.convert.docling.shared.docling`)."""
    return shared_docling(config.components)


def _ocr_kwargs(config: KiConfig) -> dict:
    o = config.pipeline.ocr
    return {"max_pages": o.max_pages, "page_timeout_seconds": o.page_timeout_seconds,
            "doc_timeout_seconds": o.document_timeout_seconds}


def convert_bytes(data: bytes, filename: str, config: KiConfig, *, renew: Renew | None = None) -> StructuredDocument:
    """Detect the format of ``data`` and convert it (DESIGN.md "Converter routing").

    Built-in converters own text, mail, DOCX, XLSX, PPTX, OpenDocument, RTF, HTML, XLS, ZIP, TNEF, signed
    ``.p7m`` and PDFs with a text layer; legacy Office goes through LibreOffice when it is installed
    (``needs_converter`` when not). Scans (PDF pages without a text layer) and images go to Docling Serve when
    it is configured and ``pipeline.ocr.prefer_docling`` holds, else to the built-in OCR when it is on. A
    password-protected Office or OpenDocument file is ``password_required`` whatever its format
    (:mod:`ki.adapters.convert.encryption`, :func:`ki.adapters.convert.legacy.route_legacy`). A PDF whose text layer
    covers only
    some pages gets the other pages OCR'd (a mixed scan).

    Args:
        renew: called between OCR pages (the caller renews its claim; returns False when lost).
    Raises:
        UnsupportedDocument: the file cannot be converted (reason names why).
        DoclingUnavailable / DoclingKeyRejected / DoclingRequestRejected: see ki.adapters.convert.docling.
    """
    if not data:
        raise UnsupportedDocument("the file is empty (0 bytes)", reason="empty")
    fmt = sniff_format(data, filename)
    docling = bool(config.components.docling_url)
    scans_to_docling = docling and config.pipeline.ocr.prefer_docling
    ocr = ocr_enabled(config)
    if fmt == "image":
        from ki.adapters.convert.image_floor import skip_tiny_image

        skipped = skip_tiny_image(data, filename)  # a spacer or an icon: neither OCR nor Docling
        if skipped is not None:
            return skipped
        try:
            if scans_to_docling or (docling and not ocr):
                return docling_client(config).convert(data, filename)
            if ocr:
                return run_builtin(config, OCR_IMAGE, data, filename, renew=renew, **_ocr_kwargs(config))
        except UnsupportedDocument as exc:
            if exc.reason != "empty_text":
                raise
            # a photo or a logo: no text, still a document (its name and EXIF fields are searchable)
            return run_builtin(config, IMAGE_WITHOUT_TEXT, data, filename, renew=renew)
    if fmt == "legacy":
        from ki.adapters.convert.legacy import route_legacy

        fmt = route_legacy(data, filename)  # an OLE2 workbook or message by its streams; encrypted: refused
        program = soffice_program(config) if fmt == "legacy" else None
        if program:
            seconds = config.pipeline.convert.timeout_seconds
            return run_builtin(config, LEGACY, data, filename, renew=renew, soffice=program, timeout_seconds=seconds,
                               pptx_reader=BUILTIN_CONVERTERS.get("pptx"))
    try:
        doc = run_builtin(config, converter_target(fmt, filename), data, filename, renew=renew)
    except UnsupportedDocument as exc:
        if exc.reason != "needs_ocr":
            raise
        kept = exc.details.get("parts") or {}  # a scan's annotations and form fields
        if scans_to_docling:
            return _with_parts(docling_client(config).convert(data, filename), kept)
        if ocr and fmt == "pdf":
            return _with_parts(run_builtin(config, OCR_PDF, data, filename, renew=renew, **_ocr_kwargs(config)), kept)
        if docling:
            return _with_parts(docling_client(config).convert(data, filename), kept)
        raise
    if fmt == "pdf" and ocr and doc.metadata.get("pages_without_text") and not scans_to_docling:
        try:
            scanned = run_builtin(config, OCR_PDF, data, filename, renew=renew,
                                  text_layer_pages=doc.text.split("\f"), **_ocr_kwargs(config))
        except UnsupportedDocument as exc:
            if exc.reason == "empty_text" and doc.parts:
                return doc  # pages whose only text is in annotations: OCR read nothing more
            raise
        return _with_parts(scanned, doc.parts)
    return doc


def _with_parts(doc: StructuredDocument, parts: dict[str, str]) -> StructuredDocument:
    """``doc`` with the ``parts`` a text-layer pass found (annotations, form fields) it lacks."""
    for key, text in parts.items():
        if isinstance(text, str):
            doc.parts.setdefault(key, text)
    return doc
