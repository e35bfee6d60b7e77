"""Every scenario in examples/ runs through ``apportion simulate`` and does
what its header comment promises (SPEC section 9 for S1-S7)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from tests.sim.helpers import EXAMPLES, example, shell


def statuses(out: dict[str, Any], prefix: str = "") -> Counter[str]:
    return Counter(w["status"] for n, w in out["workloads"].items() if n.startswith(prefix))


def nodes_of(w: dict[str, Any]) -> set[str]:
    return {p["node"] for p in w["placement"]}


def pods(w: dict[str, Any]) -> int:
    return len(w["placement"])


def test_every_example_has_a_test_and_a_story() -> None:
    tested = {
        "s1_reserved_reclaims_own_elastic", "s2_higher_priority_elastic_wins",
        "s3_elastic_in_own_reservation", "s4_reclaim_reservation",
        "s4b_reclaim_with_idle_capacity", "s5_surplus_split", "s6_burst_limits",
        "s7_gang_waits", "fractions", "gangs", "topology", "burst_limits", "multi_pool",
        "requeue_on_preemption", "node_failure", "least_work_lost",
        "shrink_before_kill", "time_limits", "dependencies", "arrays",
    }
    found = {p.stem for p in EXAMPLES.glob("*.yaml")}
    assert found == tested
    for path in EXAMPLES.glob("*.yaml"):
        head = path.read_text().splitlines()[:3]
        assert head[0].startswith("# ") and "Expect" in path.read_text(), path.name


def test_s1_reserved_reclaims_exactly_the_elastic_gpus() -> None:
    out = example("s1_reserved_reclaims_own_elastic")
    assert out["workloads"]["serve-2"]["status"] == "Running"
    assert out["workloads"]["serve-2"]["started_at"] == 60
    assert out["workloads"]["serve-1"]["status"] == "Running"
    assert statuses(out, "elastic-") == {"Preempted": 12}
    assert sum(p["gpus"] for p in out["preemptions"]) == 12
    assert {p["by"] for p in out["preemptions"]} == {"serve-2"}
    assert out["teams"]["nlp"]["main"]["reserved"] == 32


def test_s2_higher_priority_elastic_displaces_lower() -> None:
    out = example("s2_higher_priority_elastic_wins")
    sweep, urgent = out["workloads"]["sweep"], out["workloads"]["urgent"]
    assert sweep["status"] == "Preempted" and sweep["preempted_by"] == "urgent"
    assert urgent["status"] == "Running" and urgent["started_at"] == 30
    assert out["preemptions"] == [
        {"at": 30, "victim": "sweep", "by": "urgent", "gpus": 8, "attempt": 1, "exits_at": 30}
    ]


def test_s3_elastic_in_own_reservation_starts_at_once() -> None:
    out = example("s3_elastic_in_own_reservation")
    assert out["workloads"]["train"]["status"] == "Running"
    assert out["workloads"]["train"]["started_at"] == 10
    assert out["preemptions"] == []
    assert out["teams"]["vision"]["main"] == {
        "reservation": 16, "reserved": 4, "elastic": 8, "entitlement": 12
    }


def test_s4_reclaims_exactly_what_is_needed() -> None:
    out = example("s4_reclaim_reservation")
    assert out["workloads"]["grow"]["status"] == "Running"
    assert out["workloads"]["grow"]["started_at"] == 60
    assert statuses(out, "prod-batch-") == {"Preempted": 24, "Running": 4}
    assert len(out["preemptions"]) == 24
    assert sum(p["gpus"] for p in out["preemptions"]) == 24
    assert all(p["by"] == "grow" and p["victim"].startswith("prod-batch-")
               for p in out["preemptions"])
    for name in ("research-serve", "prod-serve"):
        assert out["workloads"][name]["status"] == "Running"
        assert out["workloads"][name]["attempt"] == 1
    assert out["pools"]["main"] == {"capacity": 80, "used": 80}


def test_s4b_with_idle_capacity_only_four_are_preempted() -> None:
    out = example("s4b_reclaim_with_idle_capacity")
    assert out["workloads"]["grow"]["status"] == "Running"
    assert sum(p["gpus"] for p in out["preemptions"]) == 4
    assert statuses(out, "prod-batch-") == {"Preempted": 4, "Running": 24}


def test_s4_runs_from_scripts_start_path_in_a_shell() -> None:
    run = shell("examples/s4_reclaim_reservation.yaml")
    assert run.exit_code == 0, run.stderr
    assert "grow" in run.stdout and "Preempted" in run.stdout


def test_s5_surplus_follows_bursting_priorities() -> None:
    out = example("s5_surplus_split")
    teams = out["teams"]
    shares = {t: teams[t]["main"]["entitlement"] for t in teams}
    assert shares == {"research": 28.8, "nlp": 19.2, "vision": 9.6, "production": 19.2}
    for team, prefix in (("nlp", "nlp-"), ("vision", "vision-"), ("production", "prod-")):
        running = statuses(out, prefix)["Running"]
        assert abs(running - shares[team]) <= 1, (team, running)
    assert out["preemptions"] == []
    assert out["pools"]["main"]["used"] == 48


def test_s6_burst_limits_hold_with_idle_gpus_around() -> None:
    out = example("s6_burst_limits")
    assert statuses(out, "research-")["Running"] == 48
    assert statuses(out, "ops-")["Running"] == 32
    assert out["pools"]["main"] == {"capacity": 128, "used": 80}
    waiting = [w for w in out["workloads"].values() if w["status"] == "Queued"]
    assert len(waiting) == 40
    assert {w["reason"]["code"] for w in waiting} == {"BURST_LIMIT_REACHED"}


def test_s7_gang_waits_then_starts_whole() -> None:
    before = example("s7_gang_waits", "--until", "50")
    gang = before["workloads"]["gang"]
    assert gang["status"] == "Queued" and gang["reason"]["code"] == "GANG_WAITING"
    assert gang["placement"] == []
    out = example("s7_gang_waits")
    gang = out["workloads"]["gang"]
    assert gang["status"] == "Running" and gang["started_at"] == 100 and pods(gang) == 8
    assert [e["status"] for e in gang["events"] if e["at"] == 100] == ["Starting", "Running"]


def test_fractions_share_one_device() -> None:
    out = example("fractions")
    notebooks = [w for n, w in out["workloads"].items() if n.startswith("notebook-")]
    devices = {(p["node"], d["index"], d["milli"]) for w in notebooks
               for p in w["placement"] for d in p["devices"]}
    assert devices == {("node1", 0, 250)}
    for name in ("embed", "half"):
        assert out["workloads"][name]["placement"] == [
            {"node": "node1", "devices": [{"index": 1, "milli": 500}]}
        ]
        assert out["workloads"][name]["gpus"] == 0.5
    assert out["pools"]["main"] == {"capacity": 2, "used": 2}


def test_gangs_and_elastic_scaling() -> None:
    early = example("gangs", "--until", "15")["workloads"]["strict"]
    assert early["status"] == "Queued" and early["reason"]["code"] == "GANG_WAITING"
    before = example("gangs", "--until", "299")
    strict = before["workloads"]["strict"]
    assert strict["status"] == "Queued" and strict["reason"]["code"] == "WAITING_FOR_CAPACITY"
    flexible = before["workloads"]["flexible"]
    assert flexible["status"] == "Running" and pods(flexible) == 6
    out = example("gangs")
    assert out["workloads"]["strict"]["started_at"] == 300
    assert pods(out["workloads"]["strict"]) == 8
    assert pods(out["workloads"]["flexible"]) == 6


def test_required_topology_never_spans_preferred_spans_only_when_needed() -> None:
    out = example("topology")
    w = out["workloads"]
    r1, r2 = {"a1", "a2"}, {"b1", "b2"}
    assert nodes_of(w["infra-a"]) == {"a1"} and nodes_of(w["infra-b"]) == {"b1"}
    assert nodes_of(w["req-8"]) <= r1
    assert nodes_of(w["pref-10"]) <= r2
    assert nodes_of(w["pref-6"]) & r1 and nodes_of(w["pref-6"]) & r2
    assert w["req-16"]["status"] == "Queued"
    assert w["req-16"]["reason"]["code"] == "TOPOLOGY_WAITING"


def test_burst_limit_of_a_parent_caps_its_subtree() -> None:
    out = example("burst_limits")
    teams = out["teams"]
    assert teams["research"]["main"]["elastic"] == 24
    assert teams["nlp"]["main"]["elastic"] + teams["vision"]["main"]["elastic"] == 24
    guest = out["workloads"]["guest-job"]
    assert guest["status"] == "Pending" and guest["reason"]["code"] == "NO_ELIGIBLE_POOL"
    assert teams["production"]["main"]["elastic"] == 40
    nlp_waiting = {w["reason"]["code"] for n, w in out["workloads"].items()
                   if n.startswith("nlp-") and w["status"] == "Queued"}
    assert nlp_waiting == {"BURST_LIMIT_REACHED"}


def test_multi_pool_choice() -> None:
    out = example("multi_pool")
    pools = {n: w["pool"] for n, w in out["workloads"].items()}
    assert pools == {"a100-only": "west", "east-pinned": "east", "vision-small": "west",
                     "vision-big": "east"}
    assert {w["status"] for w in out["workloads"].values()} == {"Running"}
    assert out["preemptions"] == []


def test_requeue_on_preemption_starts_a_new_attempt() -> None:
    out = example("requeue_on_preemption")
    w = out["workloads"]
    assert (w["urgent"]["started_at"], w["urgent"]["ended_at"]) == (80, 180)
    assert w["fragile"]["status"] == "Preempted" and w["fragile"]["ended_at"] == 80
    resilient = w["resilient"]
    assert resilient["status"] == "Completed" and resilient["attempt"] == 2
    assert [(a["status"], a["ended_at"], a["preempted_by"]) for a in resilient["attempts"]] == [
        ("Preempted", 80, "urgent"), ("Completed", 480, None)
    ]
    assert resilient["running_at"] == 180
    assert {(p["victim"], p["at"], p["exits_at"]) for p in out["preemptions"]} == {
        ("resilient", 50, 80), ("fragile", 50, 80)
    }
    during = example("requeue_on_preemption", "--until", "60")
    assert during["workloads"]["urgent"]["reason"]["code"] == "PREEMPTING"
    assert during["pools"]["main"]["used"] == 8  # the victims still hold their devices


def test_node_events() -> None:
    out = example("node_failure")
    w = out["workloads"]
    assert w["plain"]["status"] == "Failed" and w["plain"]["ended_at"] == 100
    assert w["job-x"]["status"] == "Cancelled" and w["job-x"]["ended_at"] == 60
    checkpointed = w["checkpointed"]
    assert [a["status"] for a in checkpointed["attempts"]] == ["Failed", "Running"]
    assert checkpointed["attempts"][0]["ended_at"] == 100 and checkpointed["submitted_at"] == 0
    assert [(e["at"], e["attempt"], e["status"]) for e in checkpointed["events"][4:6]] == [
        (100, 1, "Failed"), (100, 2, "Pending")]
    assert checkpointed["events"][5]["message"] == "requeued after a failure: node n1 went down"
    assert checkpointed["running_at"] == 200 and nodes_of(checkpointed) == {"n2"}
    assert out["pools"]["main"]["capacity"] == 8


@pytest.mark.parametrize("path", sorted(p.name for p in EXAMPLES.glob("*.yaml")))
def test_every_example_runs_as_a_table(path: str) -> None:
    from tests.sim.helpers import cli

    run = cli(str(EXAMPLES / path))
    assert run.exit_code == 0, run.stderr
    assert "Timeline" in run.stdout and "Teams" in run.stdout


def test_least_work_lost_spares_the_long_running_gang() -> None:
    out = example("least_work_lost")
    assert out["preemptions"] == [
        {"at": 100, "victim": "small", "by": "urgent", "gpus": 2, "attempt": 1, "exits_at": 100}
    ]
    assert out["workloads"]["gang"]["ended_at"] == 1010  # ran its whole duration
    assert out["workloads"]["urgent"]["started_at"] == 100


def test_shrink_before_kill_takes_the_newest_pods() -> None:
    out = example("shrink_before_kill")
    sweep = out["workloads"]["sweep"]
    assert out["preemptions"] == [
        {"at": 60, "victim": "sweep", "by": "train", "gpus": 3, "attempt": 1,
         "exits_at": 60, "pods": [5, 6, 7]}
    ]
    assert sweep["status"] == "Completed" and sweep["ended_at"] == 600  # ran on
    assert len(sweep["placement"]) == 5 and sweep["pods_running"] == 0
    mid = example("shrink_before_kill", "--until", "100")["workloads"]["sweep"]
    assert (mid["status"], mid["pods"], mid["pods_running"]) == ("Running", 8, 5)
    assert [e["status"] for e in sweep["events"]].count("Running") == 2  # started, shrunk
    assert out["workloads"]["train"]["started_at"] == 60
