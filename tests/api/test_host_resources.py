"""Host CPU and memory (SPEC 1, 5) and a pool's ``packing`` through the API, on
SQLite and PostgreSQL: parsed, validated, stored and shown."""

from __future__ import annotations

import pytest

from tests.api.conftest import Api


def test_a_workloads_cpu_and_memory_are_stored_and_shown(api: Api) -> None:
    api.org()
    w = api.submit(team="nlp", gpus=1, pods=2, cpu=0.5, memory_mib=16384)
    again = api.workload(w["id"])
    assert (again["spec"]["cpu"], again["spec"]["memory_mib"]) == (0.5, 16384)
    plain = api.workload(api.submit(team="nlp", gpus=1)["id"])
    assert (plain["spec"]["cpu"], plain["spec"]["memory_mib"]) == (0, 0)
    api.cycle()  # the node states no CPU or memory (not limited): both start on it
    assert api.workload(w["id"])["status"] == "Starting"


@pytest.mark.parametrize(("body", "field", "words"), [
    pytest.param({"cpu": 0.0001}, "cpu", "multiple of 0.001", id="cpu-step"),
    pytest.param({"cpu": -1}, "cpu", "multiple of 0.001", id="cpu-negative"),
    pytest.param({"memory_mib": -5}, "memory_mib", "whole number of MiB", id="memory-negative"),
])
def test_bad_cpu_or_memory_is_a_422_naming_the_field(
    api: Api, body: dict[str, object], field: str, words: str
) -> None:
    api.org()
    r = api.call("POST", "/v1/workloads", json={"name": "bad", "team": "nlp", "gpus": 1, **body})
    assert r.status_code == 422, r.text
    err = r.json()["error"]
    assert err["details"]["field"] == field and words in err["message"]


def test_pool_packing_is_stored_validated_and_shown(api: Api) -> None:
    assert api.ok("POST", "/v1/pools", json={"name": "p1"})["packing"] == "fragmentation"
    made = api.ok("POST", "/v1/pools", json={"name": "p2", "packing": "best_fit"})
    assert made["packing"] == "best_fit"
    changed = api.ok("PATCH", "/v1/pools/p2", json={"packing": "fragmentation"})
    assert changed["packing"] == "fragmentation"
    assert api.ok("PATCH", "/v1/pools/p2", json={"preemption_grace": 5})["packing"] == \
        "fragmentation"
    r = api.call("POST", "/v1/pools", json={"name": "p3", "packing": "tight"})
    assert r.status_code == 422, r.text
    err = r.json()["error"]
    assert err["details"]["field"] == "packing"
    assert "fragmentation, best_fit" in err["details"]["allowed"]


def test_heartbeat_cpu_and_memory_are_stored_and_shown_per_node(api: Api) -> None:
    api.ok("POST", "/v1/pools", json={"name": "main"})
    agent = api.token("agent-main", "agent", pool="main")
    api.ok("POST", "/v1/agent/heartbeat", agent, json={"nodes": [
        {"name": "a1", "gpus": 8, "cpu": 95.5, "memory_mib": 786432},
        {"name": "a2", "gpus": 8}]})
    nodes = {n["name"]: n for n in api.ok("GET", "/v1/nodes")}
    assert (nodes["a1"]["cpu"], nodes["a1"]["memory_mib"]) == (95.5, 786432)
    assert (nodes["a2"]["cpu"], nodes["a2"]["memory_mib"]) == (None, None)
    r = api.call("POST", "/v1/agent/heartbeat", agent, json={"nodes": [
        {"name": "a1", "gpus": 8, "cpu": -4}]})
    assert r.status_code == 422, r.text
    assert r.json()["error"]["details"]["field"] == "nodes[0].cpu"


def test_a_pools_typical_pods_are_stored_validated_shown_and_used(api: Api) -> None:
    # default: null (a whole node of each node size, docs/placement.md)
    assert api.ok("POST", "/v1/pools", json={"name": "p1"})["typical_pods"] is None
    made = api.ok("POST", "/v1/pools", json={"name": "p2", "typical_pods": [
        {"gpus": 0.5, "count": 4, "cpu": 2, "memory_mib": 65536}, {"gpus": 4}]})
    assert made["typical_pods"] == [
        {"gpus": 0.5, "count": 4, "cpu": 2, "memory_mib": 65536},
        {"gpus": 4, "count": 1, "cpu": 0, "memory_mib": 0}]
    # a PATCH of another field keeps them; [] is "no prior"; null is the default again
    assert api.ok("PATCH", "/v1/pools/p2", json={"preemption_grace": 5})["typical_pods"] == \
        made["typical_pods"]
    assert api.ok("PATCH", "/v1/pools/p2", json={"typical_pods": []})["typical_pods"] == []
    assert api.ok("PATCH", "/v1/pools/p2", json={"typical_pods": None})["typical_pods"] is None
    for body, field, words in (
            ({"typical_pods": [{"gpus": 0.3}]}, "typical_pods[0].gpus", "0.25, 0.5, 0.75"),
            ({"typical_pods": [{"gpus": 1, "count": 0}]}, "count", ""),
            ({"typical_pods": [{"gpus": 1, "cuont": 2}]}, "cuont", "count")):
        r = api.call("POST", "/v1/pools", json={"name": "p3", **body})
        assert r.status_code == 422, r.text
        err = r.json()["error"]
        assert field in err["details"]["field"] and words in r.text, r.text
    assert "p3" not in {p["name"] for p in api.ok("GET", "/v1/pools")}


def test_typical_pods_steer_where_a_share_goes(api: Api) -> None:
    # Two 8-GPU nodes, one running a reserved 4-GPU job. With the default prior
    # the next half GPU goes beside it (the empty node stays whole); a pool
    # told it runs only half GPUs and 4-GPU jobs places it as FGD would, on
    # the empty node.
    for typical, expect_beside in ((None, True), ([{"gpus": 0.5}, {"gpus": 4}], False)):
        name = "whole" if typical is None else "told"
        api.ok("POST", "/v1/pools", json={"name": name, "typical_pods": typical})
        agent = api.token(f"agent-{name}", "agent", pool=name)
        api.ok("POST", "/v1/agent/heartbeat", agent, json={"nodes": [
            {"name": f"{name}-a", "gpus": 8}, {"name": f"{name}-b", "gpus": 8}]})
        api.ok("POST", "/v1/teams", json={"slug": f"{name}-t"})
        api.ok("PUT", f"/v1/reservations/{name}-t/{name}", json={"gpus": 4})
        big = api.submit(team=f"{name}-t", gpus=4, pool=name, **{"class": "reserved"})
        api.cycle()
        half = api.submit(team=f"{name}-t", gpus=0.5, pool=name)
        api.cycle()
        where = {p["node"] for p in api.workload(big["id"])["placement"]}
        half_at = {p["node"] for p in api.workload(half["id"])["placement"]}
        assert (half_at == where) is expect_beside, (typical, where, half_at)


def test_an_exiting_victim_keeps_its_cpu_through_the_grace(api: Api) -> None:
    # Through the service (snapshot from the store): the preempted victim is no
    # longer live, so its pods' CPU must come from its stored spec.
    api.ok("POST", "/v1/pools", json={"name": "main", "preemption_grace": 600})
    agent = api.token("agent-main", "agent", pool="main")
    api.ok("POST", "/v1/agent/heartbeat", agent, json={"nodes": [
        {"name": "n1", "gpus": 2, "cpu": 24}]})
    api.ok("POST", "/v1/teams", json={"slug": "t"})
    victim = api.submit(team="t", gpus=1, cpu=20, priority=10)["id"]
    api.cycle()
    api.ok("POST", "/v1/agent/reports", agent, json={
        "workload_id": victim, "attempt": 1, "run_id": f"w{victim}-a1", "status": "running"})
    first = api.submit(team="t", gpus=1, cpu=20, priority=60)["id"]
    api.cycle()
    assert api.workload(victim)["status"] == "Preempted"
    api.ok("POST", f"/v1/workloads/{first}/cancel", json={})
    x = api.submit(team="t", gpus=1, cpu=20, priority=5)["id"]
    api.cycle()
    api.cycle()
    w = api.workload(x)
    assert w["status"] == "Queued", w  # 20 + 20 CPUs would not fit 24
    assert f"preempted workload {victim}" in w["reason"]["message"], w["reason"]
