"""Offline OCR for scanned PDFs and images (RapidOCR on onnxruntime).

Engine: ``rapidocr`` 3.x (Apache-2.0). Its wheel ships the PP-OCRv6 *small* detection
and recognition models (ONNX, ~31 MB); they are passed to it by explicit
``model_path``, which is the only configuration under which RapidOCR never reaches
its downloader (``DownloadFile.run`` is called only when no ``model_path`` is set).
The recognition model carries its character list in the ONNX metadata, so no
dictionary is fetched either; ki never asks for visualisation fonts. The
text-line angle classifier is off: it flipped correct lines of upright pages to
garbage, and page orientation is decided per page instead (below).

Offline: onnxruntime's own telemetry is switched off (``ORT_DISABLE_TELEMETRY=1``, set
when this module is imported, before onnxruntime is), so OCR opens no socket.

Pages: PDFs are rendered with pypdfium2 at scale 2 (144 dpi, longest side capped
at :data:`MAX_SIDE` pixels, the size RapidOCR would shrink to anyway) under the
PDFium lock of :mod:`ki.convert.pdf`; pages whose text layer is usable keep it.
Images (PNG, JPEG, TIFF with all its frames, GIF, BMP, WEBP) are decoded with
Pillow, EXIF-transposed and flattened onto white.

Orientation: a page is read at 0°. It is re-read at 180°, 90° and 270° (90° first
when most text boxes stand upright) only when the char-weighted mean confidence
is below :data:`GOOD_CONFIDENCE`, when most text sits in vertical boxes, or when
very few characters came out; the reading with horizontal text and the best mean
confidence wins. Reading order: boxes are de-skewed by their median angle,
grouped into lines by vertical overlap and read left to right.

Budget and fairness: one process-wide *lane* (a semaphore, default one OCR at a
time, ``KI_OCR_CONCURRENCY``) bounds OCR so it cannot starve other stages. A page
is rendered (or decoded) in the caller's thread, then recognised on a worker
thread that owns the lane until the engine returns, so a timed-out page keeps
the lane until its CPU work really ends. The page and document budgets count
time spent working, not time spent waiting for the lane.
"""

from __future__ import annotations

import functools
import io
import math
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import Any

from ki.convert.model import StructuredDocument, clean_text
from ki.errors import ClaimLost, UnsupportedDocument

# The onnxruntime Linux wheel (1.32.0 measured) ships Microsoft 1DS telemetry: at import it writes
# ~/.cache/Microsoft/DeveloperTools/.onnxruntime/{deviceid,onnxruntime.db} and tries to reach
# mobile.events.data.microsoft.com. Only this variable, set before the first import, stops it
# (onnxruntime.disable_telemetry_events() after import does not).
os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")

CONVERTER = "ki.ocr"
CONVERTER_VERSION = "1"
PAGE_SEPARATOR = "\f"

RENDER_SCALE = 2.0
MAX_SIDE = 2000  # RapidOCR's Global.max_side_len: larger inputs are shrunk to this
DEFAULT_CONFIDENCE_FLOOR = 0.5
GOOD_CONFIDENCE = 0.85  # at or above (and horizontal text), 0° is accepted without retries
UPRIGHT_BONUS = 0.05  # a turned reading must beat 0° by this much mean confidence
FEW_CHARS = 8  # fewer recognised characters than this also triggers the orientation search
SMALL_IMAGE_SIDE = 400  # px: below this on the long side no orientation search is made
MIN_TEXT_LAYER_CHARS = 16  # non-space characters a text layer needs to be kept instead of OCR
_WAIT_SLICE = 10.0  # seconds between renew() calls while waiting for the lane or a page
_DET_MODEL = "PP-OCRv6_det_small.onnx"
_REC_MODEL = "PP-OCRv6_rec_small.onnx"
_IMAGE_FORMATS = ("PNG", "JPEG", "TIFF", "GIF", "BMP", "WEBP")
_IMAGE_MAGIC = (b"\x89PNG", b"\xff\xd8\xff", b"II*\x00", b"MM\x00*", b"GIF8", b"BM", b"RIFF")

Renew = Callable[[], object]


# --------------------------------------------------------------------------- engine


@dataclass(frozen=True)
class _Probe:
    ok: bool
    reason: str = ""
    det: Path | None = None
    rec: Path | None = None
    version: str = ""


@functools.cache
def _probe() -> _Probe:
    try:
        import onnxruntime  # noqa: F401
        import rapidocr
    except Exception as exc:  # noqa: BLE001 - any import failure means "no OCR here"
        return _Probe(False, f"rapidocr/onnxruntime cannot be imported: {exc}")
    models = Path(rapidocr.__file__).resolve().parent / "models"
    det, rec = models / _DET_MODEL, models / _REC_MODEL
    missing = [p.name for p in (det, rec) if not p.is_file()]
    if missing:
        return _Probe(False, f"bundled OCR models missing in {models}: {', '.join(missing)}")
    try:
        version = importlib_metadata.version("rapidocr")
    except importlib_metadata.PackageNotFoundError:
        version = "unknown"
    return _Probe(True, det=det, rec=rec, version=version)


def ocr_available() -> bool:
    """Whether OCR can run here: rapidocr and onnxruntime import and the bundled models exist (cached)."""
    return _probe().ok


def engine_info() -> dict[str, Any]:
    """What reads the pages (recorded in ``metadata["ocr_engine"]``)."""
    probe = _probe()
    info: dict[str, Any] = {"name": "rapidocr", "version": probe.version, "threads": _threads()}
    if probe.ok:
        import onnxruntime

        info.update(onnxruntime=onnxruntime.__version__, det=probe.det.stem, rec=probe.rec.stem)
    return info


def _threads() -> int:
    """onnxruntime intra-op threads per OCR lane: 1 unless ``KI_OCR_THREADS`` says otherwise.

    One lane of one thread keeps OCR to one core. A second thread bought little wall time
    on a busy 2-core host and doubled the CPU seconds per page (workers spin-wait).
    """
    env = os.environ.get("KI_OCR_THREADS", "").strip()
    return int(env) if env.isdigit() and int(env) > 0 else 1


_ENGINE_LOCK = threading.Lock()
_engine_instance: Any = None


def _engine() -> Any:
    """The process's RapidOCR instance (models loaded once, from the wheel only)."""
    global _engine_instance
    if _engine_instance is not None:
        return _engine_instance
    with _ENGINE_LOCK:
        if _engine_instance is None:
            probe = _probe()
            if not probe.ok:
                raise UnsupportedDocument(f"OCR is not available: {probe.reason}", reason="needs_ocr")
            from rapidocr import RapidOCR

            _engine_instance = RapidOCR(
                params={
                    "Global.log_level": "error",
                    "Global.use_cls": False,
                    "Global.text_score": 0.0,  # ki applies its own confidence floor
                    "Global.max_side_len": MAX_SIDE,
                    "Det.model_path": str(probe.det),  # explicit paths: RapidOCR never downloads
                    "Rec.model_path": str(probe.rec),
                    "EngineConfig.onnxruntime.intra_op_num_threads": min(_threads(), os.cpu_count() or 1),
                    "EngineConfig.onnxruntime.inter_op_num_threads": 1,
                }
            )
    return _engine_instance


# --------------------------------------------------------------------------- lane


def _env_concurrency() -> int:
    env = os.environ.get("KI_OCR_CONCURRENCY", "").strip()
    return int(env) if env.isdigit() and int(env) > 0 else 1


_lane = threading.BoundedSemaphore(_env_concurrency())
_lane_size = _env_concurrency()


def set_ocr_concurrency(size: int) -> None:
    """Resize the process-wide OCR lane (pages already running keep the old lane until they finish)."""
    global _lane, _lane_size
    if size < 1:
        raise ValueError("OCR concurrency must be at least 1")
    _lane, _lane_size = threading.BoundedSemaphore(size), size


def ocr_concurrency() -> int:
    """How many pages this process OCRs at once."""
    return _lane_size


def _renew(renew: Renew | None) -> None:
    if renew is not None and renew() is False:
        raise ClaimLost("the claim was lost while OCR was running")


class _PageTimeout(Exception):
    pass


class _PageLoadError(Exception):
    """A page that cannot be rendered: recorded as a failed page, the others still convert."""


def _run_in_lane(job: Callable[[], Any], timeout: float, renew: Renew | None) -> tuple[Any, float]:
    """Run ``job`` on a worker thread while holding the lane; return (result, seconds worked).

    Waiting for the lane is not counted. The worker releases the lane itself, so a job
    abandoned after ``timeout`` still bounds concurrency until it really ends.
    """
    lane = _lane
    while not lane.acquire(timeout=_WAIT_SLICE):
        _renew(renew)
    box: dict[str, Any] = {}
    done = threading.Event()

    def work() -> None:
        try:
            box["value"] = job()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller
            box["error"] = exc
        finally:
            lane.release()
            done.set()

    started = time.monotonic()
    try:
        threading.Thread(target=work, name="ki-ocr", daemon=True).start()
    except BaseException:
        lane.release()
        raise
    while True:
        left = timeout - (time.monotonic() - started)
        if left <= 0:
            raise _PageTimeout
        if done.wait(min(left, _WAIT_SLICE)):
            break
        _renew(renew)
    elapsed = time.monotonic() - started
    if "error" in box:
        raise box["error"]
    return box["value"], elapsed


# --------------------------------------------------------------------------- recognition


@dataclass
class _Box:
    text: str
    score: float
    cx: float
    cy: float
    width: float
    height: float
    angle: float  # radians, direction of the box's top edge


@dataclass
class _Reading:
    rotation: int  # degrees the page image was turned clockwise before reading
    boxes: list[_Box]
    seconds: float = 0.0

    @property
    def chars(self) -> int:
        return sum(len(b.text) for b in self.boxes)

    @property
    def confidence(self) -> float:
        total = self.chars
        return sum(b.score * len(b.text) for b in self.boxes) / total if total else 0.0

    @property
    def horizontal(self) -> float:
        total = self.chars
        return sum(len(b.text) for b in self.boxes if b.width >= b.height) / total if total else 1.0

    def good(self) -> bool:
        return self.confidence >= GOOD_CONFIDENCE and self.horizontal >= 0.5 and self.chars >= FEW_CHARS

    def key(self) -> tuple[bool, float, int]:
        """Horizontal text first, then mean confidence; the page as stored wins near-ties."""
        bonus = UPRIGHT_BONUS if self.rotation == 0 else 0.0
        return (self.horizontal >= 0.5, round(self.confidence + bonus, 3), self.chars)


def _recognise(image: Any, rotation: int) -> _Reading:
    import numpy as np

    started = time.monotonic()
    turned = np.ascontiguousarray(np.rot90(image, k=-(rotation // 90))) if rotation else image
    result = _engine()(turned)
    boxes: list[_Box] = []
    if getattr(result, "txts", None) is not None and getattr(result, "boxes", None) is not None:
        for quad, text, score in zip(result.boxes, result.txts, result.scores, strict=False):
            text = _normalise(text)
            if not text:
                continue
            p0, p1, _p2, p3 = (np.asarray(p, dtype=float) for p in quad)
            centre = np.asarray(quad, dtype=float).mean(axis=0)
            top = p1 - p0
            boxes.append(
                _Box(
                    text=text,
                    score=float(score),
                    cx=float(centre[0]),
                    cy=float(centre[1]),
                    width=float(np.hypot(*top)),
                    height=float(np.hypot(*(p3 - p0))),
                    angle=math.atan2(float(top[1]), float(top[0])),
                )
            )
    return _Reading(rotation, boxes, time.monotonic() - started)


_FULLWIDTH = {c: c - 0xFEE0 for c in range(0xFF01, 0xFF5F)} | {0x3000: 0x20}


def _normalise(text: str) -> str:
    """Full-width ASCII forms (a CJK-trained recogniser's habit) become ASCII; whitespace is squeezed."""
    return " ".join(text.translate(_FULLWIDTH).split())


def _read_page(image: Any, deadline: float) -> tuple[_Reading, list[int]]:
    """Read one page, searching orientations only when 0° looks wrong. Returns (best, tried)."""
    first = _recognise(image, 0)
    tried = [0]
    if not first.boxes or first.good() or max(image.shape[:2]) < SMALL_IMAGE_SIDE:
        return first, tried  # a small image (icon, logo, spacer) is no turned page
    order = (90, 270, 180) if first.horizontal < 0.5 else (180, 90, 270)
    best = first
    for rotation in order:
        if time.monotonic() + first.seconds > deadline:
            break  # not enough budget left for another full reading
        reading = _recognise(image, rotation)
        tried.append(rotation)
        if reading.key() > best.key():
            best = reading
        if best.good():
            break
    return best, tried


def _lines(boxes: list[_Box]) -> str:
    """Order boxes top-to-bottom, left-to-right into lines (after undoing the page's skew)."""
    if not boxes:
        return ""
    long_angles = sorted(b.angle for b in boxes if b.width > 2 * b.height)
    skew = long_angles[len(long_angles) // 2] if long_angles else 0.0
    skew = max(-0.26, min(0.26, skew))  # at most ~15°
    cos, sin = math.cos(skew), math.sin(skew)
    placed = sorted(((-sin * b.cx + cos * b.cy, cos * b.cx + sin * b.cy, b) for b in boxes), key=lambda t: (t[0], t[1]))
    lines: list[list[tuple[float, float, _Box]]] = []
    line_y = line_h = 0.0
    for y, x, box in placed:
        height = max(box.height, 1.0)
        if lines and abs(y - line_y) <= 0.5 * max(min(height, line_h), 1.0):
            lines[-1].append((y, x, box))
            members = lines[-1]
            line_y = sum(m[0] for m in members) / len(members)
            line_h = max(line_h, height)
        else:
            lines.append([(y, x, box)])
            line_y, line_h = y, height
    return "\n".join(" ".join(m[2].text for m in sorted(line, key=lambda m: m[1])) for line in lines)


# --------------------------------------------------------------------------- page loop


@dataclass
class _Page:
    """One page to convert: either kept text (``text``) or an image to OCR (``load``)."""

    number: int  # 1-based
    text: str | None = None  # a usable text layer
    layer: str = ""  # the (unusable) text layer, kept when OCR finds nothing
    load: Callable[[], Any] | None = None  # returns the page as a BGR ndarray
    error: str | None = None
    source: str = "text_layer"  # of ``text``: "text_layer", or "blank" (nothing drawn on the page)


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
            _renew(run.renew)
        if page.error is not None:
            _record_failed(run, page)
            continue
        if page.text is not None:
            run.texts.append(page.text)
            run.records.append(
                {
                    "page": page.number,
                    "source": page.source,
                    "rotation": 0,
                    "confidence": None,
                    "chars": len(page.text),
                }
            )
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

        def job(image: Any = image, budget: float = budget) -> tuple[_Reading, list[int]]:
            return _read_page(image, time.monotonic() + budget)

        try:
            (reading, tried), seconds = _run_in_lane(job, budget, run.renew)
        except _PageTimeout:
            run.seconds += budget
            which = "page" if budget == run.page_timeout else "document"
            limit = run.page_timeout if which == "page" else run.doc_timeout
            raise _too_large(
                run, f"OCR of page {page.number} exceeded the {which} budget of {limit:g} s", page=page.number
            ) from None
        run.seconds += seconds
        kept = [b for b in reading.boxes if b.score >= run.floor]
        text = _lines(kept)
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
    probe = _probe()
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
        text_layer_pages: the text layer per page as :func:`ki.convert.pdf.convert_pdf` found it
            (``doc.text.split("\\f")``); extracted here when None. A page keeps its layer when it
            has at least :data:`MIN_TEXT_LAYER_CHARS` visible characters, mostly not U+FFFD or
            private-use glyphs.
        max_pages: most pages that may need OCR; more is ``too_large`` before any work.
        page_timeout_seconds: budget of one page, orientation retries included.
        doc_timeout_seconds: budget of all OCR of the document (time waiting for the lane excluded).
        renew: called between pages (and every 10 s while waiting); returning ``False`` means the
            claim is lost and raises :class:`~ki.errors.ClaimLost`.
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
    from ki.convert.pdf import _HEADER, _HEADER_WINDOW, _PDFIUM_LOCK, _open, _page_text

    if not data:
        raise UnsupportedDocument(f"{filename}: 0 bytes", reason="empty")
    offset = data.find(_HEADER, 0, _HEADER_WINDOW + len(_HEADER))
    if offset < 0:
        raise UnsupportedDocument(f"{filename}: not a PDF (no %PDF- header)", reason="corrupt")
    _check_available()
    body = data[offset:] if offset else data
    run = _Run(confidence_floor, max_pages, page_timeout_seconds, doc_timeout_seconds, renew, filename)

    with _PDFIUM_LOCK:
        pdf = _open(body, filename)
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
            with _PDFIUM_LOCK:
                try:
                    page = pdf.get_page(index)
                    try:
                        layers.append(_page_text(page))
                    finally:
                        page.close()
                except Exception:  # noqa: BLE001 - reported as a failed page below
                    layers.append(None)
        unusable = [i for i, layer in enumerate(layers) if layer is not None and not _usable_layer(layer)]
        blank = {i for i in unusable if _blank(pdf, i, _PDFIUM_LOCK)}
        need = set(unusable) - blank
        if len(need) > max_pages:
            raise _too_large(
                run, f"{len(need)} pages need OCR, more than the limit of {max_pages}", pages_to_ocr=len(need)
            )

        def render(index: int) -> Any:
            import numpy as np
            import pypdfium2 as pdfium

            with _PDFIUM_LOCK:
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
        with _PDFIUM_LOCK:
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
    as :func:`ocr_pdf`; undecodable bytes are ``corrupt`` (a known image signature) or
    ``unsupported_format``, a decompression bomb is ``too_large``.
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
        known = data.startswith(_IMAGE_MAGIC)
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
            yield _Page(index + 1, load=functools.partial(frame, index))

    try:
        _convert_pages(pages(), run)
    finally:
        image.close()
    return _finish(run, "image", n_frames, None, {"image_format": fmt})


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
