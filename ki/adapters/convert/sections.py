"""Documents made of sections — a workbook's sheets, a deck's slides — as one ``StructuredDocument``.

Spec: insertion-pipeline.md "Index" (every textual part chunked, the hit says where). Each section is a part
of its own (``sheet:<name>``, ``slide:<n>``) listed in ``body_parts``, so a search hit names its sheet or
slide; ``text`` joins the sections under a label line each (``Sheet: Costs``, ``Slide 3: Closing``) for the
stages that read a body (classification, metadata), and the index does not chunk it a second time.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Section:
    """One sheet or slide: its ``parts`` key, the label line it gets in ``text``, and its lines."""

    key: str
    label: str
    lines: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


def section_key(kind: str, name: str, taken: dict[str, str]) -> str:
    """``kind:name`` with whitespace squeezed, made unique against ``taken`` by a ``#n`` suffix."""
    base = f"{kind}:{' '.join(name.split()) or '?'}"
    key, n = base, 2
    while key in taken:
        key, n = f"{base}#{n}", n + 1
    return key


def assemble(sections: list[Section], parts: dict[str, str]) -> tuple[str, list[str]]:
    """``(text, body_parts)`` of ``sections``; each non-empty section's text is stored in ``parts`` under its key.

    Empty sections keep their label line in ``text`` (a sheet named "Costs" with no cell is still a sheet).
    """
    chunks: list[str] = []
    keys: list[str] = []
    for section in sections:
        body = section.text.strip()
        chunks.append(f"{section.label}\n{body}" if body else section.label)
        if body:
            parts[section.key] = body
            keys.append(section.key)
    return "\n\n".join(chunks), keys
