"""Overview, Teams, Events and Usage pages."""

from __future__ import annotations

import csv
import io
import time
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from apportion.service import insights, org, pools
from apportion.service import usage as accounting
from apportion.service.authz import require_reader
from apportion.service.commands import Session as DbSession
from apportion.service.context import Ctx
from apportion.web.deps import SessionDep
from apportion.web.render import PageError, control, error_page, page
from apportion.web.teams import team_rows

router = APIRouter()
WINDOWS = (1, 6, 24, 72, 168)
EVENT_TYPES = ("workload.status", "node.changed", "team.changed", "reservation.changed",
               "pool.agent")


def _hours(raw: str | None, default: int, field: str = "hours") -> int:
    if raw in (None, ""):
        return default
    try:
        value = int(raw)
    except ValueError:
        raise PageError(400, "Invalid input", f"{field}: {raw!r} is not a number of hours "
                        "(allowed: 1-720)") from None
    if not 1 <= value <= 720:
        raise PageError(400, "Invalid input", f"{field}: {value} is out of range "
                        "(allowed: 1-720)")
    return value


def _pool_cards(s: DbSession, ctx: Ctx, hours: int, now: float
                ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """One card per pool, and the waiting work not routed to any pool yet."""
    require_reader(ctx, "capacity.read", "pools")
    names = insights.pool_names(s, ctx.org_id)
    nodes = insights.node_summary(s, ctx.org_id)
    spans = insights.intervals(s, ctx.org_id, now - max(hours, 1) * 3600)
    status = insights.pool_status(s, ctx.org_id, names, spans, now)
    cards = []
    empty = {"nodes": 0, "total": 0, "healthy_milli": 0, "cordoned": 0, "down": 0}
    for name in names:
        n = nodes.get(name, empty)
        healthy, allocated = n["healthy_milli"] / 1000, status[name]["allocated_milli"] / 1000
        cards.append({
            "name": name, **n, "healthy": healthy, "allocated": allocated,
            "idle": max(0.0, healthy - allocated), **status[name],
            "chart": insights.allocation_series(spans, now - hours * 3600, now, 72, name),
        })
    return cards, status[""]


@router.get("/")
def overview(request: Request, sess: SessionDep, hours: str | None = None) -> Response:
    def build(s: DbSession) -> dict[str, Any]:
        window = _hours(hours, 6)
        now = time.time()
        cards, unrouted = _pool_cards(s, sess.ctx, window, now)
        return {"nav": "overview", "cards": cards, "hours": window, "windows": WINDOWS,
                "unrouted": unrouted}

    return page(request, sess, "overview.html", build)


@router.get("/teams")
def teams(request: Request, sess: SessionDep, pool: str | None = None,
          collapsed: str = "") -> Response:
    def build(s: DbSession) -> dict[str, Any]:
        require_reader(sess.ctx, "team.read", "teams")
        names = insights.pool_names(s, sess.ctx.org_id)
        shut = {t for t in collapsed.split(",") if t}
        views = org.team_views(s, sess.ctx.org_id)
        caps = pools.team_capacity_views(s, sess.ctx.org_id, pool or None)
        return {"nav": "teams", "rows": team_rows(views, caps, shut), "pools": names,
                "pool": pool or "", "collapsed": sorted(shut)}

    return page(request, sess, "teams.html", build)


@router.get("/events")
def events(request: Request, sess: SessionDep, workload: str = "", team: str = "") -> Response:
    types = [t for t in request.query_params.getlist("type") if t]

    def build(s: DbSession) -> dict[str, Any]:
        wid = _workload_id(workload)
        rows = insights.recent_events(s, sess.ctx, types=types, workload_id=wid,
                                      team=team or None, limit=100)
        return {"nav": "events", "events": rows, "types": EVENT_TYPES, "chosen": types,
                "workload": workload, "team": team}

    return page(request, sess, "events.html", build)


def _workload_id(raw: str) -> int | None:
    if not raw:
        return None
    try:
        return int(raw.lstrip("#"))
    except ValueError:
        raise PageError(400, "Invalid input",
                        f"workload: {raw!r} is not a workload id (allowed: a number)") from None


def _usage(s: DbSession, ctx: Ctx, hours: int) -> dict[str, Any]:
    require_reader(ctx, "capacity.read", "usage")
    now = time.time()
    start = now - hours * 3600
    spans = insights.intervals(s, ctx.org_id, start)
    rows = accounting.report(spans, start, now)  # the one definition, as GET /v1/usage
    totals = accounting.totals(rows)
    chart = insights.allocation_series(spans, start, now, 72)
    return {"rows": rows, "totals": totals, "chart": chart, "start": start, "end": now}


@router.get("/usage")
def usage(request: Request, sess: SessionDep, hours: str | None = None) -> Response:
    def build(s: DbSession) -> dict[str, Any]:
        window = _hours(hours, 24)
        return {"nav": "usage", "hours": window, "windows": WINDOWS,
                **_usage(s, sess.ctx, window)}

    return page(request, sess, "usage.html", build)


@router.get("/usage.csv")
def usage_csv(request: Request, sess: SessionDep, hours: str | None = None) -> Response:
    try:
        window = _hours(hours, 24)
        with control(request).db.read() as s:
            data = _usage(s, sess.ctx, window)
    except Exception as exc:
        return error_page(request, sess, exc)
    out = io.StringIO()
    fields = ["team", "reserved_gpu_hours", "elastic_gpu_hours", "gpu_hours", "preemptions",
              "lost_gpu_hours"]
    writer = csv.DictWriter(out, fieldnames=fields, extrasaction="ignore")
    writer.writeheader()
    writer.writerows(data["rows"])
    name = f"apportion-usage-{window}h.csv"
    return Response(out.getvalue(), media_type="text/csv; charset=utf-8",
                    headers={"Content-Disposition": f'attachment; filename="{name}"',
                             "Cache-Control": "no-store"})
