"""Writing events: the durable feed behind /v1/events and the SSE stream.

This module builds the rows (column name -> value); ``store/repos/events``
appends them (a Core ``executemany`` insert: events are written on every hot
path).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from apportion.domain.lifecycle import Event
from apportion.store.db import Session
from apportion.store.repos import events as repo


def event_row(
    org_id: int,
    type_: str,
    *,
    cause: str = "",
    message: str = "",
    data: dict[str, Any] | None = None,
    workload_id: int | None = None,
    team: str | None = None,
    attempt: int | None = None,
    status: str | None = None,
    at: float | None = None,
) -> dict[str, Any]:
    return {"org_id": org_id, "at": time.time() if at is None else at, "type": type_,
            "workload_id": workload_id, "team": team, "attempt": attempt, "status": status,
            "cause": cause[:255], "message": message, "data": data or {}}


def write_events(session: Session, rows: Iterable[dict[str, Any]]) -> None:
    repo.insert_events(session, list(rows))


def add_event(session: Session, org_id: int, type_: str, **fields: Any) -> None:
    write_events(session, [event_row(org_id, type_, **fields)])


def lifecycle_rows(
    org_id: int, workload_id: int, team: str, events: Iterable[Event], now: float, name: str,
    *, pool: str | None = None, pods_running: int | None = None,
) -> list[dict[str, Any]]:
    """One ``workload.status`` event per lifecycle transition; ``data`` carries the
    workload's ``name`` (so feeds can print names without a lookup) and, from the
    scheduler, its ``pool`` and the ``pods_running`` it holds after the change
    (so ``workloads list -w`` builds its rows from the stream alone)."""
    data: dict[str, Any] = {"name": name}
    if pool is not None:
        data["pool"] = pool
    if pods_running is not None:
        data["pods_running"] = pods_running
    return [event_row(org_id, "workload.status", cause=e.cause, message=e.message,
                      workload_id=workload_id, team=team, attempt=e.attempt,
                      status=e.status.value, at=now, data=dict(data)) for e in events]


def add_lifecycle_events(
    session: Session, org_id: int, workload_id: int, team: str, events: tuple[Event, ...],
    now: float, name: str,
) -> None:
    write_events(session, lifecycle_rows(org_id, workload_id, team, events, now, name))
