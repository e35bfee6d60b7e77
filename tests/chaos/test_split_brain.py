"""Split brain (issue 18, part 3): two `apportion server` processes on one
PostgreSQL, a 1 s scheduler lease, work arriving all the time. Round after
round the leader is frozen (SIGSTOP) past its lease; the other must take the
lease over and commit; the frozen one is woken (SIGCONT) and whatever plan it
was computing must not be committed. After all rounds the committed cycles
form one fenced history: fencing tokens never go backwards and each token
belongs to one process.

CI runs 5 rounds; ``APPORTION_CHAOS_LONG=1`` runs 50. The in-process rounds of
``tests/service/test_scheduler_lease.py::test_a_frozen_leader_s_plan_is_refused_every_round``
force a stale commit in every round (deterministic, 50 rounds on SQLite and
PostgreSQL, each refused by the fencing token).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from apportion.store.db import make_disposable_engine
from tests.api.test_processes import H, _leader, _port, org_with_node, server
from tests.chaos.figures import record
from tests.pgfixture import PgServer, pg_server  # noqa: F401
from tests.timing import wait_until

pytestmark = [pytest.mark.chaos, pytest.mark.slow]

ROUNDS = 50 if os.environ.get("APPORTION_CHAOS_LONG") else 5


def _rows(url: str, sql: str) -> list[tuple[Any, ...]]:
    """``sql``'s rows on the test's database, through a connection of its own."""
    engine = make_disposable_engine(url)
    try:
        with engine.connect() as conn:
            return [tuple(r) for r in conn.execute(text(sql)).all()]
    finally:
        engine.dispose()


def _cycles(url: str) -> list[tuple[int, str, int]]:
    rows = _rows(url, "SELECT id, holder, fencing_token FROM cycles ORDER BY id")
    return [(int(i), str(h).split(":")[1], int(t)) for i, h, t in rows]  # pid of the holder


def _sessions(url: str) -> list[tuple[Any, ...]]:
    """Every session on the test's database: state, what it waits for, its query."""
    return _rows(url, "SELECT pid, state, wait_event_type, wait_event, left(query, 80) "
                      "FROM pg_stat_activity WHERE datname = current_database()")


def test_a_frozen_leader_never_commits_after_its_successor(
        pg_server: PgServer) -> None:  # noqa: F811
    url = pg_server.create_database()
    ports = [_port(), _port()]
    bases = [f"http://127.0.0.1:{p}/v1" for p in ports]
    # a frozen leader's open transaction ends after 3 s (APPORTION_PG_IDLE_TIMEOUT):
    # without it, a leader frozen inside one held the lease's and the
    # organization's row locks, and the other server waited for it for ever.
    # Frozen while it received a large result, its session sat in ClientWrite,
    # which no idle timeout ends: tcp_user_timeout (the same 3 s) does
    # (tests/store/test_migrations.py, the large-result test)
    env = {"APPORTION_LEASE_TTL": "1", "APPORTION_PG_IDLE_TIMEOUT": "3"}
    stop = threading.Event()
    with server(url, ports[0], **env) as first, server(url, ports[1], **env) as second:
        procs = (first, second)
        org_with_node(bases[0], 1024)

        def submitter() -> None:
            """Work keeps arriving (through both servers) so that every cycle commits."""
            i = 0
            clients = [httpx.Client(base_url=b, headers=H, timeout=5) for b in bases]
            try:
                while not stop.is_set():
                    i += 1
                    with contextlib.suppress(httpx.HTTPError):  # that one is frozen
                        clients[i % 2].post("/workloads", json={
                            "name": f"w{i}", "team": "t", "gpus": 0.25})
                    stop.wait(0.05)
            finally:
                for c in clients:
                    c.close()

        feeder = threading.Thread(target=submitter, daemon=True)
        feeder.start()
        frozen_rounds = 0
        try:
            for k in range(ROUNDS):
                leader = wait_until(lambda: [i for i in [_leader(ports)] if i is not None],
                                    timeout=60, what=f"one leader (round {k})")[0]
                other = 1 - leader
                pid_other = str(procs[other].pid)
                before = max((cid for cid, _h, _t in _cycles(url)), default=0)
                procs[leader].send_signal(signal.SIGSTOP)
                try:
                    # the other takes the lease and commits (bounded)
                    # the frozen one stays frozen until the other has committed twice
                    try:
                        wait_until(lambda b=before, p=pid_other: sum(
                            cid > b and h == p for cid, h, _t in _cycles(url)) >= 2,
                            timeout=60, what=f"the other server to commit twice (round {k})")
                    except AssertionError as stalled:  # say what holds it up
                        raise AssertionError(f"{stalled}; sessions: {_sessions(url)}") from None
                finally:
                    procs[leader].send_signal(signal.SIGCONT)
                frozen_rounds += 1
        finally:
            stop.set()
            feeder.join(10)
    cycles = _cycles(url)
    pg_server.drop_database(url)
    tokens = [t for _i, _h, t in cycles]
    assert tokens == sorted(tokens), "a fenced-out leader committed after its successor"
    owners: dict[int, set[str]] = {}
    for _i, h, t in cycles:
        owners.setdefault(t, set()).add(h)
    assert all(len(h) == 1 for h in owners.values()), owners
    assert frozen_rounds == ROUNDS
    assert len(owners) >= ROUNDS + 1  # the lease changed hands in every round
    record("3. split brain (processes)", "postgresql",
           f"{ROUNDS} leaders SIGSTOPped past a 1 s lease, {len(owners)} fencing tokens, "
           f"{len(cycles)} cycles committed; 0 out of order, each token one process",
           rounds=ROUNDS, tokens=len(owners), cycles=len(cycles), out_of_order=0)
