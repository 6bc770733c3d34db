"""The startup canary: a tiny known-good DOCX whose marker text must come back from Docling Serve.

``/health`` and ``/ready`` prove nothing about conversions (conversion.md section 3: a server
without its models answers them and fails every conversion), so the client converts this file.
"""

from __future__ import annotations

import io
import zipfile

CANARY_MARKER = "ki docling canary"


def canary_docx() -> bytes:
    """A minimal valid DOCX (one paragraph, :data:`CANARY_MARKER`), built in memory (~1 KB)."""
    ns = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
    parts = {
        "[Content_Types].xml": (
            '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
            '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
            '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
            '<Default Extension="xml" ContentType="application/xml"/>'
            '<Override PartName="/word/document.xml" '
            'ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/>'
            "</Types>"
        ),
        "_rels/.rels": (
            '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
            '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
            '<Relationship Id="rId1" Target="word/document.xml" '
            'Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument"/>'
            "</Relationships>"
        ),
        "word/document.xml": (
            f'<?xml version="1.0" encoding="UTF-8" standalone="yes"?><w:document xmlns:w="{ns}"><w:body>'
            f"<w:p><w:r><w:t>{CANARY_MARKER.capitalize()}: Prüfung / check.</w:t></w:r></w:p>"
            "</w:body></w:document>"
        ),
    }
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for part, xml in parts.items():
            archive.writestr(part, xml)
    return out.getvalue()
