"""Work conservation (SPEC 4: entitlements "never stop a workload from using
free capacity"; the scheduler is work-conserving within burst caps).

Once cycles have settled (a cycle decides nothing), no waiting workload could
start on the free devices right now within its quota: for reserved work the
buckets on its path and every burst cap on it, for elastic work every burst
cap on its path. "Fits" is computed here from the SPEC, not by the engine:

- a device is free for the part not held by placed work, by victims still
  exiting (grace), or by another workload's nomination or starvation hold;
  nodes that are cordoned or down take nothing;
- a whole-GPU pod needs that many fully free devices on one node, a
  fractional pod part of one device; the node must match the workload's pool,
  GPU type and node selector;
- ``min_pods`` pods (all of them for a gang) are placed in one trial, one by
  one on the first node that holds the next pod (a placement found this way
  exists, so "fits" is never a false alarm; a smarter packer may find more);
- with required topology all pods go to one domain of the level; preferred
  topology may fall back to no constraint, so it is not a constraint here.

The engine's reason is printed beside a counterexample, as a cross-check.
"""

from __future__ import annotations

from collections import defaultdict

from hypothesis import HealthCheck, given, settings

from apportion.domain.lifecycle import Status, WorkloadState
from apportion.domain.org import build_tree
from apportion.domain.workload import TopologyMode
from tests.engine.harness import NoFixedPoint, World
from tests.engine.test_cycle_properties import (
    complete_and_advance,
    preempting_worlds,
    rate_of,
    same_org,
    submit_step,
)
from tests.engine.test_victim_exhaust import crowded, submit_arrival


def free_devices(w: World) -> dict[str, list[int]]:
    """Free milli of every device of every node that takes new pods."""
    held: dict[tuple[str, int], int] = defaultdict(int)
    placements = [s.placement for s in w.states.values() if s.status.is_placed]
    placements += [s.nomination for s in w.states.values()
                   if s.status is Status.QUEUED and s.nomination]
    placements += [e.placement for e in w.exiting if e.exits_at > w.now]
    for placement in placements:
        for pod in placement:
            for d in pod.devices:
                held[(pod.node, d.index)] += d.milli
    return {n.name: [max(0, 1000 - held[(n.name, i)]) for i in range(n.gpus)]
            for n in w.nodes if n.state.value == "ready"}


def devices_fit(w: World, s: WorkloadState, free: dict[str, list[int]]) -> bool:
    spec = s.spec
    pool = w.pools[s.pool or spec.pool or "main"]
    nodes = [n for n in w.nodes if n.pool == pool.name and n.name in free
             and (not spec.gpu_types or n.gpu_type in spec.gpu_types)
             and all(n.labels.get(k) == v for k, v in spec.node_selector.items())]
    topo = spec.topology
    if topo is not None and topo.mode is TopologyMode.REQUIRED:
        domains: dict[str, list] = defaultdict(list)
        for n in nodes:
            if topo.level in n.labels:
                domains[n.labels[topo.level]].append(n)
        groups = list(domains.values())
    else:
        groups = [nodes]
    for group in groups:
        left = {n.name: list(free[n.name]) for n in group}
        placed = 0
        for _ in range(spec.min_pods):
            for n in group:
                charge = spec.charge(n.gpu_memory_mib)
                devs = left[n.name]
                if charge >= 1000:
                    whole = [i for i, f in enumerate(devs) if f == 1000]
                    if len(whole) >= charge // 1000:
                        for i in whole[: charge // 1000]:
                            devs[i] = 0
                        break
                else:
                    fit = [i for i, f in enumerate(devs) if f >= charge]
                    if fit:
                        devs[fit[0]] -= charge
                        break
            else:
                break
            placed += 1
        if placed == spec.min_pods:
            return True
    return False


def quota_fits(w: World, s: WorkloadState) -> bool:
    tree = build_tree(w.teams, w.reservations)
    pool = s.pool or "main"
    size = s.spec.min_pods * s.spec.charge(w.pools[pool].gpu_memory_mib)
    usage: dict[str, int] = defaultdict(int)
    reserved: dict[str, int] = defaultdict(int)
    for o in w.states.values():
        if o.pool != pool:
            continue
        milli = o.placed_milli if o.status.is_placed else (
            o.nominated_milli if o.status is Status.QUEUED and not o.is_hold else 0)
        for team in tree.path(o.team):
            usage[team] += milli
        if o.spec.is_reserved:
            reserved[o.team] += milli
    path = tree.path(s.team)
    for team in path:
        cap = tree.cap(team, pool)
        if cap is not None and usage[team] + size > cap:
            return False
    if not s.spec.is_reserved:
        return True
    reserved[s.team] += size

    def own_bucket(team: str) -> int:
        return tree.reservation(team, pool) - sum(
            tree.reservation(c, pool) for c in tree.children(team))

    def overflow(team: str) -> int:
        children = tree.children(team)
        if not children:
            return max(0, reserved[team] - own_bucket(team))
        return max(0, sum(overflow(c) for c in children) - own_bucket(team))

    return overflow(path[-1]) == 0


def check_conserving(w: World, counts: dict[str, int]) -> None:
    free = free_devices(w)
    for s in w.states.values():
        if s.status not in (Status.PENDING, Status.QUEUED) or s.nomination:
            continue
        counts["waiting"] += 1
        if not devices_fit(w, s, free):
            continue
        counts["devices_free"] += 1
        reason = s.reason.code.value if s.reason else None
        assert not quota_fits(w, s), (
            f"{s.spec.name} waits ({reason}: {s.reason.message if s.reason else ''}) "
            "though it fits free devices and its quota")


def _settled_steps(world: World, steps: list[dict], counts: dict[str, int]) -> World:
    w = same_org(world)
    try:
        for step in steps:
            submit_step(w, step)
            w.settle()
            check_conserving(w, counts)
            complete_and_advance(w, step)
            w.settle()
            check_conserving(w, counts)
    except NoFixedPoint:  # a state that never settles has no "after settling"
        pass
    return w


def test_nothing_waits_that_fits_free_devices_and_its_quota() -> None:
    """Over a fixed sample of worlds built to preempt (so nominations,
    exiting victims and requeues are about): every settled state conserves
    work, and the check is not vacuous (waiting work often had free devices
    where it could go, and was held back by its quota alone)."""
    counts: dict[str, int] = defaultdict(int)
    seen = rate_of(preempting_worlds(), 25,
                   lambda world, steps: _settled_steps(world, steps, counts))
    assert seen["preempting"] * 2 >= seen["examples"], seen
    assert counts["waiting"] >= 100 and counts["devices_free"] >= 10, dict(counts)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(crowded())
def test_work_is_conserved_with_selectors_scaling_holds_and_cordons(
    case: tuple[World, list[dict], list[dict], int | None],
) -> None:
    """The same over a three-level tree with node selectors, elastic scaling,
    starvation holds and a cordoned node."""
    from dataclasses import replace

    from apportion.domain.cluster import NodeState

    world, fill, steps, cordon = case
    counts: dict[str, int] = defaultdict(int)
    w = same_org(world)
    try:
        for step in fill:
            submit_step(w, step)
        w.settle()
        check_conserving(w, counts)
        if cordon is not None:
            w.nodes = [replace(n, state=NodeState.CORDONED) if i == cordon else n
                       for i, n in enumerate(w.nodes)]
        for step in steps:
            submit_arrival(w, step)
            w.settle()
            check_conserving(w, counts)
            complete_and_advance(w, step)
            w.settle()
            check_conserving(w, counts)
    except NoFixedPoint:
        pass
