"""What applying a plan records, as users read it afterwards (the workload's
events and attempts, the preemption list, the victims still exiting): times
are the cycle's, causes name the cycle, the preemptor is named."""

from __future__ import annotations

from tests.engine.harness import World


def test_a_requeued_victim_s_record() -> None:
    w = World().pool(nodes=1, gpus=8, preemption_grace=30).team("a").team("b", main=8)
    w.submit("sweep", "a", 8, requeue_on_preemption=True, running=True)
    start = w.w("sweep").events
    assert [e.status.value for e in start][-2:] == ["Starting", "Running"]
    assert w.w("sweep").started_at == 0
    w.advance(100)
    w.submit("owner", "b", 8, wclass="reserved")
    w.cycle()
    cycle = f"cycle {w.cycle_id}"

    (p,) = w.preemptions
    assert (p.at, p.victim, p.by, p.milli) == (100, w.names["sweep"], w.names["owner"], 8000)
    (e,) = w.exiting
    assert (e.workload_id, e.attempt, e.team, e.exits_at) == (w.names["sweep"], 1, "a", 130)

    sweep = w.w("sweep")
    assert (sweep.attempt, sweep.status.value) == (2, "Pending")
    assert sweep.submitted_at == 0  # keeps its place in line
    (first,) = sweep.attempts
    assert (first.status.value, first.ended_at) == ("Preempted", 130)  # its exit (SPEC 6.6)
    last = sweep.events[-1]
    assert (last.at, last.attempt, last.status.value, last.cause) == (100, 2, "Pending", cycle)
    assert last.message == "requeued after preemption"
    owner = w.w("owner")
    assert w.code("owner") == "PREEMPTING" and owner.nomination and not owner.is_hold

    w.advance(30)
    w.cycle()
    owner = w.w("owner")
    assert (owner.status.value, owner.started_at) == ("Running", 130)
    started = [ev for ev in owner.events if ev.status.value == "Starting"]
    assert [(ev.at, ev.cause) for ev in started] == [(130, f"cycle {w.cycle_id}")]


def test_route_and_start_events_name_the_cycle_and_the_nodes() -> None:
    """The Queued event of a routed workload names the cycle that routed it;
    a start across five nodes lists the first three and counts the rest,
    and the cycle's counters say how many devices placement looked at."""
    w = World().pool(nodes=5, gpus=1).team("a")
    w.submit("gang", "a", 1, pods=5)
    plan = w.cycle()
    gang = w.w("gang")
    queued = [e for e in gang.events if e.status.value == "Queued"]
    assert [(e.at, e.cause) for e in queued] == [(0, "cycle 1")]
    (started,) = [e for e in gang.events if e.status.value == "Starting"]
    assert started.cause == "cycle 1"
    assert started.message == ("admitted in pool main on free GPUs"
                               " (main-n000, main-n001, main-n002 and 2 more)")
    assert plan.counters["placements"] >= 1 and plan.counters["devices_examined"] >= 5
    assert plan.counters["nodes_examined"] >= 5  # a pod on each of five nodes
