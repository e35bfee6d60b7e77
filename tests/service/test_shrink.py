"""Shrink before kill (SPEC 6.5) through the real service and store, on SQLite
and PostgreSQL: the shorter placement, the exiting parts, the ``shrink``
instruction for the agent, the preemption history, events and metrics.

The engine's victim search does not produce shrinks yet (the lead's part of
issue 14): the plan here is the real engine's plus one shrink decision
(tests/shrinkplan.py), committed by the real scheduler."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from apportion.service import agents, inputs, pools, workloads
from apportion.service import org as org_svc
from apportion.service import tokens as tok
from apportion.service.context import Ctx, Role
from apportion.service.metrics import Metrics
from apportion.service.scheduler import Scheduler, _run
from apportion.service.snapshots import load_snapshot
from apportion.service.views import workload_view
from apportion.store.db import Database
from apportion.store.repos import workloads as wl_repo
from tests.shrinkplan import with_shrink

GRACE = 30


@dataclass
class World:
    db: Database
    admin: Ctx
    agent: Ctx
    sched: Scheduler
    metrics: Metrics

    def submit(self, name: str, **spec: Any) -> int:
        with self.db.write() as s:
            body = {"name": name, "team": "t", "gpus": 1, **spec}
            return int(workloads.submit(s, self.admin, workloads.parse_spec(body))["id"])

    def get(self, wid: int) -> dict[str, Any]:
        with self.db.read() as s:
            return workload_view(workloads.get(s, self.admin, wid))

    def report(self, wid: int, status: str, **extra: Any) -> dict[str, Any]:
        with self.db.write() as s:
            return agents.report(s, self.agent, inputs.RunReport(
                workload_id=wid, attempt=1, status=status, **extra))

    def decisions(self) -> list[dict[str, Any]]:
        with self.db.read() as s:
            return agents.decisions(s, self.agent, 0, 100)[0]

    def events(self, wid: int) -> list[dict[str, Any]]:
        with self.db.read() as s:
            return workloads.events(s, self.admin, wid, None, 100).items

    def cycle_with_shrink(self, wid: int, take: int, by: int) -> None:
        """One real cycle whose plan also shrinks ``wid`` by ``take`` pods."""
        org = self.admin.org_id
        with self.db.read() as s:
            loaded = load_snapshot(s, org, time.time())
        plan = with_shrink(_run(loaded), loaded.snapshot, wid, take, by, GRACE)
        with self.db.write() as s:
            outcome = self.sched._commit(s, org, loaded, plan, time.perf_counter())
        assert self.sched._committed(outcome).committed


@pytest.fixture
def world(backend_url: str) -> Iterator[World]:
    db = Database(backend_url)
    db.migrate()
    secret = tok.bootstrap(db, "default", None)
    assert secret is not None
    verifier = tok.TokenVerifier(db)
    admin = Ctx(verifier.verify(secret), "test")
    with db.write() as s:
        pools.create_pool(s, admin, inputs.PoolSettings(name="main", preemption_grace=GRACE))
        agent_tok = tok.create_token(
            s, admin, inputs.TokenNew(name="ag", role=Role.AGENT, pool="main"))
        org_svc.create_team(s, admin, inputs.TeamNew(slug="t"))
    agent = Ctx(verifier.verify(agent_tok["token"]), "hb")
    # n1's device 0 is used by a pod apportion does not manage: the engine sees
    # 7 devices there, and every instruction must name physical ones.
    nodes = (inputs.NodeReport(name="n1", gpus=8, unavailable=((0, 1000),)),
             inputs.NodeReport(name="n2", gpus=8))
    with db.write() as s:
        agents.heartbeat(s, agent, inputs.HeartbeatIn(nodes=nodes))
    metrics = Metrics()
    sched = Scheduler(db, "solo", metrics=metrics)
    assert sched.acquire()
    try:
        yield World(db, admin, agent, sched, metrics)
    finally:
        db.dispose()


def _running_elastic(world: World) -> tuple[int, int]:
    big = world.submit("big", pods=8, min_pods=4, priority=20)
    assert world.sched.run_org(world.admin.org_id).committed
    world.report(big, "running")
    small = world.submit("small", team="t", gpus=2, priority=60)
    return big, small


def test_a_shrink_is_stored_shown_and_sent_to_the_agent(world: World) -> None:
    big, small = _running_elastic(world)
    before = world.get(big)["placement"]
    assert (world.get(big)["pods"], world.get(big)["pods_running"]) == (8, 8)
    world.cycle_with_shrink(big, 2, small)

    view = world.get(big)
    assert view["status"] == "Running" and view["attempt"] == 1
    assert (view["pods"], view["pods_running"]) == (8, 6)
    assert view["placement"] == before[:6]
    assert [(p["kind"], p["by"], p["pods"], p["gpus"], p["attempt"])
            for p in view["preemptions"]] == [("shrink", small, [6, 7], 2, 1)]
    stop = world.decisions()[-1]
    assert (stop["kind"], stop["pods"], stop["grace_seconds"]) == ("shrink", [6, 7], GRACE)
    assert stop["run_id"] == f"w{big}-a1" and stop["reason"] == "preempted"
    assert stop["placement"] == before[6:]  # physical device numbers
    shrunk = [e for e in world.events(big) if e["message"].startswith("shrunk")]
    assert [(e["status"], e["message"]) for e in shrunk] == [
        ("Running", f"shrunk: pods 6-7 preempted by workload {small}")]
    sample = world.metrics.registry.get_sample_value(
        "apportion_preemptions_total", {"org": "default", "team": "t"})
    assert sample == 1


def test_exiting_parts_persist_and_reload_unchanged(world: World) -> None:
    big, small = _running_elastic(world)
    before = world.get(big)["placement"]
    world.cycle_with_shrink(big, 2, small)
    world.cycle_with_shrink(big, 2, small)  # a second shrink of the same attempt
    with world.db.read() as s:
        rows = wl_repo.list_exiting(s, world.admin.org_id)
        parts = sorted((r.workload_id, r.attempt, r.part, len(r.placement)) for r in rows)
        assert parts == [(big, 1, 5, 2), (big, 1, 7, 2)]
        assert sorted((r.part, r.placement[0]) for r in rows) == [(5, before[4]),
                                                                  (7, before[6])]
        exiting = load_snapshot(s, world.admin.org_id, time.time()).snapshot.exiting
    assert sorted(e.part for e in exiting) == [5, 7]
    assert world.get(big)["pods_running"] == 4
    assert [p["pods"] for p in world.get(big)["preemptions"]] == [[6, 7], [4, 5]]


def test_the_agents_shrink_report_is_neither_failure_nor_completion(world: World) -> None:
    big, small = _running_elastic(world)
    world.cycle_with_shrink(big, 2, small)
    answer = world.report(big, "running", pods_running=6,
                          message="shrunk: pods 6-7 stopped (preempted); 6 pod(s) running")
    assert answer["accepted"] and answer["status"] == "Running" and answer["note"] == ""
    assert world.get(big)["status"] == "Running"
    done = [e for e in world.events(big) if e["type"] == "workload.pods"]
    assert [(e["message"], e["data"]["pods_running"]) for e in done] == [
        ("shrunk: pods 6-7 stopped (preempted); 6 pod(s) running", 6)]


def test_a_whole_preemption_after_a_shrink_stops_the_rest(world: World) -> None:
    from apportion.engine.plan import Decision, DecisionKind

    big, small = _running_elastic(world)
    world.cycle_with_shrink(big, 2, small)
    org = world.admin.org_id
    with world.db.read() as s:
        loaded = load_snapshot(s, org, time.time())
    plan = _run(loaded)
    from dataclasses import replace

    kill = Decision(DecisionKind.PREEMPT, big, pool="main", by=small, milli=6000,
                    exits_at=plan.now + GRACE)
    plan = replace(plan, decisions=(*plan.decisions, kill))
    with world.db.write() as s:
        world.sched._commit(s, org, loaded, plan, time.perf_counter())
    view = world.get(big)
    assert view["status"] == "Preempted" and view["pods_running"] == 0
    assert [p["kind"] for p in view["preemptions"]] == ["shrink", "whole"]
    stop = world.decisions()[-1]
    assert (stop["kind"], stop["pods"], len(stop["placement"])) == ("stop", [], 6)
    with world.db.read() as s:
        parts = sorted(r.part for r in wl_repo.list_exiting(s, org))
    assert parts == [0, 7]
