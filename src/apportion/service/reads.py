"""Read use cases the routers call that are not one aggregate's own: the
current organization, organization and token lists, reservations, the audit
log and the event feed. Routers never touch ``store``: they call these (the
import-linter contract "routers do not import the store")."""

from __future__ import annotations

from typing import Any

from apportion.domain.errors import NotFound
from apportion.service.authz import deny, visible_teams
from apportion.service.context import Ctx, Role
from apportion.service.loading import load_parents
from apportion.service.views import (
    audit_view,
    event_view,
    org_view,
    reservation_view,
    token_view,
)
from apportion.store import db
from apportion.store.db import Session
from apportion.store.repos import audit as audit_repo
from apportion.store.repos import events as ev_repo
from apportion.store.repos import orgs as repo
from apportion.store.repos import security as sec_repo
from apportion.store.repos.paging import Page


def current_org(session: Session, ctx: Ctx) -> dict[str, Any]:
    return org_view(repo.get_org(session, ctx.org_id))


def org_views(session: Session) -> list[dict[str, Any]]:
    return [org_view(o) for o in repo.list_orgs(session)]


def token_views(session: Session, ctx: Ctx) -> list[dict[str, Any]]:
    return [token_view(t) for t in sec_repo.list_tokens(session, ctx.org_id)]


def own_token(session: Session, ctx: Ctx) -> dict[str, Any]:
    row = sec_repo.get_token(session, ctx.actor.token_id)
    if row is None:
        raise NotFound("token", ctx.actor.token_id)
    return token_view(row)


def reservation_views(session: Session, ctx: Ctx, team: str | None, pool: str | None
                      ) -> list[dict[str, Any]]:
    return [reservation_view(r) for r in repo.list_reservations(session, ctx.org_id, team, pool)]


def audit_page(session: Session, ctx: Ctx, *, after: int | None, limit: int,
               actor: str | None, action: str | None, outcome: str | None,
               since: float | None, until: float | None) -> Page[dict[str, Any]]:
    res = audit_repo.list_audit(session, ctx.org_id, after=after, limit=limit, actor=actor,
                              action=action, outcome=outcome, since=since, until=until)
    return Page([audit_view(r) for r in res.items], res.next_after, res.total)


def event_teams(session: Session, ctx: Ctx) -> list[str] | None:
    """The teams whose events the caller sees (None: all); agents see none."""
    if ctx.actor.role is Role.AGENT:
        raise deny(ctx, "event.read", "events", "a human role")
    teams = visible_teams(ctx.actor, load_parents(session, ctx.org_id))
    return None if teams is None else sorted(teams)


def event_page(session: Session, ctx: Ctx, *, after: int | None, limit: int,
               workload_id: int | None, types: list[str]) -> Page[dict[str, Any]]:
    teams = event_teams(session, ctx)
    res = ev_repo.list_events(session, ctx.org_id, after=after, limit=limit,
                              workload_id=workload_id, types=types, teams=teams)
    return Page([event_view(r) for r in res.items], res.next_after, res.total)


def events_after(session: Session, ctx: Ctx, after: int, limit: int = 100
                 ) -> list[dict[str, Any]]:
    """The stream's next batch: events with an id above ``after`` the caller sees."""
    teams = event_teams(session, ctx)
    return [event_view(r) for r in ev_repo.events_after(session, ctx.org_id, after, limit,
                                                         teams)]


def database_ok(session: Session) -> None:
    """Raise if the database does not answer."""
    db.ping(session)
