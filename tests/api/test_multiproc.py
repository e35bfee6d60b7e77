"""Several `apportion server` processes on one PostgreSQL: a stream served by one
process follows what another process writes (``LISTEN/NOTIFY``), and a token
revoked through one process is refused at once by the others."""

from __future__ import annotations

import json
import os
import signal
import statistics
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.api.test_processes import H, _count, _port, server
from tests.pgfixture import PgServer
from tests.timing import wait_until

#: what the issue asks: an event written through B reaches a stream on A within 2 s
MAX_LATENCY = 2.0


@pytest.mark.slow
def test_a_stream_on_one_process_sees_events_written_through_another(
        pg_server: PgServer) -> None:
    url = pg_server.create_database()
    ports = [_port(), _port()]
    a, b = (f"http://127.0.0.1:{p}/v1" for p in ports)
    with server(url, ports[0]), server(url, ports[1]), \
            httpx.Client(base_url=b, headers=H, timeout=30) as cb:
        cb.post("/teams", json={"slug": "t"}).raise_for_status()
        newest = cb.get("/events", params={"limit": 100}).json()["data"][-1]["id"]
        seen: dict[int, float] = {}
        lock = threading.Lock()
        streaming = threading.Event()

        def follow() -> None:
            with httpx.Client(base_url=a, headers=H, timeout=60) as ca, ca.stream(
                    "GET", "/events/stream", headers={"Last-Event-ID": str(newest)}) as stream:
                for line in stream.iter_lines():
                    streaming.set()
                    if not line.startswith("data:"):
                        continue
                    wid = json.loads(line[len("data:"):])["workload_id"]
                    if wid is not None:
                        with lock:
                            seen.setdefault(wid, time.monotonic())  # its first event
                        if len(seen) == 10:
                            return

        reader = threading.Thread(target=follow, daemon=True)
        reader.start()
        wait_until(streaming.is_set, timeout=10, what="the stream on A to start")
        latencies = []
        for i in range(10):
            wid = cb.post("/workloads", json={"name": f"w{i}", "team": "t", "gpus": 1}
                          ).json()["data"]["id"]
            written = time.monotonic()  # B answered: the event is committed
            deadline = written + MAX_LATENCY
            while wid not in seen and time.monotonic() < deadline:
                time.sleep(0.002)
            assert wid in seen, f"event of workload {wid} not on A's stream after 2 s"
            latencies.append(max(0.0, seen[wid] - written))
            # the next one is written only after this one was seen: each is the
            # only news when it arrives (0.5 s polling would show as ~250 ms or more)
        reader.join(10)
    print(f"\nSSE latency across processes (commit on B -> stream on A), 10 events: "
          f"median {statistics.median(latencies) * 1000:.1f} ms, "
          f"max {max(latencies) * 1000:.1f} ms")
    # 0.5 s polling would put the median near 250 ms; NOTIFY wakes the stream at once
    assert statistics.median(latencies) < 0.25


@pytest.mark.slow
def test_a_token_revoked_through_one_process_is_refused_by_another_at_once(
        pg_server: PgServer) -> None:
    url = pg_server.create_database()
    ports = [_port(), _port()]
    a, b = (f"http://127.0.0.1:{p}/v1" for p in ports)
    with server(url, ports[0]), server(url, ports[1]), \
            httpx.Client(base_url=a, headers=H, timeout=30) as ca, \
            httpx.Client(base_url=b, timeout=30) as cb:
        took = []
        for i in range(10):
            made = ca.post("/tokens", json={"name": f"u{i}", "role": "org_admin"}).json()
            token_id = made["data"]["id"]
            auth = {"Authorization": f"Bearer {made['data']['token']}"}
            for _ in range(3):  # B has verified it, and serves it from its cache
                assert cb.get("/tokens/self", headers=auth).status_code == 200
            started = time.monotonic()
            assert ca.delete(f"/tokens/{token_id}").status_code == 200
            took.append(time.monotonic() - started)
            refused = cb.get("/tokens/self", headers=auth)
            assert refused.status_code == 401, (i, refused.text)
    # the revocation answers once both processes acknowledged (waits at most 2 s)
    print(f"\nDELETE /tokens/{{id}} with two processes: median "
          f"{statistics.median(took) * 1000:.1f} ms, max {max(took) * 1000:.1f} ms")


def test_workers_are_refused_on_sqlite_and_below_one(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from apportion.cli.main import app

    env = {"APPORTION_DATABASE_URL": f"sqlite:///{tmp_path}/one.db"}
    refused = CliRunner().invoke(app, ["server", "--workers", "2"], env=env)
    assert refused.exit_code == 2
    assert "--workers 2 needs PostgreSQL" in refused.output
    assert not (tmp_path / "one.db").exists()  # refused before touching the database
    zero = CliRunner().invoke(app, ["server", "--workers", "0"], env={**env, "COLUMNS": "200"})
    assert zero.exit_code == 2
    assert "Invalid value for '--workers'" in zero.output


def _health(port: int) -> dict[str, Any] | None:
    try:
        # a new connection each time: the kernel hands it to one of the workers
        with httpx.Client(timeout=5) as c:
            body: dict[str, Any] = c.get(f"http://127.0.0.1:{port}/healthz").json()
            return body
    except httpx.HTTPError:
        return None


def _workers_seen(port: int, tries: int = 60) -> dict[int, bool]:
    """pid -> leads, of the workers that answered ``tries`` fresh connections."""
    seen: dict[int, bool] = {}
    for _ in range(tries):
        h = _health(port)
        if h is not None:
            seen[h["process"]["pid"]] = h["scheduler"]["leader"]
    return seen


@pytest.mark.slow
def test_two_workers_on_one_port_one_schedules_and_the_other_takes_over(
        pg_server: PgServer) -> None:
    """``--workers 2``: both answer on the port, exactly one leads; SIGKILL the
    leader and the other takes the lease within the TTL while the parent starts the
    dead one again; submissions through either are scheduled."""
    url = pg_server.create_database()
    port = _port()
    base = f"http://127.0.0.1:{port}/v1"
    with server(url, port, "--workers", "2", APPORTION_LEASE_TTL="2") as parent, \
            httpx.Client(base_url=base, headers=H, timeout=30) as c:
        seen = wait_until(lambda: (s := _workers_seen(port)) and len(s) == 2
                          and sum(s.values()) == 1 and s, timeout=30,
                          what="two workers answering, one leading")
        assert parent.pid not in seen
        assert all(h["process"]["notify"] == "listening"
                   for h in filter(None, (_health(port) for _ in range(4))))
        c.post("/pools", json={"name": "main"}).raise_for_status()
        c.post("/teams", json={"slug": "t"}).raise_for_status()
        agent = c.post("/tokens", json={"name": "ag", "role": "agent", "pool": "main"})
        agent_h = {"Authorization": f"Bearer {agent.json()['data']['token']}"}
        c.post("/agent/heartbeat", headers=agent_h,
               json={"nodes": [{"name": "n1", "gpus": 64}]}).raise_for_status()
        for i in range(10):  # over fresh connections: through both workers
            with httpx.Client(base_url=base, headers=H, timeout=30) as fresh:
                fresh.post("/workloads", json={"name": f"w{i}", "team": "t", "gpus": 1}
                           ).raise_for_status()
        wait_until(lambda: _count(base, "Starting") == 10, timeout=20,
                   what="10 workloads started")
        leader = next(pid for pid, leads in seen.items() if leads)
        other = next(pid for pid, leads in seen.items() if not leads)
        os.kill(leader, signal.SIGKILL)
        killed_at = time.monotonic()
        wait_until(lambda: _workers_seen(port, 10).get(other) is True, timeout=10,
                   what="the other worker to take the lease")
        took = time.monotonic() - killed_at
        print(f"\nsecond worker led {took:.1f} s after the leader's SIGKILL (lease TTL 2 s)")
        for i in range(10, 20):
            with httpx.Client(base_url=base, headers=H, timeout=30) as fresh:
                fresh.post("/workloads", json={"name": f"w{i}", "team": "t", "gpus": 1}
                           ).raise_for_status()
        wait_until(lambda: _count(base, "Starting") == 20, timeout=20,
                   what="20 workloads started")
        # the parent started the killed worker again: two workers answer once more
        wait_until(lambda: len(_workers_seen(port).keys() - {leader}) == 2, timeout=60,
                   what="the killed worker started again")
        parent.send_signal(signal.SIGTERM)
        assert parent.wait(30) == 0
