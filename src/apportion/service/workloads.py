"""Use cases on workloads: submit, cancel, read, events, why, dry-run."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from apportion.domain.errors import NotFound, ValidationError, did_you_mean
from apportion.domain.lifecycle import Status, submitted, transition
from apportion.domain.workload import WorkloadSpec
from apportion.service import audit, insights
from apportion.service.authz import (
    Parents,
    deny,
    require_cancel,
    require_submit,
    subtree,
    visible_teams,
)
from apportion.service.context import Ctx, Role
from apportion.service.errors import Conflict, PermissionDenied, check_version
from apportion.service.events import add_lifecycle_events
from apportion.service.loading import PARENTS_CACHE, load_parents
from apportion.service.pools import team_capacity_views
from apportion.service.records import WorkloadRecord
from apportion.service.views import event_view, workload_view
from apportion.store import codec
from apportion.store.db import Session
from apportion.store.repos import events as ev_repo
from apportion.store.repos import orgs as repo
from apportion.store.repos import workloads as wl_repo
from apportion.store.repos.paging import Page

# the list filter, re-exported so that routers need not import the store
from apportion.store.repos.workloads import WorkloadFilter as WorkloadFilter

SPEC_FIELDS = frozenset({
    "name", "team", "class", "priority", "gpus", "gpu_memory_mib", "pods", "min_pods", "gang",
    "topology", "gpu_type", "pool", "node_selector", "requeue_on_preemption", "command",
    "image", "env", "labels", "duration", "cpu", "memory_mib",
    "time_limit", "requeue_on_timeout", "after",
})


def parse_spec(body: Mapping[str, Any]) -> WorkloadSpec:
    """Validate a submit body (SPEC section 3); errors name the field."""
    unknown = sorted(set(body) - SPEC_FIELDS)
    if unknown:
        raise ValidationError(unknown[0], "unknown field", ", ".join(sorted(SPEC_FIELDS)))
    args = {k: v for k, v in body.items() if v is not None}
    return codec.spec_from_dict(args)


def check_team(parents: Parents, team: str) -> None:
    """The team must exist and be a leaf (SPEC 2: workloads belong to leaf teams)."""
    if team not in parents:
        leaves = set(parents) - set(parents.values())
        raise ValidationError("team", f"team {team!r} does not exist"
                              f"{did_you_mean(team, leaves)}", "an existing leaf team")
    children = sorted(t for t, p in parents.items() if p == team)
    if children:
        raise ValidationError(
            "team", f"team {team!r} has child teams ({', '.join(children)}); "
            "workloads belong to leaf teams only", "a leaf team",
        )


def new_row(ctx: Ctx, spec: WorkloadSpec, now: float, *, held: bool = False) -> dict[str, Any]:
    """The column values of a new workload (Pending, attempt 1)."""
    return {
        "org_id": ctx.org_id, "name": spec.name, "team": spec.team,
        "wclass": spec.wclass.value, "priority": spec.priority,
        "status": Status.PENDING.value, "is_active": True, "attempt": 1, "pool": None,
        "spec": codec.spec_to_dict(spec), "placement": [], "nomination": [], "is_hold": False,
        "submitted_at": float(int(now)), "submitted_by": ctx.actor.name, "attempts": [],
        "version": 1, "updated_at": now, "reason_code": None, "reason_message": None,
        "started_at": None, "running_at": None, "ended_at": None, "preempted_by": None,
        "head_since": None, "preemptions": [], "held": held, "array_id": None,
        "array_index": None, "array_limit": None,
    }


def submit(session: Session, ctx: Ctx, spec: WorkloadSpec, *, held: bool = False
           ) -> dict[str, Any]:
    """Store a new workload (Pending), its first event and audit entry, in the
    caller's transaction.

    The team checks use the process's cached team tree. A refusal is never
    based on it: the tree is read again and the checks repeated. An acceptance
    is confirmed at the end, where the bump of the scheduling version returns
    the teams version under the org row's lock; if the tree changed meanwhile
    the checks run again on the current tree (a failure rolls the whole
    submission back)."""
    used, parents = PARENTS_CACHE.get(session, ctx.org_id)
    try:
        _check_submit(ctx, parents, spec.team)
    except (ValidationError, PermissionDenied):
        used, parents = PARENTS_CACHE.reload(session, ctx.org_id)
        _check_submit(ctx, parents, spec.team)
    if spec.after or spec.time_limit is not None:
        check_job_control(session, ctx.org_id, spec)
    now = time.time()
    values = new_row(ctx, spec, now, held=held)
    wid = wl_repo.insert_workload(session, values)
    state = submitted(wid, spec, int(now), cause=ctx.cause)
    add_lifecycle_events(session, ctx.org_id, wid, spec.team, state.events, now, spec.name)
    # The view of the values just written, in the row's shape: no ORM object and
    # no read-back on the hot path.
    view = workload_view(wl_repo.unsaved_workload(wid, values))
    audit.record(session, ctx, "workload.submit", f"workload/{wid}", after=view)
    current = repo.bump_sched_version_returning_teams(session, ctx.org_id)
    fresh = PARENTS_CACHE.confirm(session, ctx.org_id, used, current)
    if fresh is not None:
        _check_submit(ctx, fresh, spec.team)
    return view


def _check_submit(ctx: Ctx, parents: Parents, team: str) -> None:
    check_team(parents, team)
    require_submit(ctx, parents, team)


def cancel(
    session: Session, ctx: Ctx, workload_id: int, version: int | None, message: str = ""
) -> dict[str, Any]:
    row = wl_repo.get_workload(session, ctx.org_id, workload_id, lock=True)
    obj = f"workload/{workload_id}"
    parents = load_parents(session, ctx.org_id)
    require_cancel(ctx, parents, row.team, row.submitted_by, obj)
    check_version("workload", str(workload_id), version, row.version)
    if Status(row.status).is_terminal:
        raise Conflict(f"workload {workload_id} is already {row.status}",
                       {"status": row.status})
    before = workload_view(row)
    was_placed = Status(row.status).is_placed
    now = time.time()
    state = codec.state_from_row(row)
    new = transition(state, Status.CANCELLED, int(now), ctx.cause,
                     message or f"cancelled by {ctx.actor.name}")
    if was_placed and row.pool is not None:
        wl_repo.add_decision(session, ctx.org_id, kind="stop", pool=row.pool,
                             workload_id=row.id, attempt=row.attempt,
                             placement=row.placement, reason="cancelled", grace_seconds=0,
                             created_at=now)
    wl_repo.save_state(row, new, now)
    add_lifecycle_events(session, ctx.org_id, row.id, row.team, new.events, now, row.name)
    after = workload_view(row)
    audit.record(session, ctx, "workload.cancel", obj, before=before, after=after)
    repo.bump_sched_version(session, ctx.org_id)
    return after


def check_job_control(session: Session, org_id: int, spec: WorkloadSpec) -> None:
    """A submission's dependencies name existing workloads (each submitted
    before it, so no cycle can form: docs/scheduling.md) and its time limit is
    within the pool's maximum (422 naming the field otherwise)."""
    if spec.after:
        found = wl_repo.statuses_of(session, org_id, [d.workload_id for d in spec.after])
        for i, dep in enumerate(spec.after):
            if dep.workload_id not in found:
                raise ValidationError(f"after[{i}].id", f"workload {dep.workload_id} does not "
                                      "exist", "the id of a workload submitted before this one")
    if spec.time_limit is None:
        return
    pools = [codec.pool_from_row(p) for p in repo.list_pools(session, org_id)]
    if spec.pool is not None:
        pools = [p for p in pools if p.name == spec.pool]
    maxima = [p.max_time_limit for p in pools]
    if not maxima or any(m is None for m in maxima):
        return  # no pool yet, or one without a maximum
    top = max(m for m in maxima if m is not None)
    if spec.time_limit > top:
        where = f"pool {spec.pool}'s" if spec.pool is not None else "the largest"
        raise ValidationError("time_limit", f"{spec.time_limit} s is above {where} "
                              f"max_time_limit ({top} s)", f"at most {top} seconds")


run_id = wl_repo.run_id


def _visible(session: Session, ctx: Ctx) -> tuple[Parents, set[str] | None]:
    if ctx.actor.role is Role.AGENT:
        raise deny(ctx, "workload.read", "workloads", "a human role")
    parents = load_parents(session, ctx.org_id)
    return parents, visible_teams(ctx.actor, parents)


def get(session: Session, ctx: Ctx, workload_id: int) -> WorkloadRecord:
    _parents, teams = _visible(session, ctx)
    row = wl_repo.get_workload(session, ctx.org_id, workload_id)
    if teams is not None and row.team not in teams:
        raise deny(ctx, "workload.read", f"workload/{workload_id}", "a role that sees its team")
    return row


def list_(
    session: Session, ctx: Ctx, f: wl_repo.WorkloadFilter, team: str | None,
    after: int | None, limit: int,
) -> Page[dict[str, Any]]:
    parents, teams = _visible(session, ctx)
    wanted = teams
    if team is not None:
        scope = subtree(parents, [team]) if team in parents else {team}
        wanted = scope if wanted is None else wanted & scope
    flt = wl_repo.WorkloadFilter(
        statuses=f.statuses, teams=None if wanted is None else sorted(wanted), wclass=f.wclass,
        pool=f.pool, submitted_by=f.submitted_by, submitted_after=f.submitted_after,
        submitted_before=f.submitted_before, name=f.name, text=f.text, array=f.array,
    )
    page = wl_repo.list_workloads(session, ctx.org_id, flt, after, limit)
    return Page([workload_view(r) for r in page.items], page.next_after, page.total)


def events(
    session: Session, ctx: Ctx, workload_id: int, after: int | None, limit: int
) -> Page[dict[str, Any]]:
    get(session, ctx, workload_id)
    page = ev_repo.list_events(session, ctx.org_id, after=after, limit=limit,
                               workload_id=workload_id)
    return Page([event_view(r) for r in page.items], page.next_after, page.total)


def why(session: Session, ctx: Ctx, workload_id: int) -> dict[str, Any]:
    row = get(session, ctx, workload_id)
    status = Status(row.status)
    reason = None
    if row.reason_code:
        reason = {"code": row.reason_code, "message": row.reason_message or ""}
    if status.is_waiting and reason is not None:
        text = f"{row.status}: {reason['code']} - {reason['message']}"
    elif status.is_waiting:
        text = f"{row.status}: not yet considered by a scheduling cycle"
    elif status.is_placed:
        nodes = sorted({p["node"] for p in row.placement or []})
        text = f"{row.status} in pool {row.pool} on {', '.join(nodes) or 'no node'}"
        held, requested = len(row.placement or []), int(row.spec.get("pods") or 1)
        if held < requested:  # shrunk (SPEC 6.5), or scaled to what fitted at the start
            text += f" with {held} of {requested} pods"
    else:
        text = f"{row.status} (attempt {row.attempt})"
        if row.preempted_by is not None:
            text += f", preempted by workload {row.preempted_by}"
    return {"workload_id": row.id, "status": row.status, "reason": reason, "explanation": text,
            "fair_share": _fair_share(session, row)}


def victims(session: Session, ctx: Ctx, workload_id: int) -> list[dict[str, Any]]:
    """The workloads ``workload_id`` preempted, one entry per attempt it ended
    (``{workload_id, name, team, attempt}``); the name only where the caller may
    read the victim's team, as the workload list hides the others."""
    get(session, ctx, workload_id)  # the caller may read this workload
    _parents, teams = _visible(session, ctx)
    return [{"workload_id": v["id"], "team": v["team"], "attempt": v["attempt"],
             "name": v["name"] if teams is None or v["team"] in teams else None}
            for v in insights.victims_of(session, ctx.org_id, workload_id)]


def _fair_share(session: Session, row: WorkloadRecord) -> list[dict[str, Any]]:
    """Capacity rows (reservation, use, entitlement, burst cap) of the workload's
    team and its ancestors, leaf first, in its pool (every pool while it has none,
    or if its pinned pool does not exist). Empty if its team no longer exists."""
    for pool in dict.fromkeys((row.pool or row.spec.get("pool"), None)):
        try:
            return team_capacity_views(session, row.org_id, pool, row.team,
                                       with_ancestors=True)
        except NotFound:
            continue
    return []
