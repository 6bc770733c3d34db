"""English wording of the plans (:mod:`bench.estates.plans`): letters, court documents, contracts, mail bodies.

Each function writes into a :class:`~bench.estates.model.Doc` through the builder ``b`` (names via
``doc.name``, identifiers via ``doc.ident``) so the truth is recorded as the text is written.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from bench.estates.builder import Knob, Version
from bench.estates.model import Doc, Entity, FileSpec
from bench.estates.wording import write

LABELS = {"engagement": "Engagement letter", "invoice": "Invoice", "file_note": "Attendance note",
          "demand": "Letter before claim", "answer": "Response to letter before claim"}
ACCEPTABLE = {"heads_of_terms": ["term_sheet"], "variation": ["amendment"], "side_letter": ["amendment", "letter"],
              "resolution": ["shareholder_resolution"], "minutes": ["minutes"], "poa": ["power_of_attorney"],
              "register_extract": ["register_extract"], "dd_report": ["dd_report"]}


def label(key: str, lang: str) -> str:
    return LABELS[key]


def _subject_tag(b: Any, subject: str) -> str:
    tag = b.est.subject_tag
    if not tag:
        return subject
    t = tag.format(ref=b.m.ref)
    return t + subject if t.endswith(" - ") else f"{subject} {t}"


def short(e: Entity) -> str:
    return getattr(e, "stem", None) or e.name.split()[-1]


def describe(b: Any, doc: Doc, e: Entity) -> str:
    """A contract's description of a party (names in capitals, with the register number)."""
    if e.kind == "person":
        return f"{doc.name(e)} of {e.address}"
    name = doc.name(e, variant=e.name.upper())
    if e.register and e.country == "England and Wales":
        num = doc.ident("register_number", e.register["value"], e.register["issuer"], e)
        return f"{name}, a company incorporated in England and Wales with company number {num} whose registered " \
               f"office is at {e.address}"
    if e.register:
        num = doc.ident("register_number", e.register["value"], e.register["issuer"], e)
        return f"{name}, a company incorporated in {e.country} and registered with {e.register['issuer']} under " \
               f"number {num}"
    return f"{name}, a company incorporated in {e.country}"


# ---------------------------------------------------------------- letters and mail
def engagement_subject(b: Any, doc: Doc) -> str:
    return f"Engagement letter – {b.m.title}"


def engagement_body(b: Any, doc: Doc) -> None:
    m = b.m
    doc.p(f"Thank you for instructing {doc.name(b.firm, variant=b.est.firm_name)} to act for "
          f"{doc.name(m.client)} in connection with {m.title.lower()}.")
    if m.cp is not None:
        doc.p(f"We have carried out a conflict check against {doc.name(m.cp)} and are able to act.")
    doc.p(f"{m.lawyers[0].full} will be the partner responsible for this matter, assisted by {m.lawyers[1].full}.")
    doc.p("Our fees will be charged on the basis of time spent at the hourly rates set out in the enclosed terms "
          "of business. Please sign and return a copy of this letter.")


def intake_subject(b: Any) -> str:
    m = b.m
    return {"litigation": lambda: f"Dispute with {short(m.cp)}", "employment": lambda: "Employment matter – next steps",
            "lease": lambda: f"{short(m.cp)} – lease", "ma": lambda: f"Project {m.x.setdefault('code', b.codename())}",
            "commercial": lambda: f"{short(m.client)} / {short(m.cp)} – MSA",
            "corporate": lambda: "New articles"}[m.kind]()


def intake_1(b: Any, doc: Doc) -> None:
    m = b.m
    doc.p(f"Dear {m.lawyers[0].first},")
    doc.blank()
    what = {"litigation": lambda: f"{doc.name(m.cp)} has still not paid our invoices and we would like you to take "
                                  "this forward.",
            "employment": lambda: "We need your help with the employment issue we discussed on the phone.",
            "lease": lambda: f"We have agreed terms with {doc.name(m.cp)} and would like you to prepare the lease.",
            "ma": lambda: f"As discussed, we would like you to act for us on the transaction with {doc.name(m.cp)}.",
            "commercial": lambda: f"Please could you review the draft agreement with {doc.name(m.cp)}.",
            "corporate": lambda: "The board would like to adopt new articles before the next financial year."}[m.kind]
    doc.p(what())
    doc.p("Let me know what you need from us.")


MAILS = {
    "intake_2": ["Dear {contact},", "", "Thank you for your instructions. We have opened a new matter and will send "
                 "our engagement letter shortly.", "For reference, our matter number is {ref}."],
    "intake_3": ["Thanks {lawyer},", "", "That is helpful. I will call you tomorrow."],
    "send": ["Dear {contact},", "", "Please find attached the latest draft of the {doc_title} for your review.",
             "I would be grateful for your comments by the end of the week."],
    "send_reply": ["Thank you.", "", "We have no further comments at this stage. Please go ahead."],
    "forward": ["See below – for the file."],
    "forward_court": ["Dear {contact},", "", "We attach the {doc_title} served on us today. We will send you our "
                      "comments shortly."],
}
SUBJECTS = {"send": "{doc_title} – draft for review", "forward": "{doc_title} received"}


def mail_body(b: Any, doc: Doc, key: str, spec: FileSpec | None = None) -> None:
    """The body of a standard message (:data:`MAILS`)."""
    write(b, doc, MAILS[key], doc_title=spec.title.lower() if spec else "")


def mail_subject(b: Any, key: str, spec: FileSpec) -> str:
    return _subject_tag(b, SUBJECTS[key].format(doc_title=spec.title))


def invoice(b: Any, doc: Doc, d: dt.date, number: str) -> None:
    m = b.m
    b.letterhead(doc, "en")
    doc.p("INVOICE", style="Title")
    doc.p(f"Invoice no.: {doc.ident('invoice_number', number)}")
    doc.p(f"Invoice date: {b.fmt_date(d, 'en', 'ordinal' if b.rng.random() < 0.5 else 'numeric')}")
    doc.p(f"Client: {doc.name(m.client)} (client no. {m.client_number})")
    doc.p(f"Matter: {doc.ident('matter_reference', m.ref)} – {m.title}")
    doc.blank()
    hours = b.rng.randint(4, 40)
    doc.p(f"Professional charges for the period to {b.fmt_date(d - dt.timedelta(days=3), 'en', 'plain')}: "
          f"{hours} hours at £{b.rng.choice([450, 525, 610])} per hour.")
    doc.p("Payment is due within 30 days.")


def file_note(b: Any, doc: Doc, d: dt.date) -> None:
    m = b.m
    doc.p("ATTENDANCE NOTE", bold=True)
    doc.p(f"Date: {b.fmt_date(d, 'en', 'numeric')}")
    if b.rng.random() < 0.6:
        doc.p(f"Matter: {doc.ident('matter_reference', m.ref)}")
    doc.p(f"Attending: {m.lawyers[0].full}, {m.client.people[0].full} ({doc.name(m.client)})")
    doc.blank()
    doc.p(f"Call with the client about {m.title.lower()}. Discussed next steps and timetable.")
    if m.cp is not None:
        doc.p(f"Client confirmed that no without prejudice offer has been received from {doc.name(m.cp)}.")


def demand_subject(b: Any, doc: Doc) -> str:
    return f"Letter before claim – {doc.name(b.m.client)}"


def demand_body(b: Any, doc: Doc) -> None:
    m = b.m
    k1 = m.x.setdefault("contract_date", b.t - dt.timedelta(days=b.rng.randint(200, 500)))
    amount = m.x.setdefault("amount", b.rng.randint(40, 900) * 1000)
    doc.p(f"We act for {doc.name(m.client)}. We write concerning the services agreement between our client and "
          f"{doc.name(m.cp)} dated {b.fmt_date(k1, 'en', 'ordinal')}.")
    doc.p(f"Our client's invoices totalling £{amount:,} remain unpaid. Unless payment is received within 14 days we "
          "are instructed to issue proceedings without further notice.")


def answer_subject(b: Any, doc: Doc, demand: FileSpec) -> str:
    return f"{doc.name(b.m.client)} v {doc.name(b.m.cp)}"


def answer_body(b: Any, doc: Doc, demand: FileSpec) -> None:
    m = b.m
    doc.p(f"We act for {doc.name(m.cp)} and refer to your letter dated {b.fmt_date(demand.date, 'en')}.")
    doc.p("Our client denies that any sum is due. The services were defective and our client has a counterclaim.")
    doc.p("Please direct all further correspondence to this firm.")


# ---------------------------------------------------------------- court documents
def _heading(b: Any, doc: Doc, title: str) -> None:
    m = b.m
    court = m.court
    variant = court.name if b.rng.random() < 0.6 else court.variants[1]
    if "Tribunal" in court.name:
        doc.p(doc.name(court, variant=variant), bold=True)
    else:
        if variant.upper() not in court.variants:
            court.variants.append(variant.upper())
        doc.p(f"IN THE {doc.name(court, variant=variant.upper())}", bold=True)
    label_ = "Case No" if "Tribunal" in court.name else "Claim No"
    doc.p(f"{label_}: {doc.ident('case_number', m.case_numbers[0], court.name)}")
    doc.p("BETWEEN:")
    doc.p(doc.name(m.client, variant=m.client.name.upper()) if m.client.kind == "company" else doc.name(m.client))
    doc.p("Claimant")
    doc.p("– and –")
    doc.p(doc.name(m.cp, variant=m.cp.name.upper()) if m.cp.kind == "company" else doc.name(m.cp))
    doc.p("Defendant" if "Tribunal" not in court.name else "Respondent")
    doc.blank()
    doc.p(title.upper(), style="Title")


def court_doc(b: Any, doc: Doc, what: str, d: dt.date) -> tuple[str, str]:
    m = b.m
    firm = b.est.firm_name
    k1 = m.x.setdefault("contract_date", d - dt.timedelta(days=400))
    pleadings = {
        "claim": ("Particulars of Claim", "statement_of_claim", "Claimant", b.firm, lambda: [
            f"1. By an agreement dated {b.fmt_date(k1, 'en', 'ordinal')} the Defendant engaged the Claimant.",
            f"2. The Claimant claims £{m.x.setdefault('amount', 120000):,} together with interest."]),
        "defence": ("Defence", "statement_of_defence", "Defendant", m.oc, lambda: [
            f"1. The Defendant responds to the Particulars of Claim dated {b.fmt_date(m.x['claim'].date, 'en')}.",
            "2. It is denied that the Claimant is entitled to the sum claimed or at all."]),
        "reply": ("Reply to Defence", "brief", "Claimant", b.firm, lambda: [
            f"1. The Claimant replies to the Defence dated {b.fmt_date(m.x['defence'].date, 'en')}."])}
    if what in pleadings:
        title, doc_type, side, solicitors, lines = pleadings[what]
        _heading(b, doc, title)
        for line in lines():
            doc.p(line)
        doc.p(f"Solicitors for the {side}: {doc.name(solicitors, variant=firm if solicitors is b.firm else None)}")
        doc.p(f"Dated {b.fmt_date(d, 'en', 'ordinal')}")
        return title, doc_type
    if what == "order":
        _heading(b, doc, "Order")
        doc.p(f"UPON the Claimant's application dated {b.fmt_date(d - dt.timedelta(days=21), 'en')}")
        doc.p("IT IS ORDERED THAT the parties shall exchange witness statements within 28 days.")
        doc.p(f"Dated {b.fmt_date(d, 'en', 'plain')}")
        return "Order", "court_order"
    if what == "judgment":
        _heading(b, doc, "Approved Judgment")
        doc.p(f"Date: {b.fmt_date(d, 'en', 'plain')}")
        doc.p("1. For the reasons below, the claim succeeds in part.")
        return "Approved Judgment", "judgment"
    if what == "et1":
        m.x["client_respondent"] = m.client.kind == "company"
        doc.p(doc.name(m.court, variant=m.court.name), bold=True)
        doc.p(f"Case number: {doc.ident('case_number', m.case_numbers[0], m.court.name)}")
        doc.p("CLAIM FORM (ET1)", style="Title")
        doc.p(f"Claimant: {doc.name(m.x['employee'])}")
        doc.p(f"Respondent: {doc.name(m.x['employer'])}")
        doc.p("The claimant complains of unfair dismissal.")
        doc.p(f"Date received: {b.fmt_date(d, 'en', 'numeric')}")
        return "Claim form ET1", "statement_of_claim"
    doc.p(doc.name(m.court, variant=m.court.name), bold=True)
    doc.p(f"Case number: {doc.ident('case_number', m.case_numbers[0], m.court.name)}")
    doc.p("RESPONSE FORM (ET3)", style="Title")
    doc.p(f"Respondent: {doc.name(m.x['employer'])}")
    doc.p(f"Claimant: {doc.name(m.x['employee'])}")
    doc.p(f"The respondent resists the claim received on {b.fmt_date(m.x['et1'].date, 'en', 'numeric')}.")
    doc.p(f"Representative: {doc.name(m.oc if m.x.get('client_respondent') is False else b.firm)}")
    doc.p(f"Date: {b.fmt_date(d, 'en', 'numeric')}")
    return "Response form ET3", "statement_of_defence"


def appendix(b: Any, doc: Doc, kind: str, main: FileSpec) -> tuple[str, str | None, str, dt.date]:
    """(title, doc type, label, the date the appendix states)."""
    m = b.m
    if kind == "employment":
        doc.p("APPENDIX 1", bold=True)
        doc.p("CONTRACT OF EMPLOYMENT", style="Title")
        doc.p(f"between {doc.name(m.x['employer'])} and {doc.name(m.x['employee'])}")
        start = b.t - dt.timedelta(days=b.rng.randint(900, 2500))
        doc.p(f"Dated {b.fmt_date(start, 'en', 'ordinal')}")
        doc.p("1. The Employee is employed as Operations Manager with effect from the date of this contract.")
        return "Contract of employment", "employment", "Appendix 1", start
    doc.p("SCHEDULE 1", bold=True)
    doc.p("THE PLAN", style="Title")
    doc.p(f"Plan of the Premises referred to in the lease between {doc.name(m.client)} and {doc.name(m.cp)}.")
    doc.p(f"Plan date: {b.fmt_date(b.t, 'en', 'plain')}")
    return "Plan", None, "Schedule 1", b.t


def simple_doc(b: Any, doc: Doc, what: str, d: dt.date, cite: FileSpec | None) -> tuple[str, str]:
    m = b.m
    if what == "heads_of_terms":
        doc.p("HEADS OF TERMS", style="Title")
        doc.p(f"SUBJECT TO CONTRACT – {b.fmt_date(d, 'en', 'plain')}")
        doc.p(f"Parties: {doc.name(m.client)} and {doc.name(m.cp)}")
        doc.p("These heads of terms are not legally binding save for the confidentiality and exclusivity clauses.")
        return "Heads of Terms", "term_sheet"
    if what == "variation":
        doc.p("DEED OF VARIATION", style="Title")
        doc.p(f"THIS DEED is dated {b.fmt_date(d, 'en', 'ordinal')}")
        doc.p(f"BETWEEN {describe(b, doc, m.client)} and {describe(b, doc, m.cp)}.")
        doc.p(f"This deed varies the lease dated {b.fmt_date(cite.date, 'en', 'ordinal')} between the parties.")
        doc.p("1. The annual rent is reduced with effect from the next quarter day.")
        return "Deed of Variation", "amendment"
    if what == "side_letter":
        doc.p(f"{b.fmt_date(d, 'en')}")
        doc.p(f"To: {doc.name(m.cp)}")
        doc.p("SIDE LETTER", style="Title")
        doc.p(f"We refer to the master services agreement dated {b.fmt_date(cite.date, 'en', 'ordinal')} between "
              f"{doc.name(m.client)} and you. With effect from today clause 3 of the agreement is amended.")
        return "Side Letter", "amendment"
    if what == "register_extract":
        e = m.target or m.cp
        doc.p("Companies House", bold=True)
        doc.p(f"{doc.name(e, variant=e.name.upper())}", style="Title")
        if e.register:
            doc.p(f"Company number {doc.ident('register_number', e.register['value'], e.register['issuer'], e)}")
        doc.p(f"Registered office address: {e.address}")
        doc.p("Company status: Active")
        doc.p(f"Officers: {e.people[0].full} (Director)")
        doc.p(f"Extract produced on {b.fmt_date(d, 'en', 'plain')}")
        doc.p("SCHEDULE 2 – COMPANY SEARCH")
        return "Company search", "register_extract"
    if what == "minutes":
        e = m.x.get("buyer_entity") or m.client
        doc.p(f"{doc.name(e, variant=e.name.upper())}", bold=True)
        doc.p("MINUTES OF A MEETING OF THE BOARD OF DIRECTORS", style="Title")
        doc.p(f"held on {b.fmt_date(d, 'en', 'ordinal')} at {e.address}")
        what_ = "the share purchase agreement" if m.kind == "ma" else "the new articles of association"
        doc.p(f"1. The chair reported on {what_} dated {b.fmt_date(cite.date, 'en', 'ordinal')}.")
        doc.p("2. IT WAS RESOLVED that the company approve the same.")
        return "Board minutes", "minutes"
    if what == "resolution":
        doc.p("WRITTEN RESOLUTION OF THE SHAREHOLDERS", style="Title")
        doc.p(f"of {doc.name(m.client, variant=m.client.name.upper())}")
        reg = m.client.register
        if reg:
            doc.p(f"(Company number {doc.ident('register_number', reg['value'], reg['issuer'], m.client)})")
        doc.p(f"Circulation date: {b.fmt_date(d, 'en', 'ordinal')}")
        doc.p(f"THAT the draft articles of association dated {b.fmt_date(cite.date, 'en', 'ordinal')} be adopted as "
              "the articles of association of the company in substitution for the existing articles.")
        return "Written resolution", "shareholder_resolution"
    if what == "poa":
        doc.p("POWER OF ATTORNEY", style="Title")
        doc.p(f"THIS POWER OF ATTORNEY is made on {b.fmt_date(d, 'en', 'ordinal')} by "
              f"{describe(b, doc, m.client)}.")
        doc.p(f"The company appoints {m.lawyers[0].full} of {doc.name(b.firm, variant=b.est.firm_name)} to sign on "
              "its behalf any filing with Companies House.")
        return "Power of attorney", "power_of_attorney"
    e = m.target or m.cp
    doc.p("LEGAL DUE DILIGENCE REPORT", style="Title")
    doc.p(f"Project {m.x.setdefault('code', b.codename())} – {doc.name(e)}")
    doc.p(f"Report date: {b.fmt_date(d, 'en', 'plain')}")
    doc.p(f"Prepared by {doc.name(b.firm, variant=b.est.firm_name)} for {doc.name(m.client)}.")
    doc.p("1. Corporate: no issues of concern. 2. Material contracts: two contracts contain change of control clauses.")
    return "Legal due diligence report", "dd_report"


# ---------------------------------------------------------------- contracts
def _k(name: str, *values: str, rationales=()) -> Knob:
    return Knob(name, values=list(values), rationales=list(rationales))


def _o(name: str, text: str, initial: bool = True, rationales=()) -> Knob:
    return Knob(name, text=text, initial=initial, rationales=list(rationales))


CONTRACTS: dict[str, dict[str, Any]] = {
    "spa": {"title": "Share Purchase Agreement", "doc_type": "spa", "roles": ("Seller", "Buyer"), "knobs": lambda: [
        _k("price", "£12,500,000", "£12,000,000", "£11,750,000", rationales=["Reflects the DD findings."]),
        _k("cap", "100 per cent. of the Consideration", "50 per cent. of the Consideration",
           "30 per cent. of the Consideration", rationales=["Market standard for a deal of this size."]),
        _k("period", "24 months", "18 months", "12 months"),
        _o("noncompete", "The Seller shall not compete with the business of the Company for three years.",
           rationales=["Client insists on protection of goodwill."]),
        _k("law", "the laws of England and Wales", "English law")],
        "clauses": [("1. Sale and purchase", ["The Seller shall sell and the Buyer shall buy the Shares with full "
                                              "title guarantee."]),
                    ("2. Consideration", ["The consideration for the Shares is ", ("price",), " payable on "
                                          "Completion."]),
                    ("3. Limitations", ["The aggregate liability of the Seller shall not exceed ", ("cap",),
                                        ". No claim may be brought after ", ("period",), " from Completion."]),
                    ("4. Restrictive covenants", [("noncompete",)]),
                    ("5. Governing law", ["This Agreement is governed by ", ("law",), "."])]},
    "nda": {"title": "Confidentiality Agreement", "doc_type": "nda", "roles": ("Disclosing Party", "Recipient"),
            "knobs": lambda: [_k("term", "two years", "three years", "five years")],
            "clauses": [("1. Confidential Information", ["The Recipient shall keep the Confidential Information "
                                                         "confidential for ", ("term",), "."]),
                        ("2. Governing law", ["This Agreement is governed by the laws of England and Wales."])]},
    "msa": {"title": "Master Services Agreement", "doc_type": "supply_agreement", "roles": ("Supplier", "Customer"),
            "knobs": lambda: [
                _k("fees", "£25,000 per month", "£23,500 per month", "£22,000 per month"),
                _k("liability", "the fees paid in the preceding 12 months", "150 per cent. of the annual fees",
                   "£1,000,000", rationales=["Insurance cover is limited to £1m."]),
                _o("audit", "The Customer may audit the Supplier once a year on 30 days' notice."),
                _k("notice", "six months", "three months", "twelve months")],
            "clauses": [("1. Services", ["The Supplier shall provide the Services in accordance with Schedule 1."]),
                        ("2. Charges", ["The Customer shall pay ", ("fees",), "."]),
                        ("3. Liability", ["Each party's total liability is limited to ", ("liability",), "."]),
                        ("4. Audit", [("audit",)]),
                        ("5. Term", ["Either party may terminate on ", ("notice",), " written notice."])]},
    "lease": {"title": "Lease", "doc_type": "lease", "roles": ("Landlord", "Tenant"), "knobs": lambda: [
        _k("rent", "£148,000 per annum", "£142,500 per annum", "£139,000 per annum",
           rationales=["Agreed at the site meeting."]),
        _k("term", "10 years", "15 years", "10 years with a tenant break at year 5"),
        _o("break", "The Tenant may terminate this Lease on the fifth anniversary of the Term Commencement Date."),
        _k("review", "upward only open market rent review every five years",
           "CPI-linked review, collar 1% and cap 4%")],
        "clauses": [("1. Letting", ["The Landlord lets the Premises to the Tenant for a term of ", ("term",), "."]),
                    ("2. Rent", ["The Tenant shall pay ", ("rent",), " by equal quarterly payments in advance."]),
                    ("3. Rent review", ["The rent is subject to ", ("review",), "."]),
                    ("4. Break", [("break",)])]},
    "settlement": {"title": "Settlement Agreement", "doc_type": "settlement", "roles": ("Claimant", "Defendant"),
                   "knobs": lambda: [
                       _k("sum", "£85,000", "£72,500", "£65,000"),
                       _o("confidential", "The terms of this agreement are confidential."),
                       _k("costs", "each party shall bear its own costs", "the Defendant shall pay the Claimant's "
                                                                          "costs of £12,000")],
                   "clauses": [("1. Payment", ["The Defendant shall pay the Claimant ", ("sum",),
                                               " in full and final settlement of the Claim."]),
                               ("2. Costs", ["", ("costs",), "."]),
                               ("3. Confidentiality", [("confidential",)])]},
    "termination": {"title": "Settlement Agreement (Employment)", "doc_type": "termination_agreement",
                    "roles": ("Employer", "Employee"), "knobs": lambda: [
                        _k("date", "the Termination Date shall be 31 March", "the Termination Date shall be 30 April"),
                        _k("payment", "£38,000", "£42,500", "£45,000", rationales=["Agreed on the call."]),
                        _o("reference", "The Employer shall provide an agreed reference."),
                        _k("garden", "The Employee shall be on garden leave until the Termination Date.",
                           "The Employee shall continue to work until the Termination Date.")],
                    "clauses": [("1. Termination", ["The parties agree that ", ("date",), "."]),
                                ("2. Payment", ["The Employer shall pay the Employee ", ("payment",),
                                                " as compensation for loss of office."]),
                                ("3. Garden leave", [("garden",)]),
                                ("4. Reference", [("reference",)])]},
    "articles": {"title": "Articles of Association", "doc_type": "articles", "roles": ("Company",), "knobs": lambda: [
        _k("quorum", "two directors", "one director", "two directors including an Investor Director"),
        _o("drag", "Shareholders holding 75 per cent. of the shares may require the others to sell."),
        _k("transfer", "with the consent of the board", "freely to a Permitted Transferee")],
        "clauses": [("1. Directors", ["The quorum for board meetings is ", ("quorum",), "."]),
                    ("2. Transfers", ["Shares may be transferred ", ("transfer",), "."]),
                    ("3. Drag along", [("drag",)])]},
}


def contract_body(b: Any, ctx: Version, doc: Doc, spec: dict[str, Any], parties: list[Entity]) -> None:
    doc.p(spec["title"].upper(), style="Title")
    if spec["doc_type"] == "articles":
        doc.p(f"of {describe(b, doc, parties[0])}")
    else:
        doc.p("BETWEEN:")
        for i, (e, role) in enumerate(zip(parties, spec["roles"], strict=True)):
            doc.p(f"({i + 1}) {describe(b, doc, e)} (the \"{role}\"){';' if i + 1 < len(parties) else '.'}")
    for heading, parts in spec["clauses"]:
        ctx.h(heading)
        doc.p(*[ctx.k(x[0]) if isinstance(x, tuple) else x for x in parts])


def signature_block(b: Any, doc: Doc, d: dt.date, signatories: list[tuple[Entity, Any]]) -> None:
    doc.blank()
    for e, person in signatories:
        doc.p("______________________________")
        if e.kind == "person":
            doc.p(f"Signed by {doc.name(e)}")
        else:
            doc.p(f"Signed by {person.full}, director, for and on behalf of {doc.name(e)}")


def compare_doc(b: Any, doc: Doc, older: FileSpec, newer: FileSpec, marked: FileSpec) -> str:
    """The compare report's text (header, then the redline of ``marked`` with deleted and inserted text
    both shown); returns its file name."""
    tool = b.rng.choice(["Litera", "Workshare"])
    o_name, n_name = older.path.rsplit("/", 1)[-1], newer.path.rsplit("/", 1)[-1]
    doc.p(f"{tool} Compare – Comparison of {o_name} and {n_name}" if tool == "Workshare" else
          "Litera Compare – Comparison Details", bold=True)
    doc.p(f"Original document: {o_name}")
    doc.p(f"Modified document: {n_name}")
    doc.p(f"Comparison run: {b.fmt_date(newer.date, 'en', 'numeric')} {b.rng.randint(9, 18)}:{b.rng.randint(10, 59)}")
    revs = marked.doc.revisions()
    ins = sum(1 for r in revs if r["type"] == "insertion")
    doc.p(f"Insertions: {ins}   Deletions: {len(revs) - ins}   Moves: 0")
    doc.blank()
    for p in marked.doc.paras:
        doc.paras.append({**p, "segs": [s if isinstance(s, str) else s[1] for s in p["segs"]
                                        if isinstance(s, str) or s[0] in ("ins", "del", "b")]})
    doc.absorb(marked.doc)
    stem = newer.title
    if tool == "Litera":
        return f"Comparison of v{older.order} to v{newer.order} - {stem}.pdf"
    return f"Workshare Compare - {o_name.rsplit('.', 1)[0]} vs {n_name.rsplit('.', 1)[0]}.pdf"


# ---------------------------------------------------------------- outside the matters
FOLDERS = {"precedents": "Precedents", "knowhow": "Know-how", "post": "Post Room", "scan": "Scan_"}
PRECEDENTS = ["nda", "engagement"]


def precedent(b: Any, doc: Doc, what: str) -> tuple[str, str, str]:
    """(file name, title, doc type) of a precedent (no matter)."""
    if what == "nda":
        doc.p("CONFIDENTIALITY AGREEMENT", style="Title")
        doc.p("THIS AGREEMENT is dated [date] and made BETWEEN [PARTY A] and [PARTY B].")
        doc.p("1. The Recipient shall keep the Confidential Information confidential for [two] years.")
        return "Precedent - Confidentiality Agreement (mutual).docx", "Confidentiality Agreement", "nda"
    doc.p("[Letterhead]")
    doc.p("Engagement letter – [matter]")
    doc.p("Thank you for instructing us to act for [client] in connection with [matter].")
    return "Precedent - Engagement letter.docx", "Engagement letter", "engagement_letter"


def knowhow(b: Any, doc: Doc) -> tuple[str, str]:
    doc.p(f"{doc.name(b.firm, variant=b.est.letterhead)}", bold=True)
    doc.p("Employment law update – what changes this year", style="Title")
    doc.p("Our briefing for clients on holiday pay, flexible working requests and the new statutory code.")
    return "Client briefing - Employment law update.pdf", "Employment law update"


def post_subject(b: Any, doc: Doc) -> str:
    return f"{b.m.title}"


def post_body(b: Any, doc: Doc) -> None:
    doc.p("We refer to the above matter and to our recent telephone conversation.")
    doc.p("Please let us have your proposals for the next steps within 14 days.")


def court_notice(b: Any, doc: Doc, d: dt.date) -> str:
    m = b.m
    doc.p(doc.name(m.court, variant=m.court.variants[-1]), bold=True)
    doc.p(f"Claim No: {doc.ident('case_number', m.case_numbers[0], m.court.name)}" if "Tribunal" not in
          m.court.name else f"Case number: {doc.ident('case_number', m.case_numbers[0], m.court.name)}")
    doc.p("NOTICE OF HEARING", style="Title")
    doc.p(f"Date of notice: {b.fmt_date(d, 'en', 'plain')}")
    doc.p(f"The hearing will take place on {b.fmt_date(d + dt.timedelta(days=45), 'en', 'ordinal')} at 10:30 am.")
    return "Notice of hearing"


def client_post_subject(b: Any, doc: Doc) -> str:
    return f"Client no. {b.m.client_number}"


def client_post_body(b: Any, doc: Doc) -> None:
    doc.p(f"We enclose the documents you asked for on behalf of {doc.name(b.m.client)}.")
    doc.p("Please call me if you need anything else.")
