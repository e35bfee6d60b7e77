"""Use cases on the organization: the org object, teams and reservations.

Each function runs inside the caller's write transaction (see commands.py),
checks the role, changes rows, audits, and marks the scheduling input changed.
"""

from __future__ import annotations

import time
from typing import Any

from apportion.domain.errors import NotFound, ValidationError, did_you_mean
from apportion.domain.org import OrgTree, Team, validate_reservations
from apportion.domain.quantities import parse_gpu_amount
from apportion.service import audit
from apportion.service.authz import require_admin, require_team_admin
from apportion.service.context import Ctx
from apportion.service.errors import Conflict, check_version
from apportion.service.events import add_event
from apportion.service.inputs import OrgChange, ReservationWanted, TeamChange, TeamNew
from apportion.service.loading import capacities, load_tree, parents_of
from apportion.service.views import org_view, reservation_view, team_view
from apportion.store.db import Session
from apportion.store.repos import orgs as repo
from apportion.store.repos import workloads as wl_repo


def patch_org(session: Session, ctx: Ctx, change: OrgChange) -> dict[str, Any]:
    require_admin(ctx, "organization.update", f"organization/{ctx.actor.org_slug}")
    org = repo.get_org(session, ctx.org_id)
    check_version("organization", org.slug, change.version, org.version)
    before = org_view(org)
    name = change.name
    if change.has("name") and (name is None or not 1 <= len(name) <= 255):
        raise ValidationError("name", "must be a string of 1-255 characters")
    repo.update_org(org, name=name)
    after = org_view(org)
    audit.record(session, ctx, "organization.update", f"organization/{org.slug}",
                 before=before, after=after)
    return after


def team_views(session: Session, org_id: int) -> list[dict[str, Any]]:
    rows = repo.list_teams(session, org_id)
    children: dict[str, list[str]] = {r.slug: [] for r in rows}
    for r in rows:
        if r.parent is not None:
            children.setdefault(r.parent, []).append(r.slug)
    res: dict[str, dict[str, int]] = {}
    for rr in repo.list_reservations(session, org_id):
        res.setdefault(rr.team, {})[rr.pool] = rr.milli
    return [team_view(r, children[r.slug], res.get(r.slug, {})) for r in rows]


def team_detail(session: Session, org_id: int, slug: str) -> dict[str, Any]:
    repo.get_team(session, org_id, slug)
    return next(v for v in team_views(session, org_id) if v["slug"] == slug)


def _has_active_workloads(session: Session, org_id: int, team: str) -> bool:
    return wl_repo.count_active(session, org_id, team=team) > 0


def _check_parent(session: Session, org_id: int, parent: str | None) -> None:
    if parent is None:
        return
    if repo.find_team(session, org_id, parent) is None:
        known = [t.slug for t in repo.list_teams(session, org_id)]
        raise ValidationError("parent", f"team {parent!r} does not exist"
                              f"{did_you_mean(parent, known)}", "an existing team")
    if _has_active_workloads(session, org_id, parent):
        raise Conflict(
            f"team {parent!r} has workloads; a team with children holds none "
            "(finish or cancel them first)", {"team": parent},
        )


def create_team(session: Session, ctx: Ctx, new: TeamNew) -> dict[str, Any]:
    team = Team(
        slug=new.slug,
        name=new.name or "",
        parent=new.parent,
        bursting_priority=new.bursting_priority,
        burst_limit_percent=new.burst_limit_percent,
    )
    rows = repo.list_teams(session, ctx.org_id)
    parents = parents_of(rows)
    if team.parent is None:
        require_admin(ctx, "team.create", f"team/{team.slug}")
    else:
        require_team_admin(ctx, parents, team.parent, "team.create", strict=False)
    if team.slug in parents:
        raise Conflict(f"team {team.slug!r} already exists", {"team": team.slug})
    _check_parent(session, ctx.org_id, team.parent)
    row = repo.add_team(
        session, ctx.org_id, slug=team.slug, name=team.name or team.slug, parent=team.parent,
        bursting_priority=team.bursting_priority, burst_limit_percent=team.burst_limit_percent,
        created_at=time.time(),
    )
    view = team_view(row, [], {})
    _changed(session, ctx, "team.create", row.slug, None, view)
    return view


def update_team(session: Session, ctx: Ctx, slug: str, change: TeamChange) -> dict[str, Any]:
    """Only the fields ``change`` gives change: ``parent`` given as None moves the
    team to the top level, ``bursting_priority`` given as None is refused (1-10)."""
    rows = repo.list_teams(session, ctx.org_id)
    parents = parents_of(rows)
    row = repo.get_team(session, ctx.org_id, slug)
    require_team_admin(ctx, parents, slug, "team.update")
    check_version("team", slug, change.version, row.version)
    before = team_detail(session, ctx.org_id, slug)
    new_parent = change.parent if change.has("parent") else row.parent
    merged = Team(
        slug=slug,
        name=(change.name if change.has("name") else row.name) or slug,
        parent=new_parent,
        bursting_priority=(change.bursting_priority if change.has("bursting_priority")
                           else row.bursting_priority),  # type: ignore[arg-type]
        burst_limit_percent=(change.burst_limit_percent if change.has("burst_limit_percent")
                             else row.burst_limit_percent),
    )
    if new_parent != row.parent:
        if new_parent is None:
            require_admin(ctx, "team.move", f"team/{slug}")
        else:
            require_team_admin(ctx, parents, new_parent, "team.move", strict=False)
        _check_parent(session, ctx.org_id, new_parent)
    tree = load_tree(session, ctx.org_id).with_team(merged)  # refuses cycles
    if new_parent != row.parent:
        _validate(session, ctx.org_id, tree, None)
    repo.update_team(session, row, name=merged.name, parent=merged.parent,
                     bursting_priority=merged.bursting_priority,
                     burst_limit_percent=merged.burst_limit_percent)
    after = team_detail(session, ctx.org_id, slug)
    _changed(session, ctx, "team.update", slug, before, after)
    return after


def delete_team(session: Session, ctx: Ctx, slug: str, version: int | None) -> dict[str, Any]:
    rows = repo.list_teams(session, ctx.org_id)
    parents = parents_of(rows)
    row = repo.get_team(session, ctx.org_id, slug)
    require_team_admin(ctx, parents, slug, "team.delete")
    check_version("team", slug, version, row.version)
    before = team_detail(session, ctx.org_id, slug)
    if any(p == slug for p in parents.values()):
        raise Conflict(f"team {slug!r} has child teams; delete or move them first")
    if repo.list_reservations(session, ctx.org_id, team=slug):
        raise Conflict(f"team {slug!r} holds reservations; remove them first")
    if _has_active_workloads(session, ctx.org_id, slug):
        raise Conflict(f"team {slug!r} has workloads that are not finished")
    repo.delete_team(session, row)
    _changed(session, ctx, "team.delete", slug, before, None)
    return before


def _validate(session: Session, org_id: int, tree: OrgTree, pool: str | None) -> None:
    caps = capacities(session, org_id)
    validate_reservations(tree, caps, None if pool is None else [pool])


def set_reservation(
    session: Session, ctx: Ctx, team: str, pool: str, body: ReservationWanted
) -> dict[str, Any]:
    rows = repo.list_teams(session, ctx.org_id)
    parents = parents_of(rows)
    repo.get_team(session, ctx.org_id, team)
    require_team_admin(ctx, parents, team, "reservation.set")
    repo.get_pool(session, ctx.org_id, pool)
    milli = parse_gpu_amount(body.gpus, "gpus")
    row = repo.find_reservation(session, ctx.org_id, team, pool)
    check_version("reservation", f"{team}/{pool}", body.version,
                  row.version if row is not None else 0)
    tree = load_tree(session, ctx.org_id).with_reservation(team, pool, milli)
    _validate(session, ctx.org_id, tree, pool)
    before = reservation_view(row) if row is not None else None
    row = repo.set_reservation(session, ctx.org_id, team, pool, milli, time.time(), row)
    after = reservation_view(row)
    _reservation_changed(session, ctx, team, pool, before, after)
    return after


def delete_reservation(
    session: Session, ctx: Ctx, team: str, pool: str, version: int | None
) -> dict[str, Any]:
    parents = parents_of(repo.list_teams(session, ctx.org_id))
    require_team_admin(ctx, parents, team, "reservation.delete")
    row = repo.find_reservation(session, ctx.org_id, team, pool)
    if row is None:
        raise NotFound("reservation", f"{team}/{pool}")
    check_version("reservation", f"{team}/{pool}", version, row.version)
    tree = load_tree(session, ctx.org_id).with_reservation(team, pool, 0)
    _validate(session, ctx.org_id, tree, pool)
    before = reservation_view(row)
    repo.delete_reservation(session, row)
    _reservation_changed(session, ctx, team, pool, before, None)
    return before


def _changed(
    session: Session, ctx: Ctx, action: str, slug: str, before: Any, after: Any
) -> None:
    audit.record(session, ctx, action, f"team/{slug}", before=before, after=after)
    add_event(session, ctx.org_id, "team.changed", cause=ctx.cause,
              message=f"{action} {slug}", data={"team": slug, "action": action})
    repo.bump_versions_for_teams(session, ctx.org_id)


def _reservation_changed(
    session: Session, ctx: Ctx, team: str, pool: str, before: Any, after: Any
) -> None:
    audit.record(session, ctx, "reservation.set", f"reservation/{team}/{pool}",
                 before=before, after=after)
    add_event(session, ctx.org_id, "reservation.changed", cause=ctx.cause,
              message=f"reservation of {team} in {pool}: {after['gpus'] if after else 0} GPUs",
              data={"team": team, "pool": pool, "gpus": after["gpus"] if after else 0})
    repo.bump_sched_version(session, ctx.org_id)
