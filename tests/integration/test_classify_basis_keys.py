"""The classifications a newly classified file re-opens, read through the narrowed keys, on real PostgreSQL.

Classify's commit reads, under the project's lock exclusive, the earlier classifications a new file may
answer (:func:`ki.store.classify_basis.bases_touching`) and replays their queries in Python
(:meth:`ki.domain.matters.basis.Queries.answered_by`). The read leaves out what the replay always rejects
(bases that saw the file; the folder and needle keys of a file stating no reference). This test writes
random bases (folder, needle and message-id queries, random ``seen``) over a real converted estate of two
sources with the same folders, mail included, and checks, for every file as the new one, stating a
reference or not, that the requeued set equals the one the full key predicate (every key arm, no ``seen``
filter) and the same replay give. It fails if the ``seen`` test is inverted or a file stating no reference
skips its message ids. (Restricting the folder arm to the file's source is NOT the same: a folder key of
another source also brings in a base whose needle the file contains as part of a longer word, which the
needle-word key misses, and the replay then requeues it.)

Cost: about 10 s.
"""

from __future__ import annotations

import random
from pathlib import Path

from sqlalchemy import text

from ki.adapters.sources.scan import register_local_source, scan_source
from ki.domain.matters import basis
from ki.orchestration.execute import run_stage_for_object
from ki.store.classify_basis import basis_file
from ki.store.sources import project_of_source

_FULL_KEYS_SQL = """
SELECT b.source_object_id, b.queries, b.seen, so.source_id FROM classify_basis b
JOIN source_object so ON so.id = b.source_object_id AND so.deleted_at IS NULL
WHERE b.project_id = :p AND b.source_object_id <> :o
  AND (b.folders && CAST(:prefixes AS text[]) OR b.ids && CAST(:ids AS text[])
       OR b.needle_words && CAST(:words AS text[]))"""

_FOLDERS = ["Akten/2024-0153 Keller", "Akten/2024-0153 Keller/Gericht", "Akten/2023-0007 Nordwind", "Post"]
_LINES = ["Keller Logistik GmbH", "Nordwind AG", "Aktenzeichen 32 Ca 5920/22", "Rahmenliefervertrag",
          "Unser Zeichen: 2024-0153", "Müller & Söhne", "Straßenbau Claußen", "Anlage K1", "Rechnung RE-2024-00001"]


def _mail(i: int, rng: random.Random) -> str:
    reply = f"In-Reply-To: <m{i - 1}@kanzlei.de>\n" if i else ""
    return (f"From: a@kanzlei.de\nTo: b@mandant.de\nSubject: Sache {i}\nMessage-ID: <m{i}@kanzlei.de>\n{reply}"
            f"Date: Mon, 4 Mar 2024 10:0{i}:00 +0100\n\n{rng.choice(_LINES)}\n{rng.choice(_LINES)}\n")


def _estate(root: Path, rng: random.Random, n: int) -> None:
    for i in range(n):
        folder = rng.choice(_FOLDERS)
        if i % 4 == 0:
            path, body = root / folder / f"Mail {i}.eml", _mail(i // 4, rng)
        else:
            path, body = root / folder / f"Datei {i}.txt", "\n".join(rng.sample(_LINES, 3)) + "\n"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body, encoding="utf-8")


def _needle(rng: random.Random) -> str:
    line = rng.choice(_LINES + ["Sonnenschein KG", "99 O 1/99"])
    cut = rng.choice([(0, len(line)), (rng.randrange(len(line) // 2), len(line)), (0, max(3, len(line) // 2))])
    needle = line[cut[0]:cut[1]].strip() or line
    return needle.upper() if rng.random() < 0.2 else needle


def _random_queries(rng: random.Random, rels: list[str], ids: list[str]) -> basis.Queries:
    q = basis.Queries()
    for _ in range(rng.randrange(3)):
        q.under.add(rng.choice(_FOLDERS) + rng.choice(["", "/"]))
    for _ in range(rng.randrange(3)):
        q.containing.add(_needle(rng))
    for _ in range(rng.randrange(2)):
        q.linked.add(rng.choice(ids + ["fremd@x.de"]))
    q.seen.update(rng.sample(rels, rng.randrange(len(rels) // 2)))
    return q


def _reference(conn, project_id: int, new: basis.NewFile, me) -> list[int]:
    parts = [p for p in me.external_id.split("/")[:-1] if p]
    prefixes = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
    words = sorted(set(basis._WORD.findall(basis.fold(new.text))))
    rows = conn.execute(text(_FULL_KEYS_SQL), {"p": project_id, "o": me.id, "prefixes": prefixes,
                                               "ids": sorted(new.mail_ids), "words": words})
    out = []
    for b in rows:
        other = basis.NewFile(new.rel, new.external_id, new.text, new.mail_ids,
                              same_source=b.source_id == me.source_id, contributes=new.contributes)
        if basis.Queries.from_json(b.queries, b.seen).answered_by(other):
            out.append(int(b.source_object_id))
    return out


def test_the_narrowed_keys_requeue_exactly_what_the_full_keys_do(ctx, tmp_path):
    rng = random.Random(33)
    oids: list[int] = []
    for name in ("eins", "zwei"):  # two sources with the same folders: folder queries stay in their source
        root = tmp_path / name
        _estate(root, rng, 18)
        scan_source(ctx, register_local_source(ctx, root))
    with ctx.db.engine.connect() as conn:
        oids = [r[0] for r in conn.execute(text("SELECT id FROM source_object ORDER BY id"))]
    for oid in oids:
        for stage in ("fetch", "convert"):
            assert run_stage_for_object(ctx, stage, oid).kind == "done", (oid, stage)
    checked = requeued = 0
    with ctx.db.engine.begin() as conn:
        rows = {oid: basis_file(conn, oid) for oid in oids}
        assert all(rows.values())
        project_id = project_of_source(conn, rows[oids[0]].source_id)
        rels = sorted({r.rel for r in rows.values()})
        ids = sorted({i for r in rows.values() for i in basis._new_file(r, r.source_id).mail_ids})
        assert len(ids) >= 4
        for round_ in range(6):
            for oid in oids:  # fresh random bases for every file
                basis._record(conn, oid, project_id, round_, _random_queries(rng, rels, ids), rng.random() < 0.5)
            for oid in oids:
                me = rows[oid]
                for states in (True, False):
                    new = basis._new_file(me, me.source_id, states)
                    got = basis._answered(conn, project_id, new, me)
                    assert sorted(got) == sorted(_reference(conn, project_id, new, me)), (oid, states)
                    checked += 1
                    requeued += len(got)
        bases = conn.execute(text("SELECT count(*) FROM classify_basis")).scalar_one()
    assert bases == len(oids) and checked == 6 * 2 * len(oids)
    assert requeued > checked  # the random bases do re-open decisions: the comparison is not vacuous
