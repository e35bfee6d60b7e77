"""An agent silent past the timeout: its nodes become unknown (no new pods),
its workloads keep their status; when it returns it reconciles.

Time is a ManualClock: the test makes the silence last past the timeout (and
checks that it did not count as silence before), so a slow machine changes nothing."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.api.conftest import Api, make_api
from tests.timing import ManualClock

TIMEOUT = 30.0


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def quick_api(backend_url: str, clock: ManualClock) -> Iterator[Api]:
    yield from make_api(backend_url, clock, agent_timeout=TIMEOUT)


def _pool_agent(api: Api) -> str:
    return str(api.ok("GET", "/v1/pools/main")["agent"]["status"])


def test_silent_agent_marks_nodes_unknown_and_reconciles(quick_api: Api,
                                                         clock: ManualClock) -> None:
    api = quick_api
    agent = api.org(gpus_per_node=8)
    w = api.submit(name="long", team="nlp", gpus=2)
    api.cycle()
    assert api.workload(w["id"])["status"] == "Starting"
    clock.advance(TIMEOUT - 1)  # quiet, but not yet past the timeout
    api.cycle()
    assert _pool_agent(api) == "connected"
    assert api.ok("GET", "/v1/nodes/n1")["health"] == "ready"
    clock.advance(5)  # silent past the timeout, and the sweep's period (5 s) has passed
    api.cycle()  # the sweep runs inside the scheduler's tick
    assert _pool_agent(api) == "silent"
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
    clock.advance(10)  # a sweep after the return does not find it silent again
    api.cycle()
    assert _pool_agent(api) == "connected"
    assert api.workload(late["id"])["status"] == "Starting"
    events = api.ok("GET", "/v1/events", params={"type": "pool.agent"})
    messages = sorted(e["message"].split()[4] for e in events)
    assert messages == ["connected", "connected", "silent"], events


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
