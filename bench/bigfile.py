"""One huge plain-text file through ``ki insert``: wall time per stage and peak RSS of the ki process tree.

Issue 14 item 7c/7e: every stage reads bounded windows of huge texts (``pipeline.text_window``), so a
120 MB text inserts in a few minutes with the peak RSS of ``ki insert`` ≤ 1.5 GB. This bench writes a
text of N MB of legal-looking German/English prose (:func:`legal_prose`, seeded, deterministic), runs
``ki insert`` on a folder holding only that file in a subprocess with a fresh ``KI_DATA_DIR`` (the
embedded PostgreSQL, default stages; ``--embedding-model`` to make vectors too), polls ``/proc`` every
0.2 s for the resident size of each process — the ki parent, its conversion workers, any other child,
and the embedded PostgreSQL (found by its data directory: pg_ctl daemonizes it) — and reports each
one's peak, the peak of ki's own processes together (the issue's target: ≤ 1.5 GB) and that plus
PostgreSQL's private memory, and the stage each peak fell in; then reads per-stage
wall times from ``processing_state`` (``started_at`` → ``completed_at`` of the last attempt), the window
each stage recorded (``ki export --json`` → ``text_windows``), and whether a word written only at the
end of the text is found by ``ki search``.

Run: ``.venv/bin/python bench/bigfile.py [--mb 5 20 120]`` (prints one block per size; the load
average is printed with every number because the machine is shared).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

VENV_BIN = Path(sys.executable).parent
TARGET_RSS_MB = 1536
END_WORD = "Schlussvermerkzeichen"

_DE = [
    "Die Klägerin beantragt, die Beklagte zu verurteilen, an sie EUR {amount} nebst Zinsen in Höhe von neun "
    "Prozentpunkten über dem Basiszinssatz seit dem {date} zu zahlen.",
    "Mit Schreiben vom {date} hat die {company} den Vertrag gemäß § {para} Abs. {n} BGB fristlos gekündigt.",
    "Zum Beweis wird auf die als Anlage K{n} vorgelegte Korrespondenz verwiesen; Zeugnis {person}, zu laden "
    "über die Klägerin.",
    "Das Landgericht {city} hat mit Beschluss vom {date} (Az. {n} O {num}/{yy}) den Streitwert auf EUR "
    "{amount} festgesetzt.",
    "Die Parteien verhandelten am {date} in den Geschäftsräumen der {company} über die Abnahme der Leistungen.",
    "Der Geschäftsführer {person} erklärte, die Mängel seien bereits mit Schreiben vom {date} gerügt worden.",
    "Gemäß Ziffer {n}.{m} des Rahmenvertrags trägt der Auftragnehmer die Gefahr bis zur Abnahme.",
    "Hilfsweise wird die Aufrechnung mit einer Gegenforderung in Höhe von EUR {amount} erklärt.",
]
_EN = [
    "Pursuant to clause {n}.{m} of the Share Purchase Agreement dated {date_en}, the Seller shall indemnify "
    "the Purchaser against all Losses.",
    "By letter of {date_en}, counsel for {company} gave notice of termination with immediate effect.",
    "The Tribunal directed that the parties exchange witness statements by {date_en}; see Exhibit C-{n}.",
    "{person} confirmed in the meeting of {date_en} that the escrow amount of EUR {amount} had been released.",
    "The Claimant reserves all rights, including the right to claim further damages under Schedule {n}.",
    "Any dispute arising out of or in connection with this agreement shall be finally settled under the "
    "Rules of Arbitration of the ICC by three arbitrators.",
]
_COMPANIES = ["Müller Bau GmbH", "Nordlicht Energie AG", "Albrecht & Söhne KG", "Hanseatic Shipping Ltd",
              "Bergmann Logistik GmbH", "Castell Capital Partners LLP", "Weber Maschinenbau SE"]
_PEOPLE = ["Dr. Anna Schulte", "Herr Jonas Brandt", "Frau Petra Lindner", "Mr Oliver Grant", "Ms Claire Hughes",
           "Prof. Dr. Martin Keller"]
_CITIES = ["München", "Hamburg", "Frankfurt am Main", "Köln", "Düsseldorf", "Berlin"]
_MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
           "November", "December"]


def _sentence(rng: random.Random) -> str:
    template = rng.choice(_DE if rng.random() < 0.65 else _EN)
    day, month, year = rng.randint(1, 28), rng.randint(1, 12), rng.randint(2015, 2025)
    return template.format(
        amount=f"{rng.randint(1, 999)}.{rng.randint(0, 999):03d},{rng.randint(0, 99):02d}",
        date=f"{day:02d}.{month:02d}.{year}", date_en=f"{day} {_MONTHS[month - 1]} {year}",
        company=rng.choice(_COMPANIES), person=rng.choice(_PEOPLE), city=rng.choice(_CITIES),
        para=rng.randint(100, 900), n=rng.randint(1, 40), m=rng.randint(1, 9), num=rng.randint(10, 999),
        yy=rng.randint(15, 25))


def legal_prose(size_bytes: int, *, seed: int = 14, end_word: str = END_WORD) -> bytes:
    """About ``size_bytes`` (UTF-8, ±1 paragraph) of numbered legal paragraphs in German and English, a
    court heading first and a closing line holding ``end_word`` (a word found nowhere else) last.
    Deterministic for a seed; ~1 s per 20 MB (a pool of paragraphs is drawn from, not regenerated)."""
    rng = random.Random(seed)
    head = ("Landgericht München I\nAz. 12 O 3456/24\n\nKlageschrift\n\nin dem Rechtsstreit\n\nMüller Bau GmbH, "
            "vertreten durch den Geschäftsführer Herrn Jonas Brandt, – Klägerin –\n\ngegen\n\nNordlicht Energie AG, "
            "vertreten durch den Vorstand, – Beklagte –\n\nwegen Werklohnforderung\n\nStreitwert: EUR 1.250.000,00\n\n")
    pool = [" ".join(_sentence(rng) for _ in range(rng.randint(3, 7))) for _ in range(4000)]
    parts: list[bytes] = [head.encode()]
    size = len(parts[0])
    n = 0
    while size < size_bytes:
        n += 1
        para = f"{n}. {rng.choice(pool)}\n\n".encode()
        parts.append(para)
        size += len(para)
    parts.append(f"München, den 3. April 2025\n\nDr. Anna Schulte\nRechtsanwältin\n\nVermerk: {end_word}\n".encode())
    return b"".join(parts)


# --------------------------------------------------------------------------- measuring


def _status_kb(pid: int, fields: tuple[str, ...] = ("VmRSS", "RssAnon")) -> dict[str, int]:
    """The named ``/proc/<pid>/status`` sizes (kB); {} when the process is gone."""
    out: dict[str, int] = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                key = line.split(":", 1)[0]
                if key in fields:
                    out[key] = int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return {}
    return out


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _processes(root_pid: int, pg_marker: str) -> dict[str, list[int]]:
    """The processes of one ``ki insert`` by role: ``parent`` (``root_pid``), ``convert`` (its conversion
    workers), ``other`` (any other descendant that is not PostgreSQL) and ``pg`` (the embedded PostgreSQL:
    every process whose command line names ``pg_marker``, its data directory — pg_ctl daemonizes it)."""
    children: dict[int, list[int]] = {}
    pg: list[int] = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read().rsplit(b")", 1)[1].split()
            children.setdefault(int(stat[1]), []).append(int(entry))
        except (OSError, IndexError, ValueError):
            continue
        if pg_marker in _cmdline(int(entry)):
            pg.append(int(entry))
    roles: dict[str, list[int]] = {"parent": [root_pid], "convert": [], "other": [], "pg": []}
    todo = list(children.get(root_pid, []))
    while todo:
        pid = todo.pop()
        todo.extend(children.get(pid, []))
        cmd = _cmdline(pid)
        role = "convert" if "ki.adapters.convert.isolation" in cmd else "pg" if "postgres" in cmd else "other"
        roles[role].append(pid)
    roles["pg"] = sorted(set(roles["pg"]) | set(pg))
    # a PostgreSQL backend's children: every pg process tree is found by the marker on the postmaster
    for pid in list(roles["pg"]):
        roles["pg"].extend(c for c in children.get(pid, []) if c not in roles["pg"])
    return roles


class TreeSampler(threading.Thread):
    """Samples the resident sizes of one ``ki insert`` every ``interval`` s (see :func:`_processes`).

    Peaks (kB): ``peak_kb[role]`` the highest summed VmRSS of a role (``parent``, ``convert``, ``other``,
    ``pg``; PostgreSQL's sum counts its shared buffers once per backend, so ``pg_anon`` — private memory
    only — is reported beside it), ``peak_kb["ki"]`` the highest sum of ki's own processes (parent +
    conversion workers + other) and ``peak_kb["tree"]`` of ki's processes plus PostgreSQL's private memory
    sampled at once; ``parent_anon`` the parent's RssAnon (its heap, not mapped files).
    """

    def __init__(self, pid: int, pg_marker: str, interval: float = 0.2):
        super().__init__(daemon=True)
        self.pid, self.pg_marker, self.interval = pid, pg_marker, interval
        self.peak_kb: dict[str, int] = {}
        self.peak_at: dict[str, float] = {}
        self.samples: list[tuple[float, int, int]] = []  # (time, parent kB, conversion workers kB)
        self.stopped = threading.Event()

    def sample(self) -> dict[str, int]:
        """One sample: the summed sizes (kB) by role."""
        roles = _processes(self.pid, self.pg_marker)
        sizes = {role: [_status_kb(p) for p in pids] for role, pids in roles.items()}
        got = {role: sum(s.get("VmRSS", 0) for s in stats) for role, stats in sizes.items()}
        got["pg_anon"] = sum(s.get("RssAnon", 0) for s in sizes["pg"])
        got["parent_anon"] = sum(s.get("RssAnon", 0) for s in sizes["parent"])
        got["ki"] = got["parent"] + got["convert"] + got["other"]
        got["tree"] = got["ki"] + got["pg_anon"]
        return got

    def run(self) -> None:
        while not self.stopped.is_set():
            now = time.time()
            got = self.sample()
            self.samples.append((now, got["parent"], got["convert"]))
            for key, kb in got.items():
                if kb > self.peak_kb.get(key, 0):
                    self.peak_kb[key], self.peak_at[key] = kb, now
            self.stopped.wait(self.interval)


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _ki(env: dict[str, str], *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([str(VENV_BIN / "ki"), *args], env=env, capture_output=True, text=True, timeout=timeout)


#: A row's last attempt: claimed_at (set by the claim) → updated_at (set by the completion).
STAGE_SQL = """SELECT stage, status, EXTRACT(EPOCH FROM (updated_at - claimed_at)) AS seconds,
       EXTRACT(EPOCH FROM claimed_at) AS began, EXTRACT(EPOCH FROM updated_at) AS ended
FROM processing_state ORDER BY claimed_at NULLS LAST, id"""


def _stage_seconds(env: dict[str, str]) -> list[tuple[str, str, float | None, float | None, float | None]]:
    """(stage, status, seconds, began, ended) of every row, in claim order (epoch seconds)."""
    import psycopg  # the bench runs in ki's venv

    from ki.store.db import DATABASE_NAME, embedded_server_uri

    uri = embedded_server_uri(Path(env["KI_DATA_DIR"]) / "pg")
    with psycopg.connect(uri.replace("@/postgres?", f"@/{DATABASE_NAME}?")) as conn:
        return [(r[0], r[1], *(float(x) if x is not None else None for x in r[2:]))
                for r in conn.execute(STAGE_SQL)]


def run_one(mb: float, workdir: Path, timeout: float) -> dict:
    """Insert one ``mb`` MB text in a fresh data dir; return the figures (see module doc)."""
    estate = workdir / f"estate-{mb:g}"
    estate.mkdir(parents=True)
    t0 = time.monotonic()
    data = legal_prose(int(mb * 1024 * 1024))
    (estate / "klageschrift.txt").write_bytes(data)
    gen_s = time.monotonic() - t0
    del data
    env = {**os.environ, "KI_DATA_DIR": str(workdir / f"data-{mb:g}")}
    env.pop("KI_DATABASE_URL", None)
    load_before = _load()
    t0 = time.monotonic()
    proc = subprocess.Popen([str(VENV_BIN / "ki"), "insert", str(estate)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    sampler = TreeSampler(proc.pid, str(Path(env["KI_DATA_DIR"]) / "pg"))
    sampler.start()
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        out += f"\n[bench] killed after {timeout:.0f} s"
    wall = time.monotonic() - t0
    sampler.stopped.set()
    sampler.join()
    figures: dict = {"mb": mb, "generate_s": round(gen_s, 1), "wall_s": round(wall, 1), "rc": proc.returncode,
                     "peak_rss_mb": round(sampler.peak_kb.get("tree", 0) / 1024),
                     "peaks_mb": {k: round(v / 1024) for k, v in sampler.peak_kb.items()},
                     "peak_at": dict(sampler.peak_at), "samples": sampler.samples, "load_before": load_before,
                     "load_after": _load(),
                     "tail": out.strip().splitlines()[-3:]}
    try:
        figures["stages"] = _stage_seconds(env)
    except Exception as exc:  # noqa: BLE001 - a bench reports what it could not read
        figures["stages"] = f"unreadable: {exc}"
    exported = _ki(env, "export", "--json")
    rows = [json.loads(line) for line in exported.stdout.splitlines() if line.strip().startswith("{")]
    figures["text_windows"] = rows[0].get("text_windows") if rows else None
    found = _ki(env, "search", END_WORD, "--json")
    figures["end_word_found"] = "klageschrift.txt" in found.stdout
    _ki(env, "db", "stop")
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mb", type=float, nargs="+", default=[5, 20, 120], help="text sizes in MB")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds before one insert is killed")
    parser.add_argument("--embedding-model", default=None,
                        help="retrieval.embedding_model for the run (default: ki's default, no vectors)")
    args = parser.parse_args()
    if args.embedding_model:
        os.environ["KI_RETRIEVAL__EMBEDDING_MODEL"] = args.embedding_model
    with tempfile.TemporaryDirectory(prefix="ki-bigfile-") as tmp:
        for mb in args.mb:
            f = run_one(mb, Path(tmp), args.timeout)
            print(f"\n== {mb:g} MB text (generated in {f['generate_s']} s) — load {f['load_before']} → "
                  f"{f['load_after']}")
            ki_mb = f["peaks_mb"].get("ki", 0)
            print(f"ki insert: {f['wall_s']} s, exit {f['rc']}, peak RSS of ki's processes {ki_mb} MB "
                  f"({'meets' if ki_mb <= TARGET_RSS_MB else 'MISSES'} the {TARGET_RSS_MB} MB target); "
                  f"with PostgreSQL's private memory {f['peak_rss_mb']} MB")
            p = f["peaks_mb"]
            print(f"  peaks (MB): parent {p.get('parent')} (heap {p.get('parent_anon')}), conversion workers "
                  f"{p.get('convert')}, other children {p.get('other')}, PostgreSQL {p.get('pg')} "
                  f"(private {p.get('pg_anon')})")
            if isinstance(f["stages"], str):
                print(f"  stages: {f['stages']}")
            else:
                for stage, status, seconds, *_ in f["stages"]:
                    print(f"  {stage:<20} {status:<12} {'' if seconds is None else f'{seconds:8.1f} s'}")
                print("  parent's peak per stage (MB): " + ", ".join(
                    f"{st} {max(kb for t, kb, _ in f['samples'] if began <= t <= ended) // 1024}"
                    for st, _, _, began, ended in f["stages"]
                    if began is not None and ended is not None
                    and any(began <= t <= ended for t, _, _ in f["samples"])))
                for role in ("parent", "convert", "ki"):
                    at = f["peak_at"].get(role)
                    during = [st for st, _, _, began, ended in f["stages"]
                              if at is not None and began is not None and ended is not None and began <= at <= ended]
                    where = ", ".join(during) or "no stage (start-up, scan or between stages)"
                    print(f"  {role} peaked during: {where}")
            print(f"  text windows: {json.dumps(f['text_windows'])}")
            print(f"  word from the end found by ki search: {f['end_word_found']}")
            if f["rc"] != 0:
                print("  output tail: " + " | ".join(f["tail"]))
            sys.stdout.flush()


if __name__ == "__main__":
    main()
