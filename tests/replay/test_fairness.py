"""Jain's index the SPEC's way (``jain_spec``): burst used against the SPEC 4
burst entitlement of each top-level team, computed by metrics.py itself."""

from __future__ import annotations

from pathlib import Path

import pytest

from apportion.replay import metrics
from apportion.replay.csvtrace import load_csv
from apportion.replay.metrics import (
    TopDemand,
    burst_entitlements,
    jain_of_burst,
    whole_workload_shares,
)
from apportion.replay.org import load_org, parse_org
from apportion.replay.policies import POLICIES, build
from apportion.replay.runner import Replay, run
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


def _run(policy: str, part: str = "fairness") -> dict[str, object]:
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
    measured: dict[str, object] = metrics.compute(result, team_by_name, base.tree, "main",
                                                  0, 200)[part]
    return measured


def test_the_index_drops_when_the_outcome_is_unfair() -> None:
    fair, unfair = _run("apportion"), _run("fifo")
    # apportion: a 4, b 4 from t=10 (b's two victims wait requeued: saturated)
    assert fair["jain_spec"] == pytest.approx(1.0)
    # fifo: a has 0 burst of its 2, b 4 of its 2: x = 0, 2 -> 0.5
    assert unfair["jain_spec"] == pytest.approx(0.5)
    assert unfair["samples_compared_spec"] > 0 and fair["samples_compared_spec"] > 0


def test_a_team_less_than_one_workload_from_its_share_counts_at_it() -> None:
    # c and d are entitled to 1.5 GPUs each and run 1-GPU jobs: 1 and 2 is as
    # close as whole jobs get. The fluid index calls it 0.9; whole workloads 1.0.
    used, entitled = [1 * G, 2 * G], [1.5 * G, 1.5 * G]
    assert jain_of_burst(used, entitled) == pytest.approx(0.9)
    near = whole_workload_shares(used, entitled, step_up=[1 * G, 1 * G],
                                 step_down=[1 * G, 1 * G])
    assert near == [1.5 * G, 1.5 * G] and jain_of_burst(near, entitled) == pytest.approx(1.0)
    # a whole workload or more away is not excused: 0 of 2 with 1-GPU jobs
    # waiting, and 4 of 2 with 1-GPU jobs running, keep what they use
    assert whole_workload_shares([0.0, 4 * G], [2 * G, 2 * G], step_up=[1 * G, 0.0],
                                 step_down=[0.0, 1 * G]) == [0.0, 4 * G]
    # below with nothing waiting, or above with no elastic work running: no excuse
    assert whole_workload_shares([1 * G, 3 * G], [1.5 * G, 2.5 * G], step_up=[0.0, 0.0],
                                 step_down=[0.0, 0.0]) == [1 * G, 3 * G]
    # an 8-GPU job waiting with 2 GPUs of share missing: it cannot hold 2
    assert whole_workload_shares([0.0], [2 * G], step_up=[8 * G], step_down=[0.0]) == [2 * G]


def test_on_one_gpu_jobs_apportion_holds_every_team_within_a_job_of_its_share() -> None:
    # examples/replay/unit_pods.csv on four_teams.yaml (docs/replay.md,
    # "Fairness without lumps"), its first 12 hours: saturated most of the time
    examples = Path(__file__).resolve().parents[2] / "examples" / "replay"
    trace = load_csv(str(examples / "unit_pods.csv"))
    org = load_org(str(examples / "four_teams.yaml"))
    results = run(Replay(trace, org, ("apportion", "fifo", "reclaim-to-quota"), 12 * 3600))
    fair = {p: r["fairness"] for p, r in results["policies"].items()}
    assert fair["apportion"]["saturated_fraction"] > 0.5
    assert fair["apportion"]["jain_spec_workloads"] == pytest.approx(1.0)
    assert fair["apportion"]["jain_spec_workloads_at_least_099"] == pytest.approx(1.0)
    # first come, first served and reclaim-only-to-quota are not weighted shares
    assert fair["fifo"]["jain_spec_workloads"] < 0.8
    assert fair["reclaim-to-quota"]["jain_spec_workloads"] < 0.9
    goal = next(g for g in results["goals"] if g["goal"].startswith("Jain"))
    assert goal["met"] is True


def test_thrown_away_work_is_split_by_what_preempted_it() -> None:
    # apportion takes two of b's six 1-GPU jobs for a's four at the same
    # priority (a under its share, b over): fair share, 2 GPUs x 10 s lost
    pre = _run("apportion", "preemptions")
    kinds = pre["by_kind"]
    assert isinstance(kinds, dict)
    assert kinds["fair_share_same_priority"] == {"count": 2,
                                                 "gpu_hours_lost": pytest.approx(20 / 3600)}
    assert sum(k["count"] for k in kinds.values()) == pre["count"] == 2
    assert sum(k["gpu_hours_lost"] for k in kinds.values()) == pytest.approx(
        pre["gpu_hours_lost"])
    assert set(kinds) == set(metrics.PREEMPTION_KINDS)
