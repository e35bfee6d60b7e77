"""The Workloads table, the Workload page (timeline, placement, why, logs),
and cancel."""

from __future__ import annotations

import time
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from apportion.service import cursors
from apportion.service import eta as eta_svc
from apportion.service import logs as logs_svc
from apportion.service import workloads as svc
from apportion.service.authz import require_cancel
from apportion.service.commands import Result, execute
from apportion.service.commands import Session as DbSession
from apportion.service.context import Ctx
from apportion.service.errors import PermissionDenied
from apportion.service.loading import load_parents
from apportion.service.views import workload_view
from apportion.service.workloads import WorkloadFilter
from apportion.web.deps import FormDep, SessionDep
from apportion.web.render import (
    PageError,
    as_int,
    control,
    error_page,
    page,
    safe_next,
    ts_of,
)

router = APIRouter()
STATUSES = ("Pending", "Queued", "Starting", "Running", "Completed", "Failed", "Preempted",
            "Cancelled")
SORTS = {"id": "id", "priority": "priority", "wait": "wait", "age": "age", "gpus": "gpus"}
LOG_TAIL = 64 * 1024


def decode_cursor(token: str | None) -> int | None:
    try:
        return cursors.decode_cursor(token)
    except ValueError:
        raise PageError(400, "Invalid input", "next_token: is not a cursor returned by this "
                        "API") from None


def row_figures(w: dict[str, Any], now: float) -> dict[str, Any]:
    """What the table shows beyond the API's fields: per-pod size, pods
    running/requested, wait and age in seconds."""
    spec = w["spec"]
    submitted = ts_of(w["submitted_at"]) or now
    started = ts_of(w["started_at"])
    waiting = w["status"] in ("Pending", "Queued")
    wait = (now - submitted) if waiting else (None if started is None else started - submitted)
    placed = len(w["placement"]) if w["status"] in ("Starting", "Running") else 0
    running = placed if w["status"] == "Running" else 0
    return {"per_pod": spec.get("gpus"), "memory": spec.get("gpu_memory_mib"),
            "pods": int(spec.get("pods") or 1), "placed": placed, "running": running,
            "wait": wait, "age": now - submitted}


def _can_cancel(ctx: Ctx, parents: Any, w: dict[str, Any]) -> bool:
    if w["status"] in ("Completed", "Failed", "Preempted", "Cancelled"):
        return False
    try:
        require_cancel(ctx, parents, w["team"], w["submitted_by"], f"workload/{w['id']}")
    except PermissionDenied:
        return False
    return True


def _filter(request: Request) -> tuple[WorkloadFilter, str | None]:
    q = request.query_params
    statuses = [s for v in q.getlist("status") for s in v.split(",") if s]
    for s_ in statuses:
        if s_ not in STATUSES:
            raise PageError(400, "Invalid input",
                            f"status: {s_!r} is not a status (allowed: {', '.join(STATUSES)})")
    wclass = q.get("class") or None
    if wclass not in (None, "reserved", "elastic"):
        raise PageError(400, "Invalid input",
                        f"class: {wclass!r} is not a class (allowed: reserved, elastic)")
    array = q.get("array") or None
    f = WorkloadFilter(statuses=statuses, wclass=wclass, pool=q.get("pool") or None,
                       submitted_by=q.get("submitter") or None, text=q.get("q") or None,
                       array=None if array is None else as_int(array, "array"))
    return f, q.get("team") or None


def _sorted(rows: list[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    desc = key.startswith("-")
    name = SORTS.get(key.lstrip("-"))
    if name is None:
        raise PageError(400, "Invalid input",
                        f"sort: {key!r} is not a column (allowed: {', '.join(SORTS)}, "
                        "a leading '-' reverses)")

    def k(r: dict[str, Any]) -> tuple[float, int]:
        value = {"id": r["id"], "priority": r["priority"], "wait": r["fig"]["wait"],
                 "age": r["fig"]["age"], "gpus": r["gpus"]}[name]
        return (float(value) if value is not None else float("-inf"), r["id"])

    return sorted(rows, key=k, reverse=desc)


@router.get("/workloads")
def workloads(request: Request, sess: SessionDep, next_token: str | None = None,
              limit: str = "50", sort: str = "id") -> Response:
    def build(s: DbSession) -> dict[str, Any]:
        f, team = _filter(request)
        size = as_int(limit, "limit", 1, 100)
        res = svc.list_(s, sess.ctx, f, team, decode_cursor(next_token), size)
        parents = load_parents(s, sess.ctx.org_id)
        now = time.time()
        rows = [{**w, "fig": row_figures(w, now), "can_cancel": _can_cancel(sess.ctx, parents, w)}
                for w in res.items]
        q = request.query_params
        return {"nav": "workloads", "rows": _sorted(rows, sort), "total": res.total,
                "next_token": cursors.encode_cursor(res.next_after), "statuses": STATUSES,
                "chosen": f.statuses, "sort": sort, "is_first": not next_token,
                "form": {k: q.get(k, "") for k in ("team", "pool", "class", "submitter", "q",
                                                             "array")}}

    return page(request, sess, "workloads.html", build)


def _timeline(s: DbSession, ctx: Ctx, wid: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    after = None
    while True:
        res = svc.events(s, ctx, wid, after, 500)
        out.extend(res.items)
        if res.next_after is None or len(out) >= 2000:
            return out
        after = res.next_after


def _limit_end(w: dict[str, Any]) -> float | None:
    """When a placed run reaches its time limit (the control plane then ends it
    after the pool's grace), or None."""
    limit = w["spec"].get("time_limit")
    started = ts_of(w["started_at"])
    if not limit or started is None or w["status"] not in ("Starting", "Running"):
        return None
    return started + float(limit)


@router.get("/workloads/{workload_id}")
def workload(request: Request, sess: SessionDep, workload_id: str) -> Response:
    def build(s: DbSession) -> dict[str, Any]:
        wid = as_int(workload_id, "workload id")
        row = svc.get(s, sess.ctx, wid)
        w = workload_view(row)
        parents = load_parents(s, sess.ctx.org_id)
        waiting = w["status"] in ("Pending", "Queued")
        return {"nav": "workloads", "w": w, "fig": row_figures(w, time.time()),
                "limit_end": _limit_end(w),
                "eta": eta_svc.workload_eta(s, sess.ctx, wid) if waiting else None,
                "events": _timeline(s, sess.ctx, wid),
                "why": svc.why(s, sess.ctx, wid),
                "victims": svc.victims(s, sess.ctx, wid),
                "can_cancel": _can_cancel(sess.ctx, parents, w)}

    return page(request, sess, "workload.html", build)


@router.get("/workloads/{workload_id}/logs")
def workload_logs(request: Request, sess: SessionDep, workload_id: str) -> Response:
    def build(s: DbSession) -> dict[str, Any]:
        wid = as_int(workload_id, "workload id")
        part = logs_svc.read(s, sess.ctx, wid, None, None, {}, logs_svc.MAX_READ)
        pods = [(pod, data[-LOG_TAIL:].decode("utf-8", errors="replace"), len(data) > LOG_TAIL)
                for pod, data, _nxt in part.parts if data]
        return {"pods": pods, "attempt": part.attempt, "is_ended": part.is_ended,
                "workload_id": wid}

    return page(request, sess, "logs.html", build)


@router.post("/workloads/{workload_id}/cancel")
async def cancel(request: Request, sess: SessionDep, form: FormDep, workload_id: str
                 ) -> Response:
    """The REST cancel's twin: same service function, same audit entry."""
    ctx = sess.ctx
    try:
        wid = as_int(workload_id, "workload id")
    except PageError as exc:
        return error_page(request, sess, exc)
    raw = form.get("version", "")
    version = int(raw) if raw.isdigit() else None
    message = form.get("message", "")[:1000]
    cp = control(request)

    def run() -> None:
        execute(cp.db, ctx, None, lambda s: Result(200, svc.cancel(
            s, ctx, wid, version, message)))

    try:
        await run_in_threadpool(run)
    except Exception as exc:
        return error_page(request, sess, exc)
    cp.poke()
    target = safe_next(form.get("next") or f"/workloads/{wid}")
    return RedirectResponse(target, status_code=303)
