"""Workloads, exiting victims and agent decisions."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from sqlalchemy import Select, Table, and_, delete, func, insert, or_, select, update
from sqlalchemy.orm import Session

from apportion.domain.errors import NotFound
from apportion.domain.lifecycle import Exiting, WorkloadState
from apportion.store import codec
from apportion.store.models import DecisionRow, ExitingRow, WorkloadRow
from apportion.store.repos.paging import Page, paginate


@dataclass(frozen=True, slots=True)
class WorkloadFilter:
    """List filters. ``teams`` None = any team; ``statuses`` empty = any."""

    statuses: Sequence[str] = ()
    teams: Sequence[str] | None = None
    wclass: str | None = None
    pool: str | None = None
    submitted_by: str | None = None
    submitted_after: float | None = None
    submitted_before: float | None = None
    name: str | None = None
    #: a substring of the name (case-insensitive; the dashboard's text filter)
    text: str | None = None
    ids: Sequence[int] = field(default_factory=tuple)
    #: the members of one array (issue 16)
    array: int | None = None


_WORKLOADS = cast(Table, WorkloadRow.__table__)
_INSERT_WORKLOAD = insert(_WORKLOADS).returning(_WORKLOADS.c.id)


def insert_workload(session: Session, values: dict[str, Any]) -> int:
    """Insert one workload (column name -> value) and return its new id.

    A Core ``INSERT ... RETURNING id`` (one cached statement, no ORM unit of
    work): submission is the API's hot path."""
    return int(session.connection().execute(_INSERT_WORKLOAD, values).scalar_one())


def unsaved_workload(workload_id: int, values: dict[str, Any]) -> WorkloadRow:
    """A transient row of ``values`` (as given to :func:`insert_workload`) with
    its new id, never added to the session: what was just written, in the row's
    shape, without reading it back."""
    return WorkloadRow(id=workload_id, **values)


def save_state(row: WorkloadRow, state: WorkloadState, now: float) -> None:
    """Write the mutable fields of ``state`` to the workload's row (its version
    bumped, ``updated_at`` = ``now``)."""
    codec.state_to_row(state, row, now)


def add_preemption(row: WorkloadRow, entry: dict[str, Any]) -> None:
    """Append one entry (whole attempt or shrink) to the workload's preemption
    history."""
    row.preemptions = [*(row.preemptions or []), entry]


def get_workload(
    session: Session, org_id: int, workload_id: int, *, lock: bool = False
) -> WorkloadRow:
    q = select(WorkloadRow).where(WorkloadRow.org_id == org_id, WorkloadRow.id == workload_id)
    if lock:
        q = q.with_for_update()
    row = session.scalar(q)
    if row is None:
        raise NotFound("workload", str(workload_id))
    return row


def _workload_query(org_id: int, f: WorkloadFilter) -> Select[Any]:
    q = select(WorkloadRow).where(WorkloadRow.org_id == org_id)
    if f.statuses:
        q = q.where(WorkloadRow.status.in_(list(f.statuses)))
    if f.teams is not None:
        q = q.where(WorkloadRow.team.in_(list(f.teams)))
    if f.wclass:
        q = q.where(WorkloadRow.wclass == f.wclass)
    if f.pool:
        q = q.where(WorkloadRow.pool == f.pool)
    if f.submitted_by:
        q = q.where(WorkloadRow.submitted_by == f.submitted_by)
    if f.submitted_after is not None:
        q = q.where(WorkloadRow.submitted_at >= f.submitted_after)
    if f.submitted_before is not None:
        q = q.where(WorkloadRow.submitted_at < f.submitted_before)
    if f.name:
        q = q.where(WorkloadRow.name == f.name)
    if f.text:
        q = q.where(WorkloadRow.name.icontains(f.text, autoescape=True))
    if f.array is not None:
        q = q.where(WorkloadRow.array_id == f.array)
    return q


def list_workloads(
    session: Session, org_id: int, f: WorkloadFilter, after: int | None, limit: int
) -> Page[WorkloadRow]:
    return paginate(session, _workload_query(org_id, f), WorkloadRow.id, after, limit)


def active_workloads(session: Session, org_id: int) -> list[WorkloadRow]:
    """Non-terminal workloads (the snapshot's), in id order."""
    q = select(WorkloadRow).where(WorkloadRow.org_id == org_id, WorkloadRow.is_active.is_(True))
    return list(session.scalars(q.order_by(WorkloadRow.id)))


def active_versions(session: Session, org_id: int) -> list[tuple[int, int]]:
    """(id, version) of every non-terminal workload, in id order (a Core query:
    the scheduler's snapshot reads it every cycle)."""
    t = _WORKLOADS
    q = (select(t.c.id, t.c.version).where(t.c.org_id == org_id, t.c.is_active.is_(True))
         .order_by(t.c.id))
    return [(wid, version) for wid, version in session.connection().execute(q)]


def workloads_by_ids(session: Session, org_id: int, ids: Sequence[int]) -> list[WorkloadRow]:
    if not ids:
        return []
    q = select(WorkloadRow).where(WorkloadRow.org_id == org_id, WorkloadRow.id.in_(list(ids)))
    return list(session.scalars(q))


def queued_columns(session: Session, org_id: int, pool: str) -> list[Any]:
    """Named rows (id, team, wclass, priority, submitted_at, nomination, is_hold,
    spec) of the active workloads Queued in ``pool``: what the waiting order reads,
    as plain columns."""
    t = WorkloadRow
    q = select(t.id, t.team, t.wclass, t.priority, t.submitted_at, t.nomination, t.is_hold,
               t.spec).where(t.org_id == org_id, t.is_active.is_(True), t.pool == pool,
                             t.status == "Queued")
    return list(session.execute(q))


def count_active(
    session: Session, org_id: int, *, status: str | None = None, team: str | None = None
) -> int:
    """How many active workloads there are (in ``status``, of ``team``, if given)."""
    t = WorkloadRow
    q = select(func.count()).select_from(t).where(t.org_id == org_id, t.is_active.is_(True))
    if status is not None:
        q = q.where(t.status == status)
    if team is not None:
        q = q.where(t.team == team)
    return int(session.scalar(q) or 0)


def _active_in(columns: Sequence[Any], org_id: int, statuses: Sequence[str],
               pool: str | None) -> Select[Any]:
    """``columns`` of the active workloads in ``statuses`` (of ``pool``, if given)."""
    t = WorkloadRow
    q = select(*columns).where(
        t.org_id == org_id, t.is_active.is_(True), t.status.in_(list(statuses)))
    return q if pool is None else q.where(t.pool == pool)


def placements_and_specs(
    session: Session, org_id: int, statuses: Sequence[str], pool: str | None = None
) -> list[tuple[str | None, list[Any], dict[str, Any]]]:
    """(pool, placement, spec) of the active workloads in ``statuses`` (of
    ``pool``, if given)."""
    t = WorkloadRow
    q = _active_in((t.pool, t.placement, t.spec), org_id, statuses, pool)
    return [(wpool, placement, spec) for wpool, placement, spec in session.execute(q)]


def active_reasons(
    session: Session, org_id: int, statuses: Sequence[str]
) -> list[tuple[str | None, str | None]]:
    """(pool, reason code) of each active workload in ``statuses``."""
    t = WorkloadRow
    q = select(t.pool, t.reason_code).where(
        t.org_id == org_id, t.is_active.is_(True), t.status.in_(list(statuses)))
    return [(pool, reason) for pool, reason in session.execute(q)]


def possible_victims(session: Session, org_id: int, workload_id: int) -> list[Any]:
    """Named rows (id, name, team, attempt, preempted_by, attempts) of the other
    workloads whose current attempt ``workload_id`` preempted or that had
    earlier attempts (one of which it may have preempted)."""
    t = WorkloadRow
    q = select(t.id, t.name, t.team, t.attempt, t.preempted_by, t.attempts).where(
        t.org_id == org_id, t.id != workload_id,
        or_(t.preempted_by == workload_id, t.attempt > 1))
    return list(session.execute(q))


# -- attempt intervals (service/spans.py decodes and caches them) ------------------
def span_versions_since(
    session: Session, org_id: int, since: float
) -> list[tuple[int, int, float]]:
    """(id, version, updated_at) of the workloads that may hold or have held GPUs
    at or after ``since``: active or ended since, and started (or requeued)."""
    t = WorkloadRow
    q = select(t.id, t.version, t.updated_at).where(
        t.org_id == org_id, or_(t.is_active.is_(True), t.ended_at >= since),
        or_(t.started_at.is_not(None), t.attempt > 1))
    return [(wid, version, at) for wid, version, at in session.execute(q)]


def placed_versions(
    session: Session, org_id: int, statuses: Sequence[str], pool: str | None = None
) -> list[tuple[int, int, float]]:
    """(id, version, updated_at) of the active workloads in ``statuses`` (of
    ``pool``, if given)."""
    t = WorkloadRow
    q = _active_in((t.id, t.version, t.updated_at), org_id, statuses, pool)
    return [(wid, version, at) for wid, version, at in session.execute(q)]


def span_columns(session: Session, org_id: int, ids: Sequence[int]) -> list[Any]:
    """The columns of the attempt intervals (id, name, team, wclass, pool, status,
    attempt, placement, started_at, ended_at, attempts, version, updated_at,
    submitted_by, submitted_at) of the workloads ``ids``, as named rows, read 500
    ids at a time."""
    t = WorkloadRow
    out: list[Any] = []
    for start in range(0, len(ids), 500):
        q = select(t.id, t.name, t.team, t.wclass, t.pool, t.status, t.attempt,
                   t.placement, t.started_at, t.ended_at, t.attempts, t.version,
                   t.updated_at, t.submitted_by, t.submitted_at).where(t.org_id == org_id,
                                       t.id.in_(list(ids[start:start + 500])))
        out.extend(session.execute(q))
    return out


# -- aggregates of every organization (metrics) --------------------------------
def count_by_reason(
    session: Session, statuses: Sequence[str]
) -> list[tuple[int, str, str | None, int]]:
    """(org id, team, reason code, count) of the workloads in ``statuses``."""
    t = WorkloadRow
    q = (select(t.org_id, t.team, t.reason_code, func.count())
         .where(t.status.in_(list(statuses)))
         .group_by(t.org_id, t.team, t.reason_code))
    return [(int(o), team, reason, int(n)) for o, team, reason, n in session.execute(q)]


def placements_by_team(
    session: Session, statuses: Sequence[str]
) -> list[tuple[int, str, str, list[Any] | None]]:
    """(org id, team, class, placement) of each workload in ``statuses``."""
    t = WorkloadRow
    q = select(t.org_id, t.team, t.wclass, t.placement).where(t.status.in_(list(statuses)))
    return [(int(o), team, wclass, placement) for o, team, wclass, placement
            in session.execute(q)]


# -- exiting victims -------------------------------------------------------------
def list_exiting(session: Session, org_id: int) -> list[ExitingRow]:
    q = select(ExitingRow).where(ExitingRow.org_id == org_id).order_by(ExitingRow.id)
    return list(session.scalars(q))


def specs_of(session: Session, org_id: int, ids: Sequence[int]) -> dict[int, dict[str, Any]]:
    """The stored specs of workloads ``ids`` (those that exist), by id."""
    if not ids:
        return {}
    q = select(WorkloadRow.id, WorkloadRow.spec).where(
        WorkloadRow.org_id == org_id, WorkloadRow.id.in_(sorted(set(ids))))
    return {int(wid): dict(spec) for wid, spec in session.execute(q)}


def end_exiting(session: Session, org_id: int, workload_id: int, attempt: int) -> int:
    """Forget the exiting devices of one attempt (its agent saw it exit); returns
    how many entries there were."""
    result = session.execute(delete(ExitingRow).where(
        ExitingRow.org_id == org_id, ExitingRow.workload_id == workload_id,
        ExitingRow.attempt == attempt))
    return int(getattr(result, "rowcount", 0) or 0)


def clear_exiting(session: Session, org_id: int) -> None:
    session.execute(delete(ExitingRow).where(ExitingRow.org_id == org_id))


def add_exiting(session: Session, org_id: int, e: Exiting) -> None:
    """Store one exiting victim's devices (``e``'s placement on physical
    devices) until it exits."""
    session.add(ExitingRow(org_id=org_id, workload_id=e.workload_id, attempt=e.attempt,
                           team=e.team, pool=e.pool,
                           placement=codec.placement_to_json(e.placement),
                           exits_at=float(e.exits_at), part=e.part))


# -- agent decisions ----------------------------------------------------------------
def run_id(workload_id: int, attempt: int) -> str:
    """The agent's name for one attempt's run: ``w42-a1``."""
    return f"w{workload_id}-a{attempt}"


def add_decision(
    session: Session, org_id: int, *, kind: str, pool: str, workload_id: int, attempt: int,
    placement: list[Any], created_at: float, exec_: dict[str, Any] | None = None,
    reason: str | None = None, grace_seconds: int | None = None,
    pods: list[int] | None = None,
) -> None:
    """The one place an instruction for a pool's agent is written: ``start`` a
    run (with ``exec_``), ``stop`` it (with ``reason`` and ``grace_seconds``) or
    ``shrink`` it (``pods``: the pod indices to stop)."""
    session.add(DecisionRow(
        org_id=org_id, pool=pool, kind=kind, workload_id=workload_id, attempt=attempt,
        run_id=run_id(workload_id, attempt), placement=placement, exec=exec_ or {},
        reason=reason, grace_seconds=grace_seconds, pods=pods or [], created_at=created_at,
    ))


def decisions_after(
    session: Session, org_id: int, pool: str, after: int, limit: int
) -> list[DecisionRow]:
    q = (
        select(DecisionRow)
        .where(DecisionRow.org_id == org_id, DecisionRow.pool == pool, DecisionRow.id > after)
        .order_by(DecisionRow.id)
        .limit(limit)
    )
    return list(session.scalars(q))


def live_decisions_after(
    session: Session, org_id: int, pool: str, after: int, limit: int
) -> list[DecisionRow]:
    """Like :func:`decisions_after`, but only the starts whose attempt is still
    the workload's current one and Starting or Running (plus every stop): what
    an agent that lost its state needs, without the starts of ended attempts."""
    is_live_start = and_(
        DecisionRow.kind == "start",
        WorkloadRow.attempt == DecisionRow.attempt,
        WorkloadRow.status.in_(("Starting", "Running")),
    )
    q = (
        select(DecisionRow)
        .join(WorkloadRow, WorkloadRow.id == DecisionRow.workload_id)
        .where(DecisionRow.org_id == org_id, DecisionRow.pool == pool, DecisionRow.id > after,
               or_(DecisionRow.kind != "start", is_live_start))
        .order_by(DecisionRow.id)
        .limit(limit)
    )
    return list(session.scalars(q))


def last_decision_id(session: Session, org_id: int, pool: str) -> int:
    q = (
        select(DecisionRow.id)
        .where(DecisionRow.org_id == org_id, DecisionRow.pool == pool)
        .order_by(DecisionRow.id.desc())
        .limit(1)
    )
    return int(session.scalar(q) or 0)


def finished_runtimes(
    session: Session, org_id: int, since: float, limit: int = 20_000
) -> list[tuple[str, str, float, float]]:
    """(team, pool, started_at, ended_at) of the newest ``limit`` workloads that
    Completed at or after ``since`` (start-time estimates take medians of them)."""
    t = WorkloadRow
    q = (select(t.team, t.pool, t.started_at, t.ended_at)
         .where(t.org_id == org_id, t.status == "Completed", t.ended_at >= since,
                t.started_at.is_not(None), t.pool.is_not(None))
         .order_by(t.ended_at.desc()).limit(limit))
    return [(team, pool or "", float(s or 0), float(e or 0))
            for team, pool, s, e in session.execute(q)]


# -- job control (issue 16) ---------------------------------------------------------
def insert_workloads(session: Session, rows: list[dict[str, Any]]) -> list[int]:
    """Insert several workloads (an array's members) in one executemany and
    return their ids, in the order of ``rows``."""
    stmt = insert(_WORKLOADS).returning(_WORKLOADS.c.id, sort_by_parameter_order=True)
    return [int(i) for i in session.connection().execute(stmt, rows).scalars()]


def set_array_id(session: Session, ids: Sequence[int], array_id: int) -> None:
    """Make workloads ``ids`` members of array ``array_id``."""
    t = _WORKLOADS
    for start in range(0, len(ids), 500):
        session.connection().execute(
            update(t).where(t.c.id.in_(list(ids[start:start + 500]))).values(array_id=array_id))


def statuses_of(session: Session, org_id: int, ids: Sequence[int]) -> dict[int, str]:
    """The status of each of workloads ``ids`` that exists, by id."""
    out: dict[int, str] = {}
    wanted = sorted(set(ids))
    t = _WORKLOADS
    for start in range(0, len(wanted), 500):
        q = select(t.c.id, t.c.status).where(t.c.org_id == org_id,
                                             t.c.id.in_(wanted[start:start + 500]))
        out.update((int(i), str(s)) for i, s in session.execute(q))
    return out


def array_members(
    session: Session, org_id: int, array_id: int, *, lock: bool = False
) -> list[WorkloadRow]:
    """The members of array ``array_id``, by index."""
    q = select(WorkloadRow).where(WorkloadRow.org_id == org_id,
                                  WorkloadRow.array_id == array_id)
    if lock:
        q = q.with_for_update()
    return list(session.scalars(q.order_by(WorkloadRow.array_index, WorkloadRow.id)))
