"""Folder watching: drop-to-searchable latency, and the watcher's idle CPU and memory on a large tree.

What runs
---------
* **Latency** (issue 19 item 3): a throw-away data directory with ki's embedded PostgreSQL, ki's
  default stages and rules policies, and the watcher as ``ki watch`` runs it (``start_watcher``:
  ``launch_sync`` of the settled paths, handing off to a background insertion run) on an empty folder.
  One at a time, a file is dropped into the folder (written beside it, then renamed in, as a copy tool
  finishes) — DOCX and PDF from the shared corpus made unique (a DOCX gets one extra zip entry, a PDF a
  trailing comment: same text, new bytes, so nothing is served from a cache of identical content), and
  generated EML. The clock runs from the rename to the moment the document's Index row is ``done``
  (it is then returned by ``ki search``). ``--backfill N`` first drops N generated documents into a
  second watched folder (a bulk arrival: lane ``backfill``) and, while they are inserted, drops a file
  every ``--drop-every`` seconds without waiting for the one before; each drop is timed on its own, with
  the number of backfill documents still owed when it was dropped, and the backfill's own duration.
* **Idle watcher cost**: a tree of ``--tree`` files (100 per folder) watched by the observer alone
  (``watchfiles``, native inotify and polling), idle for ``--idle`` seconds; CPU seconds of this process
  per wall second (the observer's threads are the only ones running) and the resident memory it added.

Targets (issue 19): idle p95 <= settle + 3 s (settle 5 s by default: 8 s); idle CPU <= 2 % of one core
with native events. Numbers depend on the machine's load: the load average is printed with them.

Run: ``.venv/bin/python bench/watch.py [--drops 10] [--settle 5] [--tree 100000] [--idle 30] [--backfill 0]``
"""

from __future__ import annotations

import argparse
import email.message
import os
import resource
import shutil
import sys
import threading
import time
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import embedded_server, percentile, shared_dir, temp_workdir  # noqa: E402


def _unique_docx(src: Path, dst: Path, n: int) -> None:
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as zout:
        for item in zin.infolist():
            zout.writestr(item, zin.read(item.filename))
        zout.writestr(f"customXml/ki-bench-{n}.xml", f"<bench n='{n}' t='{time.time_ns()}'/>")


def _unique_pdf(src: Path, dst: Path, n: int) -> None:
    dst.write_bytes(src.read_bytes() + f"\n% ki-bench {n} {time.time_ns()}\n".encode())


def _eml(dst: Path, n: int) -> None:
    msg = email.message.EmailMessage()
    msg["From"], msg["To"] = "kanzlei@example.de", "mandant@example.de"
    msg["Subject"] = f"Vertragsentwurf Nummer {n}"
    msg["Message-ID"] = f"<bench{n}.{time.time_ns()}@example.de>"
    msg.set_content(f"Sehr geehrte Damen und Herren,\nanbei der Entwurf {n} zur Lieferung und Gewährleistung.\n")
    dst.write_bytes(bytes(msg))


def _drop(kind: str, corpus: Path, folder: Path, staging: Path, n: int) -> str:
    """Write one unique file of ``kind`` in ``staging`` and rename it into ``folder``; returns its name."""
    name = f"drop{n:03d}.{kind}"
    tmp = staging / name
    if kind == "docx":
        _unique_docx(corpus / "docx" / "docxfix_legal-list.docx", tmp, n)
    elif kind == "pdf":
        pdfs = sorted((corpus / "pdf").glob("*.pdf"), key=lambda p: p.stat().st_size)
        _unique_pdf(pdfs[len(pdfs) // 3], tmp, n)
    else:
        _eml(tmp, n)
    os.rename(tmp, folder / name)
    return name


#: An Index row that is finished: done, quarantined, or skipped for a reason other than waiting (a seeded
#: row waits as ``skipped/waiting_for_previous_stage``: that is not searchable yet).
_FINISHED = ("(ps.status IN ('done', 'quarantined') OR (ps.status = 'skipped' "
             "AND ps.reason IS DISTINCT FROM 'waiting_for_previous_stage'))")


def _index_done(ctx, name: str) -> bool:
    from sqlalchemy import text

    with ctx.db.engine.connect() as conn:
        return bool(conn.execute(text(
            "SELECT 1 FROM processing_state ps JOIN source_object so ON so.id = ps.source_object_id "
            f"WHERE so.external_id = :e AND ps.stage = 'index' AND {_FINISHED}"), {"e": name}).first())


def latency(args, workdir: Path) -> None:
    from ki.app.launcher import RunLauncher
    from ki.cli.watch import start_watcher
    from ki.config.loader import ProcessSettings, set_config_value
    from ki.domain.context import PipelineContext

    data_dir = workdir / "data"
    data_dir.mkdir()
    set_config_value(data_dir, "pipeline.watch.settle_seconds", args.settle)
    os.environ["KI_DATA_DIR"] = str(data_dir)
    os.environ.pop("KI_DATABASE_URL", None)
    corpus = shared_dir() / "corpus" / "real"
    folder, staging = workdir / "share", workdir / "staging"
    folder.mkdir()
    staging.mkdir()
    with embedded_server(data_dir / "pg"):
        ctx = PipelineContext.open(ProcessSettings(data_dir=data_dir))
        launcher = RunLauncher(ctx)
        roots = [folder]
        if args.backfill:
            backfill = workdir / "backfill"
            backfill.mkdir()
            roots.append(backfill)
        watcher, stop, thread = start_watcher(ctx, launcher, roots)
        try:
            time.sleep(1.0)  # the start rescan of the empty folders
            results: dict[str, list[float]] = {"docx": [], "pdf": [], "eml": []}
            if args.backfill:
                bulk = workdir / "bulk"  # written beside the share, then its folders moved in (a copy finishing)
                for i in range(args.backfill):
                    sub = bulk / f"m{i % 40}"
                    sub.mkdir(parents=True, exist_ok=True)
                    _eml(sub / f"b{i:05d}.eml", 100_000 + i)
                backfill_started = time.monotonic()
                for sub in sorted(bulk.iterdir()):
                    os.rename(sub, backfill / sub.name)
                print(f"backfill: {args.backfill} e-mails moved in (40 folders); measuring while they are inserted")
                time.sleep(args.settle + 2)
                _during_backfill(ctx, args, corpus, folder, staging, results, backfill_started)
            n = 0
            for _ in range(args.drops if not args.backfill else 0):
                for kind in results:
                    n += 1
                    t0 = time.monotonic()
                    name = _drop(kind, corpus, folder, staging, n)
                    while not _index_done(ctx, name):
                        if time.monotonic() - t0 > 120:
                            raise SystemExit(f"{name} not searchable after 120 s")
                        time.sleep(0.05)
                    results[kind].append(time.monotonic() - t0)
            load = os.getloadavg()[0]
            mode = "during backfill" if args.backfill else "idle"
            target = args.settle + 3
            every = [v for vs in results.values() for v in vs]
            for kind, values in results.items():
                print(f"drop-to-searchable {kind:4} ({mode}, settle {args.settle:g} s, n={len(values)}): "
                      f"p50 {percentile(values, 50):.2f} s, p95 {percentile(values, 95):.2f} s")
            p95 = percentile(every, 95)
            print(f"all kinds: p50 {percentile(every, 50):.2f} s, p95 {p95:.2f} s (target p95 <= {target:g} s: "
                  f"{'met' if p95 <= target else 'NOT met'}); load average {load:.2f}")
        finally:
            stop.set()
            thread.join(30)
            launcher.wait_idle(120)
            ctx.db.dispose()


def _backfill_left(ctx, total: int) -> int:
    """Backfill documents (``m*/b*.eml``, ``total`` written) whose Index row is not finished yet (a file
    not scanned yet counts too)."""
    from sqlalchemy import text

    with ctx.db.engine.connect() as conn:
        return total - int(conn.execute(text(
            "SELECT count(*) FROM source_object so JOIN processing_state ps ON ps.source_object_id = so.id "
            "AND ps.stage = 'index' WHERE so.external_id LIKE 'm%/b%.eml' AND so.parent_id IS NULL "
            f"AND {_FINISHED}")).scalar_one())


def _during_backfill(ctx, args, corpus: Path, folder: Path, staging: Path, results: dict[str, list[float]],
                     started: float) -> None:
    """Drop one file every ``--drop-every`` seconds while the backfill is inserted (none waits for the one
    before), until ``--drops`` of each kind are dropped or the backfill is done; then wait for every drop
    (up to 30 min: without lanes a drop waits behind the backfill) and the backfill's end."""
    pending: dict[str, tuple[str, float, int]] = {}
    n = 0
    while n < args.drops * len(results) and _backfill_left(ctx, args.backfill) > 0:
        kind = list(results)[n % len(results)]
        n += 1
        left = _backfill_left(ctx, args.backfill)
        pending[_drop(kind, corpus, folder, staging, n)] = (kind, time.monotonic(), left)
        time.sleep(args.drop_every)
    backfill_end = None
    while pending or backfill_end is None:
        for name, (kind, t0, left) in list(pending.items()):
            if _index_done(ctx, name):
                results[kind].append(time.monotonic() - t0)
                print(f"  {name}: searchable after {time.monotonic() - t0:.2f} s "
                      f"(dropped with {left} backfill documents still owed)")
                del pending[name]
            elif time.monotonic() - t0 > 1800:
                raise SystemExit(f"{name} not searchable after 1800 s")
        if backfill_end is None and _backfill_left(ctx, args.backfill) == 0:
            backfill_end = time.monotonic()
        time.sleep(0.05)
    print(f"backfill of {args.backfill} documents inserted in {backfill_end - started:.1f} s "
          f"(from its folders moved in); load average {os.getloadavg()[0]:.2f}")


def _make_tree(root: Path, files: int) -> None:
    for i in range(files):
        folder = root / f"d{i // 10000}" / f"e{(i // 100) % 100}"
        if i % 100 == 0:
            folder.mkdir(parents=True, exist_ok=True)
        (folder / f"f{i}.txt").write_bytes(b"x")


def idle_cost(args, workdir: Path) -> None:
    import psutil
    import watchfiles

    tree = workdir / "tree"
    t0 = time.monotonic()
    _make_tree(tree, args.tree)
    print(f"tree: {args.tree} files in {args.tree // 100} folders, made in {time.monotonic() - t0:.1f} s")
    proc = psutil.Process()
    for mode in ("native", "poll"):
        stop = threading.Event()
        ready = threading.Event()
        rss0 = proc.memory_info().rss

        def observe(mode: str, stop: threading.Event, ready: threading.Event) -> None:
            for _ in watchfiles.watch(tree, watch_filter=None, debounce=100, stop_event=stop, rust_timeout=1000,
                                      yield_on_timeout=True, force_polling=mode == "poll", poll_delay_ms=2000,
                                      raise_interrupt=False):
                ready.set()

        t = threading.Thread(target=observe, args=(mode, stop, ready), daemon=True)
        started = time.monotonic()
        t.start()
        ready.wait(600)
        setup = time.monotonic() - started
        time.sleep(2.0)  # past the first poll round
        c0, w0 = resource.getrusage(resource.RUSAGE_SELF), time.monotonic()
        time.sleep(args.idle)
        c1, w1 = resource.getrusage(resource.RUSAGE_SELF), time.monotonic()
        rss = proc.memory_info().rss
        stop.set()
        t.join(30)
        cpu = (c1.ru_utime + c1.ru_stime - c0.ru_utime - c0.ru_stime) / (w1 - w0) * 100
        print(f"idle watcher, {mode:6}: {cpu:.2f} % of one core over {args.idle:g} s, +{(rss - rss0) / 2**20:.1f} MiB "
              f"resident, {setup:.1f} s to set up (poll interval 2 s); load average {os.getloadavg()[0]:.2f}")
    shutil.rmtree(tree, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--drops", type=int, default=10, help="files dropped per kind (DOCX, PDF, EML)")
    parser.add_argument("--settle", type=float, default=5.0, help="pipeline.watch.settle_seconds")
    parser.add_argument("--backfill", type=int, default=0, help="documents inserted meanwhile (0: idle)")
    parser.add_argument("--drop-every", type=float, default=5.0,
                        help="with --backfill: seconds between drops (each is timed on its own)")
    parser.add_argument("--tree", type=int, default=100_000, help="files of the idle-cost tree (0: skip)")
    parser.add_argument("--idle", type=float, default=30.0, help="seconds the idle cost is measured")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at start")
    with temp_workdir(args.keep) as workdir:
        if args.drops:
            latency(args, workdir)
        if args.tree:
            idle_cost(args, workdir)


if __name__ == "__main__":
    main()
