"""Use cases on pools and nodes, and the capacity views."""

from __future__ import annotations

import time
from typing import Any

from apportion.domain.cluster import Pool
from apportion.domain.errors import NotFound
from apportion.domain.host import parse_cpu, parse_memory_mib
from apportion.domain.workload import placement_milli
from apportion.service import audit
from apportion.service.authz import require_admin
from apportion.service.context import Ctx
from apportion.service.errors import Conflict, check_version
from apportion.service.events import add_event
from apportion.service.inputs import PoolChange, PoolSettings
from apportion.service.insights import held
from apportion.service.loading import load_tree, node_capacity
from apportion.service.records import PoolRecord
from apportion.service.views import gpus, node_view, pool_view
from apportion.store import codec
from apportion.store.db import Session
from apportion.store.repos import orgs as repo
from apportion.store.repos import security as sec_repo
from apportion.store.repos import workloads as wl_repo


def pool_views(session: Session, org_id: int) -> list[dict[str, Any]]:
    nodes = repo.list_nodes(session, org_id)
    out = []
    for p in repo.list_pools(session, org_id):
        mine = [n for n in nodes if n.pool == p.name]
        out.append(pool_view(p, node_capacity(codec.node_from_row(n) for n in mine), len(mine)))
    return out


def pool_detail(session: Session, org_id: int, name: str) -> dict[str, Any]:
    repo.get_pool(session, org_id, name)
    return next(v for v in pool_views(session, org_id) if v["name"] == name)


def host_in_use(session: Session, org_id: int, pool: str | None = None
                ) -> dict[tuple[str, str], tuple[int, int]]:
    """(pool, node) -> (milli-CPU, MiB) that the Starting and Running pods placed
    on it request (SPEC 1: the workload's ``cpu`` and ``memory_mib`` per pod)."""
    out: dict[tuple[str, str], tuple[int, int]] = {}
    for wpool, placement, spec in wl_repo.placements_and_specs(
            session, org_id, ("Starting", "Running"), pool):
        cpu = parse_cpu((spec or {}).get("cpu"))
        memory = parse_memory_mib((spec or {}).get("memory_mib"))
        if not (cpu or memory):
            continue
        for pod in placement or []:
            key = (str(wpool), str(pod["node"]))
            used_cpu, used_memory = out.get(key, (0, 0))
            out[key] = (used_cpu + cpu, used_memory + memory)
    return out


def _state_and_use(
    in_use: dict[tuple[str, str], tuple[int, int]], pool: str, name: str, health: str,
    cordoned: bool,
) -> tuple[str, int, int]:
    """A node's state as shown (``unknown`` health shows as such) and the
    milli-CPU and MiB its pods request."""
    state = codec.node_state_of(health, cordoned).value if health != "unknown" else "unknown"
    cpu, memory = in_use.get((pool, name), (0, 0))
    return state, cpu, memory


def node_views(
    session: Session, org_id: int, pool: str | None = None, state: str | None = None
) -> list[dict[str, Any]]:
    in_use = host_in_use(session, org_id, pool)
    views = []
    for r in repo.list_nodes(session, org_id, pool):
        shown, cpu, memory = _state_and_use(in_use, r.pool, r.name, r.health, r.cordoned)
        views.append(node_view(r, shown, cpu_in_use=cpu, memory_mib_in_use=memory))
    return [v for v in views if state is None or v["state"] == state]


def node_detail(session: Session, org_id: int, name: str) -> dict[str, Any]:
    row = repo.get_node(session, org_id, name)
    shown, cpu, memory = _state_and_use(host_in_use(session, org_id, row.pool), row.pool,
                                        row.name, row.health, row.cordoned)
    return node_view(row, shown, cpu_in_use=cpu, memory_mib_in_use=memory)


def new_pool(settings: PoolSettings) -> Pool:
    """The pool a create body describes (the domain checks its rules)."""
    return Pool(
        name=settings.name, gpu_type=settings.gpu_type,
        gpu_memory_mib=settings.gpu_memory_mib, topology=settings.topology,
        start_delay=settings.start_delay, preemption_grace=settings.preemption_grace,
        starvation_hold_after=settings.starvation_hold_after, packing=settings.packing,
        typical_pods=settings.typical_pods,
        default_time_limit=settings.default_time_limit,
        max_time_limit=settings.max_time_limit,
    )


def changed_pool(change: PoolChange, row: PoolRecord) -> Pool:
    """The stored pool ``row`` with the fields ``change`` gives (a field given as
    null takes null, which the domain refuses where a value is needed)."""
    def pick(field: str) -> Any:
        return getattr(change, field) if change.has(field) else getattr(row, field)

    return Pool(
        name=row.name,
        gpu_type=pick("gpu_type"),
        gpu_memory_mib=pick("gpu_memory_mib"),
        topology=tuple(pick("topology") or ()),
        start_delay=pick("start_delay"),
        preemption_grace=pick("preemption_grace"),
        starvation_hold_after=pick("starvation_hold_after"),
        packing=pick("packing"),
        typical_pods=pick("typical_pods"),
        default_time_limit=pick("default_time_limit"),
        max_time_limit=pick("max_time_limit"),
    )


def create_pool(session: Session, ctx: Ctx, settings: PoolSettings) -> dict[str, Any]:
    require_admin(ctx, "pool.create", f"pool/{settings.name}")
    pool = new_pool(settings)
    if repo.find_pool(session, ctx.org_id, pool.name) is not None:
        raise Conflict(f"pool {pool.name!r} already exists", {"pool": pool.name})
    repo.add_pool(session, ctx.org_id, pool, time.time())
    view = pool_detail(session, ctx.org_id, pool.name)
    audit.record(session, ctx, "pool.create", f"pool/{pool.name}", after=view)
    repo.bump_sched_version(session, ctx.org_id)
    return view


def update_pool(session: Session, ctx: Ctx, name: str, change: PoolChange) -> dict[str, Any]:
    require_admin(ctx, "pool.update", f"pool/{name}")
    row = repo.get_pool(session, ctx.org_id, name)
    check_version("pool", name, change.version, row.version)
    before = pool_detail(session, ctx.org_id, name)
    pool = changed_pool(change, row)
    repo.update_pool(row, pool)
    after = pool_detail(session, ctx.org_id, name)
    audit.record(session, ctx, "pool.update", f"pool/{name}", before=before, after=after)
    repo.bump_sched_version(session, ctx.org_id)
    return after


def delete_pool(session: Session, ctx: Ctx, name: str, version: int | None) -> dict[str, Any]:
    require_admin(ctx, "pool.delete", f"pool/{name}")
    row = repo.get_pool(session, ctx.org_id, name)
    check_version("pool", name, version, row.version)
    before = pool_detail(session, ctx.org_id, name)
    if repo.list_nodes(session, ctx.org_id, name):
        raise Conflict(f"pool {name!r} has nodes")
    if repo.list_reservations(session, ctx.org_id, pool=name):
        raise Conflict(f"pool {name!r} has reservations")
    if any(w.pool == name for w in wl_repo.active_workloads(session, ctx.org_id)):
        raise Conflict(f"pool {name!r} has workloads that are not finished")
    repo.delete_pool(session, row)
    audit.record(session, ctx, "pool.delete", f"pool/{name}", before=before)
    repo.bump_sched_version(session, ctx.org_id)
    return before


def set_cordon(
    session: Session, ctx: Ctx, name: str, cordoned: bool, version: int | None
) -> dict[str, Any]:
    action = "node.cordon" if cordoned else "node.uncordon"
    require_admin(ctx, action, f"node/{name}")
    row = repo.get_node(session, ctx.org_id, name)
    check_version("node", name, version, row.version)
    before = node_detail(session, ctx.org_id, name)
    if row.cordoned != cordoned:
        repo.set_cordoned(row, cordoned)
        add_event(session, ctx.org_id, "node.changed", cause=ctx.cause,
                  message=f"node {name} {'cordoned' if cordoned else 'uncordoned'}",
                  data={"node": name, "pool": row.pool, "cordoned": cordoned})
        repo.bump_sched_version(session, ctx.org_id)
    after = node_detail(session, ctx.org_id, name)
    audit.record(session, ctx, action, f"node/{name}", before=before, after=after)
    return after


def pool_capacity_views(session: Session, org_id: int) -> list[dict[str, Any]]:
    nodes = repo.list_nodes(session, org_id)
    tree = load_tree(session, org_id)
    active = wl_repo.active_workloads(session, org_id)
    out = []
    for p in repo.list_pools(session, org_id):
        mine = [n for n in nodes if n.pool == p.name]
        cap = node_capacity(codec.node_from_row(n) for n in mine)
        unavailable = sum(int(m) for n in mine if n.health != "down"
                          for _i, m in (n.unavailable or []))
        used = sum(placement_milli(codec.placement_from_json(w.placement))
                   for w in active if w.pool == p.name)
        reserved = sum(tree.reservation(t, p.name) for t in tree.top_level())
        out.append({
            "pool": p.name, "capacity": gpus(cap), "unavailable": gpus(unavailable),
            "reserved": gpus(reserved), "used": gpus(used),
            "free": gpus(max(0, cap - unavailable - used)),
        })
    return out


def team_capacity_views(
    session: Session, org_id: int, pool: str | None = None, team: str | None = None,
    *, with_ancestors: bool = False,
) -> list[dict[str, Any]]:
    """Per team and pool: reservation, reserved and elastic in use (subtree),
    entitlement of the last cycle, burst cap. ``with_ancestors``: ``team`` and
    its ancestors, leaf first (the fair-share context of a workload)."""
    tree = load_tree(session, org_id)
    if team is not None:
        tree.team(team)
    wanted = (tree.path(team) if with_ancestors else (team,)) if team is not None else None
    pools = [p.name for p in repo.list_pools(session, org_id)]
    if pool is not None:
        if pool not in pools:
            raise NotFound("pool", pool)
        pools = [pool]
    shares = sec_repo.list_entitlements(session, org_id)
    usage: dict[tuple[str, str, bool], int] = {}
    for w_team, w_pool, is_reserved, milli in held(session, org_id):
        if w_team not in tree.teams:
            continue
        for t in tree.path(w_team):
            key = (t, w_pool, is_reserved)
            usage[key] = usage.get(key, 0) + milli
    out = []
    for slug in wanted if wanted is not None else sorted(tree.teams):
        for p in pools:
            cap = tree.cap(slug, p)
            out.append({
                "team": slug, "pool": p,
                "reservation": gpus(tree.reservation(slug, p)),
                "reserved_in_use": gpus(usage.get((slug, p, True), 0)),
                "elastic_in_use": gpus(usage.get((slug, p, False), 0)),
                "entitlement": gpus(shares.get((slug, p), 0)),
                "burst_cap": None if cap is None else gpus(cap),
            })
    return out


