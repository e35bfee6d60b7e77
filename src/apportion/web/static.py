"""Static assets: served with a content hash in their URL and cached for a year.

``asset_url("app.js")`` is ``/static/app.js?h=<first 12 hex of its sha256>``,
so a changed file gets a new URL and a cached one never goes stale.
"""

from __future__ import annotations

import hashlib
from functools import cache
from pathlib import Path

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles
from starlette.types import Receive, Scope, Send

from apportion.web.render import env

ROOT = Path(__file__).parent / "static"
LONG_CACHE = "public, max-age=31536000, immutable"


@cache
def asset_url(name: str) -> str:
    digest = hashlib.sha256((ROOT / name).read_bytes()).hexdigest()[:12]
    return f"/static/{name}?h={digest}"


class CachedStatic(StaticFiles):
    """StaticFiles with long cache headers and no directory listings."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def send_cached(message: dict) -> None:  # type: ignore[type-arg]
            if message["type"] == "http.response.start" and message["status"] == 200:
                headers = list(message.get("headers", []))
                headers.append((b"cache-control", LONG_CACHE.encode()))
                headers.append((b"x-content-type-options", b"nosniff"))
                message["headers"] = headers
            await send(message)

        await super().__call__(scope, receive, send_cached)


def mount(app: FastAPI) -> None:
    app.mount("/static", CachedStatic(directory=str(ROOT)), name="static")


env.globals["asset"] = asset_url
