"""``/docs``: Swagger UI served from the package, so the API browser works on an
air-gapped cluster (no CDN). The files are vendored unchanged from the
``swagger-ui-dist`` npm tarball; ``static/VENDOR.json`` records version,
licence and sha256 of each."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

ROOT = Path(__file__).parent / "static"
PREFIX = "/docs/static"


def mount(app: FastAPI) -> None:
    """Add ``GET /docs`` and its assets under ``/docs/static/`` to ``app``."""
    app.mount(PREFIX, StaticFiles(directory=str(ROOT)), name="docs-static")

    @app.get("/docs", include_in_schema=False)
    def swagger_ui() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=app.openapi_url or "/openapi.json",
            title=f"{app.title} — API",
            swagger_js_url=f"{PREFIX}/swagger-ui-bundle.js",
            swagger_css_url=f"{PREFIX}/swagger-ui.css",
            swagger_favicon_url=f"{PREFIX}/favicon-32x32.png",
        )
