"""The JSON contract (SPEC section 8, docs/simulate.md), the table, the plot."""

from __future__ import annotations

from pathlib import Path

import matplotlib.image

from tests.sim.helpers import EXAMPLES, cli

SPEC_EXAMPLE = """
pools:
  - name: main
    gpu_type: h100
    topology: [zone, rack]
    nodes:
      - {name: a1, gpus: 8, labels: {zone: a, rack: r1}}
      - {prefix: b, count: 4, gpus: 8, labels: {zone: b, rack: r2}}
teams:
  - name: research
    bursting_priority: 3
    burst_limit_percent: 50
    reservations: {main: 24}
    children:
      - {name: nlp, bursting_priority: 2, reservations: {main: 16}}
      - {name: vision, reservations: {main: 8}}
  - name: production
    reservations: {main: 8}
workloads:
  - {name: inf, team: nlp, class: reserved, gpus: 1, pods: 12, duration: 130}
  - {name: sweep, team: vision, class: elastic, priority: 50, gpus: 0.5, pods: 4, at: 60}
events:
  - {at: 120, cancel: sweep}
  - {at: 140, node_down: a1}
"""

TOP_KEYS = {"time", "workloads", "preemptions", "teams", "pools", "ignored_events"}
WORKLOAD_KEYS = {
    "id", "team", "class", "priority", "gpus", "gpu_type", "cpu", "memory_mib", "pods",
    "pods_running", "status", "attempt",
    "pool", "reason", "placement", "preempted_by", "submitted_at", "started_at",
    "running_at", "ended_at", "attempts", "events",
}
ATTEMPT_KEYS = {"attempt", "status", "pool", "started_at", "running_at", "ended_at",
                "preempted_by"}
EVENT_KEYS = {"at", "status", "attempt", "cause", "message"}
TEAM_KEYS = {"reservation", "reserved", "elastic", "entitlement"}
PREEMPTION_KEYS = {"at", "victim", "by", "gpus", "attempt", "exits_at"}


def test_spec_example_outcome_and_keys() -> None:
    out = cli("-", "-o", "json", stdin=SPEC_EXAMPLE).json()
    assert set(out) == TOP_KEYS
    assert out["time"] == 140
    inf, sweep = out["workloads"]["inf"], out["workloads"]["sweep"]
    for w in (inf, sweep):
        assert set(w) == WORKLOAD_KEYS
        assert all(set(a) == ATTEMPT_KEYS for a in w["attempts"])
        assert all(set(e) == EVENT_KEYS for e in w["events"])
    assert (inf["id"], inf["status"], inf["attempt"], inf["pool"], inf["reason"]) == (
        1, "Completed", 1, "main", None)
    assert inf["placement"][0] == {"node": "a1", "devices": [{"index": 0, "milli": 1000}]}
    assert (inf["started_at"], inf["running_at"], inf["ended_at"]) == (0, 0, 130)
    assert inf["attempts"] == [{"attempt": 1, "status": "Completed", "pool": "main",
                                "started_at": 0, "running_at": 0, "ended_at": 130,
                                "preempted_by": None}]
    assert [(e["at"], e["status"]) for e in inf["events"]] == [
        (0, "Pending"), (0, "Queued"), (0, "Starting"), (0, "Running"), (130, "Completed")]
    assert (sweep["id"], sweep["status"], sweep["gpus"]) == (2, "Cancelled", 2)
    assert sweep["placement"][0] == {"node": "b1", "devices": [{"index": 4, "milli": 500}]}
    assert out["preemptions"] == []
    assert set(out["teams"]) == {"research", "nlp", "vision", "production"}
    assert out["teams"]["nlp"] == {"main": {"reservation": 16, "reserved": 0, "elastic": 0,
                                            "entitlement": 0}}
    assert all(set(v) == TEAM_KEYS for t in out["teams"].values() for v in t.values())
    assert out["pools"] == {"main": {"capacity": 32, "used": 0}}


def test_gpus_are_numbers_fractions_included() -> None:
    out = cli("-", "-o", "json", "--until", "100", stdin=SPEC_EXAMPLE).json()
    vision = out["teams"]["vision"]["main"]
    assert vision["elastic"] == 2 and isinstance(vision["elastic"], int)
    assert out["teams"]["nlp"]["main"]["reserved"] == 12
    quarter = cli("-", "-o", "json", stdin=(
        "pools: [{name: main, nodes: [{name: n, gpus: 1}]}]\nteams: [{name: t}]\n"
        "workloads: [{name: q, team: t, gpus: 0.25}]\n")).json()
    assert quarter["workloads"]["q"]["gpus"] == 0.25
    assert quarter["pools"]["main"]["used"] == 0.25
    assert quarter["teams"]["t"]["main"]["entitlement"] == 0.25


def test_preemption_entries() -> None:
    out = cli(str(EXAMPLES / "s2_higher_priority_elastic_wins.yaml"), "-o", "json").json()
    assert [set(p) for p in out["preemptions"]] == [PREEMPTION_KEYS]
    assert out["workloads"]["sweep"]["preempted_by"] == "urgent"
    assert out["workloads"]["sweep"]["attempts"][0]["preempted_by"] == "urgent"


def test_table_tells_the_story() -> None:
    run = cli(str(EXAMPLES / "s4_reclaim_reservation.yaml"))
    assert run.exit_code == 0
    text = run.stdout
    for fact in ("Timeline", "grow", "Preempted", "Running", "Preemptions", "research",
                 "production", "Teams", "Pools", "time 60 s", "24 preemptions"):
        assert fact in text, fact
    waiting = cli(str(EXAMPLES / "s7_gang_waits.yaml"), "--until", "50").stdout
    assert "GANG_WAITING" in waiting and "needs 8" in waiting


def test_table_shows_node_events_and_ignored_ones() -> None:
    text = cli(str(EXAMPLES / "node_failure.yaml")).stdout
    assert "node n1 is down" in text and "failed: checkpointed, plain" in text
    assert "attempt 2" in text


def test_plot_writes_a_png(tmp_path: Path) -> None:
    target = tmp_path / "usage.png"
    run = cli(str(EXAMPLES / "requeue_on_preemption.yaml"), "-o", "json", "--plot", str(target))
    assert run.exit_code == 0
    assert target.stat().st_size > 0
    image = matplotlib.image.imread(str(target))
    assert image.shape[0] > 300 and image.shape[1] > 600


def test_plot_of_two_pools(tmp_path: Path) -> None:
    target = tmp_path / "pools.png"
    assert cli(str(EXAMPLES / "multi_pool.yaml"), "--plot", str(target)).exit_code == 0
    assert matplotlib.image.imread(str(target)).shape[0] > 600


def test_plot_to_an_unwritable_place_is_a_clear_error(tmp_path: Path) -> None:
    run = cli(str(EXAMPLES / "fractions.yaml"), "--plot", str(tmp_path / "no" / "x.png"))
    assert run.exit_code == 2 and "cannot write the plot" in run.stderr
