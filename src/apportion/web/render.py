"""Templates, formatting filters, and the one place where errors become pages.

Pages are Jinja2 templates with autoescaping on for every template, so a
team called ``<script>`` prints as text. A page handler returns the
template's context from a read transaction; :func:`page` renders it, or
renders the live region alone when htmx asks for it (``HX-Target: live``).
"""

from __future__ import annotations

import logging
import time
import zlib
from collections.abc import Callable
from datetime import UTC, datetime
from fractions import Fraction
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode

from fastapi import Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates

from apportion import __version__
from apportion.domain.errors import IllegalTransition, NotFound, ValidationError
from apportion.domain.host import format_memory_mib
from apportion.service import audit
from apportion.service.commands import Session as DbSession
from apportion.service.errors import Conflict, PermissionDenied, Unauthenticated
from apportion.web.session import Session, control, request_id

log = logging.getLogger("apportion.web")
HERE = Path(__file__).parent
templates = Jinja2Templates(directory=str(HERE / "templates"))
env = templates.env
env.autoescape = True


@cache
def frac(value: float | int | None) -> str:
    """GPUs as a mixed fraction: 0.25 -> 1/4, 1.5 -> 1 1/2, 2 -> 2."""
    if value is None:
        return "-"
    f = Fraction(value).limit_denominator(1000)
    whole, rest = divmod(f.numerator, f.denominator)
    if rest == 0:
        return str(whole)
    part = f"{rest}/{f.denominator}"
    return f"{whole} {part}" if whole else part


def mib(value: float | int | None) -> str:
    """Host memory as Kubernetes writes it (``domain.host.format_memory_mib``)."""
    return format_memory_mib(value)


def gpu_types(value: str | list[str] | None) -> str:
    """A workload's ``gpu_type``: ``any``, ``h100``, ``v100-16g or v100-32g``."""
    if not value:
        return "any"
    return value if isinstance(value, str) else " or ".join(value)


def ts_of(value: str | float | None) -> float | None:
    if value is None or value == "":
        return None
    if isinstance(value, int | float):
        return float(value)
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def span(seconds: float | None) -> str:
    """A duration in words a person reads at a glance: 45s, 3m 20s, 2h 05m, 3d 4h."""
    if seconds is None:
        return "-"
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m {s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h {s % 3600 // 60:02d}m"
    return f"{s // 86400}d {s % 86400 // 3600}h"


def ago(value: str | float | None) -> str:
    at = ts_of(value)
    return "-" if at is None else span(time.time() - at)


def until(value: str | float | None) -> str:
    """How long until an instant: "in 2h 05m", or "now" when it has come."""
    at = ts_of(value)
    if at is None:
        return "-"
    left = at - time.time()
    return "now" if left < 1 else f"in {span(left)}"


def clock(value: str | float | None) -> str:
    at = ts_of(value)
    return "-" if at is None else datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d %H:%M:%S")


@cache
def team_colour(team: str | None) -> str:
    """A stable colour per team (the same on every page and chart)."""
    if not team:
        return "#9aa0a6"
    hue = zlib.crc32(team.encode()) % 360
    return f"hsl({hue} 55% 55%)"


def number(value: float | int | None, digits: int = 1) -> str:
    if value is None:
        return "-"
    return f"{value:,.{digits}f}".rstrip("0").rstrip(".") if digits else f"{value:,.0f}"


def with_query(request: Request, **changes: Any) -> str:
    """This page's URL with some query parameters changed (None removes one)."""
    params = [(k, v) for k, v in request.query_params.multi_items() if k not in changes]
    for key, value in changes.items():
        if value is None:
            continue
        for v in value if isinstance(value, list | tuple) else [value]:
            params.append((key, str(v)))
    query = urlencode(params)
    return request.url.path + (f"?{query}" if query else "")


env.filters.update(frac=frac, ago=ago, until=until, clock=clock, span=span, colour=team_colour,
                   number=number, mib=mib, gpu_types=gpu_types)
env.globals.update(version=__version__, with_query=with_query)


def is_live_refresh(request: Request) -> bool:
    return request.headers.get("hx-target") == "live"


def render(request: Request, sess: Session | None, name: str, context: dict[str, Any],
           status: int = 200) -> HTMLResponse:
    ctx = {"request": request, "me": sess.ctx.actor if sess else None,
           "csrf": sess.csrf if sess else "", "partial": is_live_refresh(request), **context}
    response = templates.TemplateResponse(request, name, ctx, status_code=status)
    response.headers["Cache-Control"] = "no-store"
    return response


def page(request: Request, sess: Session, name: str,
         build: Callable[[DbSession], dict[str, Any]]) -> Response:
    """Render ``name`` with ``build``'s context, read in one read transaction;
    an error becomes its page (never a stack trace)."""
    try:
        with control(request).db.read() as s:
            context = build(s)
    except Exception as exc:
        return error_page(request, sess, exc)
    return render(request, sess, name, context)


class PageError(Exception):
    """An error page with its own status (e.g. a rejected CSRF token: 403)."""

    def __init__(self, status: int, title: str, message: str) -> None:
        self.status, self.title = status, title
        super().__init__(message)


def error_page(request: Request, sess: Session | None, exc: Exception) -> Response:
    """The HTML twin of api/errors.py: same status codes, denials audited."""
    if isinstance(exc, PageError):
        return render(request, sess, "error.html", {"title": exc.title, "message": str(exc),
                                                    "status": exc.status}, status=exc.status)
    if isinstance(exc, Unauthenticated):
        return to_login(request)
    if isinstance(exc, PermissionDenied):
        try:
            audit.record_denial(control(request).db, sess.ctx if sess else None, exc.action,
                                exc.obj, str(exc))
        except Exception:
            log.exception("could not audit a denial")
        status, title = 403, "Not allowed"
    elif isinstance(exc, NotFound):
        status, title = 404, "Not found"
    elif isinstance(exc, ValidationError):
        status, title = 422, "Invalid input"
    elif isinstance(exc, Conflict | IllegalTransition):
        status, title = 409, "Conflict"
    else:
        log.error("page %s failed (request %s)", request.url.path, request_id(request),
                  exc_info=exc)
        status, title = 500, "Internal error"
        exc = Exception(f"internal error; quote request id {request_id(request)}")
    return render(request, sess, "error.html", {"title": title, "message": str(exc),
                                                "status": status}, status=status)


def to_login(request: Request) -> Response:
    target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    url = "/login?" + urlencode({"next": target})
    if request.headers.get("hx-request"):
        return Response(status_code=204, headers={"HX-Redirect": url})
    return RedirectResponse(url, status_code=303)


async def form_of(request: Request) -> dict[str, str]:
    """An ``application/x-www-form-urlencoded`` body (the last value of each field)."""
    body = (await request.body()).decode("utf-8", errors="replace")
    return dict(parse_qsl(body, keep_blank_values=True))


def as_int(raw: str, field: str, lo: int = 1, hi: int | None = None) -> int:
    """A whole number from a URL or form (PageError 400 naming the field)."""
    try:
        value = int(raw)
    except ValueError:
        raise PageError(400, "Invalid input", f"{field}: {raw!r} is not a whole number") from None
    if value < lo or (hi is not None and value > hi):
        allowed = f"{lo}-{hi}" if hi is not None else f">= {lo}"
        raise PageError(400, "Invalid input", f"{field}: {value} is out of range "
                        f"(allowed: {allowed})")
    return value


def safe_next(target: str | None) -> str:
    """Only a path on this site (no ``//host`` or scheme): no open redirect."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/"
    return target
