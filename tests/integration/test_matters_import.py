"""Matters imported from practice management, on real PostgreSQL (issue 16 items 1–2).

``ki matters import`` / ``list`` (re-import updates, never duplicates; refused rows name their line), and
Classify on a small estate: imported references found in a DOCX footer and header, a mail subject tag,
an "Our ref" line with initials, aliases, client numbers in folder names, client names, the folder a
matter's files share; the firm's configured reference formats for what the list does not hold; DMS
document numbers that are not matters. Cost: one pipeline run over 14 files (~20 s) and one CLI call.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
import zipfile
from pathlib import Path

from sqlalchemy import text

from ki.adapters.sources.scan import register_local_source, scan_source
from ki.app.export import export_rows
from ki.app.launch import launch_insertion
from ki.domain.matters.matter_list import read_matter_list
from ki.store.matters import default_project_id, import_matters, list_matters

W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
R = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
LIST = """reference,title,client,client_number,opened,closed,practice_area,responsible,aliases
104233-0007,Lease of Unit 4,Harbour Crest Holdings Limited,104233,2022-03-01,,real_estate,Grace Marston,104233/7
104233-0008,Project Falcon,Harbour Crest Holdings Limited,104233,2022-05-01,,corporate_ma,Hugo Whitmore,
2023.0145,Huur Westpoort,Polder Holding B.V.,27401,05-02-2023,,real_estate,mr. Bas de Graaf,2023-0145
"""


def docx(body: list[str], header: str = "", footer: str = "") -> bytes:
    """A minimal DOCX with a body and optional header1/footer1 parts."""
    def paras(lines):
        return "".join(f'<w:p><w:r><w:t xml:space="preserve">{ln}</w:t></w:r></w:p>' for ln in lines)
    rels, refs, parts = [], "", {}
    for kind, value, rid in (("header", header, "rId3"), ("footer", footer, "rId4")):
        if value:
            tag = "hdr" if kind == "header" else "ftr"
            parts[f"word/{kind}1.xml"] = f'<w:{tag} xmlns:w="{W}">{paras([value])}</w:{tag}>'
            rels.append(f'<Relationship Id="{rid}" Type="{R}/{kind}" Target="{kind}1.xml"/>')
            refs += f'<w:{kind}Reference xmlns:r="{R}" w:type="default" r:id="{rid}"/>'
    ct = ('<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
          '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
          '<Default Extension="xml" ContentType="application/xml"/>'
          '<Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.'
          'wordprocessingml.document.main+xml"/>'
          + "".join(f'<Override PartName="/{n}" ContentType="application/vnd.openxmlformats-officedocument.'
                    f'wordprocessingml.{n.split("/")[1][:-5]}+xml"/>' for n in parts) + "</Types>")
    files = {"[Content_Types].xml": ct,
             "_rels/.rels": ('<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
                             f'<Relationship Id="rId1" Type="{R}/officeDocument" Target="word/document.xml"/>'
                             '</Relationships>'),
             "word/_rels/document.xml.rels": ('<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/'
                                              f'relationships">{"".join(rels)}</Relationships>'),
             "word/document.xml": (f'<w:document xmlns:w="{W}" xmlns:r="{R}"><w:body>{paras(body)}'
                                   f"<w:sectPr>{refs}</w:sectPr></w:body></w:document>"), **parts}
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, data in files.items():
            z.writestr(name, data)
    return buf.getvalue()


def eml(subject: str, body: str, message_id: str) -> bytes:
    return ("From: Jan <jan@client.example>\r\nTo: Grace <grace@firm.example>\r\nSubject: " + subject +
            "\r\nDate: Tue, 05 Jul 2022 10:00:00 +0100\r\nMessage-ID: <" + message_id +
            ">\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n" + body + "\r\n").encode()


ESTATE: dict[str, bytes | str] = {
    # imported references in any part of a file
    "DMS Export/#4811234v1 - Lease.docx": docx(["LEASE", "The Landlord lets the Premises."],
                                               footer="LON\\4811234.1 | 104233-0007/4811234v1"),
    "DMS Export/#4811240v2 - Note.docx": docx(["Attendance note", "Call with the client."],
                                              header="Our ref: RJW/104233/7"),
    "DMS Export/4811300_1.eml": eml("RE: Falcon – SPA [#104233-0008]", "Thanks, see you tomorrow.", "m1@x"),
    "DMS Export/letter.txt": "Polder Holding B.V.\nOns kenmerk: KH/2023.0145\nGeachte heer,\nBijgaand de stukken.",
    # client number in a folder name (client with one matter), client name (ditto), a client with two matters
    "Clients/Polder Holding (27401)/memo.txt": "Notitie\nBespreking met de directie.",
    "Inbox/fax.txt": "TELEFAX\nFrom: POLDER HOLDING BV\nPlease call us back.",
    "Clients/Harbour Crest (104233)/unsorted.txt": "Harbour Crest Holdings Ltd\nPlease file this.",
    # the folder a matter's files share
    "Matters/Harbour Crest - Falcon/a.txt": "Our ref: 104233-0008\nDraft heads of terms.",
    "Matters/Harbour Crest - Falcon/b.txt": "Our ref: 104233-0008\nBoard minutes.",
    "Matters/Harbour Crest - Falcon/c.txt": "Share purchase agreement draft 1.",
    # the firm's formats for a reference the list does not hold; DMS numbers and others that are not matters
    "Post Room/Scan_0001.txt": "Your ref: 2024.0999\nDear Sirs, we enclose our invoice.",
    "Post Room/Scan_0002.txt": "See #4811234v3 and 4811234_3.docx; invoice 2024-0117; KvK 27401000.",
    "Post Room/Scan_0003.txt": "Harbour Crest Holdings Limited\nYour ref: 104233-0008\nSigned minutes enclosed.",
    "Precedents/Precedent - NDA.txt": "CONFIDENTIALITY AGREEMENT\nBETWEEN [PARTY A] and [PARTY B]",
}
EXPECTED = {
    "DMS Export/#4811234v1 - Lease.docx": "104233-0007", "DMS Export/#4811240v2 - Note.docx": "104233-0007",
    "DMS Export/4811300_1.eml": "104233-0008", "DMS Export/letter.txt": "2023.0145",
    "Clients/Polder Holding (27401)/memo.txt": "2023.0145", "Inbox/fax.txt": "2023.0145",
    "Clients/Harbour Crest (104233)/unsorted.txt": None, "Matters/Harbour Crest - Falcon/a.txt": "104233-0008",
    "Matters/Harbour Crest - Falcon/b.txt": "104233-0008", "Matters/Harbour Crest - Falcon/c.txt": "104233-0008",
    "Post Room/Scan_0001.txt": "2024.0999", "Post Room/Scan_0002.txt": None,
    "Post Room/Scan_0003.txt": "104233-0008", "Precedents/Precedent - NDA.txt": None,
}


def write(root: Path, files: dict[str, bytes | str]) -> None:
    for rel, data in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data if isinstance(data, bytes) else data.encode())


def test_import_updates_never_duplicates_and_reports_bad_rows(ctx, tmp_path, monkeypatch):
    path = tmp_path / "matters.csv"
    path.write_text(LIST, encoding="utf-8")
    rows, errors = read_matter_list(path)
    assert errors == [] and [r.reference for _, r in rows] == ["104233-0007", "104233-0008", "2023.0145"]
    with ctx.db.engine.connect() as conn:
        project = default_project_id(conn)
    first = import_matters(ctx.db, project_id=project, rows=rows)
    assert (first.created, first.updated, first.unchanged, first.refused) == (3, 0, 0, [])
    changed = tmp_path / "changed.jsonl"
    changed.write_text("\n".join([
        json.dumps({"reference": "104233-0007", "title": "Lease of Unit 4 (renewal)", "client": "Harbour Crest "
                    "Holdings Limited", "client_number": "104233", "aliases": ["104233/7", "1042330007"]}),
        json.dumps({"matter": "2023.0145", "title": "Huur Westpoort", "client_name": "Polder Holding B.V.",
                    "client_no": "27401", "opened": "2023-02-05", "practice_area": "real_estate",
                    "responsible": "mr. Bas de Graaf", "aliases": "2023-0145"}),
        json.dumps({"reference": "2024-0001", "aliases": ["104233/7"]}),   # an alias an earlier row holds
        json.dumps({"reference": "2024-0002", "aliases": ["104233-0008"]}),  # another matter's reference
        "not json", json.dumps({"title": "no reference"})]), encoding="utf-8")
    rows2, errors2 = read_matter_list(changed)
    assert [(e.line, e.message.split(":")[0]) for e in errors2] == [(5, "not JSON"), (6, "reference")]
    again = import_matters(ctx.db, project_id=project, rows=rows2)
    assert (again.created, again.updated, again.unchanged) == (0, 1, 1)
    assert again.refused == [(3, "104233/7 is already on line 1 of the list"),
                             (4, "2024-0002: a reference or alias of it is matter 104233-0008's")]
    with ctx.db.engine.connect() as conn:
        matters = list_matters(conn, project_id=project)
        assert conn.execute(text("SELECT count(*) FROM matter")).scalar_one() == 3
    lease = next(m for m in matters if m["reference"] == "104233-0007")
    assert lease["title"] == "Lease of Unit 4 (renewal)" and lease["aliases"] == ["104233/7", "1042330007"]
    assert lease["imported"] and lease["client"] == "Harbour Crest Holdings Limited"
    polder = next(m for m in matters if m["reference"] == "2023.0145")
    assert (polder["opened"], polder["client_number"], polder["responsible"]) == ("2023-02-05", "27401",
                                                                                  "mr. Bas de Graaf")
    # the command line: the same list again changes nothing; list --json shows the three
    ki = str(Path(sys.executable).with_name("ki"))
    cli = subprocess.run([ki, "matters", "import", str(path)], capture_output=True, text=True, timeout=120)
    assert cli.returncode == 0, cli.stderr
    assert "0 created, 1 updated, 2 unchanged, 0 refused" in cli.stdout  # the title goes back to the CSV's
    listed = subprocess.run([ki, "matters", "list", "--json"], capture_output=True, text=True, timeout=120)
    assert [json.loads(x)["reference"] for x in listed.stdout.splitlines()] == ["104233-0007", "104233-0008",
                                                                               "2023.0145"]


def test_classify_by_imported_references_client_numbers_names_folders_and_formats(make_ctx, tmp_path,
                                                                                   monkeypatch):
    monkeypatch.setenv("KI_FIRM__NAME", "Ashdown Pryce LLP")
    monkeypatch.setenv("KI_FIRM__MATTER_REFERENCE_PATTERNS", json.dumps(["NNNNNN-NNNN", "YYYY.NNNN"]))
    monkeypatch.delenv("KI_LLM_BASE_URL", raising=False)
    ctx = make_ctx(workers=3)
    root = tmp_path / "estate"
    write(root, ESTATE)
    (tmp_path / "matters.csv").write_text(LIST, encoding="utf-8")
    rows, _ = read_matter_list(tmp_path / "matters.csv")
    with ctx.db.engine.connect() as conn:
        import_matters(ctx.db, project_id=default_project_id(conn), rows=rows)
    sid = register_local_source(ctx, root)
    scan_source(ctx, sid)
    summary = launch_insertion(ctx, source_id=sid, workers=3, wait_for_retries_seconds=30)
    assert summary.status == "completed" and summary.counters.quarantined == 0
    got = {r["path"]: (None if r["matter_placeholder"] else r["matter_reference"]) for r in export_rows(ctx.db)
           if not r["embedded"]}
    assert got == EXPECTED
    with ctx.db.engine.connect() as conn:
        found = {r.reference: r.imported for r in conn.execute(text("SELECT reference, imported FROM matter "
                                                                    "WHERE NOT placeholder"))}
    # no matter from a DMS number, an invoice number, a register number or an alias spelling
    assert found == {"104233-0007": True, "104233-0008": True, "2023.0145": True, "2024.0999": False}
