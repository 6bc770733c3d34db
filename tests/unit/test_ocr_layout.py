"""OCR reading order by layout: a two-column page reads column by column, a table row by row."""

from __future__ import annotations

import io

from PIL import Image, ImageDraw, ImageFont

from ki.adapters.convert.ocr import ocr_image
from ki.adapters.convert.ocr_layout import Placed, find_gutters, reading_groups
from ki.adapters.convert.ocr_reading import Box, lines

LEFT = ["The tenant shall pay the rent", "on the first working day of", "each month into the account",
        "named by the landlord in", "writing before the term starts.", "Late payment bears interest."]
RIGHT = ["The landlord shall repair the", "roof and the outer walls at", "his own cost within thirty",
         "days of a written notice", "from the tenant about damage.", "Minor repairs are excluded."]


def _box(text: str, x: float, y: float, width: float, height: float = 30.0) -> Box:
    return Box(text=text, score=0.99, cx=x + width / 2, cy=y + height / 2, width=width, height=height, angle=0.0)


def test_two_columns_under_a_title_read_column_by_column_then_the_footer() -> None:
    boxes = [_box("Lease Agreement between Miller and Stone", 120, 60, 1300, 40)]
    for i, (a, b) in enumerate(zip(LEFT, RIGHT, strict=True)):
        boxes += [_box(a, 120, 200 + 70 * i, 600), _box(b, 900, 200 + 70 * i, 620)]
    boxes.append(_box("Signed in Hamburg for both parties to this lease", 120, 1000, 1400))
    assert lines(boxes).splitlines() == ["Lease Agreement between Miller and Stone", *LEFT, *RIGHT,
                                         "Signed in Hamburg for both parties to this lease"]


def test_a_table_of_short_cells_keeps_its_rows() -> None:
    rows = [("Attorney fees", "1,200.00"), ("Court fees", "345.00"), ("Expert", "2,000.00"), ("Travel", "80.00")]
    boxes = [b for i, (label, amount) in enumerate(rows)
             for b in (_box(label, 100, 100 + 50 * i, 200), _box(amount, 700, 100 + 50 * i, 120))]
    assert lines(boxes).splitlines() == [f"{label} {amount}" for label, amount in rows]
    placed = [Placed(b.cy, b.cx, b.width, b.height, b.text, b) for b in boxes]
    assert find_gutters(placed) == [] and len(reading_groups(placed)) == 1


def test_three_columns_are_found() -> None:
    boxes = [_box(f"column {c} line {i} of running prose", 100 + 500 * c, 100 + 40 * i, 420, 28)
             for c in range(3) for i in range(5)]
    placed = [Placed(b.cy, b.cx, b.width, b.height, b.text, b) for b in boxes]
    assert len(find_gutters(placed)) == 2
    assert lines(boxes).splitlines() == [f"column {c} line {i} of running prose" for c in range(3) for i in range(5)]


def test_a_rendered_two_column_scan_is_ocr_read_column_by_column() -> None:
    font, big = ImageFont.load_default(size=30), ImageFont.load_default(size=40)
    page = Image.new("RGB", (1700, 1200), "white")
    draw = ImageDraw.Draw(page)
    draw.text((120, 60), "Lease Agreement between Miller and Stone Holdings", font=big, fill="black")
    for i, (a, b) in enumerate(zip(LEFT, RIGHT, strict=True)):
        draw.text((120, 200 + i * 70), a, font=font, fill="black")
        draw.text((900, 200 + i * 70), b, font=font, fill="black")
    buf = io.BytesIO()
    page.save(buf, "PNG")
    text = ocr_image(buf.getvalue(), "two-columns.png").text
    got = [line for line in text.splitlines() if line.strip()]
    assert got[0] == "Lease Agreement between Miller and Stone Holdings"
    assert got[1:] == LEFT + RIGHT
