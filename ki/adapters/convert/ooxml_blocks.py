"""Lines of a WordprocessingML container in both views (accepted and original), and the revisions found.

The paragraph-mark rules of conversion.md section 6 live here: a paragraph whose mark is
deleted merges with the next paragraph of the same container; vanished content hands its
revisions to the next accepted line.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

ROW_SEP = " | "  # cells of one table row on one line
CELL_PARA_SEP = " "  # paragraphs of one cell


@dataclass
class RevisionRecord:
    """A revision found by the walker; converted to :class:`ki.adapters.convert.model.Revision` by the caller."""

    kind: str
    author: str | None
    date: datetime | None
    revision_id: str | None
    part: str
    container: str | None
    move_name: str | None = None
    pieces: list[str] = field(default_factory=list)
    explicit_text: str | None = None
    paragraph: int | None = None

    @property
    def text(self) -> str:
        """The revision's own text (deleted text for del/moveFrom, row text for row revisions)."""
        return self.explicit_text if self.explicit_text is not None else "".join(self.pieces)


@dataclass
class PartText:
    """Walk result of one container: ``accepted``/``original`` lines, one per paragraph or table row."""

    accepted: list[str]
    original: list[str]


class Block:
    """Lines of one block container (body, cell, text box, note, comment) in both views.

    ``acc`` holds ``(text, revisions)``; ``text`` None marks vanished content whose revisions
    take the index of the next accepted line.
    """

    def __init__(self) -> None:
        self.acc: list[tuple[str | None, list[RevisionRecord]]] = []
        self.orig: list[str] = []
        self._pend_acc: str | None = None
        self._pend_revs: list[RevisionRecord] = []
        self._pend_orig: str | None = None

    def add_paragraph(self, acc: str, orig: str, acc_mark: bool, orig_mark: bool, revs: list[RevisionRecord]) -> None:
        if self._pend_acc is not None:
            acc = self._pend_acc + acc
            self._pend_acc = None
        if self._pend_revs:
            revs = self._pend_revs + revs
            self._pend_revs = []
        if acc_mark:
            self.acc.append((acc, revs))
        else:
            self._pend_acc, self._pend_revs = acc, revs
        if self._pend_orig is not None:
            orig = self._pend_orig + orig
            self._pend_orig = None
        if orig_mark:
            self.orig.append(orig)
        else:
            self._pend_orig = orig

    def add_line(self, acc: str | None, orig: str | None, revs: list[RevisionRecord]) -> None:
        """A table row: ends any pending paragraph merge first."""
        self.flush()
        self.acc.append((acc, revs))
        if orig is not None:
            self.orig.append(orig)

    def flush(self) -> None:
        """End of container: a pending merged paragraph is kept only if it has text."""
        if self._pend_acc is not None or self._pend_revs:
            self.acc.append((self._pend_acc or None, self._pend_revs))
        if self._pend_orig:
            self.orig.append(self._pend_orig)
        self._pend_acc, self._pend_revs, self._pend_orig = None, [], None

    def finish(self) -> PartText:
        """Flush, number the accepted lines and stamp each revision with its line index."""
        self.flush()
        lines: list[str] = []
        for text, revs in self.acc:
            for rev in revs:
                rev.paragraph = len(lines)
            if text is not None:
                lines.append(text)
        return PartText(accepted=lines, original=list(self.orig))

    def joined(self) -> tuple[str, str, list[RevisionRecord]]:
        """Flattened to one line per view (table cells)."""
        self.flush()
        acc = CELL_PARA_SEP.join(t for t, _ in self.acc if t)
        orig = CELL_PARA_SEP.join(t for t in self.orig if t)
        return acc, orig, [r for _, revs in self.acc for r in revs]


@dataclass
class Para:
    """The paragraph being walked: its text in both views, its revisions, text boxes placed before it."""

    acc: list[str] = field(default_factory=list)
    orig: list[str] = field(default_factory=list)
    revs: list[RevisionRecord] = field(default_factory=list)
    pre_acc: list[tuple[str | None, list[RevisionRecord]]] = field(default_factory=list)
    pre_orig: list[str] = field(default_factory=list)
