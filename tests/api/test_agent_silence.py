"""An agent silent past the timeout: its nodes become unknown (no new pods),
its workloads keep their status; when it returns it reconciles."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from tests.api.conftest import Api, make_api


@pytest.fixture
def quick_api(backend_url: str) -> Iterator[Api]:
    yield from make_api(backend_url, agent_timeout=0.3)


def test_silent_agent_marks_nodes_unknown_and_reconciles(quick_api: Api) -> None:
    api = quick_api
    agent = api.org(gpus_per_node=8)
    w = api.submit(name="long", team="nlp", gpus=2)
    api.cycle()
    assert api.workload(w["id"])["status"] == "Starting"
    time.sleep(0.5)
    api.cycle()  # the sweep runs inside the scheduler's tick
    assert api.ok("GET", "/v1/pools/main")["agent"]["status"] == "silent"
    node = api.ok("GET", "/v1/nodes/n1")
    assert node["health"] == "unknown" and node["state"] == "unknown"
    assert api.workload(w["id"])["status"] == "Starting"  # kept until the agent returns
    late = api.submit(name="late", team="nlp", gpus=1)
    api.cycle()
    assert api.workload(late["id"])["status"] in ("Pending", "Queued")  # no new pods there
    api.ok("POST", "/v1/agent/heartbeat", agent, json={
        "nodes": [{"name": "n1", "gpus": 8}],
        "runs": [{"workload_id": w["id"], "attempt": 1, "status": "running"}]})
    assert api.workload(w["id"])["status"] == "Running"
    assert api.ok("GET", "/v1/nodes/n1")["state"] == "ready"
    api.cycle()
    assert api.workload(late["id"])["status"] == "Starting"
    kinds = [e["type"] for e in api.ok("GET", "/v1/events", params={"type": "pool.agent"})]
    assert len(kinds) == 3  # connected, silent, connected


def test_keepalive_heartbeat_keeps_the_inventory(api: Api) -> None:
    agent = api.org(gpus_per_node=8, nodes=2)
    w = api.submit(name="x", team="nlp", gpus=1)
    api.cycle()
    api.ok("POST", "/v1/agent/heartbeat", agent, json={})
    assert [n["state"] for n in api.ok("GET", "/v1/nodes")] == ["ready", "ready"]
    assert api.workload(w["id"])["status"] == "Starting"
    api.ok("POST", "/v1/agent/heartbeat", agent, json={"nodes": []})
    assert [n["state"] for n in api.ok("GET", "/v1/nodes")] == ["down", "down"]
    assert api.workload(w["id"])["status"] == "Failed"
