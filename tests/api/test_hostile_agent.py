"""Hostile or confused input on the agent endpoints (issue 18, part 6): a clear
refusal for what an agent may not do, nothing else lost, each denial audited;
on SQLite and PostgreSQL."""

from __future__ import annotations

from tests.api.conftest import Api


def _two_pools(api: Api) -> tuple[dict[str, str], dict[str, str], int]:
    """Pools main and other, each with an agent and a node; a workload runs in other."""
    agent = api.org()
    api.ok("POST", "/v1/pools", json={"name": "other"})
    other = api.token("agent-other", "agent", pool="other")
    api.ok("POST", "/v1/agent/heartbeat", other, json={"nodes": [{"name": "o1", "gpus": 8}]})
    wid = int(api.submit(team="nlp", gpus=1, pool="other")["id"])
    api.cycle()
    assert api.workload(wid)["pool"] == "other"
    return agent, other, wid


def test_a_heartbeat_with_runs_it_may_not_report_keeps_its_nodes(api: Api) -> None:
    # An agent whose state file is stale or corrupt heartbeats runs of a workload
    # that does not exist and of another pool's workload. Before: the whole
    # heartbeat failed (404 / 403), its node inventory was lost with it, and the
    # agent retried the same heartbeat for ever while its nodes went unknown.
    agent, _, wid = _two_pools(api)
    r = api.call("POST", "/v1/agent/heartbeat", agent, json={
        "nodes": [{"name": "n1", "gpus": 8}, {"name": "n2", "gpus": 4}],
        "runs": [{"workload_id": 999_999, "attempt": 1, "run_id": "w999999-a1",
                  "status": "running"},
                 {"workload_id": wid, "attempt": 1, "run_id": f"w{wid}-a1",
                  "status": "completed"}]})
    assert r.status_code == 200, r.text
    answer = r.json()["data"]
    assert answer["stop_runs"] == sorted(["w999999-a1", f"w{wid}-a1"])
    assert {n["name"] for n in api.ok("GET", "/v1/nodes?pool=main")} == {"n1", "n2"}
    # the other pool's workload is untouched
    assert api.workload(wid)["status"] in ("Starting", "Running")
    denials = api.ok("GET", "/v1/audit", params={"action": "agent.report",
                                                  "outcome": "denied"})
    messages = " ".join(d.get("message") or "" for d in denials)
    assert len(denials) == 2 and "999999" in messages, denials


def test_a_report_on_another_pools_workload_is_refused_and_changes_nothing(api: Api) -> None:
    agent, _, wid = _two_pools(api)
    before = api.workload(wid)
    r = api.call("POST", "/v1/agent/reports", agent, json={
        "workload_id": wid, "attempt": 1, "run_id": f"w{wid}-a1", "status": "failed"})
    assert r.status_code == 403, r.text
    assert api.workload(wid)["status"] == before["status"]
    r = api.call("POST", "/v1/agent/reports", agent, json={
        "workload_id": 999_999, "attempt": 1, "run_id": "x", "status": "running"})
    assert r.status_code == 404, r.text
