"""What each matter holds, per kind, for both firm generators; the wording comes from a text module
(:mod:`bench.estates.texts_en`, :mod:`bench.estates.texts_nl`) that the builder names as ``texts``.

Every matter: an engagement letter, an intake e-mail thread (one reply without In-Reply-To, quoted
headers), kind documents (below), an invoice, a file note, duplicates. Kinds: litigation (letter
before claim, the other side's answer, claim, defence, reply, order, settlement or judgment),
employment (claim, response, settlement agreement versions, the contract as an appendix), lease
(heads of terms, lease versions with redlines and a compare PDF, a plan, a variation), ma (NDA,
heads of terms, SPA versions with compares, register extract as schedule, minutes, resolution,
DD report), commercial (NDA, services agreement versions, side letter), corporate (articles
versions, resolution, minutes, power of attorney). Estate extras: precedents, know-how, an unfiled
post-room folder (letters naming only a reference, a case number or a client), one misfiled letter.
"""

from __future__ import annotations

import datetime as dt
import os
import random
from typing import Any

from bench.estates.builder import Version
from bench.estates.model import Doc, Entity, FileSpec, Matter
from bench.estates.model import safe_name as safe_label
from bench.estates.wording import fill, write

KINDS = ["litigation", "employment", "lease", "ma", "commercial", "corporate"]
#: Matter titles whose first word is lower case inside a sentence ("in connection with the lease of …").
LOWER_FIRST = ("Lease", "Master", "Adoption")


class PlanMixin:
    """The per-kind plans (mixed into a firm's :class:`~bench.estates.builder.MatterBuilder`)."""

    texts: Any = None

    # ------------------------------------------------------------ wording
    def values(self, d: dt.date, **kw: Any) -> dict[str, Any]:
        """The plain values the templates use (entities and identifiers are filled by :mod:`wording`)."""
        m, x = self.m, self.m.x
        k1 = x.setdefault("contract_date", self.t - dt.timedelta(days=self.rng.randint(200, 500)))
        amount = x.setdefault("amount", self.rng.randint(40, 900) * 1000)
        out = {"d": d, "k1": k1, "amount": amount, "amount_eur": f"{amount:,}".replace(",", "."),
               "code": x.get("code", ""), "title_lower": lower_first(m.title),
               "cp_short": short(m.cp), "client_short": short(m.client), "assistant": m.lawyers[-1].full,
               "contact_full": m.client.people[0].full, "application": d - dt.timedelta(days=21),
               "hearing": d + dt.timedelta(days=45), "cited": self.texts.CITED.get(m.kind, ""),
               "target_address": (m.target or m.cp or m.client).address,
               "note_ref": "x" if self.rng.random() < 0.6 else "", "case_known": "x" if m.case_numbers else ""}
        for key in ("demand", "claim", "defence", "et1"):
            if key in x:
                out[f"{key}_date"] = x[key].date
        return {**out, **kw}

    def write_doc(self, doc: Doc, what: str, d: dt.date, **kw: Any) -> dict[str, Any]:
        """Write the text module's document ``what``; returns its spec (title, doc_type, …)."""
        spec = self.texts.DOCS[what]
        if spec.get("letterhead"):
            self.letterhead(doc, doc.lang)
        values = self.values(d, **kw)
        if spec.get("head"):
            write(self, doc, self.texts.HEADS[spec["head"]], **values)
        write(self, doc, spec["lines"], **values)
        return spec

    def template_letter(self, what: str, *, sender: Entity, signer: Any, to: Entity, to_person: Any, key: str,
                        fname: str, **kw: Any) -> FileSpec:
        """A letter whose subject and body are the text module's ``SUBJECTS[what]`` / ``LETTERS[what]``."""
        T = self.texts
        lang = kw.pop("lang", None) or getattr(sender, "writes", None) or self.m.lang
        if lang != T.LANG and what not in T.FOREIGN_LETTERS.get(lang, {}):
            lang = self.m.lang
        return self.letter(key=key, base=what, sender=sender, signer=signer, to=to, to_person=to_person,
                           lang=lang, fname=fname,
                           subject=lambda doc: fill(self, doc, T.SUBJECTS[what], **self.values(self.t)),
                           body=lambda doc: write(self, doc, self.letter_lines(what, doc.lang),
                                                  **self.values(self.t)), **kw)

    def letter_lines(self, what: str, lang: str) -> list[str]:
        """The body of letter ``what`` in ``lang`` (a foreign party writes in its own language)."""
        if lang != self.texts.LANG:
            return self.texts.FOREIGN_LETTERS[lang][what]
        return self.texts.LETTERS[what]

    def stamp(self, doc: Doc, lang: str, kind: str, k: int, d: dt.date, prev_d: dt.date | None) -> None:
        """The draft stamp, execution-version line or signing date at the top of a contract (``STAMPS``)."""
        stamps = self.texts.STAMPS
        values = {"k": k, "d": d, "prev": prev_d, "who": self.m.lawyers[0].initials, "city": self.firm.city}
        if kind == "draft":
            text = fill(self, doc, stamps["draft"][self.est.stamp_style], **values)
            if prev_d:
                text += fill(self, doc, stamps["marked"], **values)
            doc.p(text, bold=True)
        else:
            doc.p(fill(self, doc, stamps[kind], **values), bold=kind == "final")

    def mail_body(self, doc: Doc, key: str, spec: FileSpec | None = None) -> None:
        lines = self.texts.MAILS[key]
        if isinstance(lines, dict):
            lines = lines[self.m.kind]
        write(self, doc, lines, **self.values(self.t, doc_title=spec.title.lower() if spec else ""))

    def mail_subject(self, key: str, spec: FileSpec) -> str:
        return self.texts.subject_tag(self, self.texts.SUBJECTS[key].format(doc_title=spec.title))

    # ------------------------------------------------------------ helpers
    def contract(self, kind: str, parties: list[Entity], *, lang: str, plan: list[tuple], key: str = "contracts",
                 relations=(), tags=()) -> dict[str, Any]:
        """A negotiated contract of ``kind`` (a spec of the text module) between ``parties``."""
        T = self.texts
        spec = T.CONTRACTS[kind]
        knobs = {k.name: k for k in spec["knobs"]()}
        words = T.CONTRACT

        def tpl(ctx: Version, doc: Doc) -> None:
            doc.p(spec["title"].upper(), style="Title")
            if len(parties) == 1:
                doc.p(words["of"].format(party=T.describe(self, doc, parties[0])))
            else:
                doc.p(words["between"])
                for i, (e, role) in enumerate(zip(parties, spec["roles"], strict=True)):
                    end = ";" if i + 1 < len(parties) else "."
                    doc.p(words["party"].format(i=i + 1, party=T.describe(self, doc, e), role=role, end=end))
            for heading, parts in spec["clauses"]:
                ctx.h(heading)
                doc.p(*[ctx.k(x[0]) if isinstance(x, tuple) else x for x in parts])

        def signers(doc: Doc, d: dt.date) -> None:
            doc.blank()
            for e in parties:
                doc.p("______________________________")
                which = "sign_person" if e.kind == "person" else "sign_company"
                doc.p(words[which].format(party=doc.name(e), person=e.people[0].full if e.people else ""))

        return self.chain(tpl=tpl, knobs=knobs, lang=lang, doc_type=spec["doc_type"], title=spec["title"], plan=plan,
                          key=key, signers=signers, relations=relations, tags=tags)

    def negotiation(self, *, drafts: int, signed: bool = True, final: bool = True) -> list[tuple]:
        """A plan: first draft clean, later drafts clean + redline, the final and the signed copy."""
        plan: list[tuple] = [("draft", "ours", ("clean",))]
        for i in range(1, drafts):
            plan.append(("draft", "theirs" if i % 2 else "ours", ("clean", "redline")))
        if final:
            plan.append(("final", "ours"))
        if signed:
            plan.append(("signed",))
        return plan

    def compare(self, older: FileSpec, version: list[FileSpec], *, key: str = "contracts") -> FileSpec:
        """A compare PDF (Litera / Workshare) of ``older`` against a later version (its clean file, then its
        redline): a redline rendition of that version, deleted and inserted text both in its text layer."""
        newer, marked = version[0], version[-1]
        doc = self.doc(newer.lang)
        tool = self.rng.choice(["Litera", "Workshare"])
        o_name, n_name = older.path.rsplit("/", 1)[-1], newer.path.rsplit("/", 1)[-1]
        revs = marked.doc.revisions()
        ins = sum(1 for r in revs if r["type"] == "insertion")
        write(self, doc, self.texts.COMPARE[tool], older=o_name, newer=n_name, d=newer.date, ins=ins,
              dels=len(revs) - ins, time=f"{self.rng.randint(9, 18)}:{self.rng.randint(10, 59)}")
        doc.blank()
        for p in marked.doc.paras:
            doc.paras.append({**p, "segs": [x if isinstance(x, str) else x[1] for x in p["segs"]
                                            if isinstance(x, str) or x[0] in ("ins", "del", "b")]})
        doc.absorb(marked.doc)
        name = self.texts.COMPARE["names"][tool].format(o=older.order, n=newer.order, title=newer.title,
                                                        older_stem=o_name.rsplit(".", 1)[0],
                                                        newer_stem=n_name.rsplit(".", 1)[0])
        s = self.add(key, name, "pdf", doc, doc_type=newer.doc_type, title=newer.title, date=newer.date,
                     rendition="redline", version_of=newer.anchor or newer, order=newer.order,
                     tags=["redline", "compare"])
        s.redline_against = older
        s.relations += list(newer.relations)
        s.meta = {"producer": f"{tool} Compare"}
        return s

    def thread(self, subject: str) -> Any:
        return self.est.new_thread(self.m, subject)

    # ------------------------------------------------------------ every matter
    def engagement(self) -> FileSpec:
        m = self.m
        return self.template_letter("engagement", key="engagement", sender=self.firm, signer=m.lawyers[0],
                                    to=m.client, to_person=m.client.people[0], doc_type="engagement_letter",
                                    fname=self.file_name(self.texts.LABELS["engagement"], ".pdf"), tags=["signed"])

    def intake(self) -> None:
        m = self.m
        contact = m.client.people[0]
        subject = self.texts.SUBJECTS["intake"][m.kind].format(**self.values(self.t))
        th = self.thread(subject)
        self.mail(th, frm=contact, org=m.client, to=[m.lawyers[0]], lang=m.lang,
                  body=lambda d: self.mail_body(d, "intake_1"))
        broken = self.rng.random() < 0.4
        self.mail(th, frm=m.lawyers[0], org=self.firm, to=[contact], cc=[m.lawyers[-1]], lang=m.lang,
                  body=lambda d: self.mail_body(d, "intake_2"), quote="outlook")
        self.mail(th, frm=contact, org=m.client, to=[m.lawyers[0]], lang=m.lang,
                  body=lambda d: self.mail_body(d, "intake_3"),
                  quote="outlook" if broken or self.rng.random() < 0.5 else "wrote", broken=broken)

    def send_to_client(self, spec: FileSpec) -> None:
        m = self.m
        th = self.thread(self.mail_subject("send", spec))
        contact = m.client.people[0]
        self.mail(th, frm=m.lawyers[-1], org=self.firm, to=[contact], cc=[m.lawyers[0]], lang=m.lang,
                  body=lambda d: self.mail_body(d, "send", spec), attach=[spec])
        self.mail(th, frm=contact, org=m.client, to=[m.lawyers[-1]], lang=m.lang,
                  body=lambda d: self.mail_body(d, "send_reply", spec), quote="outlook")
        if self.rng.random() < 0.4:  # forwarded internally: stacked prefix
            self.mail(th, frm=m.lawyers[-1], org=self.firm, to=[m.lawyers[0]], lang=m.lang,
                      body=lambda d: self.mail_body(d, "forward"), prefix=self.ph(m.lang, "fw"), quote="outlook")

    def standalone(self, what: str, *, key: str, fmt: str = "pdf", date: dt.date | None = None, cite=None,
                   human: str | None = None, fname: str | None = None, tags=(), **kw: Any) -> FileSpec:
        """A document of the text module's ``DOCS[what]`` as its own file."""
        m = self.m
        d = date or self.step(3, 12)
        doc = self.doc(m.lang)
        if cite is not None:
            kw["cite_date"] = cite.date
        spec = self.write_doc(doc, what, d, **kw)
        title = spec["title"]
        fname = fname or self.file_name(human or title, f".{fmt}", doc=doc if fmt == "docx" else None, human=human)
        return self.add(key, fname, fmt, doc, doc_type=spec["doc_type"], title=title, date=d,
                        ok=self.texts.ACCEPTABLE.get(what), tags=tags)

    def invoice(self) -> FileSpec:
        d = self.step(5, 20)
        number = self.est.next_invoice(d.year)
        style = self.rng.choice(["ordinal", "numeric", "plain"])
        s = self.standalone("invoice", key="billing", date=d, number=number, hours=self.rng.randint(4, 40),
                            rate=self.rng.choice([450, 525, 610]), period_end=d - dt.timedelta(days=3),
                            invoice_date=self.fmt_date(d, self.m.lang, style),
                            human=f"{self.texts.LABELS['invoice']} {number}")
        s.doc.ident("invoice_number", number)
        return s

    def dated_name(self, title: str, d: dt.date, ext: str) -> str | None:
        """A file name that carries the date (the text then does not): ISO or compact first, day-first (or the
        firm's month-first) with four- or two-digit years, or spelled out after the title — or None (a
        separate random stream, so the rest of the estate stays as it was)."""
        pick = random.Random(f"dated:{self.m.ref}:{title}:{d}")
        if pick.random() >= 0.6:
            return None
        mdy = getattr(self.est, "date_order", "dmy") == "mdy"
        numeric = f"{d:%m.%d.%Y}" if mdy else f"{d:%d.%m.%Y}"
        short = f"{d:%m.%d.%y}" if mdy else f"{d:%d.%m.%y}"
        return pick.choice([f"{d.isoformat()} {title}", f"{d:%Y%m%d}_{title}", f"{title} {numeric}",
                            f"{title} {short}", f"{title} {self.fmt_date(d, self.m.lang, 'plain')}"]) + ext

    def file_note(self) -> FileSpec:
        fmt = "docx" if self.rng.random() < 0.7 else "txt"  # drawn before the date, as always
        d = self.step(1, 6)
        fname = self.dated_name(safe_label(self.texts.LABELS["file_note"]), d, f".{fmt}")
        dated = {"fname": fname, "note_dated": ""} if fname else {"note_dated": "x"}
        if fmt == "docx":
            return self.standalone("file_note", key="notes", fmt="docx", date=d, **dated)
        s = self.standalone("file_note", key="notes", fmt="txt", date=d, **dated)
        s.encoding, s.crlf = ("cp1252", True) if self.rng.random() < 0.5 else ("utf-8", False)
        if s.encoding == "cp1252":
            s.tags.append("cp1252")
        return s

    def duplicates(self) -> None:
        cands = [f for f in self.m.files if f.dup_of is None and f.fmt != "eml"]
        for orig in self.rng.sample(cands, min(len(cands), self.rng.randint(1, 2))):
            self.dup(orig)

    # ------------------------------------------------------------ kinds
    def k_litigation(self) -> None:
        m = self.m
        cp_person = m.cp.people[0] if m.cp.people else None
        demand = self.template_letter("demand", key="corr", sender=self.firm, signer=m.lawyers[0], to=m.cp,
                                      to_person=cp_person, doc_type="demand_letter",
                                      fname=self.file_name(self.texts.LABELS["demand"], ".pdf"))
        m.x["demand"] = demand
        self.template_letter("answer", key="corr", sender=m.oc, signer=m.oc.people[0], to=self.firm,
                             to_person=m.lawyers[0], relations=[("responds_to", demand)],
                             fname=self.file_name(self.texts.LABELS["answer"], ".pdf"))
        claim = self.court_doc("claim", relations=[("references", demand)])
        defence = self.court_doc("defence", relations=[("responds_to", claim)])
        self.forward(defence)
        self.court_doc("reply", relations=[("responds_to", defence)])
        self.court_doc("order", scan=True)
        if self.rng.random() < 0.5:
            self.court_doc("judgment", scan=True)
        else:
            self.contract("settlement", [m.client, m.cp], lang=m.lang, plan=self.negotiation(drafts=2, final=False))

    def court_doc(self, what: str, *, relations=(), scan: bool = False) -> FileSpec:
        s = self.standalone(what, key="court", date=self.step(10, 30), tags=["scan"] if scan else [])
        s.relations += list(relations)
        self.m.x[what] = s
        return s

    def forward(self, spec: FileSpec) -> None:
        m = self.m
        th = self.thread(self.mail_subject("forward", spec))
        contact = m.client.people[0]
        self.mail(th, frm=m.lawyers[0], org=self.firm, to=[contact], lang=m.lang, attach=[spec],
                  body=lambda d: self.mail_body(d, "forward_court", spec))
        self.mail(th, frm=contact, org=m.client, to=[m.lawyers[0]], lang=m.lang, quote="outlook",
                  body=lambda d: self.mail_body(d, "send_reply", spec), broken=self.rng.random() < 0.3)

    def k_employment(self) -> None:
        m = self.m
        employee, employer = (m.cp, m.client) if m.client.kind == "company" else (m.client, m.cp)
        m.x["employee"], m.x["employer"] = employee, employer
        rep = self.firm if employer is m.client else m.oc
        claim = self.court_doc("et1")
        m.x["et1"] = claim
        response = self.standalone("et3", key="court", date=self.step(10, 30), employer_rep=rep.name)
        response.relations.append(("responds_to", claim))
        self.forward(response if employer is m.client else claim)
        out = self.contract("termination", [employer, employee], lang=m.lang, plan=self.negotiation(drafts=3))
        self.send_to_client(out["versions"][1][0])
        self.appendix(out["signed"], "appendix_employment",
                      date=self.t - dt.timedelta(days=self.rng.randint(900, 2500)))

    def appendix(self, main: FileSpec, what: str, date: dt.date | None = None) -> FileSpec:
        spec = self.texts.DOCS[what]
        s = self.standalone(what, key="annex", date=date or self.t, human=f"{spec['label']} - {spec['title']}",
                            tags=["annex"])
        s.doc_type_ok = [spec["doc_type"]]
        s.relations.append(("annex_of", main))
        return s

    def k_lease(self) -> None:
        m = self.m
        self.standalone("heads_of_terms", key="contracts")
        out = self.contract("lease", [m.cp, m.client] if m.x.get("tenant_client") else [m.client, m.cp],
                            lang=m.lang, plan=self.negotiation(drafts=3))
        self.compare(out["versions"][0][0], out["versions"][1])
        self.send_to_client(out["versions"][1][0])
        self.appendix(out["signed"], "appendix_plan")
        self.standalone("variation", key="signed", cite=out["signed"]).relations.append(("amends", out["signed"]))

    def k_ma(self) -> None:
        m = self.m
        self.contract("nda", [m.client, m.cp], lang=m.lang, plan=[("draft", "ours", ("clean",)), ("signed",)])
        self.standalone("heads_of_terms", key="contracts")
        out = self.contract("spa", [m.cp, m.client] if m.x.get("buyer_client") else [m.client, m.cp], lang=m.lang,
                            plan=self.negotiation(drafts=3))
        self.compare(out["versions"][1][0], out["versions"][2])
        self.send_to_client(out["versions"][2][0])
        extract = self.standalone("register_extract", key="dd", tags=["annex"])
        extract.relations.append(("annex_of", out["signed"]))
        self.standalone("minutes", key="corporate", cite=out["signed"]).relations.append(("references", out["signed"]))
        self.standalone("dd_report", key="dd", fmt="docx")

    def k_commercial(self) -> None:
        m = self.m
        self.contract("nda", [m.client, m.cp], lang=m.lang, plan=[("draft", "ours", ("clean",)), ("signed",)])
        out = self.contract("msa", [m.client, m.cp], lang=m.lang, plan=self.negotiation(drafts=2))
        self.send_to_client(out["versions"][0][0])
        self.standalone("side_letter", key="signed", cite=out["signed"]).relations.append(("amends", out["signed"]))

    def k_corporate(self) -> None:
        m = self.m
        out = self.contract("articles", [m.client], lang=m.lang, plan=self.negotiation(drafts=2, signed=False))
        self.send_to_client(out["versions"][1][0])
        self.standalone("resolution", key="corporate", cite=out["final"]).relations.append(("amends", out["final"]))
        self.standalone("minutes", key="corporate", cite=out["final"]).relations.append(("references", out["final"]))
        self.standalone("poa", key="corporate")

    def build(self) -> None:
        self.engagement()
        self.intake()
        getattr(self, f"k_{self.m.kind}")()
        self.invoice()
        if self.rng.random() < 0.8:
            self.file_note()
        self.duplicates()


def lower_first(title: str) -> str:
    """A matter title inside a sentence ("in connection with the lease of …"); names keep their capital."""
    return title[:1].lower() + title[1:] if title.split()[0] in LOWER_FIRST else title


def short(e: Entity | None) -> str:
    """A company's name without its legal form (its stem), a person's surname."""
    if e is None:
        return ""
    return getattr(e, "stem", None) or e.name.split()[-1]


def build_matters(est: Any) -> None:
    """Create the matters (parties, references, folders), build their files, then the estate extras."""
    r = est.rng
    kinds = [KINDS[i % len(KINDS)] for i in range(est.n)]
    r.shuffle(kinds)
    clients: list[Entity] = []
    client_numbers: dict[str, int] = {}
    layouts: dict[str, str] = {}
    for i, kind in enumerate(kinds):
        lang = est.matter_language(kind)
        opened = dt.date(2022, 1, 10) + dt.timedelta(days=r.randint(0, 900))
        m = Matter(idx=i, kind=kind, layout="", lang=lang, opened=opened)
        reuse = clients and r.random() < 0.3 and kind != "employment"
        m.client = r.choice(clients) if reuse else (est.person_party() if kind == "employment" and r.random() < 0.5
                                                    else est.company(foreign=r.random() < 0.2))
        if m.client not in clients:
            clients.append(m.client)
            layouts[m.client.id] = r.choice(est.layouts)
            client_numbers[m.client.id] = est.new_client_number()
        m.layout = layouts[m.client.id]  # a client's matters share the firm's filing habit
        m.client_number = str(client_numbers[m.client.id])
        seq = sum(1 for x in est.matters if x.client is m.client) + 1
        m.ref = est.reference(client_numbers[m.client.id], seq, opened)
        m.aliases = [est.alias(client_numbers[m.client.id], seq)]
        parties_for(est, m)
        m.title = est.matter_title(m)
        m.lawyers = [est.lawyers[r.randint(0, 2)], est.lawyers[r.randint(3, len(est.lawyers) - 1)]]
        m.closed = opened + dt.timedelta(days=r.randint(200, 500)) if r.random() < 0.3 else None
        m.folder = est.matter_folder(m)
        est.matters.append(m)
    for m in est.matters:
        m.x["shared_folder"] = sum(1 for x in est.matters if x.folder == m.folder) > 1
    for m in est.matters:
        b = est.builder(est, m)
        est.builders[m.idx] = b
        b.build()
    extras(est)


def extras(est: Any) -> None:
    """Files outside the matter folders: precedents and know-how (no matter), the post room (letters naming
    only a reference, a case number or a client), and one misfiled letter."""
    r = est.rng
    b = est.builders[0]
    T = b.texts
    for what in ("precedent_nda", "precedent_engagement", "knowhow"):
        doc = b.doc(T.LANG)
        day = dt.date(2021, r.randint(1, 12), r.randint(1, 28))
        spec = b.write_doc(doc, what, day)
        b.add(f"/{T.FOLDERS['knowhow' if what == 'knowhow' else 'precedents']}", spec["file"],
              spec["file"].rsplit(".", 1)[1], doc, doc_type=spec["doc_type"], title=spec["title"],
              date=day, matter=None, ok=[spec["doc_type"]],
              tags=["no_matter", "template" if what != "knowhow" else "untyped"])
    post = f"/{T.FOLDERS['post']}"
    n = 0
    by_client: dict[str, list[Matter]] = {}
    for m in est.matters:
        by_client.setdefault(m.client.id, []).append(m)
    for m in r.sample(est.matters, min(len(est.matters), max(3, len(est.matters) // 3))):
        mb = est.builders[m.idx]
        n += 1
        sender = m.cp if m.cp is not None and m.cp.kind == "company" else m.client
        mb.template_letter("post", key=post, sender=sender, signer=sender.people[0], to=est.firm,
                           to_person=m.lawyers[0], fname=f"{T.FOLDERS['scan']}{n:04d}.pdf",
                           tags=["scan", "outside_matter_folder"])
        if m.court is not None:
            n += 1
            mb.standalone("notice", key=post, date=mb.step(5, 15), fname=f"{T.FOLDERS['scan']}{n:04d}.pdf",
                          tags=["scan", "outside_matter_folder"])
    for _client, ms in sorted(by_client.items()):
        if r.random() < 0.5 and len(ms) <= 2:
            m = ms[0]
            mb = est.builders[m.idx]
            n += 1
            s = mb.template_letter("client_post", key=post, sender=m.client, signer=m.client.people[0], to=est.firm,
                                   to_person=m.lawyers[0], fname=f"{T.FOLDERS['scan']}{n:04d}.pdf",
                                   tags=["scan", "outside_matter_folder"], theirs=False)
            if len(ms) > 1:
                s.matter = None
                m.files.remove(s)
                s.acceptable = [None, *[x.ref for x in ms]]
                s.tags.append("ambiguous")
                s.evidence_hint = "client_only"
            else:
                s.evidence_hint = "client_unique"
    own = [m for m in est.matters if not m.x.get("shared_folder")]
    if len(own) >= 2:
        a, into = r.sample(own, 2)
        letters = [f for f in a.files if f.dup_of is None and a.ref in f.doc.text()
                   and f.doc_type in ("letter", "engagement_letter", "demand_letter")]
        if letters:
            misfile(est, letters[0], into)


def misfile(est: Any, spec: FileSpec, into: Matter) -> None:
    """Move ``spec`` (a letter naming its own matter) into another matter's folder."""
    old = spec.path
    new = f"{into.folder}/{os.path.basename(old)}"
    if est.path_taken(new):
        return
    del est._paths[old.casefold()]
    spec.path = new
    est._paths[new.casefold()] = spec
    spec.tags += ["misfiled", "outside_matter_folder"]


def parties_for(est: Any, m: Matter) -> None:
    """The other side, its solicitors, the court and case number, the target; and everyone's role."""
    r = est.rng
    if m.kind == "employment":
        m.cp = est.company() if m.client.kind == "person" else est.person_party()
    elif m.kind != "corporate":
        m.cp = est.company(foreign=r.random() < 0.3)
    if m.kind in ("litigation", "employment") or (m.kind in ("ma", "lease") and r.random() < 0.5):
        m.oc = est.law_firm()
    if m.kind in ("litigation", "employment"):
        m.court, case = est.court(m.kind)
        m.case_numbers = [case]
    if m.kind == "ma":
        m.target = est.company()
        m.x["buyer_client"] = r.random() < 0.5
    if m.kind == "lease":
        m.x["tenant_client"] = r.random() < 0.5
    m.x["oc_ref"] = f"{r.choice('ABCDEFGHKLMPRSTW')}{r.choice('ABCDEFGHKLMPRSTW')}/{r.randint(1000, 9999)}"
    m.roles = {est.firm.id: "advisor", m.client.id: "client"}
    for e, role in ((m.cp, "counterparty"), (m.oc, "advisor"), (m.court, "court"), (m.target, "other")):
        if e is not None:
            m.roles[e.id] = role
