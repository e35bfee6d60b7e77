"""The audit log: append-only entries, and the paged read behind /v1/audit."""

from __future__ import annotations

from typing import Any, cast

from sqlalchemy import Table, insert, select
from sqlalchemy.orm import Session

from apportion.store.models import AuditRow
from apportion.store.repos.paging import Page, paginate

_INSERT = insert(cast(Table, AuditRow.__table__))


def insert_audit(session: Session, values: dict[str, Any]) -> None:
    """Append one entry (column name -> value) to the caller's transaction: a
    Core insert, no ORM bookkeeping."""
    session.connection().execute(_INSERT, [values])


def add_anonymous_denial(
    session: Session, *, at: float, token_id: str | None, request_id: str | None, action: str,
    obj: str, message: str,
) -> None:
    """A denial of an unauthenticated request: no organization, actor
    ``anonymous``, ``before`` and ``after`` left NULL."""
    session.add(AuditRow(
        org_id=None, at=at, actor="anonymous", token_id=token_id, request_id=request_id,
        action=action, object=obj, outcome="denied", message=message,
    ))


def list_audit(
    session: Session,
    org_id: int,
    *,
    after: int | None,
    limit: int,
    actor: str | None = None,
    action: str | None = None,
    outcome: str | None = None,
    since: float | None = None,
    until: float | None = None,
) -> Page[AuditRow]:
    q = select(AuditRow).where(AuditRow.org_id == org_id)
    if actor:
        q = q.where(AuditRow.actor == actor)
    if action:
        q = q.where(AuditRow.action == action)
    if outcome:
        q = q.where(AuditRow.outcome == outcome)
    if since is not None:
        q = q.where(AuditRow.at >= since)
    if until is not None:
        q = q.where(AuditRow.at < until)
    return paginate(session, q, AuditRow.id, after, limit)
