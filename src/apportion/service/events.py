"""Writing events: the durable feed behind /v1/events and the SSE stream."""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy.orm import Session

from apportion.domain.lifecycle import Event
from apportion.store.models import EventRow


def add_event(
    session: Session,
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
) -> None:
    session.add(EventRow(
        org_id=org_id, at=time.time() if at is None else at, type=type_,
        workload_id=workload_id, team=team, attempt=attempt, status=status,
        cause=cause[:255], message=message, data=data or {},
    ))


def add_lifecycle_events(
    session: Session, org_id: int, workload_id: int, team: str, events: tuple[Event, ...],
    now: float,
) -> None:
    """One ``workload.status`` event per lifecycle transition."""
    for e in events:
        add_event(session, org_id, "workload.status", cause=e.cause, message=e.message,
                  workload_id=workload_id, team=team, attempt=e.attempt,
                  status=e.status.value, at=now)
