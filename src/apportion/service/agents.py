"""The agent protocol: heartbeat (node inventory), decisions, reports, and the
silence sweep. Reports are idempotent by (run id, attempt): a repeated report
changes nothing; a report for an old attempt, or one that would leave a
terminal state, is ignored and audited."""

from __future__ import annotations

import time
from typing import Any

from apportion.domain.cluster import DEFAULT_GPU_MEMORY_MIB, Node, Pool
from apportion.domain.errors import NotFound, ValidationError
from apportion.domain.host import parse_cpu, parse_memory_mib
from apportion.domain.lifecycle import Status, requeue_after_failure, transition
from apportion.service import audit
from apportion.service.authz import require_agent
from apportion.service.context import Ctx
from apportion.service.errors import PermissionDenied
from apportion.service.events import add_event, add_lifecycle_events
from apportion.service.inputs import HeartbeatIn, NodeReport, RunReport
from apportion.service.records import WorkloadRecord
from apportion.service.views import decision_view
from apportion.service.workloads import run_id
from apportion.store import codec
from apportion.store.db import Session
from apportion.store.repos import orgs as repo
from apportion.store.repos import workloads as wl_repo

HEALTH = ("ready", "down")
REPORT_STATUS = {"running": Status.RUNNING, "completed": Status.COMPLETED,
                 "failed": Status.FAILED}


def _parse_node(raw: NodeReport, i: int, pool: str) -> tuple[Node, str, list[list[int]]]:
    f = f"nodes[{i}]"
    health = raw.health
    if health not in HEALTH:
        raise ValidationError(f"{f}.health", f"{health!r} is not a health", ", ".join(HEALTH))
    try:
        cpu, memory = raw.cpu, raw.memory_mib
        node = Node(name=raw.name, pool=pool, gpus=raw.gpus, gpu_type=raw.gpu_type,
                    gpu_memory_mib=raw.gpu_memory_mib or DEFAULT_GPU_MEMORY_MIB,
                    labels=raw.labels,
                    cpu_milli=None if cpu is None else parse_cpu(cpu, "cpu"),
                    memory_mib=None if memory is None else parse_memory_mib(memory))
    except ValidationError as e:
        raise e.at(f) from None
    unavailable: list[list[int]] = []
    for j, (idx, milli) in enumerate(raw.unavailable):
        if not 0 <= idx < node.gpus or not 0 < milli <= 1000:
            raise ValidationError(f"{f}.unavailable[{j}]", "bad device share",
                                  f"index 0..{node.gpus - 1}, milli 1..1000")
        unavailable.append([idx, milli])
    return node, health, unavailable


def heartbeat(session: Session, ctx: Ctx, body: HeartbeatIn) -> dict[str, Any]:
    """A heartbeat: ``body.nodes`` None is a keep-alive (the inventory is kept);
    a tuple is the pool's whole inventory (a node not in it is down)."""
    pool_name = body.pool or ctx.actor.pool or ""
    require_agent(ctx, pool_name, "agent.heartbeat")
    now = ctx.clock.now()  # the sweep measures silence from this stamp, on the same clock
    pool = repo.find_pool(session, ctx.org_id, pool_name)
    if pool is None:
        pool = repo.add_pool(session, ctx.org_id, Pool(name=pool_name), time.time())
    is_inventory = body.nodes is not None
    nodes = [_parse_node(n, i, pool_name) for i, n in enumerate(body.nodes or ())]
    existing = {n.name: n for n in repo.list_nodes(session, ctx.org_id)}
    changed = pool.agent_status != "connected"
    seen: set[str] = set()
    for node, health, unavailable in nodes:
        seen.add(node.name)
        row = existing.get(node.name)
        if row is not None and row.pool != pool_name:
            raise ValidationError("nodes", f"node {node.name!r} belongs to pool {row.pool!r}")
        if row is None:
            row = repo.add_node(session, ctx.org_id, pool=pool_name, name=node.name,
                                gpus=node.gpus, gpu_memory_mib=node.gpu_memory_mib)
            changed = True
        new = (node.gpus, node.gpu_type, node.gpu_memory_mib, dict(node.labels), health,
               unavailable, node.cpu_milli, node.memory_mib)
        old = (row.gpus, row.gpu_type, row.gpu_memory_mib, dict(row.labels or {}), row.health,
               list(row.unavailable or []), row.cpu_milli, row.memory_mib)
        if new != old:
            if health == "down" and row.health != "down":
                _fail_on_node(session, ctx, node.name, now)
            repo.update_node(row, gpus=node.gpus, gpu_type=node.gpu_type,
                             gpu_memory_mib=node.gpu_memory_mib, labels=dict(node.labels),
                             health=health, unavailable=unavailable, cpu_milli=node.cpu_milli,
                             memory_mib=node.memory_mib)
            changed = True
            add_event(session, ctx.org_id, "node.changed", cause=ctx.cause,
                      message=f"node {node.name}: {health}", data={"node": node.name,
                                                                    "pool": pool_name})
        repo.node_seen(row, now)
    # Without "nodes" the heartbeat is a keep-alive: the inventory is unchanged,
    # but nodes of a silent period come back from ``unknown``.
    for name, row in existing.items():
        if row.pool != pool_name or name in seen:
            continue
        if is_inventory and row.health != "down":
            _fail_on_node(session, ctx, name, now)
            repo.set_node_health(row, "down")
            changed = True
        elif not is_inventory and row.health == "unknown":
            repo.set_node_health(row, "ready")
            changed = True
        if not is_inventory:
            repo.node_seen(row, now)
    if pool.agent_status != "connected":
        add_event(session, ctx.org_id, "pool.agent", cause=ctx.cause,
                  message=f"agent of pool {pool_name} connected", data={"pool": pool_name})
    repo.set_agent_status(pool, "connected", heartbeat_at=now)
    # A run the control plane refuses (an older attempt, a terminal workload, a
    # run id that is not the workload's) must not go on: the agent stops those.
    stop_runs: set[str] = set()
    for run in body.runs:
        answer = _heartbeat_run(session, ctx, run, pool_name)
        if not answer.get("accepted", True) and run.run_id:
            stop_runs.add(run.run_id)
    if changed:
        repo.bump_sched_version(session, ctx.org_id)
        audit.record(session, ctx, "agent.heartbeat", f"pool/{pool_name}",
                     after={"nodes": sorted(seen)})
    return {"pool": pool_name, "nodes": len(nodes),
            "decisions_cursor": wl_repo.last_decision_id(session, ctx.org_id, pool_name),
            "stop_runs": sorted(stop_runs)}


def _heartbeat_run(session: Session, ctx: Ctx, run: RunReport, pool: str
                   ) -> dict[str, Any]:
    """One run of a heartbeat, reported. A run of a workload that does not exist,
    or that this agent may not report on (another pool's), is refused and
    audited, not an error of the whole heartbeat: that would lose the node
    inventory with it and an agent would retry the same heartbeat for ever.
    Such a run is not the control plane's, so the agent is told to stop it."""
    try:
        return report(session, ctx, run)
    except (NotFound, PermissionDenied, ValidationError) as err:
        audit.record(session, ctx, "agent.report", f"pool/{pool}", outcome="denied",
                     message=f"heartbeat run refused: {err}",
                     after={"workload_id": run.workload_id, "attempt": run.attempt,
                            "run_id": run.run_id})
        return {"accepted": False, "note": str(err)}


def _fail_on_node(session: Session, ctx: Ctx, node: str, now: float) -> None:
    """A node went down: workloads with pods on it fail, or with
    ``requeue_on_preemption`` fail and start a new attempt in Pending (SPEC 5)."""
    for row in wl_repo.active_workloads(session, ctx.org_id):
        if row.status not in ("Starting", "Running"):
            continue
        if not any(p["node"] == node for p in row.placement or []):
            continue
        state = codec.state_from_row(row)
        message = f"node {node} is down"
        if state.spec.requeue_on_preemption:
            new = requeue_after_failure(state, int(now), ctx.cause, message)
        else:
            new = transition(state, Status.FAILED, int(now), ctx.cause, message)
        wl_repo.add_decision(session, row.org_id, kind="stop", pool=row.pool or "",
                             workload_id=row.id, attempt=row.attempt,
                             placement=row.placement, reason="node_down", grace_seconds=0,
                             created_at=now)
        wl_repo.save_state(row, new, now)
        add_lifecycle_events(session, ctx.org_id, row.id, row.team, new.events, now,
                             row.name)


def decisions(
    session: Session, ctx: Ctx, cursor: int, limit: int, *, is_live: bool = False
) -> tuple[list[Any], int]:
    """Decisions after ``cursor`` and the new cursor. ``is_live``: only starts of
    attempts still Starting/Running (plus stops); the last page's cursor is then
    the pool's last decision id, so the agent skips what it was not sent."""
    pool = ctx.actor.pool or ""
    require_agent(ctx, pool, "agent.decisions")
    if not is_live:
        rows = wl_repo.decisions_after(session, ctx.org_id, pool, cursor, limit)
        return [decision_view(r) for r in rows], (rows[-1].id if rows else cursor)
    rows = wl_repo.live_decisions_after(session, ctx.org_id, pool, cursor, limit)
    if len(rows) == limit:
        return [decision_view(r) for r in rows], rows[-1].id
    last = wl_repo.last_decision_id(session, ctx.org_id, pool)
    return [decision_view(r) for r in rows], max(cursor, last)


def report(session: Session, ctx: Ctx, body: RunReport) -> dict[str, Any]:
    """Apply one pod-status report; returns whether it was accepted."""
    pool = ctx.actor.pool or ""
    require_agent(ctx, pool, "agent.report")
    wid, attempt = body.workload_id, body.attempt
    target = REPORT_STATUS.get(body.status)
    if target is None:
        raise ValidationError("status", f"{body.status!r} is not a report status",
                              ", ".join(REPORT_STATUS))
    row = wl_repo.get_workload(session, ctx.org_id, wid, lock=True)
    if row.pool != pool and not any(a.get("pool") == pool for a in row.attempts or []):
        require_agent(ctx, row.pool or "", "agent.report")
    status = Status(row.status)
    out = {"workload_id": wid, "attempt": attempt, "status": row.status}
    note = _ignore_reason(row, status, attempt, target, body.run_id)
    if note == "duplicate" and body.pods_running is not None:
        return {**out, **_shrink_done(session, ctx, row, body.pods_running, body.message)}
    if note == "duplicate":
        return {**out, "accepted": True, "note": "already applied"}
    if note:
        note += _exited(session, ctx, wid, attempt, target)
        audit.record(session, ctx, "agent.report", f"workload/{wid}", outcome="ignored",
                     message=note, after=body.to_json())
        return {**out, "accepted": False, "note": note}
    now = ctx.clock.now()
    state = codec.state_from_row(row)
    cause = f"agent report ({ctx.actor.name})"
    msg = body.message or ""
    if status is Status.STARTING and target is not Status.RUNNING and target is not (
        Status.FAILED
    ):
        state = transition(state, Status.RUNNING, int(now), cause, "pods running")
    new = transition(state, target, int(now), cause, msg)
    wl_repo.save_state(row, new, now)
    add_lifecycle_events(session, ctx.org_id, wid, row.team, new.events, now, row.name)
    audit.record(session, ctx, "agent.report", f"workload/{wid}",
                 before={"status": status.value}, after={"status": new.status.value})
    repo.bump_sched_version(session, ctx.org_id)
    return {**out, "status": row.status, "accepted": True, "note": ""}


def _exited(session: Session, ctx: Ctx, wid: int, attempt: int, target: Status) -> str:
    """A final report for an attempt the control plane has already ended (a
    preempted victim whose agent has now seen it exit): its devices are free at
    once, so a workload nominated on them starts in the next cycle instead of
    waiting out the pool's whole preemption grace."""
    if not target.is_terminal or wl_repo.end_exiting(session, ctx.org_id, wid, attempt) == 0:
        return ""
    repo.bump_sched_version(session, ctx.org_id)
    return "; it has exited, its devices are free"


def _shrink_done(
    session: Session, ctx: Ctx, row: WorkloadRecord, running: int, message: str | None
) -> dict[str, Any]:
    """A ``running`` report with ``pods_running`` after a shrink: the agent has
    stopped the taken pods and the others go on. The status does not change
    (it is neither a failure nor a completion); an event records it."""
    held = len(row.placement or [])
    message = message or f"{running} pod(s) running"
    add_event(session, ctx.org_id, "workload.pods", cause=f"agent report ({ctx.actor.name})",
              message=message, workload_id=row.id, team=row.team, attempt=row.attempt,
              status=row.status, data={"name": row.name, "pods_running": running,
                                       "pods_placed": held})
    note = "" if running == held else f"the workload holds {held} pod(s), the agent runs {running}"
    return {"accepted": True, "note": note}


def _ignore_reason(
    row: WorkloadRecord, status: Status, attempt: int, target: Status, rid: object
) -> str:
    if attempt < row.attempt:
        return f"stale report for attempt {attempt}; the workload is on attempt {row.attempt}"
    if attempt > row.attempt:
        return f"report for unknown attempt {attempt}"
    if rid is not None and rid != run_id(row.id, row.attempt):
        return f"run id {rid!r} does not match {run_id(row.id, row.attempt)!r}"
    if status is target:
        return "duplicate"
    if status.is_terminal:
        return f"workload is {status.value}; a terminal attempt never changes"
    if status.is_waiting:
        return f"workload is {status.value}; it has not been started"
    if status is Status.RUNNING and target is Status.RUNNING:
        return "duplicate"
    return ""


def sweep_silent_agents(session: Session, org_id: int, timeout: float, *,
                        now: float | None = None) -> int:
    """Mark the nodes of pools whose agent is silent longer than ``timeout`` as
    ``unknown`` (they take no new pods; their workloads keep their status).
    ``now`` is the scheduler loop's clock (the same one that stamped the heartbeats)."""
    now = time.time() if now is None else now
    count = 0
    for pool in repo.list_pools(session, org_id):
        if pool.agent_status != "connected" or pool.last_heartbeat_at is None:
            continue
        if now - pool.last_heartbeat_at <= timeout:
            continue
        repo.set_agent_status(pool, "silent")
        for node in repo.list_nodes(session, org_id, pool.name):
            if node.health == "ready":
                repo.set_node_health(node, "unknown")
        add_event(session, org_id, "pool.agent", cause="agent timeout",
                  message=f"agent of pool {pool.name} silent for {now - pool.last_heartbeat_at:.0f}"
                  " s; its nodes are unknown", data={"pool": pool.name})
        count += 1
    if count:
        repo.bump_sched_version(session, org_id)
    return count
