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
