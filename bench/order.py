"""Order independence: one estate processed in several claim orders, with ``kill -9`` at random points.

Issue 14 item 1: every derived fact is a function of the estate, not of the order documents arrive
in. This bench inserts the same estate into fresh databases, each time with another
``pipeline.claim_order_seed`` (the testing knob that claims eligible rows in a pseudo-random order
fixed by the seed) and, for the runs with kills, a real ``kill -9`` of the ``ki insert`` process
group once a random share of the stage rows is finished; the next ``ki insert`` resumes from the
rows. Each run's ``ki export --json`` and the derived rows the export does not show (matter titles,
entity names with their alias ledger, identifiers and matter roles, document titles, thread
subjects) are compared with the first run's, ids aside (a document, thread or entity is named by
its members).

Usage::

    KI_SHARED_DIR=../shared .venv/bin/python bench/order.py [ESTATE] [--orders 5] [--kills 3] [--seed 1]

``ESTATE`` holds ``estate/`` and ``truth.json`` (default: ``make_estate.py --seed 7 --matters 4``
generated into a temporary folder from ``$KI_SHARED_DIR/tools``). Prints, per run, its seed, kills,
seconds and the differences from the first run; exits 1 when any run differs.

The same functions drive ``tests/acceptance/test_order_export_identical.py`` (three orders, one kill
schedule, on the test server).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, text
from sqlalchemy.pool import NullPool

#: Seconds a killed process's claims stay silent before the next run recovers them.
CLAIM_TIMEOUT_SECONDS = 3
#: Kills land once this share range of the expected stage rows is finished.
KILL_RANGE = (0.1, 0.9)
STAGES = 7


@dataclass
class RunReport:
    """One insertion of the estate: its seed, the kill points (finished rows when killed), seconds."""

    seed: int
    kills: list[int] = field(default_factory=list)
    seconds: float = 0.0
    exports: list[dict[str, Any]] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)


def ki_executable() -> str:
    """The ``ki`` console script next to this interpreter."""
    return str(Path(sys.executable).with_name("ki"))


def estate_env(estate: Path, *, data_dir: Path, database_url: str, seed: int, workers: int = 2) -> dict[str, str]:
    """The environment of one run: its own data directory and database, the firm and ontology of the
    estate's truth.json, the claim-order seed, a short claim timeout and rules policies (no gateway)."""
    truth = json.loads((estate / "truth.json").read_text(encoding="utf-8"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("KI_") or k == "KI_SHARED_DIR"}
    env.update({
        "KI_DATA_DIR": str(data_dir), "KI_DATABASE_URL": database_url, "KI_WORKERS": str(workers),
        "KI_INSERT_WAIT_RETRY_SECONDS": "120", "KI_PIPELINE__CLAIM_ORDER_SEED": str(seed),
        "KI_PIPELINE__CLAIM_TIMEOUT_SECONDS": str(CLAIM_TIMEOUT_SECONDS),
        "KI_FIRM__NAME": truth["firm"]["name"], "KI_FIRM__ALIASES": json.dumps(truth["firm"]["aliases"]),
        "KI_PIPELINE__ONTOLOGY_FILE": str((estate / "truth.json").resolve()),
    })
    return env


def _finished_rows(engine) -> int:
    with engine.connect() as conn:
        try:
            return int(conn.execute(text(
                "SELECT count(*) FROM processing_state WHERE status IN ('done', 'quarantined') OR "
                "(status = 'skipped' AND reason IS DISTINCT FROM 'waiting_for_previous_stage')")).scalar_one())
        except Exception:  # noqa: BLE001 - not migrated yet
            return 0


def _ki(args: list[str], env: dict[str, str], **kw) -> subprocess.Popen:
    return subprocess.Popen([ki_executable(), *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True, **kw)


def insert_with_kills(estate: Path, env: dict[str, str], *, kills: int, rng: random.Random,
                      timeout_seconds: float = 1800) -> list[int]:
    """``ki insert`` the estate, ``kill -9`` its process group ``kills`` times at random points (a random
    share of the expected stage rows finished), then insert again until the run completes.

    Returns: the finished-row counts at each kill. Raises RuntimeError when the last run fails.
    """
    files = sum(1 for p in (estate / "estate").rglob("*") if p.is_file())
    expected = files * STAGES
    points = sorted(int(expected * rng.uniform(*KILL_RANGE)) for _ in range(kills))
    engine = create_engine(env["KI_DATABASE_URL"], poolclass=NullPool)
    killed_at: list[int] = []
    deadline = time.monotonic() + timeout_seconds
    try:
        for point in points:
            proc = _ki(["insert", str(estate / "estate")], env)
            floor = (killed_at[-1] if killed_at else 0) + 10  # every kill lands after some new progress
            while proc.poll() is None and _finished_rows(engine) < max(point, floor) and time.monotonic() < deadline:
                time.sleep(0.05)
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                killed_at.append(_finished_rows(engine))
            proc.communicate()
        proc = _ki(["insert", str(estate / "estate")], env)
        out, _ = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
        if proc.returncode != 0:
            raise RuntimeError(f"ki insert failed ({proc.returncode}):\n{out}")
    finally:
        engine.dispose()
    return killed_at


def export(env: dict[str, str]) -> list[dict[str, Any]]:
    """``ki export --json`` rows."""
    proc = subprocess.run([ki_executable(), "export", "--json"], env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"ki export failed ({proc.returncode}):\n{proc.stderr}")
    return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]


def _label(groups: dict[Any, list[str]]) -> dict[Any, str]:
    """id → the smallest member name (a stable name for a group whatever its id)."""
    return {gid: min(members) for gid, members in groups.items()}


def normalise(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Export rows keyed by path with every id replaced by a name made of the group's members."""
    docs: dict[Any, list[str]] = defaultdict(list)
    threads: dict[Any, list[str]] = defaultdict(list)
    entities: dict[Any, list[str]] = defaultdict(list)
    for r in rows:
        if r.get("document_id") is not None:
            docs[r["document_id"]].append(r["path"])
        if r.get("thread_id") is not None:
            threads[r["thread_id"]].append(r["path"])
        for p in r.get("parties") or []:
            entities[p["entity_id"]].append(f"{r['path']}#{p['name']}")
    doc_l, thread_l, ent_l = _label(docs), _label(threads), _label(entities)
    out = {}
    for r in rows:
        row = {k: v for k, v in r.items() if k != "object_id"}
        row["document_id"] = doc_l.get(r.get("document_id"))
        row["thread_id"] = thread_l.get(r.get("thread_id"))
        row["parties"] = [{**p, "entity_id": ent_l[p["entity_id"]]} for p in r.get("parties") or []]
        out[r["path"]] = row
    return out


def derived_facts(database_url: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The derived rows the export does not show, ids replaced by member names (see :func:`normalise`)."""
    by_object = {r["object_id"]: r["path"] for r in rows}
    engine = create_engine(database_url, poolclass=NullPool)
    try:
        with engine.connect() as conn:
            members: dict[int, list[str]] = defaultdict(list)
            for r in conn.execute(text("SELECT entity_id, source_object_id, name FROM document_party")):
                members[r.entity_id].append(f"{by_object.get(r.source_object_id)}#{r.name}")
            ent = {e: min(m) for e, m in members.items()}
            aliases: dict[int, list[str]] = defaultdict(list)
            for r in conn.execute(text("SELECT entity_id, alias FROM entity_alias")):
                aliases[r.entity_id].append(r.alias)
            idents: dict[int, list[str]] = defaultdict(list)
            for r in conn.execute(text("SELECT entity_id, type, value_key, issuer FROM entity_identifier")):
                idents[r.entity_id].append(f"{r.type}:{r.value_key}@{r.issuer or ''}")
            entities = {ent.get(r.id, f"unused:{r.identity_key}"): {
                "name": r.name, "kind": r.kind, "aliases": sorted(aliases[r.id]), "identifiers": sorted(idents[r.id])}
                for r in conn.execute(text("SELECT id, name, kind, identity_key FROM entity"))}
            matters = {r.reference: {"title": r.title, "placeholder": r.placeholder, "folder": r.folder,
                                     "practice_area": r.practice_area, "kind": r.kind}
                       for r in conn.execute(text("SELECT * FROM matter"))}
            ref_of = {f"matter:{r.id}": r.reference for r in conn.execute(text("SELECT id, reference FROM matter"))}
            roles = sorted(f"{ref_of.get(r.matter_key, r.matter_key)}|{ent.get(r.entity_id)}|{r.role}|{r.basis}"
                           for r in conn.execute(text("SELECT matter_key, entity_id, role, basis FROM matter_party")))
            doc_members: dict[int, list[str]] = defaultdict(list)
            for r in conn.execute(text("SELECT document_id, source_object_id FROM document_version")):
                doc_members[r.document_id].append(by_object.get(r.source_object_id, "?"))
            matter_ref = {r.id: r.reference for r in conn.execute(text("SELECT id, reference FROM matter"))}
            documents = {min(doc_members[r.id]): {"title": r.title, "matter": matter_ref.get(r.matter_id)}
                         for r in conn.execute(text("SELECT id, title, matter_id FROM document"))
                         if doc_members.get(r.id)}
            th_members: dict[int, list[str]] = defaultdict(list)
            for r in conn.execute(text("SELECT thread_id, source_object_id FROM communication_thread_member")):
                th_members[r.thread_id].append(by_object.get(r.source_object_id, "?"))
            threads = {min(th_members[r.id]): {"subject": r.subject, "matter": matter_ref.get(r.matter_id)}
                       for r in conn.execute(text("SELECT id, subject, matter_id FROM communication_thread"))
                       if th_members.get(r.id)}
            intents = conn.execute(text("SELECT count(*) FROM relation_intent")).scalar_one()
    finally:
        engine.dispose()
    return {"entities": entities, "matters": matters, "matter_roles": roles, "documents": documents,
            "threads": threads, "parked_intents": intents}


def differences(a: dict[str, Any], b: dict[str, Any], *, prefix: str = "", limit: int = 40) -> list[str]:
    """Human-readable differences between two nested dicts (at most ``limit``)."""
    out: list[str] = []

    def walk(x: Any, y: Any, path: str) -> None:
        if len(out) >= limit or x == y:
            return
        if isinstance(x, dict) and isinstance(y, dict):
            for k in sorted(set(x) | set(y), key=str):
                walk(x.get(k, "<absent>"), y.get(k, "<absent>"), f"{path}/{k}")
            return
        if isinstance(x, list) and isinstance(y, list) and len(x) == len(y) and x and isinstance(x[0], dict):
            for i, (xi, yi) in enumerate(zip(x, y, strict=True)):
                walk(xi, yi, f"{path}[{i}]")
            return
        out.append(f"{path}: {json.dumps(x, default=str, ensure_ascii=False)[:300]} != "
                   f"{json.dumps(y, default=str, ensure_ascii=False)[:300]}")

    walk(a, b, prefix)
    return out


def one_run(estate: Path, server_uri: str, *, seed: int, kills: int, rng: random.Random, workdir: Path,
            workers: int = 2) -> RunReport:
    """Insert the estate into a fresh database on ``server_uri`` (a libpq URI) and collect the results."""
    from ki.store.db import sqlalchemy_url

    name = f"ki_order_{uuid.uuid4().hex[:10]}"
    admin = create_engine(sqlalchemy_url(server_uri, "postgres"), poolclass=NullPool, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    url = sqlalchemy_url(server_uri, name)
    data = workdir / name
    data.mkdir(parents=True)
    env = estate_env(estate, data_dir=data, database_url=url, seed=seed, workers=workers)
    report = RunReport(seed=seed)
    started = time.monotonic()
    try:
        report.kills = insert_with_kills(estate, env, kills=kills, rng=rng)
        report.seconds = time.monotonic() - started
        rows = export(env)
        report.exports = rows
        report.facts = derived_facts(url, rows)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()
    return report


def compare(first: RunReport, other: RunReport) -> list[str]:
    """Differences of ``other`` from ``first`` (export rows, then derived facts)."""
    return differences(normalise(first.exports), normalise(other.exports), prefix="export") + \
        differences(first.facts, other.facts, prefix="facts")


def small_estate(out: Path, *, seed: int = 7, matters: int = 4, shared: Path | None = None) -> Path:
    """Generate a ``make_estate.py`` estate from ``<shared>/tools`` (default ``$KI_SHARED_DIR``) into ``out``."""
    shared = shared or (Path(os.environ["KI_SHARED_DIR"]) if os.environ.get("KI_SHARED_DIR") else None)
    if not shared:
        raise SystemExit("set KI_SHARED_DIR (the shared folder holding tools/make_estate.py) or give an ESTATE")
    subprocess.run([sys.executable, str(Path(shared) / "tools" / "make_estate.py"), "--seed", str(seed),
                    "--matters", str(matters), "--out", str(out), "--quiet"], check=True)
    return out


def main(argv: list[str] | None = None) -> int:
    """Command line (see module doc)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from bench._common import embedded_server, temp_workdir

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("estate", type=Path, nargs="?", help="folder holding estate/ and truth.json")
    ap.add_argument("--orders", type=int, default=5, help="runs, each with its own claim-order seed")
    ap.add_argument("--kills", type=int, default=3, help="kill -9 points in every run but the first")
    ap.add_argument("--seed", type=int, default=1, help="seed of the seeds and kill points")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--dump", type=Path, help="write each run's normalised export and facts here")
    args = ap.parse_args(argv)
    rng = random.Random(args.seed)
    with temp_workdir(prefix="ki-order-") as work, embedded_server(work / "pg") as uri:
        estate = args.estate or small_estate(Path(tempfile.mkdtemp(dir=work)) / "estate")
        print(f"estate {estate}; load average {os.getloadavg()[0]:.2f}")
        reports: list[RunReport] = []
        for i in range(args.orders):
            seed = rng.randrange(1, 1_000_000)
            report = one_run(estate, uri, seed=seed, kills=0 if i == 0 else args.kills, rng=rng, workdir=work,
                             workers=args.workers)
            reports.append(report)
            diff = compare(reports[0], report) if i else []
            print(f"run {i + 1}: seed {seed}, kills at {report.kills} finished rows, {report.seconds:.1f} s, "
                  f"{'identical' if not diff else f'{len(diff)} differences'}")
            for line in diff:
                print(f"    {line}")
            if args.dump:
                args.dump.mkdir(parents=True, exist_ok=True)
                (args.dump / f"run{i + 1}.json").write_text(json.dumps(
                    {"seed": seed, "kills": report.kills, "export": normalise(report.exports), "facts": report.facts},
                    indent=1, ensure_ascii=False, default=str), encoding="utf-8")
        identical = all(not compare(reports[0], r) for r in reports[1:])
        print(f"{len(reports)} orders x {args.kills} kills: {'identical' if identical else 'DIFFERENT'}; "
              f"load average {os.getloadavg()[0]:.2f}")
    return 0 if identical else 1


if __name__ == "__main__":
    sys.exit(main())
