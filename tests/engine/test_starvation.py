"""The optional starvation hold of SPEC 6.7."""

from __future__ import annotations

from apportion.domain.lifecycle import Status, transition
from tests.engine.harness import World


def _complete(w: World, name: str) -> None:
    w.states[w.names[name]] = transition(w.w(name), Status.COMPLETED, w.now)


def scenario(hold_after: int | None) -> World:
    """Team u runs eight 1-GPU jobs and queues four more; t queues one 8-GPU
    job. Entitled to 4 each, big (4 - 0 - 8 = -4) is ahead of u's next
    (4 - 8 - 1 = -5) and may not preempt (equal excess, 4 and 4)."""
    w = World().pool(nodes=1, starvation_hold_after=hold_after).team("t").team("u")
    for i in range(8):
        w.submit(f"small{i}", "u", 1, running=True)
    w.submit("big", "t", 8)
    for i in range(8, 12):
        w.submit(f"small{i}", "u", 1)
    w.settle()
    assert w.status("big") == "Queued" and not w.preemptions
    return w


def test_without_a_hold_small_work_overtakes_forever() -> None:
    w = scenario(None)
    w.advance(200)
    _complete(w, "small0")
    w.settle()
    assert w.status("small8") == "Running"
    assert w.status("big") == "Queued"


def test_hold_keeps_freed_devices_for_the_head_of_the_line() -> None:
    w = scenario(100)
    assert w.w("big").head_since == 0
    w.advance(150)
    w.settle()
    assert w.w("big").is_hold and len(w.w("big").nomination) == 1
    for i in range(8):
        _complete(w, f"small{i}")
        w.settle()
        if i < 7:
            assert w.status("small8") == "Queued", i  # freed GPUs stay held
    # big started on the eight devices held for it (entitled to 4, it is then
    # preempted by u's waiting jobs reclaiming their share: 6.4)
    (start,) = [d for plan in w.plans for d in plan.decisions
                if d.workload_id == w.names["big"] and d.kind.value == "start"]
    assert "held for it" in start.message and start.milli == 8000


def test_a_higher_priority_workload_takes_a_hold() -> None:
    w = scenario(100)
    w.advance(150)
    w.settle()
    assert w.w("big").is_hold
    _complete(w, "small0")
    w.submit("urgent", "t", 1, priority=90)
    w.settle()
    assert w.status("urgent") == "Running"


def test_a_hold_waits_for_starting_work_before_running_work() -> None:
    """The held placement needs the cheapest work to end, in 6.5's order
    (docs/scheduling.md, "Starvation holds"): a node whose job is Starting
    before a node whose job is Running, at equal priority."""
    w = World().pool(nodes=2, gpus=4, starvation_hold_after=100).team("u")
    w.submit("running", "u", 4, running=True)
    w.instant_running = False
    w.submit("starting", "u", 4)
    w.submit("big", "u", 4)  # same team and priority: it may preempt neither
    w.settle()
    assert w.status("starting") == "Starting" and w.code("big") == "WAITING_FOR_CAPACITY"
    w.advance(150)
    w.settle()
    big = w.w("big")
    assert big.is_hold and not w.preemptions
    assert [p.node for p in big.nomination] == [w.w("starting").placement[0].node]
    assert w.w("running").placement[0].node != w.w("starting").placement[0].node


def test_a_hold_counts_a_victim_already_leaving_as_gone() -> None:
    """Rack a runs three jobs next to a victim still exiting (its preemptor
    was cancelled during the grace); rack b runs four jobs. The held
    placement is the one needing the fewest running workloads to end
    (SPEC 6.9): rack a's three, the exiting victim leaves by itself."""
    w = World().pool(racks={"a": 1, "b": 1}, gpus=4, preemption_grace=300,
                     starvation_hold_after=100).team("u")
    for i in range(4):
        w.submit(f"b{i}", "u", 1, node_selector={"rack": "b"}, running=True)
    w.advance(10)
    w.submit("low", "u", 1, priority=10, node_selector={"rack": "a"}, running=True)
    for i in range(3):
        w.submit(f"a{i}", "u", 1, node_selector={"rack": "a"}, running=True)
    w.submit("hp", "u", 1, priority=60, node_selector={"rack": "a"})
    w.settle()
    assert w.preempted() == ["low"] and w.code("hp") == "PREEMPTING"
    w.states[w.names["hp"]] = transition(w.w("hp"), Status.CANCELLED, w.now)
    w.submit("big", "u", 4)  # same team and priority as the jobs: it preempts none
    w.settle()
    assert w.code("big") == "WAITING_FOR_CAPACITY"
    w.advance(150)
    w.settle()
    big = w.w("big")
    assert big.is_hold and w.preempted() == ["low"]
    assert [p.node for p in big.nomination] == ["main-a-n0"]


def test_a_held_workload_that_may_preempt_counts_its_held_devices() -> None:
    """a runs 6 of the node's 8 GPUs; b's 8-GPU job may not preempt (6.4) and
    gets a starvation hold (its placement: the 2 free GPUs now, the others as
    they free). Then b is given a reservation
    of 8: its job runs inside its own reservation, may take a's work back,
    and needs only the 6 GPUs a holds besides the 2 held for it."""
    w = World().pool(nodes=1, starvation_hold_after=10).team("a").team("b")
    w.submit("a0", "a", 3, running=True)
    w.submit("a1", "a", 3, running=True)
    w.submit("big", "b", 8)
    w.settle()
    assert w.code("big") == "FAIR_SHARE"
    w.advance(10)
    w.settle()
    assert w.w("big").is_hold
    w.reservations[("b", "main")] = 8000
    w.settle()
    assert w.preempted() == ["a0", "a1"]
    assert w.status("big") == "Running"
