"""Every victim set is irreducible: put any single victim back and the
preemptor no longer fits, or a 6.4 test breaks (SPEC 6.5)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apportion.engine.cycle import run_cycle
from apportion.engine.plan import DecisionKind, Plan
from apportion.engine.preemption.search import VictimSearch
from apportion.engine.snapshot import CycleConfig, Snapshot
from apportion.engine.working_state import WorkingState
from tests.engine.harness import World


def first_preemption(plan: Plan) -> tuple[int, list[int]] | None:
    """The preemptor and its victims, if the plan's first state-changing decision
    (after routing) is part of a preemption."""
    victims: list[int] = []
    for d in plan.decisions:
        if d.kind in (DecisionKind.ROUTE, DecisionKind.WAIT):
            continue
        if d.kind is DecisionKind.PREEMPT:
            victims.append(d.workload_id)
            continue
        if victims and d.kind in (DecisionKind.START, DecisionKind.NOMINATE):
            return d.workload_id, victims
        return None
    return None


def fits_with(snap: Snapshot, plan: Plan, wid: int, removed: list[int]) -> bool:
    """Does W fit (quota and devices) with ``removed`` taken out in order, every
    6.4 test passing on the way and the same-team rule holding at the end?"""
    ws = WorkingState(snap)
    routed = {d.workload_id: d.pool for d in plan.decisions
              if d.kind is DecisionKind.ROUTE and d.pool}
    ws.compute_entitlements(routed)
    for i, pool in routed.items():
        ws.workloads[i] = ws.workloads[i].__class__(**{
            **{f: getattr(ws.workloads[i], f) for f in ws.workloads[i].__slots__},
            "pool": pool,
        })
    w = ws.workloads[wid]
    ps = ws.pools[w.pool or ""]
    search = VictimSearch(ws, ps, w)
    ws.count(ps, w, search.need)
    free = ps.cluster.free_milli((w.id, w.attempt), allow_exiting=True)
    for vid in removed:
        v = ws.workloads[vid]
        if not search.passes(v):
            return False
        free += search.remove(v)
    # 6.4's same-team rule, read on the final set (docs/scheduling.md, "The
    # same-team rule in the prune"): with victims of W's own team among them,
    # the team must not end further over its share than it was.
    own = any(ws.workloads[vid].team == w.team for vid in removed)
    return search.fit(None, free) and not (own and search.own_debt() > 0)


@st.composite
def crowded(draw: st.DrawFn) -> World:
    w = World().pool(nodes=draw(st.integers(1, 2)), gpus=4)
    w.team("a", weight=draw(st.integers(1, 3))).team("b", main=draw(st.integers(0, 4)))
    w.team("c", weight=draw(st.integers(1, 3)))
    for i in range(draw(st.integers(4, 14))):
        team = draw(st.sampled_from(["a", "c"]))
        w.submit(f"r{i}", team, draw(st.sampled_from([0.25, 0.5, 1, 2])),
                 priority=draw(st.sampled_from([10, 50])))
    w.settle()
    return w


def test_no_victim_can_be_spared() -> None:
    """Over a fixed (derandomized) sample of 60 crowded worlds and newcomers,
    every preemption's victim set is irreducible. A newcomer that needs no
    victim has nothing to check, so the sample's preemptions are counted and
    bounded: at least a quarter of the examples must preempt (21 of the 60 do
    on 2026-12-03; issue 19: before the count, 33 of 60 returned early unseen)."""
    seen = {"examples": 0, "preempting": 0, "victims": 0}

    @settings(max_examples=60, derandomize=True, database=None, deadline=None,
              suppress_health_check=[HealthCheck.too_slow])
    @given(crowded(), st.sampled_from([2, 3, 4]), st.sampled_from(["reserved", "elastic"]),
           st.sampled_from(["a", "b", "c"]))
    def run(w: World, gpus: float, wclass: str, team: str) -> None:
        seen["examples"] += 1
        if wclass == "reserved" and team != "b":
            team = "b"
        w.submit("newcomer", team, gpus, wclass=wclass,
                 priority=None if wclass == "reserved" else 90)
        snap = w.snapshot()
        plan = run_cycle(snap, CycleConfig(1))
        found = first_preemption(plan)
        if found is None:
            return  # counted: the bound below keeps these a minority
        seen["preempting"] += 1
        wid, victims = found
        seen["victims"] += len(victims)
        assert fits_with(snap, plan, wid, victims)
        for spared in victims:
            rest = [v for v in victims if v != spared]
            assert not fits_with(snap, plan, wid, rest), f"victim {spared} was not needed"

    run()
    assert seen["examples"] >= 30, seen  # the sample really ran
    assert seen["preempting"] * 4 >= seen["examples"], seen
    assert seen["victims"] > seen["preempting"], seen  # some sets of several victims
