"""Organizations, tokens, teams, reservations and the audit log."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request

from apportion.api import filters, links
from apportion.api.deps import (
    CtxDep,
    IdemDep,
    IfMatch,
    PageDep,
    capture_response,
    envelope,
    page_of,
    parse_time,
    read,
)
from apportion.api.deps import run_command as command
from apportion.api.schemas import (
    AuditRead,
    Envelope,
    OrgCreate,
    OrgCreated,
    OrgRead,
    OrgUpdate,
    ReservationRead,
    ReservationSet,
    TeamCreate,
    TeamRead,
    TeamUpdate,
    TokenCreate,
    TokenCreated,
    TokenRead,
)
from apportion.service import org as svc
from apportion.service import reads
from apportion.service import tokens as tok
from apportion.service.authz import deny, require_admin, require_reader
from apportion.service.commands import Session
from apportion.service.filters import known_pool, known_team

router = APIRouter(dependencies=[Depends(capture_response)])


# -- organizations --------------------------------------------------------------------
@router.get("/organizations/current", response_model=Envelope[OrgRead], tags=["organizations"])
def get_current_org(request: Request, ctx: CtxDep) -> dict[str, Any]:
    return envelope(request, read(request, lambda s: reads.current_org(s, ctx)))


@router.patch("/organizations/current", response_model=Envelope[OrgRead],
              tags=["organizations"])
def patch_current_org(
    request: Request, ctx: CtxDep, body: OrgUpdate, if_match: IfMatch = None
) -> dict[str, Any]:
    change = body.to_input(if_match)
    return command(request, ctx, None, lambda s: svc.patch_org(s, ctx, change), poke=False)


@router.get("/organizations", response_model=Envelope[list[OrgRead]], tags=["organizations"])
def list_orgs(request: Request, ctx: CtxDep, page: PageDep) -> dict[str, Any]:
    require_admin(ctx, "organization.list", "organizations")
    if not ctx.actor.is_system_org:
        raise deny(ctx, "organization.list", "organizations",
                   "org_admin of the bootstrap organization")
    data = read(request, reads.org_views)
    return page_of(request, data, page)


@router.post("/organizations", status_code=201, response_model=Envelope[OrgCreated],
             tags=["organizations"])
def create_org(request: Request, ctx: CtxDep, idem: IdemDep, body: OrgCreate) -> dict[str, Any]:
    new = body.to_input()
    return command(request, ctx, idem, lambda s: tok.new_org(s, ctx, new), status=201)


# -- tokens -------------------------------------------------------------------------------
@router.post("/tokens", status_code=201, response_model=Envelope[TokenCreated],
             tags=["tokens"])
def create_token(request: Request, ctx: CtxDep, idem: IdemDep, body: TokenCreate) -> dict[str, Any]:
    new = body.to_input()
    return command(request, ctx, idem, lambda s: tok.create_token(s, ctx, new), status=201,
                   poke=False)


@router.get("/tokens", response_model=Envelope[list[TokenRead]], tags=["tokens"])
def list_tokens(request: Request, ctx: CtxDep, page: PageDep) -> dict[str, Any]:
    require_admin(ctx, "token.list", "tokens")
    data = read(request, lambda s: reads.token_views(s, ctx))
    return page_of(request, data, page)


@router.get("/tokens/self", response_model=Envelope[TokenRead], tags=["tokens"])
def token_self(request: Request, ctx: CtxDep) -> dict[str, Any]:
    return envelope(request, read(request, lambda s: reads.own_token(s, ctx)))


@router.delete("/tokens/{token_id}", response_model=Envelope[TokenRead], tags=["tokens"])
def revoke_token(request: Request, ctx: CtxDep, token_id: str) -> dict[str, Any]:
    revoked_now: list[bool] = []

    def revoke(s: Session) -> dict[str, Any]:
        revoked_now.append(not tok.is_revoked(s, token_id))
        return tok.revoke_token(s, ctx, token_id)

    response = command(request, ctx, None, revoke, poke=False)
    # answer once every server process has dropped the token from its cache
    request.app.state.control.token_changed(token_id, wait=revoked_now[-1])
    return response


# -- teams ----------------------------------------------------------------------------------
@router.get("/teams", response_model=Envelope[list[TeamRead]], tags=["teams"])
def list_teams(
    request: Request, ctx: CtxDep, page: PageDep, parent: str | None = None
) -> dict[str, Any]:
    require_reader(ctx, "team.read", "teams")

    def fn(s: Session) -> Any:
        known_team(s, ctx.org_id, parent)
        return svc.team_views(s, ctx.org_id)

    data = read(request, fn)
    if parent is not None:
        data = [t for t in data if t["parent"] == parent]
    return page_of(request, data, page)


@router.get("/teams/{slug}", response_model=Envelope[TeamRead], tags=["teams"])
def get_team(request: Request, ctx: CtxDep, slug: str) -> dict[str, Any]:
    require_reader(ctx, "team.read", f"team/{slug}")
    return envelope(request, read(request, lambda s: svc.team_detail(s, ctx.org_id, slug)))


@router.post("/teams", status_code=201, response_model=Envelope[TeamRead], tags=["teams"],
             responses={201: {"description": "the team", "links": links.TEAM_CREATED}})
def create_team(request: Request, ctx: CtxDep, idem: IdemDep, body: TeamCreate) -> dict[str, Any]:
    new = body.to_input()
    return command(request, ctx, idem, lambda s: svc.create_team(s, ctx, new), status=201)


@router.patch("/teams/{slug}", response_model=Envelope[TeamRead], tags=["teams"])
def update_team(
    request: Request, ctx: CtxDep, slug: str, body: TeamUpdate, if_match: IfMatch = None
) -> dict[str, Any]:
    change = body.to_input(if_match)
    return command(request, ctx, None, lambda s: svc.update_team(s, ctx, slug, change))


@router.delete("/teams/{slug}", response_model=Envelope[TeamRead], tags=["teams"])
def delete_team(request: Request, ctx: CtxDep, slug: str, if_match: IfMatch = None
                ) -> dict[str, Any]:
    return command(request, ctx, None, lambda s: svc.delete_team(s, ctx, slug, if_match))


# -- reservations ------------------------------------------------------------------------------
@router.get("/reservations", response_model=Envelope[list[ReservationRead]],
            tags=["reservations"])
def list_reservations(
    request: Request, ctx: CtxDep, page: PageDep, team: str | None = None, pool: str | None = None
) -> dict[str, Any]:
    require_reader(ctx, "reservation.read", "reservations")

    def fn(s: Session) -> Any:
        known_team(s, ctx.org_id, team)
        known_pool(s, ctx.org_id, pool)
        return reads.reservation_views(s, ctx, team, pool)

    data = read(request, fn)
    return page_of(request, data, page)


@router.put("/reservations/{team}/{pool}", response_model=Envelope[ReservationRead],
            tags=["reservations"],
            responses={200: {"description": "the reservation", "links": links.RESERVATION_SET}})
def set_reservation(
    request: Request, ctx: CtxDep, team: str, pool: str, body: ReservationSet,
    if_match: IfMatch = None,
) -> dict[str, Any]:
    wanted = body.to_input(if_match)
    return command(request, ctx, None,
                   lambda s: svc.set_reservation(s, ctx, team, pool, wanted))


@router.delete("/reservations/{team}/{pool}", response_model=Envelope[ReservationRead],
               tags=["reservations"])
def delete_reservation(
    request: Request, ctx: CtxDep, team: str, pool: str, if_match: IfMatch = None
) -> dict[str, Any]:
    return command(request, ctx, None,
                   lambda s: svc.delete_reservation(s, ctx, team, pool, if_match))


# -- audit ---------------------------------------------------------------------------------------
@router.get("/audit", response_model=Envelope[list[AuditRead]], tags=["audit"])
def list_audit(
    request: Request, ctx: CtxDep, page: PageDep, actor: str | None = None,
    action: str | None = None, outcome: str | None = None,
    after: Annotated[str | None, Query(description="RFC 3339 or epoch seconds")] = None,
    before: Annotated[str | None, Query(description="RFC 3339 or epoch seconds")] = None,
) -> dict[str, Any]:
    require_admin(ctx, "audit.read", "audit")
    filters.one_of("outcome", outcome, filters.OUTCOMES)
    since, until = parse_time(after, "after"), parse_time(before, "before")
    res = read(request, lambda s: reads.audit_page(
        s, ctx, after=page.after, limit=page.limit, actor=actor, action=action,
        outcome=outcome, since=since, until=until))
    return envelope(request, res.items, next_after=res.next_after, total=res.total)
