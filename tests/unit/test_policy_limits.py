"""Every answer ki's own rules policies can give fits ki's own result schemas (issue 14 item 6).

A limit of ki's own schema that its own policy can exceed quarantines valid input (a mail with more than
50 attachments was quarantined at relate: one ``references`` relation per attachment, 50 allowed). These
property tests generate hostile but valid inputs — many attachments, recipients, tracked changes, dates,
party names, candidate matters, deep quoted threads, huge / empty / unicode / control-character subjects,
names and paths — run each rules policy through :func:`ki.adapters.agents.loop.run_policy` with the tool argument
models and validators the stage uses, and assert the answer validates against the stage's result schema.

Policies covered: relate (:func:`ki.domain.relate.policy_decide.decide`), classify
(:class:`ki.domain.matters.policy.ClassifyRulesPolicy`), extract_metadata with document typing and parties
(:class:`ki.domain.metadata.policy.MetadataRulesPolicy` over the shipped ontology's tools), extract_decisions
(:class:`ki.domain.decisions.policy.DecisionRulesPolicy`). Bounded by the hypothesis profile (tests/conftest.py:
``ci`` under CI=1, derandomised); about 20 s in all on a quiet machine.
"""

from __future__ import annotations

import datetime as dt
import string

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from ki.adapters.agents.loop import AgentState, Tool, ToolResult, run_policy
from ki.domain.decisions.policy import DecisionRulesPolicy
from ki.domain.decisions.schema import MAX_ENTRIES, DecisionResult
from ki.domain.decisions.schema import make_validators as decision_validators
from ki.domain.matters.evidence import CorpusFile
from ki.domain.matters.policy import ClassifyRulesPolicy
from ki.domain.matters.schema import ClassifyResult, CreateMatterArgs, SearchMattersArgs
from ki.domain.metadata.policy import MetadataRulesPolicy, read_document
from ki.domain.metadata.schema import MetadataResult
from ki.domain.metadata.schema import make_validators as metadata_validators
from ki.domain.ontology.load import default_ontology
from ki.domain.ontology.tools import ontology_tools
from ki.domain.relate.facts import FileFacts
from ki.domain.relate.policy_decide import decide
from ki.domain.relate.schema import MAX_RELATIONS, RelateResult
from ki.domain.relate.schema import make_validators as relate_validators


def bounded(examples: int) -> settings:
    """``examples`` generated cases (the profile's other settings kept); large inputs are meant."""
    return settings(max_examples=examples, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                                                 HealthCheck.large_base_example])

# -- text: empty, unicode, control characters, huge -------------------------------------------------------

_CHARS = st.characters(blacklist_categories=("Cs",))  # anything a decoder can give (no lone surrogates)
_LEGAL = st.sampled_from(["Anlage K1", "Schedule 4", "Vertrag vom 02.02.2023", "Rechnung Nr. 2024-512",
                          "Re: AW: WG: Mietvertrag", "Az. 3 O 7/24", "Unser Zeichen: 2024-0153", "HRB 12345",
                          "Keller GmbH", "Oakmont Industries AB", "Kanzlei Lex Partners mbB", "Amtsgericht Köln",
                          "ENTWURF v2 – Stand: 06.03.2023", "Sehr geehrte Damen und Herren,", "§ 3 Miete",
                          "Ihr Schreiben vom 01.03.2024", "nr. 2023-0145", "\x00\x07\u202e\ufeff", "Ä" * 300])


def messy(max_size: int = 40) -> st.SearchStrategy[str]:
    """Short, empty, unicode, control-character, legal-looking and very long (repeated) strings."""
    short = st.text(_CHARS, max_size=max_size)
    legal = st.lists(st.one_of(_LEGAL, short), max_size=6).map(" ".join)
    huge = st.tuples(st.one_of(short, _LEGAL), st.integers(1, 400)).map(lambda t: (t[0] + " ") * t[1])
    return st.one_of(short, legal, huge)


def lines(max_lines: int = 40) -> st.SearchStrategy[str]:
    return st.lists(messy(), max_size=max_lines).map("\n".join)


_SHORT = st.text(_CHARS, max_size=30)
_NAME = st.text(string.ascii_letters + "äöüßÄ -_.()[]#0123456789\u202e\x01", min_size=1, max_size=255)


@st.composite
def paths(draw) -> str:
    """A relative path: up to 12 folders of up to 255 characters each (long, unicode, control characters)."""
    folders = draw(st.lists(st.one_of(_NAME, _LEGAL), max_size=12))
    return "/".join([*folders, draw(_NAME) + draw(st.sampled_from([".pdf", ".docx", ".eml", ""]))])


_DATE = st.datetimes(min_value=dt.datetime(1900, 1, 1), max_value=dt.datetime(2100, 1, 1),
                     timezones=st.just(dt.UTC)).map(lambda d: d.isoformat())


def _opened_state(candidates: list[FileFacts]) -> AgentState:
    """The AgentState of a run that opened every candidate (the relate validators read open_file results)."""
    state = AgentState(tools={}, trace_id="t")
    state.tool_results.extend(ToolResult("open_file", {"path": c.path}, {"ref": c.ref, "status": "ok",
                                                                         "content_hash": c.content_hash}, None, 1)
                              for c in candidates)
    return state


def _assert_fits(model: type[BaseModel], result: BaseModel) -> None:
    """The answer survives a round trip through its own schema (every length and list limit holds)."""
    assert model.model_validate(result.model_dump()) == result


# -- relate ----------------------------------------------------------------------------------------------

@st.composite
def mail_with_attachments(draw) -> tuple[FileFacts, list[FileFacts], int]:
    """A mail with 0-300 attachments (stored as embedded objects, or only named in the headers), many
    recipients and a deep quoted thread, among top-level copies of some attachments and earlier messages."""
    n = draw(st.integers(0, 300))
    stored = draw(st.booleans())
    subject = draw(messy())
    path = draw(paths())
    names = [f"{draw(_NAME)[:40]}_{i}.pdf" for i in range(n)]
    quoted = "\n".join(f"> Von: a{i}@x.de\n> Gesendet: 02.02.2023 10:{i % 60:02d}\n> Betreff: {subject}"
                       for i in range(draw(st.integers(0, 60))))
    mail = {"message_id": "<m@x>", "in_reply_to": draw(st.sampled_from([None, "<p0@x>", "<missing@x>"])),
            "references": [f"<p{i}@x>" for i in range(draw(st.integers(0, 80)))], "subject": subject,
            "date": draw(_DATE), "sender": "sender@x.de", "sender_name": draw(messy()),
            "to": [f"r{i}@x.de" for i in range(draw(st.integers(0, 200)))], "attachments": names}
    me = FileFacts(ref="F0", path=path, format="eml", title=subject, text=draw(lines()) + "\n" + quoted, mail=mail,
                   content_hash="me")
    pool: list[FileFacts] = []
    if stored:
        pool += [FileFacts(ref=f"A{i}", path=f"{path} » {name}", format="pdf", title=name, text=draw(messy()),
                           content_hash=f"a{i % max(1, draw(st.integers(1, 300)))}", embedded=True)
                 for i, name in enumerate(names)]
    copies = draw(st.integers(0, min(n, 100)))
    pool += [FileFacts(ref=f"C{i}", path=f"Ablage/{names[i]}", format="pdf", title=names[i], text="",
                       content_hash=f"a{i}") for i in range(copies)]
    pool += [FileFacts(ref=f"P{i}", path=f"Mails/p{i}.eml", format="eml", title=subject, text="",
                       mail={"message_id": f"<p{i}@x>", "subject": subject, "date": draw(_DATE), "sender": "a@x.de",
                             "sender_name": "", "references": [], "attachments": []}, content_hash=f"p{i}")
             for i in range(draw(st.integers(0, 40)))]
    return me, pool, (n if stored else copies)


@bounded(30)
@given(mail_with_attachments())
def test_relate_answer_fits_for_any_mail(case):
    me, pool, attachments = case
    result = decide(me, pool)
    _assert_fits(RelateResult, result)
    state = _opened_state(pool)
    assert [v(result, state) for v in relate_validators(me.ref, me.content_hash)] == [None, None, None]
    references = [r for r in result.relations if r.type == "references"]
    if attachments:  # every attachment is related, or counted as left out
        assert len(references) + result.relations_omitted >= min(attachments, 1)
    assert result.relations_omitted == 0 or len(result.relations) == MAX_RELATIONS


@st.composite
def cited_document(draw) -> tuple[FileFacts, list[FileFacts]]:
    """A document citing many others by date, number, file name and annex label, with many dated
    versions, annexes and same-named files around it."""
    k = draw(st.integers(0, 120))
    cites = [draw(st.sampled_from(["gemäß Vertrag vom {d}", "Rechnung Nr. 2024-{i:03d}", "Anlage K{i}",
                                   "the agreement dated {d}", "Ihr Schreiben vom {d}", "(„Brief_{i}.pdf“)"]))
             .format(i=i, d=f"{1 + i % 28:02d}.{1 + i % 12:02d}.20{10 + i % 15}") for i in range(k)]
    body = "\n".join([draw(messy()), *cites, draw(lines(10))])
    me = FileFacts(ref="F0", path=draw(paths()), format="docx", title=draw(messy()), text=body,
                   original_text=draw(st.one_of(st.none(), st.just(body))),
                   revision_kinds=tuple(draw(st.lists(st.sampled_from(["ins", "del", "rPrChange"]), max_size=50))),
                   content_hash="me")
    pool = []
    for i in range(draw(st.integers(0, 150))):
        d = f"{1 + i % 28:02d}.{1 + i % 12:02d}.20{10 + i % 15}"
        name = draw(st.sampled_from(["Vertrag", "Rechnung", "Brief", "Anlage K", "Schreiben"]))
        pool.append(FileFacts(ref=f"D{i}", path=f"{draw(_NAME)[:30]}/{name}_{i}.pdf", format="pdf",
                              title=f"{name} {i}", text=draw(st.sampled_from([
                                  f"Anlage K{i}\n{name}", f"{name}\nKöln, den {d}", f"Rechnung Nr. 2024-{i:03d}",
                                  body, ""])), content_hash=draw(st.sampled_from([f"d{i}", "me", "d0"]))))
    return me, pool


@bounded(30)
@given(cited_document())
def test_relate_answer_fits_for_any_document(case):
    me, pool = case
    result = decide(me, pool)
    _assert_fits(RelateResult, result)
    state = _opened_state(pool)
    assert [v(result, state) for v in relate_validators(me.ref, me.content_hash)] == [None, None, None]


# -- classify --------------------------------------------------------------------------------------------

class MemoryCorpus:
    """The evidence queries over an in-memory list of converted files (the stage's is over PostgreSQL)."""

    def __init__(self, files: list[CorpusFile]):
        self.files = files

    def files_under(self, folder):
        return [f for f in self.files if f.path.startswith(folder.rstrip("/") + "/")]

    def files_containing(self, needle):
        return [f for f in self.files if needle.casefold() in f.text.casefold()]

    def emails_linked(self, message_ids):
        ids = set(message_ids)
        return [f for f in self.files if f.mail and (f.mail.get("message_id") in ids or f.mail.get("in_reply_to")
                                                     in ids or ids & set(f.mail.get("references") or []))]


def _matter_tools(matters: dict[str, int]) -> list[Tool]:
    """search_matters / create_matter over a dict (reference → id), with the stage's own argument models."""

    def search(args: SearchMattersArgs):
        hits = [{"matter_id": i, "reference": r} for r, i in matters.items() if args.query.casefold() in r.casefold()]
        return {"results": hits[args.offset:args.offset + args.limit], "total": len(hits)}

    def create(args: CreateMatterArgs):
        matters.setdefault(args.reference_number, len(matters) + 1)
        return {"matter_id": matters[args.reference_number], "created": True}

    return [Tool("search_matters", "", SearchMattersArgs, search), Tool("create_matter", "", CreateMatterArgs, create)]


_REF = st.one_of(st.from_regex(r"\A20[0-9]{2}-[0-9]{4}\Z"), st.from_regex(r"\A[0-9]{6}-[0-9]{4}\Z"),
                 st.from_regex(r"\A[0-9]{4}\.[0-9]{4}\Z"))


@st.composite
def classify_case(draw):
    refs = draw(st.lists(_REF, max_size=30))
    long_name = st.builds(lambda r, c: f"{r} {c * 240}", _REF, st.sampled_from("ÄBx"))
    deep = [draw(st.sampled_from(["Ä" * 255, "Akten", "x" * 200])) for _ in range(draw(st.integers(0, 10)))]
    folder_words = [*deep, *draw(st.lists(st.one_of(_NAME, _REF, _LEGAL, long_name), max_size=6))]
    rel_path = "/".join([*folder_words, draw(_NAME) + ".pdf"])
    labelled = refs if draw(st.booleans()) else []  # else the path, folder, thread or parties must decide
    text = "\n".join([draw(lines(8)), *(f"Unser Zeichen: {r}" for r in labelled), draw(messy())])
    mail = draw(st.one_of(st.none(), st.fixed_dictionaries({
        "message_id": st.just("<m@x>"), "subject": messy(), "in_reply_to": st.just("<p@x>"),
        "references": st.lists(st.just("<q@x>"), max_size=50), "to": st.lists(st.just("r@x.de"), max_size=200)})))
    files = [CorpusFile(f"{'/'.join(folder_words)}/f{i}.pdf", draw(st.sampled_from(["", *refs, *refs]))
                        if refs else draw(messy()))
             for i in range(draw(st.integers(0, 60)))]
    files.append(CorpusFile("x/p.eml", "Unser Zeichen: " + (refs[0] if refs else "none"), {"message_id": "<p@x>"}))
    known = {r: i for i, r in enumerate(draw(st.lists(st.sampled_from(refs), max_size=20)) if refs else [], 1)}
    return rel_path, text, mail, MemoryCorpus(files), known


@bounded(40)
@given(classify_case(), st.lists(messy(), max_size=5))
def test_classify_answer_fits_for_any_file(case, firm_names):
    rel_path, text, mail, corpus, matters = case
    policy = ClassifyRulesPolicy(rel_path=rel_path, text=text, mail=mail, corpus=corpus, firm_names=firm_names)
    answer = run_policy(policy, _matter_tools(matters), ClassifyResult, [], max_rounds=1)
    _assert_fits(ClassifyResult, answer.result)
    assert not [r for r in answer.state.tool_results if r.error]  # every tool call had valid arguments


# -- extract_metadata: document type, parties, identifiers, dates, clauses -----------------------------

_PARTY = st.sampled_from(["{n} GmbH", "{n} AG", "{n} Limited", "{n} B.V.", "Herr Dr. {n} Müller",
                          "Rechtsanwälte {n} & Partner mbB", "Landgericht {n}", "Klägerin: {n} GmbH",
                          "zwischen der {n} GmbH, HRB {i}, Amtsgericht Köln", "VAT DE{i:09d}", "LEI 5493{i:016d}"])


@st.composite
def metadata_body(draw) -> tuple[dict, str]:
    parties = [draw(_PARTY).format(n=(draw(st.text(string.ascii_uppercase, min_size=1, max_size=1)) +
                                      draw(st.text(string.ascii_lowercase + "äöü", min_size=2, max_size=40))), i=i)
               for i in range(draw(st.integers(0, 160)))]
    dates = [f"Köln, den {1 + i % 28:02d}.{1 + i % 12:02d}.{1950 + i % 100}" for i in range(draw(st.integers(0, 80)))]
    headings = [f"§ {i} {draw(st.sampled_from(['Haftung', 'Kündigung', 'Gerichtsstand', 'Vertraulichkeit']))}"
                f"{draw(messy())[:400]}\nText {i}" for i in range(draw(st.integers(0, 120)))]
    text = "\n".join([draw(lines(6)), *parties, *dates, *headings, draw(messy())])
    mail = draw(st.one_of(st.none(), st.fixed_dictionaries({
        "subject": messy(), "date": _DATE, "sender": st.fixed_dictionaries({"address": st.just("a@x.de"),
                                                                            "name": messy()}),
        "to": st.lists(st.fixed_dictionaries({"address": st.just("r@x.de"), "name": messy()}), max_size=200)})))
    body = {"format": draw(st.sampled_from(["docx", "pdf", "eml", "txt"])), "title": draw(messy()), "text": text,
            "mail": mail}
    return body, draw(paths())


@bounded(20)
@given(metadata_body(), st.lists(messy(), max_size=4), st.sampled_from([None, "dmy", "mdy"]))
def test_metadata_answer_fits_for_any_document(case, firm_names, date_order):
    body, rel_path = case
    onto = default_ontology()
    reading = read_document(body, rel_path, None, firm_names=firm_names, known=[], date_order=date_order)
    answer = run_policy(MetadataRulesPolicy(reading), ontology_tools(onto), MetadataResult,
                        metadata_validators(onto), max_rounds=1)
    _assert_fits(MetadataResult, answer.result)


# -- extract_decisions -----------------------------------------------------------------------------------

_REVISION_DATE = st.sampled_from(["2024-01-01T00:00:00Z", "", "0000-00-00T00:00:00Z", "garbage"])


@st.composite
def redlined_body(draw) -> dict:
    """A body with 0-800 tracked changes (replacements, moves, lone insertions/deletions) and long comments."""
    revisions, paragraphs = [], []
    for i in range(draw(st.integers(0, 300))):
        kind = draw(st.sampled_from(["ins", "del", "moveFrom", "moveTo", "rPrChange", "para_ins"]))
        revisions.append({"kind": kind, "text": draw(st.one_of(st.just(f"EUR {i}"), _SHORT, _LEGAL)), "author":
                          draw(st.sampled_from(["A", "B", None, "Ä" * 300])), "date": draw(_REVISION_DATE),
                          "paragraph": i // 3, "move_name": draw(st.sampled_from([None, "m1", f"m{i}"]))})
        if i % 3 == 0:
            paragraphs.append(draw(st.sampled_from([f"§ {i} Haftung", f"{i}. Kündigung", "Ä" * 500])) + "\n" +
                              draw(messy()))
    comments = [{"anchor_text": r["text"], "text": draw(messy())} for r in revisions[:draw(st.integers(0, 40))]]
    text = "\n".join(paragraphs)
    return {"format": "docx", "text": text, "original_text": text, "revisions": revisions, "comments": comments}


@bounded(20)
@given(redlined_body())
def test_decisions_answer_fits_for_any_redline(body):
    content = [r for r in body["revisions"] if r["kind"] in ("ins", "del", "moveFrom", "moveTo") and r["text"].strip()]
    validators = decision_validators([r["text"] for r in content if r["kind"] in ("del", "moveFrom")],
                                     [r["text"] for r in content if r["kind"] in ("ins", "moveTo")])
    answer = run_policy(DecisionRulesPolicy(body), [], DecisionResult, validators, max_rounds=1)
    _assert_fits(DecisionResult, answer.result)


def test_decisions_beyond_the_entry_limit_are_counted_not_quarantined():
    """A redline with more changed points than one answer holds keeps MAX_ENTRIES and counts the rest."""
    n = MAX_ENTRIES + 25
    body = {"format": "docx", "text": "§ 1 Haftung\nSatz",
            "revisions": [{"kind": "ins", "text": f"Wort {i}", "author": "A", "date": "2024-01-01T00:00:00Z",
                           "paragraph": 1} for i in range(n)], "comments": []}
    validators = decision_validators([], [r["text"] for r in body["revisions"]])
    result = run_policy(DecisionRulesPolicy(body), [], DecisionResult, validators, max_rounds=1).result
    assert (len(result.entries), result.entries_omitted) == (MAX_ENTRIES, 25)
    assert result.entries[0].locus == "§ 1 Haftung" and result.entries[-1].after == f"Wort {MAX_ENTRIES - 1}"
    assert f"{n} changed point(s)" in result.summary and "25 beyond the limit" in result.summary


def test_relations_beyond_the_limit_are_counted_not_quarantined():
    """A mail with more attachments than one answer holds relates to the first MAX_RELATIONS and counts the rest."""
    n = MAX_RELATIONS + 40
    me = FileFacts(ref="F0", path="Mails/big.eml", format="eml", title="Unterlagen", text="anbei", content_hash="me",
                   mail={"message_id": "<m@x>", "subject": "Unterlagen", "date": "2024-01-02T10:00:00+00:00",
                         "sender": "a@x.de", "sender_name": "", "references": [], "attachments": []})
    pool = [FileFacts(ref=f"A{i}", path=f"Mails/big.eml » Scan_{i}.pdf", format="pdf", title="", text="",
                      content_hash=f"a{i}", embedded=True) for i in range(n)]
    result = decide(me, pool)
    assert (len(result.relations), result.relations_omitted) == (MAX_RELATIONS, 40)
    assert {r.type for r in result.relations} == {"references"} and result.relations[0].target_ref == "A0"
    assert result.reasoning.endswith(f"40 further relation(s) left out (limit {MAX_RELATIONS})")
