"""Workload logs: agents append (``POST /agent/logs``), users read and follow
(``GET /workloads/{id}/logs``). See ``service/logs.py`` for the storage rules.
A follower reads again when the workload's log chunks or its organization's
events change (on PostgreSQL: woken by ``NOTIFY`` from any server process), else
every 0.5 s (``service/changes.py``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response, StreamingResponse
from starlette.concurrency import run_in_threadpool

from apportion.api.deps import (
    BadParam,
    CtxDep,
    IdemDep,
    WorkloadId,
    capture_response,
    run_command,
)
from apportion.api.schemas import Envelope
from apportion.api.schemas_agent import LogChunk, LogChunkRead
from apportion.domain import limits
from apportion.service import logs as svc
from apportion.service.changes import events_topic, logs_topic

router = APIRouter(tags=["logs"], dependencies=[Depends(capture_response)])


@router.post("/agent/logs", response_model=Envelope[LogChunkRead], tags=["agent"])
def append_log(request: Request, ctx: CtxDep, idem: IdemDep, body: LogChunk) -> dict[str, Any]:
    chunk = body.to_input()
    max_bytes = request.app.state.control.settings.log_max_bytes
    return run_command(request, ctx, idem, lambda s: svc.append(s, ctx, chunk, max_bytes),
                       poke=False)


class _Prefixer:
    """Prefixes every line of each pod's stream with ``[pod i] `` (several pods);
    a partial line waits for its end (or for :meth:`flush`)."""

    def __init__(self, is_on: bool) -> None:
        self.is_on = is_on
        self.partial: dict[int, bytes] = {}

    def feed(self, pod: int, data: bytes) -> bytes:
        if not self.is_on:
            return data
        text = self.partial.pop(pod, b"") + data
        lines = text.split(b"\n")
        if lines[-1]:
            self.partial[pod] = lines[-1]
        return b"".join(b"[pod %d] %s\n" % (pod, line) for line in lines[:-1])

    def flush(self) -> bytes:
        out = b"".join(b"[pod %d] %s\n" % (p, rest) for p, rest in sorted(self.partial.items()))
        self.partial.clear()
        return out


@router.get("/workloads/{workload_id}/logs", response_class=Response,
            responses={200: {
                "content": {"text/plain": {"schema": {"type": "string"}}},
                "description": "the program's output (with several pods and no `pod`, each "
                "line prefixed `[pod i] `)",
                "headers": {
                    "X-Log-Attempt": {"schema": {"type": "integer"},
                                      "description": "the attempt read"},
                    "X-Log-Next-Offset": {"schema": {"type": "integer"},
                                          "description": "one pod, not following: where "
                                          "the next read starts"}}}})
async def workload_logs(
    request: Request, ctx: CtxDep, workload_id: WorkloadId,
    attempt: Annotated[int | None, Query(ge=1, le=limits.MAX_INT64,
                                         description="default: the latest")] = None,
    pod: Annotated[int | None, Query(ge=0, le=limits.MAX_PODS - 1,
                                     description="default: every pod")] = None,
    offset: Annotated[int, Query(ge=0, le=limits.MAX_INT64,
                                 description="byte offset (one pod only)")] = 0,
    limit: Annotated[int, Query(ge=1, le=svc.MAX_READ, description="bytes per pod")
                     ] = svc.MAX_READ,
    follow: bool = False,
) -> Response:
    db = request.app.state.control.db

    def fetch(offsets: dict[int, int], number: int | None) -> svc.LogSlice:
        with db.read() as s:
            return svc.read(s, ctx, workload_id, number, pod, offsets, limit)

    changes = request.app.state.control.changes
    # new output, or the end of the attempt (its status change writes an event)
    topics = (logs_topic(workload_id), events_topic(ctx.org_id))
    first_mark = changes.mark(topics)
    first = await run_in_threadpool(fetch, {pod or 0: offset}, attempt)
    if offset and pod is None and first.pods > 1:
        raise BadParam("offset", "an offset needs one pod", "offset with pod=<index>")
    prefix = _Prefixer(pod is None and first.pods > 1)
    headers = {"X-Log-Attempt": str(first.attempt), "Cache-Control": "no-cache"}
    if len(first.parts) == 1:
        headers["X-Log-Next-Offset"] = str(first.parts[0][2])
    if not follow:
        body = b"".join(prefix.feed(p, data) for p, data, _ in first.parts) + prefix.flush()
        return Response(body, media_type="text/plain; charset=utf-8", headers=headers)
    headers.pop("X-Log-Next-Offset", None)

    async def gen() -> AsyncIterator[bytes]:
        current = first
        mark = first_mark
        while True:
            out = b"".join(prefix.feed(p, data) for p, data, _ in current.parts)
            if out:
                yield out
            offsets = {p: nxt for p, _, nxt in current.parts}
            was_ended = current.is_ended
            got_bytes = any(data for _, data, _ in current.parts)
            if was_ended and not got_bytes:
                break  # the attempt has ended and everything it shipped is out
            if not got_bytes:
                if await request.is_disconnected():
                    return
                await changes.wait(topics, mark)
            mark = changes.mark(topics)
            current = await run_in_threadpool(fetch, offsets, current.attempt)
        tail = prefix.flush()
        if tail:
            yield tail

    return StreamingResponse(gen(), media_type="text/plain; charset=utf-8", headers=headers)
