"""Building one matter's files: letters, e-mail threads with quoted replies, negotiated contract versions
with tracked changes, duplicates — the mechanics both firm generators share.

A firm module subclasses :class:`MatterBuilder` and supplies the conventions: :meth:`path` (where a
file of a folder key goes), the phrase table :attr:`PHRASES` per language, :meth:`fmt_date`,
:meth:`letterhead`, :meth:`ref_lines`, :meth:`stamp` (draft stamps), :meth:`version_name` (file
names of versions) and :meth:`dup_name`.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bench.estates.model import Doc, Entity, FileSpec, Matter, Person, Thread


def workday(d: dt.date) -> dt.date:
    """``d`` or the next Monday."""
    while d.weekday() >= 5:
        d += dt.timedelta(days=1)
    return d


def eu_offset(d: dt.date, base_hours: int) -> dt.timezone:
    """The EU summer-time offset on ``d`` (last Sunday of March to last Sunday of October)."""
    def last_sunday(month: int) -> dt.date:
        x = dt.date(d.year, month, 31)
        return x - dt.timedelta(days=(x.weekday() + 1) % 7)
    summer = last_sunday(3) <= d < last_sunday(10)
    return dt.timezone(dt.timedelta(hours=base_hours + (1 if summer else 0)))


@dataclass
class Knob:
    """A negotiable point of a contract: alternative wordings (``values``) or optional text (``text``)."""

    name: str
    values: list[str] | None = None
    text: str | None = None
    initial: bool = True
    rationales: list[str] = field(default_factory=list)

    @property
    def optional(self) -> bool:
        return self.values is None


class Version:
    """Writes a contract template against the current knob state; with ``prev`` it emits tracked changes
    and records one decision per changed knob."""

    def __init__(self, doc: Doc, knobs: dict[str, Knob], cur: dict[str, Any], prev: dict[str, Any] | None = None,
                 revs: dict[str, tuple[str, str]] | None = None, rationale: dict[str, str] | None = None):
        self.doc, self.knobs, self.cur, self.prev = doc, knobs, cur, prev
        self.revs, self.rationale = revs or {}, rationale or {}
        self.locus: str | None = None

    def _decide(self, kind: str, before: str, after: str, name: str) -> None:
        rev = self.revs[name]
        self.doc.decisions.append({"kind": kind, "before": before.strip(), "after": after.strip(), "author": rev[0],
                                   "date": rev[1], "locus": self.locus, "rationale": self.rationale.get(name)})

    def _commented(self, name: str, seg: tuple) -> list[Any]:
        rat = self.rationale.get(name)
        if not rat:
            return [seg]
        cid = self.doc.add_comment(self.revs[name][0], self.revs[name][1], rat)
        return [("cs", cid), seg, ("ce", cid)]

    def k(self, name: str) -> list[Any]:
        """The segments of knob ``name`` (a replacement, insertion or deletion when it changed)."""
        knob = self.knobs[name]
        now = self.cur[name]
        before = self.prev[name] if self.prev is not None else now
        if not knob.optional:
            if before == now:
                return [knob.values[now]]
            old, new = knob.values[before], knob.values[now]
            self._decide("replacement", old, new, name)
            return [("del", old, self.revs[name])] + self._commented(name, ("ins", new, self.revs[name]))
        if now and before:
            return [knob.text]
        if now:
            self._decide("insertion", "", knob.text, name)
            return self._commented(name, ("ins", knob.text, self.revs[name]))
        if before:
            self._decide("deletion", knob.text, "", name)
            return self._commented(name, ("del", knob.text, self.revs[name]))
        return []

    def h(self, heading: str) -> None:
        """A clause heading (the locus of the decisions below it)."""
        self.locus = heading
        self.doc.p(heading, style="Heading1")


def initial_state(knobs: dict[str, Knob]) -> dict[str, Any]:
    return {k.name: (k.initial if k.optional else 0) for k in knobs.values()}


def evolve(knobs: dict[str, Knob], state: dict[str, Any], rng: random.Random, n: int) -> dict[str, Any]:
    """Change ``n`` knobs."""
    new = dict(state)
    cands = [k for k in knobs.values() if k.optional or len(k.values) > 1]
    for k in rng.sample(cands, min(n, len(cands))):
        new[k.name] = (not state[k.name]) if k.optional else rng.choice(
            [i for i in range(len(k.values)) if i != state[k.name]])
    return new


class MatterBuilder:
    """One matter's files (see module doc for what a firm module supplies)."""

    PHRASES: dict[str, dict[str, str]] = {}
    tz_base = 0

    def __init__(self, est: Any, m: Matter):
        self.est, self.m = est, m
        self.rng = random.Random(f"{est.name}:{est.seed}:matter:{m.idx}")
        self.t = m.opened
        self.firm: Entity = est.firm

    # ------------------------------------------------------------ conventions (firm module)
    texts: Any = None

    def path(self, key: str, fname: str) -> str:
        """Where a file of folder ``key`` goes: a subfolder of the matter folder in layouts that have them
        (the text module's ``SUBFOLDERS``), else the matter folder itself."""
        m = self.m
        sub = self.texts.SUBFOLDERS.get(key, "") if m.layout in self.texts.SUBFOLDER_LAYOUTS else ""
        return f"{m.folder}/{sub}/{fname}" if sub else f"{m.folder}/{fname}"

    def dup_name(self, orig: FileSpec) -> str:
        """A copy's name (the text module's ``COPY_NAMES``) not taken in the original's folder."""
        stem, ext = orig.path.rsplit("/", 1)[-1].rsplit(".", 1)
        folder = orig.path.rsplit("/", 1)[0]
        opts = [o.format(stem=stem, ext=ext) for o in self.texts.COPY_NAMES]
        for o in self.rng.sample(opts, len(opts)):
            if not self.est.path_taken(f"{folder}/{o}"):
                return o
        return f"{stem} (3).{ext}"

    def fmt_date(self, d: dt.date, lang: str, style: str = "long") -> str:
        raise NotImplementedError

    def letterhead(self, doc: Doc, lang: str) -> None:
        raise NotImplementedError

    def ref_lines(self, doc: Doc, sender: Entity, lang: str, theirs: str | None) -> list[str]:
        raise NotImplementedError

    def ph(self, lang: str, key: str) -> str:
        return self.PHRASES[lang][key]

    # ------------------------------------------------------------ basics
    def step(self, lo: int = 2, hi: int = 10) -> dt.date:
        self.t = workday(self.t + dt.timedelta(days=self.rng.randint(lo, hi)))
        return self.t

    def doc(self, lang: str | None = None) -> Doc:
        return Doc(lang or self.m.lang, self.m.roles, random.Random(self.rng.getrandbits(64)))

    def add(self, key: str, fname: str, fmt: str, doc: Doc, *, doc_type: str | None, title: str, date: dt.date,
            ok: list[str | None] | None = None, tags: tuple | list = (), rendition: str | None = None,
            version_of: FileSpec | None = None, order: int = 1, matter: Matter | None | bool = True,
            **kw: Any) -> FileSpec:
        path = key[1:] + "/" + fname if key.startswith("/") else self.path(key, fname)
        n = 1
        while self.est.path_taken(path):  # two documents of one name in a folder: "… - 2"
            n += 1
            stem, ext = (key[1:] + "/" + fname if key.startswith("/") else self.path(key, fname)).rsplit(".", 1)
            path = f"{stem} - {n}.{ext}"
        s = FileSpec(path, fmt, self.m if matter is True else (matter or None), doc, **kw)
        s.doc_type, s.doc_type_ok = doc_type, ok or [doc_type]
        s.title, s.date, s.tags, s.rendition = title, date, list(tags), rendition
        if version_of is None:
            s.document_id, s.order = self.est.next_id("doc"), 1
        else:
            s.anchor, s.document_id, s.order = version_of.anchor or version_of, version_of.document_id, order
        return self.est.register(s)

    def dup(self, orig: FileSpec, *, folder: str | None = None, fname: str | None = None, tags=()) -> FileSpec:
        """A byte copy of ``orig`` (same folder unless ``folder``; a copy name unless ``fname``)."""
        folder = folder if folder is not None else os.path.dirname(orig.path)
        s = FileSpec(f"{folder}/{fname or self.dup_name(orig)}", orig.fmt, orig.matter, None)
        s.dup_of = orig
        for a in ("doc_type", "doc_type_ok", "lang", "date", "title", "document_id", "order", "rendition", "thread",
                  "email", "redline_against", "anchor", "mtime", "encoding", "crlf"):
            setattr(s, a, getattr(orig, a))
        s.tags = ["duplicate", *tags] + (["duplicate_other_folder"] if folder != os.path.dirname(orig.path) else [])
        return self.est.register(s)

    def local_dt(self, d: dt.date, hour: int, minute: int) -> dt.datetime:
        return dt.datetime(d.year, d.month, d.day, hour, minute, tzinfo=eu_offset(d, self.tz_base))

    # ------------------------------------------------------------ letters
    def address(self, doc: Doc, e: Entity, person: Person | None, lang: str) -> None:
        doc.p(doc.name(e))
        if person is not None and e.kind == "company":
            doc.p(f"{self.ph(lang, 'attn')} {person.full}")
        if e.street:
            doc.p(e.street)
            doc.p((f"{e.city} {e.postcode}" if e.country == "England and Wales" else f"{e.postcode} {e.city}").strip())
        elif e.city:
            doc.p(e.city)
        doc.blank()

    def closing(self, doc: Doc, lang: str, person: Person, org: Entity) -> None:
        doc.blank()
        doc.p(self.ph(lang, "regards"))
        doc.blank()
        doc.p(person.full)
        if person.function:
            doc.p(person.function)

    def letter(self, *, key: str, base: str, sender: Entity, signer: Person, to: Entity, to_person: Person | None,
               lang: str, subject: Callable[[Doc], str], body: Callable[[Doc], None], date: dt.date | None = None,
               doc_type: str = "letter", theirs: str | None = None, fmt: str = "pdf", tags=(), ok=None,
               relations=(), fname: str | None = None, matter: Matter | None | bool = True,
               prelude: Callable[[Doc], None] | None = None) -> FileSpec:
        """A letter on the sender's letterhead; ``subject``/``body`` write into the doc (``subject`` returns
        the subject line, which is the title)."""
        d = date or self.step(3, 12)
        doc = self.doc(lang)
        if prelude:
            prelude(doc)
        if sender is self.firm:
            self.letterhead(doc, lang)
        else:
            upper = sender.name.upper()
            caps = sender.kind == "company" and upper in sender.variants and self.rng.random() < 0.5
            doc.p(doc.name(sender, variant=upper if caps else None), bold=True)
            doc.p(sender.address)
            doc.blank()
        self.address(doc, to, to_person, lang)
        for line in self.ref_lines(doc, sender, lang, theirs):
            doc.p(line)
        doc.p(self.letter_date(sender, d, lang))
        doc.blank()
        subj = subject(doc)
        doc.p(subj, bold=True)
        doc.blank()
        doc.p(self.salutation(to_person, lang))
        body(doc)
        self.closing(doc, lang, signer, sender)
        if sender is self.firm:
            self.letter_footer(doc, lang)
        s = self.add(key, fname or f"{base}.{fmt}", fmt, doc, doc_type=doc_type, title=subj, date=d, ok=ok,
                     tags=tags, matter=matter)
        s.relations += list(relations)
        s.meta = {"author": signer.full, "producer": "ScanStation OCR" if "scan" in tags else "Microsoft Word"}
        return s

    def letter_date(self, sender: Entity, d: dt.date, lang: str) -> str:
        return f"{sender.city}, {self.fmt_date(d, lang)}" if self.rng.random() < 0.5 else self.fmt_date(d, lang)

    def salutation(self, person: Person | None, lang: str) -> str:
        if person is None:
            return self.ph(lang, "dear_sirs")
        key = "dear_m" if person.gender == "m" else "dear_f"
        return self.ph(lang, key).format(last=person.last, first=person.first)

    def letter_footer(self, doc: Doc, lang: str) -> None:
        pass

    # ------------------------------------------------------------ e-mail
    def quote_block(self, prev: FileSpec, lang: str, style: str) -> list[str]:
        """The quoted previous message: an Outlook header block or a ``… wrote:`` line."""
        e = prev.email
        if style == "wrote":
            return [self.ph(lang, "wrote").format(date=self.fmt_date(e["dt"].date(), lang), time=f"{e['dt']:%H:%M}",
                                                  name=e["from_name"], addr=e["from_addr"])]
        sent = self.sent_line(e["dt"], lang)
        to = "; ".join(f"{n} <{a}>" for n, a in e["to"])
        block = [self.ph(lang, "sep"), f"{self.ph(lang, 'from')}: {e['from_name']} <{e['from_addr']}>",
                 f"{self.ph(lang, 'sent')}: {sent}", f"{self.ph(lang, 'to')}: {to}"]
        if e["cc"]:
            block.append(f"{self.ph(lang, 'cc')}: " + "; ".join(f"{n} <{a}>" for n, a in e["cc"]))
        block.append(f"{self.ph(lang, 'subject')}: {e['subject']}")
        return block

    def sent_line(self, when: dt.datetime, lang: str) -> str:
        return f"{self.fmt_date(when.date(), lang)} {when:%H:%M}"

    def mail(self, th: Thread, *, frm: Person, org: Entity, to: list[Person], lang: str, body: Callable[[Doc], None],
             cc=(), attach=(), quote: str | None = "outlook", key: str = "mail", broken: bool = False,
             prefix: str | None = None, tags=(), subj_ents=(), fname: str | None = None) -> FileSpec:
        """A message of ``th`` (a reply to its last message when there is one)."""
        r = self.rng
        prev = th.messages[-1] if th.messages else None
        d = self.step(0, 3) if prev else self.step(1, 5)
        hour, minute = r.randint(8, 18), r.randint(0, 59)
        if prev is not None and prev.email["dt"].date() >= d:
            d = prev.email["dt"].date()
            hour = min(prev.email["dt"].hour + r.randint(1, 3), 21)
        when = self.local_dt(d, hour, minute)
        self.t = max(self.t, d)
        if prev is None:
            subj = th.subject
        elif prefix is not None or r.random() < 0.25:  # stacked prefixes: "FW: RE: …", "RE: RE: …"
            subj = f"{prefix or self.ph(lang, 're')} {prev.email['subject']}"
        else:
            subj = f"{self.ph(lang, 're')} {th.subject}"
        doc = self.doc(lang)
        for e, spelled in subj_ents:
            doc.name(e, variant=spelled)
        body(doc)
        self.mail_signature(doc, frm, org, lang)
        if prev is not None and quote:
            doc.blank()
            for line in self.quote_block(prev, lang, quote):
                doc.p(line)
            if quote == "outlook":
                doc.blank()
                for ln in prev.doc.lines():
                    doc.p(ln)
            else:
                for ln in prev.doc.lines():
                    doc.p("> " + ln if ln else ">")
            doc.absorb(prev.doc)
        token = hashlib.sha1(f"{self.est.name}:{self.est.seed}:{th.id}:{len(th.messages)}".encode()).hexdigest()[:12]
        msgid = f"<{when:%Y%m%d%H%M%S}.{token}@{frm.email.split('@')[1]}>"
        refs = [] if prev is None else (prev.email["references"] + [prev.email["message_id"]])
        hdr = {"from_name": frm.full, "from_addr": frm.email, "to": [(p.full, p.email) for p in to],
               "cc": [(p.full, p.email) for p in cc], "subject": subj, "dt": when, "message_id": msgid,
               "in_reply_to": None if (prev is None or broken) else prev.email["message_id"],
               "references": [] if broken else refs, "lang": lang,
               "mailer": r.choice(["Microsoft Outlook 16.0", "Microsoft Outlook 16.0", "Apple Mail (2.3774)"]),
               "cte": r.choice(["quoted-printable", "quoted-printable", "8bit", "base64"])}
        s = self.add(key, fname or self.mail_name(subj, when), "eml", doc, doc_type="email", title=subj, date=d,
                     tags=tags)
        s.email, s.thread = hdr, th
        s.attachments = list(attach)
        if prev is not None:
            s.relations.append(("responds_to", prev))
        s.relations += [("references", a) for a in attach]
        if broken:
            s.tags.append("thread_headers_missing")
        if prev is not None and quote:
            s.tags.append("quoted_reply")
        th.messages.append(s)
        return s

    def mail_name(self, subj: str, when: dt.datetime) -> str:
        from bench.estates.model import safe_name

        return f"{safe_name(subj)[:80]} ({when:%Y%m%d-%H%M}).eml"

    def mail_signature(self, doc: Doc, person: Person, org: Entity, lang: str) -> None:
        doc.blank()
        doc.p(self.ph(lang, "mail_regards"))
        doc.p(person.full)
        if person.function:
            doc.p(person.function)
        if org.kind == "company" or org is self.firm:
            doc.p(doc.name(org))

    # ------------------------------------------------------------ negotiated documents
    def chain(self, *, tpl: Callable[[Version, Doc], None], knobs: dict[str, Knob], lang: str, doc_type: str,
              title: str, plan: list[tuple], key: str = "contracts", signed_key: str = "signed",
              signers: Callable[[Doc, dt.date], None] | None = None, relations=(), tags=(),
              authors: Callable[[str], list[Person]] | None = None) -> dict[str, Any]:
        """Versions of one document. ``plan`` entries: ("draft", side, ("clean",) | ("clean", "redline")),
        ("final", side), ("signed",). Returns {"files", "versions", "final", "signed", "anchor", "last"}."""
        r = self.rng
        state = initial_state(knobs)
        prev_state = prev_date = prev_file = anchor = None
        order = 0
        spelling: dict[str, str] = {}
        out: dict[str, Any] = {"files": [], "versions": []}
        authors = authors or (lambda side: self.m.lawyers)

        def new_file(key_: str, fname: str, fmt: str, doc: Doc, d: dt.date, rend: str, rtags=()) -> FileSpec:
            nonlocal anchor
            s = self.add(key_, fname, fmt, doc, doc_type=doc_type, title=title, date=d, tags=[*tags, *rtags],
                         rendition=rend, version_of=anchor, order=order)
            anchor = anchor or s
            s.relations += list(relations)
            out["files"].append(s)
            return s

        for step in plan:
            kind = step[0]
            order += 1
            if kind == "draft":
                side, rends = step[1], step[2]
                if order > 1:
                    state = evolve(knobs, state, r, r.randint(2, 3))
                d = self.step(3, 12)
                who = authors(side)
                files = []
                for rend in rends:
                    doc = self.doc(lang)
                    doc.spelling = spelling
                    if rend == "redline":
                        hour, minute = r.randint(9, 18), r.randint(0, 50)
                        stamp = self.local_dt(d, hour, minute).astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:00Z")
                        revs = {n: ((who[0] if r.random() < 0.7 else who[-1]).full, stamp)
                                for n in state if state[n] != prev_state[n]}
                        rat = {n: r.choice(knobs[n].rationales) for n in revs if knobs[n].rationales
                               and r.random() < 0.5}
                        ctx = Version(doc, knobs, state, prev_state, revs, rat)
                    else:
                        ctx = Version(doc, knobs, state)
                    self.stamp(doc, lang, "draft", order, d, prev_date if rend == "redline" else None)
                    tpl(ctx, doc)
                    self.on_version(doc, out, order)
                    s = new_file(key, self.version_name(title, "draft" if rend == "clean" else "redline", order, d,
                                                        out) + ".docx", "docx", doc, d, rend)
                    s.meta = {"author": who[0].full, "track": rend == "redline"}
                    if rend == "redline":
                        s.redline_against = prev_file
                        s.tags.append("redline")
                    files.append(s)
                out["versions"].append(files)
                prev_file = files[0]
                prev_state, prev_date = dict(state), d
            elif kind == "final":
                if r.random() < 0.4:
                    state = evolve(knobs, state, r, 1)
                d = self.step(2, 8)
                doc = self.doc(lang)
                doc.spelling = spelling
                self.stamp(doc, lang, "final", order, d, None)
                tpl(Version(doc, knobs, state), doc)
                self.on_version(doc, out, order)
                s = new_file(key, self.version_name(title, "final", order, d, out) + ".docx", "docx", doc, d, "clean")
                s.meta = {"author": authors(step[1])[0].full}
                out["versions"].append([s])
                out["final"] = prev_file = s
                prev_state, prev_date = dict(state), d
            else:
                d = self.step(1, 6)
                doc = self.doc(lang)
                doc.spelling = spelling
                self.stamp(doc, lang, "signed", order, d, None)
                tpl(Version(doc, knobs, state), doc)
                if signers:
                    signers(doc, d)
                s = new_file(signed_key, self.version_name(title, "signed", order, d, out) + ".pdf", "pdf", doc, d,
                             "signed", rtags=["scan", "signed"])
                s.meta = {"producer": "ScanStation OCR"}
                out["versions"].append([s])
                out["signed"] = prev_file = s
            out["last"] = prev_file
        out["anchor"] = anchor
        return out

    def stamp(self, doc: Doc, lang: str, kind: str, k: int, d: dt.date, prev_d: dt.date | None) -> None:
        raise NotImplementedError

    def on_version(self, doc: Doc, out: dict[str, Any], k: int) -> None:
        """Hook after a version's text is written (a DMS footer, for instance)."""

    def version_name(self, title: str, label: str, k: int, d: dt.date, out: dict[str, Any]) -> str:
        raise NotImplementedError
