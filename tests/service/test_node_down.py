"""A node going down (SPEC 5): its workloads fail, or with
requeue_on_preemption fail and start a new attempt; against SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from apportion.service import agents, inputs, pools, workloads
from apportion.service import org as org_svc
from apportion.service import tokens as tok
from apportion.service.context import Ctx, Role
from apportion.service.scheduler import Scheduler
from apportion.store.db import Database
from apportion.store.repos import events as ev_repo
from apportion.store.repos import workloads as wl_repo
from apportion.store.repos.workloads import WorkloadFilter


@dataclass
class World:
    db: Database
    admin: Ctx
    agent: Ctx

    def submit(self, name: str, **spec: Any) -> int:
        with self.db.write() as s:
            body = {"name": name, "team": "t", "gpus": 8, **spec}
            return int(workloads.submit(s, self.admin, workloads.parse_spec(body))["id"])

    def get(self, wid: int) -> dict[str, Any]:
        from apportion.service.views import workload_view

        with self.db.read() as s:
            return workload_view(workloads.get(s, self.admin, wid))

    def heartbeat(self, down: str) -> None:
        nodes = tuple(inputs.NodeReport(name=n, gpus=8, health="down" if n == down else "ready")
                      for n in ("n1", "n2", "n3"))
        with self.db.write() as s:
            agents.heartbeat(s, self.agent, inputs.HeartbeatIn(nodes=nodes))


@pytest.fixture
def world(backend_url: str) -> Iterator[World]:
    db = Database(backend_url)
    db.migrate()
    secret = tok.bootstrap(db, "default", None)
    assert secret is not None
    verifier = tok.TokenVerifier(db)
    admin = Ctx(verifier.verify(secret), "test")
    with db.write() as s:
        pools.create_pool(s, admin, inputs.PoolSettings(name="main"))
        agent_tok = tok.create_token(
            s, admin, inputs.TokenNew(name="ag", role=Role.AGENT, pool="main"))
        org_svc.create_team(s, admin, inputs.TeamNew(slug="t"))
    w = World(db, admin, Ctx(verifier.verify(agent_tok["token"]), "hb"))
    w.heartbeat(down="")
    try:
        yield w
    finally:
        db.dispose()


def test_node_down_fails_plain_work_and_requeues_checkpointed_work(world: World) -> None:
    sched = Scheduler(world.db, "solo")
    assert sched.acquire()
    keep = world.submit("checkpointed", requeue_on_preemption=True)
    plain = world.submit("plain")
    assert sched.run_org(world.admin.org_id).committed
    nodes = {wid: world.get(wid)["placement"][0]["node"] for wid in (keep, plain)}
    # Both on their own 8-GPU node; take down the checkpointed one's node, then the other.
    world.heartbeat(down=nodes[keep])
    requeued = world.get(keep)
    assert requeued["status"] == "Pending" and requeued["attempt"] == 2
    assert requeued["placement"] == [] and requeued["pool"] is None
    assert [(a["attempt"], a["status"]) for a in requeued["attempts"]] == [
        (1, "Failed"), (2, "Pending")]
    assert world.get(plain)["status"] == "Starting"  # not on that node

    with world.db.read() as s:
        stops = [d for d in wl_repo.decisions_after(s, world.admin.org_id, "main", 0, 100)
                 if d.kind == "stop"]
        events = ev_repo.list_events(s, world.admin.org_id, after=None, limit=100,
                                     workload_id=keep).items
    assert [(d.workload_id, d.attempt, d.reason) for d in stops] == [(keep, 1, "node_down")]
    assert [(e.attempt, e.status) for e in events][-2:] == [(1, "Failed"), (2, "Pending")]
    assert events[-1].message == f"requeued after a failure: node {nodes[keep]} is down"

    assert sched.run_org(world.admin.org_id).committed  # attempt 2 starts elsewhere
    again = world.get(keep)
    assert again["status"] == "Starting" and again["attempt"] == 2
    assert again["placement"][0]["node"] not in (nodes[keep], nodes[plain])
    assert again["submitted_at"] == requeued["submitted_at"]

    world.heartbeat(down=nodes[plain])  # no requeue: it just fails
    failed = world.get(plain)
    assert failed["status"] == "Failed" and failed["attempt"] == 1
    with world.db.read() as s:
        active = wl_repo.list_workloads(s, world.admin.org_id, WorkloadFilter(), None, 100)
    assert {w.id: w.status for w in active.items} == {keep: "Starting", plain: "Failed"}
