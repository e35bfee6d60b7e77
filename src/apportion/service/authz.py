"""Roles (docs/api.md, "Authentication and roles"): who may do what.

Scopes are team subtrees. ``parents`` maps every team slug of the org to its
parent (None for top-level teams).
"""

from __future__ import annotations

from collections.abc import Mapping

from apportion.service.context import Actor, Ctx, Role
from apportion.service.errors import PermissionDenied

Parents = Mapping[str, str | None]

READ_ALL = frozenset({Role.ORG_ADMIN, Role.VIEWER, Role.TEAM_LEAD})


def ancestors(parents: Parents, team: str) -> list[str]:
    """``team`` and its ancestors, leaf first."""
    out = [team]
    seen = {team}
    parent = parents.get(team)
    while parent is not None and parent not in seen:
        out.append(parent)
        seen.add(parent)
        parent = parents.get(parent)
    return out


def subtree(parents: Parents, roots: tuple[str, ...] | list[str]) -> set[str]:
    """Every team at or below one of ``roots``."""
    wanted = set(roots)
    return {t for t in parents if wanted.intersection(ancestors(parents, t))}


def in_scope(actor: Actor, parents: Parents, team: str, *, strict: bool = False) -> bool:
    """Is ``team`` inside the actor's subtrees (strictly below them if ``strict``)?"""
    if team not in parents:
        return False
    path = ancestors(parents, team)
    if strict:
        path = path[1:]
    return any(t in actor.teams for t in path)


def deny(ctx: Ctx, action: str, obj: str, required: str) -> PermissionDenied:
    return PermissionDenied(action, obj, ctx.actor.role.value, required)


def require_roles(ctx: Ctx, action: str, obj: str, *roles: Role) -> None:
    if ctx.actor.role not in roles:
        raise deny(ctx, action, obj, " or ".join(r.value for r in roles))


def require_admin(ctx: Ctx, action: str, obj: str = "") -> None:
    require_roles(ctx, action, obj, Role.ORG_ADMIN)


def require_reader(ctx: Ctx, action: str, obj: str = "") -> None:
    """Organization structure (teams, pools, capacity) is readable by every human role."""
    require_roles(ctx, action, obj, Role.ORG_ADMIN, Role.TEAM_LEAD, Role.MEMBER, Role.VIEWER)


def visible_teams(actor: Actor, parents: Parents) -> set[str] | None:
    """Teams whose workloads and events the actor may read; None means all."""
    if actor.role in READ_ALL:
        return None
    if actor.role is Role.MEMBER:
        return subtree(parents, actor.teams)
    return set()


def require_team_admin(
    ctx: Ctx, parents: Parents, team: str, action: str, *, strict: bool = True
) -> None:
    """Manage a team: org_admin, or a team_lead whose subtree holds it
    (strictly below the lead's own team when ``strict``)."""
    a = ctx.actor
    if a.role is Role.ORG_ADMIN:
        return
    if a.role is Role.TEAM_LEAD and in_scope(a, parents, team, strict=strict):
        return
    raise deny(ctx, action, f"team/{team}", "org_admin, or team_lead of an ancestor team")


def require_submit(ctx: Ctx, parents: Parents, team: str) -> None:
    a = ctx.actor
    if a.role is Role.ORG_ADMIN:
        return
    if a.role in (Role.TEAM_LEAD, Role.MEMBER) and in_scope(a, parents, team):
        return
    raise deny(ctx, "workload.submit", f"team/{team}", "org_admin, or team_lead/member of the team")


def require_cancel(ctx: Ctx, parents: Parents, team: str, submitted_by: str, obj: str) -> None:
    a = ctx.actor
    if a.role is Role.ORG_ADMIN:
        return
    if a.role is Role.TEAM_LEAD and in_scope(a, parents, team):
        return
    if a.role is Role.MEMBER and in_scope(a, parents, team) and submitted_by == a.name:
        return
    raise deny(
        ctx, "workload.cancel", obj, "org_admin, team_lead of the team, or its submitter"
    )


def require_agent(ctx: Ctx, pool: str, action: str) -> None:
    a = ctx.actor
    if a.role is Role.AGENT and a.pool == pool:
        return
    raise deny(ctx, action, f"pool/{pool}", "the agent token of this pool")
