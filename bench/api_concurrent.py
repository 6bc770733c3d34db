"""The API under 32 concurrent clients during an insert, and the first search after a restart.

What runs
---------
* A throw-away data directory; ``ki insert`` of the repository's sample estate (``samples/estate``, 36 files:
  what search finds), then a real ``ki serve`` (its own process) and a token with ``read:pipeline`` and
  ``search``.
* A second ``ki insert`` of ``--copies`` renamed copies of the estate (new files: real work for every stage)
  runs in its own process while ``--clients`` threads, each with its own HTTP connection, request
  ``/api/status``, ``/api/runs`` and ``/v1/search`` in turn for ``--seconds``; latency measured on the client
  (authentication, the query, JSON and the network stack included). The load average is printed with them.
* ``--generator wrk`` drives the same number of connections with ``wrk`` (C, one process per path, the connections
  split between them, e.g. 11/11/10 of 32; its own latency percentiles, the same queries and header through a Lua
  script), so that the clients' own CPU does not compete with the server for the 2 cores: the httpx clients are
  32 threads of this Python process. Without ``wrk`` on the PATH (``apt-get install wrk``) the bench says so and
  falls back to the httpx clients. The two are different measurements: the httpx loop sends the three paths in
  turn on each connection, wrk a fixed share of connections per path.
* Then ``--restarts`` times: ``ki serve`` stopped and started again, and the first ``/v1/search`` after
  ``/healthz`` answers is timed (the search path's warm-up at start is what this measures).

Targets (safe-by-default measure): p95 ≤ 100 ms for ``/api/status`` and ``/api/runs``, ≤ 250 ms for
``/v1/search`` on a quiet machine; the first search after a restart ≤ 1 s.

Run: ``.venv/bin/python bench/api_concurrent.py [--clients 32] [--seconds 60] [--copies 4] [--restarts 3]
[--generator httpx|wrk]``
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path
from urllib.parse import quote

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import free_port, percentile, temp_workdir  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
QUERIES = ("Übergabeprotokoll Zählerstand", "Mietvertrag Kündigung", "Vergleich", "Haftung")
PATHS = ("/api/status", "/api/runs", "/v1/search")
TARGETS = {"/api/status": 100, "/api/runs": 100, "/v1/search": 250}


def _ki(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ki.cli", *args], env=env, check=True, stdout=subprocess.DEVNULL)


class Server:
    """A ``ki serve`` process on a free port; :meth:`start` returns once ``/healthz`` answers."""

    def __init__(self, env: dict[str, str], port: int) -> None:
        self.env, self.port, self.proc = env, port, None
        self.base = f"http://127.0.0.1:{port}"

    def start(self) -> None:
        import httpx

        self.proc = subprocess.Popen([sys.executable, "-m", "ki.cli", "serve", "--port", str(self.port),
                                      "--log-level", "warning"], env=self.env)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if httpx.get(self.base + "/healthz", timeout=2).status_code in (200, 503):
                    return
            except httpx.HTTPError:
                pass
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        raise SystemExit("ki serve did not start")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(30)


def _client_loop(base: str, headers: dict[str, str], stop: threading.Event, i: int,
                 out: dict[str, list[float]], errors: list[str], lock: threading.Lock) -> None:
    import httpx

    n = i
    with httpx.Client(base_url=base, timeout=60, headers=headers) as client:
        while not stop.is_set():
            path = PATHS[n % len(PATHS)]
            params = {"q": QUERIES[n % len(QUERIES)]} if path == "/v1/search" else None
            n += 1
            t0 = time.perf_counter()
            try:
                r = client.get(path, params=params)
                ms = (time.perf_counter() - t0) * 1000
                if r.status_code != 200:
                    with lock:
                        errors.append(f"{path} {r.status_code}")
                    continue
            except httpx.HTTPError as exc:
                with lock:
                    errors.append(f"{path} {type(exc).__name__}")
                continue
            with lock:
                out[path].append(ms)


def _httpx_phase(base: str, headers: dict[str, str], clients: int, seconds: float
                 ) -> tuple[dict[str, tuple], list[str], float]:
    """``clients`` threads of :func:`_client_loop` for ``seconds``: (per path (requests, p50, p95, max ms), the
    errors, the CPU seconds this process spent meanwhile)."""
    out: dict[str, list[float]] = defaultdict(list)
    errors: list[str] = []
    lock, stop = threading.Lock(), threading.Event()
    threads = [threading.Thread(target=_client_loop, args=(base, headers, stop, i, out, errors, lock))
               for i in range(clients)]
    cpu0 = sum(os.times()[:2])
    for t in threads:
        t.start()
    stop.wait(seconds)
    stop.set()
    for t in threads:
        t.join(120)
    cpu = sum(os.times()[:2]) - cpu0
    rows = {}
    for path in PATHS:
        ms = out[path] or [float("nan")]
        rows[path] = (len(out[path]), percentile(ms, 50), percentile(ms, 95), max(ms))
    return rows, errors, cpu


def _wrk_phase(base: str, headers: dict[str, str], clients: int, seconds: float, work: Path
               ) -> tuple[dict[str, tuple], list[str], float]:
    """:func:`_run_wrk`: (per path (requests, p50, p95, max ms), the errors, the wrk processes' CPU seconds)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    got = _run_wrk(base, headers, clients, seconds, work)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    errors = [f"{path} non-2xx or socket error" for path, row in got.items() for _ in range(row[1])]
    return {path: (row[0], row[2], row[3], row[4]) for path, row in got.items()}, errors, cpu


WRK_SCRIPT = """
local queries = {%s}
local n = 0
request = function()
  local path = "%s"
  if path == "/v1/search" then
    n = n + 1
    path = path .. "?q=" .. queries[(n %% #queries) + 1]
  end
  return wrk.format("GET", path)
end
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("KI-WRK %%d %%d %%.3f %%.3f %%.3f\\n", summary.requests,
    e.connect + e.read + e.write + e.status + e.timeout,
    latency:percentile(50) / 1000, latency:percentile(95) / 1000, latency.max / 1000))
end
"""


def _split(clients: int) -> list[int]:
    """Connections per path: ``clients`` split as evenly as possible, the first paths one more (32: 11/11/10)."""
    return [clients // len(PATHS) + (1 if i < clients % len(PATHS) else 0) for i in range(len(PATHS))]


def _run_wrk(base: str, headers: dict[str, str], clients: int, seconds: float, work: Path) -> dict[str, tuple]:
    """One ``wrk`` per path at once (1 thread each, the connections of :func:`_split`); returns per path
    (requests, errors, p50 ms, p95 ms, max ms) from wrk's own latency histogram."""
    queries = ", ".join(f'"{quote(q)}"' for q in QUERIES)
    procs = []
    for path, conns in zip(PATHS, _split(clients), strict=True):
        script = work / f"wrk-{path.strip('/').replace('/', '-')}.lua"
        script.write_text(WRK_SCRIPT % (queries, path), encoding="utf-8")
        cmd = ["wrk", "-t1", f"-c{conns}", f"-d{int(seconds)}s", "--timeout", "60s", "-s", str(script)]
        cmd += [arg for k, v in headers.items() for arg in ("-H", f"{k}: {v}")]
        procs.append((path, subprocess.Popen([*cmd, base + path], stdout=subprocess.PIPE, text=True)))
    out = {}
    for path, proc in procs:
        stdout, _ = proc.communicate(timeout=seconds + 180)
        line = next((ln for ln in stdout.splitlines() if ln.startswith("KI-WRK ")), None)
        if line is None:
            raise SystemExit(f"wrk gave no summary for {path}:\n{stdout}")
        n, errors, p50, p95, top = line.split()[1:]
        out[path] = (int(n), int(errors), float(p50), float(p95), float(top))
    return out


def _copies(work: Path, n: int) -> Path:
    """``n`` copies of the sample estate under one folder, each in a folder of its own (a new path is a new
    document); text files get a changed byte so their conversions are not reused."""
    root = work / "copies"
    for k in range(n):
        target = root / f"Kopie {k + 1}"
        shutil.copytree(REPO / "samples" / "estate", target)
        for f in sorted(target.rglob("*")):
            if f.is_file():
                f.write_bytes(f.read_bytes() + (b"\n" if f.suffix in (".txt", ".eml", ".html") else b""))
    return root


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--copies", type=int, default=4)
    ap.add_argument("--restarts", type=int, default=3)
    ap.add_argument("--keep", action="store_true", help="keep the data directory")
    ap.add_argument("--generator", choices=("httpx", "wrk"), default="httpx",
                    help="the clients: httpx threads in this process (default) or wrk processes")
    args = ap.parse_args()
    import httpx

    generator, describe = args.generator, f"{args.clients} httpx client threads in the bench's own Python process"
    if generator == "wrk":
        if shutil.which("wrk") is None:
            generator = "httpx"
            describe += " (wrk was asked for but is not on the PATH: apt-get install wrk; FELL BACK to httpx)"
            print(f"wrk is not on the PATH: the clients are {describe}")
        else:
            describe = (f"wrk, one process per path ({'/'.join(map(str, _split(args.clients)))} connections for "
                        f"{', '.join(PATHS)}), wrk's latency percentiles")

    with temp_workdir(keep=args.keep, prefix="ki-bench-api32-") as work:
        env = {k: v for k, v in os.environ.items() if k != "KI_DATABASE_URL"} | {"KI_DATA_DIR": str(work / "data")}
        t0 = time.perf_counter()
        _ki("insert", str(REPO / "samples" / "estate"), env=env)
        print(f"sample estate inserted in {time.perf_counter() - t0:.0f} s")
        token = subprocess.run([sys.executable, "-m", "ki.cli", "token", "create", "--name", "bench", "--scope",
                                "read:pipeline", "--scope", "search", "--principal", "user:bench", "--json"],
                               env=env, check=True, capture_output=True, text=True).stdout
        headers = {"Authorization": f"Bearer {json.loads(token)['token']}"}
        server = Server(env, free_port())
        server.start()
        copies = _copies(work, args.copies)
        try:
            insert = subprocess.Popen([sys.executable, "-m", "ki.cli", "insert", str(copies)], env=env,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            import psutil

            srv = psutil.Process(server.proc.pid)
            cpu0 = (sum(srv.cpu_times()[:2]), time.perf_counter())
            if generator == "wrk":
                rows, errors, client_cpu = _wrk_phase(server.base, headers, args.clients, args.seconds, work)
            else:
                rows, errors, client_cpu = _httpx_phase(server.base, headers, args.clients, args.seconds)
            cpu1 = (sum(srv.cpu_times()[:2]), time.perf_counter())
            load = os.getloadavg()
            during = "during an insert" if insert.poll() is None else "(the insert ended before the clients did)"
            insert.wait(1800)
            print(f"\n{args.clients} concurrent clients for {args.seconds:.0f} s {during}; load average "
                  f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; {len(errors)} errors {sorted(set(errors))[:5]}")
            print(f"load generator: {describe}")
            wall = cpu1[1] - cpu0[1]
            total = sum(r[0] for r in rows.values()) or 1
            print(f"CPU while the clients ran ({wall:.0f} s): ki serve {cpu1[0] - cpu0[0]:.1f} s "
                  f"({(cpu1[0] - cpu0[0]) / total * 1000:.2f} ms a request), the clients {client_cpu:.1f} s "
                  f"({client_cpu / total * 1000:.2f} ms a request)")
            print(f"{'endpoint':<14} {'requests':>8} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8}  target p95")
            for path in PATHS:
                n, p50, p95, top = rows[path]
                print(f"{path:<14} {n:>8} {p50:>8.1f} {p95:>8.1f} {top:>8.1f}  "
                      f"<= {TARGETS[path]} ms {'ok' if p95 <= TARGETS[path] else 'MISSED'}")
            firsts = []
            for _ in range(args.restarts):
                server.stop()
                server.start()
                t0 = time.perf_counter()
                httpx.get(server.base + "/v1/search", params={"q": QUERIES[0]}, headers=headers,
                          timeout=120).raise_for_status()
                firsts.append((time.perf_counter() - t0) * 1000)
            load = os.getloadavg()
            print(f"\nfirst /v1/search after a restart: {', '.join(f'{m:.0f}' for m in firsts)} ms "
                  f"(target <= 1000 ms; load average {load[0]:.2f})")
        finally:
            server.stop()
            from ki.store.db import stop_embedded_server

            stop_embedded_server(work / "data" / "pg")


if __name__ == "__main__":
    main()
