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
from typing import Any

from bench.estates.builder import Version
from bench.estates.model import Doc, Entity, FileSpec, Matter

KINDS = ["litigation", "employment", "lease", "ma", "commercial", "corporate"]


class PlanMixin:
    """The per-kind plans (mixed into a firm's :class:`~bench.estates.builder.MatterBuilder`)."""

    texts: Any = None

    # ------------------------------------------------------------ helpers
    def contract(self, kind: str, parties: list[Entity], *, lang: str, plan: list[tuple], key: str = "contracts",
                 relations=(), tags=()) -> dict[str, Any]:
        """A negotiated contract of ``kind`` (a spec of the text module) between ``parties``."""
        spec = self.texts.CONTRACTS[kind]
        knobs = {k.name: k for k in spec["knobs"]()}
        signatories = [(e, e.people[0] if e.people else None) for e in parties]

        def tpl(ctx: Version, doc: Doc) -> None:
            self.texts.contract_body(self, ctx, doc, spec, parties)

        def signers(doc: Doc, d: dt.date) -> None:
            self.texts.signature_block(self, doc, d, signatories)

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
        redline): a redline rendition of that version."""
        newer, marked = version[0], version[-1]
        doc = self.doc(newer.lang)
        name = self.texts.compare_doc(self, doc, older, newer, marked)
        s = self.add(key, name, "pdf", doc, doc_type=newer.doc_type, title=newer.title, date=newer.date,
                     rendition="redline", version_of=newer.anchor or newer, order=newer.order,
                     tags=["redline", "compare"])
        s.redline_against = older
        s.relations += [r for r in newer.relations]
        s.meta = {"producer": "Litera Compare"}
        return s

    def party_people(self) -> tuple[Any, Any]:
        m = self.m
        client_contact = m.client.people[0]
        other = m.oc.people[0] if m.oc is not None else (m.cp.people[0] if m.cp is not None else None)
        return client_contact, other

    def thread(self, subject: str) -> Any:
        return self.est.new_thread(self.m, subject)

    # ------------------------------------------------------------ every matter
    def engagement(self) -> FileSpec:
        T, m = self.texts, self.m
        return self.letter(key="engagement", base="engagement", sender=self.firm, signer=m.lawyers[0], to=m.client,
                           to_person=m.client.people[0], lang=m.lang, subject=lambda d: T.engagement_subject(self, d),
                           body=lambda d: T.engagement_body(self, d), doc_type="engagement_letter",
                           fname=self.file_name(T.label("engagement", m.lang), ".pdf"), tags=["signed"])

    def intake(self) -> None:
        T, m = self.texts, self.m
        contact = m.client.people[0]
        th = self.thread(T.intake_subject(self))
        self.mail(th, frm=contact, org=m.client, to=[m.lawyers[0]], lang=m.lang, body=lambda d: T.intake_1(self, d))
        broken = self.rng.random() < 0.4
        self.mail(th, frm=m.lawyers[0], org=self.firm, to=[contact], cc=[m.lawyers[-1]], lang=m.lang,
                  body=lambda d: T.mail_body(self, d, "intake_2"), quote="outlook")
        self.mail(th, frm=contact, org=m.client, to=[m.lawyers[0]], lang=m.lang,
                  body=lambda d: T.mail_body(self, d, "intake_3"),
                  quote="outlook" if broken or self.rng.random() < 0.5 else "wrote", broken=broken)

    def send_to_client(self, spec: FileSpec) -> None:
        T, m = self.texts, self.m
        th = self.thread(T.mail_subject(self, "send", spec))
        contact = m.client.people[0]
        self.mail(th, frm=m.lawyers[-1], org=self.firm, to=[contact], cc=[m.lawyers[0]], lang=m.lang,
                  body=lambda d: T.mail_body(self, d, "send", spec), attach=[spec])
        self.mail(th, frm=contact, org=m.client, to=[m.lawyers[-1]], lang=m.lang,
                  body=lambda d: T.mail_body(self, d, "send_reply", spec), quote="outlook")
        if self.rng.random() < 0.4:  # forwarded internally: stacked prefix
            self.mail(th, frm=m.lawyers[-1], org=self.firm, to=[m.lawyers[0]], lang=m.lang,
                      body=lambda d: T.mail_body(self, d, "forward"), prefix=self.ph(m.lang, "fw"), quote="outlook")

    def invoice(self) -> FileSpec:
        T, m = self.texts, self.m
        d = self.step(5, 20)
        doc = self.doc(m.lang)
        number = self.est.next_invoice(d.year)
        T.invoice(self, doc, d, number)
        return self.add("billing", self.file_name(T.label("invoice", m.lang) + f" {number}", ".pdf", doc=doc), "pdf",
                        doc, doc_type="invoice", title=T.label("invoice", m.lang), date=d)

    def file_note(self) -> FileSpec:
        T, m = self.texts, self.m
        d = self.step(1, 6)
        doc = self.doc(m.lang)
        T.file_note(self, doc, d)
        as_txt = self.rng.random() < 0.3
        ext = ".txt" if as_txt else ".docx"
        s = self.add("notes", self.file_name(T.label("file_note", m.lang), ext, doc=None if as_txt else doc),
                     "txt" if as_txt else "docx", doc, doc_type="memo", title=T.label("file_note", m.lang), date=d)
        if as_txt:
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
        T, m = self.texts, self.m
        lang = m.lang
        cp_person = m.cp.people[0] if m.cp.people else None
        demand = self.letter(key="corr", base="demand", sender=self.firm, signer=m.lawyers[0], to=m.cp,
                             to_person=cp_person, lang=lang, subject=lambda d: T.demand_subject(self, d),
                             body=lambda d: T.demand_body(self, d), doc_type="demand_letter",
                             fname=self.file_name(T.label("demand", lang), ".pdf"))
        oc = m.oc.people[0]
        answer = self.letter(key="corr", base="answer", sender=m.oc, signer=oc, to=self.firm,
                             to_person=m.lawyers[0], lang=lang, subject=lambda d: T.answer_subject(self, d, demand),
                             body=lambda d: T.answer_body(self, d, demand), relations=[("responds_to", demand)],
                             fname=self.file_name(T.label("answer", lang), ".pdf"))
        claim = self.court_doc("claim", relations=[("references", demand)])
        defence = self.court_doc("defence", relations=[("responds_to", claim)], sender=m.oc)
        self.forward(defence)
        self.court_doc("reply", relations=[("responds_to", defence)])
        self.court_doc("order", sender=m.court)
        if self.rng.random() < 0.5:
            self.court_doc("judgment", sender=m.court)
        else:
            self.contract("settlement", [m.client, m.cp], lang=lang, plan=self.negotiation(drafts=2, final=False))
        m.x["answer"] = answer

    def court_doc(self, what: str, *, relations=(), sender: Entity | None = None) -> FileSpec:
        T, m = self.texts, self.m
        d = self.step(10, 30)
        doc = self.doc(m.lang)
        title, doc_type = T.court_doc(self, doc, what, d)
        name = self.file_name(title, ".pdf", doc=None)
        s = self.add("court", name, "pdf", doc, doc_type=doc_type, title=title, date=d,
                     tags=["scan"] if sender is m.court else [])
        s.relations += list(relations)
        m.x[what] = s
        return s

    def forward(self, spec: FileSpec) -> None:
        T, m = self.texts, self.m
        th = self.thread(T.mail_subject(self, "forward", spec))
        contact = m.client.people[0]
        self.mail(th, frm=m.lawyers[0], org=self.firm, to=[contact], lang=m.lang, attach=[spec],
                  body=lambda d: T.mail_body(self, d, "forward_court", spec))
        self.mail(th, frm=contact, org=m.client, to=[m.lawyers[0]], lang=m.lang, quote="outlook",
                  body=lambda d: T.mail_body(self, d, "send_reply", spec), broken=self.rng.random() < 0.3)

    def k_employment(self) -> None:
        m = self.m
        employee, employer = (m.cp, m.client) if m.client.kind == "company" else (m.client, m.cp)
        m.x["employee"], m.x["employer"] = employee, employer
        claim = self.court_doc("et1")
        self.court_doc("et3", relations=[("responds_to", claim)])
        out = self.contract("termination", [employer, employee], lang=m.lang, plan=self.negotiation(drafts=3))
        self.send_to_client(out["versions"][1][0])
        self.appendix(out["signed"], "employment")

    def appendix(self, main: FileSpec, kind: str) -> FileSpec:
        T, m = self.texts, self.m
        doc = self.doc(m.lang)
        title, doc_type, label, d = T.appendix(self, doc, kind, main)
        s = self.add("annex", self.file_name(f"{label} - {title}", ".pdf", human=f"{label} - {title}"), "pdf", doc,
                     doc_type=doc_type, title=title, date=d, tags=["annex"])
        s.relations.append(("annex_of", main))
        return s

    def k_lease(self) -> None:
        m = self.m
        self.simple_doc("heads_of_terms", key="contracts")
        out = self.contract("lease", [m.cp, m.client] if m.x.get("tenant_client") else [m.client, m.cp],
                            lang=m.lang, plan=self.negotiation(drafts=3))
        self.compare(out["versions"][0][0], out["versions"][1])
        self.send_to_client(out["versions"][1][0])
        self.appendix(out["signed"], "plan")
        var = self.simple_doc("variation", key="signed", cite=out["signed"])
        var.relations.append(("amends", out["signed"]))

    def simple_doc(self, what: str, *, key: str, cite: FileSpec | None = None, fmt: str = "pdf") -> FileSpec:
        T, m = self.texts, self.m
        d = self.step(3, 12)
        doc = self.doc(m.lang)
        title, doc_type = T.simple_doc(self, doc, what, d, cite)
        s = self.add(key, self.file_name(title, f".{fmt}", doc=doc if fmt == "docx" else None), fmt, doc,
                     doc_type=doc_type, title=title, date=d, ok=T.ACCEPTABLE.get(what))
        if cite is not None and what not in ("variation", "resolution", "side_letter"):
            s.relations.append(("references", cite))
        return s

    def k_ma(self) -> None:
        m = self.m
        nda = self.contract("nda", [m.client, m.cp], lang=m.lang, plan=[("draft", "ours", ("clean",)), ("signed",)])
        self.simple_doc("heads_of_terms", key="contracts")
        out = self.contract("spa", [m.cp, m.client] if m.x.get("buyer_client") else [m.client, m.cp], lang=m.lang,
                            plan=self.negotiation(drafts=3))
        self.compare(out["versions"][1][0], out["versions"][2])
        self.send_to_client(out["versions"][2][0])
        extract = self.simple_doc("register_extract", key="dd", cite=None)
        extract.tags.append("annex")
        extract.relations.append(("annex_of", out["signed"]))
        self.simple_doc("minutes", key="corporate", cite=out["signed"])
        self.simple_doc("dd_report", key="dd", cite=None, fmt="docx")
        m.x["nda"] = nda

    def k_commercial(self) -> None:
        m = self.m
        self.contract("nda", [m.client, m.cp], lang=m.lang, plan=[("draft", "ours", ("clean",)), ("signed",)])
        out = self.contract("msa", [m.client, m.cp], lang=m.lang, plan=self.negotiation(drafts=2))
        self.send_to_client(out["versions"][0][0])
        side = self.simple_doc("side_letter", key="signed", cite=out["signed"])
        side.relations.append(("amends", out["signed"]))

    def k_corporate(self) -> None:
        m = self.m
        out = self.contract("articles", [m.client], lang=m.lang, plan=self.negotiation(drafts=2, signed=False))
        self.send_to_client(out["versions"][1][0])
        res = self.simple_doc("resolution", key="corporate", cite=out["final"])
        res.relations.append(("amends", out["final"]))
        self.simple_doc("minutes", key="corporate", cite=out["final"])
        self.simple_doc("poa", key="corporate")

    def build(self) -> None:
        self.engagement()
        self.intake()
        getattr(self, f"k_{self.m.kind}")()
        self.invoice()
        if self.rng.random() < 0.8:
            self.file_note()
        self.duplicates()


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
        m.ref = est.reference(client_numbers[m.client.id], seq)
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
    for what in T.PRECEDENTS:
        doc = b.doc(est.firm_language)
        fname, title, doc_type = T.precedent(b, doc, what)
        s = b.add(f"/{T.FOLDERS['precedents']}", fname, fname.rsplit(".", 1)[1], doc, doc_type=doc_type, title=title,
                  date=dt.date(2021, r.randint(1, 12), r.randint(1, 28)), matter=None, tags=["no_matter", "template"])
        s.evidence_hint = None
    doc = b.doc(est.firm_language)
    fname, title = T.knowhow(b, doc)
    b.add(f"/{T.FOLDERS['knowhow']}", fname, "pdf", doc, doc_type=None, title=title, date=dt.date(2021, 11, 3),
          matter=None, ok=[None], tags=["no_matter", "untyped"])
    post = f"/{T.FOLDERS['post']}"
    n = 0
    by_client: dict[str, list[Matter]] = {}
    for m in est.matters:
        by_client.setdefault(m.client.id, []).append(m)
    for m in r.sample(est.matters, min(len(est.matters), max(3, len(est.matters) // 3))):
        mb = est.builders[m.idx]
        n += 1
        sender = m.cp if m.cp is not None and m.cp.kind == "company" else m.client
        mb.letter(key=post, base="post", sender=sender, signer=sender.people[0], to=est.firm,
                  to_person=m.lawyers[0], lang=m.lang, subject=lambda d, mb=mb: T.post_subject(mb, d),
                  body=lambda d, mb=mb: T.post_body(mb, d), fname=f"{T.FOLDERS['scan']}{n:04d}.pdf",
                  tags=["scan", "outside_matter_folder"], theirs=None)
        if m.court is not None:
            n += 1
            d = mb.step(5, 15)
            doc = mb.doc(m.lang)
            title = T.court_notice(mb, doc, d)
            mb.add(post, f"{T.FOLDERS['scan']}{n:04d}.pdf", "pdf", doc, doc_type="court_order", title=title, date=d,
                   tags=["scan", "outside_matter_folder"])
    for _client, ms in sorted(by_client.items()):
        if r.random() < 0.5 and len(ms) <= 2:
            m = ms[0]
            mb = est.builders[m.idx]
            n += 1
            s = mb.letter(key=post, base="post", sender=m.client, signer=m.client.people[0], to=est.firm,
                          to_person=m.lawyers[0], lang=m.lang, subject=lambda d, mb=mb: T.client_post_subject(mb, d),
                          body=lambda d, mb=mb: T.client_post_body(mb, d), fname=f"{T.FOLDERS['scan']}{n:04d}.pdf",
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
        letters = [f for f in a.files if f.doc_type in ("letter", "engagement_letter", "demand_letter")
                   and a.ref in f.doc.text()]
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
