"""The FastAPI application: ``create_app(settings)``.

Routers are thin: they parse, call one service function inside one
transaction, and wrap the result in the envelope. Errors are mapped in
``errors.py`` only.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from apportion import __version__
from apportion.api import docs, errors
from apportion.api.body_limits import BodyLimits
from apportion.api.deps import RateLimiter
from apportion.api.routers import agent, events, jobcontrol, logs, org, pools, system, workloads
from apportion.api.routers import eta as eta_routes
from apportion.api.routers import usage as usage_routes
from apportion.service.control import ControlPlane
from apportion.service.settings import Settings
from apportion.web import mount as mount_dashboard

_RID_OK = re.compile(r"^[\w.:/+=-]{1,128}$")


class RequestIdMiddleware:
    """Takes ``X-Request-Id`` (or makes one), puts it in scope state and echoes it;
    counts requests for /metrics."""

    def __init__(self, app: ASGIApp, control: ControlPlane) -> None:
        self.app = app
        self.control = control

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        rid = ""
        for key, value in scope.get("headers", []):
            if key == b"x-request-id":
                rid = value.decode("latin-1")
                break
        if not _RID_OK.match(rid):
            rid = uuid.uuid4().hex
        scope.setdefault("state", {})["request_id"] = rid
        status = {"code": 500}

        async def send_wrapper(message: Message) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
                headers = list(message.get("headers", []))
                headers.append((b"x-request-id", rid.encode("latin-1")))
                message["headers"] = headers
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            route = scope.get("route")
            path = getattr(route, "path", "unmatched")
            if scope.get("path", "").startswith("/v1/") and path.startswith("/") and not (
                path.startswith("/v1/")
            ):
                path = "/v1" + path  # routers are mounted under /v1
            self.control.metrics.http.labels(scope.get("method", ""), path,
                                             str(status["code"])).inc()


def create_app(settings: Settings | None = None, control: ControlPlane | None = None) -> FastAPI:
    """The server application. With ``control`` given, its lifecycle is the caller's."""
    owned = control is None
    cp = control or ControlPlane(settings or Settings.from_env())

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if owned:
            cp.start()
        try:
            yield
        finally:
            if owned:
                cp.stop()

    app = FastAPI(
        title="apportion",
        version=__version__,
        summary="GPU workload scheduler: control plane API",
        openapi_url="/openapi.json",
        docs_url=None,
        redoc_url=None,
        lifespan=lifespan,
        responses=_error_responses(),
    )
    app.state.control = cp
    app.state.rate_limiter = RateLimiter(cp.settings.rate_limit, cp.settings.rate_burst,
                                         clock=cp.clock.monotonic)
    errors.install(app)
    for module in (org, workloads, pools, events, agent, logs, jobcontrol, usage_routes,
                   eta_routes):
        app.include_router(module.router, prefix="/v1")
    app.include_router(system.router)
    docs.mount(app)
    mount_dashboard(app, cp.settings.web_secret)
    app.add_middleware(BodyLimits, control=cp)  # inside: it sees the request id
    app.add_middleware(RequestIdMiddleware, control=cp)
    return app


def _error_responses() -> dict[int | str, dict[str, Any]]:
    from apportion.api.schemas import ErrorBody

    text = {400: "Bad request", 401: "Unauthenticated", 403: "Forbidden", 404: "Not found",
            408: "Request body too slow", 409: "Conflict", 413: "Request body too large",
            422: "Validation error", 429: "Rate limited"}
    return {code: {"model": ErrorBody, "description": d} for code, d in text.items()}
