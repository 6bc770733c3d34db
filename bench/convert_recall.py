"""Body-text word recall of ki's converters against reference converters, and PDF word error rates per script.

What runs
---------
* Recall (issue 20 "Tests and measures"): for every public file of ``$KI_SHARED_DIR/corpus/real``
  and ``tests/fixtures/ooxml`` whose format has a reference, the words of the reference's text that
  ki's text also holds (bag of words, case-folded, NFKC, Unicode letters and digits): ``body`` is
  ki's accepted body text, ``all`` adds every textual part (``StructuredDocument.textual_parts``:
  headers, notes, comments, charts, SmartArt, annotations …). References: docling's own backends
  in-process (``docling-slim``, bench extra, no models: DOCX ``MsWordDocumentBackend``, HTML
  ``HTMLDocumentBackend``, e-mail ``EmailDocumentBackend``, PPTX/XLSX), docling's text exported
  with every content layer; PDF: pdfminer.six ``extract_text`` (docling's PDF pipeline needs
  models). PPTX/XLSX body text is Docling's in ki too, so their rows measure the parts ki adds.
* PDF WER: on ``tests/fixtures/pdf_text`` (``truth.json`` gives each file's exact text), the word
  error rate (word-level Levenshtein distance / truth words) of ki and of pdfminer.six, per script.

Run: ``.venv/bin/python bench/convert_recall.py`` (after ``pip install -e '.[bench]'``).
"""

from __future__ import annotations

import argparse
import io
import json
import logging
import os
import re
import statistics
import sys
import unicodedata
import warnings
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("KI_SHARED_DIR") or REPO.parent / "shared")
WORD = re.compile(r"[^\W_]+")
DOCLING_FORMATS = {".docx": "DOCX", ".html": "HTML", ".htm": "HTML", ".eml": "EMAIL", ".msg": "EMAIL",
                   ".pptx": "PPTX", ".xlsx": "XLSX"}


def words(text: str) -> list[str]:
    return WORD.findall(unicodedata.normalize("NFKC", text).casefold())


def recall(reference: str, ours: str) -> tuple[int, int]:
    """(reference words found in ours, reference words), as bags."""
    ref, got = Counter(words(reference)), Counter(words(ours))
    return sum(min(n, got[w]) for w, n in ref.items()), sum(ref.values())


def wer(truth: str, hypothesis: str) -> float:
    ref, hyp = words(truth), words(hypothesis)
    prev = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        cur = [i] + [0] * len(hyp)
        for j, h in enumerate(hyp, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (r != h))
        prev = cur
    return prev[-1] / max(1, len(ref))


def docling_text(data: bytes, name: str, fmt: str) -> str | None:
    from docling.datamodel.base_models import InputFormat
    from docling.datamodel.document import InputDocument
    from docling_core.types.doc import ContentLayer

    backends = {
        "DOCX": ("docling.backend.msword_backend", "MsWordDocumentBackend"),
        "HTML": ("docling.backend.html_backend", "HTMLDocumentBackend"),
        "EMAIL": ("docling.backend.email_backend", "EmailDocumentBackend"),
        "PPTX": ("docling.backend.mspowerpoint_backend", "MsPowerpointDocumentBackend"),
        "XLSX": ("docling.backend.msexcel_backend", "MsExcelDocumentBackend"),
    }
    module, cls = backends[fmt]
    backend = getattr(__import__(module, fromlist=[cls]), cls)
    try:
        doc_in = InputDocument(path_or_stream=io.BytesIO(data), filename=name, format=InputFormat[fmt], backend=backend)
        if not doc_in.valid:
            return None
        doc = doc_in._backend.convert()
        return doc.export_to_text(included_content_layers=set(ContentLayer), traverse_pictures=True)
    except Exception as exc:  # noqa: BLE001 - a reference that cannot read the file leaves it out
        print(f"  docling could not read {name}: {type(exc).__name__}: {str(exc)[:80]}", file=sys.stderr)
        return None


def pdfminer_text(data: bytes) -> str | None:
    from pdfminer.high_level import extract_text

    try:
        return extract_text(io.BytesIO(data))
    except Exception:  # noqa: BLE001 - encrypted or broken: no reference
        return None


def ki_texts(data: bytes, name: str) -> tuple[str, str] | None:
    from ki.adapters.convert.router import convert_bytes
    from ki.config.settings import KiConfig
    from ki.core.errors import UnsupportedDocument

    config = KiConfig.model_validate({"pipeline": {"convert": {"isolate": False}, "ocr": {"enabled": False}}})
    try:
        doc = convert_bytes(data, name, config)
    except UnsupportedDocument:
        return None
    if name.lower().endswith((".pptx", ".xlsx")):
        return None
    return doc.text, "\n".join(p.text for p in doc.textual_parts())


def ooxml_parts_only(data: bytes, name: str) -> str:
    """The charts, SmartArt and embedded names ki reads from an OOXML package (its text aside)."""
    from ki.adapters.convert.ooxml_package import OoxmlPackage
    from ki.adapters.convert.ooxml_parts import package_parts

    return "\n".join(package_parts(OoxmlPackage(data, name))[0].values())


def recall_table(files: list[Path]) -> None:
    rows: dict[str, list[tuple[str, int, int, int]]] = {}
    for path in files:
        ext = path.suffix.lower()
        data = path.read_bytes()
        if ext == ".pdf":
            reference, fmt = pdfminer_text(data), "pdf (pdfminer.six)"
        elif ext in DOCLING_FORMATS:
            reference, fmt = docling_text(data, path.name, DOCLING_FORMATS[ext]), f"{ext[1:]} (docling)"
        else:
            continue
        if not reference or not words(reference):
            continue
        if ext in (".pptx", ".xlsx"):
            parts = ooxml_parts_only(data, path.name)  # the body is Docling's own: what ki adds is measured
            found, total = recall(reference, reference + "\n" + parts)
            rows.setdefault(fmt, []).append((path.name, found, found, total))
            continue
        ours = ki_texts(data, path.name)
        if ours is None:
            continue
        body, everything = ours
        found_body, total = recall(reference, body)
        found_all, _ = recall(reference, everything)
        rows.setdefault(fmt, []).append((path.name, found_body, found_all, total))
    print(f"{'format':22} {'files':>5} {'ref words':>9} {'recall body':>11} {'recall all':>10} {'median body':>11}")
    for fmt, items in sorted(rows.items()):
        words_total = sum(t for *_, t in items)
        body = sum(b for _, b, _, _ in items) / words_total
        everything = sum(a for _, _, a, _ in items) / words_total
        median = statistics.median(b / t for _, b, _, t in items)
        print(f"{fmt:22} {len(items):5d} {words_total:9d} {body:11.3f} {everything:10.3f} {median:11.3f}")
    print("lowest body recall per format:")
    for fmt, items in sorted(rows.items()):
        worst = min(items, key=lambda i: i[1] / i[3])
        print(f"  {fmt:22} {worst[0]}: {worst[1] / worst[3]:.3f} ({worst[3]} words)")


def wer_table(folder: Path) -> None:
    from ki.adapters.convert.pdf import convert_pdf

    truth = json.loads((folder / "truth.json").read_text(encoding="utf-8"))
    per_script: dict[str, list[tuple[float, float]]] = {}
    for name, case in sorted(truth.items()):
        data = (folder / name).read_bytes()
        ki = wer(case["text"], convert_pdf(data, name).text)
        ref = wer(case["text"], pdfminer_text(data) or "")
        per_script.setdefault(case["script"], []).append((ki, ref))
        print(f"  {name:34} ki WER {ki:.3f}   pdfminer.six WER {ref:.3f}")
    print(f"{'script':10} {'files':>5} {'ki WER':>7} {'pdfminer WER':>12}")
    for script, values in sorted(per_script.items()):
        print(f"{script:10} {len(values):5d} {statistics.mean(v[0] for v in values):7.3f} "
              f"{statistics.mean(v[1] for v in values):12.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--real", type=Path, default=SHARED / "corpus" / "real")
    parser.add_argument("--fixtures", type=Path, default=REPO / "tests" / "fixtures")
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    warnings.filterwarnings("ignore")
    files = sorted(p for p in args.real.rglob("*") if p.is_file()) + sorted((args.fixtures / "ooxml").glob("*.*x"))
    print(f"== body-text word recall against reference converters ({len(files)} files considered)")
    recall_table(files)
    print("\n== PDF text layer: word error rate per script against the generated truth")
    wer_table(args.fixtures / "pdf_text")


if __name__ == "__main__":
    main()
