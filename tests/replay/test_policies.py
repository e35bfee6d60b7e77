"""Each policy's defining behaviour on a tiny scenario, through the real
engine (policies are org views plus engine/policy.py switches)."""

from __future__ import annotations

from typing import Any

import pytest

from apportion.domain.lifecycle import Status, WorkloadState
from apportion.engine.policy import SPEC_POLICY, Policy
from apportion.replay.org import parse_org
from apportion.replay.policies import POLICIES, build
from apportion.replay.trace import Trace, TraceJob
from apportion.sim.runner import simulate


def org_of(teams: list[dict[str, Any]], gpus: int = 8) -> Any:
    return parse_org({"cluster": {"nodes": [{"name": "n1", "gpus": gpus}]}, "teams": teams,
                      "mapping": {"teams": {"by": "field"}}})


def jobs(spec: str) -> list[TraceJob]:
    """``name team class priority gpus pods at duration`` per line."""
    out = []
    for line in spec.strip().splitlines():
        name, team, klass, prio, gpus, pods, at, dur = line.split()
        out.append(TraceJob(name, int(at), int(dur), int(float(gpus) * 1000), pods=int(pods),
                            team=team, wclass=klass, priority=int(prio)))
    return out


def replay(policy: str, org: Any, the_jobs: list[TraceJob], until: int
           ) -> dict[str, WorkloadState]:
    scenario, _teams = build(policy, org, Trace("t", tuple(the_jobs)))
    result = simulate(scenario, until=until, policy=POLICIES[policy])
    return {w.name: w for w in result.states.values()}


def running(states: dict[str, WorkloadState], prefix: str) -> int:
    return sum(1 for n, w in states.items() if n.startswith(prefix)
               and w.status is Status.RUNNING)


def preempted(states: dict[str, WorkloadState]) -> list[str]:
    return sorted(n for n, w in states.items() if w.attempt > 1)


def test_fifo_never_preempts_and_serves_arrival_order() -> None:
    org = org_of([{"name": "a", "reservations": {"main": 8}}, {"name": "b"}])
    the_jobs = jobs("""
        b1 b elastic 50 1 8 0 100
        x  b elastic 10 6 1 10 100
        y  a reserved 100 4 1 20 100
    """)
    fifo = replay("fifo", org, the_jobs, until=150)
    assert preempted(fifo) == []  # a's reserved y waits for b1 to end
    # x, first to arrive, takes 6 of the 8 GPUs when b1 ends; y waits behind it
    assert fifo["x"].started_at == 100 and fifo["y"].started_at is None
    strict = replay("strict-priority", org, the_jobs, until=150)
    assert strict["y"].started_at == 20  # reserved first: preempts b1 at once
    spec = replay("apportion", org, the_jobs, until=150)
    assert preempted(spec) == ["b1"]  # the SPEC reclaims a's reservation at once
    assert spec["y"].started_at == 20


def test_strict_priority_takes_even_a_reservations_elastic_work() -> None:
    # b reserves 4 and runs 8 low-priority elastic jobs; a (no reservation)
    # sends 8 at priority 60.
    org = org_of([{"name": "a"}, {"name": "b", "reservations": {"main": 4}}])
    lines = [f"b{i} b elastic 20 1 1 0 1000" for i in range(8)]
    lines += [f"a{i} a elastic 60 1 1 10 1000" for i in range(8)]
    the_jobs = jobs("\n".join(lines))
    strict = replay("strict-priority", org, the_jobs, until=20)
    assert running(strict, "a") == 8 and running(strict, "b") == 0
    spec = replay("apportion", org, the_jobs, until=20)
    assert running(spec, "a") == 4 and running(spec, "b") == 4  # b keeps its reservation


def test_flat_fair_share_splits_by_leaf_weights_not_down_the_tree() -> None:
    # research (nlp, vision) and production, all weight 1, 48 GPUs unreserved
    org = org_of([{"name": "research", "children": [{"name": "nlp"}, {"name": "vision"}]},
                  {"name": "production"}], gpus=48)
    lines = [f"{t}{i} {t} elastic 50 1 1 0 1000" for t in ("nlp", "vision", "production")
             for i in range(48)]
    the_jobs = jobs("\n".join(lines))
    flat = replay("flat-fair-share", org, the_jobs, until=10)
    assert [running(flat, t) for t in ("nlp", "vision", "production")] == [16, 16, 16]
    tree = replay("apportion", org, the_jobs, until=10)
    assert [running(tree, t) for t in ("nlp", "vision", "production")] == [12, 12, 24]


def test_reclaim_to_quota_preempts_only_up_to_the_reservation() -> None:
    # b borrows the whole pool; a reserves 2 and wants 6 at the same priority
    org = org_of([{"name": "a", "reservations": {"main": 2}}, {"name": "b"}])
    lines = [f"b{i} b elastic 50 1 1 0 1000" for i in range(8)]
    lines += [f"a{i} a elastic 50 1 1 10 1000" for i in range(6)]
    the_jobs = jobs("\n".join(lines))
    quota = replay("reclaim-to-quota", org, the_jobs, until=20)
    assert running(quota, "a") == 2 and running(quota, "b") == 6
    spec = replay("apportion", org, the_jobs, until=20)
    # the SPEC splits the surplus too: a gets 2 + half of the other 6
    assert running(spec, "a") == 5 and running(spec, "b") == 3


def test_reclaim_to_quota_does_not_preempt_for_a_team_without_quota() -> None:
    org = org_of([{"name": "a"}, {"name": "b"}])
    lines = [f"b{i} b elastic 50 1 1 0 1000" for i in range(8)]
    lines += [f"a{i} a elastic 50 1 1 10 1000" for i in range(4)]
    the_jobs = jobs("\n".join(lines))
    assert running(replay("reclaim-to-quota", org, the_jobs, until=20), "a") == 0
    assert running(replay("apportion", org, the_jobs, until=20), "a") == 4


def test_the_default_policy_is_the_spec_and_runs_the_same_path() -> None:
    assert POLICIES["apportion"] == SPEC_POLICY and SPEC_POLICY.is_spec
    org = org_of([{"name": "a", "reservations": {"main": 2}}, {"name": "b"}])
    lines = [f"b{i} b elastic 50 1 1 0 100" for i in range(8)]
    lines += [f"a{i} a elastic 50 1 1 10 100" for i in range(6)]
    scenario, _ = build("apportion", org, Trace("t", tuple(jobs("\n".join(lines)))))
    plain = simulate(scenario, until=300)
    with_policy = simulate(scenario, until=300, policy=SPEC_POLICY)
    assert plain.states == with_policy.states
    assert plain.preemptions == with_policy.preemptions


def test_a_policy_order_must_be_known() -> None:
    with pytest.raises(ValueError, match="order must be one of spec, arrival, priority"):
        Policy(order="random")
