"""The Pool map (nodes x devices, filled by pods) and the Queue of a pool."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse, Response
from markupsafe import Markup, escape

from apportion.service import eta as eta_svc
from apportion.service import insights, pools
from apportion.service.authz import require_reader
from apportion.service.commands import Session as DbSession
from apportion.service.context import Ctx
from apportion.service.queue import queue_view
from apportion.web.deps import SessionDep
from apportion.web.render import as_int, frac, mib, number, page, team_colour
from apportion.web.session import control

router = APIRouter()


def _first_pool(request: Request) -> str | None:
    with control(request).db.read() as s:
        names = insights.pool_names(s, request.state.ctx.org_id)
    return names[0] if names else None


def _device_html(index: int, parts: list[dict[str, Any]], unavailable: int) -> str:
    """One GPU box and its shares."""
    used = sum(p["milli"] for p in parts)
    title = f"GPU {index}: {frac(used / 1000)} used"
    if unavailable:
        title += f", {frac(unavailable / 1000)} unavailable"
    out = [f'<div class="dev{" unavail" if unavailable else ""}" data-dev="{index}" '
           f'title="{title}">']
    for p in parts:
        style = f'width:{p["milli"] / 10:g}%;background:{team_colour(p["team"])}'
        share = frac(p["milli"] / 1000)
        if p["id"] is not None:
            tip = escape(f"workload {p['id']} {p['name']} · team {p['team']} · pod {p['pod']} · "
                         f"{share} GPU · {p['status']}")
            out.append(f'<a class="share" href="/workloads/{p["id"]}" data-workload="{p["id"]}"'
                       f' style="{style}" title="{tip}"></a>')
        else:
            tip = escape(f"team {p['team']} · {share} GPU")
            out.append(f'<span class="share" style="{style}" title="{tip}"></span>')
    out.append("</div>")
    return "".join(out)


def host_line(n: dict[str, Any], in_use: tuple[int, int]) -> str:
    """``CPU 8.5/32 · memory 32Gi/256Gi``: what placed pods request of the node
    against what it can give (``-`` = not limited); empty when neither is known
    nor used."""
    cpu_used, memory_used = in_use
    if n.get("cpu_milli") is None and n.get("memory_mib") is None and not any(in_use):
        return ""
    cpu_all = "-" if n.get("cpu_milli") is None else number(n["cpu_milli"] / 1000, 3)
    memory_all = "-" if n.get("memory_mib") is None else (mib(n["memory_mib"]) if n[
        "memory_mib"] else "0")
    return (f"CPU {number(cpu_used / 1000, 3)}/{cpu_all} · memory "
            f"{mib(memory_used) if memory_used else '0'}/{memory_all}")


def _node_html(n: dict[str, Any], shares: dict[tuple[str, int], list[dict[str, Any]]],
               in_use: tuple[int, int] = (0, 0)) -> str:
    """One node: its name, state in words when not ready, its host CPU and memory
    (in use / allocatable) and its GPU boxes. Built here, not in the template: a
    pool of 1,000 nodes has 8,000 boxes."""
    name = escape(n["name"])
    state = "" if n["state"] == "ready" else f' <b class="nstate">{n["state"].upper()}</b>'
    devices = "".join(_device_html(i, shares.get((n["name"], i), []),
                                   n["unavailable"].get(i, 0)) for i in range(n["gpus"]))
    host = host_line(n, in_use)
    host_html = f'<div class="nhost" data-k="host">{escape(host)}</div>' if host else ""
    return (f'<div class="node state-{n["state"]}" data-node="{name}">'
            f'<div class="nname">{name}{state}</div>{host_html}'
            f'<div class="devs">{devices}</div></div>')


def pool_map(s: DbSession, ctx: Ctx, pool: str) -> dict[str, Any]:
    """Nodes grouped by topology domain (the pool's label levels), each group
    with the HTML of its nodes; ``teams`` lists the teams on the map."""
    require_reader(ctx, "node.read", f"pool/{pool}")
    detail = insights.pool_topology(s, ctx.org_id, pool)
    levels = detail["topology"]
    shares = insights.device_shares(s, ctx, pool)
    in_use = pools.host_in_use(s, ctx.org_id, pool)
    groups: dict[str, list[str]] = {}
    for n in insights.map_nodes(s, ctx.org_id, pool):
        domain = " / ".join(f"{lv}={n['labels'].get(lv, '-')}" for lv in levels) or "all nodes"
        groups.setdefault(domain, []).append(_node_html(n, shares, in_use.get(
            (pool, n["name"]), (0, 0))))
    teams = sorted({p["team"] for parts in shares.values() for p in parts})
    return {"pool": detail, "teams": teams,
            "groups": [(d, len(html), Markup("".join(html))) for d, html in sorted(groups.items())]}


@router.get("/pools")
def pools_index(request: Request, sess: SessionDep) -> Response:
    name = _first_pool(request)
    return RedirectResponse(f"/pools/{name}" if name else "/", status_code=303)


@router.get("/queue")
def queue_index(request: Request, sess: SessionDep) -> Response:
    name = _first_pool(request)
    return RedirectResponse(f"/pools/{name}/queue" if name else "/", status_code=303)


def _pool_names(s: DbSession, ctx: Ctx) -> list[str]:
    return insights.pool_names(s, ctx.org_id)


@router.get("/pools/{name}")
def pool_page(request: Request, sess: SessionDep, name: str) -> Response:
    def build(s: DbSession) -> dict[str, Any]:
        return {"nav": "pools", "pools": _pool_names(s, sess.ctx),
                **pool_map(s, sess.ctx, name)}

    return page(request, sess, "pool.html", build)


@router.get("/pools/{name}/queue")
def queue_page(request: Request, sess: SessionDep, name: str, limit: str = "100") -> Response:
    def build(s: DbSession) -> dict[str, Any]:
        size = as_int(limit, "limit", 1, 10_000)
        view = queue_view(s, sess.ctx, name, size)
        # one forward run estimates all of the pool's waiting work (kept until
        # the snapshot changes); shown for the rows the caller may read
        etas = {e["workload_id"]: e for e in eta_svc.pool_etas(s, sess.ctx, name)["estimates"]}
        return {"nav": "queue", "pools": _pool_names(s, sess.ctx), "limit": size,
                "etas": etas, **view}

    return page(request, sess, "queue.html", build)
