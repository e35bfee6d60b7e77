"""The statement: the one path through which a cycle changes anything.

Two promises: the working copy a cycle builds as it decides is exactly what
``apply_plan`` makes of the plan afterwards (one function, ``effect``, for
both), and a rollback takes back every change since its checkpoint.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings

from apportion.domain.lifecycle import Status
from apportion.engine.apply import apply_plan
from apportion.engine.cycle import _Cycle
from apportion.engine.plan import DecisionKind, Plan
from apportion.engine.snapshot import CycleConfig, Snapshot
from apportion.engine.statement import Statement
from apportion.engine.working_state import WorkingState
from tests.engine.harness import World
from tests.engine.test_cycle_properties import same_org, submit_step
from tests.engine.test_victim_exhaust import crowded, submit_arrival


class Recording:
    """A cycle function that checks each cycle's working copy against the plan."""

    def __init__(self) -> None:
        self.kinds: set[DecisionKind] = set()

    def __call__(self, snapshot: Snapshot, config: CycleConfig) -> Plan:
        cycle = _Cycle(snapshot, config)
        plan = cycle.run()
        applied = apply_plan({w.id: w for w in snapshot.workloads}, snapshot.exiting, plan)
        for wid in {d.workload_id for d in plan.decisions}:
            assert cycle.ws.workloads[wid] == applied.states[wid], plan.for_workload(wid)
        self.kinds.update(d.kind for d in plan.decisions)
        return plan


@settings(max_examples=25, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(crowded())
def test_the_working_copy_is_what_the_plan_applies_to(
    case: tuple[World, list[dict[str, Any]], list[dict[str, Any]], int | None],
) -> None:
    world, fill, steps, _cordon = case
    rec = Recording()
    w = same_org(world, rec)
    for step in fill:
        submit_step(w, step)
        w.settle(60)
    for step in steps:
        submit_arrival(w, step)
        w.settle(60)


def test_the_recording_sees_every_kind_of_change() -> None:
    """The property above is only as good as the decisions it sees: a world
    with a preemption (whole and shrink), a nomination and a start."""
    rec = Recording()
    w = World(rec).pool(nodes=1, gpus=4, preemption_grace=30).team("a", main=4).team("b")
    w.submit("el", "b", 1, pods=3, min_pods=1, running=True)
    w.submit("whole", "b", 1, running=True)
    for name in ("r1", "r2"):  # the first shrinks el, the second takes whole work
        w.submit(name, "a", 1, pods=2, wclass="reserved")
        w.settle()
        w.advance(30)
        w.settle()
        assert w.status(name) == "Running"
    assert {DecisionKind.ROUTE, DecisionKind.START, DecisionKind.PREEMPT,
            DecisionKind.NOMINATE, DecisionKind.WAIT} <= rec.kinds
    assert any(p.pods for p in w.preemptions) and any(not p.pods for p in w.preemptions)


def test_a_rollback_takes_back_decisions_states_devices_and_usage() -> None:
    w = World().pool(nodes=1, gpus=4).team("a", main=2).team("b")
    w.submit("el", "b", 2, running=True)
    w.submit("el2", "b", 1, running=True)
    w.submit("new", "a", 1, wclass="reserved")
    snap = w.snapshot()
    ws = WorkingState(snap)
    ws.compute_entitlements(routed={})
    stmt = Statement(ws, snap.now, "test")
    ps = ws.pools["main"]
    el = ws.workloads[w.names["el"]]
    new = ws.workloads[w.names["new"]]

    def observed() -> tuple[object, ...]:
        return (dict(ws.workloads), ps.ledger.usage("a"), ps.ledger.usage("b"),
                dict(ps.users), ps.cluster.free_milli(), dict(ps.victims.where))

    before = observed()
    assert before[4] == 1000 and el.id in ps.victims.where
    mark = stmt.checkpoint()
    stmt.route(new, "main", "test")
    stmt.preempt(ps, el, ws.workloads[new.id], snap.now)
    assert ws.workloads[el.id].status is Status.PREEMPTED
    assert ps.ledger.usage("b") == 1000 and el.id not in ps.victims.where
    assert ps.cluster.free_milli() == 3000
    stmt.start(ps, ws.workloads[new.id], el.placement[:1])
    assert ps.ledger.usage("a") == 2000 and len(stmt.decisions) == 3
    stmt.rollback(mark)
    assert stmt.decisions == []
    assert observed() == before
