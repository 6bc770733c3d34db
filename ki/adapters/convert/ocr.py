"""Offline OCR for scanned PDFs and images (RapidOCR on onnxruntime): the page loop, PDFs, images.

The engine and the OCR lane are :mod:`ki.adapters.convert.ocr_engine`; reading one page image
(orientation, reading order) is :mod:`ki.adapters.convert.ocr_reading`.

Pages: PDFs are rendered with pypdfium2 at scale 2 (144 dpi, longest side capped
at :data:`MAX_SIDE` pixels, the size RapidOCR would shrink to anyway) under the
PDFium lock of :mod:`ki.adapters.convert.pdf_open`; pages whose text layer is usable keep it.
Images (PNG, JPEG, TIFF with all its frames, GIF, BMP, WEBP) are decoded with
Pillow, EXIF-transposed and flattened onto white.

Budget: a page is rendered (or decoded) in the caller's thread, then recognised in the
process-wide OCR lane; the page and document budgets count time spent working, not
time spent waiting for the lane.
"""

from __future__ import annotations

import functools
import io
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ki.adapters.convert.formats import image_kind
from ki.adapters.convert.image_floor import ocr_skip_reason, skipped_image_document
from ki.adapters.convert.image_info import add_image_info, image_without_text
from ki.adapters.convert.model import StructuredDocument, clean_text
from ki.adapters.convert.ocr_engine import (
    MAX_SIDE,
    PageTimeout,
    engine_info,
    ocr_available,
    ocr_concurrency,
    probe_engine,
    renew_claim,
    run_in_lane,
    set_ocr_concurrency,
)
from ki.adapters.convert.ocr_reading import Reading, lines, read_page
from ki.core.errors import UnsupportedDocument

__all__ = ["ocr_pdf", "ocr_image", "ocr_available", "engine_info", "ocr_concurrency", "set_ocr_concurrency"]

CONVERTER = "ki.ocr"
CONVERTER_VERSION = "1"
PAGE_SEPARATOR = "\f"

RENDER_SCALE = 2.0
DEFAULT_CONFIDENCE_FLOOR = 0.5
MIN_TEXT_LAYER_CHARS = 16  # non-space characters a text layer needs to be kept instead of OCR
_IMAGE_FORMATS = ("PNG", "JPEG", "TIFF", "GIF", "BMP", "WEBP")

Renew = Callable[[], object]


class _PageLoadError(Exception):
    """A page that cannot be rendered: recorded as a failed page, the others still convert."""


# --------------------------------------------------------------------------- page loop


@dataclass
class _Page:
    """One page to convert: either kept text (``text``) or an image to OCR (``load``)."""

    number: int  # 1-based
    text: str | None = None  # a usable text layer
    layer: str = ""  # the (unusable) text layer, kept when OCR finds nothing
    load: Callable[[], Any] | None = None  # returns the page as a BGR ndarray
    error: str | None = None
    source: str = "text_layer"  # of ``text``: "text_layer", "blank" (nothing drawn), "skipped" (see reason)
    reason: str | None = None  # why a page was not OCR'd (ki.adapters.convert.image_floor), with ``size``
    size: tuple[int, int] | None = None


@dataclass
class _Run:
    floor: float
    max_pages: int
    page_timeout: float
    doc_timeout: float
    renew: Renew | None
    filename: str
    texts: list[str] = field(default_factory=list)
    records: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    failed: list[int] = field(default_factory=list)
    seconds: float = 0.0


def _too_large(run: _Run, message: str, **details: Any) -> UnsupportedDocument:
    details.update(
        pages_done=len(run.texts),
        ocr_seconds=round(run.seconds, 1),
        page_timeout_seconds=run.page_timeout,
        doc_timeout_seconds=run.doc_timeout,
    )
    return UnsupportedDocument(f"{run.filename}: {message}", reason="too_large", details=details)


def _record_failed(run: _Run, page: _Page) -> None:
    run.failed.append(page.number - 1)
    run.warnings.append(f"page {page.number}: {page.error}")
    run.texts.append("")
    run.records.append({"page": page.number, "source": "failed", "rotation": 0, "confidence": None, "chars": 0})


def _convert_pages(pages: Iterator[_Page], run: _Run) -> None:
    for index, page in enumerate(pages):
        if index:
            renew_claim(run.renew)
        if page.error is not None:
            _record_failed(run, page)
            continue
        if page.text is not None:
            run.texts.append(page.text)
            record = {"page": page.number, "source": page.source, "rotation": 0, "confidence": None,
                      "chars": len(page.text)}
            if page.reason:
                record.update(reason=page.reason, size=list(page.size or ()))
            run.records.append(record)
            continue
        if run.seconds >= run.doc_timeout:
            raise _too_large(
                run,
                f"OCR exceeded the document budget of {run.doc_timeout:g} s before page {page.number}",
                page=page.number,
            )
        assert page.load is not None
        started = time.monotonic()
        try:
            image = page.load()  # rendered/decoded here, so an abandoned page never touches the document
        except _PageLoadError as exc:
            page.error, page.load = str(exc), None
            run.seconds += time.monotonic() - started
            _record_failed(run, page)
            continue
        run.seconds += time.monotonic() - started
        budget = min(run.page_timeout, max(run.doc_timeout - run.seconds, 0.001))

        def job(image: Any = image, budget: float = budget) -> tuple[Reading, list[int]]:
            return read_page(image, time.monotonic() + budget)

        try:
            (reading, tried), seconds = run_in_lane(job, budget, run.renew)
        except PageTimeout:
            run.seconds += budget
            which = "page" if budget == run.page_timeout else "document"
            limit = run.page_timeout if which == "page" else run.doc_timeout
            raise _too_large(
                run, f"OCR of page {page.number} exceeded the {which} budget of {limit:g} s", page=page.number
            ) from None
        run.seconds += seconds
        kept = [b for b in reading.boxes if b.score >= run.floor]
        text = lines(kept)
        chars = sum(len(b.text) for b in kept)
        confidence = sum(b.score * len(b.text) for b in kept) / chars if chars else 0.0
        record: dict[str, Any] = {
            "page": page.number,
            "source": "ocr",
            "rotation": reading.rotation,
            "confidence": round(confidence, 4),
            "chars": len(text),
        }
        if len(tried) > 1:
            record["orientations_tried"] = tried
        dropped = len(reading.boxes) - len(kept)
        if dropped:
            record["dropped_boxes"] = dropped
        if not text.strip() and page.layer.strip():
            text = page.layer  # OCR found nothing better than the sparse text layer
            record.update(source="text_layer", chars=len(text), confidence=None)
        run.texts.append(text)
        run.records.append(record)
    return None


def _finish(run: _Run, fmt: str, n_pages: int, title: str | None, extra: dict[str, Any]) -> StructuredDocument:
    if run.records and all(r["source"] == "skipped" for r in run.records):
        return skipped_image_document(run.filename, run.records, fmt=fmt, pages=n_pages)
    if not any(t.strip() for t in run.texts):
        raise UnsupportedDocument(
            f"{run.filename}: OCR found no text with confidence >= {run.floor:g} on {n_pages} page(s)",
            reason="empty_text",
            details={"pages": n_pages, "confidence_floor": run.floor, "ocr_pages": run.records},
        )
    info = engine_info()
    metadata: dict[str, Any] = {
        **extra,
        "ocr_pages": run.records,
        "page_chars": [len(t) for t in run.texts],
        "ocr_engine": info,
        "confidence_floor": run.floor,
        "ocr_seconds": round(run.seconds, 2),
    }
    if run.failed:
        metadata["failed_pages"] = run.failed
    return StructuredDocument(
        text=PAGE_SEPARATOR.join(clean_text(t) for t in run.texts),
        format=fmt,
        converter=CONVERTER,
        converter_version=f"{CONVERTER_VERSION}+rapidocr-{info['version']}",
        title=title,
        pages=n_pages,
        warnings=run.warnings,
        metadata=metadata,
    )


def _check_available() -> None:
    probe = probe_engine()
    if not probe.ok:
        raise UnsupportedDocument(f"OCR is not available: {probe.reason}", reason="needs_ocr")


# --------------------------------------------------------------------------- PDF


def _blank(pdf: Any, index: int, lock: threading.Lock) -> bool:
    """A page with no page objects and no annotations draws nothing: there is nothing to OCR."""
    import pypdfium2.raw as pdfium_c

    with lock:
        try:
            page = pdf.get_page(index)
        except Exception:  # noqa: BLE001 - let the render report it
            return False
        try:
            return pdfium_c.FPDFPage_CountObjects(page) == 0 and pdfium_c.FPDFPage_GetAnnotCount(page) == 0
        finally:
            page.close()


def _usable_layer(text: str) -> bool:
    visible = [c for c in text if not c.isspace()]
    if len(visible) < MIN_TEXT_LAYER_CHARS:
        return False
    junk = sum(1 for c in visible if c == "\ufffd" or "\ue000" <= c <= "\uf8ff" or ord(c) < 32)
    return junk <= 0.3 * len(visible)


def ocr_pdf(
    data: bytes,
    filename: str,
    *,
    text_layer_pages: list[str] | None = None,
    max_pages: int = 200,
    page_timeout_seconds: float = 60,
    doc_timeout_seconds: float = 600,
    renew: Renew | None = None,
    confidence_floor: float = DEFAULT_CONFIDENCE_FLOOR,
) -> StructuredDocument:
    """OCR the pages of a PDF that have no usable text layer; keep the text layer of the others.

    Args:
        data: the PDF's bytes (junk before ``%PDF-`` within the first 1 KB is skipped).
        filename: used only in messages.
        text_layer_pages: the text layer per page as :func:`ki.adapters.convert.pdf.convert_pdf` found it
            (``doc.text.split("\\f")``); extracted here when None. A page keeps its layer when it
            has at least :data:`MIN_TEXT_LAYER_CHARS` visible characters, mostly not U+FFFD or
            private-use glyphs.
        max_pages: most pages that may need OCR; more is ``too_large`` before any work.
        page_timeout_seconds: budget of one page, orientation retries included.
        doc_timeout_seconds: budget of all OCR of the document (time waiting for the lane excluded).
        renew: called between pages (and every 10 s while waiting); returning ``False`` means the
            claim is lost and raises :class:`~ki.core.errors.ClaimLost`.
        confidence_floor: recognised boxes below this mean confidence are dropped.

    Returns:
        ``StructuredDocument(format="pdf", converter="ki.ocr")``; ``text`` joins pages with
        ``"\\f"``; ``metadata["ocr_pages"]`` has one record per page: ``page`` (1-based),
        ``source`` (``text_layer``, ``ocr``, ``blank`` for a page that draws nothing, ``failed``),
        ``rotation`` (degrees turned clockwise to read it), ``confidence`` (char-weighted mean of
        the kept boxes, None for a text layer), ``chars``, and when 0° looked wrong
        ``orientations_tried``; also ``page_chars``, ``ocr_engine``, ``confidence_floor``,
        ``ocr_seconds``.

    Raises:
        UnsupportedDocument: ``needs_ocr`` (OCR not installed), ``empty``/``corrupt``/
            ``password_required``/``encrypted`` (as the text-layer converter), ``too_large``
            (more than ``max_pages`` pages to OCR, or a time budget exceeded), ``empty_text``
            (nothing above the confidence floor on any page).
        ClaimLost: ``renew()`` returned False.
    """
    from ki.adapters.convert.pdf_open import PDFIUM_LOCK, open_pdf, pdf_body
    from ki.adapters.convert.pdf_text import page_text

    body, offset = pdf_body(data, filename)
    _check_available()
    run = _Run(confidence_floor, max_pages, page_timeout_seconds, doc_timeout_seconds, renew, filename)

    with PDFIUM_LOCK:
        pdf = open_pdf(body, filename)
        n_pages = len(pdf)
        title = (pdf.get_metadata_value("Title") or "").strip() or None
    try:
        if text_layer_pages is not None and len(text_layer_pages) != n_pages:
            raise ValueError(f"text_layer_pages has {len(text_layer_pages)} entries for {n_pages} pages")
        layers: list[str | None] = []
        for index in range(n_pages):
            if text_layer_pages is not None:
                layers.append(text_layer_pages[index])
                continue
            with PDFIUM_LOCK:
                try:
                    page = pdf.get_page(index)
                    try:
                        layers.append(page_text(page))
                    finally:
                        page.close()
                except Exception:  # noqa: BLE001 - reported as a failed page below
                    layers.append(None)
        unusable = [i for i, layer in enumerate(layers) if layer is not None and not _usable_layer(layer)]
        blank = {i for i in unusable if _blank(pdf, i, PDFIUM_LOCK)}
        need = set(unusable) - blank
        if len(need) > max_pages:
            raise _too_large(
                run, f"{len(need)} pages need OCR, more than the limit of {max_pages}", pages_to_ocr=len(need)
            )

        def render(index: int) -> Any:
            import numpy as np
            import pypdfium2 as pdfium

            with PDFIUM_LOCK:
                try:
                    page = pdf.get_page(index)
                except pdfium.PdfiumError as exc:
                    raise _PageLoadError(f"PDFium could not load the page: {exc}") from exc
                try:
                    width, height = page.get_size()
                    scale = min(RENDER_SCALE, MAX_SIDE / max(width, height, 1.0))
                    try:
                        bitmap = page.render(scale=scale, fill_color=(255, 255, 255, 255))
                    except pdfium.PdfiumError as exc:
                        raise _PageLoadError(f"PDFium could not render the page: {exc}") from exc
                    try:
                        return np.array(bitmap.to_numpy()[:, :, :3], copy=True)  # BGR
                    finally:
                        bitmap.close()
                finally:
                    page.close()

        def pages() -> Iterator[_Page]:
            for index, layer in enumerate(layers):
                if layer is None:
                    yield _Page(index + 1, error="PDFium could not load the page")
                elif index in blank:
                    yield _Page(index + 1, text=layer, source="blank")
                elif index not in need:
                    yield _Page(index + 1, text=layer)
                else:
                    yield _Page(index + 1, layer=layer, load=functools.partial(render, index))

        _convert_pages(pages(), run)
    finally:
        with PDFIUM_LOCK:
            pdf.close()
    return _finish(run, "pdf", n_pages, title, {"header_offset": offset})


# --------------------------------------------------------------------------- images


def ocr_image(
    data: bytes,
    filename: str,
    *,
    max_pages: int = 200,
    page_timeout_seconds: float = 60,
    doc_timeout_seconds: float = 600,
    renew: Renew | None = None,
    confidence_floor: float = DEFAULT_CONFIDENCE_FLOOR,
) -> StructuredDocument:
    """OCR a raster image: PNG, JPEG, TIFF (every frame is a page), GIF, BMP, WEBP.

    Same arguments, result layout (``format="image"``, ``metadata["image_format"]``) and errors
    as :func:`ocr_pdf`, with an ``image_info`` part (file name, EXIF date and camera:
    :mod:`ki.adapters.convert.image_info`); an image OCR finds no text in (a photo, a logo) is a document with
    empty ``text`` and that part, never ``empty_text``. Undecodable bytes are ``corrupt`` (a known
    image signature) or ``unsupported_format``, a decompression bomb is ``too_large``.
    """
    from PIL import Image, UnidentifiedImageError

    if not data:
        raise UnsupportedDocument(f"{filename}: 0 bytes", reason="empty")
    _check_available()
    try:
        image = Image.open(io.BytesIO(data), formats=_IMAGE_FORMATS)
        n_frames = int(getattr(image, "n_frames", 1) or 1)
    except Image.DecompressionBombError as exc:
        raise UnsupportedDocument(f"{filename}: {exc}", reason="too_large") from exc
    except (UnidentifiedImageError, OSError, ValueError) as exc:
        known = image_kind(data[:16]) is not None or data.startswith((b"BM", b"RIFF"))
        raise UnsupportedDocument(
            f"{filename}: {'cannot decode the image' if known else 'not a supported image format'}: {exc}",
            reason="corrupt" if known else "unsupported_format",
            details={"magic": data[:8].hex()},
        ) from exc
    run = _Run(confidence_floor, max_pages, page_timeout_seconds, doc_timeout_seconds, renew, filename)
    if n_frames > max_pages:
        raise _too_large(run, f"{n_frames} frames, more than the limit of {max_pages}", pages_to_ocr=n_frames)
    fmt = image.format

    def frame(index: int) -> Any:
        try:
            image.seek(index)
            return _to_bgr(image)
        except Image.DecompressionBombError as exc:
            raise UnsupportedDocument(f"{filename}: {exc}", reason="too_large") from exc
        except (OSError, ValueError, EOFError) as exc:
            raise UnsupportedDocument(
                f"{filename}: cannot decode frame {index + 1}: {exc}", reason="corrupt", details={"frame": index + 1}
            ) from exc

    def pages() -> Iterator[_Page]:
        for index in range(n_frames):
            try:
                image.seek(index)
                size = image.size
            except (OSError, ValueError, EOFError):
                size = None  # the frame's own load reports it
            reason = ocr_skip_reason(*size) if size else None
            if reason:
                yield _Page(index + 1, text="", source="skipped", reason=reason, size=size)
            else:
                yield _Page(index + 1, load=functools.partial(frame, index))

    try:
        _convert_pages(pages(), run)
    finally:
        image.close()
    try:
        doc = _finish(run, "image", n_frames, None, {"image_format": fmt})
    except UnsupportedDocument as exc:
        if exc.reason != "empty_text":
            raise
        doc = image_without_text(data, filename, reason=f"OCR found no text on {n_frames} page(s)")
        doc.metadata.update(ocr_pages=run.records, image_format=fmt)
        doc.pages = n_frames
        return doc
    return add_image_info(doc, data, filename)


def _to_bgr(image: Any) -> Any:
    """One Pillow frame as a BGR ndarray: EXIF-transposed, alpha flattened onto white, at most MAX_SIDE."""
    import numpy as np
    from PIL import Image, ImageOps

    if image.format == "JPEG" and max(image.size) > 2 * MAX_SIDE:
        image.draft("RGB", (image.size[0] // 2, image.size[1] // 2))
    frame = ImageOps.exif_transpose(image) or image
    if frame.mode in ("I", "I;16", "I;16B", "I;16L", "F"):
        values = np.asarray(frame, dtype=np.float32)
        low, high = float(values.min()), float(values.max())
        scaled = (values - low) * (255.0 / (high - low)) if high > low else np.zeros_like(values)
        frame = Image.fromarray(scaled.astype(np.uint8), "L")
    if frame.mode in ("RGBA", "LA", "PA") or (frame.mode == "P" and "transparency" in frame.info):
        rgba = frame.convert("RGBA")
        white = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        frame = Image.alpha_composite(white, rgba)
    frame = frame.convert("RGB")
    if max(frame.size) > MAX_SIDE:
        ratio = MAX_SIDE / max(frame.size)
        frame = frame.resize(
            (max(1, round(frame.width * ratio)), max(1, round(frame.height * ratio))), Image.Resampling.LANCZOS
        )
    return np.ascontiguousarray(np.asarray(frame)[:, :, ::-1])
