"""Per-format conversion speed, peak memory and word recall of ki's XLSX, PPTX and OpenDocument readers,
and the time of one 50 MB workbook under the default per-file budget.

What runs
---------
* Files: the public test files of ``tests/fixtures/formats`` (Apache Tika, python-pptx) and
  ``tests/fixtures/ooxml``, grouped by format (``xlsx``, ``pptx``, ``odt``, ``ods``, ``odp``); encrypted files
  (quarantined ``password_required``) are left out of the rates.
* Speed and memory: each format runs in a fresh interpreter (``--one FMT``): one warm-up pass, then
  ``--repeat`` passes of ``ki.adapters.convert.router.convert_bytes`` in process (``pipeline.convert.isolate=false``,
  so the reader itself is timed, not the worker hand-off); files/s from the median pass on process CPU time
  and on the wall clock; peak RSS is the interpreter's ``VmHWM`` after the passes (imports included).
* Recall: the words (case-folded, NFKC, letters and digits: ``bench/convert_recall.py``) of a reference
  reader's plain text that ki's text holds — ki's ``text`` plus every textual part (sheets, slides, notes,
  comments, footers …). References are the formats' own libraries: openpyxl (every cell's saved value, read-only,
  ``data_only``), python-pptx (every shape's text frame and table cell, groups included, and the notes pages' text but
  their slide picture, number and date),
  odfpy (the text of every ``text:p``/``text:h`` of the document and its styles, each paragraph once without
  the paragraphs nested in it, an annotation's author and date left out). A file
  the reference cannot read is left out of the recall and named.
* Big workbook (``--big``): a ~50 MB XLSX written once with XlsxWriter (``--big-path``, kept between runs;
  ``--big-rows`` rows of 12 columns: numbers, dates and words), converted by ``convert_bytes`` with the
  default configuration — an isolated worker under ``pipeline.convert.memory_mb`` / ``timeout_seconds`` —
  timed on the wall clock; the worker's peak is reported by a second, in-process run in a fresh interpreter.

Run: ``.venv/bin/python bench/convert_formats.py [--repeat 3] [--big]`` (``pip install -e '.[bench]'``: odfpy).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
FOLDERS = (REPO / "tests/fixtures/formats", REPO / "tests/fixtures/ooxml")
FORMATS = {".xlsx": "xlsx", ".xlsm": "xlsx", ".pptx": "pptx", ".odt": "odt", ".ods": "ods", ".odp": "odp"}


def files_of(fmt: str) -> list[Path]:
    from ki.adapters.convert.encryption import check_password
    from ki.core.errors import UnsupportedDocument

    out = []
    for folder in FOLDERS:
        for path in sorted(folder.iterdir()):
            if FORMATS.get(path.suffix.lower()) != fmt:
                continue
            try:
                check_password(path.read_bytes(), path.name)
            except UnsupportedDocument:
                continue
            out.append(path)
    return out


def reference_text(path: Path) -> str:
    """The format's own library's plain text of ``path``."""
    data, ext = path.read_bytes(), path.suffix.lower()
    if ext in (".xlsx", ".xlsm"):
        import openpyxl

        wb = openpyxl.load_workbook(io.BytesIO(data), read_only=True, data_only=True)
        lines = [" ".join(str(v) for v in row if v is not None) for ws in wb.worksheets
                 for row in ws.iter_rows(values_only=True)]
        wb.close()
        return "\n".join(lines)
    if ext == ".pptx":
        from pptx import Presentation
        from pptx.enum.shapes import PP_PLACEHOLDER

        def shape_text(shape) -> list[str]:
            out = []
            if hasattr(shape, "shapes"):
                for member in shape.shapes:
                    out += shape_text(member)
            if getattr(shape, "has_text_frame", False):
                out.append(shape.text_frame.text)
            if getattr(shape, "has_table", False):
                out += [cell.text for row in shape.table.rows for cell in row.cells]
            return out

        deck = Presentation(io.BytesIO(data))
        lines = []
        for slide in deck.slides:
            for shape in slide.shapes:
                lines += shape_text(shape)
            if slide.has_notes_slide:  # the notes page: notes, header, footer, text boxes (not number/date)
                for shape in slide.notes_slide.shapes:
                    if not (shape.is_placeholder and shape.placeholder_format.type in (
                            PP_PLACEHOLDER.SLIDE_IMAGE, PP_PLACEHOLDER.SLIDE_NUMBER, PP_PLACEHOLDER.DATE)):
                        lines += shape_text(shape)
        return "\n".join(lines)
    from odf import text
    from odf.namespaces import DCNS, TEXTNS
    from odf.opendocument import load

    def own_text(node) -> str:
        """A paragraph's text without the paragraphs nested in it (each is read on its own) and without the
        author/date of an annotation (dc:*): every character once."""
        out = []
        for child in node.childNodes:
            if child.nodeType == child.TEXT_NODE:
                out.append(child.data)
            elif child.qname[0] == DCNS or child.qname in ((TEXTNS, "p"), (TEXTNS, "h")):
                continue
            elif child.qname in ((TEXTNS, "s"), (TEXTNS, "tab"), (TEXTNS, "line-break")):
                out.append(" ")
            else:
                out.append(own_text(child))
        return "".join(out)

    doc = load(io.BytesIO(data))
    return "\n".join(own_text(p) for kind in (text.P, text.H)
                     for root in (doc.body, doc.styles) for p in root.getElementsByType(kind))


def ki_all_text(doc) -> str:
    return "\n".join([doc.text, *(p.text for p in doc.textual_parts())])


def run_one(fmt: str, repeat: int) -> dict:
    """Speed, peak and recall of one format (in this interpreter)."""
    from bench.convert_recall import recall
    from ki.adapters.convert.router import convert_bytes
    from ki.config.settings import KiConfig

    config = KiConfig()
    config.pipeline.convert.isolate = False
    corpus = [(p.name, p.read_bytes()) for p in files_of(fmt)]
    docs = {name: convert_bytes(data, name, config) for name, data in corpus}  # warm-up
    cpu, wall = [], []
    for _ in range(repeat):
        c0, w0 = time.process_time(), time.perf_counter()
        for name, data in corpus:
            convert_bytes(data, name, config)
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - w0)
    found = total = 0
    worst = (1.0, "")
    refused: list[str] = []
    for path in files_of(fmt):
        try:
            reference = reference_text(path)
        except Exception:  # noqa: BLE001 - a reference that cannot read a file scores nothing (listed)
            refused.append(path.name)
            continue
        f, t = recall(reference, ki_all_text(docs[path.name]))
        found, total = found + f, total + t
        if t and f / t < worst[0]:
            worst = (f / t, path.name)
    return {"format": fmt, "files": len(corpus), "bytes": sum(len(d) for _, d in corpus),
            "files_per_s_cpu": round(len(corpus) / statistics.median(cpu), 1),
            "files_per_s_wall": round(len(corpus) / statistics.median(wall), 1),
            "peak_rss_mb": _peak_mb(), "recall": round(found / total, 4) if total else None,
            "ref_words": total, "worst": [round(worst[0], 3), worst[1]], "reference_refused": refused}


def _peak_mb() -> float:
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def make_big(path: Path, rows: int) -> None:
    import datetime as dt
    import random

    import xlsxwriter

    rng = random.Random(32)
    words = ["Mandant", "Kosten", "Honorar", "Gericht", "Frist", "Vertrag", "Anlage", "Zahlung", "Rechnung", "Akte"]
    wb = xlsxwriter.Workbook(str(path), {"constant_memory": True})
    ws = wb.add_worksheet("Ledger")
    dates = wb.add_format({"num_format": "yyyy-mm-dd"})
    ws.write_row(0, 0, ["id", "date", "matter", "amount", "hours", "rate", "vat", "total", "note", "a", "b", "c"])
    start = dt.date(2015, 1, 1)
    for r in range(1, rows + 1):
        ws.write_number(r, 0, r)
        ws.write_datetime(r, 1, dt.datetime.combine(start + dt.timedelta(days=r % 3650), dt.time()), dates)
        ws.write_string(r, 2, f"{rng.choice(words)} {rng.randrange(10**6)}")
        for c in range(3, 8):
            ws.write_number(r, c, round(rng.random() * 10**5, 2))
        ws.write_string(r, 8, " ".join(rng.choice(words) for _ in range(4)))
        for c in range(9, 12):
            ws.write_number(r, c, rng.randrange(10**9))
    wb.close()


def run_big(path: Path) -> dict:
    from ki.adapters.convert.router import convert_bytes
    from ki.config.settings import KiConfig

    data = path.read_bytes()
    config = KiConfig()
    started = time.perf_counter()
    doc = convert_bytes(data, path.name, config)
    return {"file_mb": round(len(data) / 2**20, 1), "isolated_seconds": round(time.perf_counter() - started, 1),
            "budget": {"memory_mb": config.pipeline.convert.memory_mb,
                       "timeout_seconds": config.pipeline.convert.timeout_seconds},
            "cells": doc.metadata.get("cells"), "truncated": doc.metadata.get("truncated"),
            "text_mb": round(len(doc.text) / 2**20, 1)}


def run_big_peak(path: Path) -> dict:
    from ki.adapters.convert.xlsx import convert_xlsx

    started, cpu = time.perf_counter(), time.process_time()
    doc = convert_xlsx(path.read_bytes(), path.name)
    return {"in_process_seconds": round(time.perf_counter() - started, 1),
            "in_process_cpu_seconds": round(time.process_time() - cpu, 1), "peak_rss_mb": _peak_mb(),
            "cells": doc.metadata.get("cells")}


def _child(*args: str) -> dict:
    out = subprocess.run([sys.executable, __file__, *args], check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--big", action="store_true", help="also time a ~50 MB XLSX under the default budget")
    parser.add_argument("--big-path", type=Path, default=Path("/tmp/ki-bench-big.xlsx"))
    parser.add_argument("--big-rows", type=int, default=620_000)
    parser.add_argument("--big-peak", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(run_one(args.one, args.repeat)))
        return
    if args.big_peak:
        print(json.dumps(run_big_peak(args.big_path)))
        return
    print(f"load average {os.getloadavg()}")
    print(f"{'format':7} {'files':>5} {'KB':>6} {'files/s cpu':>11} {'files/s wall':>12} {'peak MB':>8} "
          f"{'recall':>7} {'ref words':>9}  worst file")
    for fmt in ("xlsx", "pptx", "odt", "ods", "odp"):
        r = _child("--one", fmt, "--repeat", str(args.repeat))
        refused = ", ".join(r["reference_refused"])
        refused = f"; the reference could not read {refused}" if refused else ""
        print(f"{fmt:7} {r['files']:>5} {r['bytes'] // 1024:>6} {r['files_per_s_cpu']:>11} "
              f"{r['files_per_s_wall']:>12} {r['peak_rss_mb']:>8} {r['recall']:>7} {r['ref_words']:>9}  "
              f"{r['worst'][1]} ({r['worst'][0]}){refused}")
    if args.big:
        if not args.big_path.exists():
            started = time.perf_counter()
            make_big(args.big_path, args.big_rows)
            print(f"wrote {args.big_path} in {time.perf_counter() - started:.0f} s")
        print("big workbook, isolated worker, default budget:", json.dumps(run_big(args.big_path)))
        print("big workbook, in process:", json.dumps(_child("--big-peak", "--big-path", str(args.big_path))))
    print(f"load average {os.getloadavg()}")


if __name__ == "__main__":
    main()
