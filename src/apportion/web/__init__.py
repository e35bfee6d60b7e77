"""The web dashboard: server-rendered pages (Jinja2 + htmx) in the API server.

Pages call the same service functions as the REST routes, in the same kind
of read and write transactions, with the caller's token; nothing goes over
HTTP to the API. ``mount(app)`` adds them to the FastAPI app.
"""

from __future__ import annotations

from fastapi import FastAPI
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from apportion.web import deps, static
from apportion.web.routes_auth import router as auth_router
from apportion.web.session import Keys
from apportion.web.views_org import router as org_router
from apportion.web.views_pools import router as pools_router
from apportion.web.views_submit import router as submit_router
from apportion.web.views_workloads import router as workloads_router

#: scripts only from this site (no inline script, so injected markup cannot run);
#: inline style attributes are allowed (bars and map cells are sized with them)
CSP = ("default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
       "img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; "
       "base-uri 'none'; form-action 'self'")


class SecurityHeaders:
    """Adds the CSP and framing headers to every HTML page."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_wrapper(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                kinds = [v for k, v in headers if k.lower() == b"content-type"]
                if kinds and kinds[0].startswith(b"text/html"):
                    headers += [(b"content-security-policy", CSP.encode()),
                                (b"x-frame-options", b"DENY"),
                                (b"x-content-type-options", b"nosniff"),
                                (b"referrer-policy", b"same-origin")]
                    message["headers"] = headers
            await send(message)

        await self.app(scope, receive, send_wrapper)


def mount(app: FastAPI, secret: str | None) -> None:
    """Serve the dashboard at ``/`` (its assets under ``/static``)."""
    app.state.web_keys = Keys(secret)
    deps.install(app)
    for router in (auth_router, org_router, workloads_router, submit_router, pools_router):
        app.include_router(router, include_in_schema=False)
    static.mount(app)
    app.add_middleware(SecurityHeaders)
