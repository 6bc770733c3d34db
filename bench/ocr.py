"""OCR throughput, memory and accuracy: ki's RapidOCR path vs Tesseract, same rendered estate pages.

What runs
---------
* Pages: page 1 of ~10 estate PDFs with a text layer (German and English: contracts,
  pleadings, a judgment, invoices, a fax). Each is rendered at 200 dpi grayscale into
  a PNG (``clean``); a ``scan`` variant turns it 0.7°, adds sensor noise and
  round-trips it through JPEG quality 70. The text layer is the reference.
* ki: ``ki.adapters.convert.ocr.ocr_image`` on the PNG bytes (the pipeline's image path:
  orientation check, confidence floor, line ordering), in a child process per
  thread count (``KI_OCR_THREADS``), so peak RSS is that process's alone.
* Tesseract 5 (``apt-get install tesseract-ocr tesseract-ocr-deu tesseract-ocr-eng``):
  ``tesseract img.png - -l deu+eng`` per page from a child process, with its OpenMP
  default and with ``OMP_THREAD_LIMIT=1``; peak RSS is the largest tesseract run.
* CER = Levenshtein(reference, OCR) / len(reference) over all pages, after two
  normalisations: ``ws`` (whitespace squeezed) and ``fold`` (also typographic
  quotes/dashes folded to ASCII and signature rules ``____`` dropped, as in
  tests/unit/test_ocr.py).

Timing: pages/s is wall clock over the page loop (model loading excluded and shown
separately); cpu s/page is user+sys, which stays meaningful on a busy host.

Run: ``.venv/bin/python bench/ocr.py [--pages 10] [--variants clean,scan] [--configs ki1,ki2,tess,tess1]``
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ESTATE = Path(os.environ.get("KI_SHARED_DIR") or REPO.parent / "shared") / "corpus/estate-dev/estate"
PAGES = [
    "Akten/2023/Thalbach Immobilien GmbH & Co. KG - Gewerbemietvertrag Büroflächen 4. OG/"
    "2023-03-20 Mietvertrag unterzeichnet.pdf",
    "Akten/2024/Fehrs, Almut - Kündigungsschutz/Gericht/2024-04-22 Kündigungsschutzklage (eingereicht).pdf",
    "Mandate/2024-0099 Sonnenhaus Immobilien GmbH & Co. KG gg. Weserfeld Umwelttechnik AG/04 Gericht/"
    "Urteil LG Nürnberg-Fürth 15.05.2025.pdf",
    "Mandate/2021-0056 Fuldagrund Logistik GmbH - Satzungsänderung/06 Rechnungen/Rechnung RE-2021-00147.pdf",
    "Scans/Scan_0050.pdf",
    "Clients/FLUE-2023-004 Supply and NDA/Executed/Supply Agreement_signed.pdf",
    "Clients/OAKM-2022-007 Acquisition Rehberg/Executed/SPA_executed.pdf",
    "Clients/WREN-2023-058 Supply and NDA/Executed/NDA_signed.pdf",
    "Clients/FLUE-2023-004 Supply and NDA/Billing/Invoice RE-2023-00142.pdf",
    "Eingang/Telefax 2022-05-18 3411.pdf",
]
DPI = 200
CONFIGS = {
    "ki1": ("ki", {"KI_OCR_THREADS": "1"}),
    "ki2": ("ki", {"KI_OCR_THREADS": "2"}),
    "tess": ("tesseract", {}),
    "tess1": ("tesseract", {"OMP_THREAD_LIMIT": "1"}),
}


# --------------------------------------------------------------------------- pages


def prepare(workdir: Path, n_pages: int, variants: list[str]) -> list[dict]:
    import numpy as np
    import pypdfium2 as pdfium
    from PIL import Image

    items = []
    rng = np.random.default_rng(7)
    for rel in PAGES[:n_pages]:
        path = ESTATE / rel
        if not path.is_file():
            print(f"skip (missing): {rel}", file=sys.stderr)
            continue
        pdf = pdfium.PdfDocument(path)
        try:
            reference = pdf[0].get_textpage().get_text_range()
            clean = pdf[0].render(scale=DPI / 72).to_pil().convert("L")
        finally:
            pdf.close()
        stem = f"p{len(items) // max(len(variants), 1):02d}"
        for variant in variants:
            image = clean
            if variant == "scan":
                turned = clean.rotate(0.7, resample=Image.Resampling.BICUBIC, expand=True, fillcolor=255)
                pixels = np.asarray(turned, dtype=np.float32) + rng.normal(0, 12, (turned.height, turned.width))
                noisy = Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8), "L")
                buf = io.BytesIO()
                noisy.save(buf, "JPEG", quality=70)
                image = Image.open(io.BytesIO(buf.getvalue())).convert("L")
            png = workdir / f"{stem}_{variant}.png"
            image.save(png, dpi=(DPI, DPI))
            items.append({"name": Path(rel).name, "variant": variant, "png": str(png), "reference": reference})
    return items


# --------------------------------------------------------------------------- workers (child processes)


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def worker_ki(items: list[dict]) -> dict:
    sys.path.insert(0, str(REPO))
    from PIL import Image

    from ki.adapters.convert import ocr
    from ki.core.errors import UnsupportedDocument

    started = time.monotonic()
    buf = io.BytesIO()
    Image.new("L", (64, 32), 255).save(buf, "PNG")
    try:
        ocr.ocr_image(buf.getvalue(), "warmup.png")  # loads the models
    except UnsupportedDocument:
        pass
    load_seconds = time.monotonic() - started
    rss_loaded = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    results = []
    for item in items:
        data = Path(item["png"]).read_bytes()
        wall, cpu = time.monotonic(), _cpu()
        try:
            doc = ocr.ocr_image(data, Path(item["png"]).name)
            text, rotation = doc.text, doc.metadata["ocr_pages"][0]["rotation"]
        except UnsupportedDocument as exc:
            text, rotation = "", f"error: {exc.reason}"
        results.append({"text": text, "seconds": time.monotonic() - wall, "cpu": _cpu() - cpu, "rotation": rotation})
    return {
        "results": results,
        "load_seconds": load_seconds,
        "rss_loaded_mb": rss_loaded / 1024,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "engine": ocr.engine_info(),
    }


def worker_tesseract(items: list[dict]) -> dict:
    results = []
    for item in items:
        wall, cpu = time.monotonic(), _children_cpu()
        out = subprocess.run(
            ["tesseract", item["png"], "-", "-l", "deu+eng"], capture_output=True, text=True, check=False
        )
        results.append(
            {
                "text": out.stdout if out.returncode == 0 else "",
                "seconds": time.monotonic() - wall,
                "cpu": _children_cpu() - cpu,
                "error": out.stderr.strip()[-200:] if out.returncode else None,
            }
        )
    version = subprocess.run(["tesseract", "--version"], capture_output=True, text=True, check=False).stdout
    return {
        "results": results,
        "load_seconds": 0.0,
        "rss_loaded_mb": None,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
        "engine": {"name": "tesseract", "version": version.split("\n", 1)[0]},
    }


# --------------------------------------------------------------------------- CER


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


def normalise(text: str, mode: str) -> str:
    if mode == "fold":
        text = re.sub(r"_{4,}", " ", text).translate(_TYPOGRAPHY)
    return " ".join(text.split())


def cer_totals(items: list[dict], results: list[dict], mode: str) -> tuple[float, list[float]]:
    edits = chars = 0
    per_page = []
    for item, result in zip(items, results, strict=True):
        ref, hyp = normalise(item["reference"], mode), normalise(result["text"], mode)
        distance = levenshtein(ref, hyp)
        edits += distance
        chars += len(ref)
        per_page.append(distance / max(len(ref), 1))
    return edits / max(chars, 1), per_page


# --------------------------------------------------------------------------- main


def run_config(name: str, items_file: Path) -> dict:
    kind, extra_env = CONFIGS[name]
    env = {**os.environ, **extra_env}
    out = subprocess.run(
        [sys.executable, __file__, "--worker", kind, "--items", str(items_file)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if out.returncode:
        raise SystemExit(f"{name} worker failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--pages", type=int, default=10)
    parser.add_argument("--variants", default="clean,scan")
    parser.add_argument("--configs", default="ki1,ki2,tess,tess1")
    parser.add_argument("--worker", choices=["ki", "tesseract"], help=argparse.SUPPRESS)
    parser.add_argument("--items", help=argparse.SUPPRESS)
    parser.add_argument("--show", action="store_true", help="print each page's OCR text of the first config")
    args = parser.parse_args()

    if args.worker:
        items = json.loads(Path(args.items).read_text(encoding="utf-8"))
        result = worker_ki(items) if args.worker == "ki" else worker_tesseract(items)
        print(json.dumps(result))
        return

    configs = [c.strip() for c in args.configs.split(",") if c.strip()]
    if any(CONFIGS[c][0] == "tesseract" for c in configs) and not shutil.which("tesseract"):
        raise SystemExit(
            "tesseract not installed: apt-get install -y tesseract-ocr tesseract-ocr-deu tesseract-ocr-eng"
        )
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    with tempfile.TemporaryDirectory(prefix="ki-bench-ocr-") as tmp:
        workdir = Path(tmp)
        items = prepare(workdir, args.pages, variants)
        items_file = workdir / "items.json"
        items_file.write_text(json.dumps(items), encoding="utf-8")
        n_docs = len(items) // len(variants)
        print(f"{n_docs} estate pages x {variants} at {DPI} dpi; cores: {os.cpu_count()}; "
              f"load average at start: {os.getloadavg()[0]:.1f}")  # fmt: skip
        summary = {}
        for name in configs:
            started = time.monotonic()
            report = run_config(name, items_file)
            summary[name] = report
            print(f"  {name}: {time.monotonic() - started:.0f} s ({report['engine']})", flush=True)

    print()
    header = f"{'config':7} {'variant':7} {'pages/s':>8} {'s/page':>7} {'cpu s/page':>10} {'peak RSS MB':>11}"
    header += f" {'load s':>6} {'CER ws':>7} {'CER fold':>8} {'worst page (fold)':>18}"
    print(header)
    for name, report in summary.items():
        for variant in variants:
            idx = [i for i, item in enumerate(items) if item["variant"] == variant]
            sub_items = [items[i] for i in idx]
            sub = [report["results"][i] for i in idx]
            wall = sum(r["seconds"] for r in sub)
            cpu = sum(r["cpu"] for r in sub)
            cer_ws, _ = cer_totals(sub_items, sub, "ws")
            cer_fold, per_page = cer_totals(sub_items, sub, "fold")
            worst = max(range(len(per_page)), key=per_page.__getitem__)
            print(
                f"{name:7} {variant:7} {len(sub) / wall:8.3f} {wall / len(sub):7.2f} {cpu / len(sub):10.2f} "
                f"{report['peak_rss_mb']:11.0f} {report['load_seconds']:6.1f} {cer_ws:7.2%} {cer_fold:8.2%} "
                f"{per_page[worst]:8.2%} {sub_items[worst]['name'][:24]}"
            )
    first = summary[configs[0]]
    if CONFIGS[configs[0]][0] == "ki":
        rotations = {r["rotation"] for r in first["results"]}
        print(f"\n{configs[0]} rotations chosen: {sorted(map(str, rotations))}; RSS after model load: "
              f"{first['rss_loaded_mb']:.0f} MB")  # fmt: skip
    if args.show:
        for item, result in zip(items, first["results"], strict=True):
            print(f"\n===== {item['name']} [{item['variant']}]\n{result['text']}")


if __name__ == "__main__":
    main()
