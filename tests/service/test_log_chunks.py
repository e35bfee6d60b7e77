"""Appending log chunks: idempotent by offset, also when two copies of one
request run at the same time (a retry while the first is still in flight)."""

from __future__ import annotations

import base64
import threading

from apportion.service import agents, inputs, logs, pools, workloads
from apportion.service import org as org_svc
from apportion.service import tokens as tok
from apportion.service.context import Ctx, Role
from apportion.service.scheduler import Scheduler
from apportion.store.db import Database
from apportion.store.repos import logs as log_repo


def test_concurrent_copies_of_a_chunk_are_stored_once(backend_url: str) -> None:
    db = Database(backend_url)
    try:
        db.migrate()
        secret = tok.bootstrap(db, "default", None)
        assert secret is not None
        verifier = tok.TokenVerifier(db)
        admin = Ctx(verifier.verify(secret), "t")
        with db.write() as s:
            pools.create_pool(s, admin, inputs.PoolSettings(name="main"))
            agent_tok = tok.create_token(s, admin, inputs.TokenNew(name="ag", role=Role.AGENT,
                                                              pool="main"))
            org_svc.create_team(s, admin, inputs.TeamNew(slug="t"))
        agent = Ctx(verifier.verify(agent_tok["token"]), "a")
        with db.write() as s:
            agents.heartbeat(s, agent, inputs.HeartbeatIn(
                nodes=(inputs.NodeReport(name="n1", gpus=8),)))
            spec = workloads.parse_spec({"name": "w", "team": "t", "gpus": 1})
            wid = int(workloads.submit(s, admin, spec)["id"])
        sched = Scheduler(db, "solo")
        assert sched.acquire() and sched.run_org(admin.org_id).committed
        chunk = inputs.LogChunkIn(workload_id=wid, attempt=1, pod=0, offset=0,
                                  data=base64.b64encode(b"hello\n").decode())
        answers: list[dict[str, object]] = []
        gate = threading.Barrier(2)

        def send() -> None:
            gate.wait()
            with db.write() as s:
                answers.append(logs.append(s, agent, chunk, 1 << 20))

        threads = [threading.Thread(target=send) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
        assert [a["next_offset"] for a in answers] == [6, 6]
        assert all(a["accepted"] for a in answers)
        with db.read() as s:
            assert log_repo.read_log(s, wid, 1, 0, 0, 100) == b"hello\n"
            assert log_repo.log_end(s, wid, 1, 0) == 6
    finally:
        db.dispose()
