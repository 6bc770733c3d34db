"""A Dutch law firm: Dutch documents, ``Ons kenmerk`` / ``Uw kenmerk``, ``Van:/Verzonden:/Aan:/Onderwerp:``
quoted headers, ``Antw:`` / ``Doorst:`` (or ``RE:`` / ``FW:``) subjects, B.V./N.V., KvK numbers,
Dutch month names and ``dd-mm-jjjj`` dates, ``mr.`` titles and name particles (``de Graaf``,
``van den Berg``), Dutch courts (rechtbank, kantonrechter) with their case numbers, and a few letters
in French from Belgian or Luxembourg parties.

Conventions varied by seed: the dossier number (``2023.0145``, ``10452.003`` client.matter or
``20230145``), an older spelling of it used by some writers (the alias in the matter list), the
folder layout (a dossier folder with the number, a folder per client holding several matters, an
archive folder per year holding every matter opened that year, dossier folders named without the
number), a dossier tag in e-mail subjects, reply prefixes, draft stamps, and whether the export kept
the files' mtimes.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from bench.estates import texts_nl
from bench.estates.builder import MatterBuilder
from bench.estates.estate import Estate
from bench.estates.model import Doc, Entity, Matter, Person, ascii_slug, safe_name
from bench.estates.plans import PlanMixin, build_matters

FIRST_M = "Jan Pieter Thijs Daan Bram Ruben Joost Maarten Sander Wouter Koen Bas Gijs Stijn".split()
FIRST_F = "Sanne Eva Lotte Anouk Femke Iris Marloes Noor Esther Inge Lieke Fleur Roos Maaike".split()
LAST = ["de Graaf", "van den Berg", "van der Linden", "de Jong", "Bakker", "Visser", "Smit", "Meijer", "de Boer",
        "Mulder", "de Wit", "Dekker", "van Leeuwen", "Brouwer", "de Vries", "Hendriks", "van Dijk", "Kuipers",
        "Vermeulen", "van der Veen", "Jansen", "Postma", "Verhoeven", "Schouten"]
STEMS = ["Noordzee", "Polder", "Lindeboom", "Zuiderwaard", "Amstelland", "Kennemer", "Veluwe", "Eemland", "Waterweg",
         "Maasdelta", "Hoogland", "Duinrand", "Rijnmond", "Vechtstreek", "Zeeland", "Brabantia"]
INDUSTRY = ["Logistiek", "Vastgoed", "Installatietechniek", "Bouw", "Food Group", "Holding", "Techniek", "Retail",
            "Energie", "Zorg", "Media", "Transport"]
CITIES = [("Amsterdam", "10"), ("Rotterdam", "30"), ("Utrecht", "35"), ("Den Haag", "25"), ("Eindhoven", "56"),
          ("Haarlem", "20"), ("Arnhem", "68"), ("Zwolle", "80")]
STREETS = ["Keizersgracht", "Coolsingel", "Maliebaan", "Lange Voorhout", "Stationsplein", "Kerkstraat", "Markt",
           "Herengracht", "Zuidas", "Weena", "Catharijnesingel", "Stadhouderskade"]
FOREIGN = [("België", "Bruxelles", "SA", "KBO", "0{n3}.{n3b}.{n3c}", "fr"),
           ("Luxemburg", "Luxembourg", "S.à r.l.", "RCS Luxembourg", "B{n6}", "fr"),
           ("Duitsland", "Düsseldorf", "GmbH", "Amtsgericht Düsseldorf", "HRB {n5}", None),
           ("België", "Antwerpen", "NV", "KBO", "0{n3}.{n3b}.{n3c}", None)]
FIRM_NAMES = [("Van Houten Brink Advocaten N.V.", "Van Houten Brink", "VHB Advocaten"),
              ("De Wit Verhoef Advocaten B.V.", "De Wit Verhoef", "DWV Advocaten"),
              ("Kooistra Meerman Advocaten N.V.", "Kooistra Meerman", "KM Advocaten")]
OC_FIRMS = ["{a} Advocaten", "{a} & {b} Advocaten N.V.", "{a} {b} Advocaten B.V.", "Advocatenkantoor {a}"]
MONTHS = {"nl": ["januari", "februari", "maart", "april", "mei", "juni", "juli", "augustus", "september", "oktober",
                 "november", "december"],
          "fr": ["janvier", "février", "mars", "avril", "mai", "juin", "juillet", "août", "septembre", "octobre",
                 "novembre", "décembre"]}
DAYS = ["maandag", "dinsdag", "woensdag", "donderdag", "vrijdag", "zaterdag", "zondag"]
REFERENCE_STYLES = [("YYYY.NNNN", "year"), ("NNNNN.NNN", "client"), ("YYYYNNNN", "compact")]
CODENAMES = "Tulp Dijk Molen Haven Kompas Anker Duin Vuurtoren Zeilboot Polder Horizon Kade".split()
MATTER_TITLES = {"litigation": "incasso {cp}", "employment": "ontslag {emp}", "lease": "huur {place}",
                 "ma": "Project {code} – overname {target}", "commercial": "raamovereenkomst {cp}",
                 "corporate": "statutenwijziging"}
PLACES = ["bedrijfshal Westpoort", "kantoor Stationsplein 12", "winkelpand Kerkstraat 8", "loods Waalhaven",
          "kantoorvilla Maliebaan"]


class DutchBuilder(PlanMixin, MatterBuilder):
    """One matter of the Dutch firm."""

    tz_base = 1
    texts = texts_nl
    PHRASES = {
        "nl": {"attn": "t.a.v.", "regards": "Met vriendelijke groet,", "dear_sirs": "Geachte heer, mevrouw,",
               "dear_m": "Geachte heer {last},", "dear_f": "Geachte mevrouw {last},",
               "mail_regards": "Met vriendelijke groet,", "re": "Antw:", "fw": "Doorst:", "from": "Van",
               "sent": "Verzonden", "to": "Aan", "cc": "CC", "subject": "Onderwerp",
               "sep": "________________________________", "wrote": "Op {date} om {time} schreef {name} <{addr}>:",
               "our_ref": "Ons kenmerk", "your_ref": "Uw kenmerk"},
        "fr": {"attn": "À l'attention de", "regards": "Veuillez agréer nos salutations distinguées.",
               "dear_sirs": "Madame, Monsieur,", "dear_m": "Cher Monsieur {last},", "dear_f": "Chère Madame {last},",
               "mail_regards": "Bien à vous,", "re": "RE:", "fw": "TR:", "from": "De", "sent": "Envoyé",
               "to": "À", "cc": "Cc", "subject": "Objet", "sep": "________________________________",
               "wrote": "Le {date} à {time}, {name} <{addr}> a écrit :", "our_ref": "Notre référence",
               "your_ref": "Votre référence"}}

    def __init__(self, est: Any, m: Matter):
        super().__init__(est, m)
        self.PHRASES = {**self.PHRASES, "nl": {**self.PHRASES["nl"], "re": est.reply_prefix[0],
                                               "fw": est.reply_prefix[1]}}

    def fmt_date(self, d: dt.date, lang: str, style: str = "long") -> str:
        """``long``/``plain``/``ordinal`` (``5 juli 2022``; French ``5 juillet 2022``), ``numeric``
        (``05-07-2022``, French ``05/07/2022``), ``short`` (``5 juli``)."""
        lang = lang if lang in MONTHS else "nl"
        if style == "numeric":
            return f"{d.day:02d}/{d.month:02d}/{d.year}" if lang == "fr" else \
                (f"{d.day:02d}-{d.month:02d}-{d.year}" if self.est.padded else f"{d.day}-{d.month}-{d.year}")
        if style == "short":
            return f"{d.day} {MONTHS[lang][d.month - 1]}"
        return f"{d.day} {MONTHS[lang][d.month - 1]} {d.year}"

    def letter_date(self, sender: Entity, d: dt.date, lang: str) -> str:
        if lang == "fr":
            return f"{sender.city}, le {self.fmt_date(d, lang)}"
        return f"{sender.city}, {self.fmt_date(d, lang)}"

    def sent_line(self, when: dt.datetime, lang: str) -> str:
        return f"{DAYS[when.weekday()]} {self.fmt_date(when.date(), 'nl')} {when:%H:%M}"

    def codename(self) -> str:
        return self.rng.choice(CODENAMES)

    # ------------------------------------------------------------ names
    def file_name(self, title: str, ext: str, *, human: str | None = None, doc: Doc | None = None) -> str:
        name = safe_name(human or title)
        if self.m.layout in ("year", "client"):  # folders holding several matters: dated names
            return f"{self.t.isoformat()} {name}{ext}"
        return f"{name}{ext}"

    def version_name(self, title: str, label: str, k: int, d: dt.date, out: dict[str, Any]) -> str:
        name = {"draft": f"Concept {title.lower()} v{k}", "redline": f"Concept {title.lower()} v{k} (wijzigingen)",
                "final": f"{title} definitief", "signed": f"{title} getekend"}[label]
        return f"{d.isoformat()} {safe_name(name)}" if self.m.layout in ("year", "client") else safe_name(name)

    def mail_name(self, subj: str, when: dt.datetime) -> str:
        return f"{when:%Y%m%d %H%M} {safe_name(subj)[:80]}.eml"

    # ------------------------------------------------------------ letters
    def letterhead(self, doc: Doc, lang: str) -> None:
        f = self.firm
        doc.p(doc.name(f, variant=self.est.letterhead), bold=True)
        doc.p(f"{f.street} · {f.postcode} {f.city} · www.{f.domain}")
        doc.blank()

    def ref_lines(self, doc: Doc, sender: Entity, lang: str, theirs: str | None) -> list[str]:
        if sender is self.firm:
            ours = doc.ident("matter_reference", self.m.ref)
            lines = [f"{self.ph(lang, 'our_ref')}: {ours}" + (f"/{self.m.lawyers[0].initials}"
                                                               if self.est.ref_initials else "")]
            if theirs:
                lines.append(f"{self.ph(lang, 'your_ref')}: {doc.ident('external_reference', theirs)}")
            return lines
        if "law_firm" in sender.tags:
            return [f"{self.ph(lang, 'our_ref')}: {doc.ident('external_reference', self.m.x['oc_ref'])}",
                    f"{self.ph(lang, 'your_ref')}: {self.their_ref(doc)}"]
        return [] if theirs is False else [f"{self.ph(lang, 'your_ref')}: {self.their_ref(doc)}"]

    def their_ref(self, doc: Doc) -> str:
        """How others quote our number: mostly exactly, sometimes in its older spelling (the alias)."""
        alias = self.m.aliases and self.rng.random() < 0.2
        return doc.ident("matter_reference", self.m.aliases[0] if alias else self.m.ref)

    def letter_footer(self, doc: Doc, lang: str) -> None:
        e = self.est
        doc.blank()
        kvk = doc.ident("register_number", e.firm_reg, "Kamer van Koophandel", self.firm)
        doc.p(f"{e.firm_name} is ingeschreven in het Handelsregister onder nummer {kvk}. Op alle werkzaamheden zijn "
              "de algemene voorwaarden van toepassing.")


class DutchEstate(Estate):
    """The Dutch firm (see module doc)."""

    name = "estates.dutch"
    builder = DutchBuilder
    firm_language = "nl"

    def __init__(self, seed: int, n_matters: int):
        super().__init__(seed, n_matters)
        r = self.rng
        self.reference_patterns, self.ref_style = map(lambda x: x, r.choice(REFERENCE_STYLES))
        self.reference_patterns = [self.reference_patterns]
        self.padded = r.random() < 0.6
        self.stamp_style = r.choice(["concept", "dd", "versie"])
        self.ref_initials = r.random() < 0.4
        self.subject_tag = r.choice([None, "[{ref}]", "(ons kenmerk {ref})"])
        self.reply_prefix = r.choice([("Antw:", "Doorst:"), ("RE:", "FW:"), ("Antw:", "FW:")])
        self.export_date = dt.date(2025, r.randint(1, 6), r.randint(1, 28)) if r.random() < 0.4 else None
        self.layouts = r.sample(["dossier", "client", "year", "named"], r.randint(2, 4))
        self.builders: dict[int, DutchBuilder] = {}
        self.courts: dict[str, Entity] = {}
        self.year_seq: dict[int, int] = {}
        self.make_firm()

    # ------------------------------------------------------------ people and entities
    def person(self, domain: str = "", function: str = "", title: str = "") -> Person:
        r = self.rng
        g = r.choice("mf")
        first, last = r.choice(FIRST_M if g == "m" else FIRST_F), r.choice(LAST)
        email = f"{first[0].lower()}.{ascii_slug(last, '')}@{domain}" if domain else ""
        return Person(first, last, g, title, function, email)

    def address(self) -> tuple[str, str, str]:
        r = self.rng
        city, pc = r.choice(CITIES)
        return f"{r.choice(STREETS)} {r.randint(1, 250)}", f"{pc}{r.randint(10, 99)} {r.choice('ABEGHKLMNPRST')}" \
            f"{r.choice('ABEGHKLMNPRST')}", city

    def company(self, *, foreign: bool = False, form: str | None = None) -> Entity:
        r = self.rng
        writes = None
        if foreign:
            country, city, form, issuer, fmt, writes = r.choice(FOREIGN)
            stem = self.unique(lambda: f"{r.choice(STEMS)} {r.choice(['International', 'Europe', 'Benelux'])}")
        else:
            country, city, issuer, fmt = "Nederland", None, "Kamer van Koophandel", "{n8}"
            form = form or r.choice(["B.V.", "B.V.", "B.V.", "N.V."])
            stem = self.unique(lambda: f"{r.choice(STEMS + [x[0].upper() + x[1:] for x in LAST])} {r.choice(INDUSTRY)}")
        name = f"{stem} {form}"
        variants = [name, name.upper()]
        if form in ("B.V.", "N.V."):
            variants.insert(1, f"{stem} {form.replace('.', '')}")
        street, pc, c = self.address()
        dom = f"{ascii_slug(stem)}.example"
        e = self.add_entity("company", name, variants, street=street, postcode=pc if not foreign else "",
                            city=city or c, country=country, domain=dom, form=form, stem=stem, writes=writes)
        value = fmt.format(n8=f"{r.randint(10_000_000, 99_999_999)}", n6=r.randint(100000, 299999),
                           n5=r.randint(10000, 99999), n3=r.randint(100, 999), n3b=r.randint(100, 999),
                           n3c=r.randint(100, 999))
        e.register = {"value": value, "issuer": issuer}
        e.identifiers.append({"type": "register_number", "value": value, "issuer": issuer})
        e.people = [self.person(dom, r.choice(["Directeur", "Algemeen directeur", "CFO"])),
                    self.person(dom, "Bedrijfsjurist")]
        return e

    def person_party(self) -> Entity:
        p = self.person("")
        street, pc, city = self.address()
        e = self.add_entity("person", f"{p.first} {p.last}", [f"{p.first} {p.last}", f"{p.first[0]}. {p.last}"],
                            street=street, postcode=pc, city=city, country="Nederland")
        p.email = f"{ascii_slug(p.first, '')}{ascii_slug(p.last, '')}@mail.example"
        e.people = [p]
        return e

    def law_firm(self) -> Entity:
        r = self.rng
        def surname() -> str:
            return r.choice(LAST).split()[-1]

        name = self.unique(lambda: r.choice(OC_FIRMS).format(a=surname(), b=surname()))
        street, pc, city = self.address()
        dom = f"{ascii_slug(name.replace('Advocaten', ''))}.example"
        e = self.add_entity("company", name, [name], street=street, postcode=pc, city=city, country="Nederland",
                            domain=dom, tags=["law_firm"])
        e.people = [self.person(dom, "Advocaat", "mr."), self.person(dom, "Advocaat", "mr.")]
        return e

    def court(self, kind: str) -> tuple[Entity, str]:
        r = self.rng
        place = r.choice(["Amsterdam", "Rotterdam", "Midden-Nederland", "Den Haag", "Gelderland"])
        code = {"Amsterdam": "13", "Rotterdam": "10", "Midden-Nederland": "16", "Den Haag": "09", "Gelderland": "05"}
        y = r.choice([22, 23, 24])
        if kind == "employment":
            name = f"Rechtbank {place}, kantonrechter"
            variants = [name, f"Kantonrechter {place}", f"Rechtbank {place}"]
            case = f"{r.randint(9_000_000, 9_999_999)} EA VERZ {y}-{r.randint(10, 999)}"
        else:
            name = f"Rechtbank {place}"
            variants = [name, name.upper()]
            case = f"C/{code[place]}/{r.randint(700000, 799999)} / HA ZA {y}-{r.randint(100, 999)}"
        key = f"court:{name}"
        if key not in self.courts:
            self.courts[key] = self.add_entity("court", name, variants, city=place)
        return self.courts[key], case

    def make_firm(self) -> None:
        r = self.rng
        full, short, alias = r.choice(FIRM_NAMES)
        self.firm_name, self.firm_aliases, self.letterhead = full, [short, alias], short.upper()
        dom = f"{ascii_slug(short)}.example"
        self.firm = self.add_entity("company", full, [full, short, alias, short.upper()], street="Zuidplein 120",
                                    postcode="1077 XV", city="Amsterdam", country="Nederland", domain=dom,
                                    tags=["law_firm", "own_firm"])
        self.firm_reg = f"{r.randint(30_000_000, 79_999_999)}"
        self.firm.identifiers.append({"type": "register_number", "value": self.firm_reg,
                                      "issuer": "Kamer van Koophandel"})
        self.lawyers = [self.person(dom, "Partner", "mr.") for _ in range(3)] + \
            [self.person(dom, "Advocaat", "mr.") for _ in range(3)]

    # ------------------------------------------------------------ matters
    def matter_language(self, kind: str) -> str:
        return "nl"

    def new_client_number(self) -> int:
        return int(self.unique(lambda: str(self.rng.randint(10000, 99999))))

    def reference(self, client_no: int, matter_no: int, opened: dt.date) -> str:
        year = opened.year
        seq = self.year_seq[year] = self.year_seq.get(year, self.rng.randint(20, 300)) + self.rng.randint(1, 9)
        self.last_ref_parts = (year, seq, client_no, matter_no)
        if self.ref_style == "client":
            return f"{client_no}.{matter_no:03d}"
        return f"{year}.{seq:04d}" if self.ref_style == "year" else f"{year}{seq:04d}"

    def alias(self, client_no: int, matter_no: int) -> str:
        year, seq, _, _ = self.last_ref_parts
        if self.ref_style == "client":
            return f"{client_no}/{matter_no}"
        return f"{year}-{seq:04d}" if self.ref_style == "year" else f"{year}.{seq:04d}"

    def matter_title(self, m: Matter) -> str:
        r = self.rng
        emp = m.client if m.client.kind == "person" else m.cp
        code = r.choice(CODENAMES)
        m.x["code"] = code
        return MATTER_TITLES[m.kind].format(cp=getattr(m.cp, "stem", m.cp.name if m.cp else ""),
                                            emp=emp.name if emp else "", place=r.choice(PLACES), code=code,
                                            target=m.target.name if m.target else "")

    def matter_folder(self, m: Matter) -> str:
        short = getattr(m.client, "stem", m.client.name)
        if m.layout == "dossier":
            return f"Dossiers/{safe_name(f'{m.ref} {short} - {m.title}')}"
        if m.layout == "client":
            return f"Cliënten/{safe_name(m.client.name)}"
        if m.layout == "year":
            return f"Archief/{m.opened.year}"
        return f"Zaken/{safe_name(f'{short} - {m.title}')}"

    def next_invoice(self, year: int) -> str:
        self.invoices = getattr(self, "invoices", 100) + self.rng.randint(1, 30)
        return f"{year}-{self.invoices:05d}"


def generate(seed: int, n_matters: int, out_dir: str) -> dict[str, Any]:
    """Build and write the estate; returns truth.json's content."""
    est = DutchEstate(seed, n_matters)
    build_matters(est)
    return est.write(out_dir)
