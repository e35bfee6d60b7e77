"""Cheap bounds for a victim search (SPEC 6.4): which teams could ever give
up a victim, and whether a search could succeed at all, in O(depth x
siblings), before any candidate is looked at."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from apportion.domain.lifecycle import WorkloadState
from apportion.engine.owners import owner_of
from apportion.engine.pool_state import PoolState
from apportion.engine.preemption.order import NOMINATION, RUNNING, STARTING
from apportion.engine.working_state import WorkingState


def outranks(w: WorkloadState, v: WorkloadState) -> bool:
    """May ``w`` take ``v``'s nomination or hold? (reserved over elastic, else priority)."""
    if w.spec.is_reserved != v.spec.is_reserved:
        return w.spec.is_reserved
    return w.spec.priority > v.spec.priority


@dataclass(frozen=True, slots=True)
class Reach:
    """For elastic W: the leaf teams that could give up victims, the most that
    could be taken in all, and within each team on W's path."""

    teams: list[str]
    removable: int
    within: dict[str, int]


def reach(ws: WorkingState, ps: PoolState, w: WorkloadState, need: int) -> Reach:
    """W's own team and the leaves of sibling subtrees c_V on W's path that
    could pass 6.4 at some point of the search.

    ``excess(c_V)`` only falls while victims are removed, so c_V needs
    ``excess(c_V) > 0`` now, and ``excess(c_W)`` (W added) can fall at most by
    the elastic work that could be taken inside c_W's subtree (its floor).
    From c_V, victims are taken only while ``excess(c_V)`` is above that
    floor, so at most ``excess(c_V) - floor`` plus one last victim can go.
    """
    tree = ws.tree
    teams = [w.team]
    removable = own_removable(ps, w)
    within: dict[str, int] = {}
    c_w: str = w.team
    for parent in (*tree.path(w.team)[1:], None):
        within[c_w] = removable
        siblings = tree.children(parent) if parent is not None else tree.top_level()
        floor_w = ps.excess_key(c_w) + (need - removable) * ps.scale
        added = 0
        for sib in siblings:
            if sib == c_w:
                continue
            ex_v = ps.excess_key(sib)
            if ex_v > 0 and floor_w < ex_v:
                teams.extend(ws.leaves_under(sib))
                slack = -((floor_w - ex_v) // ps.scale)  # ceil((ex_v - floor_w) / scale)
                added += min(ps.ledger.elastic_usage(sib), slack + ps.victims.max_milli)
        removable += added
        if parent is None:
            break
        c_w = parent
    return Reach(teams, removable, within)


def own_removable(ps: PoolState, w: WorkloadState) -> int:
    """Milli W could take from its own team: lower-priority elastic work and
    nominations it outranks (the index keeps each group cheapest first)."""
    total = 0
    index, prio = ps.victims, w.spec.priority
    for rank in (NOMINATION, STARTING, RUNNING):
        for item in index.groups.get((rank, w.team), ()):
            if item[0] >= prio and not w.spec.is_reserved:
                if rank != NOMINATION:
                    break
                continue
            total += index.milli[item[3]]
    return total


def reserved_nominated(ws: WorkingState, ps: PoolState, w: WorkloadState) -> int:
    """Milli of reserved nominations W outranks in its top-level subtree
    (the only victims that can free bucket room for reserved W)."""
    top = ws.tree.path(w.team)[-1]
    total = 0
    groups = ps.victims.groups
    for leaf in ws.leaves_under(top):
        for item in groups.get((NOMINATION, leaf), ()):
            v = ws.workloads[item[3]]
            if v.spec.is_reserved and not v.is_hold and outranks(w, v):
                total += ps.users.get(v.id, 0)
    return total


def viable(
    ws: WorkingState, ps: PoolState, w: WorkloadState, need: int,
    reach_of: Callable[[], Reach],
) -> bool:
    """Enough capacity and quota even if every workload that could ever be a
    victim were gone? (A search that fails this would take them all and fail.)"""
    led = ps.ledger
    free = ps.cluster.free_milli(owner_of(w), allow_exiting=True)
    free += sum(ws.workloads[h].nominated_milli for h in ps.holders if h != w.id)
    path = ws.tree.path(w.team)
    if w.spec.is_reserved:
        nominated = reserved_nominated(ws, ps, w)
        removable = nominated + sum(led.elastic_usage(t) for t in ws.tree.top_level())
        within = {a: led.elastic_usage(a) + nominated for a in path}
        if not led.reserved_fits(w.team, need) and nominated == 0:
            return False
    else:
        got = reach_of()
        removable, within = got.removable, got.within
    if free + removable < need:
        return False
    for a in path:
        cap = led.cap(a)
        if cap is not None and led.usage(a) - within.get(a, 0) + need > cap:
            return False
    return True
