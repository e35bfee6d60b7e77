"""Submissions per second over HTTP, against SQLite and PostgreSQL.

Starts a real ``apportion server`` (one process, scheduler loop on) on
127.0.0.1 for each backend, registers a pool of nodes through the agent
protocol, then runs ``--clients`` concurrent clients (keep-alive HTTP) that
submit 1-GPU workloads for ``--seconds`` or until ``--max`` submissions. Each
submission is acknowledged only after its transaction committed.

PostgreSQL: ``--postgres-url`` (or $APPORTION_BENCH_POSTGRES_URL), else a
throwaway cluster made with initdb/pg_ctl from /usr/lib/postgresql/*/bin
(as the ``postgres`` user when run as root); if none is found the PostgreSQL
figure is null and the reason is printed.

The last line printed is one JSON object with at least sqlite_submits_per_s,
postgres_submits_per_s, p50_ms and p99_ms (SQLite's latencies; PostgreSQL's
are under "postgres").

    python bench/api.py [--clients 8] [--seconds 5] [--max 5000] [--quick]
    python bench/api.py --compare /tmp/api-base --rounds 5

``--quick`` (the test suite's smoke run) measures SQLite only, briefly.

Each run also reports the server process's CPU time per acknowledged
submission (``cpu_ms_per_submit``, from /proc: user + system), a work counter
that a loaded machine disturbs less than the rate.

``--compare DIR`` measures another checkout (``DIR/src``, e.g. made with
``git worktree add /tmp/api-base <commit>``) against this one in the same
process: ``--rounds`` rounds, each running both checkouts on both backends,
the order alternating from round to round, every run on a fresh database. It
prints each run, then medians and the ratios this/base; the last line is the
JSON of it all.
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import http.client
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

TOKEN = "apt_benchbench01_" + "b" * 32
HEADERS = {"Authorization": f"Bearer {TOKEN}"}
#: this checkout's package source
HERE = Path(__file__).resolve().parents[1] / "src"


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def server(url: str, src: Path = HERE) -> Iterator[tuple[str, int]]:
    """A server of the package at ``src``; yields its base URL and process id."""
    port = free_port()
    env = {**os.environ, "APPORTION_DATABASE_URL": url, "APPORTION_BOOTSTRAP_TOKEN": TOKEN,
           "APPORTION_RATE_LIMIT": "0", "PYTHONPATH": str(src)}
    proc = subprocess.Popen(
        [sys.executable, "-c", "from apportion.cli.main import main; main()", "server",
         "--port", str(port), "--log-level", "warning"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 60
        with httpx.Client() as c:
            while time.time() < deadline:
                if proc.poll() is not None:
                    raise RuntimeError(f"server exited with {proc.returncode}")
                try:
                    if c.get(f"{base}/healthz", timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    time.sleep(0.1)
            else:
                raise RuntimeError("server did not start within 60 s")
        yield base, proc.pid
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def setup(base: str) -> None:
    with httpx.Client(base_url=f"{base}/v1", headers=HEADERS, timeout=10) as c:
        c.post("/pools", json={"name": "main"}).raise_for_status()
        agent = c.post("/tokens", json={"name": "agent", "role": "agent", "pool": "main"})
        agent.raise_for_status()
        token = agent.json()["data"]["token"]
        nodes = [{"name": f"n{i:03d}", "gpus": 8} for i in range(64)]
        c.post("/agent/heartbeat", json={"nodes": nodes},
               headers={"Authorization": f"Bearer {token}"}).raise_for_status()
        for slug in ("a", "b", "c", "d"):
            c.post("/teams", json={"slug": slug}).raise_for_status()


def run_clients(base: str, clients: int, seconds: float, limit: int) -> dict[str, Any]:
    latencies: list[float] = []
    failures: list[int] = []
    lock = threading.Lock()
    counter = iter(range(limit))
    start_line = threading.Barrier(clients + 1)
    stop_at: list[float] = []

    host, port = base.removeprefix("http://").split(":")

    def client(n: int) -> None:
        # http.client with keep-alive: the lightest HTTP client in the standard
        # library, so the clients take as little CPU from the server as possible.
        mine: list[float] = []
        bad = 0
        conn = http.client.HTTPConnection(host, int(port), timeout=30)
        headers = {**HEADERS, "Content-Type": "application/json"}
        start_line.wait()
        while time.perf_counter() < stop_at[0]:
            with lock:
                i = next(counter, None)
            if i is None:
                break
            body = json.dumps({"name": f"bench-{i}", "team": "abcd"[i % 4], "gpus": 0.25,
                               "priority": i % 90})
            t0 = time.perf_counter()
            conn.request("POST", "/v1/workloads", body=body, headers=headers)
            response = conn.getresponse()
            response.read()
            mine.append(time.perf_counter() - t0)
            if response.status != 201:
                bad += 1
        conn.close()
        with lock:
            latencies.extend(mine)
            failures.append(bad)

    threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
    for t in threads:
        t.start()
    t0 = time.perf_counter()
    stop_at.append(t0 + seconds)
    start_line.wait()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - t0
    ok = len(latencies) - sum(failures)
    latencies.sort()

    def pct(p: float) -> float:
        return round(latencies[min(len(latencies) - 1, int(p * len(latencies)))] * 1000, 2)

    return {"submits_per_s": round(ok / elapsed, 1), "submitted": ok, "errors": sum(failures),
            "seconds": round(elapsed, 2), "p50_ms": pct(0.50), "p99_ms": pct(0.99)}


@contextlib.contextmanager
def throwaway_postgres() -> Iterator[str | None]:
    bins = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), reverse=True)
    initdb = bins[0] if bins else shutil.which("initdb")
    if not initdb:
        print("postgres: no initdb found; skipping the PostgreSQL run", file=sys.stderr)
        yield None
        return
    bindir = os.path.dirname(initdb)
    tmp = tempfile.mkdtemp(prefix="apportion-bench-pg-")
    as_pg: list[str] = []
    if os.geteuid() == 0:
        import pwd

        pw = pwd.getpwnam("postgres")
        os.chown(tmp, pw.pw_uid, pw.pw_gid)
        as_pg = ["runuser", "-u", "postgres", "--"]
    data, port = os.path.join(tmp, "data"), free_port()
    subprocess.run([*as_pg, initdb, "-D", data, "-U", "postgres", "-A", "trust", "--no-sync"],
                   check=True, capture_output=True)
    opts = f"-p {port} -c listen_addresses=127.0.0.1 -c unix_socket_directories={tmp}"
    subprocess.run([*as_pg, os.path.join(bindir, "pg_ctl"), "-D", data, "-l",
                    os.path.join(tmp, "log"), "-o", opts, "-w", "start"],
                   check=True, capture_output=True)
    try:
        yield f"postgresql+psycopg://postgres@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run([*as_pg, os.path.join(bindir, "pg_ctl"), "-D", data, "-m", "fast",
                        "-w", "stop"], capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)


def bench(url: str, args: argparse.Namespace, label: str, src: Path = HERE) -> dict[str, Any]:
    with server(url, src) as (base, pid):
        setup(base)
        cpu0 = cpu_seconds(pid)
        result = run_clients(base, args.clients, args.seconds, args.max)
        cpu = cpu_seconds(pid) - cpu0
    result["cpu_ms_per_submit"] = round(cpu * 1000 / max(1, result["submitted"]), 3)
    print(f"{label}: {result['submits_per_s']} submissions/s, p50 {result['p50_ms']} ms, "
          f"p99 {result['p99_ms']} ms, {result['cpu_ms_per_submit']} ms CPU each "
          f"({result['submitted']} in {result['seconds']} s, {result['errors']} errors)",
          file=sys.stderr)
    return result


def fresh_postgres(server_url: str, name: str) -> str:
    """A new empty database ``name`` on the PostgreSQL server of ``server_url``."""
    import psycopg

    plain = server_url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(plain, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')
    return server_url.rsplit("/", 1)[0] + "/" + name


def compare(args: argparse.Namespace, pg_url: str | None) -> dict[str, Any]:
    """``--rounds`` rounds of base and this checkout on each backend, alternating."""
    sides = {"base": Path(args.compare).resolve() / "src", "this": HERE}
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {
        b: {s: [] for s in sides} for b in ("sqlite", "postgres")}
    n = 0
    for r in range(args.rounds):
        order = ["base", "this"] if r % 2 == 0 else ["this", "base"]
        for side in order:
            n += 1
            tmp = tempfile.mkdtemp(prefix="apportion-bench-")
            try:
                runs["sqlite"][side].append(bench(f"sqlite:///{tmp}/bench.db", args,
                                                  f"round {r + 1} sqlite {side}", sides[side]))
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
            if pg_url is not None:
                url = fresh_postgres(pg_url, f"bench_{n}")
                runs["postgres"][side].append(bench(url, args, f"round {r + 1} postgres {side}",
                                                    sides[side]))
    summary: dict[str, Any] = {}
    for backend, by_side in runs.items():
        if not by_side["this"]:
            continue
        med = {side: {"submits_per_s": statistics.median(x["submits_per_s"] for x in rs),
                      "cpu_ms_per_submit": statistics.median(x["cpu_ms_per_submit"] for x in rs),
                      "p50_ms": statistics.median(x["p50_ms"] for x in rs),
                      "runs_submits_per_s": [x["submits_per_s"] for x in rs]}
               for side, rs in by_side.items()}
        med["ratio_submits_per_s"] = round(
            med["this"]["submits_per_s"] / med["base"]["submits_per_s"], 3)
        med["ratio_cpu_ms_per_submit"] = round(
            med["this"]["cpu_ms_per_submit"] / med["base"]["cpu_ms_per_submit"], 3)
        summary[backend] = med
        print(f"{backend}: median {med['base']['submits_per_s']} -> "
              f"{med['this']['submits_per_s']} submissions/s "
              f"(x{med['ratio_submits_per_s']}); CPU {med['base']['cpu_ms_per_submit']} -> "
              f"{med['this']['cpu_ms_per_submit']} ms per submission "
              f"(x{med['ratio_cpu_ms_per_submit']})", file=sys.stderr)
    return {"compare": str(args.compare), "rounds": args.rounds, "clients": args.clients,
            "seconds": args.seconds, "load_average": os.getloadavg(), "summary": summary}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=8, help="concurrent clients (1-64)")
    parser.add_argument("--seconds", type=float, default=5.0, help="per backend (<= 60)")
    parser.add_argument("--max", type=int, default=5000, help="submissions per backend")
    parser.add_argument("--postgres-url", default=os.environ.get("APPORTION_BENCH_POSTGRES_URL"))
    parser.add_argument("--quick", action="store_true",
                        help="CI smoke run: 2 clients, 1 s, at most 300, SQLite only")
    parser.add_argument("--compare", metavar="DIR",
                        help="another checkout to measure against this one (its DIR/src)")
    parser.add_argument("--rounds", type=int, default=5, help="with --compare (1-50)")
    args = parser.parse_args()
    if args.quick:
        args.clients, args.seconds, args.max = 2, 1.0, 300
    args.clients = max(1, min(64, args.clients))
    args.seconds = max(0.5, min(60.0, args.seconds))
    if args.compare:
        if not (Path(args.compare) / "src" / "apportion").is_dir():
            parser.error(f"--compare: {args.compare}/src/apportion is not a checkout")
        args.rounds = max(1, min(50, args.rounds))
        if args.postgres_url:
            print(json.dumps(compare(args, args.postgres_url)))
            return
        with throwaway_postgres() as url:
            print(json.dumps(compare(args, url)))
        return
    tmp = tempfile.mkdtemp(prefix="apportion-bench-")
    try:
        sqlite = bench(f"sqlite:///{tmp}/bench.db", args, "sqlite")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    postgres: dict[str, Any] | None = None
    if args.quick:
        print("postgres: skipped in --quick", file=sys.stderr)
    elif args.postgres_url:
        postgres = bench(args.postgres_url, args, "postgres")
    else:
        with throwaway_postgres() as url:
            if url is not None:
                postgres = bench(url, args, "postgres")
    print(json.dumps({
        "sqlite_submits_per_s": sqlite["submits_per_s"],
        "postgres_submits_per_s": postgres["submits_per_s"] if postgres else None,
        "p50_ms": sqlite["p50_ms"],
        "p99_ms": sqlite["p99_ms"],
        "clients": args.clients,
        "sqlite": sqlite,
        "postgres": postgres,
    }))


if __name__ == "__main__":
    main()
