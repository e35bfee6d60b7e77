"""``GET /v1/workloads/{id}/victims``: the workloads one preempted, on SQLite and
PostgreSQL."""

from __future__ import annotations

from tests.api.conftest import Api


def test_victims_lists_what_a_workload_preempted(api: Api) -> None:
    agent = api.org()  # pool main, one 8-GPU node
    api.ok("PUT", "/v1/reservations/research/main", json={"gpus": 8})
    api.ok("PUT", "/v1/reservations/nlp/main", json={"gpus": 8})
    victim = api.submit(name="batch", team="vision", gpus=8, priority=20)["id"]
    api.cycle()
    api.ok("POST", "/v1/agent/reports", agent, json={
        "workload_id": victim, "attempt": 1, "run_id": f"w{victim}-a1", "status": "running"})
    urgent = api.submit(name="urgent", team="nlp", gpus=8, **{"class": "reserved"})["id"]
    api.cycle()
    assert api.workload(victim)["status"] == "Preempted"
    assert api.ok("GET", f"/v1/workloads/{urgent}/victims") == [
        {"workload_id": victim, "name": "batch", "team": "vision", "attempt": 1}]
    assert api.ok("GET", f"/v1/workloads/{victim}/victims") == []
    r = api.call("GET", "/v1/workloads/999999/victims")
    assert r.status_code == 404 and r.json()["error"]["code"], r.text
