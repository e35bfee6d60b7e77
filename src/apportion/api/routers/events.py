"""The event feed: a paginated list and a Server-Sent Events stream that
resumes from ``Last-Event-ID``. The stream reads again when the organization's
events change (on PostgreSQL: woken by ``NOTIFY`` from any server process), else
every 0.5 s (``service/changes.py``)."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Query, Request
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from apportion.api import filters
from apportion.api.deps import BadParam, CtxDep, PageDep, capture_response, envelope, read
from apportion.api.schemas import Envelope, EventRead
from apportion.domain import limits
from apportion.service import reads
from apportion.service.changes import events_topic

router = APIRouter(tags=["events"], dependencies=[Depends(capture_response)])
KEEPALIVE_SECONDS = 15.0
#: One event of the stream, as an SSE client parses it (OpenAPI 3.1 / JSON Schema:
#: ``data`` is JSON text whose content is an ``EventRead``). Between events the
#: stream may carry ``retry: 2000`` and ``: keep-alive`` comments (every 15 s).
SSE_EVENT: dict[str, Any] = {
    "type": "object",
    "description": "one Server-Sent Event: `id: <event id>`, `event: <type>`, `data: "
    "<the event as JSON>`; resume with `Last-Event-ID`",
    "properties": {
        "id": {"type": "string", "pattern": "^[0-9]+$", "description": "the event id"},
        "event": {"type": "string", "description": "the event type"},
        "data": {"type": "string", "contentMediaType": "application/json",
                 "contentSchema": {"$ref": "#/components/schemas/EventRead"}},
        "retry": {"type": "integer"},
    },
    "required": ["id", "event", "data"],
}


@router.get("/events", response_model=Envelope[list[EventRead]])
def list_events(
    request: Request, ctx: CtxDep, page: PageDep,
    workload_id: Annotated[int | None, Query(ge=1, le=limits.MAX_INT64)] = None,
    type: Annotated[list[str] | None, Query()] = None,
    after: Annotated[int | None, Query(ge=0, le=limits.MAX_INT64,
                                        description="only events with a larger id")] = None,
) -> dict[str, Any]:
    types = filters.many_of("type", type, filters.EVENT_TYPES)

    start = page.after if page.after is not None else after
    res = read(request, lambda s: reads.event_page(s, ctx, after=start, limit=page.limit,
                                                   workload_id=workload_id, types=types))
    return envelope(request, res.items, next_after=res.next_after, total=res.total)


@router.get("/events/stream", response_class=StreamingResponse,
            responses={200: {"content": {"text/event-stream": {"schema": SSE_EVENT}},
                             "description": "the organization's events from "
                             "`Last-Event-ID`, as they happen"}})
async def stream_events(
    request: Request, ctx: CtxDep,
    last_event_id: Annotated[str | None, Header(alias="Last-Event-ID")] = None,
    last_event_id_q: Annotated[str | None, Query(alias="last_event_id")] = None,
    follow: bool = True,
) -> StreamingResponse:
    raw = last_event_id or last_event_id_q or "0"
    try:
        cursor = int(raw)
    except ValueError:
        cursor = -1
    if not 0 <= cursor <= limits.MAX_INT64:
        raise BadParam("Last-Event-ID", f"{raw!r} is not an event id",
                       f"an integer 0..{limits.MAX_INT64}")
    db = request.app.state.control.db
    changes = request.app.state.control.changes
    topics = (events_topic(ctx.org_id),)

    def fetch(after: int) -> list[dict[str, Any]]:
        with db.read() as s:
            return reads.events_after(s, ctx, after)

    await run_in_threadpool(fetch, cursor)  # check permissions before the stream starts

    async def gen() -> AsyncIterator[str]:
        after = cursor
        quiet_since = time.monotonic()
        yield "retry: 2000\n\n"
        while True:
            mark = changes.mark(topics)
            batch = await run_in_threadpool(fetch, after)
            for ev in batch:
                after = ev["id"]
                yield f"id: {ev['id']}\nevent: {ev['type']}\ndata: {json.dumps(ev)}\n\n"
            if batch:
                quiet_since = time.monotonic()
                if len(batch) == 100:
                    continue
            if not follow:
                return
            if await request.is_disconnected():
                return
            if time.monotonic() - quiet_since > KEEPALIVE_SECONDS:
                quiet_since = time.monotonic()
                yield ": keep-alive\n\n"
            await changes.wait(topics, mark)

    return StreamingResponse(gen(), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
