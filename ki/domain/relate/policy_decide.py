"""The relate rules as a pure function: one file and its candidate neighbours → a :class:`RelateResult`.

DESIGN.md "Two deployments" (rules policies); spec: insertion-pipeline.md "Relate". Rules:

* **duplicate**: another file has the same content hash; the copy that keeps the identity is the
  canonical one (no copy marker, not an attachment, lower ``v<k>``, deeper folder, older, first path),
  every other copy is its duplicate and carries no relations of its own.
* **version**: not an e-mail, and word-shingle Jaccard ≥ :data:`SAME_DOCUMENT_JACCARD`, or ≥
  :data:`SAME_NAME_JACCARD` when both names reduce to the same document name (``SPA_v2_marked`` and
  ``SPA_executed`` → ``spa``).
* **redline_against**: a file with tracked changes points to the version whose text equals its text
  with the changes rejected (the draft stamp aside), preferring a clean rendition.
* **relations**: e-mail replies ``responds_to`` the message named by In-Reply-To/References (or the
  quoted header, or the subject); e-mails ``references`` the files they attach; an annex is
  ``annex_of`` the main document that cites its label; citations by date or number make
  ``references``, ``amends`` (amendment language) or ``responds_to`` (reply language, answering pleadings).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable

from ki.domain.relate.cues import citation_score, citations, is_amendment, mentions_label, relation_type, words_match
from ki.domain.relate.facts import FileFacts
from ki.domain.relate.schema import MAX_RELATIONS, REASONING_CHARS, RelateResult, RelationOut
from ki.domain.relate.similarity import jaccard, normalised_body
from ki.domain.relate.threads import QuotedHeader, is_reply_subject, local_stamp, parent_ids, quoted_header, subject_key

SAME_DOCUMENT_JACCARD = 0.6
SAME_NAME_JACCARD = 0.4
#: Files with two different DMS document numbers are one document only when nearly equal.
DIFFERENT_DMS_JACCARD = 0.95
REDLINE_BASE_JACCARD = 0.9
_FAR_FUTURE = dt.date(9999, 12, 31)
_FAR_PAST = dt.date(1, 1, 1)


def canonical_key(f: FileFacts) -> tuple:
    """Sort key of copies of the same bytes: the smallest key keeps the identity."""
    return (f.embedded, f.has_copy_marker, f.name_version or 0, -f.depth,
            f.mtime.timestamp() if f.mtime else 0.0, f.path)


def canonical(files: Iterable[FileFacts]) -> FileFacts:
    """The copy that keeps the identity among files with the same bytes."""
    return min(files, key=canonical_key)


def body(f: FileFacts) -> str:
    """The text compared for versions (without a draft stamp line)."""
    return normalised_body(f.text, drop_first_line=f.stamp is not None)


def _placeholder(f: FileFacts) -> bool:
    return bool(f.matter) and str(f.matter).upper().startswith("UNASSIGNED-")


def same_document_score(a: FileFacts, b: FileFacts) -> float:
    """The similarity of two files the rules call one document (Jaccard of their bodies, 1.0 for one DMS
    document number), else 0.0.

    Never across matters by accident: the candidates are the file's matter's; in a
    placeholder matter (unrelated files grouped as ``UNASSIGNED-…``) only files of the same folder can be
    one document; two different DMS document numbers are two documents unless the texts are nearly equal.
    """
    if a.is_email or b.is_email:
        return 0.0
    if (_placeholder(a) or _placeholder(b)) and a.folder != b.folder:
        return 0.0
    if a.dms is not None and b.dms is not None and a.dms.number == b.dms.number:
        return 1.0
    j = jaccard(body(a), body(b))
    if a.dms is not None and b.dms is not None:
        return j if j >= DIFFERENT_DMS_JACCARD else 0.0
    if j >= SAME_DOCUMENT_JACCARD or (j >= SAME_NAME_JACCARD and a.name_key and a.name_key == b.name_key):
        return j
    return 0.0


def _compare_base(x: FileFacts, pool: list[FileFacts]) -> FileFacts | None:
    """The version a compare document was run against: the file it names as the original, else the file of the
    same document with the original's version number (a clean rendition first)."""
    cmp = x.compare
    assert cmp is not None
    docs = [c for c in pool if not c.is_email and c.ref != x.ref and c.compare is None]
    if cmp.original:
        named = [c for c in docs if cmp.original in (c.name, c.stem)]
        if named:
            return canonical(named)
    if cmp.from_version is None:
        return None
    same = [c for c in docs if c.name_version == cmp.from_version
            and ((x.name_key and c.name_key == x.name_key) or (x.dms and c.dms and c.dms.number == x.dms.number))]
    if not same:
        return None
    clean = [c for c in same if not c.is_redline]
    return canonical(clean or same)


def _redline_base(x: FileFacts, pool: list[FileFacts]) -> FileFacts | None:
    if x.compare is not None:
        return _compare_base(x, pool)
    if not x.is_redline or not x.original_text:
        return None
    before = normalised_body(x.original_text, drop_first_line=x.stamp is not None)
    scored = []
    for c in pool:
        if c.is_email or c.ref == x.ref:
            continue
        j = jaccard(before, body(c))
        if j < REDLINE_BASE_JACCARD:
            continue
        stamp_fit = bool(x.stamp and c.stamp and x.stamp.against_number is not None
                         and c.stamp.number == x.stamp.against_number)
        scored.append(((stamp_fit, j >= 0.999, not c.is_redline, j), c))
    if not scored:
        return None
    top = max(k for k, _ in scored)
    return canonical(c for k, c in scored if k == top)  # ties (copies of one file): the canonical copy


def _quotes(q: QuotedHeader, e: FileFacts) -> bool:
    """Whether the quoted header ``q`` is message ``e``'s: its sender (address, else display name), its local
    date and, when written, time; a quoted subject must agree too."""
    stamp = local_stamp(e.mail)
    if stamp is None or stamp[0] != q.date or (q.hhmm is not None and stamp[1] != q.hhmm):
        return False
    if q.subject_key is not None and q.subject_key != subject_key((e.mail or {}).get("subject")):
        return False
    if q.address:
        return (e.mail or {}).get("sender") == q.address
    name = " ".join((q.name or "").casefold().split())
    return bool(name) and name == " ".join(((e.mail or {}).get("sender_name") or "").casefold().split())


def _reply_parent(x: FileFacts, emails: list[FileFacts]) -> FileFacts | None:
    by_id: dict[str, list[FileFacts]] = {}
    for e in emails:
        if e.mail and e.mail.get("message_id"):
            by_id.setdefault(e.mail["message_id"], []).append(e)
    own = (x.mail or {}).get("message_id")
    for pid in parent_ids(x.mail):
        if pid != own and pid in by_id:
            return canonical(by_id[pid])
    quoted = quoted_header(x.text)
    if quoted is not None:
        hits = [e for e in emails if e.mail.get("message_id") != own and _quotes(quoted, e)]
        if hits:
            return canonical(hits)
    if not is_reply_subject((x.mail or {}).get("subject")):
        return None
    key = subject_key((x.mail or {}).get("subject"))
    mine = local_stamp(x.mail)
    earlier = [e for e in emails if subject_key((e.mail or {}).get("subject")) == key
               and e.mail.get("message_id") != own and mine is not None and local_stamp(e.mail) is not None
               and (e.mail.get("date") or "") < (x.mail.get("date") or "")]
    if earlier:
        newest = max(str(e.mail.get("date")) for e in earlier)
        return canonical([e for e in earlier if str(e.mail.get("date")) == newest])
    return None


def _documents(files: list[FileFacts]) -> list[list[FileFacts]]:
    """``files`` grouped into documents (by :func:`same_document_score`), in path order."""
    groups: list[list[FileFacts]] = []
    for c in sorted(files, key=lambda f: f.path):
        for g in groups:
            if any((c.name_key and c.name_key == o.name_key) or same_document_score(c, o) for o in g):
                g.append(c)
                break
        else:
            groups.append([c])
    return groups


def _latest(group: list[FileFacts]) -> FileFacts:
    """The latest version of one document (signed before final before draft, then the newest)."""
    return max(group, key=lambda f: (f.stage_rank, f.version_date or _FAR_PAST, [-v for v in canonical_key(f)[:3]]))


def _annex_main(x: FileFacts, pool: list[FileFacts]) -> FileFacts | None:
    """The main document of the annex ``x`` (None when ``x`` is no annex or nothing fits):

    1. the document citing ``x``'s label (the earliest citing document; its latest version);
    2. else the document the annex's own text says it belongs to ("referred to in the lease",
       "behorende bij de huurovereenkomst") — the one with a signed copy, else the latest;
    3. else the one signed agreement (no amendment, no annex) of the annex's folder, else of the matter, else
       the one agreement of the matter — only when there is exactly one such document (several: none).
    """
    label = x.annex_label
    if not label:
        return None
    docs = [c for c in pool if not c.is_email and not c.annex_label]
    citing = [c for c in docs if mentions_label(c, label)]
    if citing:
        first = min(_documents(citing), key=lambda g: min((f.version_date for f in g if f.version_date),
                                                          default=None) or _FAR_FUTURE)
        return _latest(first)
    if x.annex_of_words:
        named = [c for c in docs if not is_amendment(c) and any(words_match(w, h) for w in x.annex_of_words
                                                                 for h in c.heading_words)]
        if named:
            def by_name(g: list[FileFacts]) -> bool:
                return any(words_match(w, h) for f in g for w in x.annex_of_words for h in f.name_key.split())

            groups = _documents(named)
            best = min(groups, key=lambda g: (not by_name(g), not any(f.stage_rank == 2 for f in g),
                                              -(_latest(g).version_date or _FAR_PAST).toordinal(),
                                              min(f.path for f in g)))
            return _latest(best)
    agreements = [c for c in docs if c.is_agreement_like and not is_amendment(c)]
    signed = [c for c in agreements if c.stage_rank == 2]
    for scope in ([c for c in signed if c.folder == x.folder], signed, agreements):
        groups = _documents(scope)
        if len(groups) == 1:
            return _latest(groups[0])
        if groups:
            return None
    return None


def decide(x: FileFacts, candidates: list[FileFacts]) -> RelateResult:
    """Decide identity, redline base and relations of ``x`` among ``candidates`` (``x`` excluded).

    Candidates are the files of ``x``'s matter, the files with ``x``'s bytes, the messages its headers
    name, and ``x``'s own attachments. Returns a :class:`RelateResult` whose refs are candidate refs, within
    the schema's limits: at most :data:`MAX_RELATIONS` relations (in the order found: reply, attachments,
    annex, citations; the rest counted in ``relations_omitted``), reasoning cut to fit.
    """
    pool = [c for c in candidates if c.ref != x.ref]
    twins = [c for c in pool if c.content_hash and c.content_hash == x.content_hash]
    if twins:
        keeper = canonical([x, *twins])
        if keeper.ref != x.ref:
            return RelateResult(identity="duplicate", same_as_ref=keeper.ref,
                                reasoning=_reasoning(f"byte-identical to {keeper.path}"))
    distinct = [c for c in pool if c.content_hash != x.content_hash]
    best, best_j = None, 0.0
    if not x.is_email and not x.embedded:
        # link to the earliest version among the matches: every version points at the first one, so a
        # redline and its clean rendition never form an island of their own
        matches = [(c, j) for c in distinct if not c.embedded for j in [same_document_score(x, c)] if j]
        if matches:
            best, best_j = min(matches, key=lambda m: (m[0].version_date or _FAR_FUTURE, m[0].stage_rank,
                                                       canonical_key(m[0])))
    siblings = {c.ref for c in distinct if not c.embedded and same_document_score(x, c)}
    base = _redline_base(x, distinct)
    relations: list[RelationOut] = []
    seen: set[tuple[str, str]] = set()

    def add(kind: str, target: FileFacts, evidence: str) -> None:
        if target.ref == x.ref or (kind, target.ref) in seen:
            return
        seen.add((kind, target.ref))
        relations.append(RelationOut(type=kind, target_ref=target.ref, evidence=evidence[:300]))

    top = [c for c in distinct if not c.embedded]
    if x.is_email:
        emails = [c for c in pool if c.is_email and not c.embedded]
        parent = _reply_parent(x, emails)
        if parent is not None:
            add("responds_to", parent, f"reply to {parent.mail.get('message_id') if parent.mail else parent.path}")
        prefix = x.path + " » "
        children = [c for c in pool if c.embedded and c.path.startswith(prefix)]
        for child in children:
            same = [c for c in top if c.content_hash == child.content_hash]
            add("references", canonical(same) if same else child, f"attachment {child.name}")
        if not children:  # attachments not stored as objects: match their names in the matter
            for name in (x.mail or {}).get("attachments") or []:
                named = [c for c in top if c.name == name]
                if named:
                    add("references", canonical(named), f"attachment {name}")
    main = _annex_main(x, top)
    if main is not None:
        add("annex_of", main, f"{x.annex_label} belongs to {main.name}")
    main_docs = {main.ref} | {c.ref for c in top if main is not None and same_document_score(main, c)} \
        if main is not None else set()
    for cite in citations(x):
        if cite.annex_ref:
            continue
        scored = [(citation_score(cite, c), c) for c in top if c.ref not in siblings and not c.is_email]
        scored = [(s, c) for s, c in scored if s > 0]
        if not scored:
            continue
        top_score = max(s for s, _ in scored)
        target = canonical([c for s, c in scored if s == top_score])
        if target.ref in main_docs:
            continue
        if target.annex_label and mentions_label(x, target.annex_label):
            continue  # x is the main document of that annex; the annex relates itself
        add(relation_type(x, cite, target), target, cite.line)
    kept, omitted = relations[:MAX_RELATIONS], max(0, len(relations) - MAX_RELATIONS)
    left_out = f"; {omitted} further relation(s) left out (limit {MAX_RELATIONS})" if omitted else ""
    if best is None:
        return RelateResult(identity="new", redline_against_ref=base.ref if base else None, relations=kept,
                            relations_omitted=omitted, reasoning=_reasoning("no other version or copy found", left_out))
    return RelateResult(identity="version", same_as_ref=best.ref, redline_against_ref=base.ref if base else None,
                        relations=kept, relations_omitted=omitted,
                        reasoning=_reasoning(f"same document as {best.path} (similarity {best_j:.2f})", left_out))


def _reasoning(text: str, tail: str = "") -> str:
    """``text`` + ``tail`` within the schema's :data:`REASONING_CHARS` (a long path is cut, the tail kept)."""
    room = REASONING_CHARS - len(tail)
    return (text if len(text) <= room else text[:room - 1] + "…") + tail

