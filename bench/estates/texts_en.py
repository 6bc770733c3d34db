"""English wording of the plans (:mod:`bench.estates.plans`): tables of templates (see
:mod:`bench.estates.wording` for the placeholders) and the contracts' negotiable points.
"""

from __future__ import annotations

from typing import Any

from bench.estates.builder import Knob
from bench.estates.model import Doc, Entity

LANG = "en"
LABELS = {"engagement": "Engagement letter", "invoice": "Invoice", "file_note": "Attendance note",
          "demand": "Letter before claim", "answer": "Response to letter before claim"}
ACCEPTABLE = {"heads_of_terms": ["term_sheet"], "variation": ["amendment"], "side_letter": ["amendment", "letter"]}
FOLDERS = {"precedents": "Precedents", "knowhow": "Know-how", "post": "Post Room", "scan": "Scan_"}
SUBFOLDERS = {"mail": "Email", "corr": "Correspondence", "contracts": "Drafts", "signed": "Executed", "court": "Court",
              "billing": "Billing", "notes": "File Notes", "engagement": "Engagement", "annex": "Executed",
              "dd": "Due Diligence", "corporate": "Corporate"}
SUBFOLDER_LAYOUTS = ("workspace", "named")
COPY_NAMES = ["Copy of {stem}.{ext}", "{stem} - Copy.{ext}", "{stem} - Copy (2).{ext}", "{stem} (1).{ext}"]

SUBJECTS = {
    "engagement": "Engagement letter – {title}", "demand": "Letter before claim – {client}",
    "answer": "{client} v {cp}", "post": "{title}", "client_post": "Client no. {client_number}",
    "send": "{doc_title} – draft for review", "forward": "{doc_title} received",
    "intake": {"litigation": "Dispute with {cp_short}", "employment": "Employment matter – next steps",
               "lease": "{cp_short} – lease", "ma": "Project {code}", "commercial": "{client_short} / {cp_short} – MSA",
               "corporate": "New articles"}}

LETTERS = {
    "engagement": ["Thank you for instructing {firm} to act for {client} in connection with {title_lower}.",
                   "?cp We have carried out a conflict check against {cp} and are able to act.",
                   "{lawyer_full} will be the partner responsible for this matter, assisted by {assistant}.",
                   "Our fees will be charged on the basis of time spent at the hourly rates set out in the enclosed "
                   "terms of business. Please sign and return a copy of this letter."],
    "demand": ["We act for {client}. We write concerning the services agreement between our client and {cp} dated "
               "{k1:ordinal}.",
               "Our client's invoices totalling £{amount:,} remain unpaid. Unless payment is received within 14 days "
               "we are instructed to issue proceedings without further notice."],
    "answer": ["We act for {cp} and refer to your letter dated {demand_date}.",
               "Our client denies that any sum is due. The services were defective and our client has a counterclaim.",
               "Please direct all further correspondence to this firm."],
    "post": ["We refer to the above matter and to our recent telephone conversation.",
             "Please let us have your proposals for the next steps within 14 days."],
    "client_post": ["We enclose the documents you asked for on behalf of {client}.",
                    "Please call me if you need anything else."],
}

FOREIGN_LETTERS: dict[str, dict[str, list[str]]] = {}

MAILS = {
    "intake_1": {"litigation": ["Dear {lawyer},", "", "{cp} has still not paid our invoices and we would like you to "
                                "take this forward.", "Let me know what you need from us."],
                 "employment": ["Dear {lawyer},", "", "We need your help with the employment issue we discussed on the "
                                "phone.", "Let me know what you need from us."],
                 "lease": ["Dear {lawyer},", "", "We have agreed terms with {cp} and would like you to prepare the "
                           "lease."],
                 "ma": ["Dear {lawyer},", "", "As discussed, we would like you to act for us on the transaction with "
                        "{cp}."],
                 "commercial": ["Dear {lawyer},", "", "Please could you review the draft agreement with {cp}."],
                 "corporate": ["Dear {lawyer},", "", "The board would like to adopt new articles before the next "
                               "financial year."]},
    "intake_2": ["Dear {contact},", "", "Thank you for your instructions. We have opened a new matter and will send "
                 "our engagement letter shortly.", "For reference, our matter number is {ref}."],
    "intake_3": ["Thanks {lawyer},", "", "That is helpful. I will call you tomorrow."],
    "send": ["Dear {contact},", "", "Please find attached the latest draft of the {doc_title} for your review.",
             "I would be grateful for your comments by the end of the week."],
    "send_reply": ["Thank you.", "", "We have no further comments at this stage. Please go ahead."],
    "forward": ["See below – for the file."],
    "forward_court": ["Dear {contact},", "", "We attach the {doc_title} served on us today. We will send you our "
                      "comments shortly.", "?case_known Claim no. {case} – our ref. {ref}"],
}

HEADS = {
    "court": ["#IN THE {COURT}", "Claim No: {case}", "BETWEEN:", "{CLIENT}", "Claimant", "– and –", "{CP}",
              "Defendant", ""],
    "tribunal": ["#{court}", "Case number: {case}"],
}

DOCS: dict[str, dict[str, Any]] = {
    "claim": {"title": "Particulars of Claim", "doc_type": "statement_of_claim", "head": "court", "lines": [
        "=PARTICULARS OF CLAIM", "1. By an agreement dated {k1:ordinal} the Defendant engaged the Claimant.",
        "2. The Claimant claims £{amount:,} together with interest.",
        "Solicitors for the Claimant: {firm} (ref. {ref})", "Dated {d:ordinal}"]},
    "defence": {"title": "Defence", "doc_type": "statement_of_defence", "head": "court", "lines": [
        "=DEFENCE", "1. The Defendant responds to the Particulars of Claim dated {claim_date}.",
        "2. It is denied that the Claimant is entitled to the sum claimed or at all.",
        "Solicitors for the Defendant: {oc}", "Dated {d:ordinal}"]},
    "reply": {"title": "Reply to Defence", "doc_type": "brief", "head": "court", "lines": [
        "=REPLY TO DEFENCE", "1. The Claimant replies to the Defence dated {defence_date}.",
        "Solicitors for the Claimant: {firm} (ref. {ref})", "Dated {d:ordinal}"]},
    "order": {"title": "Order", "doc_type": "court_order", "head": "court", "lines": [
        "=ORDER", "UPON the Claimant's application dated {application}",
        "IT IS ORDERED THAT the parties shall exchange witness statements within 28 days.", "Dated {d:plain}"]},
    "judgment": {"title": "Approved Judgment", "doc_type": "judgment", "head": "court", "lines": [
        "=APPROVED JUDGMENT", "Date: {d:plain}", "1. For the reasons below, the claim succeeds in part."]},
    "et1": {"title": "Claim form ET1", "doc_type": "statement_of_claim", "head": "tribunal", "lines": [
        "=CLAIM FORM (ET1)", "Claimant: {employee}", "Respondent: {employer}",
        "The claimant complains of unfair dismissal.", "Date received: {d:numeric}"]},
    "et3": {"title": "Response form ET3", "doc_type": "statement_of_defence", "head": "tribunal", "lines": [
        "=RESPONSE FORM (ET3)", "Respondent: {employer}", "Claimant: {employee}",
        "The respondent resists the claim received on {et1_date:numeric}.", "Representative: {employer_rep}",
        "Date: {d:numeric}"]},
    "notice": {"title": "Notice of hearing", "doc_type": "court_order", "head": "tribunal", "lines": [
        "=NOTICE OF HEARING", "Date of notice: {d:plain}", "The hearing will take place on {hearing:ordinal} at "
        "10:30 am."]},
    "appendix_employment": {"title": "Contract of employment", "doc_type": "employment", "label": "Appendix 1",
                            "lines": ["#APPENDIX 1", "=CONTRACT OF EMPLOYMENT", "between {employer} and {employee}",
                                      "Dated {d:ordinal}", "1. The Employee is employed as Operations Manager with "
                                      "effect from the date of this contract."]},
    "appendix_plan": {"title": "Plan", "doc_type": None, "label": "Schedule 1", "lines": [
        "#SCHEDULE 1", "=THE PLAN", "Plan of the Premises referred to in the lease between {client} and {cp}.",
        "Plan date: {d:plain}"]},
    "heads_of_terms": {"title": "Heads of Terms", "doc_type": "term_sheet", "lines": [
        "=HEADS OF TERMS", "SUBJECT TO CONTRACT – {d:plain}", "Parties: {client} and {cp}",
        "These heads of terms are not legally binding save for the confidentiality and exclusivity clauses.",
        "Landlord's Solicitors: {firm_variant}", "?oc Tenant's Solicitors: {oc}"]},
    "variation": {"title": "Deed of Variation", "doc_type": "amendment", "lines": [
        "=DEED OF VARIATION", "THIS DEED is dated {d:ordinal}", "BETWEEN {client_desc} and {cp_desc}.",
        "This deed varies the lease dated {cite_date:ordinal} between the parties.",
        "1. The annual rent is reduced with effect from the next quarter day."]},
    "side_letter": {"title": "Side Letter", "doc_type": "amendment", "lines": [
        "{d}", "To: {cp}", "=SIDE LETTER", "We refer to the master services agreement dated {cite_date:ordinal} "
        "between {client} and you. With effect from today clause 3 of the agreement is amended."]},
    "register_extract": {"title": "Company search", "doc_type": "register_extract", "lines": [
        "#Companies House", "={TARGET}", "?target_reg Company number {target_reg}",
        "Registered office address: {target_address}", "Company status: Active", "Officers: {director} (Director)",
        "Extract produced on {d:plain}", "SCHEDULE 2 – COMPANY SEARCH"]},
    "minutes": {"title": "Board minutes", "doc_type": "minutes", "lines": [
        "#{CLIENT}", "?client_former {client} (formerly {client_former})", "A Private Company Limited by Shares",
        "=MINUTES OF A MEETING OF THE BOARD OF DIRECTORS", "held on {d:ordinal} at {client_address}",
        "1. The chair reported on the {cited} dated {cite_date:ordinal}.",
        "2. IT WAS RESOLVED that the company approve the same."]},
    "resolution": {"title": "Written resolution", "doc_type": "shareholder_resolution", "lines": [
        "=WRITTEN RESOLUTION OF THE SHAREHOLDERS", "of {CLIENT}", "PRIVATE COMPANY LIMITED BY SHARES",
        "?client_reg (Company number {client_reg})",
        "Circulation date: {d:ordinal}", "THAT the draft articles of association dated {cite_date:ordinal} be "
        "adopted as the articles of association of the company in substitution for the existing articles."]},
    "poa": {"title": "Power of attorney", "doc_type": "power_of_attorney", "lines": [
        "=POWER OF ATTORNEY", "THIS POWER OF ATTORNEY is made on {d:ordinal} by {client_desc}.",
        "The company appoints {lawyer_full} of {firm} to sign on its behalf any filing with Companies House.",
        "?client_former This power of attorney replaces the one granted under the company's former name, "
        "{client_former}."]},
    "dd_report": {"title": "Legal due diligence report", "doc_type": "dd_report", "lines": [
        "=LEGAL DUE DILIGENCE REPORT", "Project {code} – {target}", "Report date: {d:plain}",
        "Prepared by {firm} for {client}.", "Buyer's Solicitors: {firm_variant}", "1. Corporate: no issues of concern. "
        "2. Material contracts: two "
        "contracts contain change of control clauses."]},
    "invoice": {"title": "Invoice", "doc_type": "invoice", "letterhead": True, "lines": [
        "=INVOICE", "Invoice no.: {number}", "Invoice date: {invoice_date}", "Client: {client} (client no. "
        "{client_number})", "Matter: {ref} – {title}", "", "Professional charges for the period to "
        "{period_end:plain}: {hours} hours at £{rate} per hour.", "Payment is due within 30 days."]},
    "file_note": {"title": "Attendance note", "doc_type": "memo", "lines": [
        "#ATTENDANCE NOTE", "?note_dated Date: {d:numeric}", "?note_ref Matter: {ref}",
        "Attending: {lawyer_full}, {contact_full} ({client})", "", "Call with the client about {title_lower}. "
        "Discussed next steps and timetable.", "?cp Client confirmed that no offer has been received from {cp}."]},
    "precedent_nda": {"title": "Confidentiality Agreement", "doc_type": "nda",
                      "file": "Precedent - Confidentiality Agreement (mutual).docx", "lines": [
                          "Precedent – last updated {d:plain}", "=CONFIDENTIALITY AGREEMENT",
                          "THIS AGREEMENT is dated [date] and made BETWEEN [PARTY A] and [PARTY B].",
                          "1. The Recipient shall keep the Confidential Information confidential for [two] years."]},
    "precedent_engagement": {"title": "Engagement letter", "doc_type": "engagement_letter",
                             "file": "Precedent - Engagement letter.docx", "lines": [
                                 "[Letterhead]", "Precedent – last updated {d:plain}", "Engagement letter – [matter]",
                                 "Thank you for instructing us to act for [client] in connection with [matter]."]},
    "knowhow": {"title": "Employment law update", "doc_type": None, "file": "Client briefing - Employment law "
                "update.pdf", "lines": ["#{letterhead}", "=Employment law update – what changes this year",
                                        "{d:plain}",
                                        "Our briefing for clients on holiday pay, flexible working requests and the "
                                        "new statutory code."]},
}
CITED = {"ma": "share purchase agreement", "corporate": "new articles of association"}

STAMPS = {"draft": {"initials": "{who} Draft ({k}): {d:plain}", "caps": "DRAFT {k} – {d:plain} – SUBJECT TO CONTRACT",
                    "numeric": "Draft {k}: {d:numeric}"},
          "marked": " (marked against draft of {prev:short})", "final": "EXECUTION VERSION – {d:plain}",
          "signed": "THIS AGREEMENT is dated {d:ordinal}"}
CONTRACT = {"between": "BETWEEN:", "of": "of {party}", "party": "({i}) {party} (the \"{role}\"){end}",
            "sign_company": "Signed by {person}, director, for and on behalf of {party}",
            "sign_person": "Signed by {party}"}
COMPARE = {"Litera": ["#Litera Compare – Comparison Details", "Original document: {older}",
                      "Modified document: {newer}", "Comparison run: {d:numeric} {time}",
                      "Insertions: {ins}   Deletions: {dels}   Moves: 0"],
           "Workshare": ["#Workshare Compare – Comparison of {older} and {newer}", "Original document: {older}",
                         "Modified document: {newer}", "Comparison run: {d:numeric} {time}",
                         "Insertions: {ins}   Deletions: {dels}   Moves: 0"],
           "names": {"Litera": "Comparison of v{o} to v{n} - {title}.pdf",
                     "Workshare": "Workshare Compare - {older_stem} vs {newer_stem}.pdf"}}


def subject_tag(b: Any, subject: str) -> str:
    """A subject with the firm's filing tag (``… [#104233-0007]``), when the firm uses one."""
    tag = b.est.subject_tag
    if not tag:
        return subject
    t = tag.format(ref=b.m.ref)
    return t + subject if t.endswith(" - ") else f"{subject} {t}"


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
