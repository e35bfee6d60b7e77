"""Idle GPUs while work waits, split by why (metrics._idle), and the work
balance that explains utilization (metrics._work_balance)."""

from __future__ import annotations

from typing import Any

import pytest

from apportion.replay import metrics
from apportion.replay.org import parse_org
from apportion.replay.policies import POLICIES, build
from apportion.replay.trace import Trace, TraceJob
from apportion.sim.runner import simulate


def measure(policy: str, nodes: list[dict[str, Any]], teams: list[dict[str, Any]],
            jobs: list[TraceJob], until: int = 100) -> dict[str, Any]:
    org = parse_org({"cluster": {"nodes": nodes}, "teams": teams,
                     "mapping": {"teams": {"by": "field"}}})
    base, _ = build("apportion", org, Trace("t", tuple(jobs)))
    scenario, team_by_name = build(policy, org, Trace("t", tuple(jobs)))
    result = simulate(scenario, until=until, policy=POLICIES[policy])
    return metrics.compute(result, team_by_name, base.tree, "main", 0, until)


def one_gpu(name: str, team: str, klass: str, at: int = 0, gpus: int = 1,
            duration: int = 1000, gpu_type: str = "") -> TraceJob:
    return TraceJob(name, at, duration, gpus * 1000, team=team, wclass=klass,
                    priority=100 if klass == "reserved" else 50,
                    gpu_types=(gpu_type,) if gpu_type else ())


def test_reserved_work_outside_its_buckets_leaves_gpus_idle_under_the_spec() -> None:
    # a reserves 2 of 8 and sends 4 reserved 1-GPU jobs: 2 run, 2 wait (SPEC 2)
    # while 6 GPUs are idle; strict-priority (one team reserving the pool) runs 4
    jobs = [one_gpu(f"r{i}", "a", "reserved") for i in range(4)]
    teams = [{"name": "a", "reservations": {"main": 2}}, {"name": "b"}]
    nodes = [{"name": "n1", "gpus": 8}]
    spec = measure("apportion", nodes, teams, jobs)["idle"]
    assert spec["by_reason_gpus"]["reserved_outside_buckets"] == pytest.approx(6.0)
    assert spec["average_gpus"] == pytest.approx(6.0)
    assert spec["instants"]["reserved_outside_buckets"] == metrics.SAMPLES
    strict = measure("strict-priority", nodes, teams, jobs)["idle"]
    assert strict["by_reason_gpus"]["nothing_waits"] == pytest.approx(4.0)
    assert strict["by_reason_gpus"]["reserved_outside_buckets"] == 0.0


def test_burst_cap() -> None:
    # cap = 2 x 150 % = 3: the fourth elastic job waits with 5 GPUs idle
    jobs = [one_gpu(f"e{i}", "a", "elastic") for i in range(4)]
    teams = [{"name": "a", "reservations": {"main": 2}, "burst_limit_percent": 50}]
    idle = measure("apportion", [{"name": "n1", "gpus": 8}], teams, jobs)["idle"]
    assert idle["by_reason_gpus"]["burst_cap"] == pytest.approx(5.0)
    assert idle["fits_examples"] == []


def test_whole_node_pods_fragmented_and_too_few_free() -> None:
    # two 4-GPU nodes, one GPU busy on each: a 4-GPU pod fits no node though
    # 6 GPUs are free (fragmented)
    # (the GPU types pin one busy GPU to each node)
    nodes = [{"name": "n1", "gpus": 4, "gpu_type": "t1"},
             {"name": "n2", "gpus": 4, "gpu_type": "t2"}]
    teams = [{"name": "a", "reservations": {"main": 8}}]
    busy = [one_gpu("x1", "a", "reserved", gpu_type="t1"),
            one_gpu("x2", "a", "reserved", gpu_type="t2")]
    four = measure("apportion", nodes, teams, [*busy, one_gpu("big", "a", "elastic", at=1,
                                                              gpus=4)])["idle"]
    assert four["by_reason_gpus"]["fragmented"] == pytest.approx(6.0, rel=0.01)
    # three and two busy: a 4-GPU pod has too few free GPUs anywhere (3 < 4)
    busier = [one_gpu("x1", "a", "reserved", gpus=3, gpu_type="t1"),
              one_gpu("x2", "a", "reserved", gpus=2, gpu_type="t2")]
    few = measure("apportion", nodes, teams, [*busier, one_gpu("big", "a", "elastic", at=1,
                                                               gpus=4)])["idle"]
    assert few["by_reason_gpus"]["too_few_free"] == pytest.approx(3.0, rel=0.01)


def test_the_work_balance_adds_up_to_the_utilization() -> None:
    # b's six long jobs; a's four at 10 preempt two of them (thrown away), which
    # restart at once and are cut at the end: the balance has every term
    teams = [{"name": "a", "reservations": {"main": 2}}, {"name": "b", "reservations":
                                                          {"main": 2}}]
    jobs = [one_gpu(f"b{i}", "b", "elastic", duration=150) for i in range(6)]
    jobs += [one_gpu(f"a{i}", "a", "elastic", at=10, duration=50) for i in range(4)]
    m = measure("apportion", [{"name": "n1", "gpus": 8}], teams, jobs, until=200)
    wb = m["work_balance"]
    allocated = m["utilization"]["average"] * 8 * 200 / 3600
    assert wb["allocated_gpu_h"] == pytest.approx(allocated)
    assert wb["offered_gpu_h"] - wb["deferred_by_wait_gpu_h"] - wb["deferred_by_restart_gpu_h"] \
        + wb["preempted_runs_gpu_h"] == pytest.approx(allocated)
    assert wb["preempted_runs_gpu_h"] > 0 and wb["deferred_by_restart_gpu_h"] > 0
    assert wb["useful_utilization"] == pytest.approx(wb["done_gpu_h"] * 3600 / (8 * 200))


def test_work_that_could_never_run_is_not_a_reason() -> None:
    # a pod asking 120 CPUs where the node has 96 waits for ever (SPEC 7
    # NO_ELIGIBLE_POOL); it leaves nothing out of the free GPUs it could use
    job = TraceJob("huge", 0, 1000, 8000, cpu_milli=120_000, team="a", wclass="elastic",
                   priority=60)
    m = measure("apportion", [{"name": "n1", "gpus": 8, "cpu": 96}],
                [{"name": "a", "reservations": {"main": 8}}], [job])
    assert m["never_started"]["elastic"] == 1
    assert m["idle"]["by_reason_gpus"]["nothing_waits"] == pytest.approx(8.0)
    assert m["fairness"]["saturated_fraction"] == 0.0
