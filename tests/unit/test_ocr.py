"""ki.adapters.convert.ocr: the real needs_ocr PDFs, a CER check against text layers, and the engine's contract.

Real OCR runs (RapidOCR, PP-OCRv6 small) on: the three ``needs_ocr`` rows of the
real corpus MANIFEST (one upright, one scan turned 90°, four pages at 0/180/90/270
degrees), two estate pages turned into image-only PDFs at run time (character
error rate against their text layer), a mixed PDF, a two-frame TIFF and a blank
image. Budget, lane, renewal and reading-order rules use a fake engine.
"""

from __future__ import annotations

import io
import math
import os
import re
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pypdfium2 as pdfium
import pytest

from ki.adapters.convert import ocr, ocr_engine, ocr_reading
from ki.adapters.convert.ocr import ocr_available, ocr_image, ocr_pdf
from ki.adapters.convert.pdf import convert_pdf
from ki.core.errors import ClaimLost, UnsupportedDocument

pytestmark = pytest.mark.skipif(not ocr_available(), reason="rapidocr/onnxruntime not installed")

DOCLING_SENTENCE = "Docling bundles PDF document conversion to JSON and Markdown in an easy self contained package"
# Text PDFs of the estate used for the CER check (one German, one English).
ESTATE_GERMAN = (
    "Akten/2023/Thalbach Immobilien GmbH & Co. KG - Gewerbemietvertrag Büroflächen 4. OG/"
    "2023-03-20 Mietvertrag unterzeichnet.pdf"
)
ESTATE_ENGLISH = "Clients/FLUE-2023-004 Supply and NDA/Executed/Supply Agreement_signed.pdf"
MAX_CER = 0.02


def _flat(text: str) -> str:
    return " ".join(text.split())


def _pdf_bytes(doc: pdfium.PdfDocument) -> bytes:
    buf = io.BytesIO()
    doc.save(buf)
    return buf.getvalue()


def _render(path: Path, page: int = 0, scale: float = 2.0):
    pdf = pdfium.PdfDocument(path)
    try:
        return pdf[page].render(scale=scale).to_pil().convert("RGB")
    finally:
        pdf.close()


# Orientation tests get budgets no loaded CI host exhausts: a page whose first reading used up the
# page budget is not re-read turned (read_page), which is what the budget tests check, not these.
ROOMY = {"page_timeout_seconds": 900, "doc_timeout_seconds": 3600}


# --------------------------------------------------------------------------- the needs_ocr corpus rows


def test_tika_scan_happy_new_year(real_corpus: Path) -> None:
    path = real_corpus / "pdf/tika_testOCR.pdf"
    doc = ocr_pdf(path.read_bytes(), path.name)
    assert "Happy New Year 2003!" in doc.text
    assert (doc.format, doc.converter, doc.pages) == ("pdf", "ki.ocr", 1)
    assert doc.converter_version.startswith(f"{ocr.CONVERTER_VERSION}+rapidocr-3.")
    [page] = doc.metadata["ocr_pages"]
    assert page["source"] == "ocr" and page["rotation"] == 0 and page["confidence"] > 0.9
    assert page["chars"] == len(doc.text)


def test_scan_rotated_90(real_corpus: Path) -> None:
    path = real_corpus / "pdf/docling_ocr_test_rotated_90.pdf"
    doc = ocr_pdf(path.read_bytes(), path.name, **ROOMY)
    assert _flat(doc.text) == DOCLING_SENTENCE
    [page] = doc.metadata["ocr_pages"]
    assert page["rotation"] == 90 and page["confidence"] > 0.9


def test_four_pages_four_orientations(real_corpus: Path) -> None:
    """Every page shows the same three lines, turned 0°, 180°, 90° and 270° (seen on the rendered pages)."""
    path = real_corpus / "pdf/docling_nemotron_multipage.pdf"
    doc = ocr_pdf(path.read_bytes(), path.name, **ROOMY)
    pages = doc.text.split(ocr.PAGE_SEPARATOR)
    assert doc.pages == 4 and len(pages) == 4
    for text in pages:
        assert _flat(text) == DOCLING_SENTENCE  # words and their reading order
        assert text.splitlines()[0].startswith("Docling bundles")
    records = doc.metadata["ocr_pages"]
    assert [r["rotation"] for r in records] == [0, 180, 270, 90]
    assert [r["page"] for r in records] == [1, 2, 3, 4]
    assert all(r["source"] == "ocr" and r["confidence"] > 0.9 for r in records)
    assert "orientations_tried" not in records[0]  # an upright page is read once


def test_page_limit_is_too_large_before_any_work(real_corpus: Path) -> None:
    path = real_corpus / "pdf/docling_nemotron_multipage.pdf"
    with pytest.raises(UnsupportedDocument) as info:
        ocr_pdf(path.read_bytes(), path.name, max_pages=2)
    assert info.value.reason == "too_large"
    assert info.value.details["pages_to_ocr"] == 4 and info.value.details["ocr_seconds"] == 0


# --------------------------------------------------------------------------- character error rate


def levenshtein(a: str, b: str) -> int:
    """Edit distance, bit-parallel (Myers 1999 / Hyyrö 2001) on Python integers: O(len(a)·len(b)/64)."""
    if not a or not b:
        return len(a) + len(b)
    full = (1 << len(a)) - 1
    last = 1 << (len(a) - 1)
    peq: dict[str, int] = {}
    for i, ch in enumerate(a):
        peq[ch] = peq.get(ch, 0) | (1 << i)
    pv, mv, score = full, 0, len(a)
    for ch in b:
        eq = peq.get(ch, 0)
        xv = eq | mv
        xh = (((eq & pv) + pv) ^ pv) | eq
        ph = mv | (~(xh | pv) & full)
        mh = pv & xh
        if ph & last:
            score += 1
        elif mh & last:
            score -= 1
        ph = ((ph << 1) | 1) & full
        mh = (mh << 1) & full
        pv = mh | (~(xv | ph) & full)
        mv = ph & xv
    return score


_TYPOGRAPHY = str.maketrans({"„": '"', "“": '"', "”": '"', "‚": "'", "‘": "'", "’": "'", "–": "-", "—": "-"})


def _cer_normal(text: str) -> str:
    """Whitespace squeezed, typographic quotes/dashes folded, signature rules (``____``) dropped."""
    text = re.sub(r"_{4,}", " ", text).translate(_TYPOGRAPHY)
    return " ".join(text.split())


def cer(reference: str, hypothesis: str) -> float:
    ref, hyp = _cer_normal(reference), _cer_normal(hypothesis)
    return levenshtein(ref, hyp) / max(len(ref), 1)


def _levenshtein_dp(a: str, b: str) -> int:
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        previous = current
    return previous[-1]


def test_cer_helper() -> None:
    import random

    rng = random.Random(5)
    for _ in range(500):
        a = "".join(rng.choice("abc ü") for _ in range(rng.randint(0, 25)))
        b = "".join(rng.choice("abcd") for _ in range(rng.randint(0, 25)))
        assert levenshtein(a, b) == _levenshtein_dp(a, b), (a, b)
    assert cer("a  b\nc", "a b c") == 0
    assert cer("„Mieter“ –", '"Mieter" -') == 0
    assert cer("abcd", "abed") == 0.25


@pytest.mark.parametrize("rel", [ESTATE_GERMAN, ESTATE_ENGLISH], ids=["german", "english"])
def test_cer_of_rescanned_estate_page(shared: Path, rel: str) -> None:
    """Page 1 rendered at 200 dpi, wrapped as an image-only PDF, OCRed; CER against its text layer."""
    path = shared / "corpus/estate-dev/estate" / rel
    if not path.is_file():
        pytest.skip(f"estate file missing: {rel}")
    pdf = pdfium.PdfDocument(path)
    try:
        reference = pdf[0].get_textpage().get_text_range()
        image = pdf[0].render(scale=200 / 72).to_pil().convert("L")
    finally:
        pdf.close()
    buf = io.BytesIO()
    image.save(buf, "PDF", resolution=200)
    scanned = buf.getvalue()
    with pytest.raises(UnsupportedDocument) as info:
        convert_pdf(scanned, "scan.pdf")
    assert info.value.reason == "needs_ocr"  # really image-only

    doc = ocr_pdf(scanned, "scan.pdf", **ROOMY)
    rate = cer(reference, doc.text)
    assert rate <= MAX_CER, f"CER {rate:.4f} > {MAX_CER}\n--- OCR\n{doc.text}\n--- text layer\n{reference}"
    # The first lines come first: reading order, not just the characters.
    assert doc.text.splitlines()[0] == reference.splitlines()[0].strip()


# --------------------------------------------------------------------------- mixed PDFs and images


def test_mixed_pdf_keeps_the_text_layer(real_corpus: Path, shared: Path) -> None:
    text_pdf = shared / "corpus/estate-dev/estate" / ESTATE_ENGLISH
    if not text_pdf.is_file():
        pytest.skip("estate file missing")
    mixed = pdfium.PdfDocument.new()
    for source in (text_pdf, real_corpus / "pdf/tika_testOCR.pdf"):
        src = pdfium.PdfDocument(source)
        mixed.import_pages(src, [0])
    mixed.new_page(595, 842)  # a blank separator page: nothing to OCR
    data = _pdf_bytes(mixed)

    layer = convert_pdf(data, "mixed.pdf")  # the text-layer converter's view: pages 2 and 3 have no text
    assert layer.metadata["pages_without_text"] == [1, 2]
    doc = ocr_pdf(data, "mixed.pdf", text_layer_pages=layer.text.split("\f"))
    first, second, third = doc.text.split(ocr.PAGE_SEPARATOR)
    assert first == layer.text.split("\f")[0]
    assert "Happy New Year 2003!" in second
    assert third == ""
    assert [r["source"] for r in doc.metadata["ocr_pages"]] == ["text_layer", "ocr", "blank"]
    assert doc.metadata["ocr_pages"][0]["confidence"] is None

    again = ocr_pdf(data, "mixed.pdf")  # without text_layer_pages the layer is read here
    assert again.text == doc.text


def test_tiff_frames_are_pages_each_with_its_orientation(shared: Path) -> None:
    path = shared / "corpus/estate-dev/estate" / ESTATE_ENGLISH
    if not path.is_file():
        pytest.skip("estate file missing")
    band = _render(path).crop((0, 0, 1190, 240))  # title and the first parties' lines
    frames = [band, band.rotate(180)]
    buf = io.BytesIO()
    frames[0].save(buf, "TIFF", save_all=True, append_images=frames[1:], compression="tiff_lzw")
    doc = ocr_image(buf.getvalue(), "scan.tif", **ROOMY)
    assert (doc.format, doc.pages, doc.metadata["image_format"]) == ("image", 2, "TIFF")
    pages = doc.text.split(ocr.PAGE_SEPARATOR)
    for text in pages:
        assert text.splitlines()[0] == "Framework Supply Agreement"
        assert "Flügge Immobilien GmbH & Co KG" in text
    assert [r["rotation"] for r in doc.metadata["ocr_pages"]] == [0, 180]


def test_an_image_without_text_is_a_document_found_by_its_name_never_empty_text() -> None:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (800, 600), "white").save(buf, "PNG")
    doc = ocr_image(buf.getvalue(), "blank.png")
    assert doc.text == "" and doc.parts == {"image_info": "File: blank.png"}
    assert doc.metadata["ocr_pages"][0]["chars"] == 0 and doc.pages == 1
    assert doc.metadata["no_text"] == "OCR found no text on 1 page(s)"
    assert [(p.kind, p.text) for p in doc.textual_parts()] == [("image_info", "File: blank.png")]


@pytest.mark.parametrize(
    ("data", "reason"),
    [(b"", "empty"), (b"\x89PNG\r\n\x1a\n" + b"\x00" * 40, "corrupt"), (b"%!PS-Adobe-3.0\n", "unsupported_format")],
    ids=["empty", "truncated-png", "postscript"],
)
def test_undecodable_images(data: bytes, reason: str) -> None:
    with pytest.raises(UnsupportedDocument) as info:
        ocr_image(data, "x.png")
    assert info.value.reason == reason


def test_runs_offline_without_downloads(tmp_path: Path, real_corpus: Path) -> None:
    """A fresh process: no socket opened from Python, no downloader called, nothing written to $HOME."""
    script = textwrap.dedent(
        """
        import socket, sys
        from ki.adapters.convert.ocr import ocr_pdf  # first: it must switch onnxruntime telemetry off before import
        def refuse(*args, **kwargs):
            raise AssertionError("network access attempted")
        socket.socket.connect = refuse
        socket.create_connection = refuse
        import rapidocr.utils.download_file as download_file
        download_file.DownloadFile.run = classmethod(refuse)
        data = open(sys.argv[1], "rb").read()
        print(ocr_pdf(data, "scan.pdf", page_timeout_seconds=900, doc_timeout_seconds=3600).text)
        """
    )
    home = tmp_path / "home"
    home.mkdir()
    env = {**os.environ, "HOME": str(home), "XDG_CACHE_HOME": str(home / ".cache")}
    env.pop("ORT_DISABLE_TELEMETRY", None)  # ki must set it itself
    out = subprocess.run(
        [sys.executable, "-c", script, str(real_corpus / "pdf/tika_testOCR.pdf")],
        capture_output=True,
        text=True,
        env=env,
        cwd=Path(__file__).resolve().parents[2],
        timeout=900,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert "Happy New Year 2003!" in out.stdout
    assert not [p for p in home.rglob("*")], "files written under $HOME (onnxruntime telemetry?)"


# --------------------------------------------------------------------------- reading order


def _box(text: str, x: float, y: float, w: float, h: float = 20, angle: float = 0.0) -> ocr_reading.Box:
    return ocr_reading.Box(text=text, score=0.99, cx=x + w / 2, cy=y + h / 2, width=w, height=h, angle=angle)


def test_lines_top_to_bottom_left_to_right() -> None:
    boxes = [
        _box("world", 300, 102, 100),
        _box("third line", 10, 160, 200),
        _box("hello", 10, 100, 100),
        _box("second", 10, 130, 120),
        _box("line", 200, 128, 60),
    ]
    assert ocr_reading.lines(boxes) == "hello world\nsecond line\nthird line"


def test_lines_undo_skew() -> None:
    """A page scanned 3° askew: the right end of a line sits lower than the next line's left end."""
    angle = math.radians(3)
    rows = [["alpha", "beta", "gamma"], ["delta", "epsilon", "zeta"], ["eta", "theta", "iota"]]
    boxes = []
    for r, words in enumerate(rows):
        for c, word in enumerate(words):
            x = 50 + 400 * c
            y = 100 + 28 * r + math.tan(angle) * (x + 150)  # the line's baseline drops to the right
            boxes.append(_box(word, x, y, 300, angle=angle))
    assert ocr_reading.lines(list(reversed(boxes))) == "alpha beta gamma\ndelta epsilon zeta\neta theta iota"


# --------------------------------------------------------------------------- budgets, lane, renewal (fake engine)


class FakeEngine:
    """Stands in for RapidOCR: every call returns one horizontal box after working ``delay`` seconds, or at once
    after :meth:`finish` (a page abandoned on its budget then ends and gives the lane back)."""

    def __init__(self, delay: float = 0.0, text: str = "fake text here", score: float = 0.95):
        self.delay, self.text, self.score = delay, text, score
        self.finished = threading.Event()
        self.calls = 0
        self.active = 0
        self.max_active = 0
        self.lock = threading.Lock()

    def __call__(self, image):
        with self.lock:
            self.calls += 1
            self.active += 1
            self.max_active = max(self.max_active, self.active)
        try:
            self.finished.wait(self.delay)  # the page's work: ``delay`` s, or less once the test finished it
            box = [[10.0, 10.0], [210.0, 10.0], [210.0, 30.0], [10.0, 30.0]]
            return SimpleNamespace(boxes=[box], txts=(self.text,), scores=(self.score,))
        finally:
            with self.lock:
                self.active -= 1

    def finish(self, seconds: float = 5.0) -> None:
        """End the pages still being read and wait (up to ``seconds``) until the OCR lane is free again."""
        self.finished.set()
        lane = ocr_engine._current_lane()
        assert lane.acquire(timeout=seconds), "an abandoned page kept the OCR lane"
        lane.release()


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch):
    def install(**kwargs) -> FakeEngine:
        engine = FakeEngine(**kwargs)
        monkeypatch.setattr(ocr_engine, "engine", lambda: engine)
        return engine

    return install


def _tiff(frames: int, size: tuple[int, int] = (120, 60)) -> bytes:
    from PIL import Image

    images = [Image.new("L", size, 255) for _ in range(frames)]
    buf = io.BytesIO()
    images[0].save(buf, "TIFF", save_all=True, append_images=images[1:])
    return buf.getvalue()


def test_renew_between_pages_and_claim_lost(fake) -> None:
    fake()
    calls: list[int] = []
    doc = ocr_image(_tiff(3), "three.tif", renew=lambda: calls.append(1) or True)
    assert doc.pages == 3 and len(calls) == 2
    with pytest.raises(ClaimLost):
        ocr_image(_tiff(3), "three.tif", renew=lambda: False)


def test_page_budget_is_too_large(fake) -> None:
    engine = fake(delay=0.5)
    started = time.monotonic()
    with pytest.raises(UnsupportedDocument) as info:
        ocr_image(_tiff(2), "slow.tif", page_timeout_seconds=0.1)
    assert time.monotonic() - started < 0.45  # the caller is not held by the abandoned page
    assert info.value.reason == "too_large"
    assert "page 1" in str(info.value) and "page budget of 0.1 s" in str(info.value)
    engine.finish()  # the abandoned page ends and releases the lane


def test_document_budget_is_too_large(fake) -> None:
    engine = fake(delay=0.15)
    with pytest.raises(UnsupportedDocument) as info:
        ocr_image(_tiff(5), "long.tif", page_timeout_seconds=5, doc_timeout_seconds=0.4)
    assert info.value.reason == "too_large"
    assert "document budget of 0.4 s" in str(info.value)
    assert 1 <= info.value.details["pages_done"] < 5
    engine.finish()


def test_low_confidence_is_dropped_and_orientations_are_tried(fake) -> None:
    engine = fake(score=0.3)
    faint = ocr_image(_tiff(1, size=(800, 600)), "faint.tif")
    assert faint.text == "" and faint.metadata["no_text"]  # nothing above the floor: no text, not a quarantine
    assert engine.calls == 4  # 0° looked wrong, so 180°, 90° and 270° were read too
    [record] = faint.metadata["ocr_pages"]
    assert record["orientations_tried"] == [0, 180, 90, 270] and record["dropped_boxes"] == 1
    doc = ocr_image(_tiff(1, size=(800, 600)), "faint.tif", confidence_floor=0.2)
    assert doc.text == "fake text here"


def test_small_images_are_read_upright_only(fake) -> None:
    engine = fake(score=0.3)
    assert ocr_image(_tiff(1), "icon.tif").text == ""  # 120x60: a logo or spacer, not a turned page
    assert engine.calls == 1


def test_lane_bounds_process_wide_concurrency(fake) -> None:
    engine = fake(delay=0.05)
    assert ocr.ocr_concurrency() == 1
    errors: list[BaseException] = []

    def convert() -> None:
        try:
            ocr_image(_tiff(2), "a.tif")
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=convert) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and engine.calls == 8 and engine.max_active == 1

    ocr.set_ocr_concurrency(2)
    try:
        engine.max_active = 0
        threads = [threading.Thread(target=convert) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors and engine.max_active == 2
    finally:
        ocr.set_ocr_concurrency(1)


# --------------------------------------------------------------------------- issue 14 item 7a: images below the floor


def test_images_below_the_floor_are_skipped_with_a_reason_and_never_read(fake) -> None:
    from PIL import Image

    from ki.adapters.convert.router import convert_bytes
    from ki.config.settings import KiConfig

    engine = fake()
    for size, reason in (((400, 1), "too_small"), ((12, 12), "too_small"), ((2400, 20), "degenerate_aspect")):
        buf = io.BytesIO()
        Image.new("L", size, 255).save(buf, "GIF")
        doc = convert_bytes(buf.getvalue(), "spacer.gif", KiConfig())
        assert doc.text == "" and doc.metadata["ocr_skipped"] == [reason]
        assert doc.metadata["ocr_pages"][0]["size"] == list(size)
    # A multi-frame TIFF: the tiny frame is skipped, the page-sized one read.
    frames = [Image.new("L", (300, 2), 255), Image.new("L", (800, 600), 255)]
    buf = io.BytesIO()
    frames[0].save(buf, "TIFF", save_all=True, append_images=frames[1:])
    doc = ocr_image(buf.getvalue(), "two.tif")
    assert [r["source"] for r in doc.metadata["ocr_pages"]] == ["skipped", "ocr"]
    assert doc.metadata["ocr_pages"][0]["reason"] == "too_small" and engine.calls >= 1
    calls = engine.calls
    ocr_image(_tiff(1, size=(5, 400)), "rule.tif")
    assert engine.calls == calls  # a skipped image never reaches the engine
