"""The Pool map (nodes x devices, filled by pods) and the Queue of a pool."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse, Response
from sqlalchemy.orm import Session as DbSession

from apportion.service import insights, pools
from apportion.service.authz import require_reader
from apportion.service.context import Ctx
from apportion.service.queue import queue_view
from apportion.web.deps import SessionDep
from apportion.web.render import page
from apportion.web.session import control

router = APIRouter()


def _first_pool(request: Request) -> str | None:
    with control(request).db.read() as s:
        names = [p["name"] for p in pools.pool_views(s, request.state.ctx.org_id)]
    return names[0] if names else None


def pool_map(s: DbSession, ctx: Ctx, pool: str) -> dict[str, Any]:
    """Nodes grouped by topology domain (the pool's label levels), each with
    its devices and their shares; ``teams`` lists the teams on the map."""
    require_reader(ctx, "node.read", f"pool/{pool}")
    detail = pools.pool_detail(s, ctx.org_id, pool)
    levels = detail["topology"]
    shares = insights.device_shares(s, ctx, pool)
    groups: dict[str, list[dict[str, Any]]] = {}
    for n in sorted(pools.node_views(s, ctx.org_id, pool), key=lambda n: n["name"]):
        domain = " / ".join(f"{lv}={n['labels'].get(lv, '-')}" for lv in levels) or "all nodes"
        down = {u["index"]: u["milli"] for u in n["unavailable"]}
        devices = []
        for i in range(n["gpus"]):
            parts = shares.get((n["name"], i), [])
            used = sum(p["milli"] for p in parts)
            devices.append({"index": i, "parts": parts, "used": used,
                            "unavailable": down.get(i, 0)})
        groups.setdefault(domain, []).append({**n, "devices": devices})
    teams = sorted({p["team"] for parts in shares.values() for p in parts})
    return {"pool": detail, "groups": sorted(groups.items()), "teams": teams}


@router.get("/pools")
def pools_index(request: Request, sess: SessionDep) -> Response:
    name = _first_pool(request)
    return RedirectResponse(f"/pools/{name}" if name else "/", status_code=303)


@router.get("/queue")
def queue_index(request: Request, sess: SessionDep) -> Response:
    name = _first_pool(request)
    return RedirectResponse(f"/pools/{name}/queue" if name else "/", status_code=303)


def _pool_names(s: DbSession, ctx: Ctx) -> list[str]:
    return [p["name"] for p in pools.pool_views(s, ctx.org_id)]


@router.get("/pools/{name}")
def pool_page(request: Request, sess: SessionDep, name: str) -> Response:
    def build(s: DbSession) -> dict[str, Any]:
        return {"nav": "pools", "pools": _pool_names(s, sess.ctx),
                **pool_map(s, sess.ctx, name)}

    return page(request, sess, "pool.html", build)


@router.get("/pools/{name}/queue")
def queue_page(request: Request, sess: SessionDep, name: str) -> Response:
    def build(s: DbSession) -> dict[str, Any]:
        return {"nav": "queue", "pools": _pool_names(s, sess.ctx),
                **queue_view(s, sess.ctx, name)}

    return page(request, sess, "queue.html", build)
