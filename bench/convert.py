"""DOCX conversion speed and tracked-change fidelity: ki's built-in converter vs docling's Word backend.

What runs
---------
* ki: ``ki.adapters.convert.docx.convert_docx(data, filename)`` -> ``StructuredDocument`` (raw OOXML
  with ``zipfile`` + lxml; accepted text, original text, revisions, comments).
* docling: its own Word backend in-process, the way ``DocumentConverter``'s simple pipeline
  drives it (conversion.md section 5; ``docling-slim[format-docx,format-latex]``, no torch,
  no models): ``InputDocument(path_or_stream=BytesIO(data), filename=..., format=InputFormat.DOCX,
  backend=MsWordDocumentBackend)`` then ``._backend.convert()`` -> ``DoclingDocument``.
  ``DocumentConverter`` itself cannot be imported from docling-slim (its ASR pipeline imports
  torch), hence the private ``_backend`` attribute. By default no export is timed (docling's
  pipeline does not export either); ``--docling-export`` adds ``export_to_text()``.

Corpus: the ``*.docx``/``*.docm`` files of ``--real-dir`` and ``--estate-dir`` (recursive), read
into memory first (no disk I/O is timed). A file either converter cannot open (encrypted,
truncated, macro-enabled for docling) is skipped for both and listed with the reason.

Timing: one warm-up pass per converter (imports, lxml/python-docx caches), then ``--repeat``
rounds; each round times one full pass of each converter over the whole corpus, the order
alternating between rounds. files/s and paragraphs/s (``w:p`` elements of the main document
part, counted once per file, the same denominator for both) come from the median pass, on the
wall clock and on process CPU time (both converters are single-threaded; CPU time stays
meaningful on a loaded machine). ``--clock`` picks the clock of the ``ki/docling`` ratio line
(default cpu).

Fidelity: on the tracked-change files (Tika ``testWORD_2006ml.docx`` and ``testWORD_features.docx``,
case R05's ``input.docx``) the table shows, per converter, how often the moved text appears in
the converter's text (accepted view for ki; docling's markdown of all content layers) — it
should be exactly once — and how many of the deleted strings the converter exposes at all
(ki: ``original_text`` or a revision of a deletion kind; docling: anywhere in its markdown of
all layers, its plain text or its JSON dump). Deleted text must not leak into ki's accepted text.

Run: ``.venv/bin/python bench/convert.py [--repeat 5]``
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
import time
import warnings
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from lxml import etree

#: The project's shared material, found as the tests find it ($KI_SHARED_DIR, else ../shared beside the repo).
SHARED = Path(os.environ.get("KI_SHARED_DIR") or Path(__file__).resolve().parents[2] / "shared")
DEFAULT_REAL = SHARED / "corpus/real/docx"
DEFAULT_ESTATE = SHARED / "corpus/estate-dev/estate"
DEFAULT_R05 = SHARED / "cases/R05-docx-tracked-changes/input.docx"
W_P = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}p"
DELETION_KINDS = {"del", "para_del", "row_del", "cell_del"}

# (label, path relative to --real-dir or absolute, moved strings, deleted strings)
FIDELITY_CASES: list[tuple[str, str | Path, list[str], list[str]]] = [
    (
        "tika_testWORD_2006ml.docx",
        "tika_testWORD_2006ml.docx",
        ["Second paragraph here"],
        ["frog", "Deleted paragraph1", "Deleted paragraph2", "Del r1c1", "Del r2c2"],
    ),
    ("tika_testWORD_features.docx", "tika_testWORD_features.docx", ["ad litora"], ["bibendum", "Donec"]),
    ("R05 input.docx", DEFAULT_R05, [], ["EUR 1,200", "Schedule B"]),
]


@dataclass
class Doc:
    path: Path
    name: str
    data: bytes
    paragraphs: int


def quiet_logging() -> None:
    """docling logs a warning per DrawingML/unsupported element; keep the output to numbers."""
    for name in ("docling", "docling_core", "docx"):
        logging.getLogger(name).setLevel(logging.ERROR)
    warnings.filterwarnings("ignore")


def load_docling() -> tuple[Callable, Callable, Callable]:
    """The docling Word backend pieces; exits with an install hint when docling-slim is missing."""
    try:
        from docling.backend.msword_backend import MsWordDocumentBackend
        from docling.datamodel.base_models import InputFormat
        from docling.datamodel.document import InputDocument
        from docling_core.types.doc import ContentLayer
    except ImportError as exc:
        sys.exit(f"docling-slim is not installed ({exc}); run: .venv/bin/pip install -e '.[bench]'")

    def open_doc(doc: Doc):
        ind = InputDocument(
            path_or_stream=io.BytesIO(doc.data),
            filename=doc.name,
            format=InputFormat.DOCX,
            backend=MsWordDocumentBackend,
        )
        if not ind.valid:
            rej = ind._rejection
            cause = getattr(rej.original_error, "__cause__", None) if rej is not None else None
            if cause is not None:  # the python-docx error behind "could not load document with hash ..."
                raise DoclingRejected(f"{type(cause).__name__}: {cause}")
            raise DoclingRejected(rej.message if rej is not None else "invalid input")
        return ind

    def convert(doc: Doc):
        ind = open_doc(doc)
        try:
            return ind._backend.convert()
        finally:
            ind._backend.unload()

    def full_export(dl_doc) -> str:
        md = dl_doc.export_to_markdown(included_content_layers=set(ContentLayer))
        txt = dl_doc.export_to_text(included_content_layers=set(ContentLayer))
        return "\n".join([md, txt, json.dumps(dl_doc.export_to_dict(), ensure_ascii=False)])

    return convert, full_export, ContentLayer


def count_paragraphs(data: bytes) -> int:
    """``w:p`` elements in word/document.xml (0 when unreadable)."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            xml = zf.read("word/document.xml")
        return sum(1 for _ in etree.fromstring(xml).iter(W_P))
    except Exception:  # noqa: BLE001 - a skipped file; the converters report the reason
        return 0


def collect(dirs: list[Path]) -> list[Doc]:
    out = []
    for d in dirs:
        if not d.is_dir():
            print(f"warning: {d} is not a directory, skipped")
            continue
        for p in sorted(d.rglob("*")):
            if p.is_file() and p.suffix.lower() in (".docx", ".docm"):
                data = p.read_bytes()
                out.append(Doc(p, p.name, data, count_paragraphs(data)))
    return out


def short(path: Path) -> str:
    parts = path.parts
    return "/".join(parts[-3:]) if len(parts) > 3 else str(path)


class DoclingRejected(Exception):
    """docling flagged the input invalid (``InputDocument.valid`` is False)."""


def time_pass(fn: Callable, docs: list[Doc]) -> tuple[float, float]:
    """(wall seconds, process CPU seconds) of one pass of ``fn`` over ``docs``."""
    c0, t0 = time.process_time(), time.perf_counter()
    for doc in docs:
        fn(doc)
    return time.perf_counter() - t0, time.process_time() - c0


def fidelity(real_dir: Path, ki_convert: Callable, dl_convert: Callable, dl_export: Callable, ContentLayer) -> None:
    rows = []
    for label, rel, moved, deleted in FIDELITY_CASES:
        path = rel if isinstance(rel, Path) else real_dir / rel
        if not path.is_file():
            print(f"fidelity: {path} missing, skipped")
            continue
        data = path.read_bytes()
        doc = Doc(path, path.name, data, 0)
        ki = ki_convert(doc)
        dl = dl_convert(doc)
        dl_md = dl.export_to_markdown(included_content_layers=set(ContentLayer))
        dl_all = dl_export(dl)
        ki_del = [r.text for r in ki.revisions if r.kind in DELETION_KINDS]
        for s in moved:
            rows.append((label, f"moved '{s}'", f"{ki.text.count(s)}x", f"{dl_md.count(s)}x", "1x"))
        if deleted:
            in_orig = [s for s in deleted if s in (ki.original_text or "")]
            in_rev = [s for s in deleted if any(s in t for t in ki_del)]
            ki_exposed = [s for s in deleted if s in in_orig or s in in_rev]
            ki_leak = [s for s in deleted if s in ki.text]
            dl_exposed = [s for s in deleted if s in dl_all]
            ki_cell = f"{len(ki_exposed)}/{len(deleted)} (original_text {len(in_orig)}, del revisions {len(in_rev)})"
            ki_cell += f" LEAKED into text: {ki_leak}" if ki_leak else ""
            rows.append(
                (
                    label,
                    "deleted: " + ", ".join(f"'{s}'" for s in deleted),
                    ki_cell,
                    f"{len(dl_exposed)}/{len(deleted)}",
                    f"{len(deleted)}/{len(deleted)}",
                )
            )
        n_rev = len(ki.revisions)
        kinds = sorted({r.kind for r in ki.revisions})
        rows.append((label, "revisions exposed", f"{n_rev} ({','.join(kinds)})", "none (no revision model)", "-"))
    headers = ("file", "check", "ki", "docling", "want")
    widths = [max(len(str(r[i])) for r in [headers, *rows]) for i in range(len(headers))]
    print("\nfidelity on tracked-change files (moved: count in the converter's text; deleted: strings exposed at all)")
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))
    print(line)
    print("-" * len(line))
    for r in rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=5, help="timed passes per converter after the warm-up (default 5)")
    ap.add_argument(
        "--real-dir", type=Path, default=DEFAULT_REAL, help=f"public DOCX fixtures (default {DEFAULT_REAL})"
    )
    ap.add_argument(
        "--estate-dir",
        type=Path,
        default=DEFAULT_ESTATE,
        help=f"estate tree, searched recursively (default {DEFAULT_ESTATE})",
    )
    ap.add_argument(
        "--docling-export",
        action="store_true",
        help="also time docling's export_to_text() (ki's text is part of its conversion)",
    )
    ap.add_argument(
        "--clock",
        choices=("cpu", "wall"),
        default="cpu",
        help="clock of the ki/docling line (default cpu: process CPU time; both are always printed)",
    )
    ap.add_argument("--no-fidelity", action="store_true", help="skip the tracked-change fidelity table")
    args = ap.parse_args()
    if args.repeat < 1:
        ap.error("--repeat must be >= 1")

    quiet_logging()
    from ki.adapters.convert.docx import convert_docx

    dl_convert, dl_export, ContentLayer = load_docling()

    def ki_fn(doc: Doc):
        return convert_docx(doc.data, doc.name)

    if args.docling_export:

        def dl_fn(doc: Doc):
            d = dl_convert(doc)
            d.export_to_text()
            return d
    else:
        dl_fn = dl_convert

    candidates = collect([args.real_dir, args.estate_dir])
    # Warm-up pass, also deciding which files both converters open.
    docs: list[Doc] = []
    skipped: list[tuple[Doc, str, str]] = []
    for doc in candidates:
        outcome = []
        for fn in (ki_fn, dl_fn):
            try:
                fn(doc)
                outcome.append("ok")
            except Exception as exc:  # noqa: BLE001 - reported per file
                reason = getattr(exc, "reason", None) or type(exc).__name__
                msg = str(exc).replace(doc.name + ": ", "")
                msg = re.sub(r"'<_io\.BytesIO object at 0x[0-9a-f]+>'", "(stream)", msg)
                outcome.append(
                    f"fails ({msg[:110]})" if isinstance(exc, DoclingRejected) else f"fails ({reason}: {msg[:110]})"
                )
        if outcome == ["ok", "ok"]:
            docs.append(doc)
        else:
            skipped.append((doc, outcome[0], outcome[1]))

    n_real = sum(1 for d in docs if args.real_dir in d.path.parents)
    paragraphs = sum(d.paragraphs for d in docs)
    total_bytes = sum(len(d.data) for d in docs)
    print(
        f"corpus: {len(docs)} files ({n_real} from {args.real_dir}, {len(docs) - n_real} from {args.estate_dir}), "
        f"{paragraphs} paragraphs (w:p), {total_bytes / 1024:.0f} KiB"
    )
    for doc, ki_o, dl_o in skipped:
        print(f"  skipped {short(doc.path)}: ki {ki_o}; docling {dl_o}")

    ki_times: list[tuple[float, float]] = []
    dl_times: list[tuple[float, float]] = []
    for r in range(args.repeat):
        order = [("ki", ki_fn, ki_times), ("docling", dl_fn, dl_times)]
        if r % 2:
            order.reverse()
        for _, fn, sink in order:
            sink.append(time_pass(fn, docs))

    print(
        f"\ntimed passes: {args.repeat} per converter after 1 warm-up, order alternating; median pass (min..max); "
        + ("docling includes export_to_text()" if args.docling_export else "docling: convert only, no export")
    )
    print(
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; primary clock: {args.clock} "
        "(process CPU time is robust to other processes; both converters are single-threaded)"
    )
    results: dict[str, dict[str, float]] = {}
    for clock, idx in (("wall", 0), ("cpu", 1)):
        for name, times in (("ki", ki_times), ("docling", dl_times)):
            ts = [t[idx] for t in times]
            med = statistics.median(ts)
            results.setdefault(clock, {})[name] = len(docs) / med
            print(
                f"  {clock:4s} {name:8s} {med * 1000:8.1f} ms/pass ({min(ts) * 1000:.1f}..{max(ts) * 1000:.1f})  "
                f"{len(docs) / med:8.1f} files/s  {paragraphs / med:9.0f} paragraphs/s  "
                f"{med / len(docs) * 1000:6.2f} ms/file"
            )
    other = "wall" if args.clock == "cpu" else "cpu"
    ratio = results[args.clock]["ki"] / results[args.clock]["docling"]
    ratio_other = results[other]["ki"] / results[other]["docling"]
    print(
        f"ki/docling: {ratio:.2f}  ({args.clock} time; {other} time {ratio_other:.2f}; "
        f"target >= 5.00: {'met' if ratio >= 5 else 'NOT met'})"
    )

    if not args.no_fidelity:
        fidelity(args.real_dir, ki_fn, dl_convert, dl_export, ContentLayer)


if __name__ == "__main__":
    main()
