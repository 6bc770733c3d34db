"""What an image without text still says: its file name and the EXIF date and camera fields.

Spec: insertion-pipeline.md "Parse (convert)". A photo in a lease file or a logo has no text for OCR to find;
it is a document all the same, found by its name, the day it was taken and the camera that took it — never
quarantined ``empty_text``. The fields are an ``image_info`` part (one ``Label: value`` line each) and
``metadata["exif"]``. Runs in a conversion worker (Pillow parses the untrusted bytes).
"""

from __future__ import annotations

import io
from typing import Any

from ki.adapters.convert.model import StructuredDocument, clean_text

CONVERTER = "ki.image"
CONVERTER_VERSION = "1"
#: EXIF tags read (IFD0 and the Exif IFD), with the label of their line.
_IFD0 = {306: "modified", 271: "make", 272: "model", 305: "software", 270: "description", 315: "artist"}
_EXIF_IFD = {36867: "taken", 36868: "digitized", 42036: "lens", 42035: "lens_make"}
_LABELS = (("taken", "Taken"), ("modified", "Modified"), ("camera", "Camera"), ("lens", "Lens"),
           ("software", "Software"), ("description", "Description"), ("artist", "Artist"))


def _exif_date(value: str) -> str:
    """``2009:08:11 09:09:45`` → ``2009-08-11 09:09:45`` (EXIF writes the date with colons)."""
    value = value.strip().strip("\x00")
    if len(value) >= 10 and value[4] == ":" and value[7] == ":":
        return f"{value[:4]}-{value[5:7]}-{value[8:]}"
    return value


def exif_fields(data: bytes) -> dict[str, Any]:
    """``taken``, ``modified``, ``camera`` (make and model), ``lens``, ``software``, ``description``, ``artist``,
    ``width``, ``height`` of an image, as far as it records them; {} when Pillow cannot read it."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data)) as image:
            exif = image.getexif()
            raw: dict[str, Any] = {name: exif.get(tag) for tag, name in _IFD0.items() if exif.get(tag)}
            sub = exif.get_ifd(0x8769)
            raw.update({name: sub.get(tag) for tag, name in _EXIF_IFD.items() if sub.get(tag)})
            width, height = image.size
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError, Image.DecompressionBombError, KeyError,
            TypeError):
        return {}
    fields = {k: " ".join(str(v).replace("\x00", " ").split()) for k, v in raw.items()
              if isinstance(v, str | int | float)}
    for key in ("taken", "modified", "digitized"):
        if key in fields:
            fields[key] = _exif_date(fields[key])
    make, model = fields.pop("make", ""), fields.pop("model", "")
    camera = model if make and model.lower().startswith(make.lower()) else " ".join(p for p in (make, model) if p)
    if camera:
        fields["camera"] = camera
    fields.update(width=width, height=height)
    return fields


def image_info_text(filename: str, fields: dict[str, Any]) -> str:
    """The ``image_info`` part: ``File: <name>`` then one ``Label: value`` line per EXIF field present."""
    lines = [f"File: {filename}"] if filename else []
    lines += [f"{label}: {fields[key]}" for key, label in _LABELS if fields.get(key)]
    return clean_text("\n".join(lines))


def image_without_text(data: bytes, filename: str, *, reason: str = "no text found",
                       fmt: str = "image") -> StructuredDocument:
    """The document of an image OCR found no text in: empty ``text``, an ``image_info`` part, ``metadata["exif"]``.

    Never raises for content: an image Pillow cannot read still gets its file name.
    """
    fields = exif_fields(data)
    return StructuredDocument(text="", format=fmt, converter=CONVERTER, converter_version=CONVERTER_VERSION,
                              parts={"image_info": image_info_text(filename, fields)},
                              warnings=[f"{filename}: {reason}; indexed by its name and EXIF fields"],
                              metadata={"exif": fields, "no_text": reason})


def add_image_info(doc: StructuredDocument, data: bytes, filename: str) -> StructuredDocument:
    """``doc`` (an OCR'd image) with the ``image_info`` part and ``metadata["exif"]`` added."""
    fields = exif_fields(data)
    doc.parts.setdefault("image_info", image_info_text(filename, fields))
    doc.metadata.setdefault("exif", fields)
    return doc
