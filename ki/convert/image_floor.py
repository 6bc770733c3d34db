"""Which images can hold text worth OCR: a size floor and a degenerate-aspect limit (issue 14 item 7a).

A spacer GIF of 400×1 pixels took 60 s and 5.2 GB of OCR; icons, bullets and tracking pixels never
hold a line of text. An image is skipped, with the reason recorded, when its short side is below
:data:`MIN_SIDE_PX` (a legible glyph with ascender and descender needs about that many pixels at
the recogniser's input scale), when it has fewer than :data:`MIN_AREA_PX` pixels (an icon), or when
its long side exceeds :data:`MAX_ASPECT` times its short side (rules, spacers, borders).
"""

from __future__ import annotations

import io

MIN_SIDE_PX = 16
MIN_AREA_PX = 32 * 32
MAX_ASPECT = 60.0


def ocr_skip_reason(width: int, height: int) -> str | None:
    """``too_small`` or ``degenerate_aspect`` for an image of ``width`` × ``height`` pixels, else None."""
    short, long = sorted((max(0, int(width)), max(0, int(height))))
    if short < MIN_SIDE_PX or short * long < MIN_AREA_PX:
        return "too_small"
    if long > MAX_ASPECT * short:
        return "degenerate_aspect"
    return None


def image_size(data: bytes) -> tuple[int, int] | None:
    """``(width, height)`` in pixels from an image's header (Pillow reads no pixel data), or None."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data)) as image:
            return image.size
    except (UnidentifiedImageError, OSError, ValueError, Image.DecompressionBombError, SyntaxError):
        return None
