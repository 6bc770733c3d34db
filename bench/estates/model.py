"""The content model of a synthetic estate: people, entities, documents with truth bookkeeping, files.

A :class:`Doc` is a list of paragraphs plus what truth.json says follows from them: every party
name is written through :meth:`Doc.name` and every identifier through :meth:`Doc.ident`, so the
truth is recorded at the moment the text is written. Paragraph segments are plain strings or
tuples: ``("ins", text, rev)``, ``("del", text, rev)``, ``("b", text)``, ``("cs", comment_id)``,
``("ce", comment_id)`` with ``rev = (author, iso datetime)``.
"""

from __future__ import annotations

import datetime as dt
import random
import re
import unicodedata
from dataclasses import dataclass, field
from typing import Any

# id, parent, en, de, nl, synonyms en, synonyms de, synonyms nl
ONTOLOGY = [
    ("contract", None, "Contract", "Vertrag", "Overeenkomst", ["agreement"], ["Vereinbarung"], ["contract"]),
    ("lease", "contract", "Lease", "Mietvertrag", "Huurovereenkomst", ["lease agreement", "underlease",
     "tenancy agreement"], ["Gewerbemietvertrag"], ["huurcontract", "huurovereenkomst bedrijfsruimte"]),
    ("spa", "contract", "Share purchase agreement", "Anteilskaufvertrag", "Koopovereenkomst aandelen",
     ["SPA", "share sale agreement"], ["Unternehmenskaufvertrag"], ["aandelenkoopovereenkomst", "SPA"]),
    ("nda", "contract", "Non-disclosure agreement", "Vertraulichkeitsvereinbarung", "Geheimhoudingsovereenkomst",
     ["confidentiality agreement", "NDA"], ["NDA"], ["NDA", "vertrouwelijkheidsovereenkomst"]),
    ("employment", "contract", "Employment contract", "Arbeitsvertrag", "Arbeidsovereenkomst",
     ["service agreement", "contract of employment"], ["Anstellungsvertrag"], ["arbeidscontract"]),
    ("supply_agreement", "contract", "Supply agreement", "Liefervertrag", "Leveringsovereenkomst",
     ["master services agreement", "MSA", "framework agreement"], ["Rahmenvertrag"],
     ["raamovereenkomst", "dienstverleningsovereenkomst"]),
    ("termination_agreement", "contract", "Termination agreement", "Aufhebungsvertrag",
     "Beëindigingsovereenkomst", ["settlement agreement (employment)", "separation agreement"],
     ["Abwicklungsvertrag"], ["vaststellingsovereenkomst beëindiging"]),
    ("settlement", "contract", "Settlement agreement", "Vergleich", "Vaststellingsovereenkomst",
     ["Tomlin order", "settlement deed"], ["Vergleichsvereinbarung"], ["schikking", "minnelijke regeling"]),
    ("amendment", "contract", "Amendment", "Nachtrag", "Allonge", ["deed of variation", "variation agreement",
     "amendment agreement", "side letter"], ["Änderungsvereinbarung"], ["addendum", "wijzigingsovereenkomst"]),
    ("engagement_letter", "contract", "Engagement letter", "Mandatsvereinbarung", "Opdrachtbevestiging",
     ["letter of engagement", "client care letter"], ["Mandatsvertrag"], ["opdrachtovereenkomst"]),
    ("term_sheet", "contract", "Term sheet", "Absichtserklärung", "Intentieverklaring",
     ["heads of terms", "letter of intent"], ["Letter of Intent"], ["term sheet", "intentieovereenkomst"]),
    ("correspondence", None, "Correspondence", "Korrespondenz", "Correspondentie", ["communication"],
     ["Schriftverkehr"], ["briefwisseling"]),
    ("letter", "correspondence", "Letter", "Schreiben", "Brief", ["cover letter"], ["Brief"], ["begeleidende brief"]),
    ("email", "correspondence", "Email", "E-Mail", "E-mail", ["e-mail", "message"], ["Mail"], ["bericht"]),
    ("demand_letter", "correspondence", "Demand letter", "Aufforderungsschreiben", "Sommatiebrief",
     ["letter before action", "letter before claim"], ["Zahlungsaufforderung"], ["sommatie", "ingebrekestelling"]),
    ("court", None, "Court document", "Gerichtsdokument", "Processtuk", ["litigation document"],
     ["Prozessunterlagen"], ["procesdocument"]),
    ("statement_of_claim", "court", "Statement of claim", "Klageschrift", "Dagvaarding",
     ["particulars of claim", "claim form", "ET1"], ["Klage"], ["verzoekschrift", "inleidende dagvaarding"]),
    ("statement_of_defence", "court", "Defence", "Klageerwiderung", "Conclusie van antwoord",
     ["statement of defence", "ET3 response", "grounds of resistance"], [], ["verweerschrift"]),
    ("brief", "court", "Brief", "Schriftsatz", "Conclusie", ["reply", "skeleton argument", "submission"],
     ["Replik"], ["conclusie van repliek", "akte"]),
    ("court_order", "court", "Court order", "Beschluss", "Beschikking", ["order", "directions"],
     ["Verfügung"], ["tussenvonnis", "rolbeschikking"]),
    ("judgment", "court", "Judgment", "Urteil", "Vonnis", ["approved judgment"], ["Endurteil"],
     ["uitspraak", "arrest"]),
    ("corporate", None, "Corporate records", "Gesellschaftsrecht", "Vennootschapsrecht", ["corporate documents"],
     [], ["vennootschapsstukken"]),
    ("register_extract", "corporate", "Register extract", "Handelsregisterauszug", "Uittreksel Handelsregister",
     ["Companies House extract", "company search"], ["Registerauszug"], ["KvK-uittreksel", "uittreksel"]),
    ("minutes", "corporate", "Minutes", "Protokoll", "Notulen", ["board minutes", "minutes of meeting"],
     ["Niederschrift"], ["notulen van de vergadering"]),
    ("shareholder_resolution", "corporate", "Shareholder resolution", "Gesellschafterbeschluss",
     "Aandeelhoudersbesluit", ["written resolution", "shareholders' resolution"], [],
     ["besluit buiten vergadering", "besluit van de algemene vergadering"]),
    ("articles", "corporate", "Articles of association", "Satzung", "Statuten", ["articles"],
     ["Gesellschaftsvertrag"], ["statutenwijziging"]),
    ("power_of_attorney", "corporate", "Power of attorney", "Vollmacht", "Volmacht", ["authority"],
     [], ["procuratie"]),
    ("finance", None, "Finance", "Finanzen", "Financiën", ["billing"], [], ["facturatie"]),
    ("invoice", "finance", "Invoice", "Rechnung", "Declaratie", ["bill", "fee note"], [], ["factuur", "nota"]),
    ("payment_reminder", "finance", "Payment reminder", "Zahlungserinnerung", "Betalingsherinnering",
     ["reminder"], ["Mahnung"], ["aanmaning"]),
    ("internal", None, "Internal work product", "Interne Arbeitsunterlagen", "Interne stukken", ["work product"],
     [], ["intern"]),
    ("memo", "internal", "File note", "Aktenvermerk", "Dossiernotitie", ["attendance note", "memorandum"],
     ["Vermerk"], ["memo", "notitie"]),
    ("legal_opinion", "internal", "Legal opinion", "Gutachten", "Juridisch advies", ["advice note", "opinion"],
     [], ["adviesnota", "memo juridisch advies"]),
    ("dd_report", "internal", "Due diligence report", "Due-Diligence-Bericht", "Due diligence rapport",
     ["legal due diligence report", "DD report"], [], ["boekenonderzoek", "DD-rapport"]),
]
ONT_PARENT = {n[0]: n[1] for n in ONTOLOGY}
PRACTICE_AREAS = [("litigation", "Litigation", "Prozessführung", "Procesvoering"),
                  ("employment", "Employment", "Arbeitsrecht", "Arbeidsrecht"),
                  ("real_estate", "Real estate", "Immobilienrecht", "Vastgoed"),
                  ("corporate_ma", "Corporate & M&A", "Gesellschaftsrecht & M&A", "Ondernemingsrecht & M&A"),
                  ("commercial", "Commercial contracts", "Vertragsrecht", "Contractenrecht")]
KIND_AREA = {"litigation": "litigation", "employment": "employment", "lease": "real_estate", "ma": "corporate_ma",
             "corporate": "corporate_ma", "commercial": "commercial"}


def ancestors(node: str | None) -> list[str]:
    """Root → node ids of an ontology node ([] for None)."""
    out: list[str] = []
    while node:
        out.insert(0, node)
        node = ONT_PARENT.get(node)
    return out


def ontology_truth() -> dict[str, Any]:
    """The ``ontology`` object of truth.json (labels and synonyms in en, de and nl)."""
    return {"version": "estates-ontology-1", "nodes": [
        {"id": n[0], "parent": n[1], "label": {"en": n[2], "de": n[3], "nl": n[4]},
         "synonyms": {"en": n[5], "de": n[6], "nl": n[7]}} for n in ONTOLOGY]}


def ascii_slug(s: str, sep: str = "-") -> str:
    """``Harbour Crest Ltd`` → ``harbour-crest-ltd``."""
    s = unicodedata.normalize("NFKD", s.replace("ß", "ss")).encode("ascii", "ignore").decode().lower()
    return re.sub(r"[^a-z0-9]+", sep, s).strip(sep)


def safe_name(name: str) -> str:
    """A file-system-safe file or folder name (what an export does with ``/ : * ? " < > |``)."""
    name = name.replace("/", "_").replace(":", "_")
    name = re.sub(r'[*?"<>|]', "", name)
    return unicodedata.normalize("NFC", " ".join(name.split())).strip(" .")


class Person:
    """A natural person who writes or signs (a party only when :class:`Entity` wraps them)."""

    def __init__(self, first: str, last: str, gender: str, title: str = "", function: str = "", email: str = ""):
        self.first, self.last, self.gender, self.title = first, last, gender, title
        self.function, self.email = function, email

    @property
    def full(self) -> str:
        return f"{self.title + ' ' if self.title else ''}{self.first} {self.last}"

    @property
    def initials(self) -> str:
        return (self.first[:1] + self.last[:1]).upper()


class Entity:
    """Anything that can be a party: a company, a person, a court, a law firm (tag ``law_firm``)."""

    def __init__(self, eid: str, kind: str, name: str, variants: list[str] | None = None, **kw: Any):
        self.id, self.kind, self.name = eid, kind, name
        self.variants = list(variants or [name])
        if name not in self.variants:
            self.variants.insert(0, name)
        self.identifiers: list[dict[str, str]] = []
        self.people: list[Person] = []
        self.street = self.city = self.postcode = self.country = self.domain = ""
        self.tags: list[str] = []
        self.register: dict[str, str] | None = None
        self.__dict__.update(kw)

    def pick(self, rng: random.Random) -> str:
        """A spelling: the canonical name mostly, a variant sometimes."""
        if len(self.variants) == 1 or rng.random() < 0.7:
            return self.name
        return rng.choice(self.variants[1:])

    @property
    def address(self) -> str:
        if self.country == "England and Wales":  # "1 King Street, London EC2V 8AU"
            return f"{self.street}, {self.city} {self.postcode}".strip(", ")
        return f"{self.street}, {self.postcode} {self.city}".strip(", ")

    def truth(self) -> dict[str, Any]:
        former = [v for v in getattr(self, "former_names", []) if v not in self.variants]
        d: dict[str, Any] = {"id": self.id, "kind": self.kind, "name": self.name, "variants": self.variants + former,
                             "identifiers": self.identifiers}
        if self.kind in ("company", "person"):
            d["address"], d["country"] = self.address, self.country
        if self.tags:
            d["tags"] = self.tags
        return d


Rev = tuple[str, str]


def seg_text(seg: Any, accepted: bool = True) -> str:
    """The text a segment contributes to the accepted (or the original) view."""
    if isinstance(seg, str):
        return seg
    if seg[0] == "ins":
        return seg[1] if accepted else ""
    if seg[0] == "del":
        return "" if accepted else seg[1]
    return seg[1] if seg[0] == "b" else ""


class Doc:
    """Paragraphs plus the truth that follows from them (see module doc)."""

    def __init__(self, lang: str, roles: dict[str, str], rng: random.Random):
        self.lang, self.roles, self.rng = lang, roles, rng
        self.paras: list[dict[str, Any]] = []
        self.header: list[str] = []
        self.footer: list[str] = []
        self.parties: dict[str, dict[str, str]] = {}
        self.pid: dict[str, list[dict[str, str]]] = {}
        self.idents: list[dict[str, str]] = []
        self.spelling: dict[str, str] = {}
        self.comments: list[dict[str, Any]] = []
        self.decisions: list[dict[str, Any]] = []
        self.entities: dict[str, Entity] = {}

    def name(self, e: Entity, variant: str | None = None) -> str:
        """Write ``e``'s name (one spelling per document unless ``variant`` says otherwise); records the party."""
        if variant is None:
            variant = self.spelling.get(e.id) or e.pick(self.rng)
            self.spelling.setdefault(e.id, variant)
        self.entities[e.id] = e
        self.parties.setdefault(e.id, {"name": variant, "entity": e.id, "role": self.roles.get(e.id, "other")})
        return variant

    def ident(self, typ: str, value: str, issuer: str | None = None, entity: Entity | None = None) -> str:
        """Write an identifier (recorded for the document and, with ``entity``, for that party)."""
        rec = {"type": typ, "value": value, **({"issuer": issuer} if issuer else {})}
        if all((d["type"], d["value"]) != (typ, value) for d in self.idents):
            self.idents.append(rec)
        if entity is not None:
            lst = self.pid.setdefault(entity.id, [])
            if all(x["value"] != value for x in lst):
                lst.append(dict(rec))
        return value

    def p(self, *segs: Any, style: str | None = None, bold: bool = False) -> dict[str, Any]:
        flat: list[Any] = []
        for s in segs:
            if isinstance(s, list):
                flat.extend(x for x in s if x != "")
            elif s not in (None, ""):
                flat.append(s)
        para = {"segs": flat, "style": style, "bold": bold}
        self.paras.append(para)
        return para

    def blank(self) -> None:
        self.paras.append({"segs": [], "style": None, "bold": False})

    def lines(self, accepted: bool = True) -> list[str]:
        return ["".join(seg_text(s, accepted) for s in p["segs"]) for p in self.paras]

    def text(self) -> str:
        return "\n".join(self.header + self.lines() + self.footer)

    def absorb(self, other: Doc) -> None:
        """Take over the parties and identifiers of a quoted document."""
        for eid, pt in other.parties.items():
            self.parties.setdefault(eid, dict(pt))
            self.entities[eid] = other.entities[eid]
        for eid, lst in other.pid.items():
            mine = self.pid.setdefault(eid, [])
            mine.extend(dict(x) for x in lst if all(y["value"] != x["value"] for y in mine))
        for d in other.idents:
            if all((x["type"], x["value"]) != (d["type"], d["value"]) for x in self.idents):
                self.idents.append(dict(d))

    def add_comment(self, author: str, date: str, text: str) -> int:
        self.comments.append({"id": len(self.comments), "author": author, "date": date, "text": text})
        return len(self.comments) - 1

    def revisions(self) -> list[dict[str, str]]:
        names = {"ins": "insertion", "del": "deletion"}
        return [{"type": names[s[0]], "text": s[1], "author": s[2][0], "date": s[2][1]}
                for p in self.paras for s in p["segs"] if isinstance(s, tuple) and s[0] in names]

    def party_truth(self) -> list[dict[str, Any]]:
        out = []
        for eid, pt in self.parties.items():
            ent = self.entities[eid]
            out.append({"name": pt["name"], "entity": eid, "canonical": ent.name,
                        "kind": "company" if ent.kind == "firm" else ent.kind, "role": pt["role"],
                        "identifiers": self.pid.get(eid, [])})
        return out


@dataclass
class Thread:
    """An e-mail thread of a matter; ``messages`` in order."""

    id: str
    matter: Any
    subject: str
    messages: list[Any] = field(default_factory=list)


@dataclass
class Matter:
    """One client matter and everything the generator decided about it."""

    idx: int
    kind: str
    layout: str
    lang: str
    opened: dt.date
    ref: str = ""
    title: str = ""
    folder: str = ""
    client: Entity | None = None
    cp: Entity | None = None
    oc: Entity | None = None
    court: Entity | None = None
    target: Entity | None = None
    client_number: str = ""
    aliases: list[str] = field(default_factory=list)
    closed: dt.date | None = None
    lawyers: list[Person] = field(default_factory=list)
    case_numbers: list[str] = field(default_factory=list)
    roles: dict[str, str] = field(default_factory=dict)
    files: list[Any] = field(default_factory=list)
    threads: list[Thread] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)
    x: dict[str, Any] = field(default_factory=dict)

    @property
    def area(self) -> str:
        return KIND_AREA[self.kind]


class FileSpec:
    """One file of the estate plus everything truth.json says about it."""

    def __init__(self, path: str, fmt: str, matter: Matter | None, doc: Doc | None, **kw: Any):
        self.path, self.fmt, self.matter, self.doc = path, fmt, matter, doc
        self.dup_of: FileSpec | None = None
        self.doc_type: str | None = None
        self.doc_type_ok: list[str | None] = []
        self.lang = doc.lang if doc is not None else None
        self.date: dt.date | None = None
        self.mtime: dt.date | None = None
        self.title = ""
        self.document_id = ""
        self.order = 1
        self.anchor: FileSpec | None = None
        self.rendition: str | None = None
        self.redline_against: FileSpec | None = None
        self.relations: list[tuple[str, FileSpec]] = []
        self.thread: Thread | None = None
        self.email: dict[str, Any] | None = None
        self.attachments: list[FileSpec] = []
        self.tags: list[str] = []
        self.acceptable: list[str | None] | None = None
        self.evidence_hint: str | None = None
        self.meta: dict[str, Any] = {}
        self.encoding = "utf-8"
        self.crlf = False
        self.data = b""
        self.text = ""
        self.__dict__.update(kw)
