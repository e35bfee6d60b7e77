"""Time semantics of the simulator (SPEC section 8): what happens within one
instant and in which order, start delays, grace, --until, ids, limits."""

from __future__ import annotations

import json

import pytest

from apportion.engine.plan import Decision, DecisionKind, Plan
from apportion.sim.runner import HORIZON, CycleLimitError, simulate
from apportion.sim.scenario import parse_scenario
from tests.sim.helpers import EXAMPLES, cli, shell

NODE8 = "pools: [{name: main, nodes: [{name: n1, gpus: 8}]}]\nteams: [{name: a}, {name: b}]\n"


def run(text: str, *args: str) -> dict:
    return cli("-", "-o", "json", *args, stdin=text).json()


def test_durations_end_before_submissions_of_the_same_instant() -> None:
    out = run(NODE8 + "workloads:\n"
              "  - {name: first, team: a, gpus: 8, duration: 100}\n"
              "  - {name: second, team: b, gpus: 8, at: 100}\n")
    first, second = out["workloads"]["first"], out["workloads"]["second"]
    assert (first["status"], first["ended_at"]) == ("Completed", 100)
    assert (second["status"], second["started_at"]) == ("Running", 100)
    assert out["preemptions"] == []


def test_events_apply_before_submissions_of_the_same_instant() -> None:
    out = run(NODE8 + "workloads:\n"
              "  - {name: first, team: a, gpus: 8}\n"
              "  - {name: second, team: a, gpus: 8, at: 50}\n"
              "events: [{at: 50, cancel: first}]\n")
    assert out["workloads"]["first"]["status"] == "Cancelled"
    assert out["workloads"]["second"]["started_at"] == 50


def test_ids_follow_submission_time_then_file_order() -> None:
    out = run(NODE8 + "workloads:\n"
              "  - {name: late, team: a, gpus: 1, at: 10}\n"
              "  - {name: early, team: a, gpus: 1}\n"
              "  - {name: early-too, team: b, gpus: 1}\n")
    assert {n: w["id"] for n, w in out["workloads"].items()} == {
        "early": 1, "early-too": 2, "late": 3
    }
    assert list(out["workloads"]) == ["early", "early-too", "late"]


def test_start_delay_then_duration() -> None:
    text = ("pools: [{name: main, start_delay: 20, nodes: [{name: n1, gpus: 8}]}]\n"
            "teams: [{name: a}]\n"
            "workloads: [{name: w, team: a, gpus: 2, duration: 50}]\n")
    out = run(text)
    w = out["workloads"]["w"]
    assert (w["started_at"], w["running_at"], w["ended_at"]) == (0, 20, 70)
    assert [(e["at"], e["status"]) for e in w["events"]] == [
        (0, "Pending"), (0, "Queued"), (0, "Starting"), (20, "Running"), (70, "Completed")
    ]
    mid = run(text, "--until", "10")
    assert mid["workloads"]["w"]["status"] == "Starting" and mid["time"] == 10


def test_grace_victims_hold_devices_until_they_exit() -> None:
    text = ("pools: [{name: main, preemption_grace: 30, nodes: [{name: n1, gpus: 8}]}]\n"
            "teams: [{name: a}, {name: b}]\n"
            "workloads:\n"
            "  - {name: low, team: a, priority: 10, gpus: 8, duration: 60}\n"
            "  - {name: high, team: b, priority: 90, gpus: 8, at: 50}\n")
    out = run(text)
    low, high = out["workloads"]["low"], out["workloads"]["high"]
    # low's duration would end at 60, inside the grace: that changes nothing.
    assert (low["status"], low["ended_at"]) == ("Preempted", 80)
    assert high["started_at"] == 80
    assert out["preemptions"][0]["exits_at"] == 80
    during = run(text, "--until", "60")
    assert during["workloads"]["low"]["status"] == "Preempted"
    assert during["workloads"]["high"]["reason"]["code"] == "PREEMPTING"
    assert during["pools"]["main"]["used"] == 8


def test_until_leaves_out_workloads_not_yet_submitted() -> None:
    text = NODE8 + ("workloads:\n"
                    "  - {name: now, team: a, gpus: 1, duration: 100}\n"
                    "  - {name: later, team: a, gpus: 1, at: 500}\n")
    out = run(text, "--until", "250")
    assert out["time"] == 250
    assert list(out["workloads"]) == ["now"]
    assert out["workloads"]["now"]["status"] == "Completed"
    assert run(text)["time"] == 500


def test_placement_given_in_the_file_starts_there() -> None:
    text = ("pools: [{name: main, start_delay: 5, nodes: [{prefix: n, count: 2, gpus: 8}]}]\n"
            "teams: [{name: a}]\n"
            "workloads: [{name: w, team: a, gpus: 0.5, pods: 2, at: 3, placement: "
            "[{node: n2, devices: [7]}, {node: n2, devices: [7]}]}]\n")
    w = run(text)["workloads"]["w"]
    assert w["placement"] == [{"node": "n2", "devices": [{"index": 7, "milli": 500}]}] * 2
    assert [(e["at"], e["status"]) for e in w["events"]] == [
        (3, "Pending"), (3, "Queued"), (3, "Starting"), (8, "Running")
    ]


def test_events_on_ended_workloads_are_ignored_and_recorded() -> None:
    out = run(NODE8 + "workloads: [{name: w, team: a, gpus: 1, duration: 10}]\n"
              "events: [{at: 20, cancel: w}, {at: 30, uncordon: n1}]\n")
    assert out["workloads"]["w"]["status"] == "Completed"
    ignored = out["ignored_events"]
    assert [(e["at"], e["event"], e["target"], e["path"]) for e in ignored] == [
        (20, "cancel", "w", "events[0]"), (30, "uncordon", "n1", "events[1]")
    ]
    assert "Completed" in ignored[0]["message"]


def test_complete_and_fail_events() -> None:
    out = run(NODE8 + "workloads: [{name: ok, team: a, gpus: 1}, {name: bad, team: a, gpus: 1}]\n"
              "events: [{at: 5, complete: ok}, {at: 6, fail: bad}]\n")
    assert (out["workloads"]["ok"]["status"], out["workloads"]["ok"]["ended_at"]) == (
        "Completed", 5)
    assert (out["workloads"]["bad"]["status"], out["workloads"]["bad"]["ended_at"]) == (
        "Failed", 6)


def test_cordoned_node_keeps_its_work_and_takes_none() -> None:
    text = ("pools: [{name: main, nodes: [{prefix: n, count: 2, gpus: 4}]}]\n"
            "teams: [{name: a}]\n"
            "workloads:\n"
            "  - {name: stays, team: a, gpus: 4}\n"
            "  - {name: new, team: a, gpus: 4, at: 10}\n"
            "  - {name: waits, team: a, gpus: 4, at: 10}\n"
            "events: [{at: 5, cordon: n1}]\n")
    out = run(text)
    assert out["workloads"]["stays"]["status"] == "Running"
    assert out["workloads"]["stays"]["placement"][0]["node"] == "n1"
    assert out["workloads"]["new"]["placement"][0]["node"] == "n2"
    assert out["workloads"]["waits"]["status"] == "Queued"
    assert out["pools"]["main"]["capacity"] == 8  # cordoned nodes still count


def test_duration_zero_completes_at_once() -> None:
    w = run(NODE8 + "workloads: [{name: w, team: a, gpus: 1, duration: 0}]\n")["workloads"]["w"]
    assert (w["status"], w["running_at"], w["ended_at"]) == ("Completed", 0, 0)


def test_run_stops_at_the_ten_day_horizon() -> None:
    text = NODE8 + ("workloads: [{name: long, team: a, gpus: 1, duration: 2000000},"
                    " {name: w, team: a, gpus: 1, at: 100}]\n")
    result = simulate(parse_scenario(text))
    assert result.horizon_reached and result.time == 100
    assert HORIZON == 864_000


def test_same_file_same_outcome() -> None:
    text = (EXAMPLES / "s4_reclaim_reservation.yaml").read_text()
    assert json.dumps(run(text)) == json.dumps(run(text))


def _restless(snapshot, config):
    """A cycle that always 'changes' something: it moves every waiting workload."""
    moves = tuple(Decision(DecisionKind.MOVE, w.id, pool="main") for w in snapshot.workloads)
    return Plan(config.cycle_id, snapshot.version, snapshot.now, moves)


def test_cycle_limit_names_the_workloads_still_changing() -> None:
    text = NODE8 + "workloads: [{name: spinner, team: a, gpus: 1, at: 7}]\n"
    with pytest.raises(CycleLimitError) as err:
        simulate(parse_scenario(text), cycle=_restless)
    assert err.value.at == 7 and err.value.names == ["spinner"]


def test_cycle_limit_exits_3(monkeypatch) -> None:
    monkeypatch.setattr("apportion.sim.runner.CycleCache", lambda: _restless)
    run_ = cli("-", stdin=NODE8 + "workloads: [{name: spinner, team: a, gpus: 1}]\n")
    assert run_.exit_code == 3
    assert "spinner" in run_.stderr and "100 scheduling cycles" in run_.stderr


def test_stdin_in_a_shell() -> None:
    run_ = shell("-", "-o", "json", stdin=NODE8 + "workloads: [{name: w, team: a, gpus: 1}]\n")
    assert run_.exit_code == 0, run_.stderr
    assert json.loads(run_.stdout)["workloads"]["w"]["status"] == "Running"
