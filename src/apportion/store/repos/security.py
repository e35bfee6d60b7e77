"""Tokens, idempotency keys, the scheduler lease, cycles and
entitlements."""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from apportion.store.models import (
    CycleRow,
    EntitlementRow,
    IdempotencyRow,
    LeaseRow,
    TokenRow,
)


def get_token(session: Session, token_id: str) -> TokenRow | None:
    return session.get(TokenRow, token_id)


def add_token(
    session: Session, *, token_id: str, org_id: int, name: str, role: str, teams: list[str],
    pool: str | None, secret_hash: str, created_at: float, expires_at: float | None,
) -> TokenRow:
    """A new token row (its secret only as a hash), added to the transaction."""
    row = TokenRow(
        id=token_id, org_id=org_id, name=name, role=role, teams=teams, pool=pool,
        secret_hash=secret_hash, created_at=created_at, expires_at=expires_at,
    )
    session.add(row)
    return row


def revoke_token(row: TokenRow, at: float) -> None:
    row.revoked_at = at


def list_tokens(session: Session, org_id: int) -> list[TokenRow]:
    q = select(TokenRow).where(TokenRow.org_id == org_id).order_by(TokenRow.created_at)
    return list(session.scalars(q))


def get_idempotency(session: Session, org_id: int, key: str) -> IdempotencyRow | None:
    return session.get(IdempotencyRow, (org_id, key))


def add_idempotency(
    session: Session, org_id: int, key: str, *, fingerprint: str, status_code: int,
    response: Any, created_at: float,
) -> None:
    """Store a command's result under its key (in the command's transaction; a
    concurrent request with the same new key fails the commit)."""
    session.add(IdempotencyRow(
        org_id=org_id, key=key, fingerprint=fingerprint, status_code=status_code,
        response=response, created_at=created_at,
    ))


def purge_idempotency(session: Session, older_than: float) -> None:
    session.execute(delete(IdempotencyRow).where(IdempotencyRow.created_at < older_than))


def lock_lease(session: Session, name: str) -> LeaseRow | None:
    """The lease row, locked until the end of the transaction (PostgreSQL);
    SQLite's write transactions are exclusive already."""
    return session.scalar(select(LeaseRow).where(LeaseRow.name == name).with_for_update())


def add_lease(
    session: Session, name: str, *, holder: str, token: int, expires_at: float
) -> None:
    """The first lease row (a concurrent first insert fails the commit with an
    ``IntegrityError``)."""
    session.add(LeaseRow(name=name, holder=holder, token=token, expires_at=expires_at))


def renew_lease(row: LeaseRow, expires_at: float) -> None:
    """The holder keeps the lease (same token) until ``expires_at``; 0 ends it."""
    row.expires_at = expires_at


def take_lease(row: LeaseRow, holder: str, expires_at: float) -> int:
    """``holder`` takes the lease until ``expires_at`` with the next fencing
    token, which it returns."""
    row.holder, row.token = holder, row.token + 1
    row.expires_at = expires_at
    return row.token


def read_lease(session: Session, name: str) -> LeaseRow | None:
    return session.get(LeaseRow, name)


def add_cycle(
    session: Session, org_id: int, cycle_id: int, *, holder: str, fencing_token: int,
    snapshot_version: int, at: float, duration_ms: float, decisions: int,
) -> None:
    """The record of one committed cycle: who committed it, under which fencing
    token, from which snapshot version."""
    session.add(CycleRow(org_id=org_id, id=cycle_id, holder=holder, fencing_token=fencing_token,
                         snapshot_version=snapshot_version, at=at, duration_ms=duration_ms,
                         decisions=decisions))


def list_cycles(session: Session, org_id: int | None = None) -> list[CycleRow]:
    q = select(CycleRow)
    if org_id is not None:
        q = q.where(CycleRow.org_id == org_id)
    return list(session.scalars(q.order_by(CycleRow.org_id, CycleRow.id)))


def replace_entitlements(
    session: Session, org_id: int, values: Mapping[str, Mapping[str, Fraction]]
) -> None:
    session.execute(delete(EntitlementRow).where(EntitlementRow.org_id == org_id))
    for pool, teams in values.items():
        for team, value in teams.items():
            session.add(EntitlementRow(org_id=org_id, pool=pool, team=team, value=str(value)))


def list_entitlements(session: Session, org_id: int) -> dict[tuple[str, str], Fraction]:
    q = select(EntitlementRow).where(EntitlementRow.org_id == org_id)
    return {(r.team, r.pool): Fraction(r.value) for r in session.scalars(q)}

