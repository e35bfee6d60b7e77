"""SPEC 6.5 with required topology: the victim search runs per domain and the
domain whose victim set is cheapest wins: fewest Running milli-GPU first, then
fewest Starting milli-GPU."""

from __future__ import annotations

from tests.engine.harness import World


def test_a_rack_of_starting_work_is_cheaper_than_a_rack_of_running_work() -> None:
    w = World().pool(racks={"r1": 1, "r2": 1}, gpus=4, topology=("zone", "rack"))
    w.team("t", main=4).team("o")
    w.submit("running", "o", 4, node_selector={"rack": "r1"}, running=True)
    w.instant_running = False
    w.submit("starting", "o", 4, node_selector={"rack": "r2"})
    w.settle()
    assert w.status("starting") == "Starting"
    w.submit("r", "t", 2, pods=2, wclass="reserved",
             topology={"level": "rack", "mode": "required"})
    w.settle()
    assert w.preempted() == ["starting"]
    assert w.status("running") == "Running"
    assert {p.node for p in w.w("r").placement} == {"main-r2-n0"}


def test_fewer_running_gpus_win_over_fewer_victims() -> None:
    """r1 holds one 4-GPU Running job, r2 two 1-GPU Running jobs and two
    Starting ones: taking r2 loses 2 Running GPUs against 4, though it means
    four victims against one."""
    w = World().pool(racks={"r1": 1, "r2": 1}, gpus=4, topology=("zone", "rack"))
    w.team("t", main=4).team("o")
    w.submit("big", "o", 4, node_selector={"rack": "r1"}, running=True)
    for i in range(2):
        w.submit(f"run{i}", "o", 1, node_selector={"rack": "r2"}, running=True)
    w.instant_running = False
    for i in range(2):
        w.submit(f"start{i}", "o", 1, node_selector={"rack": "r2"})
    w.settle()
    w.submit("r", "t", 4, wclass="reserved", topology={"level": "rack", "mode": "required"})
    w.settle()
    assert w.preempted() == ["run0", "run1", "start0", "start1"]
    assert w.status("big") == "Running"
