"""Entity resolution and roles by rule, as tables (one row per rule of the spec).

Spec: insertion-pipeline.md "Extract metadata" (link on a shared typed identifier, identical normalised
names, the alias ledger, or token containment plus corroboration; contradicting register identifiers
keep homonyms apart; same-name candidates recorded; roles: firm = advisor, kept, imported client wins).
"""

from __future__ import annotations

import pytest

from ki.domain.entities.identifiers import Identifier, contradicts, find_identifiers, lei_valid, shares_identifier
from ki.domain.entities.names import contained, name_key
from ki.domain.entities.resolve import Candidate, Context, resolve_mention
from ki.domain.entities.roles import decide_role

HRB_D = Identifier("register_number", "HRB 18864", "Amtsgericht Düsseldorf")
HRB_L = Identifier("register_number", "HRB 154873", "Amtsgericht Leipzig")


# --- legal forms and names ---------------------------------------------------------------------------

@pytest.mark.parametrize("a, b", [
    ("Eiderhof Bau GmbH", "Eiderhof Bau G.m.b.H."),
    ("Eiderhof Bau GmbH", "Eiderhof Bau Gesellschaft mit beschränkter Haftung"),
    ("Eiderhof Bau GmbH", "EIDERHOF BAU GMBH"),
    ("Rheintal AG", "Rheintal Aktiengesellschaft"),
    ("Pfeiffer SE", "PFEIFFER SE"),
    ("Flügge Immobilien GmbH & Co. KG", "Flügge Immobilien GmbH u. Co. KG"),
    ("Flügge Immobilien GmbH & Co. KG", "FLÜGGE IMMOBILIEN GMBH & CO KG"),
    ("Thornfield Pharma Ltd", "Thornfield Pharma Limited"),
    ("Thornfield Pharma Ltd.", "Thornfield Pharma Ltd"),
    ("Acme Holdings LLC", "Acme Holdings L.L.C."),
    ("Wrenfield Technologies Inc.", "Wrenfield Technologies Incorporated"),
    ("Juniper Vale Holdings B.V.", "Juniper Vale Holdings BV"),
    ("Kanzlei Brückner Kranich PartG mbB", "Brückner Kranich"),
    ("Steffens Rechtsanwaltsgesellschaft mbH", "Steffens Rechtsanwälte"),
    ("Kessler Claußen Attorneys at Law", "KESSLER CLAUSSEN"),
    ("LG Hamburg", "Landgericht Hamburg"),
    ("Frau Almut Fehrs", "Almut Fehrs"),
])
def test_legal_form_and_spelling_variants_normalise_to_one_key(a, b):
    kind = "person" if "Fehrs" in a else None
    assert name_key(a, kind=kind).key == name_key(b, kind=kind).key


@pytest.mark.parametrize("a, b", [
    ("Rheintal AG", "Rheintal GmbH"),           # another legal person
    ("Brückner Energie GmbH", "Brückner Kranich"),
    ("Thornfield Pharma Ltd", "Thornfield Pharma Inc."),
])
def test_different_names_keep_different_keys(a, b):
    assert name_key(a).key != name_key(b).key


def test_containment_is_token_for_token_and_respects_forms():
    assert contained(name_key("Feldmann Spedition"), name_key("Feldmann Spedition AG"))
    assert contained(name_key("Nagel & Kollegen"), name_key("Dr. Nagel & Kollegen Rechtsanwälte"))
    assert not contained(name_key("Feldmann Spedition AG"), name_key("Feldmann Spedition GmbH"))
    assert not contained(name_key("Kessler"), name_key("Kessler Claußen"))  # one word is too weak
    assert not contained(name_key("Spedition Feldmann"), name_key("Feldmann Spedition AG"))


# --- typed identifiers ----------------------------------------------------------------------------------

def test_identifiers_are_typed_with_their_issuer():
    text = ("Rheintal AG, eingetragen im Handelsregister des Amtsgerichts Düsseldorf unter HRB 18864, "
            "USt-IdNr. DE399024509. Eichental, Amtsgericht Charlottenburg HRB 173011 B. "
            "Thornfield Pharma Limited, registered with Companies House under number 03079114. "
            "LEI 5493001KJTIIGC8Y1R12. Kessler Claußen · Amtsgericht Hannover PR 521")
    found = {(f.identifier.type, f.identifier.value, f.identifier.issuer) for f in find_identifiers(text)}
    assert ("register_number", "HRB 18864", "Amtsgericht Düsseldorf") in found
    assert ("register_number", "HRB 173011 B", "Amtsgericht Charlottenburg") in found
    assert ("register_number", "03079114", "Companies House") in found
    assert ("register_number", "PR 521", "Amtsgericht Hannover") in found
    assert ("vat_id", "DE399024509", None) in found
    assert ("lei", "5493001KJTIIGC8Y1R12", None) in found


def test_lei_checksum():
    assert lei_valid("5493001KJTIIGC8Y1R12")
    assert not lei_valid("5493001KJTIIGC8Y1R13")


@pytest.mark.parametrize("mention, entity, shares, contra", [
    ([HRB_D], [HRB_D], True, False),
    ([HRB_D], [HRB_L], False, True),                                   # the homonym case
    ([Identifier("register_number", "HRB 18864", None)], [HRB_D], True, False),  # issuer unknown on one side
    ([Identifier("register_number", "HRB 18864", "Amtsgericht Köln")], [HRB_D], False, True),
    ([], [HRB_D], False, False),
    ([Identifier("vat_id", "DE399024509")], [HRB_D], False, False),
])
def test_identifier_agreement_table(mention, entity, shares, contra):
    assert shares_identifier(mention, entity) is shares
    assert contradicts(mention, entity) is contra


# --- the resolution rules --------------------------------------------------------------------------------

def cand(entity_id, *names, identifiers=(), matters=(), identity_key=None, kind="company"):
    keys = tuple(name_key(n) for n in names)
    return Candidate(entity_id=entity_id, name=names[0], kind=kind, identity_key=identity_key or keys[0].key,
                     names=keys, identifiers=tuple(identifiers), matters=frozenset(matters))


RULES = [
    # (name, mention name, identifiers, candidates, context, expected entity, expected rule)
    ("shared identifier wins over a different spelling", "RHEINTAL AKTIENGESELLSCHAFT", [HRB_D],
     [cand(1, "Rheintal AG", identifiers=[HRB_D])], Context(), 1, "identifier"),
    ("identical normalised name", "Eiderhof Bau G.m.b.H.", [],
     [cand(2, "Eiderhof Bau GmbH")], Context(), 2, "name"),
    ("alias ledger", "KC Rechtsanwälte", [],
     [cand(3, "Kessler Claußen Rechtsanwälte PartG mbB", "KC Rechtsanwälte")], Context(), 3, "alias"),
    ("containment + same matter", "Feldmann Spedition", [],
     [cand(4, "Feldmann Spedition AG", matters=["matter:1"])], Context(matter_key="matter:1"), 4, "containment"),
    ("containment + shares a matter with a co-party", "Feldmann Spedition", [],
     [cand(4, "Feldmann Spedition AG", matters=["matter:9"])],
     Context(matter_key="matter:1", co_party_matters=frozenset({"matter:9"})), 4, "containment"),
    ("containment + acts on another matter for this matter's client", "Feldmann Spedition", [],
     [cand(4, "Feldmann Spedition AG", matters=["matter:7"])],
     Context(matter_key="matter:1", client_matters=frozenset({"matter:7"})), 4, "containment"),
    ("containment without corroboration stays apart", "Feldmann Spedition", [],
     [cand(4, "Feldmann Spedition AG", matters=["matter:7"])], Context(matter_key="matter:1"), None, "new"),
    ("contradicting register identifier keeps a homonym apart", "Rheintal AG", [HRB_L],
     [cand(1, "Rheintal AG", identifiers=[HRB_D], matters=["matter:1"])], Context(matter_key="matter:1"),
     None, "new"),
    ("a homonym without identifier goes to the one on this matter", "Rheintal AG", [],
     [cand(1, "Rheintal AG", identifiers=[HRB_D], matters=["matter:1"]),
      cand(5, "Rheintal AG", identifiers=[HRB_L], matters=["matter:2"],
           identity_key="rheintal|ag#register_number:HRB154873@leipzig")],
     Context(matter_key="matter:2"), 5, "name"),
    ("nothing alike: a new entity", "Pfeiffer SE", [], [cand(6, "Plambeck GmbH")], Context(), None, "new"),
]


@pytest.mark.parametrize("label, name, idents, candidates, ctx, entity, rule", RULES, ids=[r[0] for r in RULES])
def test_resolution_rules(label, name, idents, candidates, ctx, entity, rule):
    key = name_key(name)
    alias_keys = {c.entity_id: {n.key for n in c.names} for c in candidates}
    res = resolve_mention(key, idents, candidates, ctx, alias_keys=alias_keys)
    assert (res.entity_id, res.rule) == (entity, rule)


def test_contradicted_homonym_gets_a_distinguishing_identity_key_and_is_recorded():
    res = resolve_mention(name_key("Rheintal AG"), [HRB_L], [cand(1, "Rheintal AG", identifiers=[HRB_D])], Context())
    assert res.rule == "new" and res.contradicted == (1,) and res.same_name_candidates == (1,)
    assert res.identity_key == "rheintal|ag#register_number:HRB154873@leipzig"


def test_uncorroborated_containment_is_recorded_as_same_name_candidate():
    res = resolve_mention(name_key("Feldmann Spedition"), [], [cand(4, "Feldmann Spedition AG")], Context())
    assert res.rule == "new" and res.same_name_candidates == (4,) and res.identity_key == "feldmann spedition"


def test_containment_never_links_a_person_and_a_company():
    """A company name holding a person's ("Niamh Ogilvie and Caldera Holdings Limited", "Niamh Ogilvie
    Limited") is not that person, and a person is not the company named after them — whichever existed first."""
    same_matter = Context(matter_key="matter:1")
    niamh = cand(7, "Niamh Ogilvie", kind="person", matters=frozenset({"matter:1"}))
    pair = cand(8, "Niamh Ogilvie and Caldera Holdings Limited", matters=frozenset({"matter:1"}))
    res = resolve_mention(name_key("Niamh Ogilvie and Caldera Holdings Limited"), [], [niamh], same_matter,
                          kind="company")
    assert res.rule == "new"
    res = resolve_mention(name_key("Niamh Ogilvie", kind="person"), [], [pair], same_matter, kind="person")
    assert res.rule == "new"
    # between names of one sort containment still links
    caldera = cand(9, "Caldera Holdings Limited", matters=frozenset({"matter:1"}))
    res = resolve_mention(name_key("Caldera Holdings"), [], [caldera], same_matter, kind="company")
    assert (res.entity_id, res.rule, res.corroboration) == (9, "containment", "same_matter")


# --- roles --------------------------------------------------------------------------------------------------

ROLES = [
    # (label, kwargs, expected role, basis, matter update)
    ("the firm is advisor whatever a document says", dict(kind="law_firm", is_firm=True,
                                                          hints=[("client", "stated")], existing=None),
     "advisor", "firm", True),
    ("another law firm is advisor", dict(kind="law_firm", is_firm=False, hints=[], existing=None),
     "advisor", "kind", True),
    ("a court is court", dict(kind="court", is_firm=False, hints=[], existing=None), "court", "kind", True),
    ("unclaimed party: counterparty", dict(kind="company", is_firm=False, hints=[], existing=None),
     "counterparty", "default", True),
    ("a stated client", dict(kind="company", is_firm=False, hints=[("client", "stated")], existing=None),
     "client", "stated", True),
    ("an existing role is kept against an equal claim",
     dict(kind="company", is_firm=False, hints=[("counterparty", "stated")], existing=("client", "stated")),
     "client", "stated", False),
    ("a stronger claim replaces a default", dict(kind="company", is_firm=False, hints=[("client", "folder")],
                                                existing=("counterparty", "default")), "client", "folder", True),
    ("imported client outranks document claims",
     dict(kind="company", is_firm=False, hints=[("counterparty", "stated")], existing=("client", "imported"),
          imported_client=True), "client", "imported", False),
    ("a weaker client claim yields to the matter's client",
     dict(kind="company", is_firm=False, hints=[("client", "inferred")], existing=None, matter_client_rank=4),
     "counterparty", "default", True),
]


@pytest.mark.parametrize("label, kwargs, role, basis, update", ROLES, ids=[r[0] for r in ROLES])
def test_role_rules(label, kwargs, role, basis, update):
    d = decide_role(**kwargs)
    assert (d.role, d.basis, d.matter_update) == (role, basis, update)
