"""An estate under construction: entities, matters, files; rendering, truth.json, the matter list, ``--check``.

Subclasses (:mod:`bench.estates.english`, :mod:`bench.estates.dutch`) create the firm, the parties
and the matters; :meth:`Estate.write` renders every file, sets mtimes, and writes ``truth.json``
(schema of ``shared/corpus/estate-dev/README.md``) and ``practice_management.csv``.
"""

from __future__ import annotations

import csv
import datetime as dt
import hashlib
import io
import json
import os
import random
from typing import Any

from bench.estates.model import (
    PRACTICE_AREAS,
    Entity,
    FileSpec,
    Matter,
    Person,
    Thread,
    ancestors,
    ontology_truth,
)
from bench.estates.render import docx_bytes, eml_bytes, extract_text, pdf_bytes, pdf_date, pdf_lines

SCHEMA_VERSION = 1
MATTER_LIST = "practice_management.csv"
MATTER_LIST_FIELDS = ["reference", "title", "client", "client_number", "opened", "closed", "practice_area",
                      "responsible", "aliases"]


class Estate:
    """Registry of entities, matters and files of one generated estate.

    Args:
        seed: the random seed (same seed and matter count ⇒ byte-identical output).
        n_matters: how many matters.
        name: generator name recorded in truth.json.
    """

    name = "estate"
    version = "1.0.0"
    tz: dt.tzinfo = dt.UTC

    def __init__(self, seed: int, n_matters: int):
        self.seed, self.n = seed, n_matters
        self.rng = random.Random(f"{self.name}:{seed}")
        self.entities: dict[str, Entity] = {}
        self.files: list[FileSpec] = []
        self._paths: dict[str, FileSpec] = {}
        self.matters: list[Matter] = []
        self.threads: list[Thread] = []
        self.homonyms: list[tuple[str, str]] = []
        self.used: set[str] = set()
        self._n = {"doc": 0, "thread": 0, "entity": 0}
        self.firm: Entity
        self.firm_name = ""
        self.firm_aliases: list[str] = []
        self.letterhead = ""
        self.lawyers: list[Person] = []
        self.reference_patterns: list[str] = []
        self.date_order = "dmy"
        self.export_date: dt.date | None = None  # a DMS export sets every mtime to the export day
        #: Spellings of the firm its documents use but its configuration does not list ("A & B", "A B Solicitors").
        self.firm_variants: list[str] = []

    # ------------------------------------------------------------ registry
    def next_id(self, kind: str) -> str:
        self._n[kind] += 1
        return {"doc": "D{:05d}", "thread": "T{:04d}", "entity": "E{:04d}"}[kind].format(self._n[kind])

    def add_entity(self, kind: str, name: str, variants: list[str] | None = None, **kw: Any) -> Entity:
        e = Entity(self.next_id("entity"), kind, name, variants, **kw)
        self.entities[e.id] = e
        return e

    def unique(self, make, tries: int = 200) -> str:
        """A value from ``make()`` not used before in this estate."""
        for _ in range(tries):
            v = make()
            if v not in self.used:
                self.used.add(v)
                return v
        raise RuntimeError("name pool exhausted")

    def register(self, spec: FileSpec) -> FileSpec:
        key = spec.path.casefold()
        if key in self._paths:
            raise RuntimeError(f"path collision: {spec.path}")
        self._paths[key] = spec
        self.files.append(spec)
        if spec.matter is not None:
            spec.matter.files.append(spec)
        return spec

    def path_taken(self, path: str) -> bool:
        return path.casefold() in self._paths

    def new_thread(self, matter: Matter, subject: str) -> Thread:
        th = Thread(self.next_id("thread"), matter, subject)
        matter.threads.append(th)
        self.threads.append(th)
        return th

    # ------------------------------------------------------------ rendering
    def render_one(self, s: FileSpec) -> bytes:
        if s.dup_of is not None:
            return s.dup_of.data
        h = int(hashlib.md5(s.path.encode()).hexdigest()[:6], 16)
        when = dt.datetime(s.date.year, s.date.month, s.date.day, 8 + h % 10, h % 60, tzinfo=self.tz)
        if s.fmt == "docx":
            meta = {"title": s.title, "author": s.meta.get("author", self.lawyers[0].full),
                    "created": when.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:00Z"), "revision": s.order,
                    "zipdate": (when.year, when.month, when.day, when.hour, when.minute, 0),
                    "track": bool(s.meta.get("track"))}
            return docx_bytes(s.doc, meta)
        if s.fmt == "pdf":
            return pdf_bytes(pdf_lines(s.doc), {"title": s.title, "author": s.meta.get("author", ""),
                                                "producer": s.meta.get("producer", "PDF export"),
                                                "date": pdf_date(when)})
        if s.fmt == "eml":
            atts = [(os.path.basename(a.path), a.data, a.fmt) for a in s.attachments]
            return eml_bytes(s.email, "\n".join(s.doc.lines()) + "\n", atts)
        text = "\n".join(s.doc.lines()) + "\n"
        return (text.replace("\n", "\r\n") if s.crlf else text).encode(s.encoding)

    def write(self, out_dir: str) -> dict[str, Any]:
        """Render every file into ``out_dir/estate``, write truth.json and the matter list; return the truth."""
        order = ([s for s in self.files if s.dup_of is None and s.fmt != "eml"]
                 + [s for s in self.files if s.dup_of is None and s.fmt == "eml"]
                 + [s for s in self.files if s.dup_of is not None])
        for s in order:
            s.data = self.render_one(s)
            s.text = s.dup_of.text if s.dup_of is not None else extract_text(s.fmt, s.data, s.encoding)
        root = os.path.join(out_dir, "estate")
        for s in self.files:
            p = os.path.join(root, *s.path.split("/"))
            os.makedirs(os.path.dirname(p), exist_ok=True)
            with open(p, "wb") as fh:
                fh.write(s.data)
            day = self.export_date or s.mtime or s.date
            ts = dt.datetime(day.year, day.month, day.day, 12, 0, tzinfo=dt.UTC).timestamp()
            os.utime(p, (ts, ts))
        truth = self.truth()
        with open(os.path.join(out_dir, "truth.json"), "w", encoding="utf-8") as fh:
            json.dump(truth, fh, ensure_ascii=False, indent=1, sort_keys=False)
            fh.write("\n")
        with open(os.path.join(out_dir, MATTER_LIST), "w", encoding="utf-8", newline="") as fh:
            fh.write(self.matter_list_csv())
        return truth

    def matter_list_csv(self) -> str:
        """The practice-management export: one row per matter (``ki matters import`` reads it)."""
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=MATTER_LIST_FIELDS, lineterminator="\n")
        w.writeheader()
        for m in self.matters:
            w.writerow({"reference": m.ref, "title": m.title, "client": m.client.name, "client_number": m.client_number,
                        "opened": m.opened.isoformat(), "closed": m.closed.isoformat() if m.closed else "",
                        "practice_area": m.area, "responsible": m.lawyers[0].full, "aliases": ";".join(m.aliases)})
        return buf.getvalue()

    # ------------------------------------------------------------ truth
    def evidence(self, s: FileSpec) -> str | None:
        """Why the file's matter is knowable (README ``matter_evidence``)."""
        m = s.matter
        if m is None:
            return s.evidence_hint
        refs = [m.ref, *m.aliases]
        if any(r in s.path for r in refs):
            return "path"
        if any(r in s.text for r in refs):
            return "content_reference"
        if any(c in s.text for c in m.case_numbers):
            return "case_number"
        if m.folder and s.path.startswith(m.folder + "/") and not m.x.get("shared_folder"):
            return "folder"
        th = s.thread
        if th is not None and any(x is not s and any(r in x.text or r in x.path for r in refs)
                                  for x in th.messages):
            return "thread"
        if s.evidence_hint:
            return s.evidence_hint
        # the parties decide when the client and the other side are both named, or the client has one matter
        named = any(v in s.text for v in m.client.variants if len(v) > 3)
        other = m.cp is not None and any(v in s.text for v in m.cp.variants if len(v) > 3)
        if named and (other or sum(1 for x in self.matters if x.client is m.client) == 1):
            return "parties"
        return "none"

    def file_truth(self, s: FileSpec) -> dict[str, Any]:
        src = s.dup_of or s
        doc = src.doc
        evidence = self.evidence(s)
        acceptable = s.acceptable or [s.matter.ref if s.matter else None]
        if evidence == "none" and None not in acceptable:
            acceptable = [*acceptable, None]
        rec: dict[str, Any] = {
            "path": s.path, "format": s.fmt, "size": len(s.data), "sha256": hashlib.sha256(s.data).hexdigest(),
            "matter_reference": s.matter.ref if s.matter else None, "matter_acceptable": acceptable,
            "matter_evidence": evidence, "doc_type": src.doc_type, "doc_type_acceptable": src.doc_type_ok,
            "doc_type_ancestors": ancestors(src.doc_type), "language": src.lang, "doc_date": src.date.isoformat(),
            "title": src.title, "parties": doc.party_truth(), "identifiers": doc.idents,
            "document_id": s.document_id, "version_order": s.order, "version_id": f"{s.document_id}.v{s.order}",
            "rendition": src.rendition}
        if s.dup_of is not None:
            rec["identity"] = {"duplicate_of": s.dup_of.path}
        elif s.anchor is not None:
            rec["identity"] = {"version_of": s.anchor.path, "order": s.order}
        else:
            rec["identity"] = "new"
        rec["redline_against"] = src.redline_against.path if src.redline_against is not None else None
        rec["relations"] = [] if s.dup_of is not None else [{"type": t, "target": x.path} for t, x in src.relations]
        rec["thread_id"] = src.thread.id if src.thread is not None else None
        e = src.email
        rec["email"] = None if e is None else {
            "message_id": e["message_id"], "in_reply_to": e["in_reply_to"], "references": e["references"],
            "from": f"{e['from_name']} <{e['from_addr']}>", "to": [f"{n} <{a}>" for n, a in e["to"]],
            "cc": [f"{n} <{a}>" for n, a in e["cc"]], "subject": e["subject"], "sent_at": e["dt"].isoformat(),
            "attachments": [os.path.basename(a.path) for a in src.attachments]}
        if s.fmt == "docx":
            revs = doc.revisions()
            rec["revisions"] = revs
            rec["comments"] = [{"author": c["author"], "date": c["date"], "text": c["text"]} for c in doc.comments]
            rec["decisions"] = doc.decisions if revs else None
        else:
            rec["revisions"] = rec["comments"] = rec["decisions"] = None
        if s.fmt == "txt":
            rec["encoding"] = s.encoding
        tags = set(s.tags)
        for p in doc.party_truth():
            ent = self.entities[p["entity"]]
            if "homonym" in ent.tags:
                tags.add("homonym_company")
            if p["name"] != p["canonical"] and p["kind"] == "company" and "law_firm" not in ent.tags:
                tags.add("legal_form_variant")
        rec["tags"] = sorted(tags)
        return rec

    def truth(self) -> dict[str, Any]:
        files = {s.path: self.file_truth(s) for s in sorted(self.files, key=lambda s: s.path)}

        def ent(e: Entity | None) -> dict[str, str] | None:
            return None if e is None else {"entity": e.id, "name": e.name}

        matters = [{
            "reference": m.ref, "title": m.title, "kind": m.kind, "practice_area": m.area, "language": m.lang,
            "layout": m.layout, "folder": m.folder, "folder_has_reference": m.ref in m.folder,
            "opened": m.opened.isoformat(), "client": ent(m.client), "counterparty": ent(m.cp),
            "opposing_counsel": ent(m.oc), "court": ent(m.court),
            "other_parties": [ent(m.target)] if m.target is not None else [], "case_numbers": m.case_numbers,
            "lawyers": [p.full for p in m.lawyers], "file_count": len(m.files), "tags": m.tags,
            "client_number": m.client_number, "aliases": m.aliases} for m in self.matters]
        docs: dict[str, dict[str, Any]] = {}
        for s in sorted(self.files, key=lambda s: s.path):
            src = s.dup_of or s
            d = docs.setdefault(s.document_id, {"document_id": s.document_id, "matter_reference":
                                                s.matter.ref if s.matter else None, "doc_type": src.doc_type,
                                                "title": src.title, "versions": {}})
            v = d["versions"].setdefault(s.order, {"order": s.order, "files": [], "duplicates": []})
            (v["duplicates"] if s.dup_of is not None else v["files"]).append(s.path)
        documents = [{**docs[k], "versions": [docs[k]["versions"][o] for o in sorted(docs[k]["versions"])]}
                     for k in sorted(docs)]
        threads = [{"thread_id": t.id, "matter_reference": t.matter.ref, "subject": t.subject,
                    "messages": [x.path for x in t.messages]} for t in self.threads]
        f = self.firm
        return {
            "schema_version": SCHEMA_VERSION,
            "generator": {"name": self.name, "version": self.version, "seed": self.seed, "matters": self.n},
            "estate_root": "estate",
            "firm": {"entity": f.id, "name": self.firm_name, "aliases": self.firm_aliases,
                     "letterhead": self.letterhead, "variants": self.firm_variants,
                     "identifiers": f.identifiers, "address": f.address,
                     "lawyers": [{"name": p.full, "role": p.function, "email": p.email} for p in self.lawyers],
                     "matter_reference_patterns": self.reference_patterns, "date_order": self.date_order},
            "ontology": ontology_truth(),
            "practice_areas": [{"id": a[0], "label": {"en": a[1], "de": a[2], "nl": a[3]}} for a in PRACTICE_AREAS],
            "roles": ["client", "counterparty", "advisor", "court", "other"],
            "identifier_types": ["matter_reference", "external_reference", "case_number", "register_number",
                                 "invoice_number", "vat_id", "document_number"],
            "relation_types": ["annex_of", "responds_to", "references", "amends"],
            "matters": matters,
            "entities": [e.truth() for e in sorted(self.entities.values(), key=lambda e: e.id)],
            "homonyms": [list(p) for p in self.homonyms],
            "threads": threads, "documents": documents, "files": files, "stats": stats_of(files, len(threads)),
        }


def stats_of(files: dict[str, dict[str, Any]], n_threads: int) -> dict[str, Any]:
    """The ``stats`` block of truth.json."""
    stats: dict[str, Any] = {"files": len(files), "by_format": {}, "by_doc_type": {}, "identity":
                             {"new": 0, "version": 0, "duplicate": 0}, "relations": {}, "threads": n_threads,
                             "docx_with_decisions": 0, "decisions": 0, "tags": {}, "matter_evidence": {}}

    def bump(key: str, value: str) -> None:
        stats[key][value] = stats[key].get(value, 0) + 1

    for rec in files.values():
        bump("by_format", rec["format"])
        bump("by_doc_type", rec["doc_type"] or "(untyped)")
        bump("matter_evidence", str(rec["matter_evidence"]))
        idt = rec["identity"]
        stats["identity"]["new" if idt == "new" else "version" if "version_of" in idt else "duplicate"] += 1
        for r in rec["relations"]:
            bump("relations", r["type"])
        if rec["decisions"]:
            stats["docx_with_decisions"] += 1
            stats["decisions"] += len(rec["decisions"])
        for t in rec["tags"]:
            bump("tags", t)
    for k in ("by_format", "by_doc_type", "relations", "tags", "matter_evidence"):
        stats[k] = dict(sorted(stats[k].items()))
    return stats


def check(out_dir: str) -> list[str]:
    """Problems of a written estate: every party name, identifier, reference the truth names must be in the
    file's text, sizes and hashes must match, every relation target must exist."""
    with open(os.path.join(out_dir, "truth.json"), encoding="utf-8") as fh:
        truth = json.load(fh)
    problems = []
    for path, rec in truth["files"].items():
        p = os.path.join(out_dir, "estate", *path.split("/"))
        data = open(p, "rb").read()
        if hashlib.sha256(data).hexdigest() != rec["sha256"]:
            problems.append(f"{path}: sha256 differs")
        text = " ".join(extract_text(rec["format"], data, rec.get("encoding") or "utf-8").split())
        for party in rec["parties"]:
            if " ".join(party["name"].split()) not in text:
                problems.append(f"{path}: party {party['name']!r} not in the text")
        for ident in rec["identifiers"]:
            if ident["value"] not in text:
                problems.append(f"{path}: identifier {ident['value']!r} not in the text")
        for r in rec["relations"]:
            if r["target"] not in truth["files"]:
                problems.append(f"{path}: relation target {r['target']} missing")
        if rec["matter_evidence"] == "content_reference" and rec["matter_reference"] not in text:
            aliases = next((m["aliases"] for m in truth["matters"] if m["reference"] == rec["matter_reference"]), [])
            if not any(a in text for a in aliases):
                problems.append(f"{path}: content reference not in the text")
    return problems
