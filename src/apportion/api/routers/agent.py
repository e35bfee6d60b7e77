"""The agent protocol: heartbeat, decisions (long-poll), reports."""

from __future__ import annotations

import asyncio
import time
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from starlette.concurrency import run_in_threadpool

from apportion.api.deps import CtxDep, IdemDep, capture_response, envelope, run_command
from apportion.api.schemas import Envelope
from apportion.api.schemas_agent import (
    DecisionRead,
    Heartbeat,
    HeartbeatRead,
    Report,
    ReportRead,
)
from apportion.domain import limits
from apportion.service import agents as svc
from apportion.service.commands import Session

router = APIRouter(tags=["agent"], dependencies=[Depends(capture_response)])


@router.post("/agent/heartbeat", response_model=Envelope[HeartbeatRead])
def heartbeat(request: Request, ctx: CtxDep, idem: IdemDep, body: Heartbeat) -> dict[str, Any]:
    beat = body.to_input()
    timeout = request.app.state.control.settings.agent_timeout

    def fn(s: Session) -> dict[str, Any]:
        return {**svc.heartbeat(s, ctx, beat), "heartbeat_timeout": timeout}

    return run_command(request, ctx, idem, fn)


@router.get("/agent/decisions", response_model=Envelope[list[DecisionRead]])
async def decisions(
    request: Request, ctx: CtxDep,
    cursor: Annotated[int, Query(ge=0, le=limits.MAX_INT64, description="last decision id seen")
                      ] = 0,
    limit: Annotated[int, Query(ge=1, le=100)] = 100,
    wait: Annotated[float, Query(ge=0, le=30, description="long-poll seconds")] = 0,
    live: Annotated[bool, Query(description="only starts of attempts still Starting/Running "
                                "(plus stops): for an agent that lost its state")] = False,
) -> dict[str, Any]:
    db = request.app.state.control.db

    def fetch() -> tuple[list[object], int]:
        with db.read() as s:
            return svc.decisions(s, ctx, cursor, limit, is_live=live)

    deadline = time.monotonic() + wait
    items, nxt = await run_in_threadpool(fetch)
    while not items and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
        items, nxt = await run_in_threadpool(fetch)
    # The cursor is a plain integer (not an opaque page token): agents persist it.
    return envelope(request, items, next_token=str(nxt))


@router.post("/agent/reports", response_model=Envelope[ReportRead])
def report(request: Request, ctx: CtxDep, idem: IdemDep, body: Report) -> dict[str, Any]:
    run = body.to_input()
    return run_command(request, ctx, idem, lambda s: svc.report(s, ctx, run))
