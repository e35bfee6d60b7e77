"""Jain's index the SPEC's way (``jain_spec``): burst used against the SPEC 4
burst entitlement of each top-level team, computed by metrics.py itself."""

from __future__ import annotations

import pytest

from apportion.replay import metrics
from apportion.replay.metrics import TopDemand, burst_entitlements, jain_of_burst
from apportion.replay.org import parse_org
from apportion.replay.policies import POLICIES, build
from apportion.replay.trace import Trace, TraceJob
from apportion.sim.runner import simulate

G = 1000.0  # one GPU in milli


def test_two_teams_two_levels_by_hand() -> None:
    # 10 GPUs; a and b reserve 2 each; a weighs 3, b 1. a wants 4 at priority
    # 60; b wants 4 at 60 and 4 at 20. Steps 1-2: each reservation backs 2 of
    # its team's priority-60 work; surplus 10 - 4 = 6. Level 60: a and b want
    # 2 more each, 6 split 3:1 would give a 4.5, capped at 2, so 2 and 2; level
    # 20: b alone takes the 2 left. Burst entitled: a 2, b 4 (not 3:1).
    a = TopDemand(reservation=2 * G, cap=None, weight=3, reserved=0, elastic={60: 4 * G})
    b = TopDemand(reservation=2 * G, cap=None, weight=1, reserved=0,
                  elastic={60: 4 * G, 20: 4 * G})
    entitled = burst_entitlements(10 * G, [a, b])
    assert entitled == pytest.approx([2 * G, 4 * G])
    # the engine gives exactly that: index 1; weights alone read it as unfair
    assert jain_of_burst([2 * G, 4 * G], entitled) == pytest.approx(1.0)
    x = [2 / 3, 4 / 1]
    assert metrics._index(x) == pytest.approx(sum(x) ** 2 / (2 * sum(v * v for v in x)))
    assert metrics._index(x) < 0.7
    # an unfair outcome: b's priority-20 work holds a's share (a 0, b 6): x = 0, 1.5
    assert jain_of_burst([0.0, 6 * G], entitled) == pytest.approx(0.5)


def test_caps_and_reserved_work_in_use() -> None:
    # a's cap (reservation 2, +50 %) leaves it 1 GPU of burst; its reserved
    # work in use (2) fills its reservation, so nothing backs its elastic work
    a = TopDemand(reservation=2 * G, cap=3 * G, weight=1, reserved=2 * G, elastic={50: 5 * G})
    b = TopDemand(reservation=0, cap=None, weight=1, reserved=0, elastic={50: 5 * G})
    assert burst_entitlements(8 * G, [a, b]) == pytest.approx([1 * G, 5 * G])
    assert jain_of_burst([1 * G, 0.0], [1 * G, 0.0]) is None  # one team entitled


def _run(policy: str) -> dict[str, object]:
    # 8 GPUs; a and b reserve 2 each, equal weights. b starts six long 1-GPU
    # elastic jobs at 0; a sends four at 10. SPEC: surplus 4, 2 each, so each
    # team uses 4 (2 reserved-backed + 2 burst). fifo keeps b's six: a gets 2.
    org = parse_org({"cluster": {"nodes": [{"name": "n1", "gpus": 8}]},
                     "teams": [{"name": "a", "reservations": {"main": 2}},
                               {"name": "b", "reservations": {"main": 2}}],
                     "mapping": {"teams": {"by": "field"}}})
    jobs = [TraceJob(f"b{i}", 0, 1000, 1000, team="b", wclass="elastic", priority=50)
            for i in range(6)]
    jobs += [TraceJob(f"a{i}", 10, 1000, 1000, team="a", wclass="elastic", priority=50)
             for i in range(4)]
    base, _ = build("apportion", org, Trace("t", tuple(jobs)))
    scenario, team_by_name = build(policy, org, Trace("t", tuple(jobs)))
    result = simulate(scenario, until=200, policy=POLICIES[policy])
    fairness: dict[str, object] = metrics.compute(result, team_by_name, base.tree, "main",
                                                  0, 200)["fairness"]
    return fairness


def test_the_index_drops_when_the_outcome_is_unfair() -> None:
    fair, unfair = _run("apportion"), _run("fifo")
    # apportion: a 4, b 4 from t=10 (b's two victims wait requeued: saturated)
    assert fair["jain_spec"] == pytest.approx(1.0)
    # fifo: a has 0 burst of its 2, b 4 of its 2: x = 0, 2 -> 0.5
    assert unfair["jain_spec"] == pytest.approx(0.5)
    assert unfair["samples_compared_spec"] > 0 and fair["samples_compared_spec"] > 0
