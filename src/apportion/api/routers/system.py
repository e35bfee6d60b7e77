"""Health and metrics (no authentication)."""

from __future__ import annotations

import os
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from apportion.service import reads
from apportion.service.views import iso

router = APIRouter(tags=["system"])


@router.get("/healthz")
def healthz(request: Request) -> JSONResponse:
    cp = request.app.state.control
    status: dict[str, Any] = {"status": "ok", "database": "ok"}
    try:
        with cp.db.read() as s:
            reads.database_ok(s)
    except Exception as exc:
        status.update(status="degraded", database=f"error: {type(exc).__name__}")
    status["scheduler"] = {"leader": cp.loop.is_leader,
                           "last_cycle_at": iso(cp.loop.last_cycle_at)}
    # which server process answered (several share a port or a load balancer), and
    # whether it hears other processes' changes at once (PostgreSQL LISTEN) or polls
    status["process"] = {"pid": os.getpid(), "notify": cp.notify_state}
    return JSONResponse(status, status_code=200 if status["status"] == "ok" else 503)


@router.get("/metrics", response_class=Response)
def metrics(request: Request) -> Response:
    body = request.app.state.control.metrics.render()
    return Response(body, media_type="text/plain; version=0.0.4; charset=utf-8")
