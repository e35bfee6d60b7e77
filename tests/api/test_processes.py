"""Real `apportion server` processes on 127.0.0.1: a server killed with SIGKILL
and restarted loses no acknowledged workload; two servers share one
PostgreSQL; the SSE stream follows live."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest
from sqlalchemy import text

from apportion.store.db import make_disposable_engine
from tests.pgfixture import PgServer
from tests.timing import wait_until

TOKEN = "apt_crashcrash01_" + "c" * 32
H = {"Authorization": f"Bearer {TOKEN}"}


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def server(url: str, port: int, *args: str, **extra_env: str
           ) -> Iterator[subprocess.Popen[bytes]]:
    env = {**os.environ, "APPORTION_DATABASE_URL": url, "APPORTION_BOOTSTRAP_TOKEN": TOKEN,
           "APPORTION_CYCLE_INTERVAL": "0.2", "APPORTION_RATE_LIMIT": "0", **extra_env}
    # stderr goes to a file, never to a pipe nobody reads: a server's warnings
    # (a lease lost, a connection ended by the idle timeout) filled a 64 KiB pipe
    # after a few chaos rounds and froze its logging, and with it its scheduler
    log = tempfile.TemporaryFile()  # noqa: SIM115 (closed in the finally below)
    proc = subprocess.Popen(
        [sys.executable, "-c", "from apportion.cli.main import main; main()", "server",
         "--port", str(port), "--log-level", "warning", *args],
        env=env, stdout=subprocess.DEVNULL, stderr=log)
    try:
        # Bounded, and generous: a server's start (imports, migrations) took over 30 s
        # on a machine with both cores busy.
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
            if proc.poll() is not None:
                log.seek(0)
                raise RuntimeError(log.read().decode(errors="replace") or "died")
        else:
            raise RuntimeError("server did not start")
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)
        log.close()


def org_with_node(base: str, gpus: int, nodes: int = 1) -> dict[str, str]:
    """Through a running server at ``base``: pool main, team t, an agent token and
    a heartbeat with ``nodes`` nodes of ``gpus`` GPUs; returns the agent's headers."""
    with httpx.Client(base_url=base, headers=H, timeout=30) as c:
        c.post("/pools", json={"name": "main"}).raise_for_status()
        c.post("/teams", json={"slug": "t"}).raise_for_status()
        agent = c.post("/tokens", json={"name": "ag", "role": "agent", "pool": "main"})
        agent_h = {"Authorization": f"Bearer {agent.json()['data']['token']}"}
        c.post("/agent/heartbeat", headers=agent_h, json={"nodes": [
            {"name": f"n{i + 1}", "gpus": gpus} for i in range(nodes)]}).raise_for_status()
    return agent_h


@pytest.mark.slow
def test_sigkill_loses_no_acknowledged_workload(backend_url: str) -> None:
    port = _port()
    base = f"http://127.0.0.1:{port}/v1"
    acknowledged: dict[int, str] = {}
    lock = threading.Lock()
    with server(backend_url, port) as proc:
        with httpx.Client(base_url=base, headers=H, timeout=30) as c:
            assert c.post("/pools", json={"name": "main"}).status_code == 201
            assert c.post("/teams", json={"slug": "t"}).status_code == 201

        def client(n: int) -> None:
            # 30 s: on a loaded machine a write can take over 5 s, and a timeout ends
            # this client; the SIGKILL below is seen at once (connection reset)
            with httpx.Client(base_url=base, headers=H, timeout=30) as c:
                for i in range(10_000):
                    name = f"c{n}-{i}"
                    try:
                        r = c.post("/workloads", json={"name": name, "team": "t", "gpus": 1})
                    except httpx.HTTPError:
                        return  # the server died under us: this one was never acknowledged
                    if r.status_code == 201:
                        with lock:
                            acknowledged[r.json()["data"]["id"]] = name

        threads = [threading.Thread(target=client, args=(n,)) for n in range(4)]
        for t in threads:
            t.start()
        # Kill it mid-stream, once enough writes were acknowledged to make the check mean
        # something (a bounded wait, not a fixed sleep that a slow machine defeats).
        wait_until(lambda: len(acknowledged) > 50, timeout=60, what="50 acknowledged writes")
        proc.send_signal(signal.SIGKILL)
        for t in threads:
            t.join(10)
    assert len(acknowledged) > 50
    with server(backend_url, port), httpx.Client(base_url=base, headers=H, timeout=10) as c:
        stored: dict[int, str] = {}
        token = None
        while True:
            params = {"limit": 100, **({"next_token": token} if token else {})}
            body = c.get("/workloads", params=params).json()
            stored.update({w["id"]: w["name"] for w in body["data"]})
            token = body["metadata"]["next_token"]
            if token is None:
                break
    missing = {i: n for i, n in acknowledged.items() if stored.get(i) != n}
    assert not missing, f"{len(missing)} acknowledged workloads lost"


@pytest.mark.slow
def test_two_servers_one_postgres_fail_over(pg_server: PgServer) -> None:
    """Two server processes on one PostgreSQL: both serve the API, one schedules;
    kill the leader and the other takes over. Every workload is started exactly
    once and the committed cycles form one fenced history."""
    url = pg_server.create_database()
    ports = [_port(), _port()]
    bases = [f"http://127.0.0.1:{p}/v1" for p in ports]
    env = {"APPORTION_LEASE_TTL": "1"}
    with server(url, ports[0], **env) as first, server(url, ports[1], **env) as second:
        agent_h = org_with_node(bases[0], 64)
        ids = []
        for i in range(20):
            with httpx.Client(base_url=bases[i % 2], headers=H, timeout=10) as c:
                r = c.post("/workloads", json={"name": f"w{i}", "team": "t", "gpus": 1})
                ids.append(r.json()["data"]["id"])
        # The premise: exactly one server leads, and it has committed cycles.
        # (one read: with a 1 s lease on a loaded machine leadership may move; the
        # cycles table below shows who really led)
        leader: int = wait_until(lambda: [i for i in [_leader(ports)] if i is not None],
                                 timeout=30, what="one leader")[0]
        wait_until(lambda: _count(bases[leader], "Starting") >= 1, timeout=30,
                   what="the leader's first committed cycle")
        survivor = 1 - leader
        (first, second)[leader].kill()  # the leader dies with half the work to come
        (first, second)[leader].wait(10)
        for i in range(20, 40):
            with httpx.Client(base_url=bases[survivor], headers=H, timeout=10) as c:
                r = c.post("/workloads", json={"name": f"w{i}", "team": "t", "gpus": 1})
                ids.append(r.json()["data"]["id"])
        wait_until(lambda: _leader([ports[survivor]]) is not None, timeout=30,
                   what="the survivor to take the lease")
        wait_until(lambda: _count(bases[survivor], "Starting") == 40, timeout=30,
                   what="all 40 workloads started")
        with httpx.Client(base_url=bases[survivor], headers=H, timeout=10) as c:
            starts = c.get("/agent/decisions", headers=agent_h, params={"limit": 100}).json()
        started = [d["workload_id"] for d in starts["data"] if d["kind"] == "start"]
        assert sorted(started) == sorted(ids)  # exactly once each
    engine = make_disposable_engine(url)
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT holder, fencing_token FROM cycles ORDER BY id")).all()
    engine.dispose()
    holders = [h.split(":")[1] for h, _t in rows]  # holder = host:pid:random
    pids = [str(p.pid) for p in (first, second)]
    assert set(holders) == set(pids), holders  # both led: the lease changed hands
    assert holders[-1] == pids[survivor]  # the survivor took over from the killed leader
    tokens = [t for _h, t in rows]
    assert tokens == sorted(tokens)
    assert all(len({h for h, t in rows if t == tok}) == 1 for tok in set(tokens))


def _leader(ports: list[int]) -> int | None:
    """The index in ``ports`` of the one server that says it leads, else None."""
    leading = []
    for i, port in enumerate(ports):
        try:
            health = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5).json()
        except httpx.HTTPError:
            continue
        if health["scheduler"]["leader"]:
            leading.append(i)
    return leading[0] if len(leading) == 1 else None


def _count(base: str, status: str) -> int:
    with httpx.Client(base_url=base, headers=H, timeout=10) as c:
        body = c.get("/workloads", params={"status": status, "limit": 100}).json()
    return int(body["metadata"]["total_count"])


def test_sse_stream_follows_live(tmp_path: object) -> None:
    port = _port()
    with server(f"sqlite:///{tmp_path}/sse.db", port):
        base = f"http://127.0.0.1:{port}/v1"
        with httpx.Client(base_url=base, headers=H, timeout=10) as c:
            c.post("/teams", json={"slug": "t"}).raise_for_status()
            seen: list[str] = []
            with c.stream("GET", "/events/stream", headers={"Last-Event-ID": "1"}) as stream:
                wid = c.post("/workloads", json={"name": "live", "team": "t", "gpus": 1}
                             ).json()["data"]["id"]
                for line in stream.iter_lines():
                    seen.append(line)
                    if line.startswith("data:") and f'"workload_id": {wid}' in line:
                        break
        ids = [int(x.split(": ")[1]) for x in seen if x.startswith("id: ")]
        assert ids and min(ids) > 1  # resumed after event 1
