"""Quality of Extract metadata and Extract decisions against a synthetic estate's ``truth.json``.

Scores a ``ki export --json`` (see ``shared/corpus/estate-dev/README.md`` "Scoring", items 5–7):

* type accuracy — predicted ``doc_type`` ∈ ``doc_type_acceptable`` (``null`` = left untyped); also
  root-level accuracy against ``doc_type_ancestors[0]``;
* party F1 — micro P/R/F1 over (file, entity, role), and the role-free variant. A predicted entity
  maps to a truth entity by a shared identifier, else by normalised name against ``entities[].variants``;
  a name shared by homonyms is decided by the identifiers the predicted entity carries anywhere in the
  export, else by the file's matter;
* entity duplicates — predicted entity rows beyond the first that map to the same truth entity (the
  homonym pairs must stay two rows, legal-form variants one);
* ``doc_date`` and ``language`` exact-match accuracy; identifier P/R/F1 over (type, value);
* decision P/R/F1 per DOCX over (kind, before, after) with whitespace-normalised text (files whose
  identity is ``duplicate_of`` excluded); the headline is recall on the DOCX files with revisions.

Usage::

    .venv/bin/python bench/quality_metadata.py ../shared/corpus/estate-dev [--workers 4] [--json] [--check]

The estate is inserted with rules policies (no gateway), ``firm.*`` from truth.json and
``pipeline.ontology_file`` pointing at the truth.json (its ``ontology`` object is read).
``--check`` exits 1 unless the targets hold (:data:`TARGETS`).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ki.domain.entities.names import name_key  # noqa: E402

TARGETS = {"doc_type_accuracy": 0.9, "party_f1": 0.9, "entity_duplicates_ok": 1.0, "doc_date_accuracy": 0.95,
           "decision_recall": 0.9}


def _prf(pred: set, true: set) -> dict[str, float]:
    tp = len(pred & true)
    p = tp / len(pred) if pred else 1.0
    r = tp / len(true) if true else 1.0
    return {"precision": p, "recall": r, "f1": 2 * p * r / (p + r) if p + r else 0.0}


def _norm(value: str | None) -> str:
    return " ".join((value or "").split())


def _kind(kind: str | None) -> str | None:
    return kind if kind in ("person", "court") else None


def _ident_key(ident: dict[str, Any]) -> tuple[str, str]:
    return ident.get("type", ""), "".join(str(ident.get("value", "")).upper().split())


class EntityMap:
    """Maps predicted entity ids to truth entity ids (see module doc)."""

    def __init__(self, truth: dict[str, Any], rows: list[dict[str, Any]]):
        self.by_name: dict[str, set[str]] = defaultdict(set)
        self.by_ident: dict[tuple[str, str], str] = {}
        for e in truth["entities"]:
            for v in e["variants"]:
                self.by_name[name_key(v, kind=_kind(e["kind"])).key].add(e["id"])
            for ident in e.get("identifiers") or []:
                self.by_ident[_ident_key(ident)] = e["id"]
        firm = truth["firm"]
        for v in [firm["name"], *firm["aliases"], *(firm.get("variants") or []), firm.get("letterhead") or ""]:
            if v:
                self.by_name[name_key(v, kind="law_firm").key].add(firm["entity"])
        self.matter_parties: dict[str, set[str]] = {}
        for m in truth["matters"]:
            ids = {m["client"]["entity"]} | {x["entity"] for x in [m.get("counterparty"), m.get("opposing_counsel"),
                                                                    m.get("court")] if x}
            ids |= {x["entity"] for x in m.get("other_parties") or []}
            self.matter_parties[m["reference"]] = ids | {firm["entity"]}
        self.names: dict[int, set[str]] = defaultdict(set)
        self.idents: dict[int, set[tuple[str, str]]] = defaultdict(set)
        self.kinds: dict[int, str] = {}
        for row in rows:
            for p in row.get("parties") or []:
                kind = _kind(p.get("kind"))
                self.kinds[p["entity_id"]] = p.get("kind")
                for n in (p.get("name"), p.get("entity_name")):
                    if n:
                        self.names[p["entity_id"]].add(name_key(n, kind=kind).key)
                for ident in p.get("identifiers") or []:
                    self.idents[p["entity_id"]].add(_ident_key(ident))

    def candidates(self, entity_id: int) -> set[str]:
        """Truth entities the predicted entity can be."""
        by_ident = {self.by_ident[k] for k in self.idents[entity_id] if k in self.by_ident}
        if by_ident:
            return by_ident
        return set().union(*(self.by_name.get(n, set()) for n in self.names[entity_id])) if self.names[entity_id] \
            else set()

    def resolve(self, entity_id: int, matter_reference: str | None) -> str | None:
        """The truth entity for a predicted entity on a file of ``matter_reference`` (None: unmapped)."""
        cands = self.candidates(entity_id)
        if len(cands) > 1 and matter_reference in self.matter_parties:
            cands = cands & self.matter_parties[matter_reference] or cands
        return min(cands) if cands else None


def score_metadata(truth: dict[str, Any], rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Score export rows (as ``ki export --json`` writes them) against ``truth``."""
    files = truth["files"]
    pred = {r["path"]: r for r in rows if r.get("path") in files}
    n = len(files)
    out: dict[str, Any] = {"files": n, "exported": len(pred)}
    type_ok = root_ok = date_ok = lang_ok = 0
    type_misses = []
    for path, t in files.items():
        p = pred.get(path, {})
        node = p.get("doc_type")
        if node in t["doc_type_acceptable"]:
            type_ok += 1
        else:
            type_misses.append(f"{path}: {node} (truth {t['doc_type']})")
        anc = p.get("doc_type_ancestors") or []
        root_ok += (anc[0] if anc else None) == (t["doc_type_ancestors"][0] if t["doc_type_ancestors"] else None)
        date_ok += p.get("doc_date") == t["doc_date"]
        lang_ok += p.get("language") == t["language"]
    out.update({"doc_type_accuracy": type_ok / n, "doc_type_root_accuracy": root_ok / n, "doc_date_accuracy":
                date_ok / n, "language_accuracy": lang_ok / n, "doc_type_misses": type_misses})

    emap = EntityMap(truth, list(pred.values()))
    p_roles, t_roles = set(), set()
    party_misses = []
    for path, t in files.items():
        mine = set()
        for party in pred.get(path, {}).get("parties") or []:
            ent = emap.resolve(party["entity_id"], t["matter_reference"])
            mine.add((path, ent if ent else f"pred:{party['entity_id']}", party["role"]))
        theirs = {(path, x["entity"], x["role"]) for x in t["parties"]}
        p_roles |= mine
        t_roles |= theirs
        if mine != theirs:
            party_misses.append(f"{path}: extra {sorted(x[1:] for x in mine - theirs)} "
                                f"missing {sorted(x[1:] for x in theirs - mine)}")
    with_roles = _prf(p_roles, t_roles)
    out["party_f1"] = with_roles["f1"]
    out["party_prf"] = with_roles
    out["party_f1_no_roles"] = _prf({x[:2] for x in p_roles}, {x[:2] for x in t_roles})["f1"]
    out["party_misses"] = party_misses

    # A predicted row counts for the truth entity it resolves to where it is used (homonyms by matter).
    used: dict[str, set[int]] = defaultdict(set)
    for path, t in files.items():
        for party in pred.get(path, {}).get("parties") or []:
            ent = emap.resolve(party["entity_id"], t["matter_reference"])
            if ent:
                used[ent].add(party["entity_id"])
    duplicates = {ent: sorted(ids) for ent, ids in used.items() if len(ids) > 1}
    out["entity_duplicates"] = sum(len(ids) - 1 for ids in duplicates.values())
    out["entity_duplicates_detail"] = duplicates
    out["entity_duplicates_ok"] = 1.0 if out["entity_duplicates"] == 0 else 0.0
    homonyms = truth.get("homonyms") or []
    out["homonyms_kept_apart"] = all(not (used.get(a, set()) & used.get(b, set())) for a, b in homonyms)
    out["entities_predicted"] = len(emap.names)

    p_ids, t_ids = set(), set()
    for path, t in files.items():
        t_ids |= {(path, *_ident_key(i)) for i in t["identifiers"]}
        p_ids |= {(path, *_ident_key(i)) for i in pred.get(path, {}).get("identifiers") or []}
    out["identifier_f1"] = _prf(p_ids, t_ids)["f1"]

    p_dec, t_dec = set(), set()
    dec_misses = []
    for path, t in files.items():
        if t["decisions"] is None or (isinstance(t["identity"], dict) and "duplicate_of" in t["identity"]):
            continue
        theirs = {(path, d["kind"], _norm(d["before"]), _norm(d["after"])) for d in t["decisions"]}
        mine = {(path, d["kind"], _norm(d["before"]), _norm(d["after"]))
                for d in pred.get(path, {}).get("decisions") or []}
        t_dec |= theirs
        p_dec |= mine
        if mine != theirs:
            dec_misses.append(f"{path}: extra {sorted(x[1:] for x in mine - theirs)} "
                              f"missing {sorted(x[1:] for x in theirs - mine)}")
    decisions = _prf(p_dec, t_dec)
    out.update({"decision_recall": decisions["recall"], "decision_precision": decisions["precision"],
                "decision_f1": decisions["f1"], "decision_misses": dec_misses})
    out["targets_met"] = {k: out[k] >= v for k, v in TARGETS.items()}
    return out


def env_for(truth_path: Path) -> dict[str, str]:
    """The environment the estate is inserted with: ``pipeline.ontology_file`` = the truth.json."""
    return {"KI_PIPELINE__ONTOLOGY_FILE": str(truth_path.resolve())}


def print_scores(scores: dict[str, Any], *, misses: bool = False) -> None:
    """Human-readable summary (targets marked)."""
    for key in ("doc_type_accuracy", "doc_type_root_accuracy", "party_f1", "party_f1_no_roles", "entity_duplicates",
                "homonyms_kept_apart", "doc_date_accuracy", "language_accuracy", "identifier_f1", "decision_recall",
                "decision_precision"):
        value = scores[key]
        target = TARGETS.get(key)
        mark = "" if target is None else (" ok" if value >= target else f" BELOW {target}")
        if key == "entity_duplicates":
            mark = " ok" if value == 0 else " BELOW 0"
        print(f"  {key:<24} {float(value):.3f}{mark}")
    if misses:
        for key in ("doc_type_misses", "party_misses", "decision_misses"):
            for line in scores[key]:
                print(f"    {key[:-7]} miss: {line}")
        if scores["entity_duplicates_detail"]:
            print(f"    duplicates: {scores['entity_duplicates_detail']}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("estate", type=Path, help="folder holding estate/ and truth.json")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--check", action="store_true", help="exit 1 unless every target is met")
    ap.add_argument("--misses", action="store_true")
    ap.add_argument("--export", type=Path, help="score this export (JSON lines) instead of inserting the estate")
    args = ap.parse_args(argv)
    truth = json.loads((args.estate / "truth.json").read_text(encoding="utf-8"))
    if args.export:
        rows = [json.loads(line) for line in args.export.read_text(encoding="utf-8").splitlines() if line.strip()]
    else:
        from bench.quality import run_estate

        rows = run_estate(args.estate, workers=args.workers, extra_env=env_for(args.estate / "truth.json"))
    scores = score_metadata(truth, rows)
    if args.json:
        print(json.dumps(scores, indent=2, default=str))
    else:
        print(f"estate {args.estate} ({scores['files']} files, {scores['entities_predicted']} entities)")
        print_scores(scores, misses=args.misses)
    return 0 if not args.check or all(scores["targets_met"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())

