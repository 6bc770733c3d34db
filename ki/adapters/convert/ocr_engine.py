"""The OCR engine (RapidOCR on onnxruntime, models from the wheel) and the process-wide OCR lane.

Engine: ``rapidocr`` 3.x (Apache-2.0). Its wheel ships the PP-OCRv6 *small* detection
and recognition models (ONNX, ~31 MB); they are passed to it by explicit
``model_path``, which is the only configuration under which RapidOCR never reaches
its downloader (``DownloadFile.run`` is called only when no ``model_path`` is set).
The recognition model carries its character list in the ONNX metadata, so no
dictionary is fetched either; ki never asks for visualisation fonts. The
text-line angle classifier is off: it flipped correct lines of upright pages to
garbage, and page orientation is decided per page instead (:mod:`ki.adapters.convert.ocr_reading`).

Offline: onnxruntime's own telemetry is switched off (``ORT_DISABLE_TELEMETRY=1``, set
when this module is imported, before onnxruntime is), so OCR opens no socket.

Budget and fairness: one process-wide *lane* (a semaphore, default one OCR at a
time, ``KI_OCR_CONCURRENCY``) bounds OCR so it cannot starve other stages. A page
is recognised on a worker thread that owns the lane until the engine returns, so a
timed-out page keeps the lane until its CPU work really ends. Time spent waiting
for the lane is not counted against a page's budget.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import Any

from ki.config.process import OcrSettings, current
from ki.core.errors import ClaimLost, UnsupportedDocument

# onnxruntime's telemetry is switched off by ki/__init__.py (ORT_DISABLE_TELEMETRY before any import).

MAX_SIDE = 2000  # RapidOCR's Global.max_side_len: larger inputs are shrunk to this
WAIT_SLICE = 10.0  # seconds between renew() calls while waiting for the lane or a page
_DET_MODEL = "PP-OCRv6_det_small.onnx"
_REC_MODEL = "PP-OCRv6_rec_small.onnx"

Renew = Callable[[], object]


@dataclass(frozen=True)
class Probe:
    """Whether OCR can run here, why not, and the bundled model paths and version."""

    ok: bool
    reason: str = ""
    det: Path | None = None
    rec: Path | None = None
    version: str = ""


@functools.cache
def probe_engine() -> Probe:
    """Import rapidocr/onnxruntime and find the bundled models (cached for the process)."""
    try:
        import onnxruntime  # noqa: F401
        import rapidocr
    except Exception as exc:  # noqa: BLE001 - any import failure means "no OCR here"
        return Probe(False, f"rapidocr/onnxruntime cannot be imported: {exc}")
    models = Path(rapidocr.__file__).resolve().parent / "models"
    det, rec = models / _DET_MODEL, models / _REC_MODEL
    missing = [p.name for p in (det, rec) if not p.is_file()]
    if missing:
        return Probe(False, f"bundled OCR models missing in {models}: {', '.join(missing)}")
    try:
        version = importlib_metadata.version("rapidocr")
    except importlib_metadata.PackageNotFoundError:
        version = "unknown"
    return Probe(True, det=det, rec=rec, version=version)


def ocr_installed() -> bool:
    """Whether the OCR wheel is installed, without importing it: rapidocr and onnxruntime are found on the path and
    the bundled models exist (a report's check: ``ki status``, ``/healthz``). Importing onnxruntime costs ~0.2 s of
    CPU, so a report does not; a run's start asks :func:`ocr_available`, which imports both. Once this process has
    probed the engine, its answer is given."""
    if probe_engine.cache_info().currsize:
        return probe_engine().ok
    import importlib.util

    try:
        spec = importlib.util.find_spec("rapidocr")
        runtime = importlib.util.find_spec("onnxruntime")
    except (ImportError, ValueError):
        return False
    if spec is None or runtime is None or not spec.submodule_search_locations:
        return False
    models = Path(next(iter(spec.submodule_search_locations))).resolve() / "models"
    return (models / _DET_MODEL).is_file() and (models / _REC_MODEL).is_file()


def ocr_available() -> bool:
    """Whether OCR can run here: rapidocr and onnxruntime import and the bundled models exist (cached)."""
    return probe_engine().ok


def engine_info() -> dict[str, Any]:
    """What reads the pages (recorded in ``metadata["ocr_engine"]``)."""
    probe = probe_engine()
    info: dict[str, Any] = {"name": "rapidocr", "version": probe.version, "threads": threads()}
    if probe.ok:
        import onnxruntime

        info.update(onnxruntime=onnxruntime.__version__, det=probe.det.stem, rec=probe.rec.stem)
    return info


def threads() -> int:
    """onnxruntime intra-op threads per OCR lane: 1 unless ``KI_OCR_THREADS`` says otherwise.

    One lane of one thread keeps OCR to one core. A second thread bought little wall time
    on a busy 2-core host and doubled the CPU seconds per page (workers spin-wait).
    Raises: ConfigurationError naming the variable when it is not a whole number ≥ 1.
    """
    return current(OcrSettings).threads


_ENGINE_LOCK = threading.Lock()
_engine_instance: Any = None


def engine() -> Any:
    """The process's RapidOCR instance (models loaded once, from the wheel only)."""
    global _engine_instance
    if _engine_instance is not None:
        return _engine_instance
    with _ENGINE_LOCK:
        if _engine_instance is None:
            probe = probe_engine()
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
                    "EngineConfig.onnxruntime.intra_op_num_threads": min(threads(), os.cpu_count() or 1),
                    "EngineConfig.onnxruntime.inter_op_num_threads": 1,
                }
            )
    return _engine_instance


# --------------------------------------------------------------------------- lane


_lane: threading.BoundedSemaphore | None = None  # made on first use, KI_OCR_CONCURRENCY wide
_lane_size = 0
_LANE_LOCK = threading.Lock()


def set_ocr_concurrency(size: int) -> None:
    """Resize the process-wide OCR lane (pages already running keep the old lane until they finish)."""
    global _lane, _lane_size
    if size < 1:
        raise ValueError("OCR concurrency must be at least 1")
    with _LANE_LOCK:
        _lane, _lane_size = threading.BoundedSemaphore(size), size


def _current_lane() -> threading.BoundedSemaphore:
    """The process-wide OCR lane (``KI_OCR_CONCURRENCY`` pages at once, 1 by default), made on first use.

    Raises: ConfigurationError naming the variable when it is not a whole number ≥ 1.
    """
    global _lane, _lane_size
    with _LANE_LOCK:
        if _lane is None:
            _lane_size = current(OcrSettings).concurrency
            _lane = threading.BoundedSemaphore(_lane_size)
        return _lane


def ocr_concurrency() -> int:
    """How many pages this process OCRs at once."""
    _current_lane()
    return _lane_size


def renew_claim(renew: Renew | None) -> None:
    """Call ``renew``; raise :class:`~ki.core.errors.ClaimLost` when it returns ``False``."""
    if renew is not None and renew() is False:
        raise ClaimLost("the claim was lost while OCR was running")


@contextlib.contextmanager
def lane_slot(renew: Renew | None = None) -> Iterator[None]:
    """Hold one slot of the process-wide OCR lane (while a worker process runs OCR for this caller).

    ``renew`` is called every :data:`WAIT_SLICE` seconds while waiting for the slot.
    Raises: :class:`~ki.core.errors.ClaimLost` when ``renew()`` returns False.
    """
    lane = _current_lane()
    while not lane.acquire(timeout=WAIT_SLICE):
        renew_claim(renew)
    try:
        yield
    finally:
        lane.release()


class PageTimeout(Exception):
    """A page's OCR outlived its budget (the worker thread is abandoned, still holding the lane)."""


def run_in_lane(job: Callable[[], Any], timeout: float, renew: Renew | None) -> tuple[Any, float]:
    """Run ``job`` on a worker thread while holding the lane; return (result, seconds worked).

    Waiting for the lane is not counted. The worker releases the lane itself, so a job
    abandoned after ``timeout`` still bounds concurrency until it really ends.
    """
    lane = _current_lane()
    while not lane.acquire(timeout=WAIT_SLICE):
        renew_claim(renew)
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
            raise PageTimeout
        if done.wait(min(left, WAIT_SLICE)):
            break
        renew_claim(renew)
    elapsed = time.monotonic() - started
    if "error" in box:
        raise box["error"]
    return box["value"], elapsed
