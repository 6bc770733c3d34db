"""Reading order of a page's OCR boxes: columns first, then lines (a one-level XY-cut on box geometry).

A two-column page read straight across joins unrelated lines of both columns. Here the page's text columns
are found from the boxes' horizontal extents: a *gutter* is a vertical strip no narrow box (narrower than
:data:`NARROW_SHARE` of the text's width) crosses, at least :data:`MIN_GUTTER_HEIGHTS` line heights wide,
between columns that look like prose — at least :data:`MIN_COLUMN_LINES` boxes each, boxes filling at least
:data:`MIN_FILL` of the column's width and at least :data:`MIN_COLUMN_CHARS` characters each (medians), so
the columns of a table (short cells, numbers) keep being read row by row. Boxes that cross a gutter (a title
over both columns, a footer) cut the page into bands; within a band each column is read top to bottom, left
column first. Without a gutter the page is one group, read line by line as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from statistics import median
from typing import Any

NARROW_SHARE = 0.6
MIN_GUTTER_HEIGHTS = 1.5
MIN_COLUMN_LINES = 3
MIN_FILL = 0.5
MIN_COLUMN_CHARS = 10


@dataclass(frozen=True)
class Placed:
    """A box in de-skewed page coordinates: centre ``y``/``x``, ``width``, ``height``, its ``text`` and the box."""

    y: float
    x: float
    width: float
    height: float
    text: str
    box: Any

    @property
    def left(self) -> float:
        return self.x - self.width / 2

    @property
    def right(self) -> float:
        return self.x + self.width / 2


def _candidate_gaps(items: Sequence[Placed], min_gap: float) -> list[tuple[float, float]]:
    """Gaps in the horizontal projection of the narrow boxes, widest first."""
    left, right = min(i.left for i in items), max(i.right for i in items)
    narrow = sorted((i.left, i.right) for i in items if i.width < NARROW_SHARE * (right - left))
    gaps: list[tuple[float, float]] = []
    reach = None
    for start, end in narrow:
        if reach is not None and start - reach >= min_gap:
            gaps.append((reach, start))
        reach = end if reach is None else max(reach, end)
    return sorted(gaps, key=lambda g: g[1] - g[0], reverse=True)


def _column_ok(items: Sequence[Placed], lo: float, hi: float, gutters: Sequence[tuple[float, float]]) -> bool:
    inside = [i for i in items if i.left >= lo - 1 and i.right <= hi + 1 and not _crosses(i, gutters)]
    if len(inside) < MIN_COLUMN_LINES:
        return False
    extent = max(i.right for i in inside) - min(i.left for i in inside)
    return (median(i.width for i in inside) >= MIN_FILL * extent
            and median(len(i.text) for i in inside) >= MIN_COLUMN_CHARS)


def _crosses(item: Placed, gutters: Sequence[tuple[float, float]]) -> bool:
    return any(item.left < end and item.right > start for start, end in gutters)


def find_gutters(items: Sequence[Placed]) -> list[tuple[float, float]]:
    """The page's column gutters ``(start_x, end_x)``, left to right; [] for a single-column page."""
    if len(items) < 2 * MIN_COLUMN_LINES:
        return []
    min_gap = MIN_GUTTER_HEIGHTS * median(max(i.height, 1.0) for i in items)
    left, right = min(i.left for i in items), max(i.right for i in items)

    def prose(trial: list[tuple[float, float]]) -> bool:
        edges = [left, *(x for g in trial for x in g), right]
        return all(_column_ok(items, edges[k], edges[k + 1], trial) for k in range(0, len(edges), 2))

    candidates = _candidate_gaps(items, min_gap)
    if len(candidates) > 1 and prose(sorted(candidates)):
        return sorted(candidates)  # three or more columns: each is prose only once all gutters are cut
    accepted: list[tuple[float, float]] = []
    for gap in candidates:
        if prose(sorted([*accepted, gap])):
            accepted = sorted([*accepted, gap])
    return accepted


def reading_groups(items: Sequence[Placed]) -> list[list[Placed]]:
    """The boxes in reading order as groups, each to be read line by line (top to bottom, left to right).

    Bands are cut by the boxes crossing a gutter; within a band, one group per column, left to right.
    """
    gutters = find_gutters(items)
    if not gutters:
        return [list(items)]
    starts = [g[0] for g in gutters]
    spanning = sorted((i for i in items if _crosses(i, gutters)), key=lambda i: i.y)
    pending = sorted((i for i in items if not _crosses(i, gutters)), key=lambda i: i.y)
    groups: list[list[Placed]] = []

    def flush(until: float | None) -> None:
        nonlocal pending
        band = [i for i in pending if until is None or i.y < until]
        pending = [i for i in pending if until is not None and i.y >= until]
        for column in range(len(gutters) + 1):
            members = [i for i in band if sum(i.x > s for s in starts) == column]
            if members:
                groups.append(members)

    for item in spanning:
        flush(item.y)
        if groups and all(g in spanning for g in groups[-1]):
            groups[-1].append(item)  # consecutive full-width lines read together
        else:
            groups.append([item])
    flush(None)
    return groups
