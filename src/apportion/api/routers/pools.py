"""Pools, nodes and capacity views."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request

from apportion.api import filters
from apportion.api.deps import (
    CtxDep,
    IdemDep,
    IfMatch,
    PageDep,
    capture_response,
    envelope,
    page_of,
    read,
    run_command,
)
from apportion.api.schemas import (
    Envelope,
    NodeRead,
    PoolCapacity,
    PoolCreate,
    PoolRead,
    PoolUpdate,
    TeamCapacity,
    VersionBody,
)
from apportion.service import pools as svc
from apportion.service.authz import require_reader
from apportion.service.commands import Session
from apportion.service.filters import known_pool, known_team

router = APIRouter(dependencies=[Depends(capture_response)])


@router.get("/pools", response_model=Envelope[list[PoolRead]], tags=["pools"])
def list_pools(request: Request, ctx: CtxDep, page: PageDep) -> dict[str, Any]:
    require_reader(ctx, "pool.read", "pools")
    data = read(request, lambda s: svc.pool_views(s, ctx.org_id))
    return page_of(request, data, page)


@router.get("/pools/{name}", response_model=Envelope[PoolRead], tags=["pools"])
def get_pool(request: Request, ctx: CtxDep, name: str) -> dict[str, Any]:
    require_reader(ctx, "pool.read", f"pool/{name}")
    return envelope(request, read(request, lambda s: svc.pool_detail(s, ctx.org_id, name)))


@router.post("/pools", status_code=201, response_model=Envelope[PoolRead], tags=["pools"])
def create_pool(request: Request, ctx: CtxDep, idem: IdemDep, body: PoolCreate) -> dict[str, Any]:
    settings = body.to_input()
    return run_command(request, ctx, idem, lambda s: svc.create_pool(s, ctx, settings),
                       status=201)


@router.patch("/pools/{name}", response_model=Envelope[PoolRead], tags=["pools"])
def update_pool(
    request: Request, ctx: CtxDep, name: str, body: PoolUpdate, if_match: IfMatch = None
) -> dict[str, Any]:
    change = body.to_input(if_match)
    return run_command(request, ctx, None, lambda s: svc.update_pool(s, ctx, name, change))


@router.delete("/pools/{name}", response_model=Envelope[PoolRead], tags=["pools"])
def delete_pool(request: Request, ctx: CtxDep, name: str, if_match: IfMatch = None
                ) -> dict[str, Any]:
    return run_command(request, ctx, None, lambda s: svc.delete_pool(s, ctx, name, if_match))


@router.get("/nodes", response_model=Envelope[list[NodeRead]], tags=["nodes"])
def list_nodes(
    request: Request, ctx: CtxDep, page: PageDep, pool: str | None = None, state: str | None = None
) -> dict[str, Any]:
    require_reader(ctx, "node.read", "nodes")
    filters.one_of("state", state, filters.NODE_STATES)

    def fn(s: Session) -> Any:
        known_pool(s, ctx.org_id, pool)
        return svc.node_views(s, ctx.org_id, pool, state)

    data = read(request, fn)
    return page_of(request, data, page)


@router.get("/pools/{name}/nodes", response_model=Envelope[list[NodeRead]], tags=["nodes"])
def list_pool_nodes(request: Request, ctx: CtxDep, page: PageDep, name: str) -> dict[str, Any]:
    require_reader(ctx, "node.read", f"pool/{name}")

    def fn(s: Session) -> Any:
        svc.pool_detail(s, ctx.org_id, name)
        return svc.node_views(s, ctx.org_id, name)

    data = read(request, fn)
    return page_of(request, data, page)


@router.get("/nodes/{name}", response_model=Envelope[NodeRead], tags=["nodes"])
def get_node(request: Request, ctx: CtxDep, name: str) -> dict[str, Any]:
    require_reader(ctx, "node.read", f"node/{name}")
    return envelope(request, read(request, lambda s: svc.node_detail(s, ctx.org_id, name)))


def _cordon(request: Request, ctx: CtxDep, idem: IdemDep, name: str, body: VersionBody | None,
            flag: bool, if_match: int | None) -> dict[str, Any]:
    version = body.version if body and body.version is not None else if_match
    return run_command(request, ctx, idem, lambda s: svc.set_cordon(s, ctx, name, flag, version))


@router.post("/nodes/{name}/cordon", response_model=Envelope[NodeRead], tags=["nodes"])
def cordon(request: Request, ctx: CtxDep, idem: IdemDep, name: str,
           body: VersionBody | None = None, if_match: IfMatch = None) -> dict[str, Any]:
    return _cordon(request, ctx, idem, name, body, True, if_match)


@router.post("/nodes/{name}/uncordon", response_model=Envelope[NodeRead], tags=["nodes"])
def uncordon(request: Request, ctx: CtxDep, idem: IdemDep, name: str,
             body: VersionBody | None = None, if_match: IfMatch = None) -> dict[str, Any]:
    return _cordon(request, ctx, idem, name, body, False, if_match)


@router.get("/capacity/pools", response_model=Envelope[list[PoolCapacity]], tags=["capacity"])
def pool_capacity(request: Request, ctx: CtxDep, page: PageDep) -> dict[str, Any]:
    require_reader(ctx, "capacity.read", "pools")
    data = read(request, lambda s: svc.pool_capacity_views(s, ctx.org_id))
    return page_of(request, data, page)


@router.get("/capacity/teams", response_model=Envelope[list[TeamCapacity]], tags=["capacity"])
def team_capacity(
    request: Request, ctx: CtxDep, page: PageDep, pool: str | None = None, team: str | None = None
) -> dict[str, Any]:
    require_reader(ctx, "capacity.read", "teams")

    def fn(s: Session) -> Any:
        known_team(s, ctx.org_id, team)
        known_pool(s, ctx.org_id, pool)
        return svc.team_capacity_views(s, ctx.org_id, pool, team)

    data = read(request, fn)
    return page_of(request, data, page)
