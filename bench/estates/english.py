"""An English/international firm exporting from a document-management system (DMS).

Conventions, varied by seed: client-matter numbers (``104233-0007``, ``104233.0007`` or ``10423-007``),
"Our ref:" lines with or without fee-earner initials (``Our ref: RJW/104233-0007``), DMS document
numbers with versions in file names (``#4811234v3 - Title.docx``, ``4811234_3.docx``, ``4811234.3 -
Title.docx``) and footers, ``Copy of …`` / ``… - Copy (2)`` duplicates, Litera/Workshare compare PDFs,
Outlook quoted header blocks, subject tags, English courts and tribunals, Ltd/plc/LLP, Companies House
numbers, ordinal dates and draft stamps (``KH Draft (3): 16 June 2022``). Folder layouts: a DMS
workspace per matter (reference in the path), a folder per client holding several matters, one flat
export folder holding every matter, and matter folders named without the reference. Every mtime is
the export day when the seed says the export did not keep them.
"""

from __future__ import annotations

import datetime as dt
import random
from typing import Any

from bench.estates import texts_en
from bench.estates.builder import MatterBuilder
from bench.estates.estate import Estate
from bench.estates.model import Doc, Entity, Matter, Person, ascii_slug, safe_name
from bench.estates.plans import PlanMixin, build_matters

FIRST_M = "Oliver James William Henry Thomas Daniel Samuel Robert Edmund Rupert Alistair Hugo Callum Rhys".split()
FIRST_F = "Emma Charlotte Sophie Amelia Grace Hannah Eleanor Lucy Harriet Imogen Rosalind Philippa Freya Niamh".split()
LAST = ("Whitmore Hadley Ashcombe Pemberton Fairbanks Callow Redgrave Thornbury Lockwood Marston Kendrick Ogilvie "
        "Prescott Harcourt Sinclair Farrow Blakemore Catesby Holroyd Winslow Danvers Everett Pryor Quayle").split()
STEMS = ("Harbour Crest|Bluefield|Northgate|Silverline|Oakmont|Ridgeway|Stonebridge|Kestrel|Larkspur|Ashdown|"
         "Greyfriars|Holloway|Marchbank|Tamarind|Wexcombe|Fenwick|Brackley|Caldera|Pennant|Westmarch").split("|")
INDUSTRY = ["Holdings", "Logistics", "Foods", "Engineering", "Property", "Capital", "Technologies", "Retail",
            "Developments", "Energy", "Healthcare", "Media"]
CITIES = [("London", "EC2V"), ("London", "EC4M"), ("Manchester", "M2"), ("Leeds", "LS1"), ("Birmingham", "B3"),
          ("Bristol", "BS1"), ("Reading", "RG1"), ("Cambridge", "CB2")]
STREETS = ["King Street", "Queen Victoria Street", "Moorgate", "Bishopsgate", "Deansgate", "Park Row",
           "Colmore Row", "Broad Quay", "Friar Street", "Fleet Street", "Cheapside", "Gresham Street"]
FOREIGN = [("Germany", "Frankfurt am Main", "GmbH", "Amtsgericht Frankfurt am Main", "HRB {n}"),
           ("Netherlands", "Amsterdam", "B.V.", "Kamer van Koophandel", "KvK {n8}"),
           ("Luxembourg", "Luxembourg", "S.à r.l.", "RCS Luxembourg", "B{n6}"),
           ("United States", "Wilmington, Delaware", "Inc.", None, None),
           ("United States", "New York", "LLC", None, None),
           ("France", "Paris", "S.A.", "RCS Paris", "{n9}")]
FIRM_NAMES = [("Ashdown Pryce LLP", "Ashdown Pryce", "AP"), ("Whitcombe Hale LLP", "Whitcombe Hale", "WH"),
              ("Farringdon Marsh LLP", "Farringdon Marsh", "FM"), ("Kendal Roe LLP", "Kendal Roe", "KR")]
OC_FIRMS = ["{a} {b} LLP", "{a} & {b} LLP", "{a} {b} Solicitors", "{a} Legal LLP"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December"]
REFERENCE_STYLES = [("NNNNNN-NNNN", "{c:06d}-{m:04d}"), ("NNNNNN.NNNN", "{c:06d}.{m:04d}"),
                    ("NNNNN-NNN", "{c:05d}-{m:03d}")]
DMS_STYLES = ["hash", "underscore", "dot"]
CODENAMES = "Falcon Aurora Granite Neptune Cobalt Juniper Atlas Beacon Comet Harrier Meridian Osprey".split()
MATTER_TITLES = {"litigation": "{cp} – unpaid invoices", "employment": "{emp} – unfair dismissal claim",
                 "lease": "Lease of {place}", "ma": "Project {code} – acquisition of {target}",
                 "commercial": "Master services agreement with {cp}", "corporate": "Adoption of new articles"}
PLACES = ["Unit 4, Riverside Park", "Second Floor, 20 King Street", "Warehouse 7, Trafford Park",
          "Ground Floor, Colmore Plaza", "Units 1–3, Kingsway Estate"]


def ordinal(n: int) -> str:
    """1 → 1st, 22 → 22nd."""
    return f"{n}{'th' if 11 <= n % 100 <= 13 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


class EnglishBuilder(PlanMixin, MatterBuilder):
    """One matter of the English DMS firm."""

    tz_base = 0
    texts = texts_en
    PHRASES = {"en": {
        "attn": "For the attention of", "regards": "Yours faithfully", "dear_sirs": "Dear Sirs",
        "dear_m": "Dear Mr {last}", "dear_f": "Dear Ms {last}", "mail_regards": "Kind regards", "re": "RE:",
        "fw": "FW:", "from": "From", "sent": "Sent", "to": "To", "cc": "Cc", "subject": "Subject",
        "sep": "-----Original Message-----", "wrote": "On {date}, at {time}, {name} <{addr}> wrote:",
        "our_ref": "Our ref", "your_ref": "Your ref"}}

    def codename(self) -> str:
        return self.rng.choice(CODENAMES)

    # ------------------------------------------------------------ dates and stamps
    def fmt_date(self, d: dt.date, lang: str, style: str = "long") -> str:
        """``long`` (the firm's letter style: ordinal or plain), ``plain``, ``ordinal``, ``numeric``, ``short``
        (day and month only)."""
        mdy = self.est.date_order == "mdy"
        if style == "numeric":
            return f"{d.month:02d}/{d.day:02d}/{d.year}" if mdy else f"{d.day:02d}/{d.month:02d}/{d.year}"
        if style == "short":
            return f"{MONTHS[d.month - 1]} {d.day}" if mdy else f"{d.day} {MONTHS[d.month - 1]}"
        if style == "ordinal" or (style == "long" and self.est.ordinals):
            return f"{ordinal(d.day)} {MONTHS[d.month - 1]} {d.year}"
        return f"{MONTHS[d.month - 1]} {d.day}, {d.year}" if mdy else f"{d.day} {MONTHS[d.month - 1]} {d.year}"

    def sent_line(self, when: dt.datetime, lang: str) -> str:
        if self.est.date_order == "mdy":
            return f"{when:%A}, {MONTHS[when.month - 1]} {when.day}, {when.year} {when:%I:%M %p}"
        return f"{when:%A}, {when.day} {MONTHS[when.month - 1]} {when.year} {when:%H:%M}"

    # ------------------------------------------------------------ names
    def dms_name(self, number: int, version: int, title: str, ext: str) -> str:
        style = self.est.dms_style
        if style == "hash":
            return safe_name(f"#{number}v{version} - {title}") + ext
        if style == "underscore":
            bare = self.rng.random() < 0.6
            return f"{number}_{version}{ext}" if bare else safe_name(f"{number}_{version} {title}") + ext
        return safe_name(f"{number}.{version} - {title}") + ext

    def file_name(self, title: str, ext: str, *, human: str | None = None, doc: Doc | None = None) -> str:
        """A DMS name (``doc`` gets the DMS footer) in DMS layouts, else the human name."""
        if self.uses_dms_names():
            number = self.est.next_dms()
            if doc is not None:
                self.dms_footer(doc, number, 1)
            return self.dms_name(number, 1, title, ext)
        return safe_name(human or title) + ext

    def on_version(self, doc: Doc, out: dict[str, Any], k: int) -> None:
        if self.uses_dms_names():
            self.dms_footer(doc, out.setdefault("dms", self.est.next_dms()), k)

    def uses_dms_names(self) -> bool:
        return self.m.layout in ("client", "flat") or (self.m.layout == "workspace" and self.est.workspace_dms)

    def version_name(self, title: str, label: str, k: int, d: dt.date, out: dict[str, Any]) -> str:
        if self.uses_dms_names():
            name = self.dms_name(out.setdefault("dms", self.est.next_dms()), k, title, "")
            return name + (" (redline)" if label == "redline" else "")
        return safe_name({"draft": f"{title} v{k}", "redline": f"{title} v{k} (marked)",
                          "final": f"{title} (execution)", "signed": f"{title} - signed"}[label])

    def mail_name(self, subj: str, when: dt.datetime) -> str:
        if self.m.layout in ("client", "flat"):
            n = self.est.next_dms()
            if self.est.dms_style == "underscore":
                return f"{n}_1.eml"
            return safe_name(f"#{n}v1 - {subj}" if self.est.dms_style == "hash" else f"{n}.1 - {subj}")[:90] + ".eml"
        return f"{safe_name(subj)[:80]} ({when:%Y%m%d-%H%M}).eml"

    # ------------------------------------------------------------ letters
    def letterhead(self, doc: Doc, lang: str) -> None:
        f = self.firm
        doc.p(doc.name(f, variant=self.est.letterhead), bold=True)
        doc.p(f"{f.street}, {f.city} {f.postcode} · DX 42 {f.city} · www.{f.domain}")
        doc.blank()
        if self.est.ref_in_header:
            doc.header.append(f"{self.ph(lang, 'our_ref')}: {self.our_ref(doc)}")

    def our_ref(self, doc: Doc) -> str:
        ref = doc.ident("matter_reference", self.m.ref)
        if self.est.ref_initials:
            return f"{self.m.lawyers[0].initials}/{ref}"
        return ref

    def ref_lines(self, doc: Doc, sender: Entity, lang: str, theirs: str | None) -> list[str]:
        lines = []
        if sender is self.firm:
            if not self.est.ref_in_header:
                lines.append(f"{self.ph(lang, 'our_ref')}: {self.our_ref(doc)}")
            if theirs:
                lines.append(f"{self.ph(lang, 'your_ref')}: {doc.ident('external_reference', theirs)}")
        elif "law_firm" in sender.tags:
            lines.append(f"{self.ph(lang, 'our_ref')}: {doc.ident('external_reference', self.m.x['oc_ref'])}")
            lines.append(f"{self.ph(lang, 'your_ref')}: {self.their_view_of_ref(doc)}")
        elif theirs is not False:
            lines.append(f"{self.ph(lang, 'your_ref')}: {self.their_view_of_ref(doc)}")
        return lines

    def their_view_of_ref(self, doc: Doc) -> str:
        """How others quote our reference: mostly exactly, sometimes an alias spelling."""
        alias = self.m.aliases and self.rng.random() < 0.15
        return doc.ident("matter_reference", self.m.aliases[0] if alias else self.m.ref)

    def letter_footer(self, doc: Doc, lang: str) -> None:
        e = self.est
        doc.blank()
        doc.p(f"{e.firm_name} is a limited liability partnership registered in England and Wales with registered "
              f"number {doc.ident('register_number', e.firm_reg, 'Companies House', self.firm)}, authorised and "
              "regulated by the Solicitors Regulation Authority.")

    def dms_footer(self, doc: Doc, s_number: int, version: int) -> None:
        style = self.est.footer_style
        if style == "none":
            return
        tag = {"hash": f"#{s_number}v{version}", "underscore": f"{s_number}_{version}",
               "dot": f"{s_number}.{version}"}[self.est.dms_style]
        office = self.est.office_code
        doc.footer.append(f"{office}\\{tag}" if style == "office" else f"{self.m.ref}/{tag}" if style == "ref"
                          else tag)


class EnglishEstate(Estate):
    """The English/international DMS firm (see module doc)."""

    name = "estates.english"
    builder = EnglishBuilder
    firm_language = "en"

    def __init__(self, seed: int, n_matters: int):
        super().__init__(seed, n_matters)
        r = self.rng
        pattern, self.ref_format = r.choice(REFERENCE_STYLES)
        self.reference_patterns = [pattern]
        self.date_order = "mdy" if r.random() < 0.2 else "dmy"
        self.ordinals = r.random() < 0.5
        self.stamp_style = r.choice(["initials", "initials", "caps", "numeric"])
        self.dms_style = r.choice(DMS_STYLES)
        self.workspace_dms = r.random() < 0.5
        self.ref_initials = r.random() < 0.5
        self.ref_in_header = r.random() < 0.5
        self.footer_style = r.choice(["office", "ref", "ref", "plain", "none"])
        self.office_code = r.choice(["LON", "LONDON", "EMEA", "UK"])
        self.subject_tag = r.choice([None, "[{ref}]", "[#{ref}]", "{ref} - "])
        self.export_date = dt.date(2025, r.randint(1, 6), r.randint(1, 28)) if r.random() < 0.5 else None
        layouts = ["workspace", "client", "flat", "named"]
        self.layouts = r.sample(layouts, r.randint(2, 4))
        self._dms = r.randint(3_100_000, 8_900_000)
        self.builders: dict[int, EnglishBuilder] = {}
        self.make_firm()

    def matter_language(self, kind: str) -> str:
        return "en"

    def matter_title(self, m: Matter) -> str:
        r = self.rng
        short = (m.cp.name.replace(" Limited", "").replace(" plc", "") if m.cp is not None else "")
        emp = m.client if m.client.kind == "person" else m.cp
        code = r.choice(CODENAMES)
        m.x["code"] = code
        return MATTER_TITLES[m.kind].format(cp=short, emp=emp.name if emp else "", place=r.choice(PLACES), code=code,
                                            target=m.target.name if m.target else "")

    def next_invoice(self, year: int) -> str:
        self.invoices = getattr(self, "invoices", 1000) + self.rng.randint(1, 40)
        return f"{year % 100:02d}/{self.invoices:05d}"

    def next_dms(self) -> int:
        self._dms += self.rng.randint(3, 400)
        return self._dms

    # ------------------------------------------------------------ people and entities
    def person(self, domain: str = "", function: str = "") -> Person:
        r = self.rng
        g = r.choice("mf")
        first, last = r.choice(FIRST_M if g == "m" else FIRST_F), r.choice(LAST)
        email = f"{ascii_slug(first, '')}.{ascii_slug(last, '')}@{domain}" if domain else ""
        return Person(first, last, g, "", function, email)

    def address(self) -> tuple[str, str, str]:
        r = self.rng
        city, pc = r.choice(CITIES)
        return f"{r.randint(1, 180)} {r.choice(STREETS)}", f"{pc} {r.randint(1, 9)}{r.choice('ABDEFGHJLNPQRSTUWXYZ')}" \
            f"{r.choice('ABDEFGHJLNPQRSTUWXYZ')}", city

    def company(self, *, foreign: bool = False, form: str | None = None, base: str | None = None) -> Entity:
        r = self.rng
        if foreign:
            country, city, form, issuer, fmt = r.choice(FOREIGN)
            country = f"the {country}" if country.startswith(("United", "Netherlands")) else country
        else:
            country, city, issuer, fmt = "England and Wales", None, "Companies House", "{n8c}"
            form = form or r.choice(["Limited", "Limited", "Limited", "plc"])
        stem = base or self.unique(lambda: f"{r.choice(STEMS)} {r.choice(INDUSTRY)}")
        name = f"{stem} {form}"
        variants = [name]
        if form == "Limited":
            variants += [f"{stem} Ltd", f"{stem} Ltd."]
        elif form == "plc":
            variants += [f"{stem} PLC", f"{stem} p.l.c."]
        variants.append(name.upper())
        street, pc, c = self.address()
        dom = f"{ascii_slug(stem)}.example"
        e = self.add_entity("company", name, variants, street=street, postcode=pc if not foreign else "",
                            city=city or c, country=country, domain=dom, form=form, stem=stem)
        e.former_names = self.former_names(stem, form) if not foreign else []
        if fmt:
            n = r.randint(10_000_000, 99_999_999)
            value = fmt.format(n=r.randint(10000, 299999), n8=n, n6=r.randint(100000, 299999), n9=r.randint(
                100_000_000, 999_999_999), n8c=f"{r.randint(1_000_000, 14_999_999):08d}")
            e.register = {"value": value, "issuer": issuer}
            e.identifiers.append({"type": "register_number", "value": value, "issuer": issuer})
        e.people = [self.person(dom, r.choice(["Director", "Chief Executive Officer", "Finance Director"])),
                    self.person(dom, "General Counsel")]
        return e

    def former_names(self, stem: str, form: str) -> list[str]:
        """A company renamed (a quarter of the English ones): its former name, same first word, another trade
        (``Larkspur Estates Limited`` → ``Larkspur Holdings Limited``); its own random stream."""
        pick = random.Random(f"former:{stem}")
        if pick.random() >= 0.25:
            return []
        word = stem.split()[0]
        former = f"{word} {pick.choice([i for i in INDUSTRY if i not in stem])}"
        if former in self.used:
            return []
        self.used.add(former)
        return [f"{former} {form}"]

    def person_party(self) -> Entity:
        p = self.person(f"{ascii_slug(self.rng.choice(['mail', 'post', 'inbox']))}.example")
        street, pc, city = self.address()
        e = self.add_entity("person", f"{p.first} {p.last}", [f"{p.first} {p.last}", f"{p.first[0]}. {p.last}"],
                            street=street, postcode=pc, city=city, country="England and Wales")
        e.people = [p]
        return e

    def law_firm(self) -> Entity:
        r = self.rng
        name = self.unique(lambda: r.choice(OC_FIRMS).format(a=r.choice(LAST), b=r.choice(LAST)))
        street, pc, city = self.address()
        dom = f"{ascii_slug(name.replace(' LLP', ''))}.example"
        short = name.replace(" LLP", "").replace(" Solicitors", "")
        e = self.add_entity("company", name, [name, short], street=street, postcode=pc, city=city,
                            country="England and Wales", domain=dom, tags=["law_firm"])
        e.people = [self.person(dom, "Partner"), self.person(dom, "Senior Associate")]
        return e

    def court(self, kind: str) -> tuple[Entity, str]:
        r = self.rng
        y = r.choice([2022, 2023, 2024])
        if kind == "employment":
            region = r.choice(["London Central", "London South", "Manchester", "Leeds"])
            name = f"Employment Tribunal ({region})"
            variants = [name, "Employment Tribunal", f"{region} Employment Tribunal"]
            case = f"{r.randint(2200000, 2299999)}/{y}"
        elif r.random() < 0.6:
            name = "High Court of Justice, King's Bench Division, Commercial Court"
            variants = [name, "Commercial Court (KBD)", "Commercial Court", "High Court", name.upper()]
            case = f"CL-{y}-{r.randint(100, 999):06d}"
        else:
            place = r.choice(["Central London", "Manchester", "Birmingham", "Leeds"])
            name = f"County Court at {place}"
            variants = [name, f"{place} County Court", name.upper()]
            case = f"{r.choice('HJKLM')}{r.randint(0, 9)}{r.randint(0, 9)}{r.choice(['CL', 'MA', 'BM', 'LS'])}" \
                   f"{r.randint(100, 999)}"
        key = f"court:{name}"
        if key not in self.courts:
            self.courts[key] = self.add_entity("court", name, variants, city=name.rsplit(" ", 1)[-1])
        return self.courts[key], case

    def make_firm(self) -> None:
        r = self.rng
        full, short, initials = r.choice(FIRM_NAMES)
        self.firm_name = full
        self.firm_aliases = [short, f"{initials} LLP"]
        self.letterhead = short.upper()
        first, *rest = short.split()
        self.firm_variants = [f"{first} & {' '.join(rest)}", f"{short} Solicitors", f"{short} Rechtsanwälte"]
        street, pc, city = ("1 Moorgate Place", "EC2R 6EA", "London")
        dom = f"{ascii_slug(short)}.example"
        self.firm = self.add_entity("company", full, [full, short, f"{initials} LLP", short.upper()], street=street,
                                    postcode=pc, city=city, country="England and Wales", domain=dom,
                                    tags=["law_firm", "own_firm"])
        self.firm_reg = f"OC{r.randint(300000, 429999)}"
        self.firm.identifiers.append({"type": "register_number", "value": self.firm_reg, "issuer": "Companies House"})
        self.lawyers = [self.person(dom, "Partner") for _ in range(3)] + [self.person(dom, "Associate")
                                                                           for _ in range(3)]
        self.courts: dict[str, Entity] = {}

    def new_client_number(self) -> int:
        digits = 5 if self.ref_format.startswith("{c:05d}") else 6
        return int(self.unique(lambda: str(self.rng.randint(10 ** (digits - 1), 10 ** digits - 1))))

    def reference(self, client_no: int, matter_no: int, opened: dt.date) -> str:
        return self.ref_format.format(c=client_no, m=matter_no)

    def alias(self, client_no: int, matter_no: int) -> str:
        return f"{client_no}/{matter_no}"

    def matter_folder(self, m: Matter) -> str:
        short = m.client.name.replace(" Limited", "").replace(" plc", "")
        if m.layout == "workspace":
            return f"Workspaces/{safe_name(m.ref + ' - ' + m.title)}"
        if m.layout == "client":
            return f"Clients/{safe_name(m.client.name)} ({m.client_number})"
        if m.layout == "flat":
            return "DMS Export"
        return f"Matters/{safe_name(short + ' - ' + m.title)}"


def generate(seed: int, n_matters: int, out_dir: str) -> dict[str, Any]:
    """Build and write the estate; returns truth.json's content."""
    est = EnglishEstate(seed, n_matters)
    build_matters(est)
    return est.write(out_dir)
