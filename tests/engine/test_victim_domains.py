"""SPEC 6.5 with required topology: the victim search runs per domain and the
domain whose victim set is cheapest wins: fewest Running milli-GPU first, then
fewest Starting milli-GPU."""

from __future__ import annotations

from apportion.domain.lifecycle import Status, transition
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


def test_a_rack_that_needs_no_victim_beats_one_that_needs_a_nomination() -> None:
    """Rack a's devices are held by a victim still exiting whose preemptor
    was cancelled; in rack b, z holds a nomination (its victim exiting). A
    4-GPU job that needs one rack and outranks z: rack a needs no victim,
    rack b z's nomination (no Running or Starting GPUs either way): fewer
    victims wins, and z keeps its nomination."""
    w = World().pool(racks={"a": 1, "b": 1}, gpus=4, preemption_grace=300).team("u")
    w.submit("va", "u", 4, priority=10, node_selector={"rack": "a"}, running=True)
    w.submit("vb", "u", 4, priority=10, node_selector={"rack": "b"}, running=True)
    w.submit("first", "u", 4, priority=60, node_selector={"rack": "a"})
    w.settle()
    w.states[w.names["first"]] = transition(w.w("first"), Status.CANCELLED, w.now)
    w.submit("z", "u", 4, priority=40, node_selector={"rack": "b"})
    w.settle()
    assert w.preempted() == ["va", "vb"] and w.code("z") == "PREEMPTING"
    w.submit("job", "u", 4, priority=60, topology={"level": "rack", "mode": "required"})
    w.settle()
    assert w.code("job") == "PREEMPTING"
    assert [p.node for p in w.w("job").nomination] == ["main-a-n0"]
    assert [p.node for p in w.w("z").nomination] == ["main-b-n0"]
    assert w.preempted() == ["va", "vb"]
