"""The one place where errors become HTTP responses. Never a stack trace."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import IntegrityError
from starlette.exceptions import HTTPException

from apportion.api.deps import BadParam
from apportion.domain.errors import (
    IllegalTransition,
    NotFound,
    ReservationError,
    ValidationError,
)
from apportion.service import audit
from apportion.service.errors import (
    Conflict,
    IdempotencyMismatch,
    PermissionDenied,
    RateLimited,
    Unauthenticated,
    VersionConflict,
)

log = logging.getLogger("apportion.api")


def request_id(request: Request) -> str:
    return str(request.scope.get("state", {}).get("request_id", ""))


def error_response(
    request: Request, status: int, code: str, message: str,
    details: dict[str, Any] | None = None, headers: dict[str, str] | None = None,
) -> JSONResponse:
    body = {"error": {"code": code, "message": message, "details": details or {}},
            "request_id": request_id(request)}
    return JSONResponse(body, status_code=status, headers=headers)


def _field(loc: tuple[Any, ...] | list[Any]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def _request_validation(request: Request, exc: RequestValidationError) -> JSONResponse:
    errors = []
    in_body = True
    for err in exc.errors():
        loc = list(err.get("loc", ()))
        where = loc.pop(0) if loc else "body"
        in_body = in_body and where == "body"
        if err.get("type") == "json_invalid":
            return error_response(request, 400, "BAD_REQUEST", "the body is not valid JSON",
                                  {"field": "body"})
        field = _field(loc) or str(where)
        allowed = None
        ctx = err.get("ctx") or {}
        if "expected" in ctx:
            allowed = str(ctx["expected"])
        errors.append({"field": field, "message": err.get("msg", "invalid"), "allowed": allowed})
    first = errors[0] if errors else {"field": "", "message": "invalid", "allowed": None}
    message = f"{first['field']}: {first['message']}"
    if first["allowed"]:
        message += f" (allowed: {first['allowed']})"
    details = {"field": first["field"], "allowed": first["allowed"], "errors": errors}
    if in_body:
        return error_response(request, 422, "VALIDATION_ERROR", message, details)
    return error_response(request, 400, "BAD_REQUEST", message, details)


def _validation(request: Request, exc: ValidationError) -> JSONResponse:
    code = "VALIDATION_ERROR"
    if isinstance(exc, ReservationError):
        code = "RESERVATION_INVALID"
    elif isinstance(exc, IdempotencyMismatch):
        code = "IDEMPOTENCY_KEY_REUSED"
    details = {"field": exc.field, "allowed": exc.allowed,
               "errors": [{"field": exc.field, "message": exc.message, "allowed": exc.allowed}]}
    return error_response(request, 422, code, str(exc), details)


def _denied(request: Request, exc: PermissionDenied) -> JSONResponse:
    ctx = getattr(request.state, "ctx", None)
    control = request.app.state.control
    try:
        audit.record_denial(control.db, ctx, exc.action, exc.obj, str(exc))
    except Exception:
        log.exception("could not audit a denial")
    return error_response(request, 403, "FORBIDDEN", str(exc),
                          {"role": exc.role, "required": exc.required, "action": exc.action})


def _unauthenticated(request: Request, exc: Unauthenticated) -> JSONResponse:
    if request.headers.get("authorization"):
        try:
            audit.record_denial(request.app.state.control.db, None, "authenticate",
                                request.url.path, str(exc), request_id=request_id(request))
        except Exception:
            log.exception("could not audit a denial")
    return error_response(request, 401, "UNAUTHENTICATED", str(exc),
                          headers={"WWW-Authenticate": "Bearer"})


def install(app: FastAPI) -> None:
    """Register every handler on ``app``."""

    @app.exception_handler(RequestValidationError)
    async def h_reqval(request: Request, exc: RequestValidationError) -> JSONResponse:
        return _request_validation(request, exc)

    @app.exception_handler(ValidationError)
    async def h_val(request: Request, exc: ValidationError) -> JSONResponse:
        return _validation(request, exc)

    @app.exception_handler(BadParam)
    async def h_param(request: Request, exc: BadParam) -> JSONResponse:
        return error_response(request, 400, "BAD_REQUEST", str(exc),
                              {"field": exc.field, "allowed": exc.allowed})

    @app.exception_handler(NotFound)
    async def h_nf(request: Request, exc: NotFound) -> JSONResponse:
        return error_response(request, 404, "NOT_FOUND", str(exc),
                              {"kind": exc.kind, "name": exc.name})

    @app.exception_handler(VersionConflict)
    async def h_ver(request: Request, exc: VersionConflict) -> JSONResponse:
        return error_response(request, 409, "VERSION_CONFLICT", str(exc), exc.details)

    @app.exception_handler(Conflict)
    async def h_conf(request: Request, exc: Conflict) -> JSONResponse:
        return error_response(request, 409, "CONFLICT", str(exc), exc.details)

    @app.exception_handler(IllegalTransition)
    async def h_ill(request: Request, exc: IllegalTransition) -> JSONResponse:
        return error_response(request, 409, "CONFLICT", str(exc),
                              {"current": exc.current, "target": exc.target})

    @app.exception_handler(IntegrityError)
    async def h_int(request: Request, exc: IntegrityError) -> JSONResponse:
        return error_response(request, 409, "CONFLICT",
                              "the change conflicts with another one; retry")

    @app.exception_handler(Unauthenticated)
    async def h_unauth(request: Request, exc: Unauthenticated) -> JSONResponse:
        return _unauthenticated(request, exc)

    @app.exception_handler(PermissionDenied)
    async def h_denied(request: Request, exc: PermissionDenied) -> JSONResponse:
        return _denied(request, exc)

    @app.exception_handler(RateLimited)
    async def h_rate(request: Request, exc: RateLimited) -> JSONResponse:
        return error_response(request, 429, "RATE_LIMITED", str(exc),
                              {"retry_after": exc.retry_after},
                              headers={"Retry-After": str(max(1, round(exc.retry_after)))})

    @app.exception_handler(HTTPException)
    async def h_http(request: Request, exc: HTTPException) -> JSONResponse:
        code = {404: "NOT_FOUND", 405: "METHOD_NOT_ALLOWED"}.get(exc.status_code, "BAD_REQUEST")
        return error_response(request, exc.status_code, code, str(exc.detail))

    @app.exception_handler(Exception)
    async def h_any(request: Request, exc: Exception) -> JSONResponse:
        log.error("request %s failed", request_id(request), exc_info=exc)
        return error_response(request, 500, "INTERNAL",
                              f"internal error; quote request id {request_id(request)}")
