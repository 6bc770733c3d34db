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
  second watched folder and measures while they are inserted.
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


def _index_done(ctx, name: str) -> bool:
    from sqlalchemy import text

    with ctx.db.engine.connect() as conn:
        return bool(conn.execute(text(
            "SELECT 1 FROM processing_state ps JOIN source_object so ON so.id = ps.source_object_id "
            "WHERE so.external_id = :e AND ps.stage = 'index' AND ps.status IN ('done', 'skipped', 'quarantined')"),
            {"e": name}).first())


def latency(args, workdir: Path) -> None:
    from ki.api.launcher import RunLauncher
    from ki.cli.watch import start_watcher
    from ki.config.loader import ProcessSettings, set_config_value
    from ki.context import PipelineContext

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
            if args.backfill:
                for i in range(args.backfill):
                    sub = backfill / f"m{i % 40}"
                    sub.mkdir(exist_ok=True)
                    _eml(sub / f"b{i:05d}.eml", 100_000 + i)
                print(f"backfill: {args.backfill} e-mails dropped; measuring while they are inserted")
                time.sleep(args.settle + 2)
            results: dict[str, list[float]] = {"docx": [], "pdf": [], "eml": []}
            n = 0
            for _ in range(args.drops):
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
