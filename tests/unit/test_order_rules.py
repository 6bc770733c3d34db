"""The pure pieces behind order independence (issue 14 item 1): every derived fact is a function of the
estate, not of the order documents arrive in.

* roles on a matter are settled from *all* claims (:func:`ki.domain.entities.roles.settle_roles`);
* an entity's name is chosen from the spellings its documents use (:func:`ki.domain.entities.names.canonical_name`);
* a relate decision reads a set of files described by :class:`ki.domain.relate.wants.Wants`, so a file that
  classifies later knows whether the decision must be taken again;
* the relate rules decide the same whatever order their candidates come in (property tests).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ki.domain.entities.names import canonical_name
from ki.domain.entities.roles import PartyClaims, settle_roles
from ki.domain.relate.facts import FileFacts
from ki.domain.relate.policy_decide import decide
from ki.domain.relate.wants import Wants, listed_facts, search_score

# --- roles ----------------------------------------------------------------------------------------

ROLE_CASES = [
    ("the firm is advisor whatever is claimed", {1: PartyClaims("law_firm", True, {("client", "stated")})},
     {1: ("advisor", "firm")}),
    ("another law firm is advisor", {1: PartyClaims("law_firm")}, {1: ("advisor", "kind")}),
    ("a court is court", {1: PartyClaims("court", claims={("client", "stated")})}, {1: ("court", "kind")}),
    ("nobody claims it: counterparty", {1: PartyClaims("company")}, {1: ("counterparty", "default")}),
    ("the strongest claim wins", {1: PartyClaims("company", claims={("counterparty", "inferred"),
                                                                     ("client", "folder")})},
     {1: ("client", "folder")}),
    ("equal claims: client before counterparty", {1: PartyClaims("company", claims={("counterparty", "stated"),
                                                                                     ("client", "stated")})},
     {1: ("client", "stated")}),
    ("imported client outranks what documents say", {1: PartyClaims("company", claims={("counterparty", "stated"),
                                                                                        ("client", "imported")})},
     {1: ("client", "imported")}),
    ("a weaker client claim yields to the matter's client",
     {1: PartyClaims("company", claims={("client", "stated")}),
      2: PartyClaims("company", claims={("client", "inferred")})},
     {1: ("client", "stated"), 2: ("counterparty", "default")}),
    ("... and falls back to its next claim",
     {1: PartyClaims("company", claims={("client", "stated")}),
      2: PartyClaims("person", claims={("client", "inferred"), ("other", "inferred")})},
     {1: ("client", "stated"), 2: ("other", "inferred")}),
    ("two equally strong clients stay clients",
     {1: PartyClaims("company", claims={("client", "stated")}),
      2: PartyClaims("company", claims={("client", "stated")})},
     {1: ("client", "stated"), 2: ("client", "stated")}),
]


@pytest.mark.parametrize("label, parties, expected", ROLE_CASES, ids=[c[0] for c in ROLE_CASES])
def test_settle_roles(label, parties, expected):
    assert settle_roles(parties) == expected


CLAIM = st.tuples(st.sampled_from(["client", "counterparty", "other"]),
                  st.sampled_from(["stated", "folder", "code", "inferred", "imported"]))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 4), st.sampled_from(["company", "person", "law_firm"]), CLAIM),
                min_size=1, max_size=14), st.randoms(use_true_random=False))
def test_settled_roles_do_not_depend_on_the_order_claims_arrive_in(claims, rnd):
    """Documents arrive in any order; each adds its claims; the settled roles are the same."""
    kinds = {}
    for entity, kind, _ in claims:
        kinds.setdefault(entity, kind)

    def settle(order):
        parties = {}
        for entity, _, claim in order:
            parties.setdefault(entity, PartyClaims(kinds[entity])).add([claim])
        return settle_roles(parties)

    shuffled = list(claims)
    rnd.shuffle(shuffled)
    assert settle(claims) == settle(shuffled)


# --- names ----------------------------------------------------------------------------------------

NAME_CASES = [
    ({"GROTJAHN UHLIG": 9, "Grotjahn Uhlig Rechtsanwälte": 1}, None, "Grotjahn Uhlig Rechtsanwälte"),
    ({"ArbG Bremen": 5, "Arbeitsgericht Bremen": 1}, "court", "Arbeitsgericht Bremen"),
    ({"Bergbrück Druck GmbH & Co KG": 2, "Bergbrück Druck GmbH u. Co. KG": 1}, None, "Bergbrück Druck GmbH & Co KG"),
    ({"Eichenquell Immobilien AG": 2, "Eichenquell Immobilien Aktiengesellschaft": 2}, None,
     "Eichenquell Immobilien AG"),
    ({"Mistral Point Capital Ltd": 1, "Mistral Point Capital Limited": 1}, None, "Mistral Point Capital Ltd"),
]


@pytest.mark.parametrize("spellings, kind, expected", NAME_CASES)
def test_canonical_name(spellings, kind, expected):
    assert canonical_name(spellings, kind=kind) == expected
    assert canonical_name(dict(reversed(list(spellings.items()))), kind=kind) == expected


def test_canonical_name_needs_a_spelling():
    with pytest.raises(ValueError):
        canonical_name({})


# --- what a relate decision reads ---------------------------------------------------------------


def facts(path: str, text: str = "", *, h: str | None = None, **kw) -> FileFacts:
    return FileFacts(ref=kw.pop("ref", path), path=path, format=kw.pop("format", path.rsplit(".", 1)[-1]),
                     title=kw.pop("title", text.splitlines()[0] if text else ""), text=text,
                     content_hash=h or f"h-{path}", **kw)


def test_search_score_mirrors_search_documents():
    assert search_score("", title=None, rel_path="a/b.pdf", phrase_hit=False) == 1.0
    assert search_score("Anlage K1", title="Anlage K1 Liefervertrag", rel_path="M/x.pdf", phrase_hit=False) == 2.0
    assert search_score("anlage k1", title="Klage", rel_path="M/Klage.pdf", phrase_hit=True) == 3.0
    assert search_score("anlage k1", title="Klage", rel_path="M/Klage.pdf", phrase_hit=False) == 0.0


def test_wants_reads_what_the_rules_would_open():
    letter = facts("M/Rechnung RE-1.pdf", "Rechnung Nr. RE-1\nHannover, 26.06.2024\n"
                   "Für unsere Tätigkeit gemäß Mandatsvereinbarung vom 02.02.2024 berechnen wir:")
    wants = Wants.of(letter)
    assert Wants.from_json(wants.as_json()) == wants
    engagement = facts("M/Mandatsvereinbarung.pdf", "Mandatsvereinbarung\nText")
    assert wants.reads(engagement, text=engagement.text, message_id=None)
    unrelated = facts("M/Vollmacht.pdf", "Vollmacht\nText")
    assert not wants.reads(unrelated, text=unrelated.text, message_id=None)
    assert wants.reads(facts("M/Kopie.pdf", h=letter.content_hash), text="", message_id=None)  # identical bytes

    annex = Wants.of(facts("M/Anlagen/Anlage K1 Liefervertrag.pdf", "Anlage K1\nLiefervertrag"))
    claim = facts("M/Klageschrift.pdf", "Klageschrift\nBeweis: Liefervertrag vom 01.02.2023, Anlage K1")
    assert annex.reads(claim, text=claim.text, message_id=None)  # it cites the label
    assert not annex.by_listing(listed_facts({"path": claim.path, "title": claim.title, "format": "pdf"}))

    reply = Wants.of(facts("M/b.eml", "Danke", format="eml",
                           mail={"message_id": "2@x", "in_reply_to": "1@x", "subject": "AW: Entwurf"}))
    assert reply.reads(facts("M/a.eml", format="eml", title="Entwurf"), text="", message_id="9@x")  # subject
    assert reply.reads(facts("M/z.eml", format="eml", title="Other"), text="", message_id="1@x")  # named parent
    assert not reply.reads(facts("M/z.eml", format="eml", title="Other"), text="", message_id="7@x")


# --- the relate rules decide the same for any order of their candidates ----------------------------

BODY = ("§ 1 Mietgegenstand Der Vermieter vermietet dem Mieter die Fläche im Erdgeschoss mit ca. 500 m². "
        "§ 2 Mietzeit Das Mietverhältnis beginnt am 01.05.2024 und läuft fünf Jahre. "
        "§ 3 Miete Die monatliche Miete beträgt EUR 5.000,00 zuzüglich Umsatzsteuer. "
        "§ 4 Schlussbestimmungen Änderungen bedürfen der Schriftform. Gerichtsstand ist Hamburg.")


def _estate() -> list[FileFacts]:
    v1 = facts("M/Mietvertrag Entwurf v1.docx", "ENTWURF v1 – Stand: 01.03.2024\nMietvertrag\n" + BODY)
    v2 = facts("M/Mietvertrag Entwurf v2.docx", "ENTWURF v2 – Stand: 08.03.2024\nMietvertrag\n"
               + BODY.replace("fünf", "zehn"))
    red = facts("M/Mietvertrag Entwurf v2 mit Änderungen.docx",
                "ENTWURF v2 – Stand: 08.03.2024 – Änderungen gegenüber Entwurf v1 vom 01.03.2024 markiert\n"
                "Mietvertrag\n" + BODY.replace("fünf", "zehn"),
                original_text="ENTWURF v2 – Stand: 08.03.2024\nMietvertrag\n" + BODY, revision_kinds=("del", "ins"))
    copy = facts("M/Mietvertrag Entwurf v1 - Kopie.docx", v1.text, h=v1.content_hash)
    copy2 = facts("M/Ablage/Mietvertrag Entwurf v1.docx", v1.text, h=v1.content_hash)
    annex = facts("M/Anlagen/Anlage 1 Lageplan.pdf", "Anlage 1\nLageplan der Fläche")
    signed = facts("M/Mietvertrag unterschrieben.pdf", "Mietvertrag\n" + BODY.replace("fünf", "zehn")
                   + "\nAnlage 1: Lageplan\n________\nHamburg, 15.03.2024")
    nachtrag = facts("M/Nachtrag 1 Mietvertrag.docx", "Nachtrag Nr. 1\nzum Mietvertrag vom 15.03.2024\n"
                     "§ 3 wird wie folgt neu gefasst: Die Miete beträgt EUR 5.500,00.")
    invoice = facts("M/Rechnung RE-2024-7.pdf", "Rechnung Nr. RE-2024-7\nHamburg, 30.04.2024\n"
                    "gemäß Mietvertrag vom 15.03.2024 berechnen wir:")
    return [v1, v2, red, copy, copy2, annex, signed, nachtrag, invoice]


def _key(result) -> tuple:
    return (result.identity, result.same_as_ref, result.redline_against_ref,
            frozenset((r.type, r.target_ref) for r in result.relations))


@settings(max_examples=60, deadline=None)
@given(st.permutations(range(9)))
def test_decide_does_not_depend_on_the_order_of_candidates(order):
    files = _estate()
    for x in files:
        pool = [files[i] for i in order if files[i] is not x]
        assert _key(decide(x, pool)) == _key(decide(x, [f for f in files if f is not x]))


def test_the_estate_relates_as_expected():
    files = {f.path: f for f in _estate()}

    def rel(path):
        x = files["M/" + path]
        return decide(x, [f for f in files.values() if f is not x])

    # copies of one file: the deeper folder keeps the identity (canonical_key), the others are duplicates
    assert rel("Mietvertrag Entwurf v1 - Kopie.docx").same_as_ref == "M/Ablage/Mietvertrag Entwurf v1.docx"
    assert rel("Mietvertrag Entwurf v1.docx").identity == "duplicate"
    assert rel("Mietvertrag Entwurf v2 mit Änderungen.docx").redline_against_ref == \
        "M/Ablage/Mietvertrag Entwurf v1.docx"
    assert ("annex_of", "M/Mietvertrag unterschrieben.pdf") in _key(rel("Anlagen/Anlage 1 Lageplan.pdf"))[3]
    assert ("amends", "M/Mietvertrag unterschrieben.pdf") in _key(rel("Nachtrag 1 Mietvertrag.docx"))[3]
    assert {t for _, t in _key(rel("Rechnung RE-2024-7.pdf"))[3]} == {"M/Mietvertrag unterschrieben.pdf"}
