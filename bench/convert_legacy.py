"""Legacy Office, archives, TNEF and signed files: files/s, peak RSS and word recall per format.

What runs
---------
For each format, one fresh Python process converts every file of that format (from
``tests/fixtures/formats/legacy`` and ``--extra-dir``, recursive) with ki's router in-process
(``ki.adapters.convert.router.convert_bytes`` with ``pipeline.convert.isolate=false``, so the process's own
figures are the conversion's): one warm-up pass (LibreOffice creates its profile, imports load),
then ``--repeat`` timed passes; files/s from the median pass (wall clock). Peak RSS: the process's
own ``ru_maxrss`` (Python and its parsers) and its children's (LibreOffice), MiB.

Word recall (bag of words, case-folded, NFKC, letters and digits) of ki's text — body and every
textual part, as indexed — against a reference reader that is not ki's code path:

* ``.doc`` ``.dot`` ``.wpd`` ``.wps`` ``.pages``: LibreOffice's own plain-text export (``txt:Text``);
* ``.ppt``: the text atoms of the ``PowerPoint Document`` stream (``TextCharsAtom`` UTF-16,
  ``TextBytesAtom`` cp1252; [MS-PPT] 2.9), read with olefile — slides, notes pages (their header and
  footer too), the masters' own shapes and header/footer placeholders — except the masters' prompt and
  field placeholders (``Click to edit Master text styles``, ``Second level`` …, date, slide number: layout,
  which Tika's testMasterFooter asserts absent); a text block stored twice (the outline and the slide's
  drawing, a notes header on every page) counts once;
* ``.xls``: every cell value xlrd gives (the library's own reading, not ki's layout);
* ``.p7m``: the signed content itself (asn1crypto), read as text;
* ``.dat`` (TNEF): the RTF body read by striprtf plus each attachment's name.

Run: ``.venv/bin/python bench/convert_legacy.py [--repeat 3] [--extra-dir DIR]`` (LibreOffice installed:
``.ci/install_libreoffice.sh``).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import resource
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import unicodedata
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures" / "formats" / "legacy"
FORMATS = (".doc", ".dot", ".ppt", ".wpd", ".wps", ".pages", ".xls", ".p7m", ".dat")
WORD = re.compile(r"[^\W_]+")


def words(text: str) -> Counter:
    return Counter(WORD.findall(unicodedata.normalize("NFKC", text).casefold()))


def recall(reference: str, ours: str) -> tuple[int, int]:
    """(reference words found in ours, reference words), as bags."""
    ref, got = words(reference), words(ours)
    return sum(min(n, got[w]) for w, n in ref.items()), sum(ref.values())


def _soffice_text(path: Path) -> str:
    from ki.adapters.convert.soffice import find_soffice

    with tempfile.TemporaryDirectory() as tmp:
        profile = Path(tmp, "profile").as_uri()
        for _ in range(2):  # a fresh profile asks for one restart
            subprocess.run([find_soffice("soffice"), "--headless", f"-env:UserInstallation={profile}", "--convert-to",
                            "txt:Text", "--outdir", tmp, str(path)], capture_output=True, timeout=120, check=False)
            out = Path(tmp, path.stem + ".txt")
            if out.exists():
                return out.read_text(encoding="utf-8", errors="replace")
    return ""


#: [MS-PPT] 2.13.21 PlaceholderEnum values whose text is a master's prompt or a field, not content:
#: MasterTitle, MasterBody, MasterCenterTitle, MasterSubTitle, MasterNotesBody, MasterDate, MasterSlideNumber.
#: MasterFooter (9) and MasterHeader (10) hold the footer/header text a user typed: counted.
_PROMPT_PLACEHOLDERS = frozenset({1, 2, 3, 4, 6, 7, 8})
_TEXT_ATOMS = {0x0FA0: "utf-16-le", 0x0FA8: "cp1252"}  # TextCharsAtom, TextBytesAtom


def _ppt_atoms(data: bytes) -> str:
    import olefile

    with olefile.OleFileIO(io.BytesIO(data)) as ole:
        stream = ole.openstream("PowerPoint Document").read()
    out: list[str] = []

    def walk(pos: int, end: int, shape: list[str] | None) -> None:
        """Records in [pos, end); ``shape`` collects the text of the shape (OfficeArtSpContainer) around them."""
        while pos + 8 <= end:
            ver_inst, rtype, size = struct.unpack_from("<HHI", stream, pos)
            body_end = min(pos + 8 + size, end)
            if ver_inst & 0x0F == 0x0F:  # a container: its records follow
                if rtype == 0xF004:  # one shape: its text counts unless its placeholder is a master prompt
                    texts: list[str] = []
                    placeholder = _placeholder(pos + 8, body_end)
                    walk(pos + 8, body_end, texts)
                    if placeholder not in _PROMPT_PLACEHOLDERS:
                        (shape if shape is not None else out).extend(texts)
                else:
                    walk(pos + 8, body_end, shape)
            elif rtype in _TEXT_ATOMS:
                (shape if shape is not None else out).append(stream[pos + 8 : body_end].decode(_TEXT_ATOMS[rtype],
                                                                                               "replace"))
            pos = body_end

    def _placeholder(pos: int, end: int) -> int | None:
        """The placementId of the OEPlaceholderAtom inside one shape's records (its client data), if any."""
        while pos + 8 <= end:
            ver_inst, rtype, size = struct.unpack_from("<HHI", stream, pos)
            if rtype == 0x0BC3 and size >= 8:
                return stream[pos + 12]
            if ver_inst & 0x0F == 0x0F and rtype != 0xF004:  # into containers, not into nested shapes
                found = _placeholder(pos + 8, min(pos + 8 + size, end))
                if found is not None:
                    return found
            pos += 8 + size
        return None

    walk(0, len(stream), None)
    return "\n".join(dict.fromkeys(out))  # a text stored twice (outline and drawing; a notes header per page): once


def _xls_values(data: bytes) -> str:
    import xlrd

    def value(v: object) -> str:  # a whole number as Excel shows it (1, not 1.0)
        return str(int(v)) if isinstance(v, float) and v.is_integer() else str(v)

    book = xlrd.open_workbook(file_contents=data)
    return "\n".join(value(c.value) for s in book.sheets() for r in range(s.nrows) for c in s.row(r) if c.value != "")


def reference(path: Path) -> str | None:
    """The reference text of ``path`` (see the module doc), or None when there is none."""
    data = path.read_bytes()
    ext = path.suffix.lower()
    try:
        if ext in (".doc", ".dot", ".wpd", ".wps", ".pages"):
            return _soffice_text(path)
        if ext == ".ppt":
            return _ppt_atoms(data)
        if ext == ".xls":
            return _xls_values(data)
        if ext == ".p7m":
            from ki.adapters.convert.smime import unwrap_signed

            return (unwrap_signed(data, path.name).content or b"").decode("utf-8", "replace")
        if ext == ".dat":
            from striprtf.striprtf import rtf_to_text

            from ki.adapters.convert.tnef import read_tnef

            msg = read_tnef(data, path.name)
            rtf = rtf_to_text(msg.rtf.decode("cp1252", "replace")) if msg.rtf else msg.body
            return "\n".join([msg.subject or "", rtf, *(a.name for a in msg.attachments)])
    except Exception:  # noqa: BLE001 - a file the reference cannot read has no reference
        return None
    return None


def run_format(ext: str, files: list[Path], repeat: int) -> dict:
    """Convert ``files`` (all of format ``ext``) in this process; the figures of the module doc."""
    from ki.adapters.convert.router import convert_bytes
    from ki.config.settings import KiConfig
    from ki.core.errors import UnsupportedDocument

    config = KiConfig()
    config.pipeline.convert.isolate = False
    blobs = [(p.name, p.read_bytes()) for p in files]
    texts: dict[str, str] = {}
    failed: dict[str, str] = {}
    passes = []
    for i in range(repeat + 1):
        start = time.perf_counter()
        for name, data in blobs:
            try:
                doc = convert_bytes(data, name, config)
                texts[name] = "\n".join(p.text for p in doc.textual_parts())
            except UnsupportedDocument as exc:
                failed[name] = exc.reason
        if i:
            passes.append(time.perf_counter() - start)
    found = total = 0
    per_file = {}
    for path in files:
        if path.name not in texts:
            continue
        ref = reference(path)
        if ref is None:
            continue
        f, t = recall(ref, texts[path.name])
        found, total = found + f, total + t
        per_file[path.name] = round(f / t, 3) if t else None
    return {"format": ext, "files": len(files), "files_per_s": round(len(files) / statistics.median(passes), 2),
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
            "children_peak_rss_mb": round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 1),
            "recall": round(found / total, 4) if total else None, "reference_words": total,
            "per_file": per_file, "quarantined": failed}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3, help="timed passes after the warm-up (default 3)")
    ap.add_argument("--extra-dir", type=Path, action="append", default=[], help="more files (recursive)")
    ap.add_argument("--one", help=argparse.SUPPRESS)  # the child process: one format, JSON on stdout
    args = ap.parse_args()
    roots = [FIXTURES, *args.extra_dir]
    files = sorted({p.resolve() for r in roots for p in r.rglob("*") if p.is_file()})
    if args.one:
        print(json.dumps(run_format(args.one, [p for p in files if p.suffix.lower() == args.one], args.repeat)))
        return
    print(f"load average {os.getloadavg()[0]:.1f} {os.getloadavg()[1]:.1f} {os.getloadavg()[2]:.1f}")
    print(f"{'format':7} {'files':>5} {'files/s':>8} {'RSS MiB':>8} {'LO MiB':>7} {'recall':>7} {'ref words':>9}")
    for ext in FORMATS:
        if not any(p.suffix.lower() == ext for p in files):
            continue
        cmd = [sys.executable, __file__, "--one", ext, "--repeat", str(args.repeat)]
        cmd += [a for d in args.extra_dir for a in ("--extra-dir", str(d))]
        out = subprocess.run(cmd, capture_output=True, text=True, check=True, cwd=REPO).stdout.strip().splitlines()[-1]
        r = json.loads(out)
        print(f"{ext:7} {r['files']:>5} {r['files_per_s']:>8} {r['peak_rss_mb']:>8} {r['children_peak_rss_mb']:>7} "
              f"{r['recall'] if r['recall'] is not None else '-':>7} {r['reference_words']:>9}"
              + (f"  quarantined: {r['quarantined']}" if r["quarantined"] else ""))
        low = {k: v for k, v in r["per_file"].items() if v is not None and v < 0.97}
        if low:
            print(f"        below 0.97: {low}")


if __name__ == "__main__":
    main()
