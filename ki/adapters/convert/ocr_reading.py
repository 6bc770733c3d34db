"""Reading one page image with the OCR engine: orientation search, boxes, reading order.

Orientation: a page is read at 0°. It is re-read at 180°, 90° and 270° (90° first
when most text boxes stand upright) only when the char-weighted mean confidence
is below :data:`GOOD_CONFIDENCE`, when most text sits in vertical boxes, or when
very few characters came out; the reading with horizontal text and the best mean
confidence wins. Reading order: boxes are de-skewed by their median angle, split into
text columns (:mod:`ki.adapters.convert.ocr_layout`), grouped into lines by vertical overlap and
read left to right.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

from ki.adapters.convert import ocr_engine
from ki.adapters.convert.ocr_layout import Placed, reading_groups

GOOD_CONFIDENCE = 0.85  # at or above (and horizontal text), 0° is accepted without retries
UPRIGHT_BONUS = 0.05  # a turned reading must beat 0° by this much mean confidence
FEW_CHARS = 8  # fewer recognised characters than this also triggers the orientation search
SMALL_IMAGE_SIDE = 400  # px: below this on the long side no orientation search is made


@dataclass
class Box:
    """One recognised text box: text, score, centre, size (px) and top-edge angle."""

    text: str
    score: float
    cx: float
    cy: float
    width: float
    height: float
    angle: float  # radians, direction of the box's top edge


@dataclass
class Reading:
    """The boxes of one reading of a page at one rotation, and what it cost (s)."""

    rotation: int  # degrees the page image was turned clockwise before reading
    boxes: list[Box]
    seconds: float = 0.0

    @property
    def chars(self) -> int:
        return sum(len(b.text) for b in self.boxes)

    @property
    def confidence(self) -> float:
        total = self.chars
        return sum(b.score * len(b.text) for b in self.boxes) / total if total else 0.0

    @property
    def horizontal(self) -> float:
        total = self.chars
        return sum(len(b.text) for b in self.boxes if b.width >= b.height) / total if total else 1.0

    def good(self) -> bool:
        return self.confidence >= GOOD_CONFIDENCE and self.horizontal >= 0.5 and self.chars >= FEW_CHARS

    def key(self) -> tuple[bool, float, int]:
        """Horizontal text first, then mean confidence; the page as stored wins near-ties."""
        bonus = UPRIGHT_BONUS if self.rotation == 0 else 0.0
        return (self.horizontal >= 0.5, round(self.confidence + bonus, 3), self.chars)


def recognise(image: Any, rotation: int) -> Reading:
    """Read a BGR ndarray turned ``rotation`` degrees clockwise (one engine call)."""
    import numpy as np

    started = time.monotonic()
    turned = np.ascontiguousarray(np.rot90(image, k=-(rotation // 90))) if rotation else image
    result = ocr_engine.engine()(turned)
    boxes: list[Box] = []
    if getattr(result, "txts", None) is not None and getattr(result, "boxes", None) is not None:
        for quad, text, score in zip(result.boxes, result.txts, result.scores, strict=False):
            text = normalise(text)
            if not text:
                continue
            p0, p1, _p2, p3 = (np.asarray(p, dtype=float) for p in quad)
            centre = np.asarray(quad, dtype=float).mean(axis=0)
            top = p1 - p0
            boxes.append(
                Box(
                    text=text,
                    score=float(score),
                    cx=float(centre[0]),
                    cy=float(centre[1]),
                    width=float(np.hypot(*top)),
                    height=float(np.hypot(*(p3 - p0))),
                    angle=math.atan2(float(top[1]), float(top[0])),
                )
            )
    return Reading(rotation, boxes, time.monotonic() - started)


_FULLWIDTH = {c: c - 0xFEE0 for c in range(0xFF01, 0xFF5F)} | {0x3000: 0x20}


def normalise(text: str) -> str:
    """Full-width ASCII forms (a CJK-trained recogniser's habit) become ASCII; whitespace is squeezed."""
    return " ".join(text.translate(_FULLWIDTH).split())


def read_page(image: Any, deadline: float) -> tuple[Reading, list[int]]:
    """Read one page, searching orientations only when 0° looks wrong. Returns (best, tried)."""
    first = recognise(image, 0)
    tried = [0]
    if not first.boxes or first.good() or max(image.shape[:2]) < SMALL_IMAGE_SIDE:
        return first, tried  # a small image (icon, logo, spacer) is no turned page
    order = (90, 270, 180) if first.horizontal < 0.5 else (180, 90, 270)
    best = first
    for rotation in order:
        if time.monotonic() + first.seconds > deadline:
            break  # not enough budget left for another full reading
        reading = recognise(image, rotation)
        tried.append(rotation)
        if reading.key() > best.key():
            best = reading
        if best.good():
            break
    return best, tried


def lines(boxes: list[Box]) -> str:
    """Order boxes into lines (after undoing the page's skew): column by column when the page has text
    columns (:mod:`ki.adapters.convert.ocr_layout`), each group top to bottom, left to right."""
    if not boxes:
        return ""
    long_angles = sorted(b.angle for b in boxes if b.width > 2 * b.height)
    skew = long_angles[len(long_angles) // 2] if long_angles else 0.0
    skew = max(-0.26, min(0.26, skew))  # at most ~15°
    cos, sin = math.cos(skew), math.sin(skew)
    placed = [Placed(-sin * b.cx + cos * b.cy, cos * b.cx + sin * b.cy, b.width, b.height, b.text, b) for b in boxes]
    return "\n".join(line for group in reading_groups(placed) for line in _group_lines(group))


def _group_lines(group: list[Placed]) -> list[str]:
    """One group's boxes as lines: grouped by vertical overlap, each read left to right."""
    placed = sorted(group, key=lambda p: (p.y, p.x))
    rows: list[list[Placed]] = []
    line_y = line_h = 0.0
    for item in placed:
        height = max(item.height, 1.0)
        if rows and abs(item.y - line_y) <= 0.5 * max(min(height, line_h), 1.0):
            rows[-1].append(item)
            line_y = sum(m.y for m in rows[-1]) / len(rows[-1])
            line_h = max(line_h, height)
        else:
            rows.append([item])
            line_y, line_h = item.y, height
    return [" ".join(m.text for m in sorted(row, key=lambda m: m.x)) for row in rows]
