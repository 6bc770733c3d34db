"""The MANIFEST-clause harness shared by ``tests/unit/test_convert_*.py``.

``../shared/corpus/real/MANIFEST.tsv`` gives, per real file, an ``expected`` column of clauses
separated by ``;`` (``text contains "x" ; comments: 2 ; quarantine: corrupt``). Each converter's
test module turns every clause of its folder into one test and interprets the clause itself
(``check_clause``); this module holds what those modules share: reading the rows, splitting the
clauses, building the parametrized cases (clauses that describe the file, not ki's output, are
left out; clauses ki cannot meet yet become strict xfails), converting each file once.
"""

from __future__ import annotations

import csv
import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from ki.adapters.convert.model import StructuredDocument
from ki.core.errors import UnsupportedDocument

Result = StructuredDocument | UnsupportedDocument

# A clause runs to the next ";" outside double quotes; a backslash escapes the next character.
_CLAUSE = re.compile(r'(?:[^;"\\]|\\.|"(?:\\.|[^"\\])*")+')


def corpus_dir() -> Path:
    """``$KI_SHARED_DIR/corpus/real`` (else ``../shared`` beside the repository), as ``tests.helpers.paths.shared_dir``.

    Needed at collection time, before fixtures exist; a missing corpus yields no rows here and the
    ``real_corpus`` fixture reports it.
    """
    env = os.environ.get("KI_SHARED_DIR")
    root = Path(env) if env else Path(__file__).resolve().parents[2].parent / "shared"
    return root / "corpus" / "real"


def split_clauses(expected: str) -> list[str]:
    """The clauses of one ``expected`` cell, stripped, in order."""
    return [c.strip() for c in _CLAUSE.findall(expected) if c.strip()]


def quoted(clause: str) -> str:
    """The text between a clause's first and last double quote (``text contains "a b"`` → ``a b``)."""
    return clause[clause.index('"') + 1 : clause.rindex('"')]


def document(result: Result) -> StructuredDocument:
    """The converted document; fails the test when the file was quarantined instead."""
    if isinstance(result, UnsupportedDocument):
        pytest.fail(f"quarantined as {result.reason}: {result} {result.details}")
    return result


@dataclass
class Manifest:
    """The MANIFEST rows of one corpus folder and the converter they are checked against.

    Args:
        folder: the corpus folder (``docx``, ``eml``, ...); rows whose path starts with it are used.
        convert: ``(bytes, filename) -> StructuredDocument``, raising ``UnsupportedDocument``.
        file_facts: clause prefixes that describe the file rather than ki's output (not tested).
        expected_unmet: ``(path, clause) -> reason`` for clauses ki cannot meet (strict xfail).
        exclude: row paths checked elsewhere (e.g. the mbox row of ``eml/``).
        root: the folder holding ``MANIFEST.tsv`` and the files (default: the shared real corpus).
    """

    folder: str
    convert: Callable[[bytes, str], StructuredDocument]
    file_facts: tuple[str, ...] = ()
    expected_unmet: dict[tuple[str, str], str] = field(default_factory=dict)
    exclude: frozenset[str] = frozenset()
    root: Path | None = None
    _results: dict[Path, Result] = field(default_factory=dict, repr=False)

    def rows(self) -> list[dict[str, str]]:
        """The folder's MANIFEST rows (``path``, ``expected``, ``licence``, ...); [] without a corpus.

        ``folder=""`` takes every row."""
        manifest = (self.root or corpus_dir()) / "MANIFEST.tsv"
        if not manifest.is_file():
            return []
        with manifest.open(encoding="utf-8", newline="") as fh:
            rows = csv.DictReader(fh, delimiter="\t", quoting=csv.QUOTE_NONE)
            prefix = self.folder + "/" if self.folder else ""
            return [r for r in rows if r["path"].startswith(prefix) and r["path"] not in self.exclude]

    def clauses(self, row: dict[str, str]) -> list[str]:
        """The row's clauses about ki's output (file facts left out)."""
        return [c for c in split_clauses(row["expected"]) if not c.startswith(self.file_facts)]

    def cases(self) -> list:
        """One ``pytest.param(path, clause)`` per clause, id ``<file name>|<clause>``."""
        cases = []
        for row in self.rows():
            for clause in self.clauses(row):
                reason = self.expected_unmet.get((row["path"], clause))
                marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
                cases.append(pytest.param(row["path"], clause, marks=marks, id=f"{Path(row['path']).name}|{clause}"))
        return cases

    def result(self, path: Path) -> Result:
        """``convert(path)``'s document, or the ``UnsupportedDocument`` it raised (each file converted once)."""
        if path not in self._results:
            try:
                self._results[path] = self.convert(path.read_bytes(), path.name)
            except UnsupportedDocument as exc:
                self._results[path] = exc
        return self._results[path]

    def assert_interpreted(self, known: Iterable[str], *, min_rows: int) -> None:
        """Every clause of the folder starts with a known prefix (or a file fact); at least ``min_rows`` rows."""
        rows = self.rows()
        assert len(rows) >= min_rows, f"{self.folder}/ rows missing from MANIFEST.tsv"
        prefixes = self.file_facts + tuple(known)
        for row in rows:
            for clause in split_clauses(row["expected"]):
                assert clause.startswith(prefixes), f"{row['path']}: uninterpreted clause {clause!r}"
