"""The audit log: every mutation (inside its transaction) and every denial
(in a transaction of its own, since the denied one is rolled back)."""

from __future__ import annotations

import time
from typing import Any

from apportion.service.context import Ctx
from apportion.store.db import Database, Session
from apportion.store.repos import audit as repo


def record(
    session: Session,
    ctx: Ctx,
    action: str,
    obj: str,
    *,
    before: Any = None,
    after: Any = None,
    outcome: str = "ok",
    message: str = "",
) -> None:
    """Add an audit entry to the caller's transaction (a Core insert: append-only)."""
    repo.insert_audit(session, {
        "org_id": ctx.org_id, "at": time.time(), "actor": ctx.actor.name,
        "token_id": ctx.actor.token_id, "request_id": ctx.request_id or None,
        "action": action, "object": obj, "outcome": outcome, "message": message,
        "before": before, "after": after,
    })


def record_denial(
    db: Database,
    ctx: Ctx | None,
    action: str,
    obj: str,
    message: str,
    *,
    request_id: str = "",
    token_id: str | None = None,
) -> None:
    """Write a denial in its own transaction (``ctx`` None: unauthenticated)."""
    with db.write() as session:
        if ctx is not None:
            record(session, ctx, action, obj, outcome="denied", message=message)
            return
        repo.add_anonymous_denial(
            session, at=time.time(), token_id=token_id, request_id=request_id or None,
            action=action, obj=obj, message=message,
        )
