"""A workload's life through the API: submit -> scheduled -> agent runs it ->
completed; cancellation; preemption; why; dry-run; stale agent reports."""

from __future__ import annotations

from tests.api.conftest import Api


def test_submit_schedule_run_complete(api: Api) -> None:
    agent = api.org()
    w = api.submit(name="train", team="nlp", gpus=2, pods=2)
    assert w["status"] == "Pending" and w["submitted_by"] == "default-admin"
    assert api.cycle() >= 1
    w = api.workload(w["id"])
    assert w["status"] == "Starting" and w["pool"] == "main" and w["gpus"] == 4
    decisions = api.ok("GET", "/v1/agent/decisions", agent)
    start = [d for d in decisions if d["workload_id"] == w["id"]]
    assert start[0]["kind"] == "start" and start[0]["run_id"] == f"w{w['id']}-a1"
    assert sum(len(p["devices"]) for p in start[0]["placement"]) == 4
    report = {"workload_id": w["id"], "attempt": 1, "run_id": start[0]["run_id"]}
    assert api.ok("POST", "/v1/agent/reports", agent, json={**report, "status": "running"})[
        "accepted"]
    again = api.ok("POST", "/v1/agent/reports", agent, json={**report, "status": "running"})
    assert again["accepted"] and again["status"] == "Running"  # idempotent
    api.ok("POST", "/v1/agent/reports", agent, json={**report, "status": "completed"})
    w = api.workload(w["id"])
    assert w["status"] == "Completed" and w["ended_at"] is not None
    statuses = [e["status"] for e in api.ok("GET", f"/v1/workloads/{w['id']}/events")]
    assert statuses == ["Pending", "Queued", "Starting", "Running", "Completed"]
    late = api.ok("POST", "/v1/agent/reports", agent, json={**report, "status": "failed"})
    assert late["accepted"] is False and "terminal" in late["note"]


def test_cancel_running_sends_stop_and_is_final(api: Api) -> None:
    agent = api.org()
    w = api.submit(name="x", team="vision", gpus=1)
    api.cycle()
    w2 = api.ok("POST", f"/v1/workloads/{w['id']}/cancel", json={"message": "no longer needed"})
    assert w2["status"] == "Cancelled"
    kinds = [(d["kind"], d["reason"]) for d in api.ok("GET", "/v1/agent/decisions", agent)]
    assert ("stop", "cancelled") in kinds
    r = api.call("POST", f"/v1/workloads/{w['id']}/cancel")
    assert r.status_code == 409 and r.json()["error"]["code"] == "CONFLICT"


def test_audit_lists_the_ignored_reports_by_their_outcome(api: Api) -> None:
    """Ignored agent reports are audited with outcome ``ignored``; the audit
    filter refused that outcome (400, allowed: ok, denied), so they could be
    found only by reading the whole audit (found by tests/chaos/test_partition.py)."""
    agent = api.org()
    w = api.submit(name="x", team="vision", gpus=1)
    api.cycle()
    api.ok("POST", f"/v1/workloads/{w['id']}/cancel")
    late = api.ok("POST", "/v1/agent/reports", agent,
                  json={"workload_id": w["id"], "attempt": 1, "status": "completed"})
    assert late["accepted"] is False
    ignored = api.ok("GET", "/v1/audit", params={"action": "agent.report",
                                                "outcome": "ignored"})
    assert [(a["object"], a["outcome"]) for a in ignored] == [(f"workload/{w['id']}",
                                                               "ignored")]
    assert ignored[0]["after"]["status"] == "completed"
    ok = api.ok("GET", "/v1/audit", params={"action": "agent.report", "outcome": "ok"})
    assert all(a["outcome"] == "ok" for a in ok)


def test_elastic_preempted_by_higher_priority_and_stale_attempt_ignored(api: Api) -> None:
    agent = api.org(gpus_per_node=8)
    low = api.submit(name="sweep", team="nlp", gpus=8, priority=50, requeue_on_preemption=True)
    api.cycle()
    assert api.workload(low["id"])["status"] == "Starting"
    high = api.submit(name="urgent", team="production", gpus=8, priority=75)
    api.cycle()
    assert api.workload(high["id"])["status"] == "Starting"
    low_now = api.workload(low["id"])
    assert low_now["attempt"] == 2 and low_now["status"] in ("Pending", "Queued")
    assert low_now["attempts"][0]["status"] == "Preempted"
    assert low_now["attempts"][0]["preempted_by"] == high["id"]
    stops = [d for d in api.ok("GET", "/v1/agent/decisions", agent) if d["kind"] == "stop"]
    assert stops and stops[0]["workload_id"] == low["id"] and stops[0]["attempt"] == 1
    old = api.ok("POST", "/v1/agent/reports", agent,
                 json={"workload_id": low["id"], "attempt": 1, "status": "completed"})
    assert old["accepted"] is False and "stale" in old["note"]
    audit = api.ok("GET", "/v1/audit", params={"action": "agent.report"})
    assert any(a["outcome"] == "ignored" for a in audit)
    why = api.ok("GET", f"/v1/workloads/{low['id']}/why")
    # 8 GPUs, all held by the higher-priority workload: the fair share of nlp's priority
    # level is 0, so it waits on fair share (it may not preempt a higher priority).
    assert why["reason"]["code"] == "FAIR_SHARE", why
    assert "entitlement of team nlp: 0" in why["reason"]["message"]
    metrics = api.client.get("/metrics").text
    assert 'apportion_preemptions_total{org="default",team="nlp"} 1.0' in metrics
    assert "apportion_pending_workloads" in metrics
    assert 'apportion_time_to_admission_seconds_count{org="default",team="production"}' in metrics
    assert "apportion_cycle_duration_seconds_count" in metrics
    assert 'apportion_gpus_in_use{kind="elastic",org="default",team="production"} 8.0' in metrics


def test_dry_run_changes_nothing(api: Api) -> None:
    api.org(gpus_per_node=8)
    api.submit(name="a", team="nlp", gpus=8, priority=10)
    api.cycle()
    before = api.ok("GET", "/v1/workloads")
    out = api.ok("POST", "/v1/workloads/dry-run",
                 json={"name": "b", "team": "production", "gpus": 8, "priority": 90})
    assert out["pool"] == "main"  # with grace 0 the victims exit at once: starts now
    assert [v["workload_id"] for v in out["victims"]] == [before[0]["id"]]
    assert api.ok("GET", "/v1/workloads") == before


def test_waiting_workload_explains_itself(api: Api) -> None:
    api.org(gpus_per_node=8)
    w = api.submit(name="huge", team="nlp", gpus=16)
    api.cycle()
    why = api.ok("GET", f"/v1/workloads/{w['id']}/why")
    assert why["status"] == "Pending"
    assert why["reason"]["code"] == "NO_ELIGIBLE_POOL"
    assert why["reason"]["code"] in why["explanation"]


def test_node_down_fails_its_workloads(api: Api) -> None:
    agent = api.org(gpus_per_node=8, nodes=2)
    w = api.submit(name="x", team="nlp", gpus=8)
    api.cycle()
    node = api.workload(w["id"])["placement"][0]["node"]
    other = "n2" if node == "n1" else "n1"
    api.ok("POST", "/v1/agent/heartbeat", agent, json={"nodes": [
        {"name": node, "gpus": 8, "health": "down"}, {"name": other, "gpus": 8}]})
    assert api.workload(w["id"])["status"] == "Failed"
    assert api.ok("GET", f"/v1/nodes/{node}")["state"] == "down"
    assert api.ok("GET", "/v1/capacity/pools")[0]["capacity"] == 8


def test_unmanaged_gpu_use_is_unavailable(api: Api) -> None:
    agent = api.org(gpus_per_node=4)
    api.ok("POST", "/v1/agent/heartbeat", agent, json={"nodes": [
        {"name": "n1", "gpus": 4, "unavailable": [{"index": 1, "milli": 1000},
                                                  {"index": 2, "milli": 250}]}]})
    node = api.ok("GET", "/v1/nodes/n1")
    assert node["unavailable_gpus"] == 1.25
    w = api.submit(name="two", team="nlp", gpus=2)
    api.cycle()
    placed = api.workload(w["id"])
    assert placed["status"] == "Starting"
    assert sorted(d["index"] for p in placed["placement"] for d in p["devices"]) == [0, 3]
    w2 = api.submit(name="more", team="nlp", gpus=0.25)
    api.cycle()
    assert api.workload(w2["id"])["status"] == "Queued"  # devices 1 and 2 are not ours
    assert api.ok("GET", "/v1/capacity/pools")[0]["free"] == 0.75


def test_why_carries_the_fair_share_of_the_team_and_its_ancestors(api: Api) -> None:
    api.org(gpus_per_node=8, nodes=1)
    api.ok("PUT", "/v1/reservations/research/main", json={"gpus": 4})
    api.ok("PUT", "/v1/reservations/nlp/main", json={"gpus": 2})
    api.ok("PATCH", "/v1/teams/research", json={"burst_limit_percent": 50})
    running = api.submit(name="r", team="nlp", gpus=2, **{"class": "reserved"})
    api.cycle()
    why = api.ok("GET", f"/v1/workloads/{running['id']}/why")
    assert [(r["team"], r["pool"]) for r in why["fair_share"]] == [("nlp", "main"),
                                                                   ("research", "main")]
    nlp, research = why["fair_share"]
    assert (nlp["reservation"], nlp["reserved_in_use"], nlp["elastic_in_use"]) == (2, 2, 0)
    assert (research["reservation"], research["reserved_in_use"]) == (4, 2)
    assert research["burst_cap"] == 6  # reservation 4 + 50 % of it
    assert set(nlp) == {"team", "pool", "reservation", "reserved_in_use", "elastic_in_use",
                        "entitlement", "burst_cap"}
    unplaced = api.submit(name="u", team="vision", gpus=1, pool="nowhere")  # no such pool
    rows = api.ok("GET", f"/v1/workloads/{unplaced['id']}/why")["fair_share"]
    assert [(r["team"], r["pool"]) for r in rows] == [("vision", "main"), ("research", "main")]
