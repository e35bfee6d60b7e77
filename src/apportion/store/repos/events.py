"""Events: the durable feed behind /v1/events, the SSE stream and the dashboard.

Events are append-only and written on every hot path, so they go in as Core
``executemany`` inserts (one cached statement, no ORM bookkeeping).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from sqlalchemy import Table, insert, select
from sqlalchemy.orm import Session

from apportion.store.models import EventRow
from apportion.store.repos.paging import Page, paginate

_INSERT = insert(cast(Table, EventRow.__table__))


def insert_events(session: Session, rows: Sequence[dict[str, Any]]) -> None:
    """Append events (column name -> value each); nothing for an empty batch."""
    if rows:
        session.connection().execute(_INSERT, list(rows))


def list_events(
    session: Session,
    org_id: int,
    *,
    after: int | None,
    limit: int,
    workload_id: int | None = None,
    types: Sequence[str] = (),
    teams: Sequence[str] | None = None,
) -> Page[EventRow]:
    q = select(EventRow).where(EventRow.org_id == org_id)
    if workload_id is not None:
        q = q.where(EventRow.workload_id == workload_id)
    if types:
        q = q.where(EventRow.type.in_(list(types)))
    if teams is not None:
        q = q.where(EventRow.team.in_(list(teams)))
    return paginate(session, q, EventRow.id, after, limit)


def events_after(
    session: Session, org_id: int, after: int, limit: int, teams: Sequence[str] | None = None
) -> list[EventRow]:
    """Events with id > ``after`` (no count: used by the SSE stream)."""
    q = select(EventRow).where(EventRow.org_id == org_id, EventRow.id > after)
    if teams is not None:
        q = q.where(EventRow.team.in_(list(teams)))
    return list(session.scalars(q.order_by(EventRow.id).limit(limit)))


def newest_events(
    session: Session, org_id: int, *, types: Sequence[str], workload_id: int | None,
    teams: Sequence[str] | None, team: str | None, limit: int,
) -> list[EventRow]:
    """The newest ``limit`` events, newest first: of any of ``types`` (empty:
    all), of the workload, of any of ``teams`` (None: any) and of ``team``."""
    q = select(EventRow).where(EventRow.org_id == org_id)
    if types:
        q = q.where(EventRow.type.in_(list(types)))
    if workload_id is not None:
        q = q.where(EventRow.workload_id == workload_id)
    if teams is not None:
        q = q.where(EventRow.team.in_(list(teams)))
    if team:
        q = q.where(EventRow.team == team)
    return list(session.scalars(q.order_by(EventRow.id.desc()).limit(limit)))


def newest_event_id(session: Session, org_id: int, after: int) -> int | None:
    """The id of the org's newest event if it is above ``after`` (one indexed probe)."""
    q = (select(EventRow.id).where(EventRow.org_id == org_id, EventRow.id > after)
         .order_by(EventRow.id.desc()).limit(1))
    found = session.scalar(q)
    return None if found is None else int(found)
