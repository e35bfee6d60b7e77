"""SPEC 6.4, the cross-team rule: W may take V only if excess(c_W), W added and
the victims removed, is *less than* excess(c_V). Two teams equally far over
their shares do not preempt each other: if they did, the victim's team would
be just as far over as the preemptor's was, and could take it back the same
way (the flip-flop the strict comparison rules out)."""

from __future__ import annotations

from tests.engine.harness import World


def test_equal_excess_waits_instead_of_preempting() -> None:
    # 8 GPUs, equal weights: entitled to 4 each. a runs 5 (1 over), its
    # 2-GPU job started last (the least work lost: the cheapest victim); b
    # runs 3 and asks for 2 more, which would leave b 1 over as well.
    w = World().pool(nodes=1, gpus=8).team("a").team("b")
    for i in range(3):
        w.submit(f"a{i}", "a", 1, requeue_on_preemption=True, running=True)
    for i in range(3):
        w.submit(f"b{i}", "b", 1, running=True)
    w.advance(90)
    w.submit("a-two", "a", 2, requeue_on_preemption=True, running=True)
    w.advance(10)
    w.submit("more", "b", 2)
    w.settle()
    assert w.preemptions == []
    assert w.code("more") == "FAIR_SHARE"
    assert w.usage("a") == 5 and w.usage("b") == 3


def test_a_team_as_far_over_as_the_newcomer_is_no_victim_even_when_cheapest() -> None:
    """One 4-GPU node; a (weight 1), b and c (weight 2) all at priority 30 and
    over their shares; c's newcomer W (1 GPU, priority 50) finds no free GPU.

    Shares: W's priority level first (c: 1), then the 3 GPUs left at priority
    30 split 1:2:2 (0.6, 1.2, 1.2). So a is 0.9 over, b 0.05 over (1.25 on
    1.2) and c, W counted, 0.05 over too (2.25 on 2.2).

    b's job B has just been placed (Starting: the cheapest kind of victim)
    on the device it shares with a's 0.25-GPU job p1. Taking B and p1 would
    free that device; but b is exactly as far over as c, so B may not be
    taken, and W takes a's 1-GPU job p2 instead (a is the team far over)."""
    w = World().pool(nodes=1, gpus=4)
    w.team("a", weight=1).team("b", weight=2).team("c", weight=2)
    w.submit("c75", "c", 0.75, priority=30, running=True)
    w.submit("a25", "a", 0.25, priority=30, running=True)
    w.submit("b50", "b", 0.5, priority=30, running=True)
    w.submit("c50", "c", 0.5, priority=30, running=True)
    w.submit("p1", "a", 0.25, priority=30, running=True)
    w.advance(50)
    w.submit("p2", "a", 1, priority=30, running=True)  # less work lost than a's others
    w.advance(50)
    w.instant_running = False
    w.submit("B", "b", 0.75, priority=30)
    w.settle()
    assert w.status("B") == "Starting"
    assert w.w("B").placement[0].devices[0].index == w.w("p1").placement[0].devices[0].index
    w.submit("W", "c", 1, priority=50)
    w.cycle()
    assert w.preempted() == ["p2"]
    assert (w.status("W"), w.status("B"), w.status("p1")) == ("Starting", "Starting", "Running")
