"""A preempted victim whose agent reports it has exited frees its devices at
once: the workload nominated on them starts in the next cycle instead of
waiting out the pool's preemption grace (issue 20: "waiting for 0 preempted
workloads (0 GPUs) to exit" for 5 s under the local executor)."""

from __future__ import annotations

from typing import Any

from tests.api.conftest import Api


def _start(api: Api, agent: dict[str, str], wid: int) -> dict[str, Any]:
    decisions = api.ok("GET", "/v1/agent/decisions", agent)
    start = next(d for d in decisions if d["workload_id"] == wid and d["kind"] == "start")
    api.ok("POST", "/v1/agent/reports", agent, json={
        "workload_id": wid, "attempt": 1, "run_id": start["run_id"], "status": "running"})
    return start


def test_a_victims_exit_report_lets_the_nominee_start_before_the_grace(api: Api) -> None:
    agent = api.org(gpus_per_node=8)
    api.ok("PATCH", "/v1/pools/main", json={"preemption_grace": 600})
    api.ok("PUT", "/v1/reservations/production/main", json={"gpus": 8})
    victim = api.submit(name="victim", team="nlp", gpus=8, priority=10)
    api.cycle()
    start = _start(api, agent, victim["id"])
    boss = api.submit(name="boss", team="production", gpus=8, **{"class": "reserved"})
    api.cycle()
    assert api.workload(victim["id"])["status"] == "Preempted"
    waiting = api.workload(boss["id"])
    assert waiting["status"] == "Queued" and waiting["reason"]["code"] == "PREEMPTING"
    api.cycle()
    assert api.workload(boss["id"])["status"] == "Queued"  # the grace has 600 s to run
    answer = api.ok("POST", "/v1/agent/reports", agent, json={
        "workload_id": victim["id"], "attempt": 1, "run_id": start["run_id"],
        "status": "failed", "message": "stopped after a stop decision"})
    assert answer["accepted"] is False and "devices are free" in answer["note"]
    assert answer["status"] == "Preempted"
    api.cycle()
    started = api.workload(boss["id"])
    assert started["status"] == "Starting" and started["reason"] is None
    # the same report again changes nothing
    again = api.ok("POST", "/v1/agent/reports", agent, json={
        "workload_id": victim["id"], "attempt": 1, "run_id": start["run_id"],
        "status": "failed"})
    assert again["accepted"] is False and "devices are free" not in again["note"]
