"""Crash loop (issue 18, part 2): eight clients submit and cancel over HTTP
while the `apportion server` process is SIGKILLed and restarted at random
moments. Every submission carries an Idempotency-Key and is retried with the
same key until the server answers, as a careful client does. Afterwards:

- every submission that got a 201 (or its replay) is stored, under the id the
  server answered, and no key made two workloads;
- every cancel the server acknowledged is Cancelled (or the workload had
  already ended);
- no workload is stuck: once a server runs again, every Pending workload is
  routed by a cycle (its pool is chosen, SPEC 6.1).

CI restarts the server 5 times, on SQLite and PostgreSQL; ``APPORTION_CHAOS_LONG=1``
does it 20 times. The figures (restarts, submissions acknowledged and retried,
cancels) are printed for docs/reliability.md.
"""

from __future__ import annotations

import os
import random
import signal
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from tests.api.test_processes import H, _port, org_with_node, server
from tests.chaos.figures import record
from tests.pgfixture import backend_url, pg_server  # noqa: F401
from tests.timing import wait_until

pytestmark = [pytest.mark.chaos, pytest.mark.slow]

RESTARTS = 20 if os.environ.get("APPORTION_CHAOS_LONG") else 4
CLIENTS = 8


@dataclass
class Ledger:
    """What the clients were told, shared between their threads."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    acked: dict[str, int] = field(default_factory=dict)  # key -> id
    cancelled: set[int] = field(default_factory=set)
    counts: Counter[str] = field(default_factory=Counter)

    def count(self, what: str) -> None:
        with self.lock:
            self.counts[what] += 1


def _client(n: int, base: str, ledger: Ledger, stop: threading.Event) -> None:
    rng = random.Random(n)
    mine: list[int] = []
    with httpx.Client(base_url=base, headers=H, timeout=30) as c:
        i = 0
        while not stop.is_set():
            i += 1
            if mine and rng.random() < 0.25:
                wid = rng.choice(mine)
                try:
                    r = c.post(f"/workloads/{wid}/cancel", json={})
                except httpx.HTTPError:
                    ledger.count("cancel lost with the server")
                    continue
                assert r.status_code < 500, r.text
                if r.status_code == 200:
                    with ledger.lock:
                        ledger.cancelled.add(wid)
                continue
            key = f"c{n}-{i}-{uuid.uuid4().hex[:8]}"
            body = {"name": f"c{n}-{i}", "team": "t", "gpus": rng.choice([0.5, 1, 2])}
            # retried with the same key until the server answers (bounded)
            for attempt in range(600):
                if stop.is_set() and attempt:
                    break
                try:
                    r = c.post("/workloads", json=body, headers={"Idempotency-Key": key})
                except httpx.HTTPError:
                    ledger.count("submission retried")
                    stop.wait(0.05)  # the client's back-off (ends at once on stop)
                    continue
                assert r.status_code == 201, r.text
                wid = int(r.json()["data"]["id"])
                with ledger.lock:
                    assert ledger.acked.setdefault(key, wid) == wid, (key, wid)
                    ledger.counts["submission acknowledged"] += 1
                    if r.headers.get("Idempotent-Replayed") == "true":
                        ledger.counts["answered by a replay"] += 1
                mine.append(wid)
                break


def _all(c: httpx.Client) -> dict[int, dict[str, Any]]:
    out: dict[int, dict[str, Any]] = {}
    token = None
    while True:
        params = {"limit": 100, **({"next_token": token} if token else {})}
        body = c.get("/workloads", params=params).json()
        out.update({int(w["id"]): w for w in body["data"]})
        token = body["metadata"]["next_token"]
        if token is None:
            return out


def test_crash_loop_loses_and_doubles_nothing(backend_url: str) -> None:  # noqa: F811
    port = _port()
    base = f"http://127.0.0.1:{port}/v1"
    ledger = Ledger()
    stop = threading.Event()
    rng = random.Random(18)
    with server(backend_url, port):
        org_with_node(base, 8, nodes=4)
    threads = [threading.Thread(target=_client, args=(n, base, ledger, stop), daemon=True)
               for n in range(CLIENTS)]
    for t in threads:
        t.start()
    try:
        for k in range(RESTARTS):
            with server(backend_url, port) as proc:
                before = ledger.counts["submission acknowledged"]
                # kill it at a random moment once some writes went through
                wait_until(lambda b=before: ledger.counts["submission acknowledged"] > b + 5,
                           timeout=60, what=f"writes after restart {k}")
                time.sleep(rng.uniform(0, 0.5))  # the input: a random moment to kill it
                proc.send_signal(signal.SIGKILL)
                proc.wait(10)
                ledger.count("server killed")
    finally:
        stop.set()
    with server(backend_url, port), httpx.Client(base_url=base, headers=H, timeout=30) as c:
        for t in threads:
            t.join(60)
        assert not any(t.is_alive() for t in threads)
        stored = _all(c)
        by_name = Counter(w["name"] for w in stored.values())
        doubled = {name: n for name, n in by_name.items() if n > 1}
        assert not doubled, f"submissions stored twice: {doubled}"
        lost = {key: wid for key, wid in ledger.acked.items() if wid not in stored}
        assert not lost, f"{len(lost)} acknowledged submissions lost: {lost}"
        for key, wid in ledger.acked.items():
            assert stored[wid]["name"] == key.rsplit("-", 1)[0], (key, stored[wid])
        not_cancelled = {wid: stored[wid]["status"] for wid in ledger.cancelled
                         if stored[wid]["status"] not in ("Cancelled", "Completed", "Failed",
                                                          "Preempted")}
        assert not not_cancelled, not_cancelled
        # nothing stuck: a running server routes every Pending workload to pool
        # main (32 GPUs; the rest waits Queued there)
        wait_until(lambda: not [w for w in _all(c).values() if w["status"] == "Pending"],
                   timeout=60, what="every Pending workload routed")
    counts = ledger.counts
    record("2. crash loop", "postgresql" if "postgresql" in backend_url else "sqlite",
           f"{counts['server killed']} SIGKILLs, {counts['submission acknowledged']} "
           f"submissions acknowledged ({counts['answered by a replay']} by a replay), "
           f"{counts['submission retried']} retries, {len(ledger.cancelled)} cancels "
           f"acknowledged; 0 lost, 0 stored twice", killed=counts["server killed"],
           acknowledged=counts["submission acknowledged"], lost=0, doubled=0)
    assert counts["server killed"] == RESTARTS
    assert counts["submission retried"] > 0  # the kills hit requests in flight
