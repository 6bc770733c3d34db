"""Exact top-k at scale (issue 15 item 1, "Measure"): the embedded lexical half vs an exact, uncapped BM25 computed
here, and vs OpenSearch's BM25, on the same synthetic chunks; p95 latency with the permission filter on.

Run: ``.venv/bin/python bench/search_exact.py [--chunks 1000000] [--queries-per-class 40] [--skip-opensearch]
[--skip-embedded] [--os-variants] [--prewarm] [--quiet-load 1.5] [--strategies] [--json out.json]``.

**Corpus**: ``--chunks`` chunks, 5 per document, each document with a random permission projection (1–3 of 40
groups, 10 % also ``*``, 5 % a denied user). A chunk is 4 sentences of the dev estate (its files converted by
ki's converters) and 24 filler words drawn Zipf-like from the German lexicon ki ships (nouns, compounds
included), so document frequencies run from a handful to most of the corpus. Written straight into
``chunk`` (COPY) with the change log, then the tantivy projection is built from the record
(:meth:`ki.adapters.search.projection.LexicalProjection.catch_up`: throughput reported).

**Queries** (classes): ``common`` (one of the 20 most frequent words: matches a large part of the corpus),
``word`` (one mid-frequency word), ``words2`` / ``words4`` (2 or 3–4 words of one sentence), ``compound`` (a
lexicon compound whose head is a frequent word: found inside longer compounds), ``phrase`` (3 words of a sentence,
quoted). Each as a random user holding 3 groups.

**Reference**: the query tree of :mod:`ki.adapters.search.query_plan` evaluated here over *every* chunk that holds
any of
its terms (BM25: idf ``ln(1 + (N - n + 0.5)/(n + 0.5))``, ``tf (k1 + 1) / (tf + k1 (1 - b + b dl/avgdl))``, k1
1.2, b 0.75, phrase frequency for phrases; tiers, the permission filter, one best chunk per document), without
tantivy's 1-byte length quantisation. overlap@10 = |top-10 documents ∩ reference top-10| / 10 (over queries
with 10 reference hits, else over the reference's count). Targets: ≥ 0.9 vs the reference for every class,
≥ 0.8 vs OpenSearch; p95 ≤ 100 ms embedded, ≤ 50 ms OpenSearch (lexical half + hydration: the ``ki search
--mode lexical`` path).

``--strategies``: the same queries through PostgreSQL-native rankings (``ts_rank_cd`` over every match with the
GIN index; the old cap of 1,000 rows in table order), for the record of why the embedded half is tantivy.
"""

from __future__ import annotations

import argparse
import io
import json
import math
import os
import random
import re
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import embedded_server, temp_workdir  # noqa: E402
from _search_timing import (  # noqa: E402
    bench_opensearch,
    jvm_warmup,
    overlap,
    prewarm,
    segments,
    serving_buffers,
    settle_merges,
    sync_documents,
    timed_run,
    wait_quiet,
)
from search_alternatives import os_variants, postgres_native  # noqa: E402

GROUPS = [f"group:g{i:02d}" for i in range(40)]
PER_DOC = 5
K1, B = 1.2, 0.75
STREAMS = ("t_exact", "t_de", "t_en", "t_parts")


class Corpus:
    """Deterministic chunks: chunk ``i`` is a function of (seed, i)."""

    def __init__(self, seed: int):
        from search import estate_texts  # bench/search.py

        from ki.adapters.search.compounds import lexicon

        self.seed = seed
        self.sentences = [s.strip() for t in estate_texts() for s in re.split(r"(?<=[.!?])\s+|\n+", t)
                          if 25 < len(s.strip()) < 200]
        rng = random.Random(seed)
        vocab = sorted(lexicon("de"))
        rng.shuffle(vocab)
        self.filler = [w.capitalize() for w in vocab[:40000]]
        p = 1 / np.arange(1, len(self.filler) + 1) ** 1.05
        self.cdf = np.cumsum(p / p.sum())

    def chunk(self, i: int) -> str:
        rng = random.Random(self.seed * 10_000_019 + i)
        sent = " ".join(rng.choice(self.sentences) for _ in range(4))
        idx = np.searchsorted(self.cdf, np.random.default_rng(self.seed * 7 + i).random(24))
        return sent + " " + " ".join(self.filler[j] for j in idx)


def access_of(doc: int) -> tuple[list[str], list[str]]:
    rng = random.Random(1_000_003 * doc)
    allowed = set(rng.sample(GROUPS, rng.randint(1, 3)))
    if rng.random() < 0.10:
        allowed.add("*")
    denied = [f"user:u{rng.randint(0, 99):02d}"] if rng.random() < 0.05 else []
    return sorted(allowed), denied


def searchers(n: int, seed: int) -> list[tuple[str, ...]]:
    """``n`` random searchers' principal sets (a user and 3 of :data:`GROUPS`), reproducible per ``seed``."""
    from ki.domain.access.projection import principal_set

    rng = random.Random(seed)
    return [principal_set([f"user:u{rng.randint(0, 99):02d}", *rng.sample(GROUPS, 3)]) for _ in range(n)]


def make_queries(corpus: Corpus, n: int, df_sample: Counter, seed: int) -> list[tuple[str, str]]:
    """(class, query) pairs (see the module docstring)."""
    from ki.adapters.search.compounds import split_compound

    rng = random.Random(seed)
    common = [w for w, _ in df_sample.most_common(60) if len(w) > 3][:20]
    mid = [w for w, c in df_sample.items() if 2 <= c <= 20 and len(w) > 4]  # in 0.05–0.5 % of the chunks
    heads = {w for w, c in df_sample.most_common(3000)}
    compounds = [w for w in corpus.filler[:40000] if len(split_compound(w.casefold())) >= 2
                 and "".join(split_compound(w.casefold())[-2:]) in heads]
    out: list[tuple[str, str]] = []
    for _ in range(n):
        out.append(("common", rng.choice(common)))
        out.append(("word", rng.choice(mid)))
        words = re.findall(r"[^\W\d_]{4,}", rng.choice(corpus.sentences))
        if len(words) >= 2:
            k = 2
            s = rng.randint(0, len(words) - k)
            out.append(("words2", " ".join(words[s:s + k])))
        if len(words) >= 4:
            k = rng.randint(3, 4)
            s = rng.randint(0, len(words) - k)
            out.append(("words4", " ".join(words[s:s + k])))
        if len(words) >= 3:
            s = rng.randint(0, len(words) - 3)
            out.append(("phrase", '"' + " ".join(words[s:s + 3]) + '"'))
        if compounds:
            c = split_compound(rng.choice(compounds).casefold())
            out.append(("compound", "".join(c[-2:]).capitalize()))
    return out


# --------------------------------------------------------------------------- the exact reference


class Reference:
    """Postings (numpy, sorted by chunk) of the query terms over every chunk, chunk lengths per stream."""

    def __init__(self, terms: dict[str, set[str]], n_chunks: int):
        from array import array

        self.terms = terms  # stream → terms wanted
        self._ids: dict[tuple[str, str], Any] = defaultdict(lambda: array("i"))
        self._tfs: dict[tuple[str, str], Any] = defaultdict(lambda: array("h"))
        self.dl = {s: np.zeros(n_chunks, dtype=np.int32) for s in STREAMS}
        self.n = n_chunks

    def add(self, i: int, streams: dict[str, str]) -> None:
        for s in STREAMS:
            toks = streams[s].split()
            self.dl[s][i] = len(toks)
            wanted = self.terms.get(s)
            if wanted:
                for t, c in Counter(x for x in toks if x in wanted).items():
                    self._ids[(s, t)].append(i)
                    self._tfs[(s, t)].append(min(c, 32767))

    def finish(self) -> None:
        n_docs = self.n // PER_DOC + 1
        self.allow_bits = np.zeros(n_docs, dtype=np.uint64)
        self.deny_user = np.full(n_docs, -1, dtype=np.int16)
        for d in range(n_docs):
            allowed, denied = access_of(d)
            bits = 0
            for g in allowed:
                bits |= 1 << (40 if g == "*" else int(g[-2:]))
            self.allow_bits[d] = bits
            if denied:
                self.deny_user[d] = int(denied[0][-2:])
        self.avgdl = {s: float(self.dl[s].mean()) or 1.0 for s in STREAMS}
        self.ids = {k: np.frombuffer(v, dtype=np.int32) for k, v in self._ids.items()}
        self.tfs = {k: np.frombuffer(self._tfs[k], dtype=np.int16).astype(np.float64) for k in self._ids}

    def idf(self, s: str, t: str) -> float:
        n = len(self.ids.get((s, t), ()))
        return math.log(1 + (self.n - n + 0.5) / (n + 0.5))

    def tf_at(self, s: str, t: str, cand: np.ndarray) -> np.ndarray:
        """The term's frequency in each candidate chunk (0 where absent)."""
        ids = self.ids.get((s, t))
        out = np.zeros(len(cand))
        if ids is None or not len(ids):
            return out
        pos = np.searchsorted(ids, cand)
        pos[pos >= len(ids)] = 0
        hit = ids[pos] == cand
        out[hit] = self.tfs[(s, t)][pos[hit]]
        return out

    def norm(self, tf: np.ndarray, s: str, cand: np.ndarray) -> np.ndarray:
        return tf * (K1 + 1) / (tf + K1 * (1 - B + B * self.dl[s][cand] / self.avgdl[s]))


def reference_top(ref: Reference, corpus: Corpus, node_tiers: list[Any], held: tuple[str, ...], k: int = 10
                  ) -> list[int]:
    """The exact top ``k`` documents (best chunk each) of the tiers' trees over every candidate chunk,
    permissions applied (vectorised; phrases checked on the chunks holding all their words)."""
    from ki.adapters.search.analysis import streams
    from ki.adapters.search.query_plan import AllOf, AnyOf, BestOf, Phrase, Term, WithBonus

    def phrase_freq(n: Any, cand: np.ndarray, mask: np.ndarray) -> np.ndarray:
        pf = np.zeros(len(cand))
        m = len(n.words)
        for j in np.nonzero(mask)[0]:
            st = streams(corpus.chunk(int(cand[j])))
            seq = {"t_exact": st.exact, "t_de": st.de, "t_en": st.en, "t_parts": st.parts}[n.field].split()
            pf[j] = sum(1 for x in range(len(seq) - m + 1) if tuple(seq[x:x + m]) == n.words)
        return pf

    def score(n: Any, cand: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(matches mask, score) over the candidates."""
        zero = np.zeros(len(cand))
        if isinstance(n, Term):
            if n.field not in STREAMS:
                return zero.astype(bool), zero
            tf = ref.tf_at(n.field, str(n.value), cand)
            return tf > 0, n.boost * ref.idf(n.field, str(n.value)) * ref.norm(tf, n.field, cand)
        if isinstance(n, Phrase):
            if n.field not in STREAMS:
                return zero.astype(bool), zero
            mask = np.ones(len(cand), dtype=bool)
            for w in n.words:
                mask &= ref.tf_at(n.field, w, cand) > 0
            pf = phrase_freq(n, cand, mask)
            idf = sum(ref.idf(n.field, w) for w in n.words)
            return pf > 0, n.boost * idf * ref.norm(pf, n.field, cand)
        if isinstance(n, (AnyOf, AllOf)):
            parts = [score(c, cand) for c in n.children]
            masks = np.array([p[0] for p in parts])
            total = np.sum([np.where(p[0], p[1], 0.0) for p in parts], axis=0)
            mask = masks.any(axis=0) if isinstance(n, AnyOf) else masks.all(axis=0)
            return mask, n.boost * total
        if isinstance(n, BestOf):  # the best child + tie_breaker × the others
            parts = [score(c, cand) for c in n.children]
            scores = np.array([np.where(p[0], p[1], 0.0) for p in parts])
            best = scores.max(axis=0)
            return (np.array([p[0] for p in parts]).any(axis=0),
                    n.boost * (best + n.tie_breaker * (scores.sum(axis=0) - best)))
        if isinstance(n, WithBonus):
            m, sc = score(n.query, cand)
            bm, bs = score(n.bonus, cand)
            return m, sc + np.where(bm, bs, 0.0)
        return zero.astype(bool), zero

    taken: list[int] = []
    for node in node_tiers:
        keys = [(s, t) for s, t in tree_terms(node) if (s, t) in ref.ids]
        if not keys:
            continue
        cand = np.unique(np.concatenate([ref.ids[key] for key in keys]))
        docs = cand // PER_DOC
        bits = 0
        users = []
        for p in held:
            if p == "*":
                bits |= 1 << 40
            elif p.startswith("group:g"):
                bits |= 1 << int(p[-2:])
            elif p.startswith("user:u"):
                users.append(int(p[-2:]))
        allowed = ((ref.allow_bits[docs] & np.uint64(bits)) != 0) & ~np.isin(ref.deny_user[docs], users)
        keep = allowed & ~np.isin(docs, taken)
        cand, docs = cand[keep], docs[keep]
        mask, sc = score(node, cand)
        best: dict[int, float] = {}
        for d, v in zip(docs[mask].tolist(), sc[mask].tolist(), strict=True):
            if v > best.get(d, -1.0):
                best[d] = v
        taken += [d for d, _ in sorted(best.items(), key=lambda kv: (-kv[1], kv[0]))][: k - len(taken)]
        if len(taken) >= k:
            break
    return taken[:k]


# --------------------------------------------------------------------------- the run


def _load_record(db: Any, corpus: Corpus, n: int, ref: Reference | None) -> dict[str, Any]:
    """COPY ``n`` chunks (and their objects, permissions, change log) into the record; feed the reference."""
    from sqlalchemy import text

    from ki.adapters.search.analysis import streams

    n_docs = n // PER_DOC
    with db.engine.begin() as conn:
        sid = conn.execute(text("INSERT INTO source (project_id, kind, root) VALUES (1, 'local', '/bench') "
                                "RETURNING id")).scalar_one()
        conn.execute(text("INSERT INTO source_object (id, source_id, external_id, path, mtime_ns, content_hash) "
                          "SELECT g, :s, 'd' || g, '/bench/d' || g || '.txt', 1700000000000000000, "
                          "md5(g::text) || md5(g::text) FROM generate_series(0, :n - 1) g"), {"s": sid, "n": n_docs})
    t0 = time.perf_counter()
    analyse_s = 0.0
    raw = db.engine.raw_connection()
    try:
        cur = raw.cursor()
        for start in range(0, n, 20000):
            buf = io.StringIO()
            for i in range(start, min(n, start + 20000)):
                doc = i // PER_DOC
                body = corpus.chunk(i)
                if ref is not None:
                    a = time.perf_counter()
                    st = streams(body)
                    ref.add(i, {"t_exact": st.exact, "t_de": st.de, "t_en": st.en, "t_parts": st.parts})
                    analyse_s += time.perf_counter() - a
                allowed, denied = access_of(doc)
                h = f"{doc:064d}"
                esc = body.replace("\\", "\\\\").replace("\t", " ").replace("\n", " ")
                buf.write(f"{doc}\t{h}\t{i % PER_DOC}\t{esc}\tDokument {doc}\t{{{','.join(allowed)}}}\t"
                          f"{{{','.join(denied)}}}\n")
            buf.seek(0)
            with cur.copy("COPY chunk (source_object_id, content_hash, ordinal, text, title, allowed_principals, "
                          "denied_principals) FROM STDIN") as cp:
                cp.write(buf.read())
            raw.commit()
            if start and start % 200000 == 0:
                print(f"  … {start} chunks in the record ({time.perf_counter() - t0:.0f} s)", flush=True)
        cur.execute("INSERT INTO index_change (source_object_id, seq) SELECT g, nextval('index_change_seq') "
                    f"FROM generate_series(0, {n_docs - 1}) g")
        raw.commit()
    finally:
        raw.close()
    with db.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text("VACUUM ANALYZE chunk"))
    return {"record_load_s": round(time.perf_counter() - t0, 1), "reference_analysis_s": round(analyse_s, 1)}


def tree_terms(node: Any) -> list[tuple[str, str]]:
    """(stream, term) of every passage term and phrase word in a query tree."""
    from ki.adapters.search.query_plan import AllOf, AnyOf, BestOf, Phrase, Term, WithBonus

    if isinstance(node, Term):
        return [(node.field, str(node.value))] if node.field in STREAMS else []
    if isinstance(node, Phrase):
        return [(node.field, w) for w in node.words] if node.field in STREAMS else []
    if isinstance(node, (AnyOf, AllOf, BestOf)):
        return [t for c in node.children for t in tree_terms(c)]
    if isinstance(node, WithBonus):
        return tree_terms(node.query) + tree_terms(node.bonus)
    return []


def _report(out: dict[str, Any], name: str, classes: list[str], values: list[float | None]) -> None:
    per: dict[str, list[float]] = defaultdict(list)
    for c, v in zip(classes, values, strict=True):
        if v is not None:
            per[c].append(v)
    out[name] = {c: round(float(np.mean(v)), 3) for c, v in sorted(per.items())}
    out[name + "_min"] = {c: round(float(np.min(v)), 3) for c, v in sorted(per.items())}
    print(f"  {name}: " + ", ".join(f"{c} {m:.3f} (min {out[name + '_min'][c]:.2f})" for c, m in out[name].items()))


def run(args: argparse.Namespace) -> dict[str, Any]:
    from ki.adapters.search.analysis import words
    from ki.adapters.search.query import parse_query
    from ki.adapters.search.query_plan import tier_node
    from ki.store.db import ensure_database, open_database, sqlalchemy_url

    out: dict[str, Any] = {"chunks": args.chunks, "load_average_start": os.getloadavg()}
    t0 = time.perf_counter()
    corpus = Corpus(args.seed)
    step = max(1, args.chunks // 4000)
    df: Counter = Counter()
    for i in range(0, args.chunks, step):
        df.update(set(words(corpus.chunk(i))))
    queries = make_queries(corpus, args.queries_per_class, df, args.seed)  # df of a 4,000-chunk sample
    held = searchers(len(queries), args.seed)
    if args.prewarm:  # other queries of the same classes (another seed): the search node's JIT warm-up
        args.warmup = make_queries(corpus, args.queries_per_class, df, args.seed + 1000)
        args.warmup_held = searchers(len(args.warmup), args.seed + 1000)
    parsed = [parse_query(q) for _, q in queries]
    tiers = [[tier_node(p, 1)] + ([tier_node(p, 2)] if p.has_relaxed_tier else []) for p in parsed]
    terms: dict[str, set[str]] = defaultdict(set)
    for ts in tiers:
        for node in ts:
            for s, t in tree_terms(node):
                terms[s].add(t)
    classes = [c for c, _ in queries]
    print(f"{len(queries)} queries ({dict(Counter(classes))}); corpus set up in {time.perf_counter() - t0:.0f} s")
    ref = Reference(terms, args.chunks)
    with temp_workdir() as work, embedded_server(work / "pg") as uri:
        if args.prewarm:
            uri = serving_buffers(work / "pg")
        ensure_database(uri, "kibench")
        db = open_database(sqlalchemy_url(uri, "kibench"), pool_size=8)
        out |= _load_record(db, corpus, args.chunks, ref)
        ref.finish()
        print(f"record: {args.chunks} chunks in {out['record_load_s']} s (reference analysis "
              f"{out['reference_analysis_s']} s), load {os.getloadavg()}", flush=True)
        t = time.perf_counter()
        reference = [reference_top(ref, corpus, ts, h) for ts, h in zip(tiers, held, strict=True)]
        out["reference_s"] = round(time.perf_counter() - t, 1)
        emb: list[list[int]] | None = None
        if not args.skip_embedded:
            emb = _embedded(args, db, work, queries, held, classes, reference, out)
        if args.strategies:
            out["postgres_native"] = postgres_native(db, queries, held)
        if not args.skip_opensearch:
            out["opensearch"] = _opensearch(args, db, corpus, queries, held, classes, emb, reference)
        db.dispose()
    out["total_s"] = round(time.perf_counter() - t0, 1)
    return out


def _throughput(out: dict[str, Any], key: str, n: int, t0: float) -> str:
    """Record ``<key>_s`` and ``<key>_chunks_per_s`` since ``t0`` (perf_counter); the two as text."""
    elapsed = time.perf_counter() - t0
    out[f"{key}_s"], out[f"{key}_chunks_per_s"] = round(elapsed, 1), round(n / elapsed)
    return f"{out[f'{key}_s']} s ({out[f'{key}_chunks_per_s']} chunks/s)"


def _embedded(args: argparse.Namespace, db: Any, work: Path, queries: list[tuple[str, str]],
              held: list[tuple[str, ...]], classes: list[str], reference: list[list[int]], out: dict[str, Any]
              ) -> list[list[int]]:
    """The tantivy projection built from the record, the queries timed through it; its top-10s."""
    from ki.adapters.search.postgres import PostgresBackend
    from ki.adapters.search.projection import projection_for

    backend = PostgresBackend(db, index_root=work / "search")
    proj = projection_for(db.engine, work / "search")
    t = time.perf_counter()
    proj.catch_up(block=True, timeout=60)
    print(f"tantivy projection built from the record in {_throughput(out, 'projection', args.chunks, t)}, "
          f"load {os.getloadavg()}", flush=True)
    wait_quiet(args.quiet_load)
    if args.prewarm:
        out["embedded_prewarm"] = prewarm(db.engine, [work / "search"])
    emb, t = timed_run(backend, db.engine, queries, held, classes, warm=20)
    out["embedded_lexical_p50_ms"], out["embedded_lexical_p95_ms"] = t["p50_ms"], t["p95_ms"]
    out["load_average_embedded_queries"], out["embedded_p95_ms_by_class"] = t["load"], t["p95_ms_by_class"]
    print(f"embedded lexical (+ hydration) p50 {out['embedded_lexical_p50_ms']} ms, p95 "
          f"{out['embedded_lexical_p95_ms']} ms (target ≤ 100 ms) at load {out['load_average_embedded_queries']}; "
          f"p95 by class {out['embedded_p95_ms_by_class']}")
    _report(out, "overlap_at_10_vs_reference", classes, [overlap(e, r) for e, r in zip(emb, reference,
                                                                                      strict=True)])
    return emb


def _opensearch(args: argparse.Namespace, db: Any, corpus: Corpus, queries: list[tuple[str, str]],
                held: list[tuple[str, ...]], classes: list[str], emb: list[list[int]] | None,
                reference: list[list[int]]) -> dict[str, Any]:
    """The same chunks on OpenSearch (the test node, -Xmx2g), the same queries; overlap with both."""
    from ki.adapters.search.backend import ChunkRow, IndexDocument
    from ki.domain.access.projection import AccessProjection

    def document(d: int) -> IndexDocument:
        allowed, denied = access_of(d)
        return IndexDocument(d, f"{d:064d}", f"Dokument {d}",
                             [ChunkRow(o, corpus.chunk(d * PER_DOC + o)) for o in range(PER_DOC)],
                             AccessProjection(tuple(allowed), tuple(denied)))

    res: dict[str, Any] = {}
    with bench_opensearch(db, "ki-bench-exact") as (backend, work):
        t = time.perf_counter() - sync_documents(backend, args.chunks // PER_DOC, document)  # _throughput's start
        print(f"OpenSearch: {args.chunks} chunks synced in {_throughput(res, 'sync', args.chunks, t)}", flush=True)
        res["segments"] = segments(backend)
        if args.prewarm:
            res["merges"] = settle_merges(backend)
            res["segments"] = res["merges"]["segments_after"]
        wait_quiet(args.quiet_load)
        if args.prewarm:
            res["prewarm"] = prewarm(db.engine, [work])
            _, cold = timed_run(backend, db.engine, queries, held, classes, warm=50)
            res["lexical_p95_ms_cold_jvm"], res["p95_ms_by_class_cold_jvm"] = cold["p95_ms"], cold["p95_ms_by_class"]
            print(f"  first pass on the node's cold JVM: p50 {cold['p50_ms']} ms, p95 {cold['p95_ms']} ms", flush=True)
            res["warmup"] = jvm_warmup(backend, db.engine, args.warmup, args.warmup_held)
        osr, t = timed_run(backend, db.engine, queries, held, classes, warm=50)
        res["lexical_p50_ms"], res["lexical_p95_ms"] = t["p50_ms"], t["p95_ms"]
        res["load_average_queries"], res["p95_ms_by_class"] = t["load"], t["p95_ms_by_class"]
        print(f"OpenSearch lexical (+ record check + hydration) p50 {res['lexical_p50_ms']} ms, p95 "
              f"{res['lexical_p95_ms']} ms (target ≤ 50 ms) at load {res['load_average_queries']}, "
              f"{res['segments']} segments; p95 by class {res['p95_ms_by_class']}", flush=True)
        if args.os_variants:
            res["variants"] = os_variants(backend, db.engine, queries, held, classes, osr)
        if emb is not None:
            _report(res, "overlap_at_10_embedded_vs_opensearch", classes,
                    [overlap(e, o) for e, o in zip(emb, osr, strict=True)])
        _report(res, "overlap_at_10_opensearch_vs_reference", classes,
                [overlap(o, r) for o, r in zip(osr, reference, strict=True)])
        backend.drop_index()
    return res


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=1_000_000)
    parser.add_argument("--queries-per-class", type=int, default=40)
    parser.add_argument("--seed", type=int, default=15)
    parser.add_argument("--skip-opensearch", action="store_true")
    parser.add_argument("--quiet-load", type=float, help="before timing, wait until the load average is below this")
    parser.add_argument("--skip-embedded", action="store_true", help="no tantivy build (OpenSearch only)")
    parser.add_argument("--prewarm", action="store_true",
                        help="time a serving node's steady state: OpenSearch's background merges of the load finished, "
                             "its JIT warmed by 3 passes of another seed's queries (the cold first pass is "
                             "reported too), "
                             "shared_buffers a quarter of RAM, the record's search relations prewarmed and the "
                             "index files read just before timing")
    parser.add_argument("--os-variants", action="store_true",
                        help="also time other OpenSearch query forms and index states (collapse, slices, merged)")
    parser.add_argument("--strategies", action="store_true", help="also time PostgreSQL-native rankings")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    out = run(args)
    if args.json:
        args.json.write_text(json.dumps(out, indent=2, default=str))
    print(json.dumps(out, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
