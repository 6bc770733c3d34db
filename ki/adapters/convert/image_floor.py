"""Which images can hold text worth OCR: a size floor and a degenerate-aspect limit.

A spacer GIF of 400×1 pixels took 60 s and 5.2 GB of OCR; icons, bullets and tracking pixels never
hold a line of text. An image is skipped, with the reason recorded, when its short side is below
:data:`MIN_SIDE_PX` (a legible glyph with ascender and descender needs about that many pixels at
the recogniser's input scale), when it has fewer than :data:`MIN_AREA_PX` pixels (an icon), or when
its long side exceeds :data:`MAX_ASPECT` times its short side (rules, spacers, borders).
"""

from __future__ import annotations

import io
from typing import Any

from ki.adapters.convert.model import StructuredDocument

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


def skipped_image_document(filename: str, records: list[dict[str, Any]], *, fmt: str = "image",
                           pages: int | None = None) -> StructuredDocument:
    """The document of an image none of whose pages was worth OCR: no text, the skip recorded.

    ``records`` are ``ocr_pages`` records (``source="skipped"``, ``reason``, ``size``). Such a file
    (a spacer, an icon) has nothing to find; it is a document with empty text, not a quarantine.
    """
    reasons = sorted({r.get("reason") or "" for r in records})
    return StructuredDocument(
        text="",
        format=fmt,
        converter="ki.ocr",
        converter_version="1",
        pages=pages or len(records),
        warnings=[f"{filename}: not OCR'd ({', '.join(reasons)}: below {MIN_SIDE_PX} px, {MIN_AREA_PX} px² or "
                  f"beyond a {MAX_ASPECT:g}:1 aspect ratio)"],
        metadata={"ocr_pages": records, "ocr_skipped": reasons},
    )


def skip_tiny_image(data: bytes, filename: str) -> StructuredDocument | None:
    """The :func:`skipped_image_document` of a single-frame image below the floor, else None (cheap: header only)."""
    size = image_size(data)
    reason = ocr_skip_reason(*size) if size else None
    if reason is None or size is None:
        return None
    from PIL import Image

    try:
        with Image.open(io.BytesIO(data)) as image:
            if int(getattr(image, "n_frames", 1) or 1) > 1:
                return None  # each frame is judged by the OCR page loop
    except (OSError, ValueError, Image.DecompressionBombError, SyntaxError):
        return None
    return skipped_image_document(filename, [{"page": 1, "source": "skipped", "rotation": 0, "confidence": None,
                                              "chars": 0, "reason": reason, "size": list(size)}])
