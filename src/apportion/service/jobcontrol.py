"""Job control use cases (issue 16): arrays, hold and release, cancel by array.

Time limits and dependencies are checked at submission
(:func:`apportion.service.workloads.check_job_control`) and applied by the
scheduler before the engine (``engine/gating.py``, through
``service/snapshots.py``).
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from apportion.domain.errors import NotFound
from apportion.domain.jobcontrol import ArraySpec, array_text
from apportion.domain.lifecycle import Status, submitted, transition
from apportion.domain.reasons import Reason, ReasonCode
from apportion.domain.workload import WorkloadSpec
from apportion.service import audit
from apportion.service import workloads as wl_svc
from apportion.service.authz import require_cancel, require_submit
from apportion.service.context import Ctx
from apportion.service.errors import Conflict
from apportion.service.events import event_row, lifecycle_rows, write_events
from apportion.service.loading import PARENTS_CACHE, load_parents
from apportion.service.views import workload_view
from apportion.store import codec
from apportion.store.db import Session
from apportion.store.repos import orgs as repo
from apportion.store.repos import workloads as wl_repo

HELD_REASON = Reason(ReasonCode.HELD, "held by a user; release it to let it be scheduled")


def submit(session: Session, ctx: Ctx, spec: WorkloadSpec, *, held: bool = False,
           array: ArraySpec | None = None) -> dict[str, Any]:
    """Submit one workload, or an array of them (the view of the first member)."""
    if array is None:
        view = wl_svc.submit(session, ctx, spec, held=held)
        if held:
            view = {**view, "reason": HELD_REASON.to_dict()}
        return view
    return submit_array(session, ctx, spec, array, held=held)


def submit_array(session: Session, ctx: Ctx, spec: WorkloadSpec, array: ArraySpec, *,
                 held: bool = False) -> dict[str, Any]:
    """One workload per index of ``array``, named ``NAME[INDEX]``, members of
    the array whose id is the first member's; returns the first member's view
    with ``array_size``."""
    _used, parents = PARENTS_CACHE.reload(session, ctx.org_id)
    wl_svc.check_team(parents, spec.team)
    require_submit(ctx, parents, spec.team)
    if spec.after or spec.time_limit is not None:
        wl_svc.check_job_control(session, ctx.org_id, spec)
    now = time.time()
    rows = []
    for index in array.indexes:
        member = replace(spec, name=f"{spec.name}[{index}]"[:255])
        values = wl_svc.new_row(ctx, member, now, held=held)
        values.update(array_index=index, array_limit=array.limit)
        rows.append(values)
    ids = wl_repo.insert_workloads(session, rows)
    array_id = ids[0]
    wl_repo.set_array_id(session, ids, array_id)
    events: list[dict[str, Any]] = []
    for wid, values in zip(ids, rows, strict=True):
        state = submitted(wid, spec, int(now), cause=ctx.cause,
                          message=f"submitted (array {array_id}, index {values['array_index']})")
        events += lifecycle_rows(ctx.org_id, wid, spec.team, state.events, now, values["name"])
    write_events(session, events)
    first = {**rows[0], "array_id": array_id}
    view = workload_view(wl_repo.unsaved_workload(array_id, first))
    if held:
        view["reason"] = HELD_REASON.to_dict()
    audit.record(session, ctx, "workload.submit", f"array/{array_id}",
                 after={**view, "array": array_text(array), "array_size": len(ids)})
    repo.bump_sched_version(session, ctx.org_id)
    return {**view, "array_size": len(ids)}


def set_held(session: Session, ctx: Ctx, workload_id: int, hold: bool) -> dict[str, Any]:
    """Hold a waiting workload (it waits with reason HELD, keeps its place in
    line) or release it; the owner, a lead of its team or an org admin."""
    row = wl_repo.get_workload(session, ctx.org_id, workload_id, lock=True)
    obj = f"workload/{workload_id}"
    require_cancel(ctx, load_parents(session, ctx.org_id), row.team, row.submitted_by, obj)
    verb = "hold" if hold else "release"
    if not Status(row.status).is_waiting:
        raise Conflict(f"workload {workload_id} is {row.status}; only Pending or Queued work "
                       f"can be {'held' if hold else 'released'}", {"status": row.status})
    if bool(row.held) == hold:
        raise Conflict(f"workload {workload_id} is {'already' if hold else 'not'} held",
                       {"held": bool(row.held)})
    before = workload_view(row)
    now = time.time()
    state = codec.state_from_row(row)
    if hold:
        new = replace(state, held=True, reason=HELD_REASON, nomination=(), is_hold=False,
                      head_since=None)
    else:
        new = replace(state, held=False,
                      reason=None if state.reason == HELD_REASON else state.reason)
    wl_repo.save_state(row, new, now)
    write_events(session, [event_row(
        ctx.org_id, f"workload.{'held' if hold else 'released'}", cause=ctx.cause,
        message=f"{'held' if hold else 'released'} by {ctx.actor.name}", workload_id=row.id,
        team=row.team, attempt=row.attempt, status=row.status, data={"name": row.name},
        at=now)])
    after = workload_view(row)
    audit.record(session, ctx, f"workload.{verb}", obj, before=before, after=after)
    repo.bump_sched_version(session, ctx.org_id)
    return after


def cancel_array(session: Session, ctx: Ctx, array_id: int, message: str = ""
                 ) -> dict[str, Any]:
    """Cancel every member of array ``array_id`` that has not ended; 404 if
    there is no such array. Each member is cancelled as by ``cancel``."""
    members = wl_repo.array_members(session, ctx.org_id, array_id, lock=True)
    if not members:
        raise NotFound("array", str(array_id))
    parents = load_parents(session, ctx.org_id)
    obj = f"array/{array_id}"
    for m in members:  # every member must be the caller's to cancel, before any is
        require_cancel(ctx, parents, m.team, m.submitted_by, obj)
    now = time.time()
    note = message or f"array {array_id} cancelled by {ctx.actor.name}"
    cancelled: list[int] = []
    events: list[dict[str, Any]] = []
    for m in members:  # as ``cancel`` does for one workload, in one batch
        status = Status(m.status)
        if status.is_terminal:
            continue
        state = codec.state_from_row(m)
        new = transition(state, Status.CANCELLED, int(now), ctx.cause, note)
        if status.is_placed and m.pool is not None:
            wl_repo.add_decision(session, ctx.org_id, kind="stop", pool=m.pool,
                                 workload_id=m.id, attempt=m.attempt, placement=m.placement,
                                 reason="cancelled", grace_seconds=0, created_at=now)
        wl_repo.save_state(m, new, now)
        events += lifecycle_rows(ctx.org_id, m.id, m.team, new.events, now, m.name)
        cancelled.append(m.id)
    write_events(session, events)
    out = {"array_id": array_id, "members": len(members), "cancelled": cancelled}
    audit.record(session, ctx, "workload.cancel", obj, after=out)
    if cancelled:
        repo.bump_sched_version(session, ctx.org_id)
    return out
