"""Typed dependencies and helpers shared by the routers: the caller, paging,
idempotency, and the response envelope."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import datetime
from typing import Annotated, Any, TypeVar

from fastapi import Depends, Header, Path, Query, Request, Response
from starlette.concurrency import run_in_threadpool

from apportion.domain import limits
from apportion.domain.errors import ValidationError
from apportion.service import cursors
from apportion.service.commands import Idempotency, Result, Session, execute
from apportion.service.context import Ctx
from apportion.service.control import ControlPlane
from apportion.service.errors import RateLimited, Unauthenticated

T = TypeVar("T")


def control(request: Request) -> ControlPlane:
    cp: ControlPlane = request.app.state.control
    return cp


def request_id(request: Request) -> str:
    return str(request.scope.get("state", {}).get("request_id", ""))


class RateLimiter:
    """A token bucket per API token (``rate`` per second, ``burst`` deep)."""

    def __init__(self, rate: float, burst: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.rate, self.burst = rate, burst
        self.clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}
        self._lock = threading.Lock()

    def take(self, key: str) -> None:
        if self.rate <= 0:
            return
        now = self.clock()
        with self._lock:
            level, at = self._buckets.get(key, (self.burst, now))
            level = min(self.burst, level + (now - at) * self.rate)
            if level < 1:
                self._buckets[key] = (level, now)
                raise RateLimited((1 - level) / self.rate)
            self._buckets[key] = (level - 1, now)


async def auth(
    request: Request, authorization: Annotated[str | None, Header()] = None
) -> Ctx:
    """The caller, from ``Authorization: Bearer <token>``.

    Async so that a token verified in the last seconds (the common case) costs
    no hop to the thread pool; only a cache miss reads the database, there."""
    if not authorization:
        raise Unauthenticated("missing Authorization: Bearer <token>")
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer" or not token:
        raise Unauthenticated("expected Authorization: Bearer <token>")
    cp = control(request)
    actor = cp.tokens.cached(token.strip())
    if actor is None:
        actor = await run_in_threadpool(cp.tokens.verify, token.strip())
    request.app.state.rate_limiter.take(actor.token_id)
    ctx = Ctx(actor, request_id(request), clock=cp.clock)
    request.state.ctx = ctx
    return ctx


CtxDep = Annotated[Ctx, Depends(auth)]


async def idempotency(
    request: Request, idempotency_key: Annotated[str | None, Header(max_length=255)] = None
) -> Idempotency | None:
    if not idempotency_key:
        return None
    body = await request.body()
    return Idempotency.of(idempotency_key, request.method, request.url.path, body)


IdemDep = Annotated[Idempotency | None, Depends(idempotency)]


def decode_cursor(token: str | None) -> int | None:
    try:
        return cursors.decode_cursor(token)
    except ValueError:
        raise BadParam("next_token", "is not a cursor returned by this API") from None


class BadParam(ValidationError):
    """A bad query parameter (400)."""


class Paging:
    def __init__(
        self,
        limit: Annotated[int, Query(ge=1, le=100, description="page size, 1-100")] = 20,
        next_token: Annotated[str | None, Query(description="cursor of the next page")] = None,
    ) -> None:
        self.limit = limit
        self.after = decode_cursor(next_token)


PageDep = Annotated[Paging, Depends()]


def parse_time(value: str | None, field: str) -> float | None:
    """RFC 3339 or epoch seconds, within 1970 .. 9999 (``limits.MAX_EPOCH_SECONDS``):
    ``nan``, ``1e400`` or a negative number is a BadParam naming ``field``."""
    if value is None or value == "":
        return None
    allowed = f"RFC 3339 or epoch seconds 0..{limits.MAX_EPOCH_SECONDS}"
    try:
        seconds = float(value)
    except ValueError:
        try:
            seconds = datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except ValueError:
            raise BadParam(field, f"{value!r} is not a time", allowed) from None
    if not 0 <= seconds <= limits.MAX_EPOCH_SECONDS:  # also false for nan
        raise BadParam(field, f"{value!r} is out of range", allowed)
    return seconds


async def capture_response(request: Request, response: Response) -> None:
    """Router dependency: keep FastAPI's sub-response on the request, so that
    :func:`envelope` can set a status or header while the route still returns
    plain data that FastAPI validates against its ``response_model``. Async:
    a sync dependency would cost every request a hop to the thread pool."""
    request.state.response = response


def envelope(
    request: Request, data: Any, *, status: int | None = None, next_after: int | None = None,
    total: int | None = None, replayed: bool = False, next_token: str | None = None,
) -> dict[str, Any]:
    """The success body. The route returns it; FastAPI validates it against the
    route's declared ``Envelope[...]`` and serialises it."""
    token = next_token if next_token is not None else cursors.encode_cursor(next_after)
    response: Response | None = getattr(request.state, "response", None)
    if response is not None:
        if status is not None:
            response.status_code = status
        if replayed:
            response.headers["Idempotent-Replayed"] = "true"
    return {
        "data": data,
        "metadata": {"next_token": token, "total_count": total},
        "request_id": request_id(request),
    }


def page_of(request: Request, items: list[Any], page: Paging) -> dict[str, Any]:
    """A page of a short, fully loaded list (teams, pools, nodes, ...); the
    cursor is then an offset into the list's stable order."""
    start = page.after or 0
    chunk = items[start:start + page.limit]
    more = start + page.limit < len(items)
    return envelope(request, chunk, next_after=start + page.limit if more else None,
                    total=len(items))


def run_command(
    request: Request, ctx: Ctx, idem: Idempotency | None, fn: Callable[[Session], Any],
    *, status: int = 200, poke: bool = True,
) -> dict[str, Any]:
    """One write transaction around ``fn`` with idempotency; the envelope."""
    cp = control(request)
    result = execute(cp.db, ctx, idem, lambda s: Result(status, fn(s)))
    if poke and not result.replayed:
        cp.poke()
    return envelope(request, result.data, status=result.status, replayed=result.replayed)


def read(request: Request, fn: Callable[[Session], T]) -> T:
    with control(request).db.read() as session:
        return fn(session)


#: The ``If-Match`` header: the version a write expects (409 when stale).
IfMatch = Annotated[int | None, Header(alias="If-Match", ge=0, le=limits.MAX_INT64,
                                       description="expected version")]
#: A workload id in a path: out of range (or not a number) is a 404, like any id
#: that does not exist (``errors.py``).
WorkloadId = Annotated[int, Path(ge=1, le=limits.MAX_INT64, description="the workload's id")]
#: An id or cursor in a query string.
QueryId = Annotated[int, Query(ge=0, le=limits.MAX_INT64)]
