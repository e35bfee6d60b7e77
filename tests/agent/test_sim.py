"""Decision → sim executor → status, against a real control plane."""

from __future__ import annotations

from typing import Any

from apportion.agent.executors.sim import SimExecutor
from apportion.agent.model import NodeInfo
from tests.agent.conftest import Cluster, wait_for

NODES = [NodeInfo(f"n{i}", 8, "h100", 81920, {"rack": f"r{(i + 1) // 2}"}) for i in (1, 2)]


def test_round_trip_start_run_complete(cluster: Cluster) -> None:
    sim = SimExecutor(NODES, speed=10.0)
    cluster.agent(sim)
    wait_for(lambda: cluster.admin.get_pool("main")["capacity"] == 16, 10, "nodes registered")
    wid = cluster.submit(gpus=2, pods=2, duration=5)  # 0.5 s of wall time at speed 10
    running = cluster.wait_status(wid, "Running")
    assert len(running["placement"]) == 2
    done = cluster.wait_status(wid, "Completed")
    assert done["ended_at"] is not None
    assert sim.started == [f"w{wid}-a1"]


def test_injected_failure_is_reported(cluster: Cluster) -> None:
    sim = SimExecutor(NODES, speed=10.0, failures=[{"name": "flaky*", "after": 2}])
    cluster.agent(sim)
    wait_for(lambda: cluster.admin.get_pool("main")["capacity"] == 16, 10, "nodes registered")
    wid = cluster.submit(name="flaky-1", gpus=1, duration=100)
    failed = cluster.wait_status(wid, "Failed")
    assert failed["status"] == "Failed"


def test_preemption_stops_the_victim(cluster: Cluster) -> None:
    sim = SimExecutor(NODES, speed=1.0)
    cluster.agent(sim)
    wait_for(lambda: cluster.admin.get_pool("main")["capacity"] == 16, 10, "nodes registered")
    low = cluster.submit(name="low", team="vision", gpus=8, pods=2, priority=10)
    cluster.wait_status(low, "Running")
    high = cluster.submit(name="high", team="production", gpus=8, priority=90, duration=1)
    cluster.wait_status(low, "Preempted")
    cluster.wait_status(high, "Running", timeout=15)
    wait_for(lambda: f"w{low}-a1" not in sim.runs, 10, "victim stopped and forgotten")
    cluster.wait_status(high, "Completed")


def test_cancel_stops_the_run(cluster: Cluster) -> None:
    sim = SimExecutor(NODES, speed=1.0)
    cluster.agent(sim)
    wait_for(lambda: cluster.admin.get_pool("main")["capacity"] == 16, 10, "nodes registered")
    wid = cluster.submit(gpus=1)
    cluster.wait_status(wid, "Running")
    cluster.admin.cancel_workload(wid)
    wait_for(lambda: f"w{wid}-a1" not in sim.runs, 10, "cancelled run stopped")
    assert cluster.status(wid) == "Cancelled"


def test_a_shrink_stops_only_the_taken_pods(cluster: Cluster, monkeypatch: Any) -> None:
    """End to end (SPEC 6.5): the scheduler shrinks a Running elastic workload by
    two pods (tests/shrinkplan.py adds the decision to the real engine's plan),
    the agent stops exactly those, reports back, and the workload stays Running
    on the others while a waiting workload starts on the freed devices."""
    from apportion.service import scheduler
    from tests.shrinkplan import shrinking_run

    sim = SimExecutor(NODES, speed=1.0)
    agent = cluster.agent(sim)
    wait_for(lambda: cluster.admin.get_pool("main")["capacity"] == 16, 10, "nodes registered")
    big = cluster.submit(name="big", team="vision", gpus=2, pods=8, min_pods=4, priority=20)
    cluster.wait_status(big, "Running")
    small = cluster.submit(name="small", team="vision", gpus=2, priority=10, duration=600)
    monkeypatch.setattr(scheduler, "_run",
                        shrinking_run(scheduler._run, big, 2, lambda: small, grace=1))
    run_id = f"w{big}-a1"
    wait_for(lambda: sim.pods_running(run_id) == 6, 10, "two pods stopped")
    assert agent.agent.state.runs[run_id].run.stopped == (6, 7)
    events = wait_for(lambda: [e for e in cluster.admin.workload_events(big, limit=100).items
                               if e["type"] == "workload.pods"], 10, "the agent's report")
    assert events[0]["message"] == "shrunk: pods 6-7 stopped (preempted); 6 pod(s) running"
    cluster.wait_status(small, "Running", timeout=15)  # on the devices the shrink freed
    view = cluster.admin.get_workload(big)
    assert (view["status"], view["pods"], view["pods_running"]) == ("Running", 8, 6)
    assert [(p["kind"], p["by"], p["pods"]) for p in view["preemptions"]] == [
        ("shrink", small, [6, 7])]
    assert sim.pods_running(run_id) == 6 and cluster.status(big) == "Running"


def test_sim_nodes_from_config_carry_host_resources() -> None:
    import pytest

    from apportion.agent.inventory import nodes_from_config

    nodes = nodes_from_config({"nodes": [{"name": "a1", "gpus": 8, "cpu": 96,
                                          "memory_mib": 786432}, {"name": "a2", "gpus": 8}]})
    assert [(n.cpu_milli, n.memory_mib) for n in nodes] == [(96000, 786432), (None, None)]
    assert nodes[0].to_json()["cpu"] == 96
    with pytest.raises(ValueError, match=r"nodes\[0\].cpu: must be a multiple of 0.001"):
        nodes_from_config({"nodes": [{"name": "a1", "gpus": 8, "cpu": "lots"}]})
