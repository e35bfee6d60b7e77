"""Health and metrics (no authentication)."""

from __future__ import annotations

import os
from typing import Literal

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, Field

from apportion.service import reads
from apportion.service.views import iso

router = APIRouter(tags=["system"])


class SchedulerHealth(BaseModel):
    leader: bool = Field(description="this process holds the scheduler lease")
    last_cycle_at: str | None


class ProcessHealth(BaseModel):
    pid: int = Field(description="which server process answered (several may share a port)")
    notify: str = Field(
        description="listening: hears other processes' changes at once (PostgreSQL "
        "LISTEN); reconnecting: LISTEN lost, being restored; polling: SQLite")


class HealthRead(BaseModel):
    status: Literal["ok", "degraded"]
    database: str = Field(description="ok, or error: <kind>")
    scheduler: SchedulerHealth
    process: ProcessHealth


#: ``/metrics`` is Prometheus's text format, version 0.0.4
METRICS_TYPE = "text/plain; version=0.0.4; charset=utf-8"


@router.get("/healthz", response_model=HealthRead,
            responses={503: {"model": HealthRead,
                             "description": "degraded: the database does not answer"}})
def healthz(request: Request, response: Response) -> HealthRead:
    cp = request.app.state.control
    status: Literal["ok", "degraded"] = "ok"
    database = "ok"
    try:
        with cp.db.read() as s:
            reads.database_ok(s)
    except Exception as exc:
        status, database = "degraded", f"error: {type(exc).__name__}"
    response.status_code = 200 if status == "ok" else 503
    return HealthRead(
        status=status, database=database,
        scheduler=SchedulerHealth(leader=cp.loop.is_leader,
                                  last_cycle_at=iso(cp.loop.last_cycle_at)),
        process=ProcessHealth(pid=os.getpid(), notify=cp.notify_state))


@router.get("/metrics", response_class=Response,
            responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}},
                             "description": "Prometheus text format (version 0.0.4)"}})
def metrics(request: Request) -> Response:
    body = request.app.state.control.metrics.render()
    return Response(body, media_type=METRICS_TYPE)
