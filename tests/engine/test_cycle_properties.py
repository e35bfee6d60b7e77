"""Invariants of the scheduling cycle over random organizations and events."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apportion.domain.lifecycle import Status, transition
from apportion.domain.org import build_tree
from apportion.domain.workload import TopologyMode
from apportion.engine.cycle import run_cycle
from apportion.engine.snapshot import CycleConfig
from apportion.engine.usage_ledger import Ledger
from tests.engine.harness import NoFixedPoint, World

GPUS = st.sampled_from([0.25, 0.5, 0.75, 1, 2, 4])


@st.composite
def worlds(draw: st.DrawFn) -> tuple[World, list[dict]]:
    racks = draw(st.integers(1, 3))
    per_rack = draw(st.integers(1, 2))
    grace = draw(st.sampled_from([0, 0, 30]))
    w = World().pool(racks={f"r{i}": per_rack for i in range(racks)}, gpus=4,
                     topology=("zone", "rack"), preemption_grace=grace)
    capacity = racks * per_rack * 4
    left = capacity
    leaves = []
    for t in range(draw(st.integers(1, 3))):
        top = f"t{t}"
        res = draw(st.integers(0, left))
        left -= res
        limit = draw(st.sampled_from([None, None, 0, 50, 100]))
        w.team(top, weight=draw(st.integers(1, 4)), limit=limit, main=res)
        if draw(st.booleans()):
            inner = res
            for c in range(2):
                r = draw(st.integers(0, inner))
                inner -= r
                w.team(f"{top}c{c}", top, weight=draw(st.integers(1, 3)), main=r)
                leaves.append(f"{top}c{c}")
        else:
            leaves.append(top)
    steps = []
    for i in range(draw(st.integers(3, 14))):
        topo = draw(st.sampled_from([None, None, "required", "preferred"]))
        steps.append({
            "name": f"w{i}",
            "team": draw(st.sampled_from(leaves)),
            "gpus": draw(GPUS),
            "pods": draw(st.integers(1, 3)),
            "wclass": draw(st.sampled_from(["reserved", "elastic", "elastic"])),
            "priority_shift": draw(st.integers(0, 2)),
            "requeue": draw(st.booleans()),
            "topology": topo,
            "complete": draw(st.integers(0, 5)),
        })
    return w, steps


@st.composite
def preempting_worlds(draw: st.DrawFn) -> tuple[World, list[dict]]:
    """Worlds that preempt: low-priority elastic work of every team first
    fills the pool (more than it holds, so some waits), then reserved work of
    teams with reservations and higher-priority elastic work arrive, which
    can only start by taking GPUs back. Same (world, steps) shape as
    :func:`worlds`; the fill steps complete nothing."""
    racks = draw(st.integers(1, 2))
    per_rack = draw(st.integers(1, 2))
    grace = draw(st.sampled_from([0, 0, 30]))
    w = World().pool(racks={f"r{i}": per_rack for i in range(racks)}, gpus=4,
                     topology=("zone", "rack"), preemption_grace=grace)
    capacity = racks * per_rack * 4
    left = capacity
    leaves: list[str] = []
    reserved_room: dict[str, int] = {}  # leaf -> GPUs reserved on its path
    for t in range(draw(st.integers(2, 3))):
        top = f"t{t}"
        res = draw(st.integers(0, left))
        left -= res
        w.team(top, weight=draw(st.integers(1, 3)),
               limit=draw(st.sampled_from([None, None, None, 100])), main=res)
        if draw(st.booleans()):
            inner = res
            for c in range(2):
                r = draw(st.integers(0, inner))
                inner -= r
                w.team(f"{top}c{c}", top, weight=draw(st.integers(1, 3)), main=r)
                leaves.append(f"{top}c{c}")
                reserved_room[f"{top}c{c}"] = res
        else:
            leaves.append(top)
            reserved_room[top] = res

    def step(name: str, team: str, gpus: float, pods: int, wclass: str, shift: int,
             topology: str | None, complete: int) -> dict:
        return {"name": name, "team": team, "gpus": gpus, "pods": pods, "wclass": wclass,
                "priority_shift": shift, "requeue": draw(st.booleans()),
                "topology": topology, "complete": complete}

    steps = []
    filled = 0.0
    while filled < capacity * 1.25 and len(steps) < 24:
        gpus = draw(st.sampled_from([0.25, 0.5, 1, 1, 2]))
        pods = draw(st.integers(1, 2))
        filled += gpus * pods
        steps.append(step(f"f{len(steps)}", draw(st.sampled_from(leaves)), gpus, pods,
                          "elastic", 0, None, 0))
    owners = [leaf for leaf in leaves if reserved_room[leaf] > 0]
    for i in range(draw(st.integers(2, 5))):
        topo = draw(st.sampled_from([None, None, "required", "preferred"]))
        if owners and draw(st.booleans()):
            team = draw(st.sampled_from(owners))
            gpus = draw(st.sampled_from([g for g in (0.5, 1, 2, 4)
                                         if g <= reserved_room[team]] or [0.5]))
            steps.append(step(f"w{i}", team, gpus, 1, "reserved", draw(st.integers(0, 2)),
                              topo, draw(st.integers(0, 5))))
        else:
            steps.append(step(f"w{i}", draw(st.sampled_from(leaves)),
                              draw(st.sampled_from([0.5, 1, 2])), draw(st.integers(1, 2)),
                              "elastic", 2, topo, draw(st.integers(0, 5))))
    return w, steps


def rate_of(strategy: st.SearchStrategy[tuple[World, list[dict]]], examples: int,
            check: Callable[[World, list[dict]], World]) -> dict[str, int]:
    """Run ``check`` over a fixed (derandomized) sample of ``strategy`` and
    count the examples whose run preempted; ``check`` returns the world it
    ran (or None when it ran several)."""
    seen = {"examples": 0, "preempting": 0, "cross_team": 0}

    @settings(max_examples=examples, derandomize=True, database=None, deadline=None,
              suppress_health_check=[HealthCheck.too_slow])
    @given(strategy)
    def run(case: tuple[World, list[dict]]) -> None:
        ran = check(*case)
        seen["examples"] += 1
        seen["preempting"] += bool(ran.preemptions)
        seen["cross_team"] += any(ran.states[p.victim].team != ran.states[p.by].team
                                  for p in ran.preemptions)

    run()
    assert seen["examples"] * 2 >= examples, seen  # the sample really ran
    return seen


def submit_step(w: World, step: dict) -> None:
    """Submit the workload one drawn step describes."""
    prio = {"reserved": 100 + 100 * step["priority_shift"],
            "elastic": 25 * (step["priority_shift"] + 1)}[step["wclass"]]
    topo = {"level": "rack", "mode": step["topology"]} if step["topology"] else None
    w.submit(step["name"], step["team"], step["gpus"], pods=step["pods"],
             wclass=step["wclass"], priority=prio, topology=topo,
             requeue_on_preemption=step["requeue"])


def complete_and_advance(w: World, step: dict) -> None:
    """Complete as many Running workloads as the step says, then 30 s pass."""
    running = [s for s in w.states.values() if s.status is Status.RUNNING]
    for s in running[: step["complete"] % 3]:
        w.states[s.id] = transition(s, Status.COMPLETED, w.now)
    w.advance(30)


def same_org(world: World, cycle_fn: object = None) -> World:
    """A fresh world with ``world``'s pools, nodes and teams (and ``cycle_fn``)."""
    w = World(cycle_fn)
    w.pools, w.nodes, w.teams, w.reservations = world.pools, world.nodes, world.teams, dict(
        world.reservations)
    return w


def check_invariants(w: World) -> None:
    tree = build_tree(w.teams, w.reservations)
    used: dict[tuple[str, int], int] = defaultdict(int)
    led = Ledger(tree, "main")
    node_rack = {n.name: n.labels.get("rack") for n in w.nodes}
    for s in w.states.values():
        if s.status.is_placed:
            assert s.spec.min_pods <= len(s.placement) <= s.spec.pods
            for pod in s.placement:
                for d in pod.devices:
                    used[(pod.node, d.index)] += d.milli
            led.add(s.team, s.spec.is_reserved, s.placed_milli)
            topo = s.spec.topology
            if topo is not None and topo.mode is TopologyMode.REQUIRED:
                assert len({node_rack[p.node] for p in s.placement}) == 1
        elif s.status is Status.QUEUED and s.nomination and not s.is_hold:
            led.add(s.team, s.spec.is_reserved, s.nominated_milli)
    for e in w.exiting:
        for pod in e.placement:
            for d in pod.devices:
                used[(pod.node, d.index)] += d.milli
    assert all(v <= 1000 for v in used.values()), used
    for team in tree.teams:
        cap = tree.cap(team, "main")
        if cap is not None:
            assert led.usage(team) <= cap, (team, led.usage(team), cap)
    for top in tree.top_level():
        assert led.overflow(top) == 0, (top, led.overflow(top))
    for p in w.preemptions:
        assert not w.states[p.victim].spec.is_reserved


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(worlds())
def test_invariants_hold_after_every_cycle(case: tuple[World, list[dict]]) -> None:
    w, steps = case
    try:
        _steps_with_invariants(w, steps)
    except NoFixedPoint:  # rules that take turns (docs/scheduling.md, "Preemption cycles")
        check_invariants(w)


def _steps_with_invariants(w: World, steps: list[dict]) -> None:
    for step in steps:
        submit_step(w, step)
        before = len(w.preemptions)
        w.settle()
        check_invariants(w)
        _no_reversal(w, w.preemptions[before:])
        # Determinism: the same snapshot gives the same plan, bit for bit.
        snap = w.snapshot()
        assert run_cycle(snap, CycleConfig(7)) == run_cycle(snap, CycleConfig(7))
        # A fixed point stays one.
        assert not w.cycle().changes_anything
        complete_and_advance(w, step)
        w.settle()
        check_invariants(w)


def _no_reversal(w: World, preemptions: list) -> None:
    """Under the same demand, a cross-team preemption is never undone."""
    pairs = set()
    for p in preemptions:
        victim, by = w.states[p.victim], w.states[p.by]
        if victim.team == by.team or by.spec.is_reserved:
            continue
        if victim.spec.priority != by.spec.priority:
            continue
        assert (by.team, victim.team) not in pairs, "preemption undone under same demand"
        pairs.add((victim.team, by.team))


def _replayed(world: World, steps: list[dict]) -> World:
    w = same_org(world)
    try:
        _steps_with_invariants(w, steps)
    except NoFixedPoint:
        check_invariants(w)
    return w


def test_invariants_hold_in_worlds_that_preempt() -> None:
    """The invariants above, over worlds built to preempt (a fixed sample, so
    the rate is known): at least half of them must preempt, some across
    teams, or the checks on victims and reversals would check nothing."""
    seen = rate_of(preempting_worlds(), 30, _replayed)
    assert seen["preempting"] * 2 >= seen["examples"], seen
    assert seen["cross_team"] * 4 >= seen["examples"], seen
